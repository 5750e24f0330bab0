"""One implementation: ``raidlab replay`` against a served degraded RAID-5 counts exactly the
hits, misses, evictions and per-member reads that counting mode counts for the same workload
and config (LRU and VDF-LRU, block split, one request in flight)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import raidlab

RAIDLAB = [sys.executable, "-m", "raidlab.cli"]

CONFIG = """
[workload]
block_size = 4096
[workload.synthetic]
kind = "zipf"
keys = 20000
alpha = 0.8
requests = 12000
seed = 7
[cache]
policy = "{policy}"
capacity_blocks = 256
[array]
level = "raid5"
layout = "left-symmetric"
stripe_unit = 65536
disks = 5
failed = [1]
[run]
mode = "count"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAIDLAB, *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("policy", ["lru", "vdf-lru"])
def test_replay_counts_what_counting_mode_counts(tmp_path: Path, policy: str) -> None:
    cfg = tmp_path / "w.toml"
    cfg.write_text(CONFIG.format(policy=policy))
    arr = tmp_path / "arr"
    r = cli("array", "create", str(arr), "--level", "raid5", "--disks", "5", "--chunk", "64KiB", "--size", "32MiB")
    assert r.returncode == 0, r.stderr
    port = free_port()
    proc = subprocess.Popen(
        [*RAIDLAB, "serve", str(arr), "--listen", f"127.0.0.1:{port}", "--cache", policy, "--cache-mib", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "accepting connections" in line, line
        assert cli("ctl", str(arr), "fail", "1").returncode == 0
        rep = cli("replay", f"nbd://127.0.0.1:{port}", str(cfg), "--qd", "1", "--json")
        assert rep.returncode == 0, rep.stderr
        assert json.loads(rep.stdout)["errors"] == 0
        st = json.loads(cli("ctl", str(arr), "status", "--json").stdout)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()
    assert proc.returncode == 0
    m = raidlab.run(cfg, threads=1).runs[0].metrics
    cache = st["cache"]
    assert (cache["hits"], cache["misses"], cache["evictions"]) == (m["hits"], m["misses"], m["evictions"])
    assert [x["read_blocks"] for x in st["members"]] == m["disk_reads"]
    assert m["disk_reads"][1] == 0 and m["hits"] > 0
