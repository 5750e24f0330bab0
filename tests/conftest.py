"""Shared fixtures: where the real traces are (beside the repository, never in it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TRACES = Path(os.environ.get("RAIDLAB_TRACES", REPO.parent / "shared" / "traces"))


@pytest.fixture
def traces() -> Path:
    if not TRACES.is_dir():
        pytest.skip(f"real traces not found at {TRACES} (set RAIDLAB_TRACES)")
    return TRACES


def zipf_config(**cache: object) -> dict:
    """A small synthetic config; keyword arguments override the [cache] table."""
    cfg = {
        "workload": {"synthetic": {"kind": "zipf", "keys": 5000, "alpha": 0.9, "requests": 50_000, "seed": 3}},
        "cache": {"policy": "lru", "capacity_blocks": 500},
        "array": {"level": "raid5", "disks": 6, "failed": [2]},
    }
    cfg["cache"].update(cache)
    return cfg
