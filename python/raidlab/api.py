"""The Python API: ``raidlab.run(config) -> Result``.

A config is a TOML file (path) or a dict of the same shape. Validation happens in the Rust
core, which raises a subclass of :class:`raidlab.RaidlabError` naming the file and line or
the key path. ``overrides`` (dotted key -> value, as ``raidlab run --set`` gives them) are
applied to every run last.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping

from raidlab import _core

# `typing` and `dataclasses` cost more to import than a short run takes to set up, so this
# module (the one `import raidlab` loads) does without them at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

Config = Mapping[str, object] | str | os.PathLike[str]
ProgressFn = Callable[[int, int, int], None]


class _Record:
    """What a frozen dataclass gives, without importing ``dataclasses``: construction by
    position or keyword, equality and repr field by field, no assignment afterwards."""

    _fields: tuple[str, ...] = ()

    def _init(self, **values: Any) -> None:
        self.__dict__.update(values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._fields)

    __hash__ = None  # type: ignore[assignment]  # fields are dicts and lists

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__qualname__}({fields})"


class Run(_Record):
    """One run of a config: its name, the config it ran (defaults filled in), and its
    metrics.

    Timed runs also carry a time series (``series``: column name -> values, one row per
    ``run.interval_s``) and, with the ramp driver, one point per load level (``ramp``).
    """

    _fields = ("name", "config", "metrics", "series", "ramp")
    name: str
    config: dict[str, Any]
    metrics: dict[str, Any]
    series: dict[str, list[Any]]
    ramp: list[dict[str, Any]]

    def __init__(
        self,
        name: str,
        config: dict[str, Any],
        metrics: dict[str, Any] | None = None,
        series: dict[str, list[Any]] | None = None,
        ramp: list[dict[str, Any]] | None = None,
    ) -> None:
        self._init(
            name=name,
            config=config,
            metrics={} if metrics is None else metrics,
            series={} if series is None else series,
            ramp=[] if ramp is None else ramp,
        )

    def series_frame(self) -> Any:
        """The time series as a DataFrame: ``t_s`` (end of each interval), ``iops``,
        ``mean_ms``, ``outstanding``, ``util_<disk>``, ``queue_<disk>``."""
        import pandas as pd

        return pd.DataFrame(self.series)

    def ramp_frame(self) -> Any:
        """The ramp's throughput-response curve as a DataFrame, one row per level."""
        import pandas as pd

        return pd.DataFrame(self.ramp)


class Result(_Record):
    """Results of every run of one config, in config order."""

    _fields = ("runs", "version")
    runs: list[Run]
    version: str

    def __init__(self, runs: list[Run], version: str = _core.__version__) -> None:
        self._init(runs=runs, version=version)

    @property
    def metrics(self) -> dict[str, Any]:
        """Metrics of the config's only run."""
        if len(self.runs) != 1:
            raise ValueError(f"config has {len(self.runs)} runs; use .runs or .to_frame()")
        return self.runs[0].metrics

    def to_frame(self) -> Any:
        """A pandas DataFrame, one row per run: ``name``, the config's leaf keys (dotted)
        and the metrics."""
        import pandas as pd

        rows = []
        for r in self.runs:
            row: dict[str, Any] = {"name": r.name}
            row.update(flatten(r.config))
            row.update(r.metrics)
            rows.append(row)
        return pd.DataFrame(rows)

    def series(self) -> Any:
        """Every timed run's time series in one DataFrame, with a ``name`` column."""
        return self._stacked(lambda r: r.series_frame())

    def ramp(self) -> Any:
        """Every ramp run's levels in one DataFrame, with a ``name`` column."""
        return self._stacked(lambda r: r.ramp_frame())

    def _stacked(self, frame: Callable[[Run], Any]) -> Any:
        import pandas as pd

        parts = []
        for r in self.runs:
            f = frame(r)
            if len(f):
                f.insert(0, "name", r.name)
                parts.append(f)
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` shape, the same for one run or many (``docs/run.schema.json``):
        ``{"version", "runs": [{"name", "config", "metrics"}, ...]}``; timed runs add
        ``series`` and ``ramp``. ``config`` is the resolved config (defaults filled in)."""
        items = []
        for r in self.runs:
            item: dict[str, Any] = {"name": r.name, "config": r.config, "metrics": r.metrics}
            if r.series:
                item["series"] = r.series
            if r.ramp:
                item["ramp"] = r.ramp
            items.append(item)
        return {"version": self.version, "runs": items}


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists stay values)."""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _source(config: Config) -> tuple[str, str | None, str | None]:
    """(text, file name or None for JSON, base directory for relative trace paths)."""
    if isinstance(config, Mapping):
        return json.dumps(config), None, os.getcwd()
    from pathlib import Path

    path = Path(config)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        err = _core.RaidlabIOError(f"{path}: {e.strerror or e}")
        err.file = str(path)
        raise err from None
    except UnicodeDecodeError as e:
        err = _core.ConfigError(f"{path}: not UTF-8 text ({e.reason})")
        err.key = ""
        raise err from None
    return text, str(path), str(path.parent.resolve())


def key_path(key: str) -> list[str]:
    """A dotted key as TOML reads it: ``cache.policy`` -> ``["cache", "policy"]``,
    ``sweep."cache.policy"`` -> ``["sweep", "cache.policy"]``."""
    import tomllib

    try:
        node: Any = tomllib.loads(f"{key} = 0")
    except tomllib.TOMLDecodeError:
        err = _core.ConfigError(f"config key `{key}`: not a key (write dotted parts in quotes: sweep.\"cache.policy\")")
        err.key = key
        raise err from None
    path = []
    while isinstance(node, dict):
        (part, node), *_ = node.items()
        path.append(part)
    return path


def nest(overrides: Mapping[str, Any] | None) -> str | None:
    """``{"cache.policy": "arc"}`` -> the JSON text of ``{"cache": {"policy": "arc"}}``."""
    if not overrides:
        return None
    tree: dict[str, Any] = {}
    for key, value in overrides.items():
        node = tree
        *parents, leaf = key_path(key)
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                err = _core.ConfigError(f"config key `{key}`: {part} is set to a value and used as a table")
                err.key = key
                raise err
        node[leaf] = value
    return json.dumps(tree)


def load(
    config: Config, *, overrides: Mapping[str, Any] | None = None, resolved: bool = False
) -> list[tuple[str, dict[str, Any]]]:
    """Validate a config without running it: ``[(run name, merged config), ...]`` (with
    ``resolved``, the configs have their defaults filled in)."""
    text, file, base = _source(config)
    runs = _core.load_config(text, file, base, nest(overrides), resolved)
    return [(name, json.loads(tree)) for name, tree in runs]


def run(
    config: Config,
    *,
    threads: int | None = None,
    progress: ProgressFn | None = None,
    overrides: Mapping[str, Any] | None = None,
    workload_thread: bool | None = None,
) -> Result:
    """Run every run of ``config`` and return their metrics.

    ``threads`` runs independent runs in parallel (default: the machine's cores); results do
    not depend on it. ``workload_thread``: draw each run's workload on a thread of its own
    (default: when the runs going at once leave a core for it; ``docs/config.md``, "The
    workload thread"); results do not depend on it either. ``progress(runs_done, runs_total, requests)`` is called now and then;
    a callback with ``progress.prepass = True`` gets a fourth argument, the requests a
    footprint pre-pass (``capacity_fraction``) has read so far (0 when none is running).
    If a run fails, the others still run; the first failure is raised with the runs that
    finished as its ``finished`` attribute (a :class:`Result`).
    """
    text, file, base = _source(config)
    n = threads if threads is not None else _core.cores()
    report = None
    if progress is not None:
        # The core also says how far a footprint pre-pass has read; callbacks that take it
        # (``progress.prepass = True``) get it as a fourth argument.
        wants = bool(getattr(progress, "prepass", False))
        cb = progress

        def report(done: int, total: int, requests: int, prepass: int) -> None:
            if wants:
                cb(done, total, requests, prepass)  # type: ignore[call-arg]
            else:
                cb(done, total, requests)

    out = _core.run(text, file, base, max(1, n), report, nest(overrides), workload_thread)
    runs = []
    failed: BaseException | None = None
    for name, metrics_json, cfg, err in out:
        if metrics_json is None:
            failed = failed or err
            continue
        metrics = json.loads(metrics_json)
        series = metrics.pop("series", {})
        ramp = metrics.pop("ramp", [])
        runs.append(Run(name, json.loads(cfg), metrics, series, ramp))
    if failed is not None:
        failed.finished = Result(runs)  # type: ignore[attr-defined]
        raise failed
    return Result(runs)
