"""VDF reproduction (Figures 3-5 of the paper) in counting mode.

Asserted as directions and bands measured here (see docs/vdf.md for the tables beside the
paper's): VDF lowers RGR in most (disks, cache size) cells; its gains grow with the number
of disks; on the calibrated WebSearch generator the headline reduction is small because
compulsory misses dominate RGR, while of the avoidable part VDF-LRU removes >= 15% and
VDF-LFU >= 20% at best; on the IRM Zipf workload both reach >= 15%. The real traces are
checked for direction only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import raidlab
from raidlab.report import floor_of, pivot, reductions
from raidlab.reproduce import plan_file, reproduce

REPO = Path(__file__).resolve().parent.parent
SPEC = {"rows": ["tags.workload", "array.disks", "cache.capacity_fraction"], "columns": "cache.policy", "value": "rgr"}


WS, ZIPF = "websearch (synthetic)", "zipf 0.9 (IRM)"


@pytest.fixture(scope="module")
def synthetic() -> tuple[object, object, object]:
    plan = plan_file(REPO / "experiments" / "vdf-rgr.toml", skip_traces=True)
    frame = raidlab.run({"runs": plan.trees}).to_frame()
    table = pivot(frame, SPEC)
    pairs = [["lru", "vdf-lru"], ["lfu", "vdf-lfu"]]
    avoid = reductions(table, pairs, floor_of(frame, table, {**SPEC, "floor": "rgr_floor"}))
    return table, reductions(table, pairs), avoid


def test_vdf_lowers_rgr_in_most_cells(synthetic) -> None:
    _, red, _ = synthetic
    assert (red["vdf-lru vs lru"] > 0).mean() >= 0.95
    assert (red["vdf-lfu vs lfu"] > 0).mean() >= 0.75
    # where VDF-LFU loses (the smallest caches) it loses little
    assert red.min().min() > -0.02


def test_websearch_generator_bands(synthetic) -> None:
    """Measured: best headline reduction ~5.5% for both (compulsory misses are ~3/4 of RGR on
    1 M requests over 60 GB); of the avoidable part VDF removes up to ~38% / ~41%."""
    _, red, avoid = synthetic
    ws, ws_avoid = red.loc[WS], avoid.loc[WS]
    assert 0.03 <= ws["vdf-lru vs lru"].max() <= 0.15
    assert 0.03 <= ws["vdf-lfu vs lfu"].max() <= 0.15
    assert ws_avoid["vdf-lru vs lru"].max() >= 0.15
    assert ws_avoid["vdf-lfu vs lfu"].max() >= 0.20


def test_irm_workload_bands(synthetic) -> None:
    _, red, _ = synthetic
    z = red.loc[ZIPF]
    assert z["vdf-lru vs lru"].max() >= 0.15
    assert z["vdf-lfu vs lfu"].max() >= 0.15


def test_gains_grow_with_the_number_of_disks(synthetic) -> None:
    """The paper's trend: with the same cache, VDF helps more on wider arrays."""
    _, red, _ = synthetic
    for wl in (WS, ZIPF):
        for col in red.columns:
            by_disks = red.loc[wl][col].groupby(level=0).max()
            assert by_disks.loc[8] > by_disks.loc[5], (wl, col, by_disks.to_dict())


def test_rgr_falls_with_cache_size_and_stays_above_the_floor(synthetic) -> None:
    table, _, _ = synthetic
    for (_, disks), sub in table.groupby(level=[0, 1]):
        for col in sub.columns:
            values = list(sub[col])
            assert values == sorted(values, reverse=True), (disks, col, values)


def test_real_traces_direction(traces) -> None:
    plan = plan_file(REPO / "experiments" / "vdf-rgr-traces.toml", skip_traces=False)
    table = pivot(raidlab.run({"runs": plan.trees}).to_frame(), SPEC)
    red = reductions(table, [["lru", "vdf-lru"], ["lfu", "vdf-lfu"]])
    # VDF never makes RGR meaningfully worse on the real traces either
    assert red.min().min() > -0.05, red.min().to_dict()


def test_report_is_written(tmp_path) -> None:
    exp = tmp_path / "exp"
    exp.mkdir()
    text = (REPO / "experiments" / "vdf-rgr.toml").read_text()
    text = text.replace("requests = 1000000", "requests = 20000").replace("requests = 5000000", "requests = 20000")
    (exp / "tiny.toml").write_text(text)
    path = reproduce("tiny", experiments_dir=exp, out_dir=tmp_path / "out", skip_traces=True, threads=2)
    assert path.name == "report.html" and path.exists()
    assert (tmp_path / "out" / "tiny" / "tiny.csv").exists()
    assert list((tmp_path / "out" / "tiny").glob("*.png"))
    page = path.read_text()
    assert "relative reduction" in page and "avoidable part" in page
