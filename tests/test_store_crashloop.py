"""Real crashes: ``raidlab serve`` killed with SIGKILL at random moments under a verifying
writer, restarted, resynced and read back (a few rounds of ``scripts/crashloop.py``; the
script runs 50)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import crashloop  # noqa: E402


@pytest.mark.parametrize(("level", "disks", "runs"), [("raid5", 5, 4), ("raid6", 6, 3), ("raid10", 4, 2)])
def test_sigkill_loses_no_acknowledged_write(tmp_path: Path, level: str, disks: int, runs: int) -> None:
    # Members in tmpfs where there is one (as the script does): on a disk-backed file system
    # every newly dirtied bitmap region costs fdatasyncs and few writes fit before the kill.
    shm = Path("/dev/shm")
    tot = crashloop.crashloop(runs, level, disks, seed=7, qd=8, size="2MiB", root=shm if shm.is_dir() else tmp_path)
    assert tot.runs == runs and tot.writes_acked >= 10 * runs and tot.in_flight_at_kill > 0, tot
    assert tot.problems == [], tot.problems[:5]
    assert (tot.lost, tot.corrupt, tot.mismatched_rows) == (0, 0, 0)


@pytest.mark.parametrize(
    ("level", "disks", "runs", "backup", "destage", "fail_slot"),
    [("raid5", 5, 3, "mirror", "stow", None), ("raid6", 6, 3, "log", "lrw", None), ("raid5", 5, 2, "mirror", "lrw", 1), ("raid5", 4, 2, "log", "stow", 2)],
)
def test_sigkill_with_a_write_cache_loses_no_acknowledged_write(
    tmp_path: Path, level: str, disks: int, runs: int, backup: str, destage: str, fail_slot: int | None
) -> None:
    # Writes answered from the cache (in its backup, not yet on the members) must be
    # replayed at the restart; with a failed member the page images close the write hole.
    shm = Path("/dev/shm")
    extra = ["--write-cache-mib", "1", "--backup", backup, "--destage", destage]
    tot = crashloop.crashloop(
        runs, level, disks, seed=11, qd=8, size="2MiB", root=shm if shm.is_dir() else tmp_path, serve_args=extra, fail_slot=fail_slot
    )
    assert tot.runs == runs and tot.writes_acked >= 10 * runs and tot.in_flight_at_kill > 0, tot
    assert tot.problems == [], tot.problems[:5]
    assert (tot.lost, tot.corrupt, tot.mismatched_rows) == (0, 0, 0)


@pytest.mark.parametrize("executor", ["dor,buffers=8", "runs"])
def test_sigkill_during_a_rebuild_loses_no_acknowledged_write(tmp_path: Path, executor: str) -> None:
    """Killed while a member is rebuilt onto a spare (paced to 16-32 KiB/s, so every kill
    falls inside it): each restart resumes the rebuild from its checkpoint, and every
    acknowledged write reads back, whichever executor rebuilds (the disk-oriented one reads
    a row's survivors without holding the row)."""
    shm = Path("/dev/shm")
    extra = ["--rebuild-executor", executor, "--rebuild-run-kib", "16", "--rebuild-min-kib", "16", "--rebuild-max-kib", "32"]
    tot = crashloop.crashloop(
        3, "raid5", 5, seed=13, qd=8, size="2MiB", root=shm if shm.is_dir() else tmp_path, serve_args=extra, fail_slot=2, spares=1
    )
    assert tot.runs == 3 and tot.writes_acked >= 30 and tot.in_flight_at_kill > 0, tot
    assert tot.rebuilds_resumed == 3, tot
    assert tot.problems == [], tot.problems[:5]
    assert (tot.lost, tot.corrupt, tot.mismatched_rows) == (0, 0, 0)
