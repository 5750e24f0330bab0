"""Cache curves in one pass: ``raidlab.curve(config) -> DataFrame`` and ``raidlab curve``.

For every cache size: misses, miss ratio and the cost-weighted RGR (each miss charged the
array's cost of its block in the array's mode), computed in one pass over the workload by
the core (``crates/raidlab/src/curve``): exact stack distances for LRU, SHARDS with
``sample_rate`` or ``sample_size``, and one simulation per size (miniature ones with a
sample rate) for other policies. See docs/curves.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from raidlab import _core
from raidlab.api import Config, _source, nest

# Columns of the curve frame, in order, after ``name``.
POINT_COLUMNS = ["size_blocks", "size_bytes", "misses", "miss_ratio", "miss_disk_blocks", "rgr"]
# Per-curve values repeated on each of its rows.
CURVE_COLUMNS = ["policy", "method", "rate", "lookups", "sampled_lookups"]


def curve_json(
    config: Config,
    *,
    sizes: Sequence[str | int] | None = None,
    sample_rate: float | None = None,
    sample_size: int | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The curve of every run of ``config``: ``[{"name", "config", "curve"}, ...]`` (the
    ``--json`` shape)."""
    text, file, base = _source(config)
    items = None if sizes is None else [str(s) for s in sizes]
    out = _core.curve(text, file, base, nest(overrides), items, sample_rate, sample_size)
    result: list[dict[str, Any]] = json.loads(out)
    return result


def curve(
    config: Config,
    *,
    sizes: Sequence[str | int] | None = None,
    sample_rate: float | None = None,
    sample_size: int | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Any:
    """Miss ratio and cost-weighted RGR of ``config`` at every cache size, in one pass.

    ``sizes``: cache sizes, each a number of blocks (``4096``) or a size with a unit
    (``"64MiB"``); by default 17 sizes from 1/256 of the workload's footprint to all of it
    (a pre-pass measures the footprint). ``sample_rate`` (0 < R <= 1) samples blocks by
    spatial hashing (SHARDS for LRU, miniature simulations for other policies);
    ``sample_size`` bounds the LRU sample to that many blocks (fixed-size SHARDS).

    Returns a pandas DataFrame, one row per run and size: ``name``, ``size_blocks``,
    ``size_bytes``, ``misses``, ``miss_ratio``, ``miss_disk_blocks``, ``rgr``, and the
    curve's ``policy``, ``method`` (stack, shards, shards-fixed-size, simulation,
    mini-simulation), ``rate``, ``lookups`` and ``sampled_lookups``. Bad input raises a
    :class:`raidlab.RaidlabError` subclass naming the key (``sizes``, ``sample_rate``, ...).
    """
    return frame(curve_json(config, sizes=sizes, sample_rate=sample_rate, sample_size=sample_size, overrides=overrides))


def frame(curves: list[dict[str, Any]]) -> Any:
    """The DataFrame of :func:`curve` from its JSON shape."""
    import pandas as pd

    rows = []
    for item in curves:
        c = item["curve"]
        for p in c["points"]:
            row: dict[str, Any] = {"name": item["name"]}
            row.update({k: p[k] for k in POINT_COLUMNS})
            row.update({k: c[k] for k in CURVE_COLUMNS})
            rows.append(row)
    return pd.DataFrame(rows, columns=["name", *POINT_COLUMNS, *CURVE_COLUMNS])


def plot(df: Any, path: Path, title: str | None = None) -> Path:
    """Miss ratio and RGR against cache size (log scale), one line per run; a PNG at
    ``path``."""
    from raidlab.plotting import pyplot, save

    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.6))
    for name, part in df.groupby("name", sort=False):
        mib = part["size_bytes"] / 2**20
        left.plot(mib, part["miss_ratio"], marker=".", label=str(name))
        right.plot(mib, part["rgr"], marker=".", label=str(name))
    for ax, label in ((left, "miss ratio"), (right, "RGR (disk blocks read per lookup)")):
        ax.set_xscale("log")
        ax.set_xlabel("cache size (MiB)")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    right.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return save(fig, path)


def add_command(sub: Any, parse_set: Any) -> None:
    """Register ``raidlab curve`` on the CLI's subparsers (``parse_set`` reads ``--set``)."""
    c = sub.add_parser(
        "curve",
        help="miss ratio and cost-weighted RGR for every cache size, in one pass",
        description="Compute the cache curve of an experiment file in one pass: exact stack "
        "distances for LRU, SHARDS with --sample-rate/--sample-size, one simulation per size "
        "(miniature ones with --sample-rate) for other policies. See docs/curves.md.",
    )
    c.add_argument("experiment", help="experiment TOML file (as for raidlab run)")
    c.add_argument(
        "--sizes",
        action="append",
        metavar="S,S",
        help="cache sizes, comma-separated: blocks (4096) or with a unit (64MiB); default: 17 sizes up to the footprint",
    )
    g = c.add_mutually_exclusive_group()
    g.add_argument("--sample-rate", type=float, metavar="R", help="sample blocks at rate R in (0, 1] (SHARDS, mini-simulations)")
    g.add_argument("--sample-size", type=int, metavar="N", help="LRU: sample at most N blocks (fixed-size SHARDS)")
    c.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key (repeatable), as for run")
    c.add_argument("--json", action="store_true", help="print JSON for machines")
    c.add_argument("--plot", metavar="FILE", help="also write a PNG of miss ratio and RGR against size")
    c.set_defaults(func=lambda args, console: cmd_curve(args, console, parse_set))


def cmd_curve(args: Any, console: Any, parse_set: Any) -> int:
    from rich.markup import escape

    from raidlab import fit

    sizes = None
    if args.sizes:
        sizes = [s.strip() for item in args.sizes for s in item.split(",") if s.strip()]
    overrides = parse_set(args.set or []) or None
    curves = curve_json(
        args.experiment, sizes=sizes, sample_rate=args.sample_rate, sample_size=args.sample_size, overrides=overrides
    )
    df = frame(curves)
    if args.plot:
        plot(df, Path(args.plot), title=Path(args.experiment).name)
    if args.json:
        print(json.dumps({"version": _core.__version__, "curves": curves}, indent=2))
        return 0
    for item in curves:
        c = item["curve"]
        rate = "" if c["rate"] == 1 else f", sample rate {c['rate']:.4g}"
        console.print(
            f"[bold]{escape(item['name'])}[/bold]: {c['policy']}, {c['method']}{rate}; "
            f"{c['lookups']:,} lookups, {c['wall_s']:.2f} s",
            highlight=False,
        )
        pts = c["points"]
        cols = [
            fit.Column("blocks", [fit.cell(p["size_blocks"]) for p in pts]),
            fit.Column("misses", [fit.cell(p["misses"]) for p in pts]),
            fit.Column("miss ratio", [fit.cell(p["miss_ratio"], "{:.4f}") for p in pts]),
            fit.Column("RGR", [fit.cell(p["rgr"], "{:.4f}") for p in pts]),
        ]
        fit.print_table(console, "size", [size_label(p["size_bytes"]) for p in pts], cols)
    if args.plot:
        console.print(f"plot written to [bold]{escape(args.plot)}[/bold]", highlight=False)
    return 0


def size_label(nbytes: int) -> str:
    """Bytes in the largest binary unit that keeps 3 significant digits: ``64MiB``."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.3g}{unit}"
        value /= 1024
    return f"{nbytes}B"
