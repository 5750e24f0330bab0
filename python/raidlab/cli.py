"""The ``raidlab`` command.

    raidlab run EXPERIMENT.toml [--json] [--threads N]
    raidlab trace stats FILE [--format NAME] [--block-size BYTES] [--json]
    raidlab sweep EXPERIMENT.toml [--workers N] [--scheduler tcp://host:8786] [--out DIR] [--fail-fast]
    raidlab results DIR [--sql "SELECT ..."] [--csv]
    raidlab reproduce NAME [--skip-traces] [--out DIR] [--workers N] [--scheduler ADDR]
    raidlab demo
    raidlab reliability [CONFIG.toml] [--backup-nvram-mb MB] [--write-cache-mb MB ...] [--json]
    raidlab array create DIR --level L --disks N --size S [--chunk C] [--spares K] [MEMBER ...]
    raidlab array examine DIR [--json]
    raidlab serve DIR [--listen HOST:PORT | --listen unix:PATH] [--cache POLICY --cache-mib N]
    raidlab ctl DIR status [--json] | fail K | add-spare PATH | remove K|PATH | check
    raidlab replay URI WORKLOAD.toml [--qd N] [--timestamps SCALE] [--requests N] [--json]

Exit codes: 0 success, 1 a sweep finished with failed runs (or a replay saw errors), 2 bad input (any RaidlabError,
or bad arguments), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from raidlab import _core, api
from raidlab.progress import run_with_progress
from raidlab.array_cli import add_commands as add_store_commands
from raidlab.reliability import add_command as add_reliability_command

EXIT_RUNS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

# Columns of the human-readable run table: (metric, header, format).
RUN_COLUMNS = [
    ("requests", "requests", "{:,}"),
    ("block_requests", "blocks", "{:,}"),
    ("capacity", "capacity", "{:,}"),
    ("hit_ratio", "hit ratio", "{:.4f}"),
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


def _table(title: str | None, first: str, columns: list[tuple[str, str, str]]) -> Table:
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column(first)
    for _, header, _ in columns:
        table.add_column(header, justify="right")
    return table


def print_runs(result: api.Result, console: Console) -> None:
    for mode, columns in (("count", RUN_COLUMNS), ("timed", TIMED_COLUMNS), ("hierarchy", HIERARCHY_COLUMNS)):
        runs = [r for r in result.runs if r.metrics.get("mode", "count") == mode]
        if not runs:
            continue
        table = _table(None, "run", columns)
        for r in runs:
            table.add_row(escape(r.name), *(fmt.format(r.metrics[key]) for key, _, fmt in columns))
        console.print(table)
    for r in result.runs:
        if r.ramp:
            table = _table(f"ramp: {escape(r.name)}", "level", RAMP_COLUMNS)
            for i, point in enumerate(r.ramp):
                table.add_row(str(i), *(fmt.format(point[key]) for key, _, fmt in RAMP_COLUMNS))
            console.print(table)


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    result = run_with_progress(args.experiment, console, Path(args.experiment).name, args.threads)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print_runs(result, console)
    return 0


def cmd_trace_stats(args: argparse.Namespace, console: Console) -> int:
    from raidlab.stats import trace_stats

    stats = trace_stats(args.file, fmt=args.format, block_size=args.block_size)
    if args.json:
        print(json.dumps(stats, indent=2))
        return 0
    table = Table(title=f"{args.file}", show_header=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in stats.items():
        if key == "size_histogram":
            continue
        table.add_row(key, f"{value:,}" if isinstance(value, int) else str(value))
    console.print(table)
    hist = Table(title="request sizes", show_header=True)
    hist.add_column("size (bytes) up to", justify="right")
    hist.add_column("requests", justify="right")
    for upper, count in stats["size_histogram"]:
        hist.add_row(f"{upper:,}", f"{count:,}")
    console.print(hist)
    return 0


def cmd_sweep(args: argparse.Namespace, console: Console) -> int:
    from raidlab.progress import SweepBar
    from raidlab.sweep import sweep

    bar = SweepBar(console, Path(args.experiment).name)
    try:
        frame = sweep(
            args.experiment,
            executor=args.scheduler,
            workers=args.workers,
            out=args.out,
            fail_fast=args.fail_fast,
            progress=bar,
        )
    finally:
        bar.close()
    failed = frame[frame["status"] != "done"]
    console.print(
        f"{len(frame)} runs: {len(frame) - len(failed)} done, {len(failed)} failed; results in [bold]{escape(args.out)}[/bold]",
        highlight=False,
    )
    for _, row in failed.head(10).iterrows():
        console.print(f"[red]failed[/red] {escape(row['name'])}: {escape(row['error'])}", highlight=False)
    return EXIT_RUNS_FAILED if len(failed) else 0


def cmd_results(args: argparse.Namespace, console: Console) -> int:
    from raidlab.store import query

    frame = query(Path(args.dir), args.sql)
    if args.csv:
        print(frame.to_csv(index=False), end="")
        return 0
    table = Table(show_header=True, header_style="bold")
    for c in frame.columns:
        table.add_column(escape(str(c)), justify="right" if frame[c].dtype.kind in "iuf" else "left")
    for row in frame.itertuples(index=False):
        table.add_row(*(escape(_cell(v)) for v in row))
    console.print(table)
    return 0


def _cell(v: object) -> str:
    if isinstance(v, float):
        return "" if v != v else f"{v:.6g}"
    return "" if v is None else str(v)


def cmd_reproduce(args: argparse.Namespace, console: Console) -> int:
    from raidlab.reproduce import reproduce

    report = reproduce(
        args.name,
        experiments_dir=Path(args.experiments),
        out_dir=Path(args.out),
        skip_traces=args.skip_traces,
        threads=args.threads,
        executor=args.scheduler,
        console=console,
    )
    console.print(f"report written to [bold]{report}[/bold]")
    return 0


def cmd_demo(args: argparse.Namespace, console: Console) -> int:
    args.name = "vdf-rgr"
    args.skip_traces = True
    return cmd_reproduce(args, console)


def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="raidlab", description="Simulate a cached RAID storage controller.")
    p.add_argument("--version", action="version", version=f"raidlab {_core.__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run an experiment file")
    r.add_argument("experiment", help="experiment TOML file")
    r.add_argument("--json", action="store_true", help="print JSON for machines")
    r.add_argument("--threads", type=int, default=None, help="parallel runs (default: cores)")
    r.set_defaults(func=cmd_run)

    t = sub.add_parser("trace", help="inspect traces")
    tsub = t.add_subparsers(dest="trace_command", required=True)
    s = tsub.add_parser("stats", help="summarise a trace file")
    s.add_argument("file")
    s.add_argument("--format", default="auto", help="trace format (default: auto)")
    s.add_argument("--block-size", type=int, default=4096, help="block size for the footprint")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_trace_stats)

    w = sub.add_parser("sweep", help="run every run of an experiment file in parallel into a result store")
    w.add_argument("experiment", help="experiment TOML file ([sweep], [[sweep.zip]], [[runs]])")
    w.add_argument("--workers", type=positive_int, default=None, help="local worker processes (default: cores)")
    w.add_argument("--scheduler", default=None, help="Dask scheduler address (tcp://host:8786) instead of local processes")
    w.add_argument("--out", default="results", help="result store directory (default: results)")
    w.add_argument("--fail-fast", action="store_true", help="stop at the first failed run")
    w.set_defaults(func=cmd_sweep)

    q = sub.add_parser("results", help="query a result store with SQL (DuckDB)")
    q.add_argument("dir", help="result store directory (raidlab sweep --out)")
    q.add_argument("--sql", default="SELECT * FROM runs ORDER BY name", help="query over the views runs, series, ramp, errors")
    q.add_argument("--csv", action="store_true", help="print CSV for machines")
    q.set_defaults(func=cmd_results)

    for name, helptext, func in (
        ("reproduce", "reproduce a paper's figure: runs experiments/NAME*.toml", cmd_reproduce),
        ("demo", "reproduce the VDF RGR results on built-in synthetic data", cmd_demo),
    ):
        c = sub.add_parser(name, help=helptext)
        if name == "reproduce":
            c.add_argument("name")
            c.add_argument("--skip-traces", action="store_true", help="only runs on synthetic workloads")
        c.add_argument("--experiments", default="experiments", help="directory of experiment files")
        c.add_argument("--out", default="results", help="directory for reports (and result stores: OUT/NAME/store)")
        c.add_argument("--workers", "--threads", dest="threads", type=positive_int, default=None, help="worker processes (default: cores)")
        c.add_argument("--scheduler", default=None, help="Dask scheduler address (tcp://host:8786) instead of local processes")
        c.set_defaults(func=func)
    add_reliability_command(sub, EXIT_BAD_INPUT)
    add_store_commands(sub, positive_int)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args, extra = p.parse_known_args(argv)
    if extra:
        # `raidlab array create DIR --level ... MEMBER ...`: member paths may follow the
        # options, as with mdadm (argparse alone only takes them right after DIR).
        if getattr(args, "array_command", None) == "create" and not any(e.startswith("-") for e in extra):
            args.members = [*args.members, *extra]
        else:
            p.error(f"unrecognized arguments: {' '.join(extra)}")
    # Piped output is read by scripts and logs: do not squeeze tables into 80 columns.
    console = Console(width=None if sys.stdout.isatty() else 200)
    err = Console(stderr=True)
    try:
        return int(args.func(args, console))
    except _core.RaidlabError as e:
        err.print(f"[bold red]error:[/bold red] {escape(str(e))}", highlight=False)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        err.print("interrupted")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
