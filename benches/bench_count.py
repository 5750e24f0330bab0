"""Counting-mode speed: raidlab against libCacheSim (PyPI ``libcachesim``), end to end.

Both simulators read the same oracleGeneral file (10 M requests, Zipf(0.9) over 1 M keys,
every object 4 KiB) and replay it through the same policy at 1% and 10% of the footprint.
Each measurement runs in a child process (one process group, one after the other, so they
never compete for the two cores) which reports its wall time, miss count and peak RSS.

    python benches/bench_count.py [--requests N] [--keys N] [--policies lru,arc] [--repeat K]

raidlab runs in block mode (its counting mode) except for ARC, S3-FIFO and LIRS, which run in
object mode: ARC's adaptation step is a count, so it only means the same thing when both count
bytes, and S3-FIFO's and LIRS's queue shares are fractions of the byte capacity. LIRS and
W-TinyLFU differ from libCacheSim's by design where libCacheSim evicts inside a hit
(crates/raidlab/src/cache/read/lirs.rs, wtinylfu.rs), so their "equal" column reads n/a when
the counts differ.
Prints requests/s of both, the ratio, both miss counts (equal where the policies' semantics
match) and peak RSS; raidlab's metadata bytes per cached block come from the policy's own
accounting. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OBJ_SIZE = 4096
# raidlab policy name -> libCacheSim class name (same algorithm family).
POLICIES = {
    "lru": "LRU",
    "lfu": "LFU",
    "clock": "Clock",
    "2q": "TwoQ",
    "arc": "ARC",
    "mq": "MQ",
    "sieve": "Sieve",
    "s3fifo": "S3FIFO",
    "slru": "SLRU",
    "lirs": "LIRS",
    "wtinylfu": "WTinyLFU",
}
# Where the two implementations are meant to agree exactly on equal-size objects. SLRU agrees
# when its 4 segments divide the capacity; otherwise libCacheSim's evicts inside some hits and
# raidlab's does not (see crates/raidlab/src/cache/read/slru.rs).
SAME_SEMANTICS = {"lru", "lfu", "clock", "arc", "sieve", "s3fifo", "slru"}
# ARC's target size p moves by a plain count per ghost hit; libCacheSim counts capacity in
# bytes, so p moves a byte at a time there and a block at a time in raidlab's block mode.
# Comparing like with like needs raidlab's object mode (bytes) for ARC. S3-FIFO's 10 % small
# queue and 90 % ghost of a byte capacity are fractions of an object unless 10 divides the
# capacity in objects; block mode rounds them to whole blocks, so it too runs in object mode,
# and so does LIRS (its 1 % share for resident HIR blocks).
OBJECT_MODE = {"arc", "s3fifo", "lirs"}


def write_trace(path: Path, requests: int, keys: int, alpha: float, seed: int) -> int:
    """Zipf(alpha) over `keys` ranks (inverse-CDF sampling), ranks shuffled; returns the
    footprint (distinct keys)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, keys + 1, dtype=np.float64) ** alpha
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    ids = rng.permutation(keys).astype(np.uint64)[np.searchsorted(cdf, rng.random(requests))]
    rec = np.zeros(requests, dtype=[("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    rec["t"] = np.arange(requests, dtype=np.uint32) // 1000
    rec["id"] = ids
    rec["size"] = OBJ_SIZE
    rec["next"] = -1
    rec.tofile(path)
    return int(np.unique(ids).size)


def peak_rss_kib() -> int:
    """Peak RSS of this process. VmHWM belongs to the address space, which exec replaces;
    ru_maxrss would carry the parent's peak (the trace generator's) across fork and exec."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def worker(engine: str, policy: str, trace: str, capacity_objects: int) -> dict:
    start = time.perf_counter()
    if engine == "raidlab":
        import raidlab

        cache = (
            {"unit": "object", "capacity_bytes": capacity_objects * OBJ_SIZE}
            if policy in OBJECT_MODE
            else {"capacity_blocks": capacity_objects}
        )
        cfg = {"workload": {"trace": trace, "format": "oracle"}, "cache": {"policy": policy, **cache}}
        m = raidlab.run(cfg, threads=1).metrics
        misses, requests, meta = m["misses"], m["requests"], m["metadata_bytes"]
    else:
        import libcachesim as lcs

        reader = lcs.TraceReader(trace, lcs.TraceType.ORACLE_GENERAL_TRACE)
        cache = getattr(lcs, POLICIES[policy])(capacity_objects * OBJ_SIZE)
        miss_ratio, _ = cache.process_trace(reader)
        requests = reader.get_num_of_req() if hasattr(reader, "get_num_of_req") else None
        requests = requests or Path(trace).stat().st_size // 24
        misses, meta = round(miss_ratio * requests), None
    wall = time.perf_counter() - start
    rss_kib = peak_rss_kib()
    return {"wall_s": wall, "misses": misses, "requests": requests, "rss_kib": rss_kib, "metadata_bytes": meta}


def measure(engine: str, policy: str, trace: str, capacity: int, repeat: int) -> dict:
    best = None
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, __file__, "--worker", engine, policy, trace, str(capacity)],
            check=True,
            capture_output=True,
            text=True,
        )
        r = json.loads(out.stdout)
        best = r if best is None or r["wall_s"] < best["wall_s"] else best
    assert best is not None
    return best


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=10_000_000)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--alpha", type=float, default=0.9)
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument("--fractions", default="0.01,0.1")
    p.add_argument("--repeat", type=int, default=3, help="best of K runs each")
    p.add_argument("--worker", nargs=4, metavar=("ENGINE", "POLICY", "TRACE", "CAPACITY"))
    a = p.parse_args()
    if a.worker:
        engine, policy, trace, cap = a.worker
        print(json.dumps(worker(engine, policy, trace, int(cap))))
        return

    with tempfile.TemporaryDirectory() as tmp:
        trace = str(Path(tmp) / "zipf.oracleGeneral.bin")
        footprint = write_trace(Path(trace), a.requests, a.keys, a.alpha, seed=7)
        print(f"trace: {a.requests:,} requests, Zipf({a.alpha}) over {a.keys:,} keys, footprint {footprint:,} objects")
        header = f"{'policy':7} {'mode':6} {'size':>5} {'raidlab req/s':>14} {'libCacheSim req/s':>18} {'ratio':>6} {'raidlab misses':>15} {'lcs misses':>11} {'equal':>5} {'RSS MiB r/l':>12} {'B/block':>8}"
        print(header)
        print("-" * len(header))
        for frac in [float(x) for x in a.fractions.split(",")]:
            cap = max(1, round(footprint * frac))
            for policy in a.policies.split(","):
                r = measure("raidlab", policy, trace, cap, a.repeat)
                lc = measure("libcachesim", policy, trace, cap, a.repeat)
                rr, lr = r["requests"] / r["wall_s"], lc["requests"] / lc["wall_s"]
                equal = "yes" if r["misses"] == lc["misses"] else ("no" if policy in SAME_SEMANTICS else "n/a")
                print(
                    f"{policy:7} {'object' if policy in OBJECT_MODE else 'block':6} {frac:5.0%} {rr:14,.0f} {lr:18,.0f} {rr / lr:6.2f} {r['misses']:15,} {lc['misses']:11,} {equal:>5} "
                    f"{r['rss_kib'] / 1024:5.0f}/{lc['rss_kib'] / 1024:<5.0f} {r['metadata_bytes'] / cap:8.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
