"""RAPID-Cache reproductions: maximum throughput (Table 4) and the relative response-time
difference of each RAPID-Cache from the baseline before saturation (Figs 7-9, bottom).

An experiment's ``[report]`` turns these on with ``max_throughput_ms = 20.0``: the maximum
throughput of a curve is the request rate at which its mean response time first crosses that
many milliseconds, interpolated linearly between the two swept rates around the crossing (the
paper reads it off the knee of the curve, where "response times increase sharply"); a curve
that never crosses it reports its highest rate.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from raidlab.plotting import img, pyplot, save

RATE = "workload.synthetic.rate_iops"


def crossing(rates: list[float], ms: list[float], limit: float) -> float:
    """Rate at which ``ms`` (sorted by rate) first reaches ``limit``, interpolated."""
    for i, (r, m) in enumerate(zip(rates, ms)):
        if m >= limit:
            if i == 0:
                return r
            r0, m0 = rates[i - 1], ms[i - 1]
            return r0 + (r - r0) * (limit - m0) / (m - m0)
    return rates[-1] if rates else math.nan


def _curves(frame: Any, facets: list[str], arch: str) -> dict[tuple[Any, ...], dict[str, list[tuple[float, float]]]]:
    out: dict[tuple[Any, ...], dict[str, list[tuple[float, float]]]] = {}
    for _, row in frame.iterrows():
        key = tuple(row[f] for f in facets)
        out.setdefault(key, {}).setdefault(str(row[arch]), []).append((float(row[RATE]), float(row["latency_mean_ms"])))
    for curves in out.values():
        for pts in curves.values():
            pts.sort()
    return out


def max_throughput(frame: Any, facets: list[str], arch: str = "tags.arch", limit_ms: float = 20.0) -> Any:
    """One row per facet combination, one column per architecture: the maximum throughput."""
    import pandas as pd

    rows = []
    for key, curves in _curves(frame, facets, arch).items():
        row = dict(zip(facets, key))
        for name, pts in curves.items():
            row[name] = crossing([p[0] for p in pts], [p[1] for p in pts], limit_ms)
        rows.append(row)
    return pd.DataFrame(rows)


def relative_difference(frame: Any, facets: list[str], base: str = "baseline", arch: str = "tags.arch", limit_ms: float = 20.0) -> Any:
    """Relative mean-response difference of every architecture from ``base`` at each rate
    where the baseline is below saturation (its mean response under ``limit_ms``)."""
    import pandas as pd

    rows = []
    for key, curves in _curves(frame, facets, arch).items():
        ref = dict(curves.get(base, []))
        for name, pts in curves.items():
            if name == base:
                continue
            for rate, ms in pts:
                b = ref.get(rate)
                if b is None or b >= limit_ms:
                    continue
                rows.append({**dict(zip(facets, key)), "arch": name, "rate": rate, "rel_diff": ms / b - 1.0})
    return pd.DataFrame(rows)


def backup_costs(frame: Any, facets: list[str], arch: str = "tags.arch", limit_ms: float = 20.0) -> Any:
    """Per facet combination and architecture with a cache disk: what the backup cost over the
    sweep. Garbage collections (runs, and the rate at which the first one ran), the pages GC
    copied as a share of all logged pages (its extra log traffic), log writes per 1,000
    requests, and writes that waited for a segment buffer; ``*_ok`` columns count only rates
    where the mean response stayed under ``limit_ms`` (before saturation)."""
    import pandas as pd

    if "bk_log_writes" not in frame.columns:
        return pd.DataFrame()
    rows = []
    keys = [*facets, arch]
    for key, g in frame.groupby(keys, sort=True, dropna=False):
        g = g.sort_values(RATE)
        if not (g["bk_log_writes"].fillna(0) > 0).any():
            continue
        ok = g[g["latency_mean_ms"] < limit_ms]
        gc = g[g["bk_gc_runs"].fillna(0) > 0]
        logged = float(g["bk_log_pages"].sum()) + float(g["bk_gc_pages"].sum())
        rows.append(
            {
                **dict(zip(keys, key if isinstance(key, tuple) else (key,))),
                "gc_runs": int(g["bk_gc_runs"].sum()),
                "gc_runs_ok": int(ok["bk_gc_runs"].sum()),
                "first_gc_rate": float(gc[RATE].iloc[0]) if len(gc) else math.nan,
                "gc_page_share": float(g["bk_gc_pages"].sum()) / logged if logged else 0.0,
                "log_writes_per_1k_req": 1000.0 * float(g["bk_log_writes"].sum()) / float(g["requests"].sum()),
                "stalled_writes_ok": int(ok["bk_stalled_writes"].sum()),
                "stall_s_ok": float(ok["bk_stall_s"].sum()),
            }
        )
    return pd.DataFrame(rows)


def over_seeds(frame: Any, seeds: str | None, keys: list[str], make: Any, extra: list[str]) -> Any:
    """``make(frame, keys)`` per seed (the seed added to the keys, so each curve is one
    seed's), then the mean over seeds of the other columns per ``keys + extra`` (the key
    columns ``make`` adds, such as the architecture); without a seed key, ``make(frame, keys)``."""
    if seeds is None:
        return make(frame, keys)
    table = make(frame, [*keys, seeds])
    if not len(table):
        return table
    by = [*keys, *extra]
    if not by:
        return table.drop(columns=[seeds]).mean(numeric_only=True).to_frame().T
    return table.drop(columns=[seeds]).groupby(by, sort=True, dropna=False).mean().reset_index()


def throughput_with_ci(frame: Any, seeds: str | None, facets: list[str], limit_ms: float) -> Any:
    """The maximum-throughput table, each cell ``mean ± 95% half-width`` over seeds."""
    from raidlab.replicates import per_seed, with_ci

    def make(f: Any) -> Any:
        t = max_throughput(f, facets, limit_ms=limit_ms)
        return t.set_index(facets) if facets else t

    mean, hw, n = per_seed(frame, seeds, make)
    table = with_ci(mean, hw, lambda v: f"{v:.0f}")
    return (table.reset_index() if facets else table), n


def views(frame: Any, spec: dict[str, Any], out: Path, stem: str) -> list[str]:
    """HTML fragments: the maximum-throughput table and a plot of the relative differences
    (with several seeds: throughput as mean ± 95% CI, costs and differences as means)."""
    from raidlab.replicates import seed_key

    if "max_throughput_ms" not in spec:
        return []
    plt = pyplot()

    limit = float(spec["max_throughput_ms"])
    facets = list(spec.get("throughput_facets", []))
    seeds = seed_key(frame, spec)
    table, n = throughput_with_ci(frame, seeds, facets, limit)
    over = f", mean ± 95% CI over {n} seeds" if n > 1 else ""
    parts = [f"<h3>Maximum throughput (req/s at a {limit:g} ms mean response{over})</h3>", table.to_html(index=False)]
    costs = over_seeds(frame, seeds, facets, lambda f, k: backup_costs(f, k, limit_ms=limit), ["tags.arch"])
    if len(costs):
        parts.append(f"<h3>Backup costs over the sweep (garbage collection, log writes, stalls){' per seed, mean over seeds' if n > 1 else ''}</h3>")
        parts.append(costs.to_html(index=False, float_format=lambda v: f"{v:.3g}", na_rep="-"))
    # Per rate, the mean over the seeds whose baseline was below saturation there.
    rel = over_seeds(frame, seeds, facets, lambda f, k: relative_difference(f, k, limit_ms=limit), ["arch", "rate"])
    if len(rel):
        groups = sorted({tuple(r[f] for f in facets) for _, r in rel.iterrows()}, key=str)
        fig, axes = plt.subplots(1, len(groups), figsize=(3.4 * len(groups), 2.8), squeeze=False)
        for ax, g in zip(axes[0], groups):
            sub = rel[[tuple(r[f] for f in facets) == g for _, r in rel.iterrows()]]
            for name in sorted(set(sub["arch"])):
                s = sub[sub["arch"] == name].sort_values("rate")
                ax.plot(s["rate"], 100 * s["rel_diff"], marker="o", markersize=2, label=name)
            ax.axhline(0, color="grey", linewidth=0.5)
            ax.set_title(", ".join(map(str, g)), fontsize=8)
            ax.set_xlabel("request rate (req/s)", fontsize=8)
            ax.tick_params(labelsize=7)
        axes[0][0].set_ylabel("response vs baseline (%)")
        axes[0][-1].legend(fontsize=7)
        parts.append(img(save(fig, out / f"{stem}-reldiff.png"), "relative response-time difference"))
    return parts
