"""TLS through NBD_OPT_STARTTLS against a real ``raidlab serve --tls`` (docs/store.md, "TLS"):
qemu-io (tls-creds-x509) and nbdinfo/nbdcopy (``nbds://`` URIs with ``tls-certificates=DIR``)
read and write over TLS; ``--tls require`` refuses plain clients; ``--tls-verify-peer`` needs a
client certificate from the CA; bad certificate options exit 2 naming the option and file.

Certificates are made at test time with the ``openssl`` command (skipped without it); no key
is committed. Every server is stopped by the fixture; every wait is bounded; loopback only."""

from __future__ import annotations

import json
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
    random_file,
    require_tools,
    run_cli,
    run_tool,
    store_servers,
    tool_ok,
)

__all__ = ["store_servers"]

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
OPT_LIST, OPT_STARTTLS = 3, 5
REP_ACK = 1
REP_ERR_TLS_REQD = (1 << 31) + 5

REPLAY = """
[workload]
block_size = 4096
[workload.synthetic]
kind = "zipf"
keys = 4000
alpha = 0.8
requests = 2000
seed = 7
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


def openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, f"openssl {' '.join(args)}: {r.stderr}"


def leaf(cwd: Path, ca: str, name: str, serial: int, ext: str) -> None:
    """``name``-cert.pem and ``name``-key.pem in ``cwd``, signed by ``ca``-cert.pem/-key.pem."""
    (cwd / f"{name}.ext").write_text(ext)
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}-key.pem", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=cwd)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}-cert.pem", "-CAkey", f"{ca}-key.pem",
            "-set_serial", str(serial), "-days", "2", "-out", f"{name}-cert.pem",
            "-extfile", f"{name}.ext", cwd=cwd)


def ca(cwd: Path, name: str) -> None:
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}-key.pem", "-out", f"{name}-cert.pem", "-days", "2", "-subj", f"/CN={name}",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            cwd=cwd)


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    """``server/`` (nbdkit's layout), ``client/`` (CA and a client certificate: qemu's and
    libnbd's layout), ``anon/`` (the CA only) and ``other/`` (a client certificate from
    another CA)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed (Debian package openssl): no test certificates")
    root = tmp_path / "pki"
    work = root / "work"
    work.mkdir(parents=True)
    ca(work, "ca")
    ca(work, "ca2")
    leaf(work, "ca", "server", 1001, "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
         "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n")
    client_ext = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n"
    leaf(work, "ca", "client", 1002, client_ext)
    leaf(work, "ca2", "stranger", 2001, client_ext)
    layout = {
        "server": {"ca-cert.pem": "ca-cert.pem", "server-cert.pem": "server-cert.pem", "server-key.pem": "server-key.pem"},
        "client": {"ca-cert.pem": "ca-cert.pem", "client-cert.pem": "client-cert.pem", "client-key.pem": "client-key.pem"},
        "anon": {"ca-cert.pem": "ca-cert.pem"},
        "other": {"ca-cert.pem": "ca-cert.pem", "client-cert.pem": "stranger-cert.pem", "client-key.pem": "stranger-key.pem"},
    }
    for sub, files in layout.items():
        (root / sub).mkdir()
        for dst, src in files.items():
            shutil.copy(work / src, root / sub / dst)
    return root


def make(tmp_path: Path) -> Path:
    d = tmp_path / "arr"
    create_array(d, "raid5", 4, size="8MiB")
    return d


def port(srv: Server) -> int:
    return int(srv.listen.rsplit(":", 1)[1])


def nbds(srv: Server, certs: Path) -> str:
    return f"nbds://{srv.listen}/?tls-certificates={certs}"


def qemu_io_tls(srv: Server, client_dir: Path, *commands: str) -> str:
    """qemu-io over TLS: the nbd driver with tls-creds-x509 (endpoint=client) from ``client_dir``."""
    args = ["qemu-io", "--object", f"tls-creds-x509,id=tls0,endpoint=client,dir={client_dir}", "--image-opts"]
    for c in commands:
        args += ["-c", c]
    args.append(f"driver=nbd,server.type=inet,server.host=127.0.0.1,server.port={port(srv)},tls-creds=tls0")
    out = tool_ok(args, timeout=60)
    low = out.lower()
    for bad in ("failed", "error", "pattern verification"):
        assert bad not in low, f"qemu-io {commands}: {out}"
    return out


def nbdinfo_json(uri: str) -> dict[str, object]:
    info = json.loads(tool_ok(["nbdinfo", "--json", uri], timeout=30))
    (export,) = info["exports"]
    out: dict[str, object] = export
    return out


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    return buf


def opt(s: socket.socket, option: int, data: bytes = b"") -> int:
    """Send one option; return the reply type of its first reply."""
    s.sendall(struct.pack(">QII", IHAVEOPT, option, len(data)) + data)
    _magic, _opt, rep, length = struct.unpack(">QIII", recv_exact(s, 20))
    recv_exact(s, length)
    rep_type: int = rep
    return rep_type


def test_qemu_io_nbdinfo_and_nbdcopy_over_tls_require(tmp_path: Path, store_servers: ServerPool, certs: Path) -> None:
    require_tools("qemu-io", "nbdinfo", "nbdcopy")
    d = make(tmp_path)
    srv = store_servers.start(d, "--tls", "require", "--tls-certificates", certs / "server")
    assert "(TLS required)" in srv.ready, srv.ready

    # qemu-io (GnuTLS through qemu's crypto layer), sub-block and multi-record requests.
    qemu_io_tls(srv, certs / "client", "write -P 0x5a 0 1M", "write -P 0x33 1000 7000", "flush")
    qemu_io_tls(srv, certs / "client", "read -P 0x5a 0 1000", "read -P 0x33 1000 7000", "read -P 0x5a 8000 1040576")

    # nbdinfo and nbdcopy (libnbd) with an nbds:// URI; the CA alone is enough.
    info = nbdinfo_json(nbds(srv, certs / "anon"))
    assert info["export-size"] == 3 * 8 * MiB
    src = tmp_path / "src.bin"
    data = random_file(src, 4 * MiB, seed=11)
    tool_ok(["nbdcopy", str(src), nbds(srv, certs / "client")], timeout=120)
    back = tmp_path / "back.bin"
    tool_ok(["nbdcopy", nbds(srv, certs / "anon"), str(back)], timeout=120)
    assert back.read_bytes()[: len(data)] == data

    # Plain clients are refused: libnbd names TLS; a raw client gets NBD_REP_ERR_TLS_REQD.
    r = run_tool(["nbdinfo", f"nbd://{srv.listen}"], timeout=30)
    assert r.returncode != 0 and "tls" in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
    with socket.create_connection(("127.0.0.1", port(srv)), timeout=10) as s:
        magic, ihaveopt, _flags = struct.unpack(">QQH", recv_exact(s, 18))
        assert (magic, ihaveopt) == (NBDMAGIC, IHAVEOPT)
        s.sendall(struct.pack(">I", 3))
        assert opt(s, OPT_LIST) == REP_ERR_TLS_REQD
        # STARTTLS acknowledged, then garbage instead of a ClientHello: only this connection ends.
        assert opt(s, OPT_STARTTLS) == REP_ACK
        s.sendall(b"\x16\x03\x01\x00\x20" + b"\xee" * 32)
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass
        except (ConnectionResetError, TimeoutError) as e:
            assert isinstance(e, ConnectionResetError), "garbage kept its connection"
    # The server is unharmed.
    qemu_io_tls(srv, certs / "client", "write -P 0x77 20M 64k", "read -P 0x77 20M 64k")
    assert tool_ok(["nbdcopy", nbds(srv, certs / "anon"), str(back)], timeout=120) is not None
    assert back.read_bytes()[: len(data)] == data

    assert check(d)["mismatches"] == 0
    log = srv.stop()
    assert "marked clean" in log, log


def test_tls_on_serves_plain_and_tls_clients(tmp_path: Path, store_servers: ServerPool, certs: Path) -> None:
    require_tools("nbdinfo", "qemu-io")
    d = make(tmp_path)
    srv = store_servers.start(d, "--tls", "on", "--tls-certificates", certs / "server")
    assert "(TLS offered)" in srv.ready, srv.ready
    assert nbdinfo_json(f"nbd://{srv.listen}")["export-size"] == 3 * 8 * MiB
    assert nbdinfo_json(nbds(srv, certs / "anon"))["export-size"] == 3 * 8 * MiB
    qemu_io_tls(srv, certs / "client", "write -P 0x11 0 64k", "read -P 0x11 0 64k")
    if shutil.which("qemu-img"):
        info = json.loads(tool_ok(["qemu-img", "info", "--output=json", "--object",
                                   f"tls-creds-x509,id=tls0,endpoint=client,dir={certs / 'anon'}", "--image-opts",
                                   f"driver=nbd,server.type=inet,server.host=127.0.0.1,server.port={port(srv)},tls-creds=tls0"],
                                  timeout=60))
        assert info["virtual-size"] == 3 * 8 * MiB, info
    # raidlab replay (the store's own client) over TLS, and it refuses an nbds URI without a CA.
    cfg = tmp_path / "w.toml"
    cfg.write_text(REPLAY)
    rep = run_cli("replay", nbds(srv, certs / "anon"), cfg, "--qd", "4", "--json")
    assert rep.returncode == 0, rep.stderr
    assert json.loads(rep.stdout)["errors"] == 0
    msg = cli_bad_input("replay", f"nbds://{srv.listen}/", cfg)
    assert "tls-certificates" in msg, msg
    srv.stop()


def test_tls_verify_peer_needs_a_client_certificate_from_the_ca(tmp_path: Path, store_servers: ServerPool, certs: Path) -> None:
    require_tools("nbdinfo", "qemu-io")
    d = make(tmp_path)
    srv = store_servers.start(d, "--tls", "require", "--tls-certificates", certs / "server", "--tls-verify-peer")
    assert nbdinfo_json(nbds(srv, certs / "client"))["export-size"] == 3 * 8 * MiB
    qemu_io_tls(srv, certs / "client", "write -P 0x22 4096 4096", "read -P 0x22 4096 4096")
    for refused in ("anon", "other"):
        r = run_tool(["nbdinfo", "--json", nbds(srv, certs / refused)], timeout=30)
        assert r.returncode != 0, f"{refused}: served without a good client certificate\n{r.stdout}"
    srv.stop()


def test_bad_tls_options_exit_2_naming_the_option_and_file(tmp_path: Path, certs: Path) -> None:
    d = make(tmp_path)
    missing = tmp_path / "no-such-dir"
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0", "--tls", "require", "--tls-certificates", missing)
    assert "--tls-certificates" in msg and str(missing) in msg, msg
    half = tmp_path / "half"
    half.mkdir()
    shutil.copy(certs / "server" / "server-cert.pem", half / "server-cert.pem")
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0", "--tls", "on", "--tls-certificates", half)
    assert "--tls-certificates" in msg and str(half / "server-key.pem") in msg, msg
    (half / "server-key.pem").write_text("not a key\n")
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0", "--tls", "on", "--tls-certificates", half)
    assert "server-key.pem" in msg and "private key" in msg, msg
    shutil.copy(certs / "server" / "server-key.pem", half / "server-key.pem")
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0", "--tls", "on", "--tls-certificates", half, "--tls-verify-peer")
    assert "--tls-verify-peer" in msg and str(half / "ca-cert.pem") in msg, msg
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0", "--tls", "sometimes")
    assert "--tls" in msg and "require" in msg, msg
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0", "--tls", "on")
    assert "--tls-certificates" in msg, msg
    # A non-loopback address needs --tls require (checked before anything is bound).
    msg = cli_bad_input("serve", d, "--listen", "0.0.0.0:0", "--tls", "on", "--tls-certificates", certs / "server")
    assert "--tls require" in msg and "--insecure" in msg, msg
    assert not (d / "control.sock").exists()
