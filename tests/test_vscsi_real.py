"""libCacheSim's vscsi binary and the CSV of the same CloudPhysics trace read the same
requests: the stats and a degraded-array counting run agree exactly."""

from __future__ import annotations

from pathlib import Path

import raidlab
from raidlab.stats import trace_stats

KEYS = ("requests", "reads", "writes", "footprint_blocks", "total_bytes")


def test_vscsi_equals_the_csv_of_the_same_trace(traces: Path) -> None:
    base = traces / "cloudphysics" / "cloudPhysicsIO"
    binary, text = base.with_suffix(".vscsi"), base.with_suffix(".csv")
    vs, csv = trace_stats(binary), trace_stats(text)
    assert vs["format"] == "vscsi"  # sniffed
    assert {k: vs[k] for k in KEYS} == {k: csv[k] for k in KEYS}
    assert (vs["requests"], vs["reads"]) == (113_872, 46_974)  # the traces README's count

    def run(path: Path, fmt: str) -> dict:
        cfg = {
            "workload": {"trace": str(path), "format": fmt, "ops": "reads"},
            "cache": {"policy": "vdf-lru", "capacity_blocks": 4096},
            "array": {"level": "raid5", "disks": 5, "failed": [0]},
        }
        m = raidlab.run(cfg).runs[0].metrics
        return {k: m[k] for k in ("hits", "misses", "disk_reads_total", "rgr")}

    assert run(binary, "vscsi") == run(text, "cloudphysics")
