"""The store's write-back cache, side by side in one process group.

Part 1 - what durability costs a 4 KiB random write. fio's nbd engine drives a RAID-5 of 5
served with no write cache (write-through: the reply waits for the member writes, durable
at the next FLUSH), and with a write-back cache backed up by a mirror file, by RAPID-Cache's
log (physical: its own file; logical: a partition past every member's data) and by nothing
(volatile), against ``nbdkit file`` on one raw file (sparse, and preallocated with a FLUSH
after every write; the ratio is against the faster of the two). Depth 1 and 32; IOPS, mean
and p99 latency. The mirror and the physical log run twice: with a 32 MiB cache, which a
random-write run fills, so a write waits for RAID-5 destaging (sustained), and with a cache
larger than the export, which measures the durable write path alone (burst). Members, backup and raw file in tmpfs, and again on a disk-backed file system
(``--disk-dir``, default the system's temporary directory when it is not tmpfs), where every
backup commit is a real fdatasync.

Part 2 - the destage orders on SPC-1-like traffic. ``raidlab replay`` runs the SPC-1-like
generator at depth 8 through LRW, WOW and STOW (and CSCAN) with the same cache, and the
server's own counters give the destages, the share of full-stripe destages and the pages
written to the members per page written by the client.

    python benches/bench_store_wb.py [--runtime 2] [--repeat 2] [--member-mib 64] [--requests 60000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_store import RAIDLAB, Servers, ctl, free_port, need, wait_port  # noqa: E402

CACHE_MIB = 32
WB = {
    "write-through": [],
    "wb+mirror": ["--write-cache-mib", str(CACHE_MIB), "--backup", "mirror"],
    "wb+log physical": ["--write-cache-mib", str(CACHE_MIB), "--backup", "log"],
    "wb+log logical": ["--write-cache-mib", str(CACHE_MIB), "--backup", "log", "--log-mode", "logical"],
    "wb+none": ["--write-cache-mib", str(CACHE_MIB), "--backup", "none"],
}
# The same backups with a cache larger than the export: no page is destaged during the
# run, so the cell measures the durable write path itself (the backup's group commit), not
# the RAID-5 small-write destaging behind it that a full cache waits for.
BURST = ("wb+mirror", "wb+log physical")
ORDERS = ["lrw", "cscan", "wow", "stow"]
# The peer: nbdkit with a FLUSH after every write, on a sparse file and on a preallocated
# one (ext4 answers the two differently; the faster is the reference).
PEERS = ("nbdkit file, flush each", "nbdkit preallocated, flush each")


def fio_lat(uri: str, qd: int, size: int, runtime: float, extra: tuple[str, ...] = ()) -> dict[str, float]:
    argv = [
        "fio", "--name=b", "--ioengine=nbd", f"--uri={uri}", "--rw=randwrite", "--bs=4k",
        f"--iodepth={qd}", f"--size={size}", "--time_based", f"--runtime={runtime}",
        "--output-format=json", "--randrepeat=1", "--norandommap", "--lat_percentiles=1", *extra,
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=runtime + 120, check=False)
    if out.returncode != 0:
        sys.exit(f"bench_store_wb: fio failed on {uri}: {out.stderr.strip()}")
    w = json.loads(out.stdout[out.stdout.index("{") :])["jobs"][0]["write"]
    lat = w["lat_ns"]  # submission to completion (fio's nbd engine spends most of it in slat)
    return {
        "iops": float(w["iops"]),
        "mean_us": float(lat["mean"]) / 1e3,
        "p99_us": float(lat["percentile"]["99.000000"]) / 1e3,
    }


def commit_counts(d: Path | None) -> tuple[float, ...]:
    """A served array's write cache: writes answered after a backup commit, the backup's
    syncs, cache-lock waits and their total microseconds, and the destager's microseconds
    writing, syncing and releasing (zeros without a write cache)."""
    if d is None:
        return (0.0,) * 7
    wc = ctl(d, {"cmd": "status"}).get("write_cache") or {}
    gc = wc.get("group_commit") or {}
    dt = wc.get("destage_time_us") or {}
    return (
        float(gc.get("writes", 0)), float(gc.get("syncs", 0)), float(wc.get("lock_waits", 0)), float(wc.get("lock_wait_us", 0)),
        float(dt.get("write", 0)), float(dt.get("sync", 0)), float(dt.get("release", 0)),
    )


def make_array(d: Path, member_mib: int) -> None:
    subprocess.run(
        [*RAIDLAB, "array", "create", str(d), "--level", "raid5", "--disks", "5", "--chunk", "64KiB", "--size", f"{member_mib}MiB"],
        check=True, capture_output=True, timeout=120,
    )


def part1(root: Path, where: str, member_mib: int, runtime: float, repeat: int) -> dict[str, dict[str, dict[str, float]]]:
    servers = Servers()
    size = 4 * member_mib << 20
    results: dict[str, dict[str, dict[str, float]]] = {}
    try:
        # (name, URI, extra fio options): "flush each" sends an NBD FLUSH after every write,
        # which makes each write durable when it is answered, as the backups do.
        targets: list[tuple[str, str, tuple[str, ...]]] = []
        dirs: dict[str, Path] = {}
        for name, extra in WB.items():
            d = root / name.replace(" ", "-").replace("+", "-")
            make_array(d, member_mib)
            port = free_port()
            servers.start([*RAIDLAB, "serve", str(d), "--listen", f"127.0.0.1:{port}", *extra], ready="accepting connections")
            targets.append((name, f"nbd://127.0.0.1:{port}", ()))
            dirs[name] = d
            if name == "write-through":
                targets.append(("write-through, flush each", f"nbd://127.0.0.1:{port}", ("--fsync=1",)))
        for name in BURST:
            label = f"{name}, cache holds the run"
            d = root / ("burst-" + name.split()[-1].replace("+", "-"))
            make_array(d, member_mib)
            port = free_port()
            extra = [*WB[name]]
            extra[extra.index("--write-cache-mib") + 1] = str(2 * size >> 20)
            servers.start([*RAIDLAB, "serve", str(d), "--listen", f"127.0.0.1:{port}", *extra], ready="accepting connections")
            targets.append((label, f"nbd://127.0.0.1:{port}", ()))
            dirs[label] = d
        for kind in ("sparse", "preallocated"):
            raw = root / f"raw-{kind}.img"
            with open(raw, "wb") as f:
                f.truncate(size)
                if kind == "preallocated":
                    os.posix_fallocate(f.fileno(), 0, size)
                    os.fsync(f.fileno())
            port = free_port()
            servers.start(["nbdkit", "-f", "-p", str(port), "-i", "127.0.0.1", "file", str(raw)])
            wait_port(port)
            if kind == "sparse":
                targets.append(("nbdkit file", f"nbd://127.0.0.1:{port}", ()))
                targets.append(("nbdkit file, flush each", f"nbd://127.0.0.1:{port}", ("--fsync=1",)))
            else:
                targets.append(("nbdkit preallocated, flush each", f"nbd://127.0.0.1:{port}", ("--fsync=1",)))
        for name, _, _ in targets:
            results[name] = {}
        for qd in (1, 32):
            label = f"qd{qd}"
            for _ in range(repeat):
                for name, uri, fx in targets:
                    before = commit_counts(dirs.get(name))
                    r = fio_lat(uri, qd, size, runtime, fx)
                    after = commit_counts(dirs.get(name))
                    # Writes answered per backup sync (group commit), and the cache lock's
                    # waits per write, over this cell only.
                    writes, syncs, _waits, wait_us, dw, ds, dr = (a - b for a, b in zip(after, before))
                    r["writes_per_sync"] = writes / syncs if syncs else 0.0
                    r["lock_wait_us_per_write"] = wait_us / writes if writes else 0.0
                    # The destager's time in this cell, in seconds per second of the run.
                    r["destage_write_s"], r["destage_sync_s"], r["destage_release_s"] = (x / 1e6 / runtime for x in (dw, ds, dr))
                    best = results[name].get(label)
                    if best is None or r["iops"] > best["iops"]:
                        results[name][label] = r
            for name, _, _ in targets:
                r = results[name][label]
                print(
                    f"  [{where}] {name:16} randwrite 4k {label:5} {r['iops']:>9,.0f} IOPS  mean {r['mean_us']:>8,.1f} us  p99 {r['p99_us']:>9,.1f} us"
                    f"  writes/sync {r['writes_per_sync']:.1f}  destager s/s: write {r['destage_write_s']:.2f} sync {r['destage_sync_s']:.2f} release {r['destage_release_s']:.2f}",
                    file=sys.stderr,
                )
    finally:
        servers.stop_all()
    return results


def part2(root: Path, member_mib: int, requests: int) -> dict[str, dict[str, float]]:
    """SPC-1-like traffic through each destage order."""
    toml = root / "spc1.toml"
    space_gib = 4 * member_mib / 1024 * 0.95
    # Only the workload is replayed; the write cache and array tables describe the served one.
    toml.write_text(
        '[workload]\nops = "all"\n\n[run]\nmode = "timed"\n\n'
        "[write_cache]\ncapacity_pages = 4096\n\n"
        '[array]\nlevel = "raid5"\ndisks = 5\nstripe_unit = 65536\n\n'
        "[[runs]]\n"
        f'workload.synthetic = {{ kind = "spc1", backend = "full", space_gib = {space_gib:.4f}, requests = {requests}, seed = 1 }}\n'
    )
    out: dict[str, dict[str, float]] = {}
    servers = Servers()
    try:
        for order in ORDERS:
            d = root / f"spc1-{order}"
            make_array(d, member_mib)
            port = free_port()
            servers.start(
                [*RAIDLAB, "serve", str(d), "--listen", f"127.0.0.1:{port}", "--write-cache-mib", "16", "--backup", "mirror", "--destage", order],
                ready="accepting connections",
            )
            r = subprocess.run(
                [*RAIDLAB, "replay", f"nbd://127.0.0.1:{port}", str(toml), "--qd", "8", "--json"],
                capture_output=True, text=True, timeout=1200, check=False,
            )
            if r.returncode != 0:
                sys.exit(f"bench_store_wb: replay failed: {r.stderr.strip()}")
            rep = json.loads(r.stdout)
            wc = ctl(d, {"cmd": "status"})["write_cache"]
            members = ctl(d, {"cmd": "status"})["members"]
            member_pages = sum(m["write_blocks"] for m in members)
            out[order] = {
                "iops": rep["iops"],
                "write_p99_ms": (rep.get("write_latency") or {}).get("p99_ms", 0.0),
                "page_writes": wc["page_writes"],
                "destages": wc["destages"],
                "destaged_pages": wc["destaged_pages"],
                "full_stripe_share": wc["full_stripe_destages"] / wc["destages"] if wc["destages"] else 0.0,
                "member_pages_per_client_page": member_pages / wc["page_writes"] if wc["page_writes"] else 0.0,
                "overwrite_hits": wc["overwrite_hits"],
                "held_at_end": wc["occupied_pages"],
            }
            print(f"  spc1 {order:6} {out[order]}", file=sys.stderr)
    finally:
        servers.stop_all()
    return out


def is_tmpfs(path: Path) -> bool:
    try:
        out = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return False
    return out.strip() in ("tmpfs", "ramfs")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runtime", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--member-mib", type=int, default=64)
    ap.add_argument("--requests", type=int, default=60_000, help="SPC-1-like requests per destage order")
    ap.add_argument("--disk-dir", default=None, help="a directory on a disk-backed file system (default: the temp dir if not tmpfs)")
    ap.add_argument("--only", choices=["tmpfs", "disk"], default=None, help="part 1 on one file system only")
    ap.add_argument("--skip-spc1", action="store_true", help="part 1 only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    need("fio", "nbdkit")
    runs: dict[str, object] = {}
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    roots: list[tuple[str, str | None]] = [("tmpfs", shm)]
    disk = args.disk_dir or tempfile.gettempdir()
    if not is_tmpfs(Path(disk)):
        roots.append(("disk", disk))
    roots = [r for r in roots if args.only in (None, r[0])]
    for where, base in roots:
        root = Path(tempfile.mkdtemp(prefix="raidlab-bench-wb-", dir=base))
        try:
            runs[where] = part1(root, where, args.member_mib, args.runtime, args.repeat)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    spc: dict[str, dict[str, float]] = {}
    if not args.skip_spc1:
        root = Path(tempfile.mkdtemp(prefix="raidlab-bench-wb-", dir=shm))
        try:
            spc = part2(root, args.member_mib, args.requests)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps({"randwrite": runs, "spc1": spc}))
        return 0
    for where, res in runs.items():
        assert isinstance(res, dict)
        print(f"\n4 KiB random writes, RAID-5 of 5, members on {where}:\n")
        print(
            "| export | qd1 IOPS | qd1 mean us | qd1 p99 us | qd1 / best nbdkit flush each | qd32 IOPS | qd32 mean us | qd32 p99 us"
            " | qd32 / best nbdkit flush each | writes per sync qd1 / qd32 | cache-lock wait us per write qd32 |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        ref1 = max(res[p]["qd1"]["iops"] for p in PEERS)
        ref32 = max(res[p]["qd32"]["iops"] for p in PEERS)
        for name, row in res.items():
            a, b = row["qd1"], row["qd32"]
            wps = f"{a['writes_per_sync']:.1f} / {b['writes_per_sync']:.1f}" if b["writes_per_sync"] else "-"
            lock = f"{b['lock_wait_us_per_write']:.1f}" if b["writes_per_sync"] else "-"
            print(
                f"| {name} | {a['iops']:,.0f} | {a['mean_us']:,.0f} | {a['p99_us']:,.0f} | {a['iops'] / ref1:.2f} | {b['iops']:,.0f} | {b['mean_us']:,.0f} | {b['p99_us']:,.0f}"
                f" | {b['iops'] / ref32:.2f} | {wps} | {lock} |"
            )
    print("\nSPC-1-like traffic (raidlab replay, depth 8, 16 MiB cache, mirror backup, RAID-5 of 5 in tmpfs):\n")
    print("| order | IOPS | write p99 ms | destages | full-stripe share | member pages per client page | overwrite hits |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for order, r in spc.items():
        print(
            f"| {order} | {r['iops']:,.0f} | {r['write_p99_ms']:.2f} | {r['destages']:,.0f} | {r['full_stripe_share']:.3f} | {r['member_pages_per_client_page']:.2f} | {r['overwrite_hits']:,.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
