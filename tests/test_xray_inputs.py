"""Two-level runs from the outside: the web-log converter on a generated log, bad input as
typed errors (exit code 2 on the command line), the run table and the time series."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import raidlab
from raidlab.cli import main

FILES_RUN = {
    "workload": {"files": {"kind": "random", "files": 64, "file_blocks": 8, "reads": 400, "seed": 2}},
    "host": {"fs_cache_blocks": 200},
    "cache": {"policy": "xray", "capacity_blocks": 100},
}


def clf_log(path: Path, requests: int, seed: int = 1, bad_every: int = 0) -> None:
    """A small Common Log Format log: 40 paths with Zipf-like popularity, mostly 200s with
    the file's size (sometimes fewer bytes: a cut transfer), some 304s, and optionally a
    malformed line every ``bad_every`` lines."""
    rng = random.Random(seed)
    sizes = {f"/img/{i}.gif": rng.randint(1, 60_000) for i in range(40)}
    paths = list(sizes)
    weights = [1 / (i + 1) for i in range(len(paths))]
    lines = []
    for n in range(requests):
        p = rng.choices(paths, weights)[0]
        t = n // 3
        stamp = f"[01/May/1998:{10 + t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d} +0000]"
        r = rng.random()
        status, size = (304, "-") if r < 0.1 else (200, str(sizes[p] if r > 0.2 else rng.randint(1, sizes[p])))
        lines.append(f'host{n % 7} - - {stamp} "GET {p} HTTP/1.0" {status} {size}')
        if bad_every and n % bad_every == bad_every - 1:
            lines.append("garbage without a date")
    path.write_text("\n".join(lines) + "\n")


def weblog_run(log: Path, **files: object) -> dict:
    return {
        "workload": {"files": {"kind": "weblog", "log": str(log), **files}},
        "host": {"fs_cache_blocks": 150},
        "cache": {"policy": "demote", "capacity_blocks": 100},
    }


def test_weblog_replays_whole_file_reads_and_counts_bad_lines(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    clf_log(log, 3000, bad_every=500)
    m = raidlab.run(weblog_run(log)).metrics
    assert m["mode"] == "hierarchy"
    assert m["weblog_malformed_lines"] == 6
    assert m["weblog_first_malformed_line"] == 501
    assert 200 < m["weblog_no_data_requests"] < 400
    assert m["file_reads"] == 3000 - m["weblog_no_data_requests"]
    assert 0.0 < m["hit_ratio"] < 1.0
    with pytest.raises(raidlab.TraceError) as e:
        raidlab.run(weblog_run(log, on_malformed="fail"))
    assert e.value.line == 501


def test_weblog_idle_time_feeds_xray_placement(tmp_path: Path) -> None:
    # Three requests a second leave idle time; squeezing the log 1000x leaves almost none.
    log = tmp_path / "access.log"
    clf_log(log, 3000)
    cfg = weblog_run(log)
    cfg["cache"] = {"policy": "xray", "capacity_blocks": 100, "xray": {"placement": "idle"}}
    slow = raidlab.run(cfg).metrics
    cfg["workload"]["files"]["time_scale"] = 0.001
    fast = raidlab.run(cfg).metrics
    assert slow["placement_reads"] > 2 * fast["placement_reads"]
    assert slow["hit_ratio"] > fast["hit_ratio"]


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"workload": {"files": {"file_blocks": 0}}}, "workload.files.file_blocks"),
        ({"host": {"fs_cache_blocks": 10_000}}, "host.fs_cache_blocks"),
        ({"host": {"atime_granularity_s": 0}}, "host.atime_granularity_s"),
        ({"host": {"resize": [[100, 0]]}}, "host.resize[0]"),
        ({"cache": {"xray": {"placement": "sometimes"}}}, "cache.xray.placement"),
        ({"workload": {"files": {"log": "x.log"}}}, "workload.files.log"),
    ],
)
def test_bad_input_is_a_config_error_naming_the_key(change: dict, key: str) -> None:
    cfg = json.loads(json.dumps(FILES_RUN))
    for table, sub in change.items():
        for k, v in sub.items():
            if isinstance(v, dict):
                cfg[table].setdefault(k, {}).update(v)
            else:
                cfg[table][k] = v
    with pytest.raises(raidlab.ConfigError) as e:
        raidlab.run(cfg)
    assert e.value.key == key, str(e.value)


def test_cli_table_series_and_exit_codes(tmp_path: Path, capsys) -> None:
    exp = tmp_path / "exp.toml"
    exp.write_text(
        '[workload.files]\nkind = "zipf"\nfiles = 64\nfile_blocks = 8\nreads = 400\n'
        "[host]\nfs_cache_blocks = 200\n[cache]\npolicy = \"xray\"\ncapacity_blocks = 100\n"
    )
    assert main(["run", str(exp)]) == 0
    out = capsys.readouterr().out
    assert "array hit ratio" in out and "placements" in out
    assert main(["run", str(exp), "--json"]) == 0
    (data,) = json.loads(capsys.readouterr().out)["runs"]
    assert {"predicted_blocks", "actual_blocks", "t_s"} <= set(data["series"])
    exp.write_text(exp.read_text().replace("file_blocks = 8", "file_blocks = 0"))
    assert main(["run", str(exp)]) == 2
    assert "workload.files.file_blocks" in capsys.readouterr().err
