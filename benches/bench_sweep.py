"""Sweep machinery speed: per-run overhead with tiny runs, and speed-up with workers on
CPU-bound runs.

1. Tiny runs (Zipf, 100 requests each; the simulation itself takes microseconds): a grid of
   ``--runs`` runs through ``raidlab.sweep`` with the local process pool, 1 and 2 workers,
   into a fresh store each time. The fixed cost (planning, starting the pool, importing
   pyarrow in the workers) is measured with a one-run sweep and subtracted:
   ``overhead per run = (wall(N runs) - wall(1 run)) / (N - 1) - mean simulated wall_s``,
   i.e. what one more run costs beyond its simulation, end to end (submit, run, Parquet
   write and rename, result back, DataFrame). Also: a resumed sweep over the complete store
   (every run skipped), and the same grid as one in-process ``raidlab.run`` batch (no
   store) for reference.
2. CPU-bound runs (Zipf, ``--heavy-requests`` each, ~0.4 s): ``--heavy-runs`` runs with 1
   and 2 workers; speed-up = wall(1) / wall(2), against the ideal min(workers, cores).
3. Dask: ``--dask-runs`` CPU-bound runs (Zipf, ``--dask-requests`` each, ~4 s on an idle
   core) on a ``distributed.LocalCluster`` of 1 and of 2 worker processes with one thread
   each (target: 2 workers >= 1.8x as fast as 1), and the same grid on the local process
   pool for reference. The cluster is started and its workers have imported raidlab and
   pyarrow before the sweep is timed (a cluster is started once for many sweeps); its start
   is printed on its own.

    python benches/bench_sweep.py [--runs N] [--heavy-runs K] [--heavy-requests R]
                                  [--dask-runs K] [--dask-requests R] [--dask-repeat K]
                                  [--sections tiny,heavy,dask]

Prints runs/s, per-run overhead (target < 20 ms) and speed-ups, with the load average
before and after each timed part: a speed-up needs an idle machine (load average < 1.5
beside the benchmark's own processes). Not a pass/fail test.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import raidlab
from raidlab.sweep import default_workers, sweep

from benchlib import load


def grid(runs: int, requests: int) -> dict:
    seeds = list(range(1, runs + 1))
    return {
        "workload": {"synthetic": {"kind": "zipf", "keys": 10_000, "alpha": 0.9, "requests": requests}},
        "cache": {"policy": "lru", "capacity_blocks": 1000},
        "array": {"level": "raid5", "disks": 5, "failed": [0]},
        "sweep": {"workload.synthetic.seed": seeds},
    }


def timed_sweep(cfg: dict, workers: int, root: Path, executor: object = None) -> tuple[float, object]:
    out = Path(tempfile.mkdtemp(dir=root))
    start = time.perf_counter()
    frame = sweep(cfg, workers=workers, out=out, executor=executor)
    wall = time.perf_counter() - start
    assert (frame["status"] == "done").all()
    return wall, frame


def best(f, repeat: int) -> tuple[float, object]:
    results = [f() for _ in range(repeat)]
    return min(results, key=lambda r: r[0])


def tiny_runs(args: argparse.Namespace, root: Path) -> None:
    print(f"\ntiny runs (100 requests each), {args.runs} runs, local process pool")
    print(f"{'workers':>7}  {'fixed s':>8}  {'wall s':>7}  {'runs/s':>8}  {'marginal ms/run':>15}  {'overhead ms/run':>15}")
    tiny = grid(args.runs, 100)
    one = grid(1, 100)
    for workers in (1, 2):
        fixed, _ = best(lambda: timed_sweep(one, workers, root), args.repeat)
        wall, frame = best(lambda: timed_sweep(tiny, workers, root), args.repeat)
        sim_s = float(frame["wall_s"].mean())
        marginal_s = (wall - fixed) / (args.runs - 1)
        # worker time per run beyond the simulation itself
        overhead_ms = (marginal_s * workers - sim_s) * 1e3
        print(f"{workers:>7}  {fixed:>8.2f}  {wall:>7.2f}  {args.runs / wall:>8.0f}  {marginal_s * 1e3:>15.2f}  {overhead_ms:>15.2f}")
    # Resume over a complete store: every run is skipped.
    out = Path(tempfile.mkdtemp(dir=root))
    sweep(tiny, workers=2, out=out)
    start = time.perf_counter()
    sweep(tiny, workers=2, out=out)
    resume = time.perf_counter() - start
    start = time.perf_counter()
    raidlab.run(tiny, threads=1)
    batch = time.perf_counter() - start
    print(f"resume, all {args.runs} runs in the store: {resume:.2f} s ({resume / args.runs * 1e3:.2f} ms/run)")
    print(f"reference: one in-process batch, no store: {batch:.2f} s ({batch / args.runs * 1e3:.3f} ms/run)")


def speedup(label: str, runs: int, requests: int, sweep_on, repeat: int = 1) -> None:
    """``sweep_on(workers)`` -> (wall, frame) for 1 and 2 workers, best of ``repeat``; prints
    the speed-up, and how much longer a run took with 2 workers than with 1 (1.0 when the
    two cores were the benchmark's alone: above that, other processes shared them)."""
    print(f"\n{label}: CPU-bound runs ({requests:,} requests each), {runs} runs")
    walls, mean_run = {}, {}
    for workers in (1, 2):
        before = load()
        wall, frame = best(lambda: sweep_on(workers), repeat)
        walls[workers] = wall
        mean_run[workers] = float(frame["wall_s"].mean())
        busy = float(frame["wall_s"].sum())
        print(
            f"  {workers} worker(s): {wall:6.2f} s, {runs / wall:.2f} runs/s, mean run {frame['wall_s'].mean():.2f} s, "
            f"runs busy {busy / wall / workers:.0%} of the workers' wall time ({before} before, {load()} after)",
            flush=True,
        )
    ideal = min(2, default_workers())
    print(f"  speed-up 2 vs 1 workers: {walls[1] / walls[2]:.2f}x (ideal {ideal}x); a run took {mean_run[2] / mean_run[1]:.2f}x as long with 2 workers")


def warm() -> None:
    """Import what a run needs (in a Dask worker, as a worker of a running cluster has), and
    what the sweep's DataFrame needs (in this process, so the first timed sweep does not pay
    for it alone)."""
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import raidlab.sweep  # noqa: F401


def dask_sweep(cfg: dict, workers: int, root: Path) -> tuple[float, object]:
    from distributed import Client, LocalCluster

    start = time.perf_counter()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster, set_as_default=False) as client:
            client.run(warm)
            print(f"  (cluster of {workers} started and warm in {time.perf_counter() - start:.2f} s)")
            return timed_sweep(cfg, workers, root, executor=client)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--heavy-runs", type=int, default=8)
    ap.add_argument("--heavy-requests", type=int, default=3_000_000)
    ap.add_argument("--dask-runs", type=int, default=16)
    ap.add_argument("--dask-requests", type=int, default=30_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--dask-repeat", type=int, default=1, help="best of K for each worker count of the long runs (2 on a shared machine)")
    ap.add_argument("--sections", default="tiny,heavy,dask", help="comma-separated: tiny, heavy, dask")
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    root = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    warm()
    try:
        print(f"cores: {default_workers()}; raidlab {raidlab.__version__}; {load()}")
        if "tiny" in sections:
            tiny_runs(args, root)
        if "heavy" in sections:
            heavy = grid(args.heavy_runs, args.heavy_requests)
            speedup("local process pool", args.heavy_runs, args.heavy_requests, lambda w: timed_sweep(heavy, w, root))
        if "dask" in sections:
            long = grid(args.dask_runs, args.dask_requests)
            speedup("Dask LocalCluster", args.dask_runs, args.dask_requests, lambda w: dask_sweep(long, w, root), args.dask_repeat)
            speedup(
                "local process pool, the same runs", args.dask_runs, args.dask_requests, lambda w: timed_sweep(long, w, root), args.dask_repeat
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
