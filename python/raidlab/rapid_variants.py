"""RAPID-Cache variants (experiments/rapid-variants.toml): the unified primary's throughput
against the split cache of the same total size, and the response-time cost of a triple
RAPID-Cache's second backup.

An experiment's ``[report]`` turns these views on with ``variants = true`` (next to
``max_throughput_ms``, which also gives the maximum-throughput table of :mod:`raidlab.rapid`).
Architectures are told apart by ``tags.arch``: ``rapid`` (split, one backup), ``unified``,
``triple``, and optionally ``rapid-logical`` / ``triple-logical``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raidlab import rapid

#: (single-backup architecture, its triple counterpart) pairs compared for the second backup.
PAIRS = [("rapid", "triple"), ("rapid-logical", "triple-logical")]


def throughput_ratio(frame: Any, facets: list[str], limit_ms: float = 20.0, split: str = "rapid", unified: str = "unified") -> Any:
    """Per facet: the split and unified maximum throughputs and their ratio."""
    table = rapid.max_throughput(frame, facets, limit_ms=limit_ms)
    if split not in table or unified not in table:
        return table.iloc[0:0]
    out = table[facets + [split, unified]].copy()
    out["ratio"] = out[unified] / out[split]
    return out.sort_values(facets).reset_index(drop=True)


def second_backup_cost(frame: Any, facets: list[str], limit_ms: float = 20.0) -> Any:
    """Per facet and pair: the median and largest relative mean-response difference of the
    triple from its single-backup counterpart, at the rates where the latter is below
    ``limit_ms`` (before saturation), and the number of such rates."""
    import pandas as pd

    rows = []
    for base, triple in PAIRS:
        sub = frame[frame["tags.arch"].isin([base, triple])]
        if not len(sub):
            continue
        rel = rapid.relative_difference(sub, facets, base=base, limit_ms=limit_ms)
        if not len(rel):
            continue
        for key, g in rel.groupby(facets, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            rows.append(
                {
                    **dict(zip(facets, key)),
                    "pair": f"{triple} vs {base}",
                    "rates": len(g),
                    "median": float(g["rel_diff"].median()),
                    "max": float(g["rel_diff"].max()),
                }
            )
    return pd.DataFrame(rows)


def views(frame: Any, spec: dict[str, Any], out: Path, stem: str) -> list[str]:
    """HTML fragments: the unified/split throughput ratio and the second backup's cost."""
    if not spec.get("variants"):
        return []
    from raidlab.replicates import seed_key

    limit = float(spec.get("max_throughput_ms", 20.0))
    facets = list(spec.get("throughput_facets", []))
    seeds = seed_key(frame, spec)
    parts = []
    # With several seeds: each seed's own curves, then the mean over seeds.
    ratio = rapid.over_seeds(frame, seeds, facets, lambda f, k: throughput_ratio(f, k, limit), [])
    if len(ratio):
        parts.append(f"<h3>Unified vs split primary: maximum throughput (req/s at {limit:g} ms) and ratio</h3>")
        parts.append(ratio.to_html(index=False, float_format=lambda v: f"{v:.2f}" if v < 100 else f"{v:.0f}"))
    cost = rapid.over_seeds(frame, seeds, facets, lambda f, k: second_backup_cost(f, k, limit), ["pair"])
    if len(cost):
        parts.append(f"<h3>Triple vs one backup: relative mean response before saturation (&lt; {limit:g} ms)</h3>")
        pct = lambda v: f"{100 * v:+.1f}%"  # noqa: E731
        parts.append(cost.to_html(index=False, formatters={"rates": lambda v: f"{v:g}", "median": pct, "max": pct}))
    return parts
