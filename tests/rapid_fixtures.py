"""Shared inputs of the RAPID-Cache tests: the bad-input base config and the reduced-grid
curves of an experiment file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import raidlab
from raidlab import rapid
from raidlab.reproduce import plan_file

REPO = Path(__file__).resolve().parent.parent

# A tiny timed run without a write cache: the bad-input cases add their own tables.
BASE = """[workload]
ops = "all"
block_size = 8192
[workload.synthetic]
kind = "bursty"
requests = 100
[array]
level = "raid5"
disks = 5
stripe_unit = 32768
[run]
mode = "timed"
"""
WC = "[write_cache]\ncapacity_pages = 2048\n"


def curves(
    experiment: str, preset: str, rates: list[int], requests: int, keep: Callable[[dict[str, Any]], bool], per_rate: int
) -> dict[str, dict[int, raidlab.Run]]:
    """``experiments/EXPERIMENT.toml``'s runs of one trace at ``rates`` that ``keep`` selects
    (``per_rate`` of them at each rate), shortened to ``requests``; per architecture and rate."""
    plan = plan_file(REPO / "experiments" / f"{experiment}.toml", skip_traces=True)
    trees = [
        t
        for t in plan.trees
        if t["workload"]["synthetic"]["preset"] == preset
        and t["workload"]["synthetic"]["rate_iops"] in rates
        and t["run"].get("seed", 1) == 1  # the first of the experiment's seeds
        and keep(t)
    ]
    assert len(trees) == per_rate * len(rates)
    for t in trees:
        t["workload"]["synthetic"]["requests"] = requests
    result = raidlab.run({"runs": trees})
    out: dict[str, dict[int, raidlab.Run]] = {}
    for t, r in zip(trees, result.runs):
        out.setdefault(t["tags"]["arch"], {})[t["workload"]["synthetic"]["rate_iops"]] = r
    return out


def max_throughput(by_rate: dict[int, raidlab.Run]) -> float:
    """The rate at which one architecture's curve crosses a 20 ms mean response."""
    rates = sorted(by_rate)
    return rapid.crossing([float(r) for r in rates], [by_rate[r].metrics["latency_mean_ms"] for r in rates], 20.0)
