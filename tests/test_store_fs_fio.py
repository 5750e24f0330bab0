"""fio with verify on a real file system on the store, while a member fails and the array
rebuilds onto a spare added under load: ext4 and XFS through nbdfuse and a loop device, the
write-back cache with a mirror backup. fio checks every block it wrote (crc32c, during the
run and at its end); then the file system must be clean (``e2fsck -fn`` / ``xfs_repair -n``)
and ``ctl check`` find every row consistent.

Skipped with a message where the machine cannot do it (not root, no FUSE or loop devices,
nbdfuse, fio or the file-system tools missing)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import fs_crash_soak as fcs  # noqa: E402

BASE = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


def fio_job(directory: Path, size_mib: int) -> list[str]:
    return [
        "fio",
        "--name=verify",
        f"--directory={directory}",
        "--rw=randwrite",
        "--bs=4k",
        f"--size={size_mib}M",
        "--ioengine=psync",
        "--fsync=32",
        "--verify=crc32c",
        "--verify_backlog=512",
        "--do_verify=1",
        "--verify_fatal=1",
        "--random_generator=tausworthe64",
        "--randseed=7",
        "--output-format=json",
    ]


@pytest.mark.parametrize("fs", ["ext4", "xfs"])
def test_fio_verify_through_a_failure_and_a_rebuild(fs: str) -> None:
    try:
        fcs.preflight(fs)
    except fcs.Skip as e:
        pytest.skip(str(e))
    if shutil.which("fio") is None:
        pytest.skip("fio is missing (Debian package fio)")
    rig = fcs.Rig(Path(tempfile.mkdtemp(prefix=f"fio-{fs}-", dir=BASE)))
    fio: subprocess.Popen[str] | None = None
    try:
        runner = fcs.CellRunner(rig, fs, "mirror", "rebuild", seed=11)
        srv = rig.start_server(runner.arr, [*fcs.MODES["mirror"], "--rebuild-max-kib", "8192"])
        try:
            att = rig.attach(srv.uri, f"fio-{fs}")
        except fcs.Skip as e:
            pytest.skip(str(e))
        mk = fcs.run([*fcs.MKFS[fs], att.loop], 300)
        assert mk.returncode == 0, mk.stderr
        assert rig.mount(att, runner.mnt).returncode == 0
        fio = subprocess.Popen(fio_job(runner.mnt, 24), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Under load: a member fails, then a spare is added and the rebuild runs.
        time.sleep(1.0)
        fcs.ctl(runner.arr, "fail", "1")
        assert fcs.status(runner.arr)["state"] == "degraded"
        time.sleep(0.5)
        fcs.ctl(runner.arr, "add-spare", str(runner.new_spare()))
        out, err = fio.communicate(timeout=600)
        assert fio.returncode == 0, f"fio exit {fio.returncode}: {err[-2000:]}"
        job = json.loads(out[out.index("{") :])["jobs"][0]
        assert job["error"] == 0, job["error"]
        assert job["write"]["io_bytes"] >= 24 << 20, job["write"]["io_bytes"]
        assert job["read"]["io_bytes"] >= 24 << 20, "fio verified what it wrote"
        fcs.wait_for(lambda: fcs.status(runner.arr)["state"] == "active", 300, "the rebuild onto the spare")
        assert rig.umount(att).returncode == 0
        if fs == "ext4":
            chk = fcs.run(["e2fsck", "-fn", att.loop], 300)
        else:
            chk = fcs.run(["xfs_repair", "-n", att.loop], 300)
        assert chk.returncode == 0, chk.stdout[-2000:] + chk.stderr[-2000:]
        report = fcs.ctl(runner.arr, "check", "--wait", timeout=300)
        assert report.get("mismatches") == 0, report
    finally:
        if fio is not None and fio.poll() is None:
            fio.kill()
            fio.wait(30)
        left = rig.close()
        shutil.rmtree(rig.base, ignore_errors=True)
    assert left == []
