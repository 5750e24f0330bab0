"""Real crashes: a verifying writer over NBD whose server is killed with SIGKILL at a random
moment, then restarted, again and again.

Each run starts ``raidlab serve`` on one array, keeps ``--qd`` 4 KiB writes in flight to
random blocks (never two at once to one block), each block stamped with its number, the
write's sequence number and a CRC, and records every acknowledgement. At a random moment
the server's process group is killed. The server is restarted, its resync of dirty regions
awaited, and every block written so far read back over NBD: it must hold the newest
acknowledged stamp or a later one that was in flight at the kill (never an older one, never
a torn or corrupt block), and ``ctl check`` must find every row consistent.

    python scripts/crashloop.py [--runs 50] [--level raid5] [--disks 5] [--seed 1] [--json]
        [--write-cache-mib 1 --backup mirror|log|none --destage stow] [--fail-slot 1]

With ``--write-cache-mib`` the server runs a write-back cache; every answered write must
then survive the kill from the backup (``--backup none`` is volatile by design and is
refused here: it promises nothing at a crash). ``--fail-slot`` fails a member before the
first run, so every kill finds the array degraded.

Exit 0 when nothing was lost or corrupt. The test suite runs a few rounds of the same loop
(``tests/test_store_crashloop.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

BLOCK = 4096
RAIDLAB = [sys.executable, "-m", "raidlab.cli"]

# NBD wire constants (the NBD protocol specification, doc/proto.md).
NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
OPT_REPLY_MAGIC = 0x0003E889045565A9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698
OPT_GO, REP_ACK = 7, 1
CMD_READ, CMD_WRITE, CMD_DISC = 0, 1, 2
FLAG_FIXED_NEWSTYLE, FLAG_NO_ZEROES = 1, 2
STAMP = struct.Struct("<8sQQ")  # magic, block, sequence; then filler; CRC-32 in the last 4 bytes
STAMP_MAGIC = b"CRASHLP1"


class Gone(Exception):
    """The server went away (killed)."""


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except (ConnectionResetError, BrokenPipeError) as e:
            raise Gone(str(e)) from None
        if not chunk:
            raise Gone("end of stream")
        buf += chunk
    return bytes(buf)


class Nbd:
    """A minimal fixed-newstyle NBD client, written from the spec for this test (independent
    of raidlab's own client)."""

    def __init__(self, host: str, port: int, timeout_s: float = 30) -> None:
        self.s = socket.create_connection((host, port), timeout=timeout_s)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        magic, opt, _flags = struct.unpack(">QQH", recv_exact(self.s, 18))
        if (magic, opt) != (NBDMAGIC, IHAVEOPT):
            raise RuntimeError("not a fixed-newstyle NBD server")
        self.s.sendall(struct.pack(">I", FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES))
        name = b""
        self.s.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, 4 + len(name) + 2) + struct.pack(">I", len(name)) + name + struct.pack(">H", 0))
        self.size = 0
        for _ in range(64):  # bounded: a few NBD_REP_INFO replies, then the ACK
            magic, _o, rtype, rlen = struct.unpack(">QIII", recv_exact(self.s, 20))
            data = recv_exact(self.s, rlen)
            if magic != OPT_REPLY_MAGIC:
                raise RuntimeError("bad option reply")
            if rtype == 3 and rlen >= 12 and struct.unpack(">H", data[:2])[0] == 0:  # NBD_INFO_EXPORT
                self.size = struct.unpack(">Q", data[2:10])[0]
            if rtype == REP_ACK:
                break
            if rtype & 0x80000000:
                raise RuntimeError(f"option GO refused ({rtype:#x})")
        self.cookie = 0

    def send(self, cmd: int, offset: int, length: int, payload: bytes = b"") -> int:
        self.cookie += 1
        try:
            self.s.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, cmd, self.cookie, offset, length) + payload)
        except (ConnectionResetError, BrokenPipeError) as e:
            raise Gone(str(e)) from None
        return self.cookie

    def reply(self, read_len: int = 0) -> tuple[int, int, bytes]:
        magic, err, cookie = struct.unpack(">IIQ", recv_exact(self.s, 16))
        if magic != SIMPLE_REPLY_MAGIC:
            raise RuntimeError("bad reply magic")
        data = recv_exact(self.s, read_len) if err == 0 and read_len else b""
        return cookie, err, data

    def read(self, offset: int, length: int) -> bytes:
        self.send(CMD_READ, offset, length)
        _, err, data = self.reply(length)
        if err:
            raise RuntimeError(f"read at {offset} failed: errno {err}")
        return data

    def close(self) -> None:
        try:
            self.send(CMD_DISC, 0, 0)
        except Gone:
            pass
        self.s.close()


def stamp(block: int, seq: int) -> bytes:
    head = STAMP.pack(STAMP_MAGIC, block, seq)
    filler = random.Random(block * 1_000_003 + seq).randbytes(BLOCK - len(head) - 4)
    body = head + filler
    return body + struct.pack("<I", zlib.crc32(body))


def unstamp(data: bytes) -> tuple[int, int] | None:
    """(block, seq) of a stamped block; None for a never-written (zero) block. Raises on a
    torn or corrupt one."""
    if data == bytes(BLOCK):
        return None
    body, crc = data[:-4], struct.unpack("<I", data[-4:])[0]
    magic, block, seq = STAMP.unpack(body[: STAMP.size])
    if magic != STAMP_MAGIC or zlib.crc32(body) != crc:
        raise ValueError("torn or corrupt block")
    return block, seq


@dataclass
class Ledger:
    """Per block: the newest acknowledged sequence number, and the ones in flight at a kill."""

    acked: dict[int, int] = field(default_factory=dict)
    maybe: dict[int, set[int]] = field(default_factory=dict)
    seq: int = 0


@dataclass
class Totals:
    runs: int = 0
    writes_acked: int = 0
    in_flight_at_kill: int = 0
    blocks_checked: int = 0
    lost: int = 0
    corrupt: int = 0
    mismatched_rows: int = 0
    # Restarts that found a rebuild to resume (the kill came while one was running).
    rebuilds_resumed: int = 0
    problems: list[str] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(arr: Path, port: int, log: Path, extra: list[str] | None = None) -> subprocess.Popen[bytes]:
    with open(log, "ab") as err:
        p = subprocess.Popen(
            [*RAIDLAB, "serve", str(arr), "--listen", f"127.0.0.1:{port}", *(extra or [])],
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
    assert p.stdout is not None
    line = p.stdout.readline().decode()
    if "accepting connections" not in line:
        p.kill()
        p.wait()
        p.stdout.close()
        raise RuntimeError(f"raidlab serve did not start: {line!r}; see {log}")
    return p


def kill(p: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait(timeout=30)
    if p.stdout is not None:
        p.stdout.close()


def stop(p: subprocess.Popen[bytes]) -> None:
    os.killpg(p.pid, signal.SIGTERM)
    try:
        rc = p.wait(timeout=60)
    finally:
        if p.poll() is None:
            kill(p)
        elif p.stdout is not None:
            p.stdout.close()
    if rc != 0:
        raise RuntimeError(f"raidlab serve exited {rc} after SIGTERM")


def ctl(arr: Path, req: dict) -> dict:
    from raidlab import _core

    out: dict = json.loads(_core.ctl_request(str(arr), json.dumps(req)))
    if not out.get("ok"):
        raise RuntimeError(f"ctl {req}: {out.get('error')}")
    return out


def write_until_killed(nbd: Nbd, server: subprocess.Popen[bytes], led: Ledger, rng: random.Random, qd: int, blocks: int, kill_after_s: float) -> tuple[int, int]:
    """Keep ``qd`` stamped writes in flight; SIGKILL the server after ``kill_after_s``.
    Returns (acknowledged, in flight at the kill)."""
    inflight: dict[int, tuple[int, int]] = {}  # cookie -> (block, seq)
    busy: set[int] = set()
    acked = 0
    # The kill comes from another thread, at a moment the writer does not choose, so
    # requests are really in flight when it lands.
    timer = threading.Timer(kill_after_s, lambda: os.killpg(server.pid, signal.SIGKILL))
    timer.start()
    try:
        for _ in range(10_000_000):  # bounded: the kill ends it
            try:
                while len(inflight) < qd:
                    block = rng.randrange(blocks)
                    if block in busy:
                        continue
                    led.seq += 1
                    cookie = nbd.send(CMD_WRITE, block * BLOCK, BLOCK, stamp(block, led.seq))
                    inflight[cookie] = (block, led.seq)
                    busy.add(block)
                cookie, err, _ = nbd.reply()
            except (Gone, OSError):
                break
            block, seq = inflight.pop(cookie)
            busy.discard(block)
            if err:
                raise RuntimeError(f"write of block {block} failed with errno {err} while the array was healthy")
            led.acked[block] = max(seq, led.acked.get(block, 0))
            led.maybe.pop(block, None)
            acked += 1
    finally:
        timer.join()
        kill(server)
    for block, seq in inflight.values():
        led.maybe.setdefault(block, set()).add(seq)
    return acked, len(inflight)


def verify(arr: Path, port: int, led: Ledger, tot: Totals, run: int) -> None:
    """Read back every block ever written and check it against the ledger."""
    nbd = Nbd("127.0.0.1", port)
    try:
        for block in sorted(set(led.acked) | set(led.maybe)):
            tot.blocks_checked += 1
            data = nbd.read(block * BLOCK, BLOCK)
            want = led.acked.get(block, 0)
            allowed = led.maybe.get(block, set())
            try:
                got = unstamp(data)
            except ValueError:
                tot.corrupt += 1
                tot.problems.append(f"run {run}: block {block} torn or corrupt")
                continue
            seq = 0 if got is None else got[1]
            if got is not None and got[0] != block:
                tot.corrupt += 1
                tot.problems.append(f"run {run}: block {block} holds block {got[0]}'s data")
            elif seq < want or (seq > want and seq not in allowed):
                tot.lost += 1
                tot.problems.append(f"run {run}: block {block} holds write {seq}, acknowledged {want}, in flight {sorted(allowed)}")
            else:
                # What landed is now the block's settled value.
                if seq > want:
                    led.acked[block] = seq
                led.maybe.pop(block, None)
    finally:
        nbd.close()


def crashloop(
    runs: int,
    level: str,
    disks: int,
    seed: int,
    qd: int = 8,
    size: str = "4MiB",
    root: Path | None = None,
    serve_args: list[str] | None = None,
    fail_slot: int | None = None,
    spares: int = 0,
) -> Totals:
    if serve_args and "--backup" in serve_args and serve_args[serve_args.index("--backup") + 1] == "none":
        raise ValueError("--backup none is volatile: a crash may lose answered writes by design")
    rng = random.Random(seed)
    base = Path(tempfile.mkdtemp(prefix="raidlab-crashloop-", dir=root))
    arr = base / "arr"
    log = base / "serve.log"
    subprocess.run([*RAIDLAB, "array", "create", str(arr), "--level", level, "--disks", str(disks), "--chunk", "16KiB", "--size", size, "--bitmap-chunk", "16KiB", "--spares", str(spares)], check=True, capture_output=True, timeout=120)
    led, tot = Ledger(), Totals()
    port = free_port()
    server = start_server(arr, port, log, serve_args)
    try:
        if fail_slot is not None:
            ctl(arr, {"cmd": "fail", "slot": fail_slot})
        probe = Nbd("127.0.0.1", port)
        blocks = probe.size // BLOCK
        probe.close()
        for run in range(1, runs + 1):
            nbd = Nbd("127.0.0.1", port)
            acked, inflight = write_until_killed(nbd, server, led, rng, qd, blocks, rng.uniform(0.05, 0.4))
            nbd.s.close()
            tot.runs += 1
            tot.writes_acked += acked
            tot.in_flight_at_kill += inflight
            port = free_port()
            server = start_server(arr, port, log, serve_args)
            if ctl(arr, {"cmd": "status"})["rebuild"] is not None:
                tot.rebuilds_resumed += 1
            for _ in range(6000):  # bounded wait for the background resync (<= 60 s)
                if ctl(arr, {"cmd": "status"})["resync"]["pending_regions"] == 0:
                    break
                time.sleep(0.01)
            verify(arr, port, led, tot, run)
            rep = ctl(arr, {"cmd": "check"})
            if rep["mismatches"]:
                tot.mismatched_rows += rep["mismatches"]
                tot.problems.append(f"run {run}: ctl check found {rep['mismatches']} inconsistent rows")
        stop(server)
    finally:
        if server.poll() is None:
            kill(server)
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    return tot


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--level", default="raid5")
    ap.add_argument("--disks", type=int, default=5)
    ap.add_argument("--qd", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write-cache-mib", type=int, default=None, help="serve with a write-back cache of this size")
    ap.add_argument("--backup", default="mirror", help="the write cache's backup: mirror or log")
    ap.add_argument("--destage", default="stow", help="destage order: lrw, cscan, wow or stow")
    ap.add_argument("--log-mode", default="physical", help="physical or logical (with --backup log)")
    ap.add_argument("--fail-slot", type=int, default=None, help="fail this member before the first run")
    ap.add_argument("--spares", type=int, default=0, help="hot spares: with --fail-slot, the runs kill the server during the rebuild")
    ap.add_argument("--serve", default="", help="more serve options, space-separated (e.g. the rebuild's executor and rate)")
    args = ap.parse_args()
    extra: list[str] = []
    if args.write_cache_mib:
        extra = ["--write-cache-mib", str(args.write_cache_mib), "--backup", args.backup, "--destage", args.destage, "--log-mode", args.log_mode]
    extra += args.serve.split()
    tot = crashloop(
        args.runs,
        args.level,
        args.disks,
        args.seed,
        args.qd,
        root=Path("/dev/shm") if os.path.isdir("/dev/shm") else None,
        serve_args=extra,
        fail_slot=args.fail_slot,
        spares=args.spares,
    )
    if args.json:
        print(json.dumps(tot.__dict__))
    else:
        print(
            f"{tot.runs} SIGKILL runs on {args.level} of {args.disks}"
            + (f" (write cache {args.write_cache_mib} MiB, {args.backup}, {args.destage})" if args.write_cache_mib else "")
            + (f" with slot {args.fail_slot} failed" if args.fail_slot is not None else "")
            + f": {tot.writes_acked:,} writes acknowledged, "
            f"{tot.in_flight_at_kill} in flight at the kills, {tot.blocks_checked:,} block checks; "
            f"lost {tot.lost}, corrupt {tot.corrupt}, inconsistent rows {tot.mismatched_rows}"
        )
        for p in tot.problems[:20]:
            print("  " + p)
    return 0 if not tot.problems else 1


if __name__ == "__main__":
    sys.exit(main())
