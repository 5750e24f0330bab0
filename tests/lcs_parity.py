"""raidlab against the libcachesim wheel, live: miss counts of every policy the two share, on
independent Zipf traces (block mode against libCacheSim's size-1 objects) and on the
CloudPhysics trace (object mode). `tests/test_libcachesim_numbers.py` asserts the tolerances
below; run this file to print the table of `docs/read-caches.md`:

    python tests/lcs_parity.py [TRACES_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import raidlab

LCS_VERSION = "0.3.5"
# raidlab policy -> libCacheSim class (default parameters on both sides).
PEERS = {
    "lru": "LRU",
    "fifo": "FIFO",
    "lfu": "LFU",
    "clock": "Clock",
    "arc": "ARC",
    "sieve": "Sieve",
    "s3fifo": "S3FIFO",
    "slru": "SLRU",
    "lirs": "LIRS",
    "wtinylfu": "WTinyLFU",
    "opt": "Belady",
}
# S3-FIFO's, LIRS's and ARC's shares are fractions of a byte capacity: on the Zipf traces they
# run in object mode on 4 KiB objects (block mode rounds the shares to whole blocks: another
# cache, not another policy). The others run in block mode against libCacheSim's size-1 objects.
OBJECT_MODE = {"s3fifo", "lirs", "arc"}
# The Zipf traces: (alpha, keys, requests, seed), independent of the benchmark's.
ZIPF = [(0.7, 20_000, 100_000, 21), (0.9, 30_000, 150_000, 22), (1.1, 10_000, 100_000, 23)]
# Cache sizes as shares of the footprint (5 ∤ most of them: W-TinyLFU's SLRU shares do not
# add up; 4 ∤ some: neither do SLRU's), at least 200 objects: libCacheSim's LIRS and W-TinyLFU
# refuse an object larger than 1 % of the cache, so below 100 objects they cache nothing.
SHARES = [0.005, 0.01, 0.05, 0.1, 0.3]
MIN_CACHE = 200
MIB = 1 << 20
CLOUDPHYSICS_MIB = [128 * k for k in range(1, 9)]
# Most |raidlab - libCacheSim| / libCacheSim allowed, in % (0: identical), per policy and trace
# kind. SLRU and LIRS never evict inside a hit where libCacheSim does (`slru.rs`, `lirs.rs`);
# W-TinyLFU's object-mode sketch is 4096 times smaller than libCacheSim's (`wtinylfu.rs`).
TOLERANCE = {
    "zipf": {"slru": 1.0, "lirs": 1.0},
    "cloudphysics": {"slru": 1.0, "lirs": 1.0, "wtinylfu": 1.0},
    "cloudphysics blocks": {},
}


def zipf_trace(path: Path, alpha: float, nkeys: int, requests: int, seed: int, size: int) -> int:
    """An oracleGeneral file of Zipf(alpha) requests over shuffled ranks, every object `size`
    bytes, `next_access_vtime` filled in (Belady reads it). Returns the footprint."""
    return int(np.unique(zipf_ids(path, alpha, nkeys, requests, seed, size)).size)


def zipf_ids(path: Path, alpha: float, nkeys: int, requests: int, seed: int, size: int) -> np.ndarray:
    """`zipf_trace`'s file; returns the requested ids in order."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(1.0 / np.arange(1, nkeys + 1, dtype=np.float64) ** alpha)
    cdf /= cdf[-1]
    ids = rng.permutation(nkeys).astype(np.uint64)[np.searchsorted(cdf, rng.random(requests))]
    nxt = np.full(requests, -1, dtype=np.int64)
    last: dict[int, int] = {}
    for i in range(requests - 1, -1, -1):
        k = int(ids[i])
        nxt[i] = last.get(k, -1)
        last[k] = i
    rec = np.zeros(requests, dtype=[("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    rec["id"], rec["size"], rec["next"] = ids, size, nxt
    rec.tofile(path)
    return ids


def _theirs(lcs, cls: str, trace: Path, capacities: list[int], requests: int) -> list[int]:
    out = []
    for cap in capacities:
        reader = lcs.TraceReader(str(trace), lcs.TraceType.ORACLE_GENERAL_TRACE)
        miss_ratio, _ = getattr(lcs, cls)(cap).process_trace(reader)
        out.append(round(miss_ratio * requests))
    return out


def _ours(policy: str, trace: Path, capacities: list[int], unit: str) -> list[int]:
    key = "capacity_bytes" if unit == "object" else "capacity_blocks"
    cache = {"policy": policy, key: capacities[0], **({"unit": "object"} if unit == "object" else {})}
    cfg = {"workload": {"trace": str(trace), "format": "oracle"}, "cache": cache, "sweep": {f"cache.{key}": capacities}}
    return [r.metrics["misses"] for r in raidlab.run(cfg).runs]


def zipf_rows(lcs, workdir: Path) -> list[tuple[str, str, int, int, int]]:
    """(policy, trace, capacity in objects, raidlab, libCacheSim) on every Zipf trace."""
    rows = []
    for alpha, nkeys, requests, seed in ZIPF:
        name = f"zipf({alpha})"
        unit_trace = workdir / f"zipf-{alpha}-1.bin"
        page_trace = workdir / f"zipf-{alpha}-4k.bin"
        footprint = zipf_trace(unit_trace, alpha, nkeys, requests, seed, 1)
        zipf_trace(page_trace, alpha, nkeys, requests, seed, 4096)
        caps = [max(MIN_CACHE, round(footprint * s)) for s in SHARES]
        for policy, cls in PEERS.items():
            if policy in OBJECT_MODE:
                ours = _ours(policy, page_trace, [c * 4096 for c in caps], "object")
                theirs = _theirs(lcs, cls, page_trace, [c * 4096 for c in caps], requests)
            else:
                ours = _ours(policy, unit_trace, caps, "block")
                theirs = _theirs(lcs, cls, unit_trace, caps, requests)
            rows += [(policy, name, c, a, b) for c, a, b in zip(caps, ours, theirs, strict=True)]
    return rows


def cloudphysics_rows(lcs, traces: Path) -> list[tuple[str, str, int, int, int]]:
    """(policy, trace, capacity in MiB, raidlab, libCacheSim): object mode, objects with
    their sizes (no Belady: the file has no next-access times)."""
    trace = traces / "cloudphysics" / "cloudPhysicsIO.oracleGeneral.bin"
    caps = [m * MIB for m in CLOUDPHYSICS_MIB]
    rows = []
    for policy, cls in PEERS.items():
        if policy == "opt":
            continue
        ours = _ours(policy, trace, caps, "object")
        theirs = _theirs(lcs, cls, trace, caps, 113_872)
        rows += [(policy, "cloudphysics", c // MIB, a, b) for c, a, b in zip(caps, ours, theirs, strict=True)]
    return rows


def cloudphysics_block_rows(lcs, traces: Path, workdir: Path) -> list[tuple[str, str, int, int, int]]:
    """(policy, trace, capacity in blocks, raidlab, libCacheSim): the CSV's `lbn` keys as
    size-1 objects (`cloudPhysicsIO.txt` semantics), block mode, 128..1024 blocks."""
    csv = traces / "cloudphysics" / "cloudPhysicsIO.csv"
    keys = [int(line.rsplit(",", 1)[1]) for line in csv.read_text().splitlines()[1:] if line]
    trace = workdir / "cloudphysics-keys.bin"
    rec = np.zeros(len(keys), dtype=[("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    rec["id"], rec["size"], rec["next"] = keys, 1, -1
    rec.tofile(trace)
    caps = [128 * k for k in range(1, 9)]
    rows = []
    for policy, cls in PEERS.items():
        if policy == "opt" or policy in OBJECT_MODE:
            continue
        ours = _ours(policy, trace, caps, "block")
        theirs = _theirs(lcs, cls, trace, caps, len(keys))
        rows += [(policy, "cloudphysics blocks", c, a, b) for c, a, b in zip(caps, ours, theirs, strict=True)]
    return rows


def worst(rows) -> dict[tuple[str, str], tuple[int, int, float]]:
    """Per (policy, trace kind): (identical sizes, sizes, most |difference| in %)."""
    out: dict[tuple[str, str], tuple[int, int, float]] = {}
    for policy, trace, _cap, a, b in rows:
        kind = "zipf" if trace.startswith("zipf") else trace
        same, n, most = out.get((policy, kind), (0, 0, 0.0))
        out[(policy, kind)] = (same + (a == b), n + 1, max(most, abs(a - b) * 100 / b))
    return out


def table(rows) -> str:
    """The Markdown table of `docs/read-caches.md`."""
    w = worst(rows)
    kinds = sorted({k for _p, k in w}, key=lambda k: k != "zipf")
    lines = [
        "| policy | " + " | ".join(f"{k}: identical sizes, most difference" for k in kinds) + " |",
        "| --- |" + " --- |" * len(kinds),
    ]
    for policy in PEERS:
        cells = []
        for k in kinds:
            if (policy, k) not in w:
                cells.append("—")
                continue
            same, n, most = w[(policy, k)]
            cells.append(f"{same}/{n}, {most:.2f} %")
        lines.append(f"| {policy} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    import tempfile

    import libcachesim as lcs

    traces = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent.parent / "shared" / "traces"
    with tempfile.TemporaryDirectory() as d:
        rows = zipf_rows(lcs, Path(d))
        if traces.is_dir():
            rows += cloudphysics_block_rows(lcs, traces, Path(d))
            rows += cloudphysics_rows(lcs, traces)
    print(f"libcachesim {lcs.__version__}; Zipf traces {ZIPF}, caches {SHARES} of the footprint (>= {MIN_CACHE})")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
