"""Reports of reproductions: pivot tables, relative reductions, plots (PNG), data (CSV) and
one self-contained ``report.html`` that links them. Presentation follows each experiment
file's ``[report]`` table (see :mod:`raidlab.reproduce`)."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from raidlab import _core, fit
from raidlab.replicates import ci95, per_seed, seed_key, with_ci
from raidlab.plotting import img, pyplot, save
from raidlab.series_plot import plot_series


@dataclass
class Section:
    file: Path
    spec: dict[str, Any]
    frame: Any  # pandas.DataFrame, or None when every run was skipped
    skipped: list[str]
    series: Any = None  # the runs' time series (``Result.series()``), for ``[report.series]``
    # HTML fragments (plots) added by the experiment's own presentation (`raidlab.wcache`).
    extra: list[str] = field(default_factory=list)


def per_value(sections: list[Section]) -> list[Section]:
    """One section per metric of a ``values = [...]`` list (as if each were ``value``); the
    time-series plot goes with the first."""
    out = []
    for s in sections:
        values = s.spec.get("values")
        if not values:
            out.append(s)
            continue
        better = s.spec.get("better", "lower")
        for i, v in enumerate(values):
            # ``better`` may list one direction per value.
            b = better[i] if isinstance(better, list) else better
            spec = {**s.spec, "value": v, "better": b, "suffix": f"-{v}", "title": f"{s.spec.get('title', s.file.stem)}: {v}"}
            if i:
                spec.pop("series", None)
                spec.pop("series_plot", None)
                spec.pop("table", None)
            out.append(Section(s.file, spec, s.frame, [] if i else s.skipped, s.series, [] if i else s.extra))
    return out


def pivot(frame: Any, spec: dict[str, Any]) -> Any:
    """Value per (rows) x (columns), columns in the order they first appear."""
    rows, col, value = list(spec["rows"]), spec["columns"], spec.get("value", "rgr")
    table = frame.pivot_table(index=rows, columns=col, values=value, aggfunc="first")
    order = list(dict.fromkeys(frame[col]))
    return table[[c for c in order if c in table.columns]]


def reductions(table: Any, pairs: list[list[str]], floor: Any = None, higher: bool = False) -> Any:
    """Relative reduction of each (base, new) pair, per row: ``(base - new) / base``, or with
    ``floor`` (a per-row Series, e.g. the compulsory-miss RGR, the same for every policy)
    the reduction of the avoidable part, ``(base - new) / (base - floor)``. With ``higher``
    (the value is better when larger, e.g. a service rate) the relative improvement
    ``(new - base) / base`` instead."""
    import pandas as pd

    out = pd.DataFrame(index=table.index)
    for base, new in pairs:
        if base in table.columns and new in table.columns:
            denominator = table[base]
            if floor is not None:
                denominator = table[base] - floor
                # Where (almost) everything is compulsory the ratio is noise over nothing:
                # leave the cell empty rather than report +100% of a rounding error.
                denominator = denominator.where(denominator > AVOIDABLE_MIN * table[base])
            change = table[new] - table[base] if higher else table[base] - table[new]
            # A base of 0 has no relative change: an empty cell (explained under the table),
            # never +inf%.
            out[f"{new} vs {base}"] = (change / denominator.where(denominator != 0)).astype(float)
    return out


# Axis and column names in words, with units, for plots.
AXIS_LABELS = {
    "rgr": "RGR (disk blocks read / block requested)",
    "rgr_floor": "compulsory-miss RGR",
    "hit_ratio": "hit ratio",
    "miss_ratio": "miss ratio",
    "byte_miss_ratio": "byte miss ratio",
    "cache.capacity_fraction": "cache size (fraction of the footprint)",
    "cache.capacity_blocks": "cache size (blocks)",
    "cache.capacity_bytes": "cache size (bytes)",
    "array.disks": "disks in the array",
    "iops": "throughput (IO/s)",
    "latency_mean_ms": "mean response time (ms)",
    "latency_p99_ms": "99th-percentile response time (ms)",
    "mean_ms": "mean response time (ms)",
    "t_s": "time (s)",
}


def label(key: str) -> str:
    """``key`` in words with its unit where known (``AXIS_LABELS``), else the key."""
    return AXIS_LABELS.get(key, key)


# Under tables whose empty cells need saying why.
EMPTY_CELLS = "<p class='note'>- : no value (a base of 0, or a base that is nearly all compulsory misses).</p>"


def fold_skipped(skipped: list[str]) -> str:
    """The skipped runs as HTML, one line per reason (``name: reason``) with the count and
    the runs folded under it, instead of one line per run."""
    by_reason: dict[str, list[str]] = {}
    for line in skipped:
        name, sep, reason = line.partition(": ")
        by_reason.setdefault(reason if sep else line, []).append(name if sep else "")
    items = []
    for reason, names in by_reason.items():
        runs = "".join(f"<li>{html.escape(n)}</li>" for n in names if n)
        inner = f"<details><summary>the runs</summary><ul>{runs}</ul></details>" if runs else ""
        items.append(f"<li>{len(names)} run{'s' if len(names) > 1 else ''}: {html.escape(reason)}{inner}</li>")
    return f"<details><summary>{len(skipped)} runs skipped</summary><ul>{''.join(items)}</ul></details>"


def floor_of(frame: Any, table: Any, spec: dict[str, Any]) -> Any:
    """The per-row ``spec["floor"]`` metric of ``frame``, aligned with ``table``."""
    return frame.groupby(list(spec["rows"]), sort=False)[spec["floor"]].first().reindex(table.index)


# Smallest avoidable share of the base value for which a reduction of it is reported.
AVOIDABLE_MIN = 0.01


def wide(table_html: str) -> str:
    """A table in a box that scrolls sideways rather than widening the page."""
    return f"<div class='wide'>{table_html}</div>"


def paper_claim(spec: dict[str, Any], row_label: str) -> str:
    """The paper's number for a summary row (``group: comparison``), from the experiment
    file's ``[[report.paper]]`` entries (``comparison``, optional ``group``, ``value``,
    ``source``), with its citation; "" when the file gives none."""
    group, _, comparison = row_label.partition(": ")
    for e in spec.get("paper", []):
        if e.get("metric", spec.get("value")) != spec.get("value"):
            continue  # a claim about another of the section's metrics
        if e.get("comparison") == comparison and e.get("group", group) == group:
            return f"{e.get('value', '')} ({e.get('source', 'paper')})"
    return ""


@dataclass
class Verdict:
    """One comparison over one group (the first row key's value) of a section."""

    label: str  # "group: new vs base"
    best: float  # the largest per-cell gain (mean over seeds)
    best_hw: float  # 95% half-width of the best cell's mean (NaN with one seed)
    median: float  # median over cells of the per-cell mean gain
    improved: int  # cells whose mean gain is positive
    cells: int


def summary(red: Any, hw: Any = None) -> list[Verdict]:
    """Per comparison and value of the first row key (the workload): the best and median
    gain and the cells improved (``hw``: the gains' 95% half-widths, same shape)."""
    out = []
    for group, sub in red.groupby(level=0, sort=False):
        for c in sub.columns:
            col = sub[c].dropna()
            if col.empty:
                continue
            best_at = col.idxmax()
            best_hw = float(hw[c].loc[best_at]) if hw is not None else float("nan")
            out.append(Verdict(f"{group}: {c}", float(col.max()), best_hw, float(col.median()), int((col > 0).sum()), len(col)))
    return out


def pct(v: float, hw: float) -> str:
    """A gain as a signed percentage, with its 95% half-width when there is one."""
    return f"{v:+.1%}" if hw != hw else f"{v:+.1%} ± {hw:.1%}"


def plot(frame: Any, spec: dict[str, Any], path: Path) -> list[Path]:
    """One PNG per first facet value; a grid of panels over the second facet; a line per
    ``columns`` value."""
    plt = pyplot()

    x, series, value = spec["plot_x"], spec["columns"], spec.get("value", "rgr")
    facets = list(spec.get("plot_facets", []))
    outer = facets[0] if facets else None
    inner = facets[1] if len(facets) > 1 else None
    written = []
    groups = frame.groupby(outer, sort=False) if outer else [("all", frame)]
    for i, (key, sub) in enumerate(groups):
        panels = list(dict.fromkeys(sub[inner])) if inner else [None]
        fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.0), squeeze=False, sharey=True)
        for ax, pv in zip(axes[0], panels):
            data = sub if pv is None else sub[sub[inner] == pv]
            for name in dict.fromkeys(data[series]):
                d = data[data[series] == name]
                # One point per x: the mean over seeds, its 95% interval as an error bar.
                points = [(xv, *ci95(g[value])) for xv, g in d.groupby(x, sort=True)]
                xs, ys, hws = zip(*points) if points else ((), (), ())
                yerr = None if all(h != h for h in hws) else [0.0 if h != h else h for h in hws]
                ax.errorbar(xs, ys, yerr=yerr, marker="o", markersize=3, capsize=2, label=str(name))
            if spec.get("plot_logx"):
                ax.set_xscale("log", base=2)
            if inner:
                # Without an inner facet the figure's title alone names the panel (it was
                # printed twice, above the figure and above the panel).
                ax.set_title(f"{label(inner)}: {pv}", fontsize=9)
            ax.set_xlabel(label(x), fontsize=8)
            ax.tick_params(labelsize=7)
        axes[0][0].set_ylabel(label(value), fontsize=8)
        # One legend for the figure, below the panels, so it is never on a cut-off panel.
        legend: dict[str, Any] = {}
        for ax in axes[0]:
            for handle, name in zip(*ax.get_legend_handles_labels()):
                legend.setdefault(name, handle)
        handles, names = list(legend.values()), list(legend)
        if outer:
            fig.suptitle(f"{label(outer)}: {key}", fontsize=10)
        fig.legend(handles, names, loc="lower center", ncol=max(1, len(names)), fontsize=7, frameon=False)
        written.append(save(fig, path.with_name(f"{path.stem}-{i}.png"), rect=(0, 0.07, 1, 1)))
    return written


def extra_views(s: Section, out: Path, title: str, console: Console) -> list[str]:
    """The optional ``table`` (listed columns, one row per run) and ``series_plot`` (each
    run's time series: ``x`` against every ``y`` column, one PNG per run) of a section."""
    body = []
    cols = [c for c in s.spec.get("table", []) if c in s.frame.columns]
    seeds = seed_key(s.frame, s.spec)
    if cols and seeds:
        # One row per run of the first seed: the mean over seeds and its 95% interval. Rows
        # are matched across seeds by the first column, so it must name one run per seed.
        repeated = s.frame.loc[s.frame.duplicated([seeds, cols[0]]), cols[0]]
        if len(repeated):
            err = _core.ConfigError(
                f"{s.file}: report.table: the first column, {cols[0]!r}, names several runs of one seed"
                f" ({sorted({str(v) for v in repeated})[:5]}); averaging over seeds"
                " matches rows by it: put a column naming each run first (such as 'name')"
            )
            err.key = "report.table"
            raise err
        mean, hw, n = per_seed(s.frame, seeds, lambda f: f[cols].set_index(cols[0]))
        flat = with_ci(mean, hw, lambda v: f"{v:.4f}")
        console_table(console, flat, f"{title} (mean ± 95% CI over {n} seeds)", "{}")
        body.append(f"<p>mean ± 95% CI over {n} seeds</p>" + flat.to_html())
    elif cols:
        flat = s.frame[cols].set_index(cols[0])
        console_table(console, flat, title, "{:.4f}")
        body.append(flat.to_html(float_format="%.4f"))
    sp = s.spec.get("series_plot")
    if sp and s.series is not None and len(s.series):
        plt = pyplot()
        series = s.series
        if seeds and seeds in series.columns:
            # A time series is one run's: draw the first seed's runs only.
            series = series[series[seeds] == series[seeds].min()]

        for i, (name, run) in enumerate(series.groupby("name", sort=False)):
            fig, ax = plt.subplots(figsize=(6.0, 3.2))
            for y in sp.get("y", []):
                if y in run.columns:
                    ax.plot(run[sp["x"]], run[y], label=y, linewidth=1.2)
            ax.set_xlabel(label(sp["x"]), fontsize=8)
            ax.set_title(str(name), fontsize=9)
            ax.legend(fontsize=7)
            body.append(img(save(fig, out / f"{s.file.stem}-series-{i}.png"), str(name)))
        csv = out / f"{s.file.stem}-series.csv"
        s.series.to_csv(csv, index=False)
        body.append(f'<p>time series: <a href="{csv.name}">{csv.name}</a></p>')
    return body


def console_table(console: Console, df: Any, title: str, fmt: str) -> None:
    """Print ``df`` to fit the console: the index values joined as the row label."""
    names = " / ".join(str(n) for n in df.index.names)
    labels = []
    for idx in df.index:
        idx = idx if isinstance(idx, tuple) else (idx,)
        labels.append(" / ".join(str(i) for i in idx))
    cols = [fit.Column(str(c), ["-" if v != v else fmt.format(v) for v in df[c]]) for c in df.columns]
    fit.print_table(console, names, labels, cols, title=title)


def write_report(name: str, sections: list[Section], out: Path, console: Console) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    body: list[str] = []
    top: list[str] = []  # the verdicts of every section, shown first
    claims: list[dict[str, Any]] = []  # every verdict as data, for the scoreboard
    for s in per_value(sections):
        stem = s.file.stem
        title = s.spec.get("title", stem)
        body.append(f"<h2>{html.escape(title)}</h2><p>from <code>experiments/{html.escape(s.file.name)}</code></p>")
        if s.spec.get("description"):
            body.append(f"<p>{html.escape(s.spec['description'])}</p>")
        if s.skipped:
            body.append(fold_skipped(s.skipped))
        if s.frame is None:
            continue
        csv = out / f"{stem}.csv"
        s.frame.to_csv(csv, index=False)
        body.append(f'<p>data: <a href="{csv.name}">{csv.name}</a></p>')
        body.extend(extra_views(s, out, title, console))
        if "rows" not in s.spec or "columns" not in s.spec:
            continue
        seeds = seed_key(s.frame, s.spec)
        table, table_hw, n_seeds = per_seed(s.frame, seeds, lambda f: pivot(f, s.spec))
        value = s.spec.get("value", "rgr")
        ci_note = f" (mean ± 95% CI over {n_seeds} seeds)" if n_seeds > 1 else ""
        shown = with_ci(table, table_hw, lambda v: f"{v:.4f}")
        console_table(console, shown, f"{title}: {value}{ci_note}", "{}")
        body.append(f"<h3>{html.escape(label(value) + ci_note)}</h3>" + wide(shown.to_html(na_rep="-")))
        pairs = s.spec.get("compare", [])
        if pairs:
            higher = s.spec.get("better", "lower") == "higher"
            red, red_hw, _ = per_seed(s.frame, seeds, lambda f: reductions(pivot(f, s.spec), pairs, higher=higher))
            red_title = "relative improvement (new - base) / base" if higher else "relative reduction (base - new) / base"
            red_title += ci_note
            shown = with_ci(red, red_hw, lambda v: f"{v:+.1%}")
            console_table(console, shown, red_title, "{}")
            body.append(f"<h3>{html.escape(red_title)}</h3>")
            body.append(wide(shown.to_html(na_rep="-")))
            if red.isna().any().any():
                body.append(EMPTY_CELLS)
            cited = bool(s.spec.get("paper"))
            verdicts_of = summary(red, red_hw)
            claims.extend(claim_rows(name, s, verdicts_of, n_seeds))
            if not higher and "max_throughput_ms" in s.spec:
                below = below_saturation(s, red, red_hw, pairs, float(s.spec["max_throughput_ms"]))
                claims.extend(claim_rows(name, s, below, n_seeds, part="below_saturation"))
                for v in below:
                    console.print(f"{v.label} (below saturation): best {pct(v.best, v.best_hw)}, median {v.median:+.1%}")
            rows = "".join(
                f"<tr><td>{html.escape(v.label)}</td><td>{pct(v.best, v.best_hw)}</td><td>{v.median:+.1%}</td><td>{v.improved}/{v.cells}</td>"
                + (f"<td>{html.escape(paper_claim(s.spec, v.label)) or '-'}</td>" if cited else "")
                + "</tr>"
                for v in verdicts_of
            )
            verdicts = (
                f"<h3>{html.escape(title)}</h3>"
                "<table><tr><th>comparison</th><th>best</th><th>median</th><th>cells improved</th>"
                + ("<th>paper (cited)</th>" if cited else "")
                + f"</tr>{rows}</table>"
                + ("<p class='note'>- : the paper reports no number for this row.</p>" if cited else "")
            )
            top.append(verdicts)
            body.append(verdicts)
            for v in verdicts_of:
                claim = paper_claim(s.spec, v.label)
                console.print(
                    f"{v.label}: best {pct(v.best, v.best_hw)}, median {v.median:+.1%}, improved in {v.improved}/{v.cells} cells"
                    + (f"; paper: {claim}" if claim else "")
                )
        if pairs and s.spec.get("floor") in s.frame.columns:

            def avoidable(f: Any) -> Any:
                t = pivot(f, s.spec)
                return reductions(t, pairs, floor_of(f, t, s.spec))

            avoid, avoid_hw, _ = per_seed(s.frame, seeds, avoidable)
            title_a = f"reduction of the avoidable part: (base - new) / (base - {s.spec['floor']}){ci_note}"
            shown = with_ci(avoid, avoid_hw, lambda v: f"{v:+.1%}")
            console_table(console, shown, title_a, "{}")
            body.append(f"<h3>{html.escape(title_a)}</h3>")
            body.append(wide(shown.to_html(na_rep="-")))
            if avoid.isna().any().any():
                body.append(EMPTY_CELLS)
            avoid_verdicts = summary(avoid, avoid_hw)
            claims.extend(claim_rows(name, s, avoid_verdicts, n_seeds, part="avoidable"))
            for v in avoid_verdicts:
                console.print(f"{v.label} (avoidable part): best {pct(v.best, v.best_hw)}, median {v.median:+.1%}")
        body.extend(s.extra)
        if "plot_x" in s.spec:
            for png in plot(s.frame, s.spec, out / f"{stem}{s.spec.get('suffix', '')}.png"):
                body.append(img(png, png.stem))
        if "series" in s.spec and s.series is not None:
            for png in plot_series(s.frame, s.series, s.spec["series"], out / f"{stem}-series.png"):
                body.append(img(png, png.stem))
    style = (
        "body{font-family:sans-serif;max-width:1200px;margin:auto;padding:0 8px}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
        "img{max-width:100%;height:auto}.wide{overflow-x:auto;max-width:100%}.note{font-size:12px;color:#555}"
    )
    head = [f"<h1>raidlab reproduction: {html.escape(name)}</h1>", f"<p>raidlab {_core.__version__}</p>"]
    if top:
        head.append("<h2>Summary</h2>" + "".join(top))
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(name)}</title>"
        f"<style>{style}</style></head><body>{''.join(head + body)}</body></html>"
    )
    report = out / "report.html"
    report.write_text(page, encoding="utf-8")
    (out / "claims.json").write_text(json.dumps(claims, indent=1, allow_nan=False, default=str), encoding="utf-8")
    return report


def below_saturation(s: Section, red: Any, hw: Any, pairs: list[list[str]], limit_ms: float) -> list[Verdict]:
    """The verdicts over the cells whose base stays below saturation: its mean (over seeds)
    under ``limit_ms`` (``[report] max_throughput_ms``, the same limit as the throughput
    tables). Past saturation a response time grows with the run's length, not the design."""
    means = s.frame.pivot_table(index=list(s.spec["rows"]), columns=s.spec["columns"], values=s.spec.get("value", "rgr"), aggfunc="mean")
    kept, kept_hw = red.copy(), hw.copy()
    for base, new in pairs:
        col = f"{new} vs {base}"
        if col in kept.columns and base in means.columns:
            ok = (means[base] < limit_ms).reindex(kept.index).fillna(False).astype(bool)
            kept[col] = kept[col].where(ok)
            kept_hw[col] = kept_hw[col].where(ok)
    return summary(kept, kept_hw)


def claim_rows(name: str, s: Section, verdicts: list[Verdict], seeds: int, part: str = "whole") -> list[dict[str, Any]]:
    """The verdicts of a section as plain records (NaN as ``None``) for ``claims.json``."""

    def num(x: float) -> float | None:
        return None if x != x else x

    return [
        {
            "experiment": name,
            "file": s.file.name,
            "metric": s.spec.get("value", "rgr"),
            "part": part,
            "comparison": v.label,
            "best": num(v.best),
            "best_hw": num(v.best_hw),
            "median": num(v.median),
            "improved": v.improved,
            "cells": v.cells,
            "seeds": seeds,
            # Which driver measured it: the simulator, the store, or the simulator on the
            # store's (scaled) set-up (`raidlab reproduce NAME --store`).
            "driver": s.spec.get("driver", "simulator"),
        }
        for v in verdicts
    ]
