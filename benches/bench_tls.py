"""What TLS costs on the NBD front: plain text, X.509 (rustls) and TLS-PSK (OpenSSL) on
``raidlab serve``, beside ``nbdkit memory`` (GnuTLS) in the same three modes, side by side
in one run.

fio's nbd engine (libnbd, GnuTLS on the client side) drives each export: 4 KiB random reads
at queue depth 1 and 32 and 1 MiB sequential reads, best of ``--repeat`` runs per cell. The
store's exports are RAID-0 arrays of 4 members in tmpfs, one per mode; certificates are made
with the ``openssl`` command and keys written here, in a temporary directory. Needs fio,
nbdkit, openssl, and a build with the ``tls-psk`` feature (else the PSK rows are left out,
saying why).

    python benches/bench_tls.py [--runtime 2] [--repeat 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_store import RAIDLAB, Servers, fio, free_port, need, wait_port  # noqa: E402

JOBS = [
    ("randread 4k qd1", "randread", "4k", 1, "iops"),
    ("randread 4k qd32", "randread", "4k", 32, "iops"),
    ("read 1M qd8", "read", "1M", 8, "mb_s"),
]
SIZE = 64 << 20


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
    ap.add_argument("--runtime", type=float, default=2.0, help="seconds per fio job")
    ap.add_argument("--repeat", type=int, default=2, help="runs per cell (the best is kept)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    need("fio", "nbdkit", "openssl")
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
            for name, uri in targets:
                # Written once, so reads return data and not holes.
                fio(uri, "write", "1M", 8, SIZE, 0.5)
                rows[name] = {}
                for label, rw, bs, qd, key in JOBS:
                    rows[name][label] = max(fio(uri, rw, bs, qd, SIZE, args.runtime)[key] for _ in range(args.repeat))
        finally:
            servers.stop_all()
    if args.json:
        print(json.dumps({"rows": rows, "notes": notes}))
        return 0
    head = f"{'export':<26}" + "".join(f"{label + (' IOPS' if key == 'iops' else ' MB/s'):>24}" for label, *_, key in JOBS)
    print(head)
    for name, cells in rows.items():
        print(f"{name:<26}" + "".join(f"{cells[label]:>24.0f}" for label, *_ in JOBS))
    print("\nratios to the same server in plain text:")
    for name, cells in rows.items():
        base = rows[name.rsplit(" ", 1)[0] + " plain"]
        print(f"{name:<26}" + "".join(f"{cells[label] / base[label]:>24.2f}" for label, *_ in JOBS))
    for n in notes:
        print(n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
