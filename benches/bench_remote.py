"""Remote members against local ones, side by side in one run.

A RAID-5 of 5 served by ``raidlab serve``, three ways, every member in tmpfs:
- ``local``: member files;
- ``remote``: each member an ``nbd://`` export of ``nbdkit file`` on a host of its own (a
  network namespace joined by a veth pair, as ``scripts/remote_faults.py`` makes them);
- ``remote+D``: the same with ``nbdkit --filter=delay`` adding D ms to every member request.

fio's nbd engine drives each (best of ``--repeat``): 4 KiB random reads and writes at queue
depths 1, 4, 16 and 64, and 1 MiB sequential reads and writes at depth 8 (local and remote
only). Prints IOPS / MB/s, the remote/local ratio, and, for ``remote+D``, the bound the
members allow: a 4 KiB read is one member request and a 4 KiB RAID-5 write two rounds of
them (read old data and parity, then write both), each taking at least D, with at most
``min(depth, servers' workers)`` client requests served at once, and each nbdkit runs 16
requests at a time (its default thread count), so

    read bound  = min(depth, workers, 5 x 16) / D
    write bound = min(depth, workers, 5 x 16 / 2) / (2 D)

``raidlab serve`` runs with ``--workers 64`` so that the bound is the members', not the
server's default worker count.

    python benches/bench_remote.py [--runtime 2] [--repeat 2] [--member-mib 64] [--delay-ms 2] [--json]

Needs root, ``ip netns``, nbdkit and fio; exits 77 with a message without them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import crashloop as cl  # noqa: E402
import remote_faults as rf  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_store import fio  # noqa: E402

DISKS = 5
WORKERS = 64
DEPTHS = (1, 4, 16, 64)
NBDKIT_THREADS = 16


def jobs(with_seq: bool) -> list[tuple[str, str, str, int]]:
    out = [(f"randread 4k qd{q}", "randread", "4k", q) for q in DEPTHS]
    out += [(f"randwrite 4k qd{q}", "randwrite", "4k", q) for q in DEPTHS]
    if with_seq:
        out += [("read 1M qd8", "read", "1M", 8), ("write 1M qd8", "write", "1M", 8)]
    return out


def bound(rw: str, qd: int, delay_s: float) -> float:
    if rw == "randread":
        return min(qd, WORKERS, DISKS * NBDKIT_THREADS) / delay_s
    return min(qd, WORKERS, DISKS * NBDKIT_THREADS / 2) / (2 * delay_s)


def serve_array(arr: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    try:
        return cl.start_server(arr, port, log, ["--workers", str(WORKERS)])
    except RuntimeError as e:
        sys.exit(f"bench_remote: {e}")


def measure(root: Path, name: str, members: list[str], member_mib: int, table: list[tuple[str, str, str, int]], runtime: float, repeat: int) -> dict[str, dict[str, float]]:
    arr = root / f"arr-{name}"
    create = [*rf.RAIDLAB, "array", "create", str(arr), "--level", "raid5", "--disks", str(DISKS), "--chunk", "64KiB", "--size", f"{member_mib}MiB", *members]
    subprocess.run(create, check=True, capture_output=True, timeout=120)
    port = rf.free_port()
    srv = serve_array(arr, port, root / f"serve-{name}.log")
    uri = f"nbd://127.0.0.1:{port}"
    size = (DISKS - 1) * member_mib << 20
    out: dict[str, dict[str, float]] = {}
    try:
        # A warm-up of sequential writes (about one pass at 200 MB/s), so reads read data.
        fio(uri, "write", "1M", 8, size, 0.1 + size / 200e6)
        # Explicit members are resynced at first start: measured after it, on a whole array.
        deadline = time.monotonic() + 600
        while rf.ctl(arr, {"cmd": "status"})["state"] not in ("clean", "active"):
            if time.monotonic() > deadline:
                sys.exit(f"bench_remote: {name}: the initial resync did not end within 600 s")
            time.sleep(0.2)
        for label, rw, bs, qd in table:
            best: dict[str, float] = {}
            for _ in range(repeat):
                r = fio(uri, rw, bs, qd, size, runtime)
                if r["errors"]:
                    sys.exit(f"bench_remote: fio reported errors on {name} {label}")
                if not best or r["iops"] > best["iops"]:
                    best = r
            out[label] = best
    finally:
        rf.stop(srv)
    return out


def inner(args: argparse.Namespace) -> int:
    root = Path(tempfile.mkdtemp(prefix="raidlab-bench-remote-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    hosts = rf.Hosts(os.environ[rf.NS_ENV], DISKS)
    img_bytes = (1 << 20) + (args.member_mib << 20) + (1 << 20)
    results: dict[str, dict[str, dict[str, float]]] = {}
    kits: list[rf.Nbdkit] = []
    try:
        local = []
        for k in range(DISKS):
            p = root / f"local{k}"
            with open(p, "wb") as f:
                f.truncate(img_bytes)
            local.append(str(p))
        results["local"] = measure(root, "local", local, args.member_mib, jobs(True), args.runtime, args.repeat)
        for tag, filters, params in (
            ("remote", [], []),
            (f"remote+{args.delay_ms:g}ms", ["--filter=delay"], [f"delay-read={args.delay_ms:g}ms", f"delay-write={args.delay_ms:g}ms"]),
        ):
            for k in range(DISKS):
                img = root / f"{tag}-host{k}.img"
                with open(img, "wb") as f:
                    f.truncate(img_bytes)
                kits.append(rf.Nbdkit(hosts.hosts[k], k, img, filters, params))
            results[tag] = measure(root, tag, [k.uri for k in kits[-DISKS:]], args.member_mib, jobs(tag == "remote"), args.runtime, args.repeat)
            for k in kits[-DISKS:]:
                k.kill()
    finally:
        for k in kits:
            k.kill()
        hosts.close()
        subprocess.run(["rm", "-rf", str(root)], check=False)
    delayed = f"remote+{args.delay_ms:g}ms"
    rows = []
    for label, rw, _bs, qd in jobs(True):
        loc, rem = results["local"][label], results["remote"][label]
        row = {
            "job": label,
            "local_iops": round(loc["iops"]),
            "remote_iops": round(rem["iops"]),
            "local_mb_s": round(loc["mb_s"], 1),
            "remote_mb_s": round(rem["mb_s"], 1),
            "remote_over_local": round(rem["iops"] / loc["iops"], 3) if loc["iops"] else None,
        }
        if label in results[delayed]:
            d = results[delayed][label]["iops"]
            b = bound(rw, qd, args.delay_ms / 1000)
            row.update({"delayed_iops": round(d), "bound_iops": round(b), "delayed_over_bound": round(d / b, 3)})
        rows.append(row)
    if args.json:
        print(json.dumps({"delay_ms": args.delay_ms, "member_mib": args.member_mib, "rows": rows}))
        return 0
    print(f"RAID-5 of {DISKS}, 64 KiB chunks, {args.member_mib} MiB per member, tmpfs; best of {args.repeat} x {args.runtime} s")
    print(f"{'job':20} {'local':>9} {'remote':>9} {'ratio':>6}   {delayed + ' IOPS':>15} {'bound':>7} {'of bound':>8}")
    for r in rows:
        unit = "MB/s" if "1M" in r["job"] else "IOPS"
        loc = r["local_mb_s"] if unit == "MB/s" else r["local_iops"]
        rem = r["remote_mb_s"] if unit == "MB/s" else r["remote_iops"]
        tail = f"   {r['delayed_iops']:>15} {r['bound_iops']:>7} {r['delayed_over_bound']:>8.2f}" if "delayed_iops" in r else ""
        print(f"{r['job'] + ' ' + unit:20} {loc:>9} {rem:>9} {r['remote_over_local']:>6.2f}{tail}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runtime", type=float, default=2.0)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--member-mib", type=int, default=64)
    p.add_argument("--delay-ms", type=float, default=2.0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if os.environ.get(rf.NS_ENV):
        return inner(args)
    for tool in ("fio",):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            print(f"skipped: {tool} is not installed", file=sys.stderr)
            return rf.SKIP
    t = time.monotonic()
    rc = rf.rerun_in_netns(__file__)
    if not args.json:
        print(f"({time.monotonic() - t:.0f} s)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
