"""RAPID-Cache reproductions on reduced grids (experiments/rapid-*.toml) and the backup's bad
input through the CLI.

The full grids (200,000 requests per point, 16 rates, three write-cache sizes) are run by
``raidlab reproduce rapid``; their tables are in docs/rapid.md.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import raidlab
import rapid_fixtures
from conftest import assert_config_error
from rapid_fixtures import BASE as RAPID_BASE
from rapid_fixtures import WC, max_throughput
from raidlab import rapid
from raidlab.reproduce import plan_file

REPO = Path(__file__).resolve().parent.parent


def curves(preset: str, rates: list[int], requests: int) -> dict[str, dict[int, raidlab.Run]]:
    """The 64/16 configuration of rapid-response.toml for one trace, per architecture and rate."""
    return rapid_fixtures.curves("rapid-response", preset, rates, requests, lambda t: t["write_cache"]["capacity_pages"] == 2048, 3)


@pytest.mark.parametrize(
    ("preset", "rates"),
    [("synthetic-a", [400, 1000]), ("synthetic-b", [400, 1000]), ("synthetic-c", [200, 400])],
)
def test_physical_rapid_is_within_5_percent_of_the_baseline_before_saturation(preset: str, rates: list[int]) -> None:
    """Figs 7-9 at rates below the baseline's knee, 40,000 requests per point."""
    runs = curves(preset, rates, 40_000)
    for rate in rates:
        base = runs["baseline"][rate].metrics
        phys = runs["physical"][rate].metrics
        logi = runs["logical"][rate].metrics
        assert base["latency_mean_ms"] < 20.0, (preset, rate, base["latency_mean_ms"])
        rel = phys["latency_mean_ms"] / base["latency_mean_ms"] - 1.0
        assert abs(rel) <= 0.05, (preset, rate, rel)
        # The logical cache disk competes with RAID I/O: never faster than the baseline.
        assert logi["latency_mean_ms"] >= base["latency_mean_ms"] * 0.999, (preset, rate)
        # Every write was backed up, and the backup never read its disk.
        assert phys["bk_page_writes"] == phys["wc_page_writes"]
        assert phys["bk_disk_reads"] == 0 and logi["bk_disk_reads"] == 0
        assert base["bk_kind"] == "dual"
        if preset == "synthetic-a":
            # A's write working set outgrows the 1 MB NVRAM LRU (B's fits in it).
            assert phys["bk_log_writes"] > 0


def test_max_throughput_orders_logical_below_physical_and_baseline() -> None:
    """Table 4 on synthetic-A 64/16 with a coarse grid, 30,000 requests per point."""
    rates = [600, 1000, 1400, 1800]
    runs = curves("synthetic-a", rates, 30_000)
    mt = {arch: max_throughput(by) for arch, by in runs.items()}
    assert mt["physical"] == pytest.approx(mt["baseline"], rel=0.05), mt
    assert mt["logical"] <= mt["baseline"] * 1.001, mt
    assert 600 < mt["baseline"] < 1800, mt


def test_crossing_interpolates() -> None:
    assert rapid.crossing([100.0, 200.0, 300.0], [1.0, 10.0, 30.0], 20.0) == pytest.approx(250.0)
    assert rapid.crossing([100.0, 200.0], [1.0, 2.0], 20.0) == 200.0


BASE = RAPID_BASE + WC


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ("kind = \"quad\"\n", "backup.kind"),
        ("nvram_kib = 256\n", "backup.nvram_kib"),
        ("segment_kib = 2048\nnvram_kib = 16384\ndisk_mib = 1\n", "backup.disk_mib"),
        ("disk_mib = 10\n", "backup.disk_mib"),
        ("segment_kib = 3\n", "backup.segment_kib"),
        ("cache_disk = \"spare\"\n", "backup.cache_disk"),
        ("kind = \"dual\"\nsegment_buffers = 2\n", "backup.segment_buffers"),
    ],
)
def test_bad_backup_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str, key: str
) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(BASE + "[backup]\n" + table)
    assert_config_error(cfg, key, capsys)


def test_backup_cache_alone_saturates_between_the_rates_the_paper_reports() -> None:
    """Fig 12 on a reduced grid: behind a primary far larger than synthetic-D's working set the
    dual-NVRAM baseline never saturates, while the physical cache disk limits RAPID somewhere
    between 1,200 and 2,600 writes/s (the paper: about 1,400-1,600), with no garbage
    collection below the knee."""
    plan = plan_file(REPO / "experiments" / "rapid-backup.toml", skip_traces=True)
    rates = [1200, 2600]
    trees = [
        t
        for t in plan.trees
        if t["tags"]["arch"] in ("baseline", "segment-128KiB") and t["workload"]["synthetic"]["rate_iops"] == 1200 and t["run"]["seed"] == 1
    ]
    assert len(trees) == 2
    grid = []
    for t in trees:
        for rate in rates:
            u = {**t, "workload": {**t["workload"], "synthetic": {**t["workload"]["synthetic"], "rate_iops": rate, "requests": 80_000}}}
            grid.append(u)
    result = raidlab.run({"runs": grid})
    by = {(t["tags"]["arch"], t["workload"]["synthetic"]["rate_iops"]): r.metrics for t, r in zip(grid, result.runs)}
    for rate in rates:
        assert by[("baseline", rate)]["latency_mean_ms"] < 1.0, rate
    low, high = by[("segment-128KiB", 1200)], by[("segment-128KiB", 2600)]
    assert low["latency_mean_ms"] < 2.0, low["latency_mean_ms"]
    assert high["latency_mean_ms"] > 20.0, high["latency_mean_ms"]
    assert low["bk_gc_runs"] == 0 and low["bk_disk_reads"] == 0
    assert low["bk_log_writes"] > 0 and high["bk_stalled_writes"] > 0
    frame = pd.DataFrame([{"tags.arch": a, rapid.RATE: r, **m} for (a, r), m in by.items()])
    costs = rapid.backup_costs(frame, [])
    assert list(costs["tags.arch"]) == ["segment-128KiB"]
    assert int(costs["gc_runs_ok"].iloc[0]) == 0
    # Collection starts only past the knee, where the stalled controller has no idle time to
    # destage and the live log outgrows the free segments.
    assert high["bk_gc_runs"] > 0
    assert float(costs["first_gc_rate"].iloc[0]) == 2600.0
    assert int(costs["gc_runs"].iloc[0]) == high["bk_gc_runs"]
