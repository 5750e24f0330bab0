"""The stack a file system on the served store runs on, for the crash soak and its tests:
``raidlab serve`` in its own process group, ``nbdfuse`` exposing the export as a file, a loop
device over it, mkfs, fsck, and a :class:`Rig` that owns every process, mount and loop device
it made and removes them in the documented order within bounded time
(``scripts/fs_crash_soak.py`` describes the stack and the soak built on it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from fs_crash_soak import Cell

MiB = 1 << 20
RAIDLAB = [sys.executable, "-m", "raidlab.cli"]
# 4 KiB blocks and sectors: the store refuses requests below 4 KiB (its advertised minimum
# block size). XFS's default sector size follows the loop device's 512-byte sectors, so
# its log would write 512-byte sectors; -s size=4096 keeps every request 4 KiB aligned.
MKFS = {
    "ext4": ["mkfs.ext4", "-q", "-F", "-b", "4096"],
    "xfs": ["mkfs.xfs", "-q", "-f", "-s", "size=4096"],
    "ext4-defaults": ["mkfs.ext4", "-q", "-F"],
    "xfs-defaults": ["mkfs.xfs", "-q", "-f"],
}
TOOLS = {
    "ext4": ["nbdfuse", "losetup", "mount", "umount", "mkfs.ext4", "e2fsck"],
    "xfs": ["nbdfuse", "losetup", "mount", "umount", "mkfs.xfs", "xfs_repair"],
}
DEB_OF = {"nbdfuse": "libnbd-bin", "nbdinfo": "libnbd-bin", "mkfs.xfs": "xfsprogs", "xfs_repair": "xfsprogs", "mkfs.ext4": "e2fsprogs", "e2fsck": "e2fsprogs", "losetup": "mount"}
BENIGN_FSCK = re.compile(r"^Free (blocks|inodes) count wrong \(\d+, counted=\d+\)\.$")
def base_fs(fs: str) -> str:
    return fs.split("-")[0]


class Skip(Exception):
    """The machine cannot run this (not root, no FUSE, no loop devices, a tool missing)."""


def preflight(fs: str) -> None:
    """Raise :class:`Skip` naming what is missing for file system ``fs``."""
    if os.geteuid() != 0:
        raise Skip("needs root (losetup, mount)")
    if not os.path.exists("/dev/fuse"):
        raise Skip("no /dev/fuse (nbdfuse needs FUSE)")
    if not os.path.exists("/dev/loop-control"):
        raise Skip("no /dev/loop-control (no loop devices)")
    for t in TOOLS[base_fs(fs)]:
        if shutil.which(t) is None:
            raise Skip(f"{t} not installed (Debian package {DEB_OF.get(t, t)}; `sh scripts/ensure-debs.sh` installs it as root)")


def run(args: list[str], timeout: float = 60, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command to completion within ``timeout`` s; a timeout is reported as exit -9."""
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return subprocess.CompletedProcess(args, -9, out, err + f"\n(timed out after {timeout} s)")


def must(args: list[str], timeout: float = 60) -> str:
    r = run(args, timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def wait_for(pred: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    for _ in range(1_000_000):
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            break
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mounted(path: Path) -> bool:
    p = str(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == p for line in f if len(line.split()) > 1)


def mounts_under(base: Path) -> list[Path]:
    b = str(base) + "/"
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f if len(line.split()) > 1]
    return [Path(p) for p in points if p.startswith(b)]


def loops_backed_by(path: Path) -> list[str]:
    """Loop devices whose backing file is ``path`` (or under it)."""
    out = []
    for d in Path("/sys/block").glob("loop*"):
        try:
            backing = (d / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        if backing == str(path) or backing.startswith(str(path) + "/"):
            out.append("/dev/" + d.name)
    return out


def kill_group(p: subprocess.Popen[Any], sig: int = signal.SIGKILL, wait_s: float = 30) -> int | None:
    """Signal ``p``'s process group and reap ``p`` (None if it did not exit in ``wait_s``)."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
    try:
        return p.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        return None


# ---- processes and the block-device stack ---------------------------------------------------


def read_ready_line(proc: subprocess.Popen[bytes], timeout: float) -> str | None:
    """The first stdout line of ``proc`` (a server's "accepting connections" line), or None if
    it exits or closes stdout first; TimeoutError after ``timeout`` seconds."""
    import select

    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        readable, _, _ = select.select([fd], [], [], min(left, 0.5))
        if readable:
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            buf += chunk
        elif proc.poll() is not None:
            return None
    return buf.split(b"\n", 1)[0].decode(errors="replace")



class Server:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc, self.port, self.log_path = proc, port, log

    @property
    def uri(self) -> str:
        return f"nbd://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class Attachment:
    fuse: Path
    nbdfuse: subprocess.Popen[bytes]
    loop: str = ""
    conn: str = ""  # /sys/fs/fuse/connections/N of this FUSE mount
    mnt: Path | None = None


class Rig:
    """Owns every process, mount and loop device a run makes; :meth:`close` removes whatever
    is left, in the documented order, within bounded time."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.procs: list[subprocess.Popen[Any]] = []
        self.atts: list[Attachment] = []
        self.nlogs = 0

    # servers
    def start_server(self, arr: Path, extra: list[str], timeout: float = 60) -> Server:
        last = ""
        for _attempt in range(3):
            port = free_port()
            self.nlogs += 1
            log = self.base / f"serve-{self.nlogs}.log"
            with open(log, "wb") as err:
                p = subprocess.Popen(
                    [*RAIDLAB, "serve", str(arr), "--listen", f"127.0.0.1:{port}", *extra],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    start_new_session=True,
                )
            self.procs.append(p)
            try:
                line = read_ready_line(p, timeout)
            except TimeoutError:
                line = None
            if line is not None and "accepting connections" in line:
                return Server(p, port, log)
            kill_group(p)
            last = log.read_text(errors="replace")
            if "in use" not in last.lower():
                break
        raise RuntimeError(f"raidlab serve {arr} did not start\n{last}")

    def start_nbdkit(self, image: Path, timeout: float = 30) -> Server:
        """The reference server, ``nbdkit file IMAGE`` (a control run: the same stack and
        checks over a server that is not raidlab)."""
        port = free_port()
        self.nlogs += 1
        log = self.base / f"serve-{self.nlogs}.log"
        with open(log, "wb") as err:
            p = subprocess.Popen(
                ["nbdkit", "-f", "-i", "127.0.0.1", "-p", str(port), "file", str(image)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,
            )
        self.procs.append(p)

        def up() -> bool:
            if p.poll() is not None:
                raise RuntimeError(f"nbdkit exited {p.returncode}: {log.read_text(errors='replace')}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False

        wait_for(up, timeout, "nbdkit to listen")
        return Server(p, port, log)

    def stop_server(self, srv: Server, timeout: float = 60) -> int | None:
        rc = kill_group(srv.proc, signal.SIGTERM, timeout)
        if rc is None:
            kill_group(srv.proc)
        self._close_pipe(srv.proc)
        return rc

    def kill_server(self, srv: Server) -> None:
        kill_group(srv.proc)
        self._close_pipe(srv.proc)

    @staticmethod
    def _close_pipe(p: subprocess.Popen[Any]) -> None:
        if p.stdout is not None and not p.stdout.closed:
            p.stdout.close()

    def spawn(self, args: list[str], out: Path) -> subprocess.Popen[bytes]:
        with open(out, "ab") as o:
            p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=o, stderr=o, start_new_session=True)
        self.procs.append(p)
        return p

    # the stack
    def attach(self, uri: str, tag: str) -> Attachment:
        fuse = self.base / f"fuse-{tag}"
        fuse.mkdir(exist_ok=True)
        p = self.spawn(["nbdfuse", str(fuse), uri], self.base / f"nbdfuse-{tag}.log")
        att = Attachment(fuse, p)
        self.atts.append(att)
        try:
            wait_for(lambda: p.poll() is not None or (mounted(fuse) and (fuse / "nbd").exists()), 20, "nbdfuse to mount")
        except RuntimeError:
            raise RuntimeError(f"nbdfuse did not mount {uri}: {(self.base / f'nbdfuse-{tag}.log').read_text(errors='replace')}") from None
        if p.poll() is not None:
            raise RuntimeError(f"nbdfuse exited {p.returncode}: {(self.base / f'nbdfuse-{tag}.log').read_text(errors='replace')}")
        conn = Path("/sys/fs/fuse/connections") / str(os.minor(os.stat(fuse).st_dev))
        att.conn = str(conn) if conn.exists() else ""
        r = run(["losetup", "-f", "--show", str(fuse / "nbd")], 30)
        if r.returncode != 0 or not r.stdout.strip().startswith("/dev/loop"):
            raise Skip(f"losetup -f --show failed (exit {r.returncode}): {r.stderr.strip()}")
        att.loop = r.stdout.strip()
        return att

    def mount(self, att: Attachment, mnt: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        mnt.mkdir(exist_ok=True)
        r = run(["mount", att.loop, str(mnt)], timeout)
        if r.returncode == 0:
            att.mnt = mnt
        return r

    def umount(self, att: Attachment, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """A clean unmount (writes back everything); the attachment stays."""
        assert att.mnt is not None
        r = run(["umount", str(att.mnt)], timeout)
        if r.returncode == 0 or not mounted(att.mnt):
            att.mnt = None
        return r

    def detach(self, att: Attachment) -> list[str]:
        """Tear down in the documented order: kill nbdfuse, ``umount -l`` the file system,
        ``losetup -d``, ``umount -l`` the FUSE directory. Returns what could not be removed."""
        left = []
        kill_group(att.nbdfuse, signal.SIGTERM, 5)
        kill_group(att.nbdfuse, signal.SIGKILL, 10)
        # Requests still queued on the dead FUSE connection fail at once instead of waiting.
        if att.conn and os.path.exists(att.conn + "/abort"):
            try:
                Path(att.conn + "/abort").write_text("1")
            except OSError:
                pass
        if att.mnt is not None:
            if mounted(att.mnt):
                run(["umount", "-l", str(att.mnt)], 30)
            if mounted(att.mnt):
                left.append(f"mount {att.mnt}")
            att.mnt = None
        if att.loop:
            run(["losetup", "-d", att.loop], 30)
        if mounted(att.fuse):
            run(["umount", "-l", str(att.fuse)], 30)
        if mounted(att.fuse):
            left.append(f"mount {att.fuse}")
        if att.loop:
            # A lazily unmounted file system lives on until it lets go of its device (an XFS
            # shut down by the kill took a second more in one run), and the next mount of the
            # same file system then fails: XFS refuses a second file system with its UUID.
            # Its instance is /sys/fs/TYPE/loopN; the device cannot be reused while it lives,
            # so the directory going is this file system going, and the wait is bounded.
            name = Path(att.loop).name
            instances = [Path(f"/sys/fs/{t}/{name}") for t in ("xfs", "ext4")]
            try:
                wait_for(lambda: not any(p.exists() for p in instances), 20, f"the file system on {att.loop} to go")
            except RuntimeError:
                left.append(f"file system on {att.loop}")
            # A lazily unmounted file system releases its loop device when it lets go of it;
            # losetup -d has set autoclear, so the device goes then.
            dev = att.loop
            try:
                wait_for(lambda: not Path(f"/sys/block/{Path(dev).name}/loop").exists() or not loops_backed_by(att.fuse), 20, f"{dev} to be released")
            except RuntimeError:
                left.append(f"loop {dev}")
            att.loop = ""
        if att in self.atts:
            self.atts.remove(att)
        return left

    def close(self) -> list[str]:
        """Kill every process still running, tear down every attachment, lazily unmount
        anything left under the base directory. Returns what is still left (nothing, normally)."""
        left: list[str] = []
        for p in self.procs:
            if p.poll() is None:
                if kill_group(p) is None:
                    left.append(f"process {p.pid} ({p.args!r}) did not exit")
            self._close_pipe(p)
        for att in list(self.atts):
            left += self.detach(att)
        for m in sorted(mounts_under(self.base), key=lambda p: -len(str(p))):
            run(["umount", "-l", str(m)], 30)
            if mounted(m):
                left.append(f"mount {m}")
        for dev in loops_backed_by(self.base):
            run(["losetup", "-d", dev], 30)
        return left


def ctl(arr: Path, *args: str, timeout: float = 60) -> dict[str, Any]:
    out = must([*RAIDLAB, "ctl", str(arr), *args, "--json"] if args[0] in ("status", "check") else [*RAIDLAB, "ctl", str(arr), *args], timeout)
    return json.loads(out) if args[0] in ("status", "check") else {"out": out}


def status(arr: Path) -> dict[str, Any]:
    return ctl(arr, "status")


def fsck_ext4(dev: str, tag: str, cell: Cell) -> bool:
    """e2fsck -fy (replays the journal) then -fn must be clean. False if the file system
    cannot be trusted any more."""
    fix = run(["e2fsck", "-fy", dev], 300)
    chk = run(["e2fsck", "-fn", dev], 300)
    # Each question e2fsck answered, with the line that says what it found. The superblock's
    # free block and inode totals are not journaled (ext4 sums the group descriptors at
    # mount), so after any crash they are stale; e2fsck fixes them silently in preen mode.
    # Anything else it had to fix means writes the journal promised were lost.
    lines = fix.stdout.splitlines()
    fixes = [
        " / ".join(lines[max(0, i - 2) : i + 1])
        for i, line in enumerate(lines)
        if re.search(r"\?\s+yes\s*$", line) and not (i > 0 and BENIGN_FSCK.match(lines[i - 1].strip()))
    ]
    if chk.returncode != 0 or fix.returncode not in (0, 1):
        cell.fsck_dirty += 1
        cell.problems.append(f"{tag}: e2fsck -fy exit {fix.returncode}, then -fn exit {chk.returncode}: {' | '.join((fix.stdout + chk.stdout).splitlines()[:30])}")
        return chk.returncode == 0
    if fixes:
        cell.fsck_repaired += 1
        cell.problems.append(f"{tag}: e2fsck -fy repaired more than the journal: {' | '.join(fixes[:10])}")
    else:
        cell.fsck_clean += 1
    return True


def fsck_xfs(rig: Rig, att: Attachment, mnt: Path, tag: str, cell: Cell) -> bool:
    """Mount (replays the log), unmount, xfs_repair -n must be clean."""
    m = rig.mount(att, mnt)
    if m.returncode != 0:
        cell.fsck_dirty += 1
        cell.problems.append(f"{tag}: XFS mount (log replay) failed, exit {m.returncode}: {m.stderr.strip()}")
        return False
    u = rig.umount(att)
    if u.returncode != 0:
        cell.problems.append(f"{tag}: umount after the log replay failed: {u.stderr.strip()}")
        return False
    r = run(["xfs_repair", "-n", att.loop], 300)
    if r.returncode != 0:
        cell.fsck_dirty += 1
        cell.problems.append(f"{tag}: xfs_repair -n exit {r.returncode}: {' | '.join((r.stdout + r.stderr).splitlines()[:30])}")
        return False
    cell.fsck_clean += 1
    return True


def min_block_size(uri: str) -> int | None:
    """The export's advertised minimum block size (nbdinfo), or None if unknown."""
    if shutil.which("nbdinfo") is None:
        return None
    r = run(["nbdinfo", "--json", uri], 30)
    if r.returncode != 0:
        return None
    try:
        (exp,) = json.loads(r.stdout)["exports"]
        return int(exp.get("block_size_minimum", 1))
    except (ValueError, KeyError, TypeError):
        return None


