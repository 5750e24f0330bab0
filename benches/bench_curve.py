"""One-pass cache curves: speed against one counting run, sampled throughput, sampling errors
and memory.

    python benches/bench_curve.py [--requests N] [--keys N] [--zipf-requests N]
                                  [--big-requests N] [--repeat K] [--skip-big]

1. Exact LRU curve (17 sizes, 1/256 of the footprint to all of it) on the bench trace of
   bench_count.py (10 M requests, Zipf(0.9) over 1 M keys, oracleGeneral) against one
   counting run at 10 % of the footprint, end to end in a fresh process each: the ratio of
   their wall times (target <= 3).
2. Sampled curves (SHARDS at R = 0.01, and fixed size 8,192 blocks) on the same file:
   requests per second end to end (target >= 50 M/s).
3. Sampling errors: SHARDS (R = 0.01, and fixed size) against the exact curve, and
   mini-simulations (R = 0.01 and 0.1) of ARC, FIFO and CLOCK against per-size runs, on the
   real traces in ../shared/traces (when present) and Zipf(0.9) streams of 10 M and
   --zipf-requests (100 M; SHARDS only) requests over a tenth as many keys, degraded RAID-5. Mean absolute miss-ratio error over the
   sizes, and the RGR error relative to the exact RGR's range (target <= 0.01 for SHARDS,
   <= 0.02 for mini-simulations).
4. Memory: peak RSS of a SHARDS curve (R = 0.01) fed by the Zipf generator (no file) at 10 M
   and at --big-requests (1 B) requests, and their ratio (flat memory: ~1).

Every measurement runs in a child process, one after the other. Nothing here is a pass/fail
test; the numbers go to docs/bench.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_count import peak_rss_kib, write_trace
from benchlib import measure_child

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO.parent / "shared" / "traces"
REAL = [
    "cloudphysics/cloudPhysicsIO.csv",
    "websearch/wsrch-small.mqsim.txt",
    "keys/arc-oltp.u32be.gz",
    "keys/cloudphysics-w106.txt.xz",
]
RAID5_DEGRADED = {"level": "raid5", "disks": 5, "stripe_unit": 16384, "failed": [2]}

# A child: one job (JSON on stdin) -> wall time, peak RSS and the result.
CHILD = f"""
import json, sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from bench_curve import child
print(json.dumps(child(json.loads(sys.stdin.read()))))
"""


def child(job: dict[str, Any]) -> dict[str, Any]:
    """Run one job in this process: ``{"kind": "curve" | "run", "config", ...}``."""
    import time

    import raidlab

    start = time.perf_counter()
    if job["kind"] == "run":
        m = raidlab.run(job["config"], threads=1).metrics
        out: dict[str, Any] = {"misses": m["misses"], "requests": m["requests"]}
    else:
        from raidlab.curve import curve_json

        (item,) = curve_json(job["config"], sizes=job["sizes"], sample_rate=job.get("sample_rate"), sample_size=job.get("sample_size"))
        out = {"curve": item["curve"]}
    out["wall_s"] = time.perf_counter() - start
    out["rss_kib"] = peak_rss_kib()
    return out


def best(job: dict[str, Any], repeat: int) -> dict[str, Any]:
    runs = [measure_child(CHILD, json.dumps(job)) for _ in range(max(1, repeat))]
    return min(runs, key=lambda r: r["wall_s"])


def grid(footprint: int) -> list[int]:
    """The default grid of raidlab curve: footprint * 2^(-i/2), i = 0..16."""
    return sorted({max(1, round(footprint * 0.5 ** (i / 2))) for i in range(17)})


def errors(est: dict[str, Any], exact: dict[str, Any]) -> tuple[float, float]:
    """Mean absolute miss-ratio error, and mean absolute RGR error over the exact RGR's range."""
    a, b = est["points"], exact["points"]
    mr = sum(abs(x["miss_ratio"] - y["miss_ratio"]) for x, y in zip(a, b)) / len(b)
    rgrs = [y["rgr"] for y in b]
    span = max(rgrs) - min(rgrs) or 1.0
    rgr = sum(abs(x["rgr"] - y["rgr"]) for x, y in zip(a, b)) / len(b) / span
    return mr, rgr


def footprint_of(config: dict[str, Any]) -> int:
    """Distinct blocks of a workload: the largest size of raidlab's default grid (its
    pre-pass measures the footprint)."""
    import raidlab

    df = raidlab.curve(config)
    return int(df["size_blocks"].max())


def speed(a: argparse.Namespace, tmp: Path) -> None:
    trace = str(tmp / "zipf.oracleGeneral.bin")
    footprint = write_trace(Path(trace), a.requests, a.keys, 0.9, seed=7)
    config = {"workload": {"trace": trace, "format": "oracle"}, "cache": {"policy": "lru", "capacity_blocks": max(1, footprint // 10)}}
    sizes = grid(footprint)
    print(f"bench trace: {a.requests:,} requests, Zipf(0.9) over {a.keys:,} keys, footprint {footprint:,} blocks; {len(sizes)} sizes")
    one = best({"kind": "run", "config": config}, a.repeat)
    exact = best({"kind": "curve", "config": config, "sizes": sizes}, a.repeat)
    print(f"  one counting run (10 %):     {one['wall_s']:7.2f} s")
    print(f"  exact LRU curve, {len(sizes)} sizes:  {exact['wall_s']:7.2f} s   ratio {exact['wall_s'] / one['wall_s']:.2f}x (target <= 3)")
    for label, extra in (("SHARDS R=0.01", {"sample_rate": 0.01}), ("SHARDS 8,192 blocks", {"sample_size": 8192})):
        s = best({"kind": "curve", "config": config, "sizes": sizes, **extra}, a.repeat)
        mr, rgr = errors(s["curve"], exact["curve"])
        # End to end (interpreter start, import, file read) and the pass alone (the core's
        # own wall time, which still includes reading and decoding the file).
        print(
            f"  {label:20} {s['wall_s']:7.2f} s   {a.requests / s['wall_s'] / 1e6:6.1f} M req/s end to end, "
            f"{a.requests / s['curve']['wall_s'] / 1e6:6.1f} M req/s in the pass (target >= 50)"
            f"   error: miss ratio {mr:.4f}, RGR {rgr:.4f}"
        )


def accuracy(name: str, config: dict[str, Any], sizes: list[int], minis: bool = True) -> None:
    """One row of errors; ``minis`` off leaves the mini-simulation columns out (their
    reference is a full simulation per size)."""
    repeat = 1
    exact = best({"kind": "curve", "config": config, "sizes": sizes}, repeat)["curve"]
    cells = [f"{name:34}"]
    for extra in ({"sample_rate": 0.01}, {"sample_size": 8192}):
        s = best({"kind": "curve", "config": config, "sizes": sizes, **extra}, repeat)["curve"]
        mr, rgr = errors(s, exact)
        cells.append(f"{mr:.4f}/{rgr:.4f}")
    for policy in ("arc", "fifo", "clock") if minis else ():
        cfg = {**config, "cache": {**config["cache"], "policy": policy}}
        full = best({"kind": "curve", "config": cfg, "sizes": sizes}, repeat)["curve"]
        for rate in (0.01, 0.1):
            mini = best({"kind": "curve", "config": cfg, "sizes": sizes, "sample_rate": rate}, repeat)["curve"]
            mr, rgr = errors(mini, full)
            cells.append(f"{mr:.4f}/{rgr:.4f}")
    print("  " + " ".join(f"{c:>14}" for c in cells), flush=True)


def accuracies(a: argparse.Namespace) -> None:
    heads = ["workload", "SHARDS 1%", "SHARDS 8192", "ARC 1%", "ARC 10%", "FIFO 1%", "FIFO 10%", "CLOCK 1%", "CLOCK 10%"]
    print("sampling errors, miss ratio / RGR over its range (degraded RAID-5, 17 sizes up to the footprint):")
    print("  " + f"{heads[0]:34}" + " ".join(f"{h:>14}" for h in heads[1:]))
    cases = []
    if TRACES.is_dir():
        cases += [(rel, {"workload": {"trace": str(TRACES / rel)}}, True) for rel in REAL]
    else:
        print(f"  (real traces absent at {TRACES})")
    for n in sorted({10_000_000, a.zipf_requests}):
        zipf = {"kind": "zipf", "keys": n // 10, "alpha": 0.9, "requests": n, "seed": 7}
        # Per-size reference simulations of 100 M requests would take an hour: SHARDS only.
        cases.append((f"zipf 0.9, {n / 1e6:g} M requests", {"workload": {"synthetic": zipf}}, n <= 10_000_000))
    for name, base, minis in cases:
        config = {**base, "cache": {"policy": "lru", "capacity_blocks": 1}, "array": RAID5_DEGRADED}
        accuracy(name, config, grid(footprint_of(config)), minis)


def memory(a: argparse.Namespace) -> None:
    print("memory of a SHARDS curve (R = 0.01) fed by the Zipf generator, 1 M keys:")
    sizes = grid(1_000_000)
    rss = {}
    for n in (10_000_000, a.big_requests):
        config = {
            "workload": {"synthetic": {"kind": "zipf", "keys": 1_000_000, "alpha": 0.9, "requests": n, "seed": 7}},
            "cache": {"policy": "lru", "capacity_blocks": 1},
            "array": RAID5_DEGRADED,
        }
        r = best({"kind": "curve", "config": config, "sizes": sizes, "sample_rate": 0.01}, 1)
        rss[n] = r["rss_kib"]
        print(
            f"  {n:>13,} requests: peak RSS {r['rss_kib'] / 1024:7.1f} MiB, {r['wall_s']:7.1f} s "
            f"({n / r['wall_s'] / 1e6:.1f} M req/s), curve state {r['curve']['state_bytes'] / 2**20:.2f} MiB"
        )
    print(f"  ratio {a.big_requests / 1e6:g} M / 10 M: {rss[a.big_requests] / rss[10_000_000]:.3f}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=10_000_000)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--zipf-requests", type=int, default=100_000_000)
    p.add_argument("--big-requests", type=int, default=1_000_000_000)
    p.add_argument("--repeat", type=int, default=3, help="best of K runs each (speed)")
    p.add_argument("--skip-big", action="store_true", help="skip the 100 M and 1 B runs")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        speed(a, Path(tmp))
    if a.skip_big:
        a.zipf_requests = min(a.zipf_requests, 10_000_000)
    accuracies(a)
    if not a.skip_big:
        memory(a)


if __name__ == "__main__":
    sys.exit(main())
