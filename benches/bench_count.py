"""Counting-mode speed: raidlab against libCacheSim (PyPI ``libcachesim``), end to end.

Both simulators read the same oracleGeneral file (10 M requests, Zipf(0.9) over 1 M keys,
every object 4 KiB) and replay it through the same policy at 1% and 10% of the footprint.
libCacheSim runs twice: at its default ``hashpower`` (a 2^24-bucket table, far larger than
these caches) and with the table sized to the cache, ``hashpower = ceil(log2(objects the
cache holds)) + 1``, as a careful user sets it. Each measurement runs in a child process
(one process group, one after the other, so they never compete for the two cores) which
reports its wall time from before ``import`` of the simulator to the result, its CPU time,
miss count and peak RSS. The three runs of a row take turns K times and the fastest of each
is kept.

    python benches/bench_count.py [--requests N] [--keys N] [--policies lru,arc] [--repeat K]

raidlab runs in block mode (its counting mode) except for ARC, S3-FIFO and LIRS, which run in
object mode: ARC's adaptation step is a count, so it only means the same thing when both count
bytes, and S3-FIFO's and LIRS's queue shares are fractions of the byte capacity. LIRS and
W-TinyLFU differ from libCacheSim's by design where libCacheSim evicts inside a hit
(crates/raidlab/src/cache/read/lirs.rs, wtinylfu.rs), so their "equal" column reads n/a when
the counts differ.

Also measured: raidlab's bare read rate, the trace read end to end as the counting engine
reads it and nothing done with it (``raidlab._core.read_oracle``). ``vs read`` is raidlab's
rate over that rate (1.0 = the cache costs nothing). Prints requests/s, the ratios to both
libCacheSim settings (wall time; ``cpu`` is the ratio of CPU times, steadier when the machine
is loaded), both miss counts (equal where the policies' semantics match) and peak RSS;
raidlab's metadata bytes per cached block come from the policy's own accounting. Nothing here
is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OBJ_SIZE = 4096
# Requests per chunk when writing a trace.
CHUNK_REQUESTS = 10_000_000
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
    """Zipf(alpha) over `keys` ranks (inverse-CDF sampling), ranks shuffled, 4 KiB objects;
    returns the footprint (distinct keys). Written in chunks of ``CHUNK_REQUESTS``, so 100 M
    requests need no 2.4 GB array (the generator draws the same numbers however they are
    chunked, so the file does not depend on the chunk size)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, keys + 1, dtype=np.float64) ** alpha
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    perm = rng.permutation(keys).astype(np.uint64)
    seen = np.zeros(keys, dtype=bool)
    with open(path, "wb") as f:
        for first in range(0, requests, CHUNK_REQUESTS):
            n = min(CHUNK_REQUESTS, requests - first)
            ranks = np.searchsorted(cdf, rng.random(n))
            seen[ranks] = True
            rec = np.zeros(n, dtype=[("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
            rec["t"] = np.arange(first, first + n, dtype=np.uint64) // 1000
            rec["id"] = perm[ranks]
            rec["size"] = OBJ_SIZE
            rec["next"] = -1
            rec.tofile(f)
    return int(seen.sum())


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


def sized_hashpower(capacity_objects: int) -> int:
    """libCacheSim's table sized to the cache: ceil(log2(objects it holds)) + 1."""
    return math.ceil(math.log2(max(2, capacity_objects))) + 1


def worker(engine: str, policy: str, trace: str, capacity_objects: int, hashpower: int) -> dict:
    start, cpu0 = time.perf_counter(), time.process_time()
    meta = None
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
    elif engine == "read":
        import raidlab

        requests, _ = raidlab._core.read_oracle(trace)
        misses = 0
    else:
        import libcachesim as lcs

        reader = lcs.TraceReader(trace, lcs.TraceType.ORACLE_GENERAL_TRACE)
        sized = {"hashpower": hashpower} if hashpower else {}
        cache = getattr(lcs, POLICIES[policy])(capacity_objects * OBJ_SIZE, **sized)
        miss_ratio, _ = cache.process_trace(reader)
        requests = reader.get_num_of_req() if hasattr(reader, "get_num_of_req") else None
        requests = requests or Path(trace).stat().st_size // 24
        misses = round(miss_ratio * requests)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
    return {"wall_s": wall, "cpu_s": cpu, "misses": misses, "requests": requests, "rss_kib": peak_rss_kib(), "metadata_bytes": meta}


# Children cache compiled bytecode as an installed package does (libCacheSim's wheel ships
# its .pyc files; an editable raidlab under PYTHONDONTWRITEBYTECODE=1 would compile its
# modules again at every start).
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_child(engine: str, policy: str, trace: str, capacity: int, hashpower: int = 0) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", engine, policy, trace, str(capacity), str(hashpower)],
        check=True,
        capture_output=True,
        text=True,
        env=CHILD_ENV,
    )
    return json.loads(out.stdout)


def measure(cases: list[tuple[str, str, str, int, int]], repeat: int) -> list[dict]:
    """Each case (engine, policy, trace, capacity, hashpower) `repeat` times, the cases taking
    turns so that a change in the machine's load falls on all of them alike; per case the
    fastest run (wall time), with the least CPU time of its runs beside it."""
    runs: list[list[dict]] = [[] for _ in cases]
    for _ in range(repeat):
        for i, case in enumerate(cases):
            runs[i].append(run_child(*case))
    return [{**min(r, key=lambda x: x["wall_s"]), "cpu_s": min(x["cpu_s"] for x in r)} for r in runs]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=10_000_000)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--alpha", type=float, default=0.9)
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument("--fractions", default="0.01,0.1")
    p.add_argument("--repeat", type=int, default=3, help="best of K runs each")
    p.add_argument("--trace", help="replay this oracleGeneral file instead of writing one")
    p.add_argument("--worker", nargs=5, metavar=("ENGINE", "POLICY", "TRACE", "CAPACITY", "HASHPOWER"))
    a = p.parse_args()
    if a.worker:
        engine, policy, trace, cap, hp = a.worker
        print(json.dumps(worker(engine, policy, trace, int(cap), int(hp))))
        return

    with tempfile.TemporaryDirectory() as tmp:
        if a.trace:
            import numpy as np

            trace = a.trace
            ids = np.fromfile(trace, dtype=[("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])["id"]
            footprint = int(np.unique(ids).size)
            print(f"trace: {trace}, {ids.size:,} requests, footprint {footprint:,} objects")
        else:
            trace = str(Path(tmp) / "zipf.oracleGeneral.bin")
            footprint = write_trace(Path(trace), a.requests, a.keys, a.alpha, seed=7)
            print(f"trace: {a.requests:,} requests, Zipf({a.alpha}) over {a.keys:,} keys, footprint {footprint:,} objects")
        (bare,) = measure([("read", "-", trace, 0, 0)], a.repeat)
        read_rate = bare["requests"] / bare["wall_s"]
        print(
            f"raidlab bare read (import raidlab + read the trace, nothing else): {read_rate:,.0f} req/s, "
            f"{bare['wall_s']:.3f} s wall, {bare['cpu_s']:.3f} s CPU"
        )
        header = (
            f"{'policy':8} {'mode':6} {'size':>4} {'hp':>3} {'raidlab req/s':>13} {'lcs hp24 req/s':>14} {'ratio':>5} "
            f"{'lcs sized req/s':>15} {'ratio':>5} {'cpu':>5} {'vs read':>7} {'raidlab misses':>14} {'lcs misses':>11} "
            f"{'equal':>5} {'RSS MiB r/l24/ls':>16} {'B/block':>7}"
        )
        print(header)
        print("-" * len(header))
        for frac in [float(x) for x in a.fractions.split(",")]:
            cap = max(1, round(footprint * frac))
            hp = sized_hashpower(cap)
            for policy in a.policies.split(","):
                r, ld, ls = measure(
                    [
                        ("raidlab", policy, trace, cap, 0),
                        ("libcachesim", policy, trace, cap, 0),
                        ("libcachesim", policy, trace, cap, hp),
                    ],
                    a.repeat,
                )
                rr, ldr, lsr = (x["requests"] / x["wall_s"] for x in (r, ld, ls))
                if ld["misses"] != ls["misses"]:
                    print(f"note: libCacheSim's misses differ between hashpower 24 and {hp}: {ld['misses']:,} / {ls['misses']:,}")
                equal = "yes" if r["misses"] == ls["misses"] else ("no" if policy in SAME_SEMANTICS else "n/a")
                rss = f"{r['rss_kib'] / 1024:.0f}/{ld['rss_kib'] / 1024:.0f}/{ls['rss_kib'] / 1024:.0f}"
                print(
                    f"{policy:8} {'object' if policy in OBJECT_MODE else 'block':6} {frac:4.0%} {hp:3} {rr:13,.0f} {ldr:14,.0f} "
                    f"{rr / ldr:5.2f} {lsr:15,.0f} {rr / lsr:5.2f} {ls['cpu_s'] / r['cpu_s']:5.2f} {rr / read_rate:7.2f} "
                    f"{r['misses']:14,} {ls['misses']:11,} {equal:>5} {rss:>16} {r['metadata_bytes'] / cap:7.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
