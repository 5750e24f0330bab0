"""STOW reproductions on reduced grids (experiments/stow-*.toml), the write cache through the
API, and its bad-input errors through the CLI.

The full grids (paper protocol: 5 minutes of warm-up and 5 measured per ramp level) are run
by ``raidlab reproduce stow``; their tables are in docs/write-cache.md.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import raidlab
from conftest import assert_config_error
from raidlab import wcache
from raidlab.reproduce import plan_file

REPO = Path(__file__).resolve().parent.parent


def by_order(trees: list[dict], result: raidlab.Result) -> dict[str, raidlab.Run]:
    return {t["write_cache"]["order"]: r for t, r in zip(trees, result.runs)}


def test_fig7_stow_occupancy_is_steady_and_never_full() -> None:
    """Full backend at 1200 IOPS (24 BSUs), 400 s instead of 900 (statistics after 150 s)."""
    plan = plan_file(REPO / "experiments" / "stow-occupancy.toml", skip_traces=True)
    trees = [t for t in plan.trees if t["workload"]["synthetic"]["backend"] == "full" and t["run"]["seed"] == 1]
    assert len(trees) == 4
    for t in trees:
        t["workload"]["synthetic"]["requests"] = 1200 * 400
    runs = by_order(trees, raidlab.run({"runs": trees}))
    stats = {o: wcache.occupancy_stats(r.series, 150.0, r.metrics["sim_s"]) for o, r in runs.items()}
    stow, wow, cscan = stats["stow"], stats["wow"], stats["cscan"]
    # With one BSU per 50 IOPS this load is past WOW's and CSCAN's knees: they sit at full
    # (as the paper's CSCAN and LRW did); a pinned occupancy has no swing, so an order is
    # either full most of the time or swings at least twice as much as STOW.
    assert wow["full_frac"] >= 0.5 and cscan["full_frac"] >= 0.5, stats
    for s in stats.values():
        assert s["full_frac"] >= 0.5 or s is stow or s["occ_std"] >= 2 * stow["occ_std"], stats
    assert stow["full_frac"] == 0.0, stats
    assert stow["full_frac"] <= min(s["full_frac"] for s in stats.values()), stats
    # Every order works near the low threshold (80%) or above, never beyond the capacity.
    for s in stats.values():
        assert 0.79 <= s["occ_mean"] <= 1.0
    # The series line up with the run's own time series.
    for r in runs.values():
        assert len(r.series["wc_occupancy"]) == len(r.series["t_s"])


def test_fig8_stow_has_the_highest_iops_at_20ms_in_full_backend_raid5_90_80() -> None:
    """Levels of 30 s warm-up + 60 s measured instead of 300 + 300, one seed, levels by 100."""
    plan = plan_file(REPO / "experiments" / "stow-ramp.toml", skip_traces=True)
    trees = [
        t
        for t in plan.trees
        if t["tags"]["cell"] == "full RAID-5 90/80" and t["run"]["seed"] == 1
    ]
    assert len(trees) == 4
    for t in trees:
        t["run"].update(level_s=60, warmup_s=30, levels_iops=[float(x) for x in range(100, 2401, 100)])
    runs = by_order(trees, raidlab.run({"runs": trees}))
    at20 = {o: wcache.run_iops_at(r, 20.0) for o, r in runs.items()}
    assert all(not math.isnan(v) for v in at20.values()), at20
    assert max(at20, key=lambda o: at20[o]) == "stow", at20
    assert at20["stow"] >= 1.15 * at20["wow"], at20
    assert at20["stow"] >= 1.5 * at20["cscan"], at20
    # Below the knee every order answers from the cache: writes cost the hit time.
    for r in runs.values():
        assert r.ramp[0]["mean_ms"] < 5.0


def test_iops_at_interpolates_only_between_levels_that_kept_up() -> None:
    pts = [
        {"iops": 100.0, "target_iops": 100.0, "mean_ms": 2.0, "saturated": False},
        {"iops": 200.0, "target_iops": 200.0, "mean_ms": 10.0, "saturated": False},
        {"iops": 300.0, "target_iops": 300.0, "mean_ms": 30.0, "saturated": False},
        {"iops": 400.0, "target_iops": 400.0, "mean_ms": 5.0, "saturated": False},
    ]
    # Between 200 (10 ms) and 300 (30 ms): halfway.
    assert wcache.iops_at(pts, 20.0) == 250.0
    pts[2]["saturated"] = True
    assert wcache.iops_at(pts, 20.0) == 200.0
    pts[2]["saturated"] = False
    # A level that served less than 90% of its target did not keep up: no interpolation to it.
    for p, target in zip(pts, (100.0, 200.0, 300.0, 400.0)):
        p["target_iops"] = target
    assert wcache.iops_at(pts, 20.0) == 250.0
    pts[2]["iops"] = 260.0
    assert wcache.iops_at(pts, 20.0) == 200.0
    pts[2]["iops"] = 300.0
    # A queue still growing at the end of the level's window: 300 IOPS x 30 ms = 9 in flight
    # when steady; 40 is more than 2 x 9 + 10 and more than at the window's start.
    windows = [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0)]
    series = {"t_s": [1.0, 2.0, 3.0, 4.0], "outstanding": [1, 2, 40, 1]}
    assert wcache.iops_at(pts, 20.0, series, windows) == 200.0
    series["outstanding"][2] = 25
    assert wcache.iops_at(pts, 20.0, series, windows) == 250.0
    assert wcache.level_windows({"run": {"warmup_s": 30, "level_s": 60}}, 2) == [(30.0, 90.0), (120.0, 180.0)]
    assert math.isnan(wcache.iops_at([{"iops": 5.0, "target_iops": 5.0, "mean_ms": 50.0, "saturated": False}], 20.0))
    assert wcache.ms_at_load([{"target_iops": 750.0, "mean_ms": 3.0, "saturated": False}], 750.0) == 3.0


BASE = """
[workload]
ops = "all"
[workload.synthetic]
kind = "spc1"
iops = 400
requests = 20000
backend = "partial"
seed = 5
[array]
level = "raid5"
disks = 5
stripe_unit = 65536
[run]
mode = "timed"
interval_s = 5
[disk]
preset = "ibm40k1052"
"""


def test_write_cache_metrics_series_and_determinism(tmp_path: Path) -> None:
    cfg = tmp_path / "wc.toml"
    cfg.write_text(BASE + "[write_cache]\ncapacity_pages = 2048\norder = \"wow\"\nhigh = 70\nlow = 40\n")
    a = raidlab.run(cfg).runs[0]
    b = raidlab.run(cfg).runs[0]
    m = a.metrics
    assert m["wc_order"] == "wow"
    assert m["wc_page_writes"] == m["wc_overwrite_hits"] + m["wc_destaged_pages"]
    assert m["wc_left_pages"] == 0
    assert 0 < m["wc_overwrite_hit_ratio"] < 1 and 0 < m["wc_stripe_hit_ratio"] < 1
    assert m["wc_occupancy_max"] <= 1.0
    assert m["wc_disk_ops_per_destaged_page"] > 0
    frame = a.series_frame()
    assert {"wc_occupancy", "wc_full", "wc_destage_pages_per_s", "wc_inflight"} <= set(frame.columns)
    assert (frame["wc_occupancy"] <= 1.0).all()
    drop = {"wall_s", "requests_per_wall_s", "events_per_wall_s"}
    assert {k: v for k, v in m.items() if k not in drop} == {k: v for k, v in b.metrics.items() if k not in drop}
    assert a.series == b.series


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ("capacity_pages = 4096\nhigh = 80\nlow = 80\n", "write_cache.high"),
        ("capacity_pages = 4096\nhigh = 120\n", "write_cache.high"),
        ("capacity_pages = 4096\nlow = 0\n", "write_cache.low"),
        ("capacity_pages = 4096\nrate = \"fixed\"\nthreshold = 101\n", "write_cache.threshold"),
        ("capacity_pages = 4096\ngroup_bytes = 1024\n", "write_cache.group_bytes"),
        ("capacity_pages = 32\n", "write_cache.capacity_pages"),
        ("capacity_pages = 4096\norder = \"fifo\"\n", "write_cache.order"),
    ],
)
def test_bad_write_cache_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str, key: str
) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(BASE + "[write_cache]\n" + table)
    assert_config_error(cfg, key, capsys)


def test_reproduce_derives_columns_and_plots_from_the_store(tmp_path: Path) -> None:
    """``raidlab reproduce`` runs through the sweep store; the write cache's derived columns
    (occupancy statistics) and its occupancy plot come from the runs read back from it."""
    from rich.console import Console

    from raidlab.reproduce import reproduce

    exp = tmp_path / "experiments"
    exp.mkdir()
    text = (REPO / "experiments" / "stow-occupancy.toml").read_text()
    for big in ("requests = 1080000", "requests = 1800000"):
        text = text.replace(big, "requests = 4000")
    text = text.replace("occupancy_skip_s = 300", "occupancy_skip_s = 0.5")
    text = text.replace('"run.seed" = [1, 2, 3, 4, 5]', '"run.seed" = [1, 2]')
    (exp / "tiny.toml").write_text(text)
    report = reproduce("tiny", experiments_dir=exp, out_dir=tmp_path / "out", threads=1, console=Console(quiet=True))
    out = report.parent
    assert (out / "tiny-series.png").stat().st_size > 0
    import pandas as pd

    frame = pd.read_csv(out / "tiny.csv")
    assert len(frame) == 16  # 2 backends x 4 orders x 2 seeds
    assert frame["occ_mean"].between(0.0, 1.0).all()
    assert (frame["full_frac"] >= 0.0).all()
