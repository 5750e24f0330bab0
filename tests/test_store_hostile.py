"""Slow, stuck and hostile NBD clients against a real `raidlab serve` (docs/store.md, "Slow
and hostile clients"): sub-block requests through qemu-io, the limit options, and a good
client's latency while raw-socket attackers stall payloads, never finish handshakes, send
whole-export TRIMs and garbage. Every server is stopped by the fixture; every wait is
bounded; loopback only."""

from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path

from store_fixtures import ServerPool, check, cli_bad_input, create_array, nbdinfo, qemu_io, require_tools, store_servers

__all__ = ["store_servers"]

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REQUEST_MAGIC = 0x25609513
OPT_GO = 7
REP_ACK = 1
INFO_BLOCK_SIZE = 3
CMD_READ, CMD_WRITE, CMD_TRIM = 0, 1, 4
MIB = 1 << 20


def make(tmp_path: Path) -> Path:
    d = tmp_path / "arr"
    create_array(d, "raid5", 4, size="8MiB")
    return d


def host_port(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    return buf


def go(addr: str, timeout: float = 10) -> socket.socket:
    """Connect, NBD_OPT_GO asking for the block sizes, and return the socket in transmission."""
    s = socket.create_connection(host_port(addr), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    magic, opt, _flags = struct.unpack(">QQH", recv_exact(s, 18))
    assert (magic, opt) == (NBDMAGIC, IHAVEOPT)
    s.sendall(struct.pack(">I", 3))
    data = struct.pack(">I", 0) + struct.pack(">HH", 1, INFO_BLOCK_SIZE)
    s.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, len(data)) + data)
    for _ in range(16):
        _magic, _opt, rep, length = struct.unpack(">QIII", recv_exact(s, 20))
        recv_exact(s, length)
        if rep == REP_ACK:
            return s
        assert rep == 3, hex(rep)
    raise AssertionError("no NBD_REP_ACK")


def request(s: socket.socket, kind: int, cookie: int, offset: int, length: int, payload: bytes = b"") -> None:
    s.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, kind, cookie, offset, length) + payload)


def reply(s: socket.socket, data_len: int = 0) -> tuple[int, bytes]:
    _magic, error, _cookie = struct.unpack(">IIQ", recv_exact(s, 16))
    return error, recv_exact(s, data_len) if error == 0 and data_len else b""


def closed_within(s: socket.socket, seconds: float) -> bool:
    s.settimeout(seconds)
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            if not s.recv(65536):
                return True
    except TimeoutError:
        return False
    except OSError:
        return True
    return False


def test_sub_block_requests_work_on_a_real_array(tmp_path: Path, store_servers: ServerPool) -> None:
    require_tools("qemu-io", "nbdinfo")
    d = make(tmp_path)
    srv = store_servers.start(d)
    info = nbdinfo(srv.uri)
    assert info["block_size_minimum"] == 1, info
    assert info["block_size_preferred"] == 65536, info
    # 512-byte and 1 KiB requests at 512-byte offsets, as mkfs.ext4 over a loop device sends.
    qemu_io(
        srv.uri,
        "write -P 0x5a 512 512",
        "write -P 0x6b 1536 1024",
        "write -P 0x7c 4095 2",
        "read -P 0 0 512",
        "read -P 0x5a 512 512",
        "read -P 0 1024 512",
        "read -P 0x6b 1536 1024",
        "read -P 0 2560 1535",
        "read -P 0x7c 4095 2",
        "read -P 0 4097 4095",
    )
    # Parity stayed consistent through the read-modify-writes.
    assert check(d)["mismatches"] == 0
    srv.stop()

    # --min-block 4096: advertised, and unaligned requests no longer reach the array.
    srv = store_servers.start(d, "--min-block", "4096")
    assert nbdinfo(srv.uri)["block_size_minimum"] == 4096
    s = go(srv.listen)
    request(s, CMD_READ, 1, 512, 512)
    assert reply(s)[0] == 22  # EINVAL
    request(s, CMD_READ, 2, 0, 4096)
    err, data = reply(s, 4096)
    assert err == 0 and data[512:1024] == b"\x5a" * 512
    s.close()
    srv.stop()


def test_bad_limit_options_and_insecure_listen_exit_2(tmp_path: Path) -> None:
    d = make(tmp_path)
    for args, name in (
        (["--min-block", "3"], "--min-block"),
        (["--zero-piece-mib", "3"], "--zero-piece-mib"),
        (["--poll-us", "1001"], "--poll-us"),
        (["--conn-payload-mib", "64", "--payload-mib", "32"], "--conn-payload-mib"),
        (["--idle-timeout", "0"], "--idle-timeout"),
        (["--workers", "1025"], "--workers"),
    ):
        msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0", *args)
        assert name in msg, msg
    msg = cli_bad_input("serve", d, "--listen", "0.0.0.0:0")
    assert "--insecure" in msg and "loopback" in msg, msg
    assert not (d / "control.sock").exists()


def good_latencies(addr: str, seconds: float, min_ops: int) -> list[float]:
    s = go(addr)
    lat = []
    end = time.monotonic() + seconds
    i = 0
    while (time.monotonic() < end or i < min_ops) and i < 100 * min_ops:
        offset = (i * 7919 % 1024) * 4096
        t = time.perf_counter()
        if i % 4 == 3:
            request(s, CMD_WRITE, i, offset, 4096, bytes([i % 256]) * 4096)
            err, _ = reply(s)
        else:
            request(s, CMD_READ, i, offset, 4096)
            err, _ = reply(s, 4096)
        lat.append(time.perf_counter() - t)
        assert err == 0, (i, err)
        i += 1
    s.close()
    return sorted(lat)


def p(lat: list[float], q: float) -> float:
    return lat[min(len(lat) - 1, int(len(lat) * q))] * 1e3


def test_hostile_clients_against_a_real_server(tmp_path: Path, store_servers: ServerPool) -> None:
    d = make(tmp_path)
    srv = store_servers.start(d, "--handshake-timeout", "1", "--idle-timeout", "1", "--zero-piece-mib", "1")
    addr = srv.listen
    alone = good_latencies(addr, 1.0, 500)
    stop = threading.Event()
    rounds = [0]

    def loop(attack) -> None:  # type: ignore[no-untyped-def]
        while not stop.is_set():
            try:
                attack()
            except OSError:
                time.sleep(0.02)
            rounds[0] += 1

    def stalled_header() -> None:
        s = go(addr)
        request(s, CMD_WRITE, 1, 0, 32 * MIB)
        closed_within(s, 5)
        s.close()

    def stalled_payload() -> None:
        s = go(addr)
        request(s, CMD_WRITE, 1, 0, 16 * MIB)
        s.settimeout(1)
        try:
            s.sendall(b"\xee" * (12 * MIB))
        except OSError:
            pass
        closed_within(s, 5)
        s.close()

    def silent() -> None:
        s = socket.create_connection(host_port(addr), timeout=5)
        closed_within(s, 5)
        s.close()

    def garbage() -> None:
        s = go(addr)
        s.sendall(bytes(range(256)) * 16)
        closed_within(s, 5)
        s.close()

    def trims() -> None:
        s = go(addr)
        size = 3 * 8 * MIB
        while not stop.is_set():
            for i in range(4):
                request(s, CMD_TRIM, i, 0, size)
            for _ in range(4):
                assert reply(s)[0] == 0
        s.close()

    attackers = [stalled_header] * 6 + [stalled_payload] * 2 + [silent] * 8 + [garbage] * 2 + [trims] * 2
    threads = [threading.Thread(target=loop, args=(a,), daemon=True) for a in attackers]
    for t in threads:
        t.start()
    try:
        time.sleep(0.3)
        attacked = good_latencies(addr, 3.0, 500)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=15)
    assert not any(t.is_alive() for t in threads)
    print(
        f"\ngood client on raidlab serve (RAID-5, 4 KiB, depth 1, 3 reads : 1 write): "
        f"alone {len(alone)} requests p50 {p(alone, 0.5):.3f} ms p99 {p(alone, 0.99):.3f} ms; "
        f"with {len(attackers)} attackers {len(attacked)} requests p50 {p(attacked, 0.5):.3f} ms "
        f"p99 {p(attacked, 0.99):.3f} ms max {attacked[-1] * 1e3:.1f} ms ({rounds[0]} attack rounds)"
    )
    # Nothing waits for an attacker's timeout (1 s) or a whole-export TRIM.
    assert p(attacked, 0.99) < 300, p(attacked, 0.99)
    assert check(d)["mismatches"] == 0
    srv.stop()
