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
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"metrics", "config", "version"}
    for k in ["requests", "block_requests", "hits", "misses", "hit_ratio", "rgr", "disk_reads", "disk_writes", "wall_s"]:
        assert k in out["metrics"]
    assert out["config"]["cache"]["policy"] == "lru"
    assert out["metrics"]["requests"] == 20000


def test_runs_print_one_row_each(tmp_path, capsys) -> None:
    text = EXP + '\n[[runs]]\ncache.policy = "lru"\n[[runs]]\ncache.policy = "vdf-lru"\n'
    assert main(["run", str(write(tmp_path, text))]) == 0
    out = capsys.readouterr().out
    assert "cache.policy=lru" in out and "cache.policy=vdf-lru" in out


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
