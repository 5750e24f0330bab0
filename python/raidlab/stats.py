"""``raidlab trace stats``: a streaming summary of a trace file (computed in the core)."""

from __future__ import annotations

import json
import os
from typing import Any

from raidlab import _core


def trace_stats(
    path: str | os.PathLike[str],
    fmt: str = "auto",
    block_size: int = 4096,
    limit: int | None = None,
    device: int | None = None,
) -> dict[str, Any]:
    """Requests, read share, footprint, request-size histogram and time span of a trace (its
    first ``limit`` requests, of one ``device`` of a multi-device trace).

    The footprint is the simulator's: distinct ``block_size`` blocks touched, in bytes those
    blocks times ``block_size`` (distinct keys and their sizes for key traces). Key streams
    without sizes have ``sized = False`` and no byte figures.

    Raises a :class:`raidlab.RaidlabError` subclass naming the file and line for bad input.
    """
    return json.loads(_core.trace_stats(os.fspath(path), fmt, block_size, limit, device))
