"""Reliability (MTTDL) and cost of write-cache architectures: the RAPID-Cache paper's model.

``raidlab.reliability()`` evaluates the closed-form model in the Rust core
(``crates/raidlab/src/reliability/``) for a ``[reliability]`` table; nothing is simulated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
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
    c.add_argument("--json", action="store_true", help="print JSON for machines")
    c.set_defaults(func=cmd_reliability)


def cmd_reliability(args: Any, console: Any) -> int:
    from rich.table import Table

    keys = [k for k, _ in FLOAT_KEYS] + ["write_cache_mb", "dedicated_cache_disk"]
    overrides = {k: getattr(args, k) for k in keys if getattr(args, k) is not None}
    result = reliability(args.config, **overrides)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return 0
    i = result.inputs
    title = (
        f"MTTDL (hours) and cost (US$); backup NVRAM {i['backup_nvram_mb']:g} MB, "
        f"cache disk space {i['cache_disk_mb']:g} MB"
        + (" + dedicated disk" if i["dedicated_cache_disk"] else "")
    )
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("read/write MB")
    for _, header in ARCHITECTURES:
        table.add_column(f"MTTDL {header}", justify="right")
    for _, header in ARCHITECTURES:
        table.add_column(f"$ {header}", justify="right")
    for read_mb, write_mb, by_arch in result.table():
        table.add_row(
            f"{read_mb:g}/{write_mb:g}",
            *(f"{by_arch[a]['mttdl_h']:.3g}" for a, _ in ARCHITECTURES),
            *(f"{by_arch[a]['cost_usd']:,.2f}" for a, _ in ARCHITECTURES),
        )
    console.print(table)
    return 0
