"""VDF reproduction (Figures 3-5 of the paper) in counting mode.

Asserted as directions and bands: on the calibrated WebSearch generator VDF lowers RGR in most
(disks, cache size) cells, VDF-LRU by >= 15% and VDF-LFU by >= 20% at its best. The real
traces' numbers are reported by `raidlab reproduce vdf-rgr`, and here only checked for
direction where the trace is present.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import raidlab
from raidlab.report import pivot, reductions
from raidlab.reproduce import plan_file, reproduce

REPO = Path(__file__).resolve().parent.parent
SPEC = {"rows": ["tags.workload", "array.disks", "cache.capacity_fraction"], "columns": "cache.policy", "value": "rgr"}


def grid(path: Path, skip_traces: bool) -> tuple[object, object]:
    plan = plan_file(path, skip_traces)
    assert plan.trees, plan.skipped
    res = raidlab.run({"runs": plan.trees})
    table = pivot(res.to_frame(), SPEC)
    return table, reductions(table, [["lru", "vdf-lru"], ["lfu", "vdf-lfu"]])


@pytest.fixture(scope="module")
def synthetic() -> tuple[object, object]:
    return grid(REPO / "experiments" / "vdf-rgr.toml", skip_traces=True)


def test_vdf_lowers_rgr_in_most_cells(synthetic) -> None:
    _, red = synthetic
    for col in red.columns:
        improved = (red[col] > 0).mean()
        assert improved >= 0.75, (col, red[col].to_dict())


def test_vdf_best_reductions_reach_the_paper_band(synthetic) -> None:
    _, red = synthetic
    assert red["vdf-lru vs lru"].max() >= 0.15, red["vdf-lru vs lru"].max()
    assert red["vdf-lfu vs lfu"].max() >= 0.20, red["vdf-lfu vs lfu"].max()
    # no cell makes things much worse
    assert red.min().min() > -0.05


def test_rgr_falls_with_cache_size(synthetic) -> None:
    table, _ = synthetic
    for (_, disks), sub in table.groupby(level=[0, 1]):
        for col in sub.columns:
            values = list(sub[col])
            assert values == sorted(values, reverse=True), (disks, col, values)


def test_real_traces_direction(traces) -> None:
    table, red = grid(REPO / "experiments" / "vdf-rgr-traces.toml", skip_traces=False)
    # VDF never makes RGR meaningfully worse on the real traces either
    assert red.min().min() > -0.05, red.min().to_dict()
    assert (red > 0).mean().min() >= 0.5


def test_report_is_written(tmp_path) -> None:
    path = reproduce("vdf-rgr", experiments_dir=REPO / "experiments", out_dir=tmp_path, skip_traces=True, threads=2)
    assert path.name == "report.html" and path.exists()
    assert (tmp_path / "vdf-rgr" / "vdf-rgr.csv").exists()
    assert list((tmp_path / "vdf-rgr").glob("*.png"))
    assert "relative reduction" in path.read_text()
