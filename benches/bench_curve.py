"""One-pass cache curves: speed against one counting run, sampled throughput and sampling
errors.

    python benches/bench_curve.py [--requests N] [--keys N] [--zipf-requests N]
                                  [--big-trace-requests N] [--repeat K] [--seeds K]
                                  [--skip-big] [--sections speed,errors]

1. Exact LRU curve (17 sizes, 1/256 of the footprint to all of it) on the bench trace of
   bench_count.py (10 M requests, Zipf(0.9) over 1 M keys, oracleGeneral) against one
   counting run at 10 % of the footprint, end to end in a fresh process each: the ratio of
   their wall times (target <= 3).
2. Sampled curves (SHARDS at R = 0.01, and fixed size 8,192 blocks) on the same file and on
   a file of --big-trace-requests (100 M) requests drawn the same way: requests per second
   end to end (the child process's whole life: interpreter start, import, config, reading
   the file, the pass; target >= 50 M/s) and in the pass alone (the core's wall time).
3. Sampling errors: SHARDS (R = 0.01, and fixed size) against the exact curve, and
   mini-simulations (R = 0.01 and 0.1) of ARC, FIFO and CLOCK against per-size runs, on the
   real traces in ../shared/traces (when present) and Zipf(0.9) streams of 10 M and
   --zipf-requests (100 M; SHARDS only) requests over a tenth as many keys, degraded RAID-5. Mean absolute miss-ratio error over the
   sizes, and the RGR error relative to the exact RGR's range (target <= 0.01 for SHARDS,
   <= 0.02 for mini-simulations), as the mean and the worst over --seeds (5) hash seeds: the
   seed decides which blocks are sampled, and on small traces that choice dominates.
Memory at 1 B requests (a SHARDS curve and a counting run fed by the Zipf generator) is
bench_scale.py's.

Every measurement runs in a child process, one after the other. Nothing here is a pass/fail
test; the numbers go to docs/bench.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_count import write_trace
from benchlib import load, measure_child

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO.parent / "shared" / "traces"
REAL = [
    "cloudphysics/cloudPhysicsIO.csv",
    "websearch/wsrch-small.mqsim.txt",
    "keys/arc-oltp.u32be.gz",
    "keys/cloudphysics-w106.txt.xz",
]
RAID5_DEGRADED = {"level": "raid5", "disks": 5, "stripe_unit": 16384, "failed": [2]}

# A child: one job (JSON on stdin: ``{"kind": "curve" | "run", "config", ...}``) -> wall
# time, peak RSS and the result. It imports nothing but raidlab and what a caller of
# raidlab.curve has anyway, so its process time is what a script calling raidlab.curve takes.
CHILD = """
import json, sys, time
job = json.loads(sys.stdin.read())
import raidlab
start = time.perf_counter()
if job["kind"] == "run":
    m = raidlab.run(job["config"], threads=1).metrics
    out = {"misses": m["misses"], "requests": m["requests"]}
else:
    from raidlab.curve import curve_json
    (item,) = curve_json(job["config"], sizes=job["sizes"], sample_rate=job.get("sample_rate"), sample_size=job.get("sample_size"))
    out = {"curve": item["curve"]}
out["wall_s"] = time.perf_counter() - start
with open("/proc/self/status", encoding="ascii") as f:
    out["rss_kib"] = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
print(json.dumps(out))
"""


def timed_child(job: dict[str, Any]) -> dict[str, Any]:
    """One job in a child process; ``process_s`` is the child's whole life, as the parent
    sees it."""
    start = time.perf_counter()
    r = measure_child(CHILD, json.dumps(job))
    r["process_s"] = time.perf_counter() - start
    return r


def best(job: dict[str, Any], repeat: int) -> dict[str, Any]:
    runs = [timed_child(job) for _ in range(max(1, repeat))]
    return min(runs, key=lambda r: r["process_s"])


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
    trace = tmp / "zipf.oracleGeneral.bin"
    for n in sorted({a.requests, a.big_trace_requests}):
        footprint = write_trace(trace, n, a.keys, 0.9, seed=7)
        config = {"workload": {"trace": str(trace), "format": "oracle"}, "cache": {"policy": "lru", "capacity_blocks": max(1, footprint // 10)}}
        sizes = grid(footprint)
        print(f"trace: {n:,} requests, Zipf(0.9) over {a.keys:,} keys, footprint {footprint:,} blocks; {len(sizes)} sizes; {load()}")
        exact = None
        if n == a.requests:
            # The exact curve against one counting run (wall times inside the process).
            one = best({"kind": "run", "config": config}, a.repeat)
            exact = best({"kind": "curve", "config": config, "sizes": sizes}, a.repeat)
            print(f"  one counting run (10 %):     {one['wall_s']:7.2f} s")
            print(f"  exact LRU curve, {len(sizes)} sizes:  {exact['wall_s']:7.2f} s   ratio {exact['wall_s'] / one['wall_s']:.2f}x (target <= 3)")
        print(f"  {'M req/s (wall time)':20} {'process':>15}  {'call':>15}  {'pass':>15}   (target >= 50)")
        for label, extra in (("SHARDS R=0.01", {"sample_rate": 0.01}), ("SHARDS 8,192 blocks", {"sample_size": 8192})):
            s = best({"kind": "curve", "config": config, "sizes": sizes, **extra}, a.repeat)
            err = ""
            if exact is not None:
                mr, rgr = errors(s["curve"], exact["curve"])
                err = f"   error: miss ratio {mr:.4f}, RGR {rgr:.4f}"
            # Requests per second of the process (its whole life: interpreter start, imports,
            # the call), of the call (raidlab.curve from Python: config, file, pass, JSON)
            # and of the pass (the core's own wall time: reading the file and the pass).
            rates = "  ".join(
                f"{n / t / 1e6:6.1f} ({t:5.3f} s)" for t in (s["process_s"], s["wall_s"], s["curve"]["wall_s"])
            )
            print(f"  {label:20} {rates}{err}; {load()}", flush=True)


def sampled_errors(config: dict[str, Any], sizes: list[int], reference: dict[str, Any], extra: dict[str, Any], seeds: int) -> str:
    """Errors of a sampled curve over ``seeds`` hash seeds (the seed picks the sample):
    ``mean (worst)`` of the miss-ratio error, then of the RGR error over its range."""
    errs = []
    for seed in range(1, seeds + 1):
        cfg = {**config, "run": {**config.get("run", {}), "seed": seed}}
        s = best({"kind": "curve", "config": cfg, "sizes": sizes, **extra}, 1)["curve"]
        errs.append(errors(s, reference))
    mr = [e[0] for e in errs]
    rgr = [e[1] for e in errs]
    return f"{sum(mr) / len(mr):.4f} ({max(mr):.4f}) / {sum(rgr) / len(rgr):.4f} ({max(rgr):.4f})"


def accuracy(name: str, config: dict[str, Any], sizes: list[int], seeds: int, minis: bool = True) -> None:
    """One workload's errors, a line per estimator; ``minis`` off leaves the
    mini-simulations out (their reference is a full simulation per size)."""
    exact = best({"kind": "curve", "config": config, "sizes": sizes}, 1)["curve"]
    print(f"  {name}", flush=True)
    for label, extra in (("SHARDS R=0.01", {"sample_rate": 0.01}), ("SHARDS 8,192 blocks", {"sample_size": 8192})):
        print(f"    {label:24} {sampled_errors(config, sizes, exact, extra, seeds)}", flush=True)
    for policy in ("arc", "fifo", "clock") if minis else ():
        cfg = {**config, "cache": {**config["cache"], "policy": policy}}
        full = best({"kind": "curve", "config": cfg, "sizes": sizes}, 1)["curve"]
        for rate in (0.01, 0.1):
            cells = sampled_errors(cfg, sizes, full, {"sample_rate": rate}, seeds)
            print(f"    {policy.upper() + ' mini-sim R=' + str(rate):24} {cells}", flush=True)


def accuracies(a: argparse.Namespace) -> None:
    print(
        f"sampling errors over {a.seeds} sample seeds, mean (worst): miss ratio / RGR over its range"
        " (degraded RAID-5, 17 sizes up to the footprint):"
    )
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
        accuracy(name, config, grid(footprint_of(config)), a.seeds, minis)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=10_000_000)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--big-trace-requests", type=int, default=100_000_000, help="the speed test's second trace")
    p.add_argument("--zipf-requests", type=int, default=100_000_000)
    p.add_argument("--repeat", type=int, default=3, help="best of K runs each (speed)")
    p.add_argument("--seeds", type=int, default=5, help="sample seeds per sampled curve (errors)")
    p.add_argument("--skip-big", action="store_true", help="skip the 100 M-request trace and stream")
    p.add_argument("--sections", default="speed,errors", help="comma-separated: speed, errors")
    a = p.parse_args()
    sections = set(a.sections.split(","))
    if a.skip_big:
        a.zipf_requests = min(a.zipf_requests, 10_000_000)
        a.big_trace_requests = min(a.big_trace_requests, a.requests)
    if "speed" in sections:
        with tempfile.TemporaryDirectory() as tmp:
            speed(a, Path(tmp))
    if "errors" in sections:
        accuracies(a)


if __name__ == "__main__":
    sys.exit(main())
