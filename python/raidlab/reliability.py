"""Reliability (MTTDL) and cost of write-cache architectures: the RAPID-Cache paper's model.

``raidlab.reliability()`` evaluates the closed-form model in the Rust core
(``crates/raidlab/src/reliability/``) for a ``[reliability]`` table; nothing is simulated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raidlab import _core
from raidlab.api import Config, _source

# Architectures in the order of the paper's Table 3, with their column headers, then the
# triple RAPID-Cache (raidlab's derivation; see docs/reliability.md).
ARCHITECTURES = [
    ("single-nvram", "single NVRAM"),
    ("dual-nvram", "dual NVRAM"),
    ("rapid-dp", "RAPID DRAM primary"),
    ("rapid-np", "RAPID NVRAM primary"),
    ("triple-rapid", "triple RAPID (DRAM)"),
]


@dataclass(frozen=True)
class Reliability:
    """The model's inputs (every key, defaults filled in) and one row per architecture and
    write-cache size: ``read_cache_mb``, ``write_cache_mb``, ``architecture``, ``mttdl_h``,
    ``cost_usd``."""

    inputs: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    version: str = _core.__version__

    def to_frame(self) -> Any:
        """The rows as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.rows)

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` shape."""
        return {"inputs": self.inputs, "rows": self.rows, "version": self.version}

    def table(self) -> list[tuple[float, float, dict[str, dict[str, float]]]]:
        """Rows grouped as the paper prints them: ``(read MB, write MB, {architecture:
        {"mttdl_h", "cost_usd"}})`` per write-cache size, in input order."""
        out: list[tuple[float, float, dict[str, dict[str, float]]]] = []
        for r in self.rows:
            if not out or out[-1][1] != r["write_cache_mb"]:
                out.append((r["read_cache_mb"], r["write_cache_mb"], {}))
            out[-1][2][r["architecture"]] = {"mttdl_h": r["mttdl_h"], "cost_usd": r["cost_usd"]}
        return out


def reliability(config: Config | None = None, **inputs: Any) -> Reliability:
    """Evaluate the model. ``config`` is a TOML file or a dict holding a ``[reliability]``
    table (or nothing: the paper's defaults); keyword arguments override keys of that table,
    e.g. ``reliability(backup_nvram_mb=4, write_cache_mb=[16, 32, 64])``.

    Bad values raise :class:`raidlab.ConfigError` whose ``key`` names them
    (``reliability.mttf_nvram_h``).
    """
    if config is None:
        text, file = "{}", None
    else:
        text, file, _ = _source(config)
    overrides = json.dumps({"reliability": inputs}) if inputs else None
    out = json.loads(_core.reliability(text, file, overrides))
    return Reliability(out["inputs"], out["rows"])


# What each architecture of the model runs as in timed mode: (backup kind, cache disk). A
# single NVRAM and a dual NVRAM perform alike (the mirror never makes a write wait), so both
# take the dual-NVRAM baseline's throughput; RAPID's throughput does not depend on whether its
# primary is DRAM or NVRAM, only on where its cache disk is.
SIMULATED = {
    "single-nvram": ("dual", ""),
    "dual-nvram": ("dual", ""),
    "rapid-dp": ("rapid", None),
    "rapid-np": ("rapid", None),
    "triple-rapid": ("triple", None),
}
CACHE_DISKS = ("physical", "logical")


Throughput = dict[tuple[float, str, str], dict[str, dict[str, Any]]]


def store_throughput(out: Path | str, limit_ms: float = 20.0) -> Throughput:
    """Maximum throughput (req/s at a ``limit_ms`` mean response, as ``raidlab.rapid``
    computes it) of every backup configuration in a result store of RAPID reproductions
    (``raidlab reproduce rapid --out OUT`` writes ``OUT/rapid/store``): keyed by
    ``(write cache MB, backup kind, cache disk or "")``, per workload preset (or trace path)
    ``{"iops": rate, "knee": bool}``; ``knee`` is false when the curve never reached
    ``limit_ms`` (``iops`` is then its highest rate, a lower bound). Raises :class:`raidlab.store.StoreError` when the store holds no timed runs
    with a ``[backup]`` swept over ``workload.synthetic.rate_iops``."""
    from raidlab import rapid, store

    frame = store.query(Path(out), "SELECT * FROM runs")
    need = ["bk_kind", rapid.RATE, "write_cache.capacity_pages", "workload.block_size", "latency_mean_ms"]
    missing = [c for c in need if c not in frame.columns]
    if missing or not frame["bk_kind"].notna().any():
        err = store.StoreError(f"{out}: no RAPID reproduction runs (timed runs with a [backup] swept over {rapid.RATE}); missing {missing or ['bk_kind values']}")
        err.file = str(out)
        raise err
    frame = frame[frame["bk_kind"].notna()]
    # Only split caches without failure events are the architectures the model compares (the
    # recovery and unified-cache experiments share the store).
    if "bk_failures" in frame.columns:
        frame = frame[frame["bk_failures"].fillna(0) == 0]
    if "write_cache.unified" in frame.columns:
        frame = frame[frame["write_cache.unified"].fillna(False) != True]  # noqa: E712
    frame = frame.copy()
    frame["write_mb"] = frame["write_cache.capacity_pages"] * frame["workload.block_size"] / float(1 << 20)
    disk = frame["bk_cache_disk"] if "bk_cache_disk" in frame.columns else None
    frame["arch"] = [f"{k}|{d if isinstance(d, str) else ''}" for k, d in zip(frame["bk_kind"], disk if disk is not None else [""] * len(frame))]
    workload = "workload.synthetic.preset" if "workload.synthetic.preset" in frame.columns else "workload.trace.path"
    frame[workload] = frame[workload].fillna("-") if workload in frame.columns else "-"
    # A store of `raidlab reproduce rapid` also holds other experiments' curves (Fig 10's NVRAM
    # sizes, Fig 12's segments): keep each backup configuration's curve apart and take, per
    # size, architecture and workload, the one swept over the most request rates (Table 4's).
    keys = [c for c in ("backup.nvram_kib", "backup.segment_kib", "backup.segment_buffers", "backup.disk_mib") if c in frame.columns]
    frame["curve"] = [repr(tuple(v)) for v in frame[keys].itertuples(index=False)] if keys else ""
    chosen: dict[tuple[float, str, str, str], dict[float, float]] = {}
    for (write_mb, arch, wl, _curve), g in frame.groupby(["write_mb", "arch", workload, "curve"], sort=True):
        kind, cache_disk = str(arch).split("|")
        key = (float(write_mb), kind, cache_disk, str(wl))
        curve = {float(r): float(m) for r, m in zip(g[rapid.RATE], g["latency_mean_ms"])}
        if len(curve) > len(chosen.get(key, {})):
            chosen[key] = curve
    # Compare architectures at the same rates: a curve swept more finely (one shared with
    # another experiment) would otherwise find its knee more precisely than the others.
    common: dict[tuple[float, str], set[float]] = {}
    for (write_mb, _kind, _disk, wl), curve in chosen.items():
        have = common.get((write_mb, wl))
        common[(write_mb, wl)] = set(curve) if have is None else have & set(curve)
    out_map: Throughput = {}
    for (write_mb, kind, cache_disk, wl), curve in chosen.items():
        rates = sorted(common[(write_mb, wl)])
        if not rates:
            continue
        ms = [curve[r] for r in rates]
        value = rapid.crossing(rates, ms, limit_ms)
        out_map.setdefault((write_mb, kind, cache_disk), {})[wl] = {"iops": value, "knee": max(ms) >= limit_ms}
    return out_map


def side_by_side(result: Reliability, throughput: Throughput) -> list[dict[str, Any]]:
    """One row per write-cache size, architecture and (for RAPID) cache disk: the model's MTTDL
    and cost beside the measured maximum throughput per workload (``None`` where the store has
    no run of that size)."""
    rows = []
    for read_mb, write_mb, by_arch in result.table():
        for arch, header in ARCHITECTURES:
            kind, fixed = SIMULATED[arch]
            for cache_disk in (fixed,) if fixed is not None else CACHE_DISKS:
                perf = throughput.get((float(write_mb), kind, cache_disk))
                rows.append(
                    {
                        "read_cache_mb": read_mb,
                        "write_cache_mb": write_mb,
                        "architecture": arch,
                        "label": header + (f", {cache_disk} cache disk" if cache_disk else ""),
                        "cache_disk": cache_disk,
                        "mttdl_h": by_arch[arch]["mttdl_h"],
                        "cost_usd": by_arch[arch]["cost_usd"],
                        "max_throughput_iops": perf,
                    }
                )
    return rows


# ---------------------------------------------------------------------------------------
# The `raidlab reliability` command (registered by raidlab.cli).

# Numeric keys of [reliability] that the command takes as --flags (dashes for underscores).
FLOAT_KEYS = [
    ("read_cache_mb", "DRAM read cache, MB (default 64)"),
    ("backup_nvram_mb", "backup NVRAM of RAPID, MB (default 2; the paper's MTTDL column needs 4)"),
    ("module_mb", "memory module size, MB (default 1)"),
    ("mttf_nvram_h", "MTTF of an NVRAM module, hours (default 200000)"),
    ("mttf_dram_h", "MTTF of a DRAM module, hours (default 200000)"),
    ("mttf_disk_h", "MTTF of the cache disk, hours (default 1e6)"),
    ("mttr_h", "mean time to repair, hours (default 48)"),
    ("mttpf_h", "mean time to power failure, hours (default 4300)"),
    ("mttf_ups_h", "MTTF of the UPS, hours (default 200000)"),
    ("mtthf_h", "mean time to hardware failure, hours (default 720)"),
    ("dram_usd_per_mb", "DRAM price, $/MB (default 0.5)"),
    ("nvram_usd_per_mb", "NVRAM price, $/MB (default 55)"),
    ("disk_usd_per_mb", "disk space price, $/MB (default 0.005)"),
    ("cache_disk_mb", "log space of RAPID on disk, MB (default 256)"),
    ("cache_disk_usd", "price of a dedicated cache disk, $ (default 100)"),
]


def add_command(sub: Any, bad_input: int) -> None:
    """Register ``raidlab reliability`` on the CLI's subparsers."""
    c = sub.add_parser(
        "reliability",
        help="MTTDL and cost of single/dual NVRAM and RAPID write caches",
        description="Evaluate the RAPID-Cache paper's reliability and cost model "
        f"(exit {bad_input} on a bad value).",
    )
    c.add_argument("config", nargs="?", help="TOML file with a [reliability] table")
    c.add_argument("--write-cache-mb", type=float, nargs="+", metavar="MB", help="write cache sizes (default 16 32 64)")
    for key, helptext in FLOAT_KEYS:
        c.add_argument("--" + key.replace("_", "-"), type=float, dest=key, metavar="X", help=helptext)
    c.add_argument("--dedicated-cache-disk", action="store_true", default=None, help="RAPID buys its own cache disk")
    c.add_argument(
        "--throughput",
        metavar="STORE",
        help="result store of `raidlab reproduce rapid` (OUT/rapid/store): add each architecture's measured maximum throughput",
    )
    c.add_argument("--json", action="store_true", help="print JSON for machines")
    c.set_defaults(func=cmd_reliability)


def cmd_reliability(args: Any, console: Any) -> int:
    from raidlab import fit

    keys = [k for k, _ in FLOAT_KEYS] + ["write_cache_mb", "dedicated_cache_disk"]
    overrides = {k: getattr(args, k) for k in keys if getattr(args, k) is not None}
    result = reliability(args.config, **overrides)
    combined = side_by_side(result, store_throughput(args.throughput)) if args.throughput else None
    if args.json:
        doc = result.to_json()
        if combined is not None:
            doc["side_by_side"] = combined
        print(json.dumps(doc, indent=2))
        return 0
    if combined is not None:
        _side_by_side_table(result, combined, console)
        return 0
    i = result.inputs
    title = (
        f"MTTDL (hours) and cost (US$); backup NVRAM {i['backup_nvram_mb']:g} MB, "
        f"cache disk space {i['cache_disk_mb']:g} MB"
        + (" + dedicated disk" if i["dedicated_cache_disk"] else "")
    )
    rows = result.table()
    # Tables that fit the terminal (numbers never cut): one per quantity.
    labels = [f"{read_mb:g}/{write_mb:g}" for read_mb, write_mb, _ in rows]
    console.print(title, highlight=False)
    for what, key, fmt in (("MTTDL (hours)", "mttdl_h", "{:.3g}"), ("cost (US$)", "cost_usd", "{:,.2f}")):
        cols = [fit.Column(header, [fmt.format(by_arch[a][key]) for _, _, by_arch in rows]) for a, header in ARCHITECTURES]
        fit.print_table(console, "read/write MB", labels, cols, title=what)
    return 0


def _side_by_side_table(result: Reliability, rows: list[dict[str, Any]], console: Any) -> None:
    from raidlab import fit

    i = result.inputs
    workloads = sorted({w for r in rows if r["max_throughput_iops"] for w in r["max_throughput_iops"]})
    title = (
        f"Performance, reliability and cost; backup NVRAM {i['backup_nvram_mb']:g} MB; "
        "maximum throughput (req/s at a 20 ms mean response; >: never reached)"
    )
    perf = [r["max_throughput_iops"] or {} for r in rows]
    cols = [
        fit.Column("architecture", [r["label"] for r in rows], numeric=False),
        fit.Column("MTTDL h", [f"{r['mttdl_h']:.3g}" for r in rows]),
        fit.Column("cost $", [f"{r['cost_usd']:,.2f}" for r in rows]),
        *(
            fit.Column(
                f"req/s {w}",
                [(">" if not p[w]["knee"] else "") + f"{p[w]['iops']:,.0f}" if w in p else "-" for p in perf],
            )
            for w in workloads
        ),
    ]
    labels = [f"{r['read_cache_mb']:g}/{r['write_cache_mb']:g}" for r in rows]
    fit.print_table(console, "read/write MB", labels, cols, title=title)
