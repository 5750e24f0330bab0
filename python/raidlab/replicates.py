"""Runs repeated over seeds: per-cell means with 95% confidence intervals.

A reproduction sweeps ``run.seed`` (synthetic workloads take their seed from it unless they
set their own), so every cell of a pivot table holds one run per seed. Tables show the mean
and the half-width of its 95% confidence interval (Student's t, ``n - 1`` degrees of
freedom); relative gains are computed per seed, on runs that share the seed (so they are
paired), and then averaged the same way.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

# Two-sided 95% quantiles of Student's t by degrees of freedom; beyond the table the next
# lower entry (slightly wide, never narrow), and 1.96 past 120.
T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    30: 2.042,
    60: 2.000,
    120: 1.980,
}

# The config key that names a run's replicate.
SEED_KEY = "run.seed"


def t975(df: int) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df > 120:
        return 1.96
    return T975[max(k for k in T975 if k <= df)]


def ci95(values: Sequence[float]) -> tuple[float, float]:
    """Mean and half-width of the 95% confidence interval of ``values`` (NaN values
    dropped); the half-width is NaN with fewer than two values."""
    xs = [float(v) for v in values if v == v]
    if not xs:
        return math.nan, math.nan
    mean = sum(xs) / len(xs)
    if len(xs) < 2:
        return mean, math.nan
    var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)
    return mean, t975(len(xs) - 1) * math.sqrt(var / len(xs))


def seed_key(frame: Any, spec: dict[str, Any]) -> str | None:
    """The column naming each run's replicate when the runs of a cell differ in it
    (``[report] seeds``, default ``run.seed``), else ``None``."""
    key = spec.get("seeds", SEED_KEY)
    if key in frame.columns and frame[key].nunique() > 1:
        return str(key)
    return None


def per_seed(frame: Any, key: str | None, make: Callable[[Any], Any]) -> tuple[Any, Any, int]:
    """``make`` (a function of a frame returning a table) applied to each seed's runs, then
    the cell-wise mean and 95% half-width across seeds, and the number of seeds. Without a
    seed key, ``make(frame)`` with NaN half-widths."""
    import pandas as pd

    if key is None:
        table = make(frame)
        return table, table * math.nan, 1
    tables = [make(sub) for _, sub in frame.groupby(key, sort=True)]
    stacked = pd.concat(tables, keys=range(len(tables)), names=["__seed"])
    levels = [n for n in stacked.index.names if n != "__seed"]
    grouped = stacked.groupby(level=levels, sort=False)
    mean = grouped.mean().reindex(tables[0].index)
    count = grouped.count().reindex(tables[0].index)
    std = grouped.std(ddof=1).reindex(tables[0].index)
    hw = std.copy()
    for c in std.columns:
        hw[c] = [s * t975(int(n) - 1) / math.sqrt(n) if n >= 2 else math.nan for s, n in zip(std[c], count[c])]
    return mean, hw, len(tables)


def with_ci(mean: Any, hw: Any, fmt: Callable[[float], str]) -> Any:
    """A table of ``mean ± half-width`` strings (``-`` for a missing mean; the mean alone
    where there is no interval)."""
    out = mean.astype(object).copy()
    for c in mean.columns:
        out[c] = [
            "-" if m != m else (fmt(m) if h != h else f"{fmt(m)} ± {fmt(h).lstrip('+')}") for m, h in zip(mean[c], hw[c])
        ]
    return out
