"""What TLS costs on the NBD front: plain text, X.509 (rustls) and TLS-PSK (OpenSSL) on
``raidlab serve``, beside ``nbdkit memory`` (GnuTLS) in the same three modes, side by side
in one run.

fio's nbd engine cannot be used (libnbd refuses it the local files a TLS URI names), so:
4 KiB uniform random reads at queue depth 1 and 32 by ``raidlab replay`` (the store's own
client: rustls for X.509, OpenSSL for PSK) and a sequential copy of the export to nowhere by
``nbdcopy`` (libnbd, GnuTLS), best of ``--repeat`` runs per cell. The
store's exports are RAID-0 arrays of 4 members in tmpfs, one per mode; certificates are made
with the ``openssl`` command and keys written here, in a temporary directory. Needs nbdcopy,
nbdkit, openssl, and a build with the ``tls-psk`` feature (else the PSK rows are left out,
saying why).

    python benches/bench_tls.py [--requests 20000] [--repeat 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_store import RAIDLAB, Servers, free_port, need, wait_port  # noqa: E402

JOBS = [
    ("randread 4k qd1", 1, "iops"),
    ("randread 4k qd32", 32, "iops"),
    ("nbdcopy read", 0, "mb_s"),
]
SIZE = 64 << 20
WORKLOAD = """
[workload]
block_size = 4096
[workload.synthetic]
kind = "uniform"
keys = {keys}
requests = {requests}
seed = 3
[cache]
policy = "lru"
capacity_blocks = 64
[array]
level = "raid0"
stripe_unit = 65536
disks = 4
[run]
mode = "count"
"""


def replay(uri: str, wl: Path, qd: int) -> float:
    out = subprocess.run([*RAIDLAB, "replay", uri, str(wl), "--qd", str(qd), "--json"],
                         capture_output=True, text=True, timeout=300, check=False)
    if out.returncode != 0:
        sys.exit(f"bench_tls: replay failed on {uri}: {out.stderr.strip()}")
    r = json.loads(out.stdout)
    if r["errors"]:
        sys.exit(f"bench_tls: replay on {uri}: {r['errors']} errors")
    return float(r["iops"])


def copy_mb_s(uri: str) -> float:
    t = time.monotonic()
    subprocess.run(["nbdcopy", uri, "null:"], check=True, capture_output=True, timeout=300)
    return SIZE / (time.monotonic() - t) / 1e6


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(root: Path) -> tuple[Path, Path]:
    """``server/`` (nbdkit's layout) and ``client/`` (libnbd's: the CA)."""
    work = root / "work"
    work.mkdir(parents=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca-key.pem",
            "-out", "ca-cert.pem", "-days", "2", "-subj", "/CN=bench CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign", cwd=work)
    (work / "server.ext").write_text("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                                     "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "server-key.pem",
            "-out", "server.csr", "-subj", "/CN=localhost", cwd=work)
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca-cert.pem", "-CAkey", "ca-key.pem", "-set_serial", "1",
            "-days", "2", "-out", "server-cert.pem", "-extfile", "server.ext", cwd=work)
    server, client = root / "server", root / "client"
    server.mkdir()
    client.mkdir()
    for name in ("server-cert.pem", "server-key.pem", "ca-cert.pem"):
        (server / name).write_bytes((work / name).read_bytes())
    (client / "ca-cert.pem").write_bytes((work / "ca-cert.pem").read_bytes())
    return server, client


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=20000, help="4 KiB reads per replay run")
    ap.add_argument("--repeat", type=int, default=2, help="runs per cell (the best is kept)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    need("nbdcopy", "nbdkit", "openssl")
    from raidlab import _core

    servers = Servers()
    rows: dict[str, dict[str, float]] = {}
    notes: list[str] = []
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="raidlab-bench-tls-", dir=shm) as tmp:
        root = Path(tmp)
        server_pki, client_pki = make_pki(root / "pki")
        psk = root / "keys.psk"
        psk.write_text(f"bench:{secrets.token_hex(32)}\n")
        modes: list[tuple[str, list[str], str, str]] = [
            ("plain", [], "nbd://127.0.0.1:{port}/", ""),
            ("x509", ["--tls", "require", "--tls-certificates", str(server_pki)],
             "nbds://127.0.0.1:{port}/?tls-certificates=" + str(client_pki), ""),
        ]
        if _core.TLS_PSK:
            modes.append(("psk", ["--tls", "require", "--tls-psk", str(psk)], "nbds://bench@127.0.0.1:{port}/?tls-psk-file=" + str(psk), ""))
        else:
            notes.append("psk rows left out: this build has no TLS-PSK (the tls-psk feature)")
        targets: list[tuple[str, str]] = []
        try:
            for mode, flags, uri, _ in modes:
                d = root / f"arr-{mode}"
                subprocess.run([*RAIDLAB, "array", "create", str(d), "--level", "raid0", "--disks", "4", "--chunk", "64KiB",
                                "--size", f"{SIZE >> 22}MiB"], check=True, capture_output=True, timeout=120)
                port = free_port()
                servers.start([*RAIDLAB, "serve", str(d), "--listen", f"127.0.0.1:{port}", *flags], ready="accepting connections")
                targets.append((f"raidlab serve {mode}", uri.format(port=port)))
                port = free_port()
                kit = {"plain": [], "x509": ["--tls=require", f"--tls-certificates={server_pki}"],
                       "psk": ["--tls=require", f"--tls-psk={psk}"]}[mode]
                servers.start(["nbdkit", "-f", "-p", str(port), "-i", "127.0.0.1", *kit, "memory", str(SIZE)])
                wait_port(port)
                targets.append((f"nbdkit memory {mode}", uri.format(port=port)))
            src = root / "fill.bin"
            src.write_bytes(secrets.token_bytes(SIZE))
            wl = root / "wl.toml"
            wl.write_text(WORKLOAD.format(keys=SIZE // 4096, requests=args.requests))
            for name, uri in targets:
                # Written once, so reads return data and not holes.
                subprocess.run(["nbdcopy", str(src), uri], check=True, capture_output=True, timeout=300)
                rows[name] = {}
                for label, qd, _key in JOBS:
                    runs = [replay(uri, wl, qd) if qd else copy_mb_s(uri) for _ in range(args.repeat)]
                    rows[name][label] = max(runs)
        finally:
            servers.stop_all()
    if args.json:
        print(json.dumps({"rows": rows, "notes": notes}))
        return 0
    head = f"{'export':<26}" + "".join(f"{label + (' IOPS' if key == 'iops' else ' MB/s'):>22}" for label, _qd, key in JOBS)
    print(head)
    for name, cells in rows.items():
        print(f"{name:<26}" + "".join(f"{cells[label]:>22.0f}" for label, *_ in JOBS))
    print("\nratios to the same server in plain text:")
    for name, cells in rows.items():
        base = rows[name.rsplit(" ", 1)[0] + " plain"]
        print(f"{name:<26}" + "".join(f"{cells[label] / base[label]:>22.2f}" for label, *_ in JOBS))
    for n in notes:
        print(n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
