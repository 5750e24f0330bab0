"""The cost-aware report's gap table (``experiments/cost-aware*.toml``).

For each cost-aware variant and each group of runs (workload, array state, ...), the share of
the gap between its plain policy and the cost-aware optimum that the variant closes::

    gap closed = (RGR plain - RGR variant) / (RGR plain - RGR optimum)

1 means the variant reaches the optimum's RGR, 0 that it does no better than its base, and
a negative value that it does worse. It is computed per seed (runs that differ only in
``run.seed``) and reported as the mean with a 95 % Student-t confidence interval over the
seeds; a group with a single run (a trace) has no interval.

A seed whose plain policy is within 1 % of the optimum (``MIN_GAP``) is left out: with no
gap to close the ratio is noise (a trace whose cache sees almost no reuse). The ``[report]``
keys: ``gap_pairs`` (``[plain, variant]`` policy names), ``gap_optimum``
(the optimum's policy name, or a list: the first present in the group is used, so a trace's
full-length runs fall back from ``opt-cost`` to ``belady-cost``) and ``gap_groups`` (the
columns that identify a group).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

# Smallest gap, as a share of the plain policy's value, for which the ratio is reported.
MIN_GAP = 0.01

# Two-sided 95 % quantiles of Student's t for 1..30 degrees of freedom; beyond, the normal's.
_T95 = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
]  # fmt: skip


def mean_ci(values: list[float]) -> tuple[float, float | None]:
    """Mean and 95 % confidence half-width (``None`` for fewer than two values)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    t = _T95[n - 2] if n - 1 <= len(_T95) else 1.960
    return mean, t * math.sqrt(var / n)


def _optimum(spec: dict[str, Any]) -> list[str]:
    opt = spec.get("gap_optimum", "opt-cost")
    return [opt] if isinstance(opt, str) else list(opt)


def gap_table(frame: Any, spec: dict[str, Any]) -> Any:
    """One row per group and pair: mean RGRs and the gap closed with its interval."""
    import pandas as pd

    pairs = [tuple(p) for p in spec.get("gap_pairs", [])]
    groups = list(spec.get("gap_groups", []))
    value = spec.get("gap_value", "rgr")
    policy = "cache.policy"
    seed = "run.seed" if "run.seed" in frame.columns else None
    rows = []
    for key, g in frame.groupby(groups, sort=False, dropna=False) if groups else [((), frame)]:
        key = key if isinstance(key, tuple) else (key,)
        present = set(g[policy])
        opt = next((o for o in _optimum(spec) if o in present), None)
        if opt is None:
            continue
        runs = g.groupby(seed, sort=True) if seed else [(None, g)]
        per_seed: dict[tuple[str, str], list[float]] = {p: [] for p in pairs}
        rgr: dict[str, list[float]] = {}
        for _, s in runs:
            by = dict(zip(s[policy], s[value], strict=True))
            for name, v in by.items():
                rgr.setdefault(name, []).append(float(v))
            for plain, variant in pairs:
                if plain in by and variant in by and by[plain] - by[opt] > MIN_GAP * by[plain]:
                    per_seed[(plain, variant)].append((by[plain] - by[variant]) / (by[plain] - by[opt]))
        for plain, variant in pairs:
            closed = per_seed[(plain, variant)]
            if not closed:
                continue
            mean, half = mean_ci(closed)
            rows.append(
                {
                    **dict(zip(groups, key, strict=True)),
                    "plain": plain,
                    "variant": variant,
                    "optimum": opt,
                    f"{value} plain": mean_ci(rgr[plain])[0],
                    f"{value} variant": mean_ci(rgr[variant])[0],
                    f"{value} optimum": mean_ci(rgr[opt])[0],
                    "gap closed": mean,
                    "95% CI": half,
                    "seeds": len(closed),
                }
            )
    return pd.DataFrame(rows)


def views(frame: Any, spec: dict[str, Any], out: Path, stem: str) -> list[str]:
    """HTML fragments of the report: the gap table (also written as CSV)."""
    if not spec.get("gap_pairs"):
        return []
    table = gap_table(frame, spec)
    if not len(table):
        return []
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / f"{stem}-gap-closed.csv", index=False)

    def fmt(v: Any) -> str:
        return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"

    shown = table.copy()
    shown["gap closed"] = [
        f"{m:+.1%}" + ("" if h is None or math.isnan(h) else f" ± {h:.1%}")
        for m, h in zip(table["gap closed"], table["95% CI"], strict=True)
    ]
    shown = shown.drop(columns=["95% CI"])
    return [
        "<h3>Share of the gap to the cost-aware optimum each cost-aware variant closes</h3>",
        shown.to_html(index=False, float_format=fmt),
    ]
