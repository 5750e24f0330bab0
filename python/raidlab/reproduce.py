"""``raidlab reproduce NAME``: run ``experiments/NAME*.toml`` and write a report.

Each experiment file is an ordinary raidlab config (usually with ``[[runs]]`` and ``[sweep]``)
plus a ``[report]`` table saying how to present the results:

.. code-block:: toml

    [report]
    title = "VDF: RGR of read caches on a degraded RAID-5"
    rows = ["tags.workload", "array.disks", "cache.capacity_fraction"]  # pivot rows
    columns = "cache.policy"        # pivot columns
    value = "rgr"                   # metric in the cells
    compare = [["lru", "vdf-lru"]]  # relative reduction (base - new) / base per pair
    better = "lower"                # or "higher": then (new - base) / base (service rates)
    plot_x = "cache.capacity_fraction"
    plot_facets = ["tags.workload", "array.disks"]
    plot_logx = true

Runs on a trace file that is absent are skipped with a note in the report (the real traces
live outside the repository); ``skip_traces`` skips every trace run, for the demo.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from raidlab import _core, api, wcache
from raidlab.progress import run_with_progress
from raidlab.report import Section, write_report


@dataclass
class Plan:
    """The runs of one experiment file that will execute, and those skipped (with why)."""

    file: Path
    spec: dict[str, Any]
    trees: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def plan_file(path: Path, skip_traces: bool) -> Plan:
    try:
        spec = tomllib.loads(path.read_text(encoding="utf-8")).get("report", {})
    except tomllib.TOMLDecodeError as e:
        err = _core.ConfigError(f"{path}: {e}")
        err.key = ""
        raise err from None
    plan = Plan(path, spec)
    base = path.parent.resolve()
    for name, tree in api.load(path):
        tree["name"] = name
        trace = tree.get("workload", {}).get("trace")
        if trace is not None:
            resolved = (base / trace).resolve()
            if skip_traces:
                plan.skipped.append(f"{name}: trace runs are skipped in the demo (synthetic data only)")
                continue
            if not resolved.exists():
                plan.skipped.append(f"{name}: trace {trace} not found")
                continue
            tree["workload"]["trace"] = str(resolved)
        plan.trees.append(tree)
    return plan


def reproduce(
    name: str,
    *,
    experiments_dir: Path,
    out_dir: Path,
    skip_traces: bool = False,
    threads: int | None = None,
    console: Console | None = None,
) -> Path:
    """Run every ``experiments_dir/NAME*.toml`` and write ``out_dir/NAME/report.html``."""
    console = console or Console()
    files = sorted(experiments_dir.glob(f"{name}*.toml"))
    if not files:
        err = _core.ConfigError(f"no experiment files {experiments_dir}/{name}*.toml")
        err.key = ""
        raise err
    sections = []
    for f in files:
        plan = plan_file(f, skip_traces)
        if plan.skipped:
            console.print(
                f"[yellow]skipped[/yellow] {len(plan.skipped)} runs of {f.name} (see the report): {plan.skipped[0]}",
                highlight=False,
            )
        if not plan.trees:
            sections.append(Section(f, plan.spec, None, plan.skipped))
            continue
        result = run_with_progress({"runs": plan.trees}, console, f.name, threads)
        frame = wcache.augment(result.to_frame(), result, plan.spec)
        (out_dir / name).mkdir(parents=True, exist_ok=True)
        extra = wcache.plots(frame, result, plan.spec, out_dir / name, f.stem)
        sections.append(Section(f, plan.spec, frame, plan.skipped, extra))
    return write_report(name, sections, out_dir / name, console)
