"""Resume: a sweep killed with SIGKILL at random points, resumed each time, ends with every
run exactly once and the metrics of an uninterrupted sweep; its workers do not outlive it."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from raidlab import store
from raidlab.sweep import sweep
from sweep_fixtures import BASE, experiment, stored

# 2 x 3 x 4 = 24 runs of 100k requests (~40 ms each): long enough to be killed in the middle.
GRID = BASE.format(policy="lru", capacity=50, disks=5) + """
[sweep]
"array.disks" = [5, 6]
"cache.policy" = ["lru", "arc", "vdf-lru"]
"cache.capacity_blocks" = [50, 100, 200, 400]
"""
KILLS = 3
DEADLINE_S = 60


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose (its parent, the killed sweep, is gone).
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def test_sigkill_and_resume(tmp_path: Path) -> None:
    exp = experiment(tmp_path, GRID, requests=100_000)
    reference = sweep(exp, workers=2, out=tmp_path / "reference")
    total = len(reference)
    assert total == 24 and (reference["status"] == "done").all()

    out = tmp_path / "out"
    rng = random.Random(8)
    cmd = [sys.executable, "-m", "raidlab.cli", "sweep", str(exp), "--workers", "2", "--out", str(out)]
    orphans: list[int] = []
    kills = 0
    for _ in range(KILLS):
        before = len(store.finished(out))
        # Kill with at least three runs left: with one or two left, both workers could finish
        # them during the random delay below, and the resume would have nothing to do.
        if before >= total - 3:
            break
        target = rng.randint(before + 1, total - 3)  # kill after some, not all, runs finished
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = time.monotonic()
        while len(store.finished(out)) < target and proc.poll() is None:
            assert time.monotonic() - started < DEADLINE_S
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.05))  # anywhere, including in the middle of a write
        workers = children(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += proc.returncode == -signal.SIGKILL
        orphans += workers
    assert kills >= 2, "the sweep finished before it could be killed: make the runs longer"
    assert 0 < len(store.finished(out)) < total

    # The last resume runs uninterrupted.
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE_S)
    assert done.returncode == 0, done.stderr
    assert f"{total} runs: {total} done, 0 failed" in done.stdout

    # Workers of killed sweeps noticed and exited.
    deadline = time.monotonic() + 5
    while any(alive(p) for p in orphans) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in orphans if alive(p)]

    counts = store.query(out, "SELECT run_id, count(*) AS n FROM runs GROUP BY run_id")
    assert len(counts) == total and (counts["n"] == 1).all()
    assert set(counts["run_id"]) == set(reference["run_id"])
    assert stored(out) == stored(tmp_path / "reference")
