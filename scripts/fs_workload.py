"""The crash soak's file workload and its ledger: what the workload processes write (files
of known content, each operation journalled once it and its directory are fsync'd) and what
must be on the file system after a kill (a :class:`Ledger` read from the journals,
:func:`verify` against the mounted file system). Apart from ``fs_crash_soak.py``, which runs
the cells (serve, attach, kill, recover) and re-exports these names for the tests: nothing
here needs root, a server or a mount."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


# ---- the workload: runs as its own process, in its own process group ----------------------


def content(name: str, ver: int, size: int) -> bytes:
    head = f"{name} v{ver} {size}\n".encode()
    return (head + random.Random(f"{name}/{ver}").randbytes(max(0, size - len(head))))[:size]


def pick_size(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.6:
        return rng.randrange(1, 16 << 10)
    if r < 0.9:
        return rng.randrange(16 << 10, 256 << 10)
    return rng.randrange(256 << 10, 2 << 20)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes, flags: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        view = memoryview(data)
        for _ in range(1_000_000):  # bounded: short writes only
            if not view:
                break
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def workload(root: Path, journal: Path, seed: int, max_files: int = 60, seconds: float = 600) -> None:
    """Create / replace (write, fsync, rename, fsync dir) / unlink files under ``root`` until
    killed (or an I/O error, or ``seconds``). Journal lines, written to the host's page cache
    (they survive this process's SIGKILL): ``I op name ver size`` before an operation, ``D op
    name ver size`` once it and its directory's fsync returned."""
    rng = random.Random(seed)
    j = open(journal, "a", buffering=1)
    dirs = [root / f"d{i}" for i in range(3)]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
        fsync_dir(d)
    fsync_dir(root)
    fsync_dir(root.parent)
    # Once the server is gone the kernel can answer a directory fsync with 0 for a change
    # that never reached the disk:
    # - XFS answers it from the inode's pin count alone (xfs_dir_fsync ->
    #   xfs_log_force_inode); a failed log write shuts the file system down and unpins the
    #   items, so the fsync returns 0 without forcing anything;
    # - ext4 was seen doing the same: a directory fsync returned 0, the next operation failed
    #   with EROFS (the journal had aborted), and the rename was missing after recovery
    #   (ext4_sync_file returns 0 early on a read-only file system; the exact path was not
    #   pinned down).
    # So each operation is confirmed afterwards: a write and fsync of this sentinel file must
    # succeed and the file system must not be read-only. Otherwise the operation is recorded
    # as "S" (answered, but the file system had already failed): not durable, and counted.
    sentinel = os.open(root / "sentinel", os.O_WRONLY | os.O_CREAT, 0o644)
    os.fsync(sentinel)
    fsync_dir(root)
    j.write("D setup - 0 0\n")

    def confirm(line: str) -> None:
        try:
            os.pwrite(sentinel, b"x", 0)
            os.fsync(sentinel)
            if os.statvfs(root).f_flag & os.ST_RDONLY:
                raise OSError(30, "the file system went read-only")
        except OSError:
            j.write("S" + line[1:])
            raise
        j.write(line)
    live: dict[str, int] = {}
    n = 0
    deadline = time.monotonic() + seconds
    for _ in range(10_000_000):
        if time.monotonic() > deadline:
            break
        r = rng.random()
        if not live or (len(live) < max_files and r < 0.45):
            n += 1
            rel = f"{dirs[n % len(dirs)].name}/f{n}"
            size = pick_size(rng)
            j.write(f"I create {rel} 1 {size}\n")
            write_file(root / rel, content(rel, 1, size), os.O_EXCL)
            fsync_dir((root / rel).parent)
            live[rel] = 1
            confirm(f"D create {rel} 1 {size}\n")
        elif r < 0.8:
            rel = rng.choice(sorted(live))
            ver = live[rel] + 1
            size = pick_size(rng)
            j.write(f"I replace {rel} {ver} {size}\n")
            tmp = root / (rel + ".tmp")
            write_file(tmp, content(rel, ver, size), os.O_TRUNC)
            os.rename(tmp, root / rel)
            fsync_dir((root / rel).parent)
            live[rel] = ver
            confirm(f"D replace {rel} {ver} {size}\n")
        else:
            rel = rng.choice(sorted(live))
            j.write(f"I unlink {rel} {live[rel]} 0\n")
            os.unlink(root / rel)
            fsync_dir((root / rel).parent)
            del live[rel]
            confirm(f"D unlink {rel} 0 0\n")
    j.close()


# ---- the ledger: what must be on the file system -------------------------------------------


@dataclass
class Ledger:
    """Per file (path relative to the mount): ``(ver, size)`` of its durable content, or None
    once durably unlinked; ``maybe``: the other states an operation in flight at the kill may
    have left (a ``(ver, size)``, None for absent, or "any" for a file being created)."""

    durable: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    maybe: dict[str, list[Any]] = field(default_factory=dict)
    ops: int = 0
    unconfirmed: int = 0  # directory fsyncs that returned 0 on a file system already failed
    unconfirmed_names: set[str] = field(default_factory=set)
    unconfirmed_lost: int = 0  # ... and whose change is not on the disk after recovery

    def read_journal(self, journal: Path, prefix: str) -> None:
        if not journal.exists():
            return
        pending: tuple[str, str, int, int] | None = None
        text = journal.read_text()
        # A line the workload's kill cut short has no newline yet: it was never recorded.
        for line in text[: text.rfind("\n") + 1].splitlines():
            parts = line.split()
            if len(parts) != 5:
                continue  # a line torn by the workload's kill
            kind, op, rel, ver, size = parts[0], parts[1], parts[2], int(parts[3]), int(parts[4])
            if op == "setup":
                continue
            name = f"{prefix}/{rel}"
            if kind == "S":
                self.unconfirmed += 1  # stays pending: its old or new state may be found
                self.unconfirmed_names.add(name)
            elif kind == "I":
                pending = (op, name, ver, size)
            elif kind == "D":
                pending = None
                self.ops += 1
                self.durable[name] = None if op == "unlink" else (ver, size)
        if pending is not None:
            op, name, ver, size = pending
            if op == "create":
                self.maybe[name] = ["any"]
            elif op == "replace":
                self.maybe[name] = [(ver, size)]
            else:
                self.maybe[name] = [None]


@dataclass
class Check:
    files: int = 0  # fsync'd files checked
    lost: int = 0
    corrupt: int = 0
    resurrected: int = 0
    problems: list[str] = field(default_factory=list)


def file_state(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def verify(mnt: Path, led: Ledger, tag: str) -> Check:
    """Compare the mounted file system with the ledger, then settle the operations that were
    in flight (the ledger adopts what landed)."""
    c = Check()
    for name in sorted(set(led.durable) | set(led.maybe)):
        want = led.durable.get(name, "never")
        alts = led.maybe.get(name, [])
        got = file_state(mnt / name)
        if "any" in alts:
            if name in led.unconfirmed_names and got is None:
                led.unconfirmed_lost += 1
            # Being created at the kill: absent, empty, partial: all allowed; what landed is
            # not durable, so it is dropped from the ledger (the next runs use new names).
            led.durable.pop(name, None)
            continue
        if want == "never":
            continue
        states: list[Any] = [want, *alts]
        if want is not None:
            c.files += 1
        ok = None
        for s in states:
            if s is None and got is None:
                ok = s
                break
            if s is not None and got is not None and got == content(name.split("/", 1)[1], s[0], s[1]):
                ok = s
                break
        else:
            if want is None:
                c.resurrected += 1
                c.problems.append(f"{tag}: {name} was durably unlinked and is back ({len(got or b'')} bytes)")
            elif got is None:
                c.lost += 1
                c.problems.append(f"{tag}: {name} (version {want[0]}, {want[1]} bytes, fsync'd) is missing")
            else:
                c.corrupt += 1
                head = got[:40].split(b"\n")[0].decode(errors="replace")
                c.problems.append(f"{tag}: {name} (version {want[0]}, {want[1]} bytes, fsync'd) holds {len(got)} bytes starting {head!r}")
            continue
        if name in led.unconfirmed_names and ok == want and alts and want not in alts:
            led.unconfirmed_lost += 1
        led.durable[name] = ok
    led.maybe.clear()
    led.unconfirmed_names.clear()
    return c
