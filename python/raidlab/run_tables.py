"""The run tables of ``raidlab run`` (and the grouped rows ``raidlab results`` shares): the
default metric columns of each mode, a summary first for many runs, tables that fit the
terminal (:mod:`raidlab.fit`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from raidlab import _core, api, fit

# Columns of the human-readable run table: (metric, header, format).
RUN_COLUMNS = [
    ("requests", "requests", "{:,}"),
    ("block_requests", "blocks", "{:,}"),
    ("capacity", "capacity", "{:,}"),
    ("hit_ratio", "hit ratio", "{:.4f}"),
    ("byte_miss_ratio", "byte miss ratio", "{:.4f}"),
    ("rgr", "RGR", "{:.4f}"),
    ("disk_reads_total", "disk reads", "{:,}"),
    ("disk_writes_total", "disk writes", "{:,}"),
    ("wall_s", "wall s", "{:.2f}"),
]


# Columns for timed runs.
TIMED_COLUMNS = [
    ("requests", "requests", "{:,}"),
    ("hit_ratio", "hit ratio", "{:.4f}"),
    ("iops", "IOPS", "{:,.1f}"),
    ("latency_mean_ms", "mean ms", "{:.3f}"),
    ("latency_p99_ms", "p99 ms", "{:.3f}"),
    ("disk_util_max", "max util", "{:.3f}"),
    ("sim_s", "sim s", "{:,.1f}"),
    ("wall_s", "wall s", "{:.2f}"),
]

# Columns for two-level (host + array) runs.
HIERARCHY_COLUMNS = [
    ("file_reads", "file reads", "{:,}"),
    ("fs_hit_ratio", "FS hit ratio", "{:.4f}"),
    ("capacity", "array cache", "{:,}"),
    ("hit_ratio", "array hit ratio", "{:.4f}"),
    ("read_latency_us_mean", "read us", "{:,.1f}"),
    ("placement_reads", "placements", "{:,}"),
    ("sim_s", "sim s", "{:,.1f}"),
    ("wall_s", "wall s", "{:.2f}"),
]

RAMP_COLUMNS = [
    ("target_iops", "target IOPS", "{:,.0f}"),
    ("offered_iops", "offered", "{:,.1f}"),
    ("iops", "IOPS", "{:,.1f}"),
    ("mean_ms", "mean ms", "{:.3f}"),
    ("p99_ms", "p99 ms", "{:.3f}"),
    ("saturated", "saturated", "{}"),
]


MODE_COLUMNS = {"count": RUN_COLUMNS, "timed": TIMED_COLUMNS, "hierarchy": HIERARCHY_COLUMNS}
# Headers and formats of every metric a table may show (others: the key and a plain format).
KNOWN = {key: (header, fmt) for cols in (RAMP_COLUMNS, HIERARCHY_COLUMNS, TIMED_COLUMNS, RUN_COLUMNS) for key, header, fmt in cols}
# Above this many runs, a summary is printed before the tables.
SUMMARY_RUNS = 10


def metric_columns(keys: Sequence[str], mode: Sequence[tuple[str, str, str]] = ()) -> list[tuple[str, str, str | None]]:
    """(key, header, format) of ``keys``: the mode's own header, else the usual one, else the key."""
    own = {k: (h, f) for k, h, f in mode}
    return [(k, *own.get(k, KNOWN.get(k, (k, None)))) for k in keys]


def check_metrics(chosen: Sequence[str], available: set[str]) -> None:
    """Refuse a ``--columns`` name no run has, suggesting the nearest ones."""
    import difflib

    for key in chosen:
        if key not in available:
            near = difflib.get_close_matches(key, sorted(available), n=3)
            hint = f"; did you mean {', '.join(near)}?" if near else f"; available: {', '.join(sorted(available))}"
            raise _core.ConfigError(f"--columns: no run has a metric {key!r}{hint}")


def print_summary(result: api.Result, console: Console, names: Sequence[str]) -> None:
    """A few lines before the tables of many runs: how many, and the range of the headline
    metric with the runs that reach it."""
    runs = result.runs
    console.print(f"[bold]{len(runs)} runs[/bold]", highlight=False)
    for key in ("hit_ratio", "rgr", "iops", "latency_p99_ms"):
        have = [(r.metrics[key], n) for r, n in zip(runs, names) if isinstance(r.metrics.get(key), (int, float))]
        if len(have) < 2:
            continue
        lo, hi = min(have), max(have)
        header, fmt = KNOWN[key]
        console.print(
            f"  {header}: {fmt.format(lo[0])} ({escape(lo[1])}) .. {fmt.format(hi[0])} ({escape(hi[1])})",
            highlight=False,
        )


def print_runs(result: api.Result, console: Console, columns: Sequence[str] | None = None) -> None:
    """The runs as tables that fit the console: one table per mode (count, timed,
    hierarchy), run names shortened to what differs between runs, ``columns`` (metric keys)
    instead of the mode's default columns if given."""
    names, common = fit.short_names([r.name for r in result.runs])
    if columns is not None:
        check_metrics(columns, {k for r in result.runs for k, v in r.metrics.items() if not isinstance(v, (list, dict))})
    if len(result.runs) > SUMMARY_RUNS:
        print_summary(result, console, names)
    if common:
        console.print(f"[dim]config of every run: {escape(common)}[/dim]", highlight=False)
    for mode, default in MODE_COLUMNS.items():
        picked = [(r, n) for r, n in zip(result.runs, names) if r.metrics.get("mode", "count") == mode]
        if not picked:
            continue
        keys = columns if columns is not None else [k for k, _, _ in default if any(k in r.metrics for r, _ in picked)]
        cols = [fit.Column(header, [fit.cell(r.metrics.get(key), fmt) for r, _ in picked]) for key, header, fmt in metric_columns(keys, default)]
        if columns is None and len(picked) > 1:
            # A default column with one value for every run is said once, above the table.
            same = [c for c in cols if len(set(c.cells)) == 1]
            if same:
                console.print(
                    "[dim]same for every run: " + escape(", ".join(f"{c.header} {c.cells[0]}" for c in same)) + "[/dim]",
                    highlight=False,
                )
                cols = [c for c in cols if c not in same]
        print_grouped(console, [n for _, n in picked], cols)
    for r, n in zip(result.runs, names):
        if r.ramp:
            cols = [fit.Column(header, [fit.cell(p.get(key), fmt) for p in r.ramp]) for key, header, fmt in RAMP_COLUMNS]
            fit.print_table(console, "level", [str(i) for i in range(len(r.ramp))], cols, title=f"ramp: {n}")


def print_grouped(console: Console, names: Sequence[str], cols: Sequence[fit.Column]) -> None:
    """Rows labelled by run names, a sweep's grid as values under group headings
    (:func:`fit.grid_groups`) so that each run keeps to one line."""
    # Labels get what the metric columns leave of the line (at least the label minimum).
    budget = max(fit.LABEL_MIN, console.width - fit.table_width(0, [c.width for c in cols]) - 2)
    for heading, rows, first, labels in fit.grid_groups(names, budget):
        if heading:
            console.print(Text(heading, style="bold"), overflow="fold")
        fit.print_table(console, first, labels, [replace(c, cells=[c.cells[i] for i in rows]) for c in cols])
