"""The store's scaling on disk-timed members: does the array reach the rate its members allow?

``raidlab serve --timing`` serves a RAID-5 of 5 whose members take, in real time, the service
time of one of the core's disk models. fio's nbd engine sends 4 KiB random reads at depths
1 to 64 (one connection; ``serve`` runs one worker per request in flight when members are
timed). Each read of a healthy RAID-5 goes to one member, so the most the array can do is
the sum of its members' rates: for each member, 1 / its mean model service time over the
step (from ``ctl status``; for ``constant,read-ms=5`` exactly 200/s, so 1000/s for five).
Prints measured IOPS against that bound, the members' mean queue wait, and the simulator's
prediction of the same set-up (timed mode, closed loop at the same depth, uniform 4 KiB reads
over the array, the same disk model), so a shortfall is split into what queueing costs
anyway and what the store adds.

At depth d below the member count the bound is not reachable even in theory: d requests
spread at random over 5 members leave some idle. A closed network of 5 identical FCFS
servers with d customers keeps each busy d / (d + 4) of the time with exponential service
(more with constant service), so the table also gives that figure.

    python benches/bench_store_scale.py [--timing "constant,read-ms=5"] [--runtime 5] [--depths 1,2,4,8,16,32,64] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_store import RAIDLAB, Servers, ctl, free_port, need  # noqa: E402

DISKS = 5


def fio_randread(uri: str, qd: int, size: int, runtime: float) -> dict[str, float]:
    argv = [
        "fio", "--name=b", "--ioengine=nbd", f"--uri={uri}", "--rw=randread", "--bs=4k",
        f"--iodepth={qd}", f"--size={size}", "--time_based", f"--runtime={runtime}",
        "--output-format=json", "--randrepeat=1", "--norandommap",
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=runtime + 120, check=False)
    if out.returncode != 0:
        sys.exit(f"bench_store_scale: fio failed on {uri}: {out.stderr.strip()}")
    r = json.loads(out.stdout[out.stdout.index("{") :])["jobs"][0]["read"]
    return {"iops": float(r["iops"]), "mean_ms": float(r["lat_ns"]["mean"]) / 1e6}


def simulate(timing: str, qd: int, blocks: int) -> float | None:
    """The simulator's IOPS for the same array, disks and depth; None for a spec it cannot
    take here (options other than a constant model's read time)."""
    model, *opts = timing.split(",")
    kv = dict(o.split("=", 1) for o in opts)
    if model == "constant":
        if set(kv) - {"read-ms"}:
            return None
        disk = f'model = "constant"\nservice_ms = {float(kv.get("read-ms", 10))}'
    elif not kv:
        disk = f'preset = "{model}"'
    else:
        return None
    toml = (
        f'[workload.synthetic]\nkind = "uniform"\nkeys = {blocks}\nrequests = 40000\nseed = 1\n'
        '[cache]\npolicy = "lru"\ncapacity_blocks = 1\n'
        f'[array]\nlevel = "raid5"\ndisks = {DISKS}\nstripe_unit = 65536\n'
        f"[disk]\n{disk}\n"
        f'[run]\nmode = "timed"\ndriver = "closed"\noutstanding = {qd}\n'
    )
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(toml)
    try:
        out = subprocess.run([*RAIDLAB, "run", f.name, "--json"], capture_output=True, text=True, timeout=600, check=False)
    finally:
        Path(f.name).unlink()
    if out.returncode != 0:
        sys.exit(f"bench_store_scale: the simulator failed: {out.stderr.strip()}")
    return float(json.loads(out.stdout)["runs"][0]["metrics"]["iops"])


def member_totals(d: Path) -> list[tuple[float, float, float]]:
    """Per member: operations, total model service us, total model wait us (cumulative)."""
    out = []
    for m in ctl(d, {"cmd": "status"})["members"]:
        t = m["timing"]
        out.append((float(t["ops"]), t["service_us_mean"] * t["ops"], t["wait_us_mean"] * t["ops"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timing", default="constant,read-ms=5", help="serve --timing spec of every member")
    ap.add_argument("--runtime", type=float, default=5.0)
    ap.add_argument("--depths", default="1,2,4,8,16,32,64")
    ap.add_argument("--member-mib", type=int, default=64)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    need("fio")
    depths = [int(x) for x in args.depths.split(",")]
    root = Path(tempfile.mkdtemp(prefix="raidlab-bench-scale-"))
    servers = Servers()
    rows: list[dict[str, float]] = []
    try:
        d = root / "arr"
        subprocess.run(
            [*RAIDLAB, "array", "create", str(d), "--level", "raid5", "--disks", str(DISKS), "--chunk", "64KiB", "--size", f"{args.member_mib}MiB"],
            check=True, capture_output=True, timeout=120,
        )
        port = free_port()
        servers.start([*RAIDLAB, "serve", str(d), "--listen", f"127.0.0.1:{port}", "--timing", args.timing], ready="accepting connections")
        size = (DISKS - 1) * args.member_mib << 20
        for qd in depths:
            before = member_totals(d)
            r = fio_randread(f"nbd://127.0.0.1:{port}", qd, size, args.runtime)
            after = member_totals(d)
            bound = 0.0
            wait_ops = wait_us = 0.0
            for (o0, s0, w0), (o1, s1, w1) in zip(before, after):
                if o1 > o0:
                    bound += 1e6 / ((s1 - s0) / (o1 - o0))
                wait_ops += o1 - o0
                wait_us += w1 - w0
            closed = qd / (qd + DISKS - 1)
            sim = simulate(args.timing, qd, size // 4096)
            row = {
                "depth": qd,
                "iops": r["iops"],
                "mean_ms": r["mean_ms"],
                "bound_iops": bound,
                "ratio": r["iops"] / bound if bound else 0.0,
                "closed_network_share": closed,
                "sim_iops": sim if sim is not None else 0.0,
                "member_wait_ms": wait_us / wait_ops / 1e3 if wait_ops else 0.0,
            }
            rows.append(row)
            print(f"  depth {qd:3}: {r['iops']:8,.0f} IOPS of {bound:8,.0f} ({row['ratio']:.3f}), mean {r['mean_ms']:.2f} ms", file=sys.stderr)
    finally:
        servers.stop_all()
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps({"timing": args.timing, "rows": rows}))
        return 0
    print(f"\n4 KiB random reads, RAID-5 of {DISKS} disk-timed members (--timing \"{args.timing}\"), {args.runtime:g} s per depth:\n")
    print("| depth | IOPS | bound (sum of member rates) | IOPS / bound | simulator IOPS (timed, closed loop) | store / simulator | d/(d+4) | mean latency ms | member queue wait ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        sim = f"{r['sim_iops']:,.0f} | {r['iops'] / r['sim_iops']:.3f}" if r["sim_iops"] else "n/a | n/a"
        print(
            f"| {r['depth']:.0f} | {r['iops']:,.0f} | {r['bound_iops']:,.0f} | {r['ratio']:.3f} | {sim} | {r['closed_network_share']:.3f} | {r['mean_ms']:.2f} | {r['member_wait_ms']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
