"""Two-level (host + array) run speed: application block reads simulated per wall-clock second
for each array policy, and X-RAY's cost relative to plain LRU.

The Figs 7-8 setup (1,024 files of 16 blocks, FS cache 4,000 blocks, zipf, array cache 4,000
blocks), ``--reads`` file reads after warm-up, each policy in one run, best of ``--repeat``.
X-RAY runs with unlimited placement (refreshing its window every 100 ms of simulated time)
and with idle-time placement (50 ms think time).

    python benches/bench_xray.py [--reads N] [--repeat K]

Prints block reads/s per policy and the ratio to LRU. Not a pass/fail test.
"""

from __future__ import annotations

import argparse

import raidlab


def config(policy: str, reads: int, think_ms: float = 0.0, idle: bool = False) -> dict:
    cache: dict = {"policy": policy, "capacity_blocks": 4000}
    if idle:
        cache["xray"] = {"placement": "idle"}
    return {
        "workload": {
            "files": {"kind": "zipf", "files": 1024, "file_blocks": 16, "reads": reads, "seed": 1, "think_ms": think_ms}
        },
        "host": {"fs_cache_blocks": 4000},
        "cache": cache,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cases = [
        ("lru", config("lru", args.reads)),
        ("mq", config("mq", args.reads)),
        ("demote", config("demote", args.reads)),
        ("xray (unlimited)", config("xray", args.reads)),
        ("xray (idle, 50 ms think)", config("xray", args.reads, think_ms=50, idle=True)),
    ]
    base = None
    print(f"two-level runs, zipf, {args.reads:,} file reads of 16 blocks, best of {args.repeat}")
    for name, cfg in cases:
        best = None
        for _ in range(args.repeat):
            m = raidlab.run(cfg, threads=1).metrics
            rate = (m["app_block_reads"] + 16 * 1024) / m["wall_s"]
            best = rate if best is None else max(best, rate)
        base = base or best
        print(f"  {name:28s} {best / 1e6:6.2f} M block reads/s   {best / base:5.2f}x lru")


if __name__ == "__main__":
    main()
