"""The RAPID-Cache paper's bursty synthetic workload (`kind = "bursty"`) end to end: counting and
timed runs, determinism, burstiness visible in latency, and typed errors."""

from __future__ import annotations

from pathlib import Path

import pytest

import raidlab
from conftest import assert_config_error


def config(preset: str, requests: int, **synthetic: object) -> dict:
    synth = {"kind": "bursty", "preset": preset, "requests": requests, "seed": 4, "space_gib": 1}
    synth.update(synthetic)
    return {
        "workload": {"ops": "all", "block_size": 8192, "synthetic": synth},
        "cache": {"policy": "lru", "capacity_blocks": 512, "writes": "access"},
        "array": {"level": "raid5", "disks": 8, "stripe_unit": 32768},
    }


def test_counting_presets_are_deterministic_and_shaped() -> None:
    b = raidlab.run(config("synthetic-b", 20_000)).metrics
    assert b["requests"] == 20_000
    assert b == {**raidlab.run(config("synthetic-b", 20_000)).metrics, "wall_s": b["wall_s"]}
    # A 4 MB cache holds B's 1 MB working set (17% of requests miss it) but not much of A's
    # 32 MB one.
    a = raidlab.run(config("synthetic-a", 20_000)).metrics
    assert 0.78 < b["hit_ratio"] < 0.85
    assert a["hit_ratio"] < 0.2


def test_bursts_raise_the_tail_over_poisson_at_the_same_rate() -> None:
    timed = {"mode": "timed"}
    disk = {"model": "constant", "service_ms": 4}
    cfg = config("synthetic-c", 6000, rate_iops=300, history_share=0.0)
    cfg.update(run=timed, disk=disk)
    bursty = raidlab.run(cfg).metrics
    poisson_cfg = config("synthetic-c", 6000, rate_iops=300, history_share=0.0)
    poisson_cfg.update(run={**timed, "iops": 300}, disk=disk)
    poisson = raidlab.run(poisson_cfg).metrics
    assert bursty["completed"] == poisson["completed"] == 6000
    # Same mean rate (within sampling), but bursts at 10x the background rate queue up.
    assert bursty["iops"] == pytest.approx(poisson["iops"], rel=0.1)
    assert bursty["latency_p99_ms"] > 1.5 * poisson["latency_p99_ms"]


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ('preset = "synthetic-x"', "workload.synthetic.preset"),
        ("read_ratio = 1.5", "workload.synthetic.read_ratio"),
        ("gap_len = 0", "workload.synthetic.gap_len"),
        ('distance = "uniform"\ndistance_mean = 0.3', "workload.synthetic.distance_mean"),
    ],
)
def test_bad_parameters_exit_2_naming_the_key(tmp_path: Path, capsys, line: str, key: str) -> None:
    p = tmp_path / "b.toml"
    p.write_text(
        f'[workload.synthetic]\nkind = "bursty"\n{line}\n[cache]\npolicy = "lru"\ncapacity_blocks = 10\n'
    )
    assert_config_error(p, key, capsys, api=raidlab.load)


def test_overlay_multiplies_the_rate() -> None:
    # The papers raise load by replaying several days of a trace at once: N parts, N times the
    # rate, N times the requests.
    part = {"synthetic": {"kind": "bursty", "preset": "synthetic-a", "requests": 2000, "rate_iops": 100, "space_gib": 1}}
    base = config("synthetic-a", 2000, rate_iops=100)
    base.update(run={"mode": "timed"}, disk={"model": "constant", "service_ms": 1})
    one = raidlab.run(base).metrics
    three_cfg = dict(base)
    three_cfg["workload"] = {"ops": "all", "block_size": 8192, "overlay": [part, part, part]}
    three = raidlab.run(three_cfg).metrics
    assert three["requests"] == 3 * one["requests"] == 6000
    assert three["iops"] == pytest.approx(3 * one["iops"], rel=0.15)
