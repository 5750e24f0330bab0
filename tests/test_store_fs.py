"""Real file systems on the store: ext4 and XFS made on the export through nbdfuse and a loop
device, a workload that fsyncs, the server SIGKILLed in each write-cache mode (write-through,
mirror, log) while healthy, degraded or rebuilding; then e2fsck / XFS log replay and
xfs_repair must be clean and every fsync'd file intact (one or two runs of a few cells of
``scripts/fs_crash_soak.py``; ``make soak`` runs 50 per cell).

Skipped with a message where the machine cannot do it: not root, no /dev/fuse, no loop
devices, nbdfuse (libnbd-bin), e2fsprogs or xfsprogs missing."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import fs_crash_soak as fcs  # noqa: E402

# Members in tmpfs where there is one (as the script does): the array's fdatasyncs are then
# cheap and the workload gets through hundreds of fsyncs before the kill.
BASE = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


def can_run(fs: str) -> None:
    try:
        fcs.preflight(fs)
    except fcs.Skip as e:
        pytest.skip(str(e))


def run_cell(fs: str, mode: str, event: str, runs: int, seed: int) -> fcs.Cell:
    can_run(fs)
    try:
        return fcs.run_cell(BASE, fs, mode, event, runs, seed, keep_none=True)
    except fcs.Skip as e:
        pytest.skip(str(e))


# Every mode and every event, over the two file systems: six cells, nine kills.
@pytest.mark.parametrize(
    ("fs", "mode", "event", "runs"),
    [
        ("ext4", "write-through", "kill", 2),
        ("ext4", "mirror", "fail", 2),
        ("ext4", "log", "rebuild", 1),
        ("xfs", "write-through", "rebuild", 1),
        ("xfs", "mirror", "kill", 2),
        ("xfs", "log", "fail", 1),
    ],
)
def test_fsyncd_files_survive_a_sigkill(fs: str, mode: str, event: str, runs: int) -> None:
    cell = run_cell(fs, mode, event, runs, seed=3)
    assert cell.problems == [], "\n".join(cell.problems[:10])
    assert cell.runs == cell.kills == runs, cell
    # The kill waits for a few durable operations (then a random delay), so files are checked.
    assert cell.files >= runs and cell.ops >= 4 * runs, cell
    assert cell.fsck_clean == runs, cell
    assert (cell.lost, cell.corrupt, cell.resurrected, cell.mismatched_rows) == (0, 0, 0, 0), cell
    if event == "fail":
        assert cell.degraded_at_kill == runs, cell
    if event == "rebuild":
        assert cell.rebuilding_at_kill == runs, cell


@pytest.mark.parametrize("fs", ["ext4-defaults", "xfs-defaults"])
def test_mkfs_with_its_defaults(fs: str) -> None:
    """mkfs.ext4 with no options on a 288 MiB export picks 1 KiB blocks; mkfs.xfs with no
    options takes the loop device's 512-byte sectors. Both send requests below 4 KiB, which
    the store serves only once it advertises a smaller minimum block size (read-modify-write
    below 4 KiB): until then this skips, saying so."""
    cell = run_cell(fs, "write-through", "kill", 1, seed=5)
    assert cell.problems == [], "\n".join(cell.problems[:10])
    assert cell.runs == 1 and cell.files > 0 and cell.fsck_clean == 1, cell


def test_teardown_leaves_nothing_behind(tmp_path: Path) -> None:
    """A file system mounted on the stack when the server dies and the test fails: the rig's
    close() still kills nbdfuse and the workload, unmounts, and frees the loop device."""
    can_run("ext4")
    rig = fcs.Rig(Path(tempfile.mkdtemp(prefix="fs-teardown-", dir=BASE)))
    try:
        runner = fcs.CellRunner(rig, "ext4", "write-through", "kill", seed=1)
        srv = rig.start_server(runner.arr, [])
        try:
            att = rig.attach(srv.uri, "t")
        except fcs.Skip as e:
            pytest.skip(str(e))
        assert fcs.run([*fcs.MKFS["ext4"], att.loop]).returncode == 0
        assert rig.mount(att, runner.mnt).returncode == 0
        worker = rig.spawn([sys.executable, fcs.__file__, "--workload", str(runner.mnt / "w"), str(tmp_path / "j"), "1"], tmp_path / "w.out")
        fcs.wait_for(lambda: (tmp_path / "j").exists() and "D create" in (tmp_path / "j").read_text(), 30, "the workload's first file")
        rig.kill_server(srv)
        loop = att.loop
    finally:
        left = rig.close()
    assert left == []
    assert worker.poll() is not None
    assert fcs.mounts_under(rig.base) == []
    assert fcs.loops_backed_by(rig.base) == []
    assert not os.path.exists(f"/sys/block/{Path(loop).name}/loop/backing_file") or str(rig.base) not in Path(f"/sys/block/{Path(loop).name}/loop/backing_file").read_text()
    import shutil

    shutil.rmtree(rig.base)


def test_the_checker_catches_lost_corrupt_and_resurrected_files(tmp_path: Path) -> None:
    """The ledger and verify() on a plain directory (no server, no root): the workload's own
    result passes; a missing, a changed and a resurrected file are each reported; an
    operation in flight may show its old or its new state."""
    root = tmp_path / "mnt"
    root.mkdir()
    fcs.workload(root / "r1w0", tmp_path / "j", seed=4, max_files=20, seconds=0.5)
    led = fcs.Ledger()
    led.read_journal(tmp_path / "j", "r1w0")
    live = sorted(k for k, v in led.durable.items() if v is not None)
    gone = sorted(k for k, v in led.durable.items() if v is None)
    assert len(live) >= 3 and gone, (len(live), len(gone))
    c = fcs.verify(root, led, "clean")
    assert (c.files, c.lost, c.corrupt, c.resurrected, c.problems) == (len(live), 0, 0, 0, [])
    # An interrupted replace of live[2]: the new version is acceptable, so is the old one.
    ver, _size = led.durable[live[2]]  # type: ignore[misc]
    (root / live[2]).write_bytes(fcs.content(live[2].split("/", 1)[1], ver + 1, 100))
    led.maybe[live[2]] = [(ver + 1, 100)]
    (root / live[0]).unlink()
    data = bytearray((root / live[1]).read_bytes())
    data[-1] ^= 1
    (root / live[1]).write_bytes(bytes(data))
    (root / gone[0]).write_bytes(b"back")
    c = fcs.verify(root, led, "tampered")
    assert (c.lost, c.corrupt, c.resurrected) == (1, 1, 1), c.problems
    assert led.durable[live[2]] == (ver + 1, 100), "the ledger adopts what the interrupted replace left"


def test_a_store_that_forgets_its_write_cache_is_caught() -> None:
    """The end-to-end checks are sensitive: with the write cache's backup deleted after the
    kill (a planted bug: acknowledged writes lost), fsck or the file check must complain."""
    can_run("ext4")
    try:
        cell = fcs.run_cell(BASE, "ext4", "mirror", "kill", 1, seed=3, keep_none=True, plant_lost_cache=True)
    except fcs.Skip as e:
        pytest.skip(str(e))
    assert cell.problems, cell
    assert cell.lost + cell.corrupt + cell.fsck_repaired + cell.fsck_dirty > 0 or any("cannot be recovered" in p for p in cell.problems), cell.problems
