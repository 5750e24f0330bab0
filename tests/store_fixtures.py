"""Helpers of the store's tests: run the ``raidlab`` CLI, create small arrays, start and stop
``raidlab serve`` as a subprocess, and drive the real NBD clients (qemu-io, nbdinfo, nbdcopy,
fio) against it.

Every server runs in its own process group; :class:`ServerPool` (the ``store_servers``
fixture) kills the groups of those still running at teardown, so a failing test never leaves
a server behind. Every wait is bounded in time.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import pytest

# The ready-line reader is shared with the file-system soak (scripts/fs_stack.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from fs_stack import read_ready_line  # noqa: E402

KiB = 1 << 10
MiB = 1 << 20
# Where the data starts on every member of an array made by `raidlab array create`.
DATA_OFFSET = 1 << 20
EXIT_BAD_INPUT = 2

# Wide, plain output: error messages are not wrapped or coloured.
CLI_ENV = {**os.environ, "COLUMNS": "1000", "NO_COLOR": "1", "TERM": "dumb"}

DEB_OF = {
    "qemu-io": "qemu-utils",
    "qemu-img": "qemu-utils",
    "nbdinfo": "libnbd-bin",
    "nbdcopy": "libnbd-bin",
    "fio": "fio",
    "nbdkit": "nbdkit",
}

T = TypeVar("T")


def raidlab_cmd() -> list[str]:
    """The ``raidlab`` console script of this interpreter's environment."""
    exe = Path(sys.executable).with_name("raidlab")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("raidlab")
    if found:
        return [found]
    return [sys.executable, "-m", "raidlab.cli"]


def one_line(text: str) -> str:
    return " ".join(text.split())


def run_cli(*args: object, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*raidlab_cmd(), *map(str, args)], capture_output=True, text=True, timeout=timeout, env=CLI_ENV, check=False
    )


def cli_ok(*args: object, timeout: float = 60) -> str:
    r = run_cli(*args, timeout=timeout)
    assert r.returncode == 0, f"raidlab {' '.join(map(str, args))}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def cli_bad_input(*args: object, timeout: float = 60) -> str:
    """Run a command that must be refused: exit code 2 and a message on stderr (returned on one
    line)."""
    r = run_cli(*args, timeout=timeout)
    assert r.returncode == EXIT_BAD_INPUT, (
        f"raidlab {' '.join(map(str, args))}: expected exit 2, got {r.returncode}\n{r.stdout}\n{r.stderr}"
    )
    msg = one_line(r.stderr)
    assert msg.startswith("error:"), msg
    assert "Traceback" not in r.stderr, r.stderr
    return msg


def create_array(
    dir: Path,
    level: str,
    disks: int,
    size: str = "4MiB",
    chunk: str = "64KiB",
    layout: str | None = None,
    spares: int = 0,
    name: str | None = None,
    bitmap_chunk: str | None = None,
) -> dict[str, Any]:
    args: list[object] = ["array", "create", dir, "--level", level, "--disks", disks, "--chunk", chunk, "--size", size]
    if bitmap_chunk:
        args += ["--bitmap-chunk", bitmap_chunk]
    if layout:
        args += ["--layout", layout]
    if spares:
        args += ["--spares", spares]
    if name:
        args += ["--name", name]
    out: dict[str, Any] = json.loads(cli_ok(*args, "--json"))
    return out


def examine(dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(cli_ok("array", "examine", dir, "--json"))
    return out


def ctl(dir: Path, *args: object, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_cli("ctl", dir, *args, timeout=timeout)


def ctl_json(dir: Path, *args: object, timeout: float = 60) -> dict[str, Any]:
    r = ctl(dir, *args, "--json", timeout=timeout)
    assert r.returncode == 0, f"ctl {' '.join(map(str, args))}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def status(dir: Path) -> dict[str, Any]:
    return ctl_json(dir, "status")


def check(dir: Path) -> dict[str, Any]:
    return ctl_json(dir, "check", "--wait", timeout=120)


def member_paths(dir: Path) -> list[Path]:
    """Every device in DIR's manifest, resolved against DIR."""
    m = json.loads((dir / "members.json").read_text())
    return [p if p.is_absolute() else dir / p for p in map(Path, m["paths"])]


def digests(paths: list[Path]) -> dict[str, str]:
    """SHA-256 of each file (``"missing"`` for an absent one)."""
    out = {}
    for p in paths:
        if p.exists():
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(MiB), b""):
                    h.update(block)
            out[str(p)] = h.hexdigest()
        else:
            out[str(p)] = "missing"
    return out


def random_file(path: Path, size: int, seed: int) -> bytes:
    data = random.Random(seed).randbytes(size)
    path.write_bytes(data)
    return data


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def require_tools(*tools: str) -> None:
    """Skip the test when one of the clients is not installed."""
    for t in tools:
        if shutil.which(t) is None:
            pytest.skip(f"{t} not installed (Debian package {DEB_OF.get(t, t)}; `make test-python` installs it as root)")


def wait_until(pred: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll ``pred`` until it returns a true value (returned), at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    for _ in range(1_000_000):
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            break
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Server:
    """A running ``raidlab serve DIR`` in its own process group."""

    def __init__(self, dir: Path, proc: subprocess.Popen[bytes], listen: str, ready: str, log: Path) -> None:
        self.dir = dir
        self.proc = proc
        self.listen = listen
        self.ready = ready
        self.log_path = log

    @property
    def uri(self) -> str:
        if self.listen.startswith("unix:"):
            return f"nbd+unix:///?socket={self.listen[5:]}"
        return f"nbd://{self.listen}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def running(self) -> bool:
        return self.proc.poll() is None

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, timeout: float = 60) -> str:
        """SIGTERM: the server drains, marks the array clean and must exit 0. Returns its log."""
        self._signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"raidlab serve did not stop within {timeout} s of SIGTERM\n{self.log()}") from None
        finally:
            self._close()
        assert rc == 0, f"raidlab serve exited {rc} after SIGTERM\n{self.log()}"
        return self.log()

    def kill(self) -> None:
        """SIGKILL the process group (a crash) and reap it."""
        self._signal(signal.SIGKILL)
        try:
            self.proc.wait(timeout=30)
        finally:
            self._close()

    def _close(self) -> None:
        if self.proc.stdout is not None and not self.proc.stdout.closed:
            self.proc.stdout.close()


class ServerPool:
    """Starts servers and kills whatever is still running at :meth:`close`."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.servers: list[Server] = []

    def start(self, dir: Path, *extra: object, listen: str | None = None, timeout: float = 60) -> Server:
        last = ""
        for attempt in range(3):
            addr = listen or f"127.0.0.1:{free_port()}"
            log = self.logs / f"serve-{len(self.servers)}-{attempt}.log"
            with open(log, "wb") as err:
                proc = subprocess.Popen(
                    [*raidlab_cmd(), "serve", str(dir), "--listen", addr, *map(str, extra)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    bufsize=0,
                    env=CLI_ENV,
                    start_new_session=True,
                )
            server = Server(dir, proc, addr, "", log)
            self.servers.append(server)
            try:
                line = read_ready_line(proc, timeout)
            except TimeoutError:
                server.kill()
                raise AssertionError(f"raidlab serve {dir}: no ready line within {timeout} s\n{server.log()}") from None
            if line is not None:
                assert "accepting connections on" in line, line
                server.ready = line
                return server
            server.kill()
            last = server.log()
            if listen is not None or "in use" not in last.lower():
                break
        raise AssertionError(f"raidlab serve {dir} exited before it was ready (exit {server.proc.returncode})\n{last}")

    def close(self) -> None:
        for s in self.servers:
            if s.running():
                s.kill()
            else:
                s._close()


@pytest.fixture
def store_servers(tmp_path: Path) -> Iterator[ServerPool]:
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    pool = ServerPool(logs)
    try:
        yield pool
    finally:
        pool.close()


def run_tool(args: list[str], timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False)


def tool_ok(args: list[str], timeout: float = 120, cwd: Path | None = None) -> str:
    r = run_tool(args, timeout=timeout, cwd=cwd)
    assert r.returncode == 0, f"{' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def qemu_io(uri: str, *commands: str, timeout: float = 60) -> str:
    """Run qemu-io commands on the export; qemu-io reports a failed command on stdout and still
    exits 0, so the output is checked too."""
    args = ["qemu-io", "-f", "raw"]
    for c in commands:
        args += ["-c", c]
    out = tool_ok([*args, uri], timeout=timeout)
    low = out.lower()
    for bad in ("failed", "error", "pattern verification"):
        assert bad not in low, f"qemu-io {commands}: {out}"
    return out



# Writes of assorted sizes and offsets in KiB, some overlapping, inside 4 MiB.
SCATTERED_KIB = [(0, 4), (60, 8), (100, 200), (4, 16), (1000, 300), (150, 40), (2028, 20)]


def write_scattered(uri: str, model: bytearray, first_pattern: int) -> None:
    """Write ``SCATTERED_KIB`` through ``uri``, each with its own byte pattern from
    ``first_pattern`` up, and the same into ``model``."""
    for i, (off, ln) in enumerate(SCATTERED_KIB):
        pat = first_pattern + i
        qemu_io(uri, f"write -P {pat} {off}k {ln}k")
        model[off * KiB : (off + ln) * KiB] = bytes([pat]) * (ln * KiB)

def nbdinfo(uri: str) -> dict[str, Any]:
    info: dict[str, Any] = json.loads(tool_ok(["nbdinfo", "--json", uri], timeout=30))
    (export,) = info["exports"]
    out: dict[str, Any] = export
    return out


def nbd_write_file(uri: str, src: Path, timeout: float = 120) -> None:
    tool_ok(["nbdcopy", str(src), uri], timeout=timeout)


def nbd_read_all(uri: str, dst: Path, timeout: float = 120) -> bytes:
    tool_ok(["nbdcopy", uri, str(dst)], timeout=timeout)
    return dst.read_bytes()


def fio_args(uri: str, size: int, *extra: str, offset: int = 0, name: str = "v") -> list[str]:
    return [
        "fio",
        f"--name={name}",
        "--ioengine=nbd",
        f"--uri={uri}",
        f"--size={size}",
        f"--offset={offset}",
        "--verify=crc32c",
        "--randseed=1234",
        *extra,
    ]


def fio_result(out_json: Path) -> dict[str, Any]:
    """The single job of fio's --output-format=json file."""
    text = out_json.read_text()
    data = json.loads(text[text.index("{") :])
    (job,) = data["jobs"]
    out: dict[str, Any] = job
    return out


def run_fio(args: list[str], cwd: Path, timeout: float = 120) -> dict[str, Any]:
    """Run fio to completion in ``cwd`` (its verify state files go there); it must succeed."""
    out = cwd / "fio.json"
    r = run_tool([*args, "--output-format=json", f"--output={out}"], timeout=timeout, cwd=cwd)
    job = fio_result(out) if out.exists() and out.stat().st_size else {}
    assert r.returncode == 0 and job.get("error") == 0, f"{' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}\n{job.get('error')}"
    return job


class Background:
    """A client process run in the background in its own process group, output to files."""

    def __init__(self, args: list[str], cwd: Path, tag: str) -> None:
        self.out = cwd / f"{tag}.out"
        self.err = cwd / f"{tag}.err"
        self.started = time.monotonic()
        with open(self.out, "wb") as o, open(self.err, "wb") as e:
            self.proc = subprocess.Popen(args, cwd=cwd, stdin=subprocess.DEVNULL, stdout=o, stderr=e, start_new_session=True)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.proc.args!r} did not finish within {timeout} s\n{self.output()}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=30)

    def output(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")
