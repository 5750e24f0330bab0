"""raidlab: a trace-driven simulator of a cached RAID storage controller.

The simulation core is Rust (``raidlab._core``); this package adds the API, the CLI and
reproduction reports.

``import raidlab`` loads only the core and :func:`raidlab.run`'s module: a script that runs
one simulation should not pay for what it does not use (pandas, pyarrow, the sweep
machinery). The other names below load their modules on first use.
"""

from __future__ import annotations

import importlib
import sys
import types

from raidlab._core import (
    ConfigError,
    FormatError,
    RaidlabError,
    RaidlabIOError,
    StoreError,
    TraceError,
    __version__,
)
from raidlab.api import Result, Run, load, run

# name -> (module, attribute), imported on first access.
_LAZY = {
    "curve": ("raidlab.curve", "curve"),
    "Reliability": ("raidlab.reliability", "Reliability"),
    "reliability": ("raidlab.reliability", "reliability"),
    "reliability_side_by_side": ("raidlab.reliability", "side_by_side"),
    "reliability_throughput": ("raidlab.reliability", "store_throughput"),
    "sweep": ("raidlab.sweep", "sweep"),
}
# Functions named like the module that defines them: ``raidlab.sweep`` is the function.
_SHADOWED = frozenset({"curve", "reliability", "sweep"})


def __getattr__(name: str) -> object:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'raidlab' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(types.ModuleType):
    """The package's module type. When a submodule finishes loading, the import system binds
    it to its name in the package (``raidlab.sweep = <module>``); for the modules whose name
    is also their function's, that binding is dropped, so the name keeps meaning the function
    (resolved by ``__getattr__``) as it did when these modules were imported eagerly."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "ConfigError",
    "FormatError",
    "RaidlabError",
    "RaidlabIOError",
    "Reliability",
    "Result",
    "Run",
    "StoreError",
    "TraceError",
    "__version__",
    "curve",
    "load",
    "reliability",
    "reliability_side_by_side",
    "reliability_throughput",
    "run",
    "sweep",
]
