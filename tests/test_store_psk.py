"""TLS-PSK against a real ``raidlab serve --tls-psk`` (docs/store.md, "TLS"): libnbd's nbdinfo
and nbdcopy (GnuTLS) with ``nbds://USER@HOST:PORT/?tls-psk-file=FILE`` read and write;
a wrong key, an unknown user and a plain client are refused (the refusal logged with the
peer and the identity); raidlab's own client (``raidlab replay``) against ``nbdkit
--tls-psk`` (GnuTLS); bad PSK files and options exit 2 naming the file and line; the keys
named in ``DIR/raidlab.toml``.

Needs a build with the ``tls-psk`` feature (OpenSSL): skipped without it, unless ``make
test`` asked for it (RAIDLAB_REQUIRE_TLS_PSK=1, set where OpenSSL was found), where a
build without it fails. Every server is stopped; every wait is bounded; loopback only."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
from pathlib import Path

import pytest
from store_fixtures import (
    MiB,
    ServerPool,
    Server,
    check,
    cli_bad_input,
    create_array,
    free_port,
    random_file,
    require_tools,
    run_cli,
    run_tool,
    store_servers,
    tool_ok,
    wait_until,
)

from raidlab import _core

__all__ = ["store_servers"]

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
OPT_LIST = 3
REP_ERR_TLS_REQD = (1 << 31) + 5
ALICE = "c0ffee00112233445566778899aabbccddeeff00112233445566778899aabbcc"

REPLAY = """
[workload]
block_size = 4096
[workload.synthetic]
kind = "zipf"
keys = 2000
alpha = 0.8
requests = 1000
seed = 5
[cache]
policy = "lru"
capacity_blocks = 64
[array]
level = "raid5"
layout = "left-symmetric"
stripe_unit = 65536
disks = 4
[run]
mode = "count"
"""


@pytest.fixture(autouse=True)
def psk_build() -> None:
    if _core.TLS_PSK:
        return
    msg = "this build has no TLS-PSK (the tls-psk feature needs OpenSSL: libssl-dev and pkg-config)"
    if os.environ.get("RAIDLAB_REQUIRE_TLS_PSK") == "1":
        pytest.fail(msg + ", yet make test found OpenSSL")
    pytest.skip(msg)


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    """``server.psk`` (alice, bob) and client files: ``wrong.psk`` (alice with another key)
    and ``carol.psk`` (a user the server does not know)."""
    d = tmp_path / "keys"
    d.mkdir()
    (d / "server.psk").write_text(f"alice:{ALICE}\nbob:0102030405060708090a0b0c0d0e0f10\n")
    (d / "wrong.psk").write_text("alice:" + "ab" * 32 + "\n")
    (d / "carol.psk").write_text(f"carol:{ALICE}\n")
    return d


def make(tmp_path: Path) -> Path:
    d = tmp_path / "arr"
    create_array(d, "raid5", 4, size="8MiB")
    return d


def nbds(listen: str, user: str, file: Path) -> str:
    return f"nbds://{user}@{listen}/?tls-psk-file={file}"


def port(srv: Server) -> int:
    return int(srv.listen.rsplit(":", 1)[1])


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    return buf


def refused(uri: str) -> str:
    r = run_tool(["nbdinfo", "--size", uri], timeout=30)
    assert r.returncode != 0, f"{uri}: served\n{r.stdout}"
    return r.stdout + r.stderr


def test_nbdinfo_and_nbdcopy_over_psk(tmp_path: Path, store_servers: ServerPool, keys: Path) -> None:
    require_tools("nbdinfo", "nbdcopy")
    d = make(tmp_path)
    srv = store_servers.start(d, "--tls", "require", "--tls-psk", keys / "server.psk")
    assert "(TLS required)" in srv.ready, srv.ready
    alice = nbds(srv.listen, "alice", keys / "server.psk")
    info = json.loads(tool_ok(["nbdinfo", "--json", alice], timeout=30))
    assert info["exports"][0]["export-size"] == 3 * 8 * MiB

    # Random data in through one user, out through the other, compared.
    src = tmp_path / "src.bin"
    data = random_file(src, 4 * MiB, seed=29)
    tool_ok(["nbdcopy", str(src), alice], timeout=120)
    back = tmp_path / "back.bin"
    tool_ok(["nbdcopy", nbds(srv.listen, "bob", keys / "server.psk"), str(back)], timeout=120)
    assert back.read_bytes()[: len(data)] == data

    # qemu-io (GnuTLS through qemu's crypto layer): its tls-creds-psk reads DIR/keys.psk.
    if shutil.which("qemu-io"):
        qdir = tmp_path / "qemu"
        qdir.mkdir()
        shutil.copy(keys / "server.psk", qdir / "keys.psk")
        out = tool_ok(["qemu-io", "--object", f"tls-creds-psk,id=tls0,endpoint=client,username=bob,dir={qdir}",
                       "--image-opts", "-c", "write -P 0x5a 8M 1M", "-c", "read -P 0x5a 8M 1M",
                       f"driver=nbd,server.type=inet,server.host=127.0.0.1,server.port={port(srv)},tls-creds=tls0"],
                      timeout=60)
        assert "verification failed" not in out.lower() and "error" not in out.lower(), out

    # A wrong key and an unknown user: refused in the handshake, the refusal logged with
    # the peer and the identity; a plain client: refused before any option.
    refused(nbds(srv.listen, "alice", keys / "wrong.psk"))
    refused(nbds(srv.listen, "carol", keys / "carol.psk"))
    out = refused(f"nbd://{srv.listen}")
    assert "tls" in out.lower(), out
    with socket.create_connection(("127.0.0.1", port(srv)), timeout=10) as s:
        magic, ihaveopt, _flags = struct.unpack(">QQH", recv_exact(s, 18))
        assert (magic, ihaveopt) == (NBDMAGIC, IHAVEOPT)
        s.sendall(struct.pack(">I", 3))
        s.sendall(struct.pack(">QII", IHAVEOPT, OPT_LIST, 0))
        _m, _o, rep, length = struct.unpack(">QIII", recv_exact(s, 20))
        recv_exact(s, length)
        assert rep == REP_ERR_TLS_REQD
    def logged() -> str | None:
        text = srv.log()
        return text if 'unknown identity "carol"' in text else None

    log = wait_until(logged, 10, "the refusal logged")
    assert "TLS-PSK client 127.0.0.1:" in log, log
    assert 'identity "alice" failed' in log, log

    # raidlab's own client with the same URI form.
    cfg = tmp_path / "w.toml"
    cfg.write_text(REPLAY)
    rep = run_cli("replay", alice, cfg, "--qd", "4", "--json")
    assert rep.returncode == 0, rep.stderr
    assert json.loads(rep.stdout)["errors"] == 0
    msg = cli_bad_input("replay", nbds(srv.listen, "dave", keys / "server.psk"), cfg)
    assert 'no key for user "dave"' in msg, msg

    assert check(d)["mismatches"] == 0
    assert "marked clean" in srv.stop()


def test_raidlab_client_against_nbdkit_psk(tmp_path: Path, keys: Path) -> None:
    """The other direction: raidlab's OpenSSL client against GnuTLS's server in nbdkit."""
    require_tools("nbdkit")
    port = free_port()
    log = tmp_path / "nbdkit.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            ["nbdkit", "--foreground", "--exit-with-parent", "-i", "127.0.0.1", "-p", str(port),
             "--tls=require", f"--tls-psk={keys / 'server.psk'}", "memory", "64M"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
        )
    try:
        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False

        wait_until(listening, 10, f"nbdkit on port {port}")
        cfg = tmp_path / "w.toml"
        cfg.write_text(REPLAY)
        listen = f"127.0.0.1:{port}"
        rep = run_cli("replay", nbds(listen, "bob", keys / "server.psk"), cfg, "--qd", "4", "--json")
        assert rep.returncode == 0, rep.stderr + log.read_text()
        assert json.loads(rep.stdout)["errors"] == 0
        r = run_cli("replay", nbds(listen, "alice", keys / "wrong.psk"), cfg)
        assert r.returncode != 0, r.stdout
        assert "TLS" in r.stderr, r.stderr
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_bad_psk_options_exit_2(tmp_path: Path, keys: Path) -> None:
    d = make(tmp_path)
    listen = ("--listen", "127.0.0.1:0")
    bad = tmp_path / "bad.psk"
    bad.write_text(f"alice:{ALICE}\nbob:12345\n")
    msg = cli_bad_input("serve", d, *listen, "--tls", "require", "--tls-psk", bad)
    assert f"{bad}:2: key has an odd number of hex digits (5)" in msg, msg
    bad.write_text(f"alice:{ALICE}\nalice:00\n")
    msg = cli_bad_input("serve", d, *listen, "--tls", "require", "--tls-psk", bad)
    assert f'{bad}:2: username "alice" again (first on line 1)' in msg, msg
    msg = cli_bad_input("serve", d, *listen, "--tls", "require", "--tls-psk", tmp_path / "none.psk")
    assert str(tmp_path / "none.psk") in msg and "cannot open" in msg, msg
    msg = cli_bad_input("serve", d, *listen, "--tls-psk", keys / "server.psk")
    assert "TLS is off" in msg, msg
    msg = cli_bad_input("serve", d, *listen, "--tls", "on", "--tls-psk", keys / "server.psk", "--tls-certificates", tmp_path)
    assert "exclude each other" in msg, msg
    msg = cli_bad_input("serve", d, *listen, "--tls", "on", "--tls-psk", keys / "server.psk", "--tls-verify-peer")
    assert "--tls-verify-peer" in msg, msg
    assert not (d / "control.sock").exists()


def test_psk_from_the_config_file(tmp_path: Path, store_servers: ServerPool, keys: Path) -> None:
    require_tools("nbdinfo")
    d = make(tmp_path)
    # A relative path in the file is the array directory's.
    (d / "tank.psk").write_text((keys / "server.psk").read_text())
    (d / "raidlab.toml").write_text('tls = "require"\ntls-psk = "tank.psk"\n')
    srv: Server = store_servers.start(d)
    assert "(TLS required)" in srv.ready, srv.ready
    size = tool_ok(["nbdinfo", "--size", nbds(srv.listen, "alice", keys / "server.psk")], timeout=30)
    assert size.strip() == str(3 * 8 * MiB)
    refused(f"nbd://{srv.listen}")
    srv.stop()
    # A bad key file named from the config file: the error names both.
    (d / "tank.psk").write_text("alice\n")
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0")
    assert "raidlab.toml:2" in msg and "tls-psk" in msg and "tank.psk:1: no ':'" in msg, msg
