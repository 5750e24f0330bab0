"""Cost-aware read caches through the whole stack: on a healthy array each is its base policy
exactly (same misses, same RGR); with a failed disk each reads fewer blocks from the
survivors (lower RGR) than its base. Numbers in docs/read-caches.md."""

from __future__ import annotations

import pytest

import raidlab
from conftest import zipf_config

PAIRS = [
    ("lru", "greedydual"),
    ("lru", "vdf-lru"),
    ("clock", "vdf-clock"),
    ("sieve", "vdf-sieve"),
    ("arc", "vdf-arc"),
    ("s3fifo", "vdf-s3fifo"),
]


def _metrics(policy: str, failed: list[int]) -> dict:
    cfg = zipf_config(policy=policy)
    cfg["array"]["failed"] = failed
    return raidlab.run(cfg).metrics


@pytest.mark.parametrize(("base", "aware"), PAIRS)
def test_healthy_cost_aware_policy_is_its_base(base: str, aware: str) -> None:
    a, b = _metrics(base, []), _metrics(aware, [])
    assert (a["misses"], a["rgr"]) == (b["misses"], b["rgr"])


@pytest.mark.parametrize(("base", "aware"), PAIRS)
def test_degraded_cost_aware_policy_reads_less_from_survivors(base: str, aware: str) -> None:
    a, b = _metrics(base, [2]), _metrics(aware, [2])
    # Fewer survivor reads for somewhat more misses: the trade VDF makes (about 10 % here).
    assert b["rgr"] < 0.95 * a["rgr"]
    assert b["misses"] >= a["misses"]
