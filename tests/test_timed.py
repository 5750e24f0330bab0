"""Timed mode through the Python API and the CLI: drivers, time series, ramp, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import raidlab
from raidlab.cli import main

BASE = """
[workload.synthetic]
kind = "websearch"
space_gib = 1
requests = 20000
seed = 3
[cache]
policy = "lru"
capacity_blocks = 5000
[array]
disks = 5
stripe_unit = 65536
[run]
mode = "timed"
interval_s = 2
[disk]
model = "constant"
service_ms = 2
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "timed.toml"
    p.write_text(text)
    return p


def test_open_loop_series_and_failure(tmp_path: Path) -> None:
    text = BASE + "[[events]]\nat_s = 20\nfail = 3\n"
    result = raidlab.run(write(tmp_path, text))
    run = result.runs[0]
    m = run.metrics
    assert m["mode"] == "timed"
    assert m["completed"] == m["requests"]
    assert m["latency_p50_ms"] <= m["latency_p99_ms"] <= m["latency_max_ms"]
    assert m["failures"] == [{"at_s": 20.0, "disk": 3}]
    frame = run.series_frame()
    assert list(frame.columns[:4]) == ["t_s", "iops", "mean_ms", "outstanding"]
    assert {f"util_{d}" for d in range(5)} <= set(frame.columns)
    # Interval ends are multiples of interval_s (the last one may be partial).
    assert frame["t_s"].iloc[0] == 2.0
    # Disk 3 serves nothing after its failure.
    after = frame[frame["t_s"] > 22]
    assert (after["util_3"] == 0).all() and (after["util_0"] > 0).any()
    stacked = result.series()
    assert (stacked["name"] == run.name).all()


def test_closed_loop_is_deterministic(tmp_path: Path) -> None:
    text = BASE.replace('interval_s = 2', 'interval_s = 2\ndriver = "closed"\noutstanding = 8')
    a = raidlab.run(write(tmp_path, text)).runs[0]
    b = raidlab.run(write(tmp_path, text)).runs[0]
    drop = {"wall_s", "requests_per_wall_s", "events_per_wall_s"}
    assert {k: v for k, v in a.metrics.items() if k not in drop} == {
        k: v for k, v in b.metrics.items() if k not in drop
    }
    assert a.series == b.series


def test_ramp_cli_json_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = BASE.replace("requests = 20000", "requests = 1000000").replace(
        'interval_s = 2', 'driver = "ramp"\nlevels_iops = [200, 800, 5000]\nlevel_s = 5\nwarmup_s = 1'
    )
    path = write(tmp_path, text)
    assert main(["run", str(path), "--json"]) == 0
    (out,) = json.loads(capsys.readouterr().out)["runs"]
    ramp = out["ramp"]
    assert [p["target_iops"] for p in ramp][:2] == [200, 800]
    assert ramp[0]["mean_ms"] < ramp[1]["mean_ms"]
    assert ramp[-1]["saturated"] and not ramp[0]["saturated"]
    assert "series" in out and "t_s" in out["series"]
    assert main(["run", str(path)]) == 0
    table = capsys.readouterr().out
    assert "ramp: run0" in table and "p99 ms" in table


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (("[[events]]", "[[events]]\nat_s = 5\nfail = 9\n"), "events[0].fail"),
        (("[[events]]", "[[events]]\nat_s = 5\nfail = 1\n[[events]]\nat_s = 4\nfail = 2\n"), "events[1].at_s"),
        (("[[events]]", "[[events]]\nat_s = 5\nfail = 1\n[[events]]\nat_s = 6\nfail = 2\n"), "events[1].fail"),
        (('service_ms = 2', 'service_ms = 0'), "disk.service_ms"),
        (('service_ms = 2', 'service_ms = -1'), "disk.service_ms"),
        (('mode = "timed"', 'mode = "timed"\ndriver = "closed"\niops = 4'), "run.iops"),
        (('model = "constant"\nservice_ms = 2', 'preset = "floppy"'), "disk.preset"),
        (
            ('model = "constant"\nservice_ms = 2', 'preset = "hp_c3323a"\nzones = [[0, 1000, 120], [900, 2981, 100]]'),
            "disk.zones[1]",
        ),
        (('model = "constant"\nservice_ms = 2', 'preset = "atlas10k"\nrpm = 0'), "disk.rpm"),
        (('model = "constant"\nservice_ms = 2', 'preset = "atlas10k"\nhead_switch_ms = -0.1'), "disk.head_switch_ms"),
        (('model = "constant"\nservice_ms = 2', 'preset = "atlas10k"\nchannels = 4'), "disk.channels"),
        (('mode = "timed"', 'mode = "timed"\ndriver = "warp"'), "run.driver"),
    ],
)
def test_bad_timed_configs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], edit, key) -> None:
    old, new = edit
    text = BASE + "[[events]]" if old == "[[events]]" else BASE
    text = text.replace(old, new)
    assert main(["run", str(write(tmp_path, text))]) == 2
    assert key in capsys.readouterr().err


def test_workload_past_the_disk_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = BASE.replace("space_gib = 1", "space_gib = 20").replace(
        'model = "constant"\nservice_ms = 2', 'preset = "hp_c3323a"'
    )
    assert main(["run", str(write(tmp_path, text))]) == 2
    err = capsys.readouterr().err
    assert "disk" in err and "larger drive" in err


def test_clook_beats_fcfs_on_mechanical_disks(tmp_path: Path) -> None:
    """End to end: a closed loop with deep queues on cheetah9lp disks; C-LOOK moves the arm
    less and serves more than FCFS, and NCQ (shortest positioning time in the drive) more
    still."""
    base = BASE.replace('model = "constant"\nservice_ms = 2', 'preset = "cheetah9lp"').replace(
        "interval_s = 2", 'interval_s = 2\ndriver = "closed"\noutstanding = 64'
    )
    rates = {}
    seeks = {}
    for name, extra in [("fcfs", 'queue = "fcfs"'), ("clook", 'queue = "clook"'), ("ncq", 'queue = "fcfs"\nncq = 32')]:
        m = raidlab.run(write(tmp_path, base + extra + "\n")).metrics
        rates[name] = m["iops"]
        seeks[name] = sum(m["disk_seek_cylinders_mean"]) / len(m["disk_seek_cylinders_mean"])
    assert seeks["clook"] < 0.5 * seeks["fcfs"], seeks
    assert rates["clook"] > 1.1 * rates["fcfs"], rates
    assert rates["ncq"] > rates["clook"], rates
