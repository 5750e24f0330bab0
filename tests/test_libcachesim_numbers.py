"""libCacheSim cross-check through the whole stack (reader, engine, policy): object mode on
the CloudPhysics oracleGeneral trace and block mode on its CSV keys give exactly the miss
counts in ../shared/traces/README.md (libCacheSim's own test expectations)."""

from __future__ import annotations

import pytest

import raidlab

MIB = 1 << 20
SIZES_MIB = [128, 256, 384, 512, 640, 768, 896, 1024]
EXPECTED = {
    "lru": [93374, 89783, 83572, 81722, 72494, 72104, 71972, 71704],
    "fifo": [93403, 89386, 84387, 84025, 72498, 72228, 72182, 72140],
    "clock": [93313, 89775, 83411, 81328, 74815, 72283, 71927, 64456],
    "lfu": [91699, 86720, 78578, 76707, 69945, 66221, 64445, 64376],
    "arc": [90252, 85861, 78168, 74297, 67381, 65685, 64439, 64772],
}


@pytest.mark.parametrize("policy", sorted(EXPECTED))
def test_object_mode_miss_counts(traces, policy: str) -> None:
    cfg = {
        "workload": {"trace": str(traces / "cloudphysics" / "cloudPhysicsIO.oracleGeneral.bin"), "format": "auto"},
        "cache": {"policy": policy, "unit": "object", "capacity_bytes": 128 * MIB},
        "sweep": {"cache.capacity_bytes": [s * MIB for s in SIZES_MIB]},
    }
    runs = raidlab.run(cfg).runs
    assert [r.metrics["requests"] for r in runs] == [113_872] * 8
    assert [r.metrics["misses"] for r in runs] == EXPECTED[policy]


def test_block_mode_lru_on_csv_keys(traces, tmp_path) -> None:
    """`cloudPhysicsIO.txt` semantics: the lbn column as the key, size 1. The CSV's lbn is in
    512 B sectors, so 512 B blocks without splitting make one access per request to its lbn;
    libCacheSim looks writes up like reads (`writes = "access"`)."""
    cfg = {
        "workload": {
            "trace": str(traces / "cloudphysics" / "cloudPhysicsIO.csv"),
            "format": "cloudphysics",
            "ops": "all",
            "block_size": 512,
            "split": False,
        },
        "cache": {"policy": "lru", "capacity_blocks": 128, "writes": "access"},
        "sweep": {"cache.capacity_blocks": [128 * k for k in range(1, 9)]},
    }
    misses = [r.metrics["misses"] for r in raidlab.run(cfg).runs]
    assert misses == [99411, 96397, 95652, 95370, 95182, 94997, 94891, 94816]
