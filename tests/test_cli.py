"""The `raidlab` command: tables, --json, exit code 2 on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from raidlab.cli import main

EXP = """
[workload.synthetic]
kind = "zipf"
keys = 2000
requests = 20000
seed = 5
[cache]
policy = "lru"
capacity_blocks = 200
[array]
level = "raid5"
disks = 5
failed = [1]
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "exp.toml"
    p.write_text(text)
    return p


def test_run_json_contract(tmp_path, capsys) -> None:
    assert main(["run", str(write(tmp_path, EXP)), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"runs", "version"}
    (out,) = data["runs"]
    assert set(out) >= {"name", "metrics", "config"}
    for k in ["requests", "block_requests", "hits", "misses", "hit_ratio", "rgr", "disk_reads", "disk_writes", "wall_s"]:
        assert k in out["metrics"]
    assert out["config"]["cache"]["policy"] == "lru"
    assert out["metrics"]["requests"] == 20000


def test_runs_print_one_row_each(tmp_path, capsys) -> None:
    text = EXP + '\n[[runs]]\ncache.policy = "lru"\n[[runs]]\ncache.policy = "vdf-lru"\n'
    assert main(["run", str(write(tmp_path, text))]) == 0
    out = capsys.readouterr().out
    assert "policy" in out and "vdf-lru" in out and "cache.policy" not in out  # names keep what differs


@pytest.mark.parametrize(
    "bad",
    [
        EXP.replace('"lru"', '"nope"'),
        EXP.replace("disks = 5", "disks = 2"),
        EXP.replace("failed = [1]", "failed = [0, 1]"),
        EXP + "\n[cache.extra]\n",
        "this is = = not toml",
    ],
)
def test_bad_input_exits_2_with_a_message(tmp_path, capsys, bad: str) -> None:
    assert main(["run", str(write(tmp_path, bad))]) == 2
    err = capsys.readouterr().err
    assert "error:" in err


def test_missing_file_exits_2(tmp_path, capsys) -> None:
    assert main(["run", str(tmp_path / "absent.toml")]) == 2
    assert "absent.toml" in capsys.readouterr().err


def test_console_script_exit_code(tmp_path) -> None:
    bad = write(tmp_path, EXP.replace("disks = 5", "disks = 2"))
    proc = subprocess.run([sys.executable, "-m", "raidlab.cli", "run", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "array" in proc.stderr


def test_trace_stats_json(tmp_path, capsys) -> None:
    p = tmp_path / "t.mqsim.txt"
    # 8 KiB read at 0 s, 4 KiB write at 1 s, 8 KiB read of the same blocks at 2.5 s
    p.write_text("0 0 0 16 1\n1000000000 0 64 8 0\n2500000000 0 0 16 1\n")
    assert main(["trace", "stats", str(p), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["format"], s["requests"], s["reads"], s["writes"]) == ("mqsim", 3, 2, 1)
    assert s["read_share"] == pytest.approx(2 / 3)
    assert s["footprint_blocks"] == 3
    assert s["span_s"] == pytest.approx(2.5)
    assert dict((upper, n) for upper, n in s["size_histogram"]) == {4096: 1, 8192: 2}


def test_trace_stats_table_and_bad_file(tmp_path, capsys) -> None:
    p = tmp_path / "t.mqsim.txt"
    p.write_text("0 0 0 16 1\n")
    assert main(["trace", "stats", str(p)]) == 0
    assert "footprint" in capsys.readouterr().out
    bad = tmp_path / "junk.bin"
    bad.write_bytes(b"\x00\x01garbage that is no trace format\xff" * 3)
    assert main(["trace", "stats", str(bad)]) == 2
    assert "junk.bin" in capsys.readouterr().err


def test_trace_stats_real_trace(traces, capsys) -> None:
    assert main(["trace", "stats", str(traces / "msr" / "hm0-sample.msr.csv"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["format"], s["requests"]) == ("msr", 1000)
