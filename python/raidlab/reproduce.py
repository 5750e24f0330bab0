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

The runs go through :func:`raidlab.sweep.run_tasks` into a result store at
``OUT/NAME/store`` (the same run ids as ``raidlab sweep`` of the file), so a reproduction
runs on every core or a Dask cluster, and an interrupted one resumes where it stopped.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from raidlab import _core, api, cost_aware, rapid, rapid_variants, store, wcache
from raidlab.progress import SweepBar
from raidlab.replicates import SEED_KEY
from raidlab.report import Section, write_report
from raidlab.sweep import Task, run_tasks, tasks


@dataclass
class Plan:
    """The runs of one experiment file that will execute, and those skipped (with why).

    ``trees`` have absolute trace paths (runnable from anywhere with :func:`raidlab.run`);
    ``tasks`` are the same runs as written in the file, for the sweep."""

    file: Path
    spec: dict[str, Any]
    trees: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)


def plan_file(path: Path, skip_traces: bool) -> Plan:
    try:
        spec = tomllib.loads(path.read_text(encoding="utf-8")).get("report", {})
    except tomllib.TOMLDecodeError as e:
        err = _core.ConfigError(f"{path}: {e}")
        err.key = ""
        raise err from None
    plan = Plan(path, spec)
    base = path.parent.resolve()
    kept = []
    for name, tree in api.load(path):
        tree["name"] = name
        as_written = json.loads(json.dumps(tree))
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
        kept.append((name, as_written))
    plan.tasks = tasks(kept, str(base), path.stem)
    return plan


# The repository's experiments (the package is installed from the repository, editable).
REPO_EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def experiments_dir(given: str | Path | None = None) -> Path:
    """Where experiment files are: ``given``; else ``$RAIDLAB_EXPERIMENTS``; else
    ``./experiments`` when it exists; else the repository's ``experiments/``, so that
    ``raidlab reproduce`` works from any directory."""
    import os

    if given is not None:
        return Path(given)
    env = os.environ.get("RAIDLAB_EXPERIMENTS")
    if env:
        return Path(env)
    here = Path("experiments")
    if here.is_dir() and any(here.glob("*.toml")):
        return here
    return REPO_EXPERIMENTS


def known(directory: Path) -> list[tuple[str, str]]:
    """``(name, title)`` of every experiment file in ``directory`` (title from ``[report]``)."""
    out = []
    for f in sorted(directory.glob("*.toml")):
        try:
            title = str(tomllib.loads(f.read_text(encoding="utf-8")).get("report", {}).get("title", ""))
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
            title = ""
        out.append((f.stem, title))
    return out


def reproduce(
    name: str,
    *,
    experiments_dir: Path,
    out_dir: Path,
    skip_traces: bool = False,
    threads: int | None = None,
    executor: Any = None,
    console: Console | None = None,
    exact: bool = False,
) -> Path:
    """Run every ``experiments_dir/NAME*.toml`` (only ``NAME.toml`` with ``exact``) and
    write ``out_dir/NAME/report.html``.

    ``threads``: local worker processes (default: cores); ``executor``: anything
    :func:`raidlab.sweep.sweep` takes (a Dask scheduler address or client)."""
    console = console or Console()
    files = sorted(experiments_dir.glob(f"{name}.toml" if exact else f"{name}*.toml"))
    if not files:
        import difflib

        names = [n for n, _ in known(experiments_dir)]
        near = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        listing = ", ".join(names) if names else "none"
        err = _core.ConfigError(
            f"no experiment files {experiments_dir}/{name}*.toml{hint} (known: {listing}; `raidlab reproduce` lists them)"
        )
        err.key = ""
        raise err
    sections = []
    for f in files:
        plan = plan_file(f, skip_traces)
        if plan.skipped:
            reasons: dict[str, int] = {}
            for line in plan.skipped:
                reason = line.partition(": ")[2] or line
                reasons[reason] = reasons.get(reason, 0) + 1
            for reason, n in reasons.items():
                console.print(
                    f"[yellow]skipped[/yellow] {n} run{'s' if n > 1 else ''} of {escape(f.name)}: {escape(reason)}",
                    highlight=False,
                )
        if not plan.tasks:
            sections.append(Section(f, plan.spec, None, plan.skipped))
            continue
        bar = SweepBar(console, f.name)
        store_dir = out_dir / name / "store"
        try:
            frame = run_tasks(plan.tasks, out=store_dir, executor=executor, workers=threads, progress=bar)
        finally:
            bar.close()
        failed = frame[frame["status"] != "done"]
        for _, row in failed.iterrows():
            plan.skipped.append(f"{row['name']}: failed: {row['error']}")
            console.print(f"[red]failed[/red] {row['name']}: {row['error']}", highlight=False)
        frame = frame[frame["status"] == "done"].drop(columns=["config", "status", "error"]).reset_index(drop=True)
        frame = drop_full(frame, plan)
        if not len(frame):
            sections.append(Section(f, plan.spec, None, plan.skipped))
            continue
        runs = StoredRuns.read(store_dir, frame)
        frame = wcache.augment(frame, runs, plan.spec)
        (out_dir / name).mkdir(parents=True, exist_ok=True)
        extra = wcache.plots(frame, runs, plan.spec, out_dir / name, f.stem)
        extra += rapid.views(frame, plan.spec, out_dir / name, f.stem)
        extra += rapid_variants.views(frame, plan.spec, out_dir / name, f.stem)
        extra += cost_aware.views(frame, plan.spec, out_dir / name, f.stem)
        wants_series = "series_plot" in plan.spec or "series" in plan.spec
        series = runs.series_frame(plan.spec.get("seeds", SEED_KEY)) if wants_series else None
        sections.append(Section(f, plan.spec, frame, plan.skipped, series, extra))
    return write_report(name, sections, out_dir / name, console)


def reproduce_store(name: str, *, experiments_dir: Path, out_dir: Path, console: Console | None = None) -> Path:
    """The store cells of ``experiments_dir/NAME.toml`` (its ``[report.store]``) on a served
    array with disk-timed members, beside the simulator's prediction: ``out_dir/NAME-store``
    (see :mod:`raidlab.storexp`)."""
    from raidlab import storexp

    console = console or Console()
    path = experiments_dir / f"{name}.toml"
    if not path.exists():
        err = _core.ConfigError(f"no experiment file {path} (`raidlab reproduce` lists them)")
        err.key = ""
        raise err
    return storexp.reproduce_store(plan_file(path, skip_traces=True), name, out_dir, console)


def drop_full(frame: Any, plan: Plan) -> Any:
    """With ``[report] drop_full``: the runs whose cache holds the workload's whole
    footprint (every policy then pays only compulsory misses) moved to the skipped list."""
    if not plan.spec.get("drop_full") or not {"capacity", "footprint_blocks"} <= set(frame.columns):
        return frame
    full = frame["capacity"] >= frame["footprint_blocks"]
    for _, row in frame[full].iterrows():
        plan.skipped.append(f"{row['name']}: the cache holds the whole footprint ({int(row['footprint_blocks']):,} blocks)")
    return frame[~full].reset_index(drop=True)


@dataclass
class StoredRun:
    """One finished run read back from the store: its metrics row, time series (columns)
    and ramp levels — the parts of :class:`raidlab.Run` that reports use. The series and the
    ramp are read on first use: most reports need neither."""

    store_dir: Path
    name: str
    metrics: dict[str, Any]

    def _read(self, kind: str) -> Any:
        import pandas as pd

        p = store.path(self.store_dir, kind, self.metrics["run_id"])
        return pd.read_parquet(p).drop(columns=["run_id"]) if p.exists() else None

    @cached_property
    def series(self) -> dict[str, list[Any]]:
        frame = self._read("series")
        return {} if frame is None else frame.to_dict("list")

    @cached_property
    def ramp(self) -> list[dict[str, Any]]:
        frame = self._read("ramp")
        return [] if frame is None else frame.to_dict("records")


@dataclass
class StoredRuns:
    """The finished runs of one experiment file, in the order of its frame."""

    runs: list[StoredRun]

    @staticmethod
    def read(store_dir: Path, frame: Any) -> "StoredRuns":
        return StoredRuns([StoredRun(store_dir, row["name"], row) for row in frame.to_dict("records")])

    def series_frame(self, seed_key: str = SEED_KEY) -> Any:
        """Every run's time series in one DataFrame with a ``name`` column (the shape of
        :meth:`raidlab.Result.series`), and the run's ``seed_key`` column when it has one
        (the experiment's ``[report] seeds``)."""
        import pandas as pd

        parts = []
        for r in self.runs:
            if r.series:
                part = pd.DataFrame(r.series)
                part.insert(0, "name", r.name)
                if seed_key in r.metrics:
                    # Replicates share their names; the seed tells their series apart.
                    part.insert(1, seed_key, r.metrics[seed_key])
                parts.append(part)
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
