"""Host failures of an array whose members are on other (emulated) hosts.

Each member host is a network namespace joined to the client's namespace by a veth pair,
running ``nbdkit file`` on a file in tmpfs. ``raidlab serve`` runs in the client namespace
with every member an ``nbd://`` URI; a verifying writer (``crashloop.py``'s stamped 4 KiB
blocks, ``--qd`` in flight, over the first ``--hot`` of the array) writes through it
while one host suffers a fault:

- ``link``: the veth is set down for ``--away`` seconds, then up (a host away and back);
- ``eio``: ``nbdkit --filter=error`` fails 20 % of that host's requests with EIO while a
  flag file exists (a failing disk: the member is failed as faulty; ``ctl re-add`` then);
- ``slow``: ``nbdkit --filter=delay`` delays each of that host's requests by 30 ms (slower
  than the rest, well inside ``--member-timeout``: it must not be failed);
- ``restart``: that host's nbdkit is killed, then started again on the same file.

After the fault the script waits until every member is in sync, then reads back every
block the writer wrote (the newest acknowledged stamp, or a later one in flight; never an
older, torn or corrupt one), runs ``ctl check``, and reports per cell: client errors
(error replies to the writer), lost writes, check mismatches, and the bytes resynced
onto the member against its size (``last_rebuild``).

    python scripts/remote_faults.py [--levels raid1,raid5,raid6] [--modes wt,wb]
        [--faults link,eio,slow,restart] [--json] [--member-mib 16]

Needs root, ``ip netns`` and nbdkit; exits 77 (skip) with a message without them. Every
namespace and process it makes is removed at the end. Exit 0 when every cell is clean.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crashloop import BLOCK, CMD_WRITE, RAIDLAB, Gone, Ledger, Nbd, Totals, ctl, free_port, stamp, start_server, stop, verify  # noqa: E402

DISKS = {"raid1": 2, "raid5": 4, "raid6": 5, "raid10": 4}
SKIP = 77
NS_ENV = "RAIDLAB_REMOTE_NS"
# The host that suffers the fault (slot 1).
VICTIM = 1


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=check, timeout=60)


def why_not() -> str | None:
    """Why this machine cannot run the emulated hosts, or None."""
    if os.geteuid() != 0:
        return "not root: network namespaces need CAP_SYS_ADMIN"
    for tool in ("ip", "nbdkit"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/ensure-debs.sh installs nbdkit)"
    probe = f"rlprobe{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    sh("ip", "netns", "del", probe, check=False)
    return None


class Hosts:
    """`n` host namespaces, each joined to the client's (this process's) by a veth pair:
    client side ``rlvK`` 10.77.K.1/30, host side 10.77.K.2/30."""

    def __init__(self, client: str, n: int) -> None:
        tag = f"{os.getpid() % 100000}"
        self.client = client
        self.hosts = [f"rl-h{tag}-{k}" for k in range(n)]
        for k, h in enumerate(self.hosts):
            sh("ip", "netns", "add", h)
            sh("ip", "-n", h, "link", "set", "lo", "up")
            sh("ip", "-n", self.client, "link", "add", f"rlv{k}", "type", "veth", "peer", "name", "eth0", "netns", h)
            sh("ip", "-n", self.client, "addr", "add", f"10.77.{k}.1/30", "dev", f"rlv{k}")
            sh("ip", "-n", h, "addr", "add", f"10.77.{k}.2/30", "dev", "eth0")
            sh("ip", "-n", self.client, "link", "set", f"rlv{k}", "up")
            sh("ip", "-n", h, "link", "set", "eth0", "up")

    def close(self) -> None:
        for ns in self.hosts:
            # Processes left in it are ours (nbdkit, raidlab serve): end them by id.
            pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
            for p in pids:
                try:
                    os.kill(int(p), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            sh("ip", "netns", "del", ns, check=False)


class Nbdkit:
    """``nbdkit file`` in host namespace ``ns`` on 10.77.K.2:10809."""

    def __init__(self, ns: str, k: int, img: Path, filters: list[str], params: list[str]) -> None:
        self.args = ["ip", "netns", "exec", ns, "nbdkit", "--foreground", "--exit-with-parent", "-i", f"10.77.{k}.2", "-p", "10809", *filters, "file", f"file={img}", *params]
        self.proc: subprocess.Popen[bytes] | None = None
        self.k = k
        self.start()

    @property
    def uri(self) -> str:
        return f"nbd://10.77.{self.k}.2:10809/"

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection((f"10.77.{self.k}.2", 10809), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"nbdkit on host {self.k} did not listen")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def serve(arr: Path, port: int, log: Path, extra: list[str]) -> subprocess.Popen[bytes]:
    # A host that stops answering is given up after 1 s; no spare takes its slot meanwhile.
    return start_server(arr, port, log, ["--member-timeout", "1", "--missing-grace", "600", *extra])


def write_for(nbd: Nbd, led: Ledger, rng: random.Random, qd: int, blocks: int, seconds: float, errors: list[str]) -> int:
    """Keep ``qd`` stamped writes in flight for ``seconds``; error replies are client errors
    (recorded, the block's old value still stands). Returns writes acknowledged."""
    inflight: dict[int, tuple[int, int]] = {}
    busy: set[int] = set()
    acked = 0
    end = time.monotonic() + seconds
    for _ in range(10_000_000):  # bounded by the deadline
        if not inflight and time.monotonic() >= end:
            break
        while time.monotonic() < end and len(inflight) < qd:
            block = rng.randrange(blocks)
            if block in busy:
                continue
            led.seq += 1
            inflight[nbd.send(CMD_WRITE, block * BLOCK, BLOCK, stamp(block, led.seq))] = (block, led.seq)
            busy.add(block)
        cookie, err, _ = nbd.reply()
        block, seq = inflight.pop(cookie)
        busy.discard(block)
        if err:
            errors.append(f"write of block {block}: errno {err}")
            # It may or may not have landed.
            led.maybe.setdefault(block, set()).add(seq)
            continue
        led.acked[block] = max(seq, led.acked.get(block, 0))
        acked += 1
    return acked


def len_regions(st: dict[str, Any]) -> int:
    """The bitmap's region count."""
    rows = st["member_data_bytes"] // st["chunk_bytes"]
    rpr = st["resync"]["rows_per_region"] or 1
    return int(-(-rows // rpr))


def wait_whole(arr: Path, timeout: float) -> dict[str, Any]:
    """Wait until every member is in sync and nothing is missing, faulty or rebuilding."""
    deadline = time.monotonic() + timeout
    st: dict[str, Any] = {}
    while time.monotonic() < deadline:
        st = ctl(arr, {"cmd": "status"})
        if st["state"] in ("clean", "active") and not st["missing"] and not st["faulty"] and st["rebuild"] is None:
            return st
        time.sleep(0.1)
    raise RuntimeError(f"the array did not become whole within {timeout} s: {json.dumps(st)[:2000]}")


def run_cell(root: Path, hosts: Hosts, level: str, mode: str, fault: str, member_mib: int, away: float, qd: int, seed: int, hot: float) -> dict[str, Any]:
    disks = DISKS[level]
    cell = root / f"{level}-{mode}-{fault}"
    cell.mkdir()
    member_bytes = member_mib << 20
    kits = []
    for k in range(disks):
        img = cell / f"host{k}.img"
        with open(img, "wb") as f:
            f.truncate((1 << 20) + member_bytes + (1 << 20))
        filters: list[str] = []
        params: list[str] = []
        if k == VICTIM and fault == "eio":
            filters, params = ["--filter=error"], ["error-rate=20%", f"error-file={cell / 'eio-on'}"]
        if k == VICTIM and fault == "slow":
            filters, params = ["--filter=delay"], ["delay-read=30ms", "delay-write=30ms"]
        kits.append(Nbdkit(hosts.hosts[k], k, img, filters, params))
    arr = cell / "arr"
    size = f"{member_mib}MiB"
    subprocess.run([*RAIDLAB, "array", "create", str(arr), "--level", level, "--disks", str(disks), "--chunk", "64KiB", "--size", size, "--bitmap-chunk", "64KiB", *[k.uri for k in kits]], check=True, capture_output=True, timeout=60)
    extra = ["--write-cache-mib", "2", "--backup", "mirror"] if mode == "wb" else []
    port = free_port()
    log = cell / "serve.log"
    srv = serve(arr, port, log, extra)
    led, errors = Ledger(), []
    rng = random.Random(seed)
    data_disks = {"raid1": 1, "raid5": disks - 1, "raid6": disks - 2, "raid10": disks // 2}[level]
    # The writer's working set: the first `hot` of the array (a hot set, as most workloads
    # have), so the bitmap's effect shows in the bytes resynced.
    blocks = max(qd * 4, int(data_disks * member_bytes // BLOCK * hot))
    out: dict[str, Any] = {"level": level, "mode": mode, "fault": fault, "member_bytes": member_bytes}
    try:
        nbd = Nbd("127.0.0.1", port)
        acked = write_for(nbd, led, rng, qd, blocks, 1.0, errors)
        st = ctl(arr, {"cmd": "status"})
        # Bits already set when the host leaves are resynced at its return too: the initial
        # resync's regions (explicit members are resynced at first start) not yet cleared.
        out["before_fault"] = {"dirty_regions": st["resync"]["dirty_regions"], "pending_regions": st["resync"]["pending_regions"], "regions": len_regions(st)}
        t0 = time.monotonic()
        if fault == "link":
            sh("ip", "-n", hosts.client, "link", "set", f"rlv{VICTIM}", "down")
        elif fault == "eio":
            (cell / "eio-on").touch()
        elif fault == "restart":
            kits[VICTIM].kill()
        acked += write_for(nbd, led, rng, qd, blocks, away, errors)
        if fault == "link":
            sh("ip", "-n", hosts.client, "link", "set", f"rlv{VICTIM}", "up")
        elif fault == "eio":
            (cell / "eio-on").unlink()
        elif fault == "restart":
            kits[VICTIM].start()
        # Writes go on while the host returns and is re-added.
        acked += write_for(nbd, led, rng, qd, blocks, 1.0, errors)
        st = ctl(arr, {"cmd": "status"})
        out["after_fault"] = {"missing": [m["slot"] for m in st["missing"]], "faulty": [f["slot"] for f in st["faulty"]]}
        if fault == "eio" and st["faulty"]:
            # A failing disk is faulty, not missing: the operator re-adds it once mended.
            out["re_add"] = ctl(arr, {"cmd": "re-add", "target": str(st["faulty"][0]["slot"])})
        t1 = time.monotonic()
        st = wait_whole(arr, 120)
        out["recovered_s"] = round(time.monotonic() - t0, 2)
        out["waited_s"] = round(time.monotonic() - t1, 2)
        acked += write_for(nbd, led, rng, qd, blocks, 0.5, errors)
        nbd.close()
        tot = Totals()
        verify(arr, port, led, tot, 0)
        chk = ctl(arr, {"cmd": "check", "wait": True})
        last = st.get("last_rebuild") or {}
        out.update(
            {
                "writes_acked": acked,
                "client_errors": len(errors),
                "lost": tot.lost,
                "corrupt": tot.corrupt,
                "blocks_checked": tot.blocks_checked,
                "check_mismatches": chk.get("mismatches"),
                "resync": last.get("kind"),
                "resynced_bytes": last.get("bytes", 0),
                "problems": (errors + tot.problems)[:5],
            }
        )
    finally:
        try:
            stop(srv)
        except Exception as e:  # noqa: BLE001 (reported with the cell)
            out.setdefault("problems", []).append(f"stop: {e}")
            if srv.poll() is None:
                os.killpg(srv.pid, signal.SIGKILL)
                srv.wait(timeout=30)
        for k in kits:
            k.kill()
    out["ok"] = out.get("client_errors") == 0 and out.get("lost") == 0 and out.get("corrupt") == 0 and out.get("check_mismatches") == 0
    return out


def inner(args: argparse.Namespace) -> int:
    hosts_n = max(DISKS[lv] for lv in args.levels.split(","))
    rows = []
    root = Path(tempfile.mkdtemp(prefix="raidlab-remote-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    hosts = Hosts(os.environ[NS_ENV], hosts_n)
    try:
        seed = args.seed
        for level in args.levels.split(","):
            for mode in args.modes.split(","):
                for fault in args.faults.split(","):
                    seed += 1
                    row = run_cell(root, hosts, level, mode, fault, args.member_mib, args.away, args.qd, seed, args.hot)
                    rows.append(row)
                    if not args.json:
                        print(
                            f"{level:6} {mode} {fault:8} errors {row.get('client_errors')} lost {row.get('lost')} "
                            f"check {row.get('check_mismatches')} resynced {row.get('resynced_bytes')} of {row['member_bytes']} "
                            f"({row.get('resync')}) in {row.get('recovered_s')} s {'ok' if row['ok'] else 'PROBLEMS ' + str(row.get('problems'))}",
                            flush=True,
                        )
    finally:
        hosts.close()
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(rows))
    return 0 if all(r["ok"] for r in rows) else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--levels", default="raid1,raid5,raid6")
    p.add_argument("--modes", default="wt,wb")
    p.add_argument("--faults", default="link,eio,slow,restart")
    p.add_argument("--member-mib", type=int, default=16)
    p.add_argument("--away", type=float, default=2.5, help="seconds a host is away (or its disk fails)")
    p.add_argument("--qd", type=int, default=8)
    p.add_argument("--hot", type=float, default=0.125, help="fraction of the array the writer writes (from its start)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    for lv in args.levels.split(","):
        if lv not in DISKS:
            p.error(f"--levels: unknown level {lv!r}; expected {', '.join(DISKS)}")
    for f in args.faults.split(","):
        if f not in ("link", "eio", "slow", "restart"):
            p.error(f"--faults: unknown fault {f!r}")
    if os.environ.get(NS_ENV):
        return inner(args)
    return rerun_in_netns(__file__)


def rerun_in_netns(script: str) -> int:
    """Run ``script`` with this process's arguments again inside a network namespace of its
    own (``NS_ENV`` names it), where the serve's loopback and the veths live: nothing of the
    machine's own network changes. Exit code 77 (skip) where namespaces cannot be made."""
    why = why_not()
    if why:
        print(f"skipped: {why}", file=sys.stderr)
        return SKIP
    ns = f"rl-run{os.getpid() % 100000}"
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        env = dict(os.environ, **{NS_ENV: ns})
        r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, script, *sys.argv[1:]], env=env, timeout=3600)
        return r.returncode
    finally:
        for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        sh("ip", "netns", "del", ns, check=False)


if __name__ == "__main__":
    sys.exit(main())
