"""Scale: memory that stays flat from 10 M to 1 B requests, and the rate at 1 B.

    python benches/bench_scale.py [--requests N] [--base-requests N] [--keys N] [--skip-curve]

Two measurements, each at ``--base-requests`` (10 M) and at ``--requests`` (1 B), each in a
fresh child process that reports its own peak RSS (``VmHWM``), wall time and result:

1. A counting-mode run of a built-in generator: Zipf(0.9) over ``--keys`` (1 M) blocks
   through an LRU cache of a tenth of them on a degraded RAID-5 (5 disks, disk 2 failed).
2. A sampled curve of the same stream (SHARDS at R = 0.01, the 17 sizes of the default grid
   over the keys).

Prints peak RSS, wall time and requests per second of each, and the ratio of the peak RSS at
``--requests`` to that at ``--base-requests`` (flat memory: ~1). A full 1 B-request run takes
a few minutes per measurement; ``--requests 100000000`` scales it down. Nothing here is a
pass/fail test; the numbers go to docs/bench.md ("Cache curves").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench_count import peak_rss_kib
from bench_curve import RAID5_DEGRADED, grid
from benchlib import load, measure_child

# A child: one job (JSON on stdin) -> wall time, peak RSS and the result.
CHILD = f"""
import json, sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from bench_scale import child
print(json.dumps(child(json.loads(sys.stdin.read()))))
"""


def config(requests: int, keys: int) -> dict[str, Any]:
    return {
        "workload": {"synthetic": {"kind": "zipf", "keys": keys, "alpha": 0.9, "requests": requests, "seed": 7}},
        "cache": {"policy": "lru", "capacity_blocks": max(1, keys // 10)},
        "array": RAID5_DEGRADED,
    }


def child(job: dict[str, Any]) -> dict[str, Any]:
    """Run one job in this process: ``{"kind": "run" | "curve", "requests", "keys"}``."""
    import time

    import raidlab

    cfg = config(job["requests"], job["keys"])
    before_kib = peak_rss_kib()
    start = time.perf_counter()
    if job["kind"] == "run":
        m = raidlab.run(cfg, threads=1).metrics
        out: dict[str, Any] = {k: m[k] for k in ("requests", "lookups", "misses", "rgr", "metadata_bytes")}
        out["core_wall_s"] = m["wall_s"]
    else:
        from raidlab.curve import curve_json

        (item,) = curve_json(cfg, sizes=grid(job["keys"]), sample_rate=0.01)
        c = item["curve"]
        out = {"requests": c["requests"], "state_bytes": c["state_bytes"], "core_wall_s": c["wall_s"]}
    out["wall_s"] = time.perf_counter() - start
    out["rss_kib"] = peak_rss_kib()
    out["rss_before_kib"] = before_kib
    return out


def measure(kind: str, requests: int, keys: int) -> dict[str, Any]:
    r = measure_child(CHILD, json.dumps({"kind": kind, "requests": requests, "keys": keys}))
    assert r["requests"] == requests, (r["requests"], requests)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000_000)
    ap.add_argument("--base-requests", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--skip-curve", action="store_true", help="the counting run only")
    a = ap.parse_args()
    kinds = [("run", "counting run, LRU at 10 % of the keys"), ("curve", "SHARDS curve, R = 0.01, 17 sizes")]
    if a.skip_curve:
        kinds = kinds[:1]
    print(f"Zipf(0.9) over {a.keys:,} keys, degraded RAID-5 (5 disks, disk 2 failed); {load()}")
    for kind, label in kinds:
        print(f"{label}:")
        rss = {}
        for n in (a.base_requests, a.requests):
            r = measure(kind, n, a.keys)
            rss[n] = r["rss_kib"]
            extra = f"state {r['state_bytes'] / 2**20:.2f} MiB" if kind == "curve" else f"misses {r['misses']:,}, policy {r['metadata_bytes'] / 2**20:.1f} MiB"
            print(
                f"  {n:>13,} requests: peak RSS {r['rss_kib'] / 1024:6.1f} MiB (after import {r['rss_before_kib'] / 1024:5.1f}), "
                f"{r['wall_s']:7.1f} s, {n / r['wall_s'] / 1e6:5.2f} M req/s ({n / r['core_wall_s'] / 1e6:5.2f} in the core), "
                f"{extra}; {load()}",
                flush=True,
            )
        print(f"  peak RSS ratio {a.requests / 1e6:g} M / {a.base_requests / 1e6:g} M: {rss[a.requests] / rss[a.base_requests]:.3f}")


if __name__ == "__main__":
    sys.exit(main())
