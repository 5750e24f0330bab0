"""raidlab: a trace-driven simulator of a cached RAID storage controller.

The simulation core is Rust (``raidlab._core``); this package adds the API, the CLI and
reproduction reports.
"""

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
from raidlab.curve import curve
from raidlab.reliability import Reliability, reliability
from raidlab.reliability import side_by_side as reliability_side_by_side
from raidlab.reliability import store_throughput as reliability_throughput
from raidlab.sweep import sweep  # the function shadows its module: raidlab.sweep is the function

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
