"""The Python API: ``raidlab.run(config) -> Result``.

A config is a TOML file (path) or a dict of the same shape. Validation happens in the Rust
core, which raises a subclass of :class:`raidlab.RaidlabError` naming the file and line or
the key path.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from raidlab import _core

Config = Mapping[str, Any] | str | os.PathLike[str]
ProgressFn = Callable[[int, int, int], None]


@dataclass(frozen=True)
class Run:
    """One run of a config: its name, the merged config it ran, and its metrics."""

    name: str
    config: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Result:
    """Results of every run of one config, in config order."""

    runs: list[Run]
    version: str = _core.__version__

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

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` shape: one object for a single run, ``{"runs": [...]}`` otherwise."""
        items = [
            {"name": r.name, "metrics": r.metrics, "config": r.config, "version": self.version}
            for r in self.runs
        ]
        if len(items) == 1:
            return items[0]
        return {"runs": items, "version": self.version}


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


def load(config: Config) -> list[tuple[str, dict[str, Any]]]:
    """Validate a config without running it: ``[(run name, merged config), ...]``."""
    text, file, base = _source(config)
    return [(name, json.loads(tree)) for name, tree in _core.load_config(text, file, base)]


def run(config: Config, *, threads: int | None = None, progress: ProgressFn | None = None) -> Result:
    """Run every run of ``config`` and return their metrics.

    ``threads`` runs independent runs in parallel (default: the machine's cores); results do
    not depend on it. ``progress(runs_done, runs_total, requests)`` is called now and then.
    """
    text, file, base = _source(config)
    n = threads if threads is not None else (os.cpu_count() or 1)
    out = _core.run(text, file, base, max(1, n), progress)
    runs = [Run(name, json.loads(cfg), json.loads(metrics)) for name, metrics, cfg in out]
    return Result(runs)
