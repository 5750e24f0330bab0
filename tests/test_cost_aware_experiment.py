"""experiments/cost-aware.toml in miniature: every run of the file, shrunk to a few thousand
requests and two seeds, keeps the bounds' directions (OPT has the fewest misses and the
cost-aware optimum the lowest RGR of every policy on the same run), and the report's gap
table has a row per group and pair."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import raidlab
from raidlab import api
from raidlab.cost_aware import gap_table, mean_ci

EXPERIMENT = Path(__file__).resolve().parents[1] / "experiments" / "cost-aware.toml"


def test_mean_ci_worked_example() -> None:
    # 1, 2, 3: mean 2, sample sd 1, t(0.975, 2 df) = 4.303: half-width 4.303 / sqrt(3).
    mean, half = mean_ci([1.0, 2.0, 3.0])
    assert mean == 2.0
    assert half == pytest.approx(4.303 / math.sqrt(3), rel=1e-12)
    assert mean_ci([0.5]) == (0.5, None)


def _tiny_runs() -> tuple[dict, list[dict]]:
    import tomllib

    spec = tomllib.loads(EXPERIMENT.read_text())["report"]
    rows = []
    for _, tree in api.load(EXPERIMENT):
        if tree["run"]["seed"] > 2:
            continue
        synth = tree["workload"]["synthetic"]
        synth["requests"] = 3000 if synth["kind"] == "zipf" else 800
        if synth["kind"] == "zipf":
            synth["keys"] = 2000
        m = raidlab.run(tree).metrics
        rows.append(
            {
                "tags.workload": tree["tags"]["workload"],
                "tags.array": tree["tags"]["array"],
                "run.seed": tree["run"]["seed"],
                "cache.policy": tree["cache"]["policy"],
                "rgr": m["rgr"],
                "misses": m["misses"],
            }
        )
    return spec, rows


def test_tiny_cost_aware_experiment_keeps_the_bounds() -> None:
    pd = pytest.importorskip("pandas")
    spec, rows = _tiny_runs()
    frame = pd.DataFrame(rows)
    groups = frame.groupby(["tags.workload", "tags.array", "run.seed"])
    assert len(groups) == 6 * 2
    for key, g in groups:
        by = g.set_index("cache.policy")
        assert len(by) == 16, key
        assert (by.loc["opt", "misses"] <= by["misses"]).all(), key
        assert (by.loc["opt-cost", "rgr"] <= by["rgr"]).all(), key
        # The optimum is strictly better than plain LRU: a degraded array gives it room.
        assert by.loc["opt-cost", "rgr"] < by.loc["lru", "rgr"], key
    table = gap_table(frame, spec)
    assert len(table) == 6 * len(spec["gap_pairs"])
    assert set(table["seeds"]) == {2}
    # A variant cannot beat the optimum: no more than the whole gap is closed.
    assert (table["gap closed"] <= 1.0 + 1e-12).all()
