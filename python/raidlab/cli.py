"""The ``raidlab`` command.

    raidlab run EXPERIMENT.toml [--set KEY=VALUE ...] [--columns A,B] [--json] [--workers N]
    raidlab run --trace FILE [--format NAME] --policy NAME --size 1GiB [--unit object]
    raidlab curve EXPERIMENT.toml [--sizes 64MiB,1GiB] [--sample-rate R | --sample-size N] [--json] [--plot FILE]
    raidlab trace stats FILE [--format NAME] [--block-size BYTES] [--limit N] [--device D] [--json]
    raidlab sweep EXPERIMENT.toml [--set KEY=VALUE ...] [--workers N] [--scheduler tcp://host:8786] [--out DIR] [--fail-fast]
    raidlab results DIR [--sql "SELECT ..."] [--columns A,B | --columns all] [--csv]
    raidlab reproduce [NAME] [--skip-traces] [--store] [--out DIR] [--workers N] [--scheduler ADDR]   (no NAME: list)
    raidlab demo
    raidlab reliability [CONFIG.toml] [--backup-nvram-mb MB] [--write-cache-mb MB ...] [--json]
    raidlab array create DIR --level L --disks N --size S [--chunk C] [--spares K] [MEMBER ...]
    raidlab array examine DIR [--json]
    raidlab serve DIR [--listen HOST:PORT | --listen unix:PATH] [--cache POLICY --cache-mib N]
    raidlab ctl DIR status [--json|--prometheus] [--test] | fail K [--force] | add-spare PATH
                    | remove K|PATH | re-add K|PATH | check [--test]
    raidlab replay URI WORKLOAD.toml [--qd N] [--timestamps SCALE | --schedule [--log CSV]] [--requests N] [--json]

Exit codes: 0 success, 1 a sweep finished with failed runs (or a replay saw errors), 2 bad input (any RaidlabError,
or bad arguments), 130 interrupted. `ctl status --test` exits 1 when the array is degraded and 2 when it failed (as
mdadm --detail --test); `ctl check --test` exits 1 on mismatches.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.markup import escape

from raidlab import _core, api, fit
from raidlab.progress import run_with_progress
from raidlab.array_cli import add_commands as add_store_commands
from raidlab.calibrate import add_command as add_calibrate_command
from raidlab.curve import add_command as add_curve_command
from raidlab.reliability import add_command as add_reliability_command
from raidlab.run_tables import check_metrics, print_grouped, print_runs

EXIT_RUNS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

CAPACITY_KEYS = ("cache.capacity", "cache.capacity_blocks", "cache.capacity_bytes", "cache.capacity_fraction")


def parse_set(items: Sequence[str]) -> dict[str, Any]:
    """``--set key=value`` items -> ``{key: value}``. A value is read as a TOML value
    (``3``, ``0.5``, ``true``, ``[1, 2]``, ``"text"``) when it is one, else taken as text
    (``lru``, ``128MiB``); :func:`typed_overrides` then lets the schema decide keys whose
    value was read as a number but which want text."""
    import tomllib

    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise _core.ConfigError(f"--set {item!r}: expected KEY=VALUE, such as cache.policy=lru")
        try:
            value: Any = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = text.strip()
        if key.endswith("trace") and isinstance(value, str) and Path(value).exists():
            value = str(Path(value).resolve())  # a path on the command line is from here
        out[key] = value
    return out


def checked_overrides(config: api.Config, overrides: dict[str, Any], raw: Sequence[str]) -> dict[str, Any]:
    """``--set`` overrides ready to apply: one capacity key replaces the config's others,
    and values are typed by the schema (:func:`typed_overrides`)."""
    if any(k in overrides for k in CAPACITY_KEYS):
        overrides = {**overrides, **{k: None for k in CAPACITY_KEYS if k not in overrides}}
    return typed_overrides(config, overrides, raw) if overrides else overrides


def typed_overrides(config: api.Config, overrides: dict[str, Any], raw: Sequence[str]) -> dict[str, Any]:
    """Validate ``config`` with ``overrides``; a key the core wants as text but that was
    read as a number or boolean (``name=2024``) is retried as the text it was typed as."""
    texts = {k.strip(): v.strip() for k, _, v in (i.partition("=") for i in raw)}
    while True:
        try:
            api.load(config, overrides=overrides)
            return overrides
        except _core.ConfigError as e:
            key = next((k for k in overrides if str(getattr(e, "key", "")).endswith(k)), None)
            if key is None or isinstance(overrides[key], str) or "expected a string" not in str(e):
                raise
            overrides = {**overrides, key: texts.get(key, str(overrides[key]))}


def quick_config(args: argparse.Namespace) -> dict[str, Any]:
    """The config of ``raidlab run --trace FILE --policy P --size S`` (no config file)."""
    if args.trace is None:
        raise _core.ConfigError("run: give a config file, or --trace FILE (with --policy and --size) to run without one")
    workload: dict[str, Any] = {"trace": str(Path(args.trace).resolve())}
    if args.format:
        workload["format"] = args.format
    cache: dict[str, Any] = {"policy": args.policy or "lru"}
    if args.size is None:
        cache["capacity_fraction"] = 0.1  # a tenth of the trace's footprint
    else:
        cache["capacity"] = args.size
    if args.unit:
        cache["unit"] = args.unit
    return {"workload": workload, "cache": cache}


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    workers = deprecated_workers(args, console)
    overrides = parse_set(args.set or [])
    if args.experiment is None:
        config: api.Config = quick_config(args)
        label = Path(args.trace).name
    else:
        for flag in ("trace", "format", "unit"):
            if getattr(args, flag):
                raise _core.ConfigError(f"--{flag} is for running without a config file; use --set with one")
        config, label = args.experiment, Path(args.experiment).name
        if args.policy:
            overrides.setdefault("cache.policy", args.policy)
        if args.size:
            overrides.setdefault("cache.capacity", args.size)
    overrides = checked_overrides(config, overrides, args.set or [])
    columns = fit.choose(args.columns)
    try:
        result = run_with_progress(config, console, label, workers, overrides)
    except _core.RaidlabError as e:
        done = getattr(e, "finished", None)
        if done is not None and done.runs:
            if args.json:
                print(json.dumps(done.to_json(), indent=2))
            else:
                n = len(done.runs)
                console.print(f"[bold]{n} run{'s' if n > 1 else ''} finished before a run failed:[/bold]", highlight=False)
                print_runs(done, console, columns)
        raise
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print_runs(result, console, columns)
    return 0


def deprecated_workers(args: argparse.Namespace, console: Console) -> int | None:
    """``--threads N``: the old name of ``--workers N``, still accepted with a note."""
    threads = getattr(args, "threads", None)
    if threads is not None:
        Console(stderr=True).print("note: --threads is deprecated; use --workers", highlight=False)
        return int(args.workers or threads)
    workers: int | None = args.workers
    return workers


# Rows of `raidlab trace stats`: (key, label); `{bs}` is the block size.
STATS_ROWS = [
    ("format", "format"),
    ("addressing", "addressing"),
    ("requests", "requests"),
    ("reads", "reads"),
    ("writes", "writes"),
    ("read_share", "read share"),
    ("footprint_blocks", "footprint, distinct {bs}-byte blocks (keys)"),
    ("footprint_bytes", "footprint bytes (blocks x block size; key sizes for keys)"),
    ("total_bytes", "bytes requested"),
    ("first_time_s", "first arrival s"),
    ("last_time_s", "last arrival s"),
    ("span_s", "span s"),
]


def cmd_trace_stats(args: argparse.Namespace, console: Console) -> int:
    from raidlab.stats import trace_stats

    stats = trace_stats(args.file, fmt=args.format, block_size=args.block_size, limit=args.limit, device=args.device)
    if args.json:
        print(json.dumps(stats, indent=2))
        return 0
    bs = f"{stats['block_size']:,}"
    rows = [(label.format(bs=bs), stats.get(key)) for key, label in STATS_ROWS if key in stats]
    if not stats.get("sized", True):
        rows = [(k, v) for k, v in rows if v is not None]
        rows.append(("sizes", "none in this format (keys only)"))
    console.print(escape(str(args.file)), highlight=False)
    fit.print_table(console, "", [k for k, _ in rows], [fit.Column("value", [fit.cell(v, "{:.4f}" if isinstance(v, float) else None) for _, v in rows])])
    if stats["size_histogram"]:
        hist = stats["size_histogram"]
        fit.print_table(
            console,
            "request size up to (bytes)",
            [f"{upper:,}" for upper, _ in hist],
            [fit.Column("requests", [f"{n:,}" for _, n in hist])],
        )
    print_devices(console, stats.get("devices", []))
    return 0


# Devices listed by `trace stats` before the rest are folded into one line.
DEVICES_SHOWN = 16


def print_devices(console: Console, devices: list[dict[str, int]]) -> None:
    """The per-device split of a multi-device trace read whole, busiest first."""
    if len(devices) < 2:
        return
    busiest = sorted(devices, key=lambda d: (-d["requests"], d["device"]))
    shown = busiest[:DEVICES_SHOWN]
    total = sum(d["requests"] for d in devices) or 1
    console.print(f"{len(devices)} devices, busiest first (select one with --device)", highlight=False)
    fit.print_table(
        console,
        "device",
        [str(d["device"]) for d in shown],
        [
            fit.Column("requests", [f"{d['requests']:,}" for d in shown]),
            fit.Column("share", [f"{d['requests'] / total:.1%}" for d in shown]),
            fit.Column("reads", [f"{d['reads']:,}" for d in shown]),
            fit.Column("writes", [f"{d['writes']:,}" for d in shown]),
            fit.Column("bytes", [f"{d['bytes']:,}" for d in shown]),
        ],
    )
    if len(busiest) > len(shown):
        rest = busiest[len(shown) :]
        console.print(
            f"... and {len(rest)} more devices with {sum(d['requests'] for d in rest):,} requests (all in --json)",
            highlight=False,
        )


def cmd_sweep(args: argparse.Namespace, console: Console) -> int:
    from raidlab.progress import SweepBar
    from raidlab.sweep import sweep

    bar = SweepBar(console, Path(args.experiment).name)
    if args.out is None:
        args.out = str(Path("results") / Path(args.experiment).stem)
    overrides = checked_overrides(args.experiment, parse_set(args.set or []), args.set or [])
    try:
        frame = sweep(
            args.experiment,
            overrides=overrides or None,
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


# Metrics `raidlab results` shows by default, when the store has them.
RESULT_METRICS = [
    "hit_ratio",
    "byte_miss_ratio",
    "rgr",
    "fs_hit_ratio",
    "iops",
    "latency_mean_ms",
    "latency_p99_ms",
    "disk_reads_total",
    "wall_s",
]
# Columns that identify a stored run rather than describe it.
RESULT_BOOKKEEPING = {"run_id", "name", "version", "config", "mode", "experiment", "config_hash"}


def default_result_columns(frame: Any) -> list[str]:
    """The config columns whose value differs between runs, then the headline metrics."""
    varying = [
        c
        for c in frame.columns
        if "." in str(c)
        and c not in RESULT_BOOKKEEPING
        and not str(c).startswith(("report.", "tags."))
        and frame[c].astype(str).nunique(dropna=False) > 1
    ]
    tags = [c for c in frame.columns if str(c).startswith("tags.") and frame[c].astype(str).nunique() > 1]
    # A config value the run names already show is not repeated in a column.
    named = {t.split("=", 1)[0] for n in frame.get("name", []) for t in fit.name_tokens(str(n))}
    varying = [c for c in varying if c not in named]
    metrics = [c for c in RESULT_METRICS if c in frame.columns and frame[c].notna().any()]
    return [*tags, *varying, *metrics]


def cmd_results(args: argparse.Namespace, console: Console) -> int:
    from raidlab.store import query

    sql = args.sql or "SELECT * FROM runs ORDER BY name"
    frame = query(Path(args.dir), sql)
    chosen = fit.choose(args.columns)
    if chosen == ["all"]:
        chosen = [str(c) for c in frame.columns]
    if chosen is not None:
        check_metrics(chosen, {str(c) for c in frame.columns})
        frame = frame[["name", *[c for c in chosen if c != "name"]] if "name" in frame.columns else chosen]
    if args.csv:
        print(frame.to_csv(index=False), end="")
        return 0
    total = len(frame.columns)
    if args.sql is None and chosen is None and "name" in frame.columns:
        frame = frame[["name", *default_result_columns(frame)]]
    if frame.empty:
        hint = ""
        if args.sql is None:
            hint = f"; failed runs: raidlab results {args.dir} --sql 'SELECT name, error, message FROM errors'"
        console.print(escape(f"no rows{hint}"), highlight=False)
        return 0
    first = str(frame.columns[0])
    labels = [fit.cell(v) for v in frame.iloc[:, 0]]
    if first == "name":
        labels, common = fit.short_names(labels)
        if common:
            console.print(f"[dim]config of every run: {escape(common)}[/dim]", highlight=False)
    cols = [
        fit.Column(str(c), [fit.cell(v) for v in frame[c]], numeric=frame[c].dtype.kind in "iuf")
        for c in frame.columns[1:]
    ]
    if first != "name":
        fit.print_table(console, first, labels, cols)
    else:
        print_grouped(console, labels, cols)
    if len(frame.columns) < total:
        console.print(
            f"[dim]{len(frame)} runs; {len(frame.columns)} of {total} columns shown. "
            "Choose with --columns a,b (or --columns all), or query with --sql; "
            'dotted names need double quotes in SQL: --sql \'SELECT name, "cache.policy", hit_ratio FROM runs\'[/dim]',
            highlight=False,
        )
    return 0


def cmd_reproduce(args: argparse.Namespace, console: Console) -> int:
    from raidlab.reproduce import experiments_dir, known, reproduce

    where = experiments_dir(args.experiments)
    if args.name is None:
        found = known(where)
        if not found:
            raise _core.ConfigError(f"no experiment files in {where} (give --experiments DIR)")
        console.print(f"experiments in {escape(str(where))} (raidlab reproduce NAME runs NAME*.toml):", highlight=False)
        fit.print_table(console, "name", [n for n, _ in found], [fit.Column("title", [t or "-" for _, t in found], numeric=False)])
        return 0
    if args.name in ("all", "scoreboard"):
        return reproduce_all(args, where, console, run=args.name == "all")
    name, exact = args.name, False
    if name.endswith(".toml"):
        # A path to one experiment file: that file alone, wherever it is.
        path = Path(name)
        if not path.is_file():
            raise _core.ConfigError(f"{name}: no such experiment file (give a NAME from `raidlab reproduce`, or a path to a .toml)")
        where, name, exact = path.parent, path.stem, True
    if getattr(args, "store", False):
        from raidlab.reproduce import reproduce_store

        report = reproduce_store(name, experiments_dir=where, out_dir=Path(args.out), console=console)
        console.print(f"report written to [bold]{report}[/bold]")
        return 0
    report = reproduce(
        name,
        exact=exact,
        experiments_dir=where,
        out_dir=Path(args.out),
        skip_traces=args.skip_traces,
        threads=deprecated_workers(args, console),
        executor=args.scheduler,
        console=console,
    )
    console.print(f"report written to [bold]{report}[/bold]")
    return 0


def reproduce_all(args: argparse.Namespace, where: Path, console: Console, run: bool) -> int:
    """``reproduce all``: every experiment file (each on its own, its report in
    ``OUT/STEM``), then the scoreboard; ``reproduce scoreboard``: the scoreboard of the
    reports already under ``OUT``."""
    from raidlab import scoreboard
    from raidlab.reproduce import known, reproduce

    out = Path(args.out)
    if run:
        for stem, _ in known(where):
            reproduce(
                stem,
                experiments_dir=where,
                out_dir=out,
                skip_traces=args.skip_traces,
                threads=deprecated_workers(args, console),
                executor=args.scheduler,
                console=console,
                exact=True,
            )
    scores = scoreboard.scoreboard(where, out)
    page = scoreboard.write(scores, out, console)
    console.print(f"scoreboard written to [bold]{page}[/bold]")
    if getattr(args, "doc", None):
        # The verdicts the table comes from go beside the document, so a test can check
        # that the committed table is what this code prints from them.
        doc = Path(args.doc)
        scoreboard.freeze(out, doc.parent / "claims")
        scoreboard.update_doc(doc, scoreboard.markdown(scoreboard.scoreboard(where, doc.parent / "claims")))
        console.print(f"table and verdicts written to [bold]{escape(str(doc))}[/bold] and {escape(str(doc.parent / 'claims'))}/")
    return 0


def cmd_demo(args: argparse.Namespace, console: Console) -> int:
    args.name = "demo-vdf-rgr"
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

    r = sub.add_parser(
        "run",
        help="run an experiment file (or one trace: --trace FILE --policy P --size S)",
        description="Run every run of an experiment file and print a table of metrics. Without a file, "
        "--trace FILE --policy NAME --size SIZE runs one trace through one cache (like libCacheSim's cachesim).",
    )
    r.add_argument("experiment", nargs="?", help="experiment TOML file")
    r.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a config key in every run (repeatable): --set cache.policy=arc --set cache.capacity=128MiB",
    )
    r.add_argument("--trace", help="trace file to run without a config file")
    r.add_argument("--format", help="trace format with --trace (default: auto)")
    r.add_argument("--policy", help="cache policy (with a config file: --set cache.policy)")
    r.add_argument("--size", help="cache capacity with a unit, 128MiB or 1GiB (with a config file: --set cache.capacity)")
    r.add_argument("--unit", choices=["block", "object"], help="cache unit with --trace (object: libCacheSim's, sizes in bytes)")
    r.add_argument("--columns", "--metrics", dest="columns", metavar="A,B", help="metrics to show instead of the default columns")
    r.add_argument("--json", action="store_true", help="print JSON for machines (docs/run.schema.json)")
    r.add_argument("--workers", metavar="N", type=positive_int, default=None, help="runs in parallel (default: cores)")
    r.add_argument("--threads", type=positive_int, default=None, help=argparse.SUPPRESS)
    r.set_defaults(func=cmd_run)

    t = sub.add_parser("trace", help="inspect traces")
    tsub = t.add_subparsers(dest="trace_command", required=True)
    s = tsub.add_parser("stats", help="summarise a trace file")
    s.add_argument("file")
    s.add_argument("--format", default="auto", help="trace format (default: auto)")
    s.add_argument("--block-size", type=int, default=4096, help="block size for the footprint (default: 4096)")
    s.add_argument("--limit", type=positive_int, default=None, help="only the first N requests")
    s.add_argument("--device", type=int, default=None, help="only this device (ASU, disk, LUN, volume) of a multi-device trace")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_trace_stats)

    w = sub.add_parser("sweep", help="run every run of an experiment file in parallel into a result store")
    w.add_argument("experiment", help="experiment TOML file ([sweep], [[sweep.zip]], [[runs]])")
    w.add_argument("--workers", type=positive_int, default=None, help="local worker processes (default: cores)")
    w.add_argument("--scheduler", default=None, help="Dask scheduler address (tcp://host:8786) instead of local processes")
    w.add_argument("--out", default=None, help="result store directory (default: results/EXPERIMENT, one store per experiment file)")
    w.add_argument("--fail-fast", action="store_true", help="stop at the first failed run")
    w.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key in every run (repeatable), as for run")
    w.set_defaults(func=cmd_sweep)

    q = sub.add_parser("results", help="query a result store with SQL (DuckDB)")
    q.add_argument("dir", help="result store directory (raidlab sweep --out)")
    q.add_argument(
        "--sql",
        default=None,
        help='query over the views runs, series, ramp, errors (default: the runs, main columns); quote dotted names: "cache.policy"',
    )
    q.add_argument("--columns", "--metrics", dest="columns", metavar="A,B", help="columns to show (all: every column)")
    q.add_argument("--csv", action="store_true", help="print CSV for machines (every column unless --columns)")
    q.set_defaults(func=cmd_results)

    for name, helptext, func in (
        ("reproduce", "reproduce a paper's figure: runs experiments/NAME*.toml", cmd_reproduce),
        ("demo", "reproduce the VDF RGR results on built-in synthetic data", cmd_demo),
    ):
        c = sub.add_parser(name, help=helptext)
        if name == "reproduce":
            c.add_argument(
                "name",
                nargs="?",
                help="experiment name, or a path to one .toml file (that file alone); 'all' runs every one and writes OUT/scoreboard.html, 'scoreboard' only writes it (without a name: list the experiments)",
            )
            c.add_argument("--skip-traces", action="store_true", help="only runs on synthetic workloads")
            c.add_argument(
                "--store",
                action="store_true",
                help="run the file's [report.store] cells on a served array with disk-timed members, beside the simulator's prediction (report in OUT/NAME-store)",
            )
            c.add_argument(
                "--doc",
                metavar="FILE",
                help="with all/scoreboard: also write the table into FILE (between its scoreboard markers) "
                "and the verdicts it comes from to FILE's directory/claims/",
            )
        c.add_argument(
            "--experiments",
            default=None,
            help="directory of experiment files (default: $RAIDLAB_EXPERIMENTS, ./experiments, else the repository's)",
        )
        c.add_argument("--out", default="results", help="directory for reports (and result stores: OUT/NAME/store)")
        c.add_argument("--workers", type=positive_int, default=None, help="worker processes (default: cores)")
        c.add_argument("--threads", type=positive_int, default=None, help=argparse.SUPPRESS)
        c.add_argument("--scheduler", default=None, help="Dask scheduler address (tcp://host:8786) instead of local processes")
        c.set_defaults(func=func)
    add_reliability_command(sub, EXIT_BAD_INPUT)
    add_curve_command(sub, parse_set)
    add_calibrate_command(sub, parse_set)
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
    # Piped output is read by scripts and logs: do not squeeze tables into 80 columns, unless
    # COLUMNS says how wide to be.
    console = Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 200)
    err = Console(stderr=True)
    try:
        return int(args.func(args, console))
    except _core.RaidlabError as e:
        # One line, never folded at the console's width: the message names a file or key
        # that a reader copies and a log search looks for whole.
        err.print(f"[bold red]error:[/bold red] {escape(str(e))}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        err.print("interrupted")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
