"""Real file systems on the store: ext4 and XFS made on the export the way a user would, a
file workload that fsyncs, and ``raidlab serve`` SIGKILLed under it, again and again.

The stack, built afresh after every kill (no kernel ``nbd`` module is needed)::

    raidlab serve ARR --listen 127.0.0.1:PORT [write-cache options]
    nbdfuse FUSE nbd://127.0.0.1:PORT          # the export as the file FUSE/nbd
    losetup -f --show FUSE/nbd                 # a block device
    mkfs.ext4 -b 4096 DEV | mkfs.xfs -s size=4096 DEV; mount DEV MNT

One run:
1. Start the server (no write cache, i.e. write-through; ``--backup mirror``; ``--backup
   log``), attach the stack, mount, and start two workload processes. Each creates files of
   known content, replaces them by write + fsync + rename, and unlinks them; after every
   operation it fsyncs the file and its directory and only then records the operation as
   durable in a journal kept outside the file system.
2. The event: ``kill`` (a healthy array), ``fail`` (``ctl fail K`` during the workload, the
   kill lands on a degraded array) or ``rebuild`` (``ctl fail K`` and ``ctl add-spare``; the
   rebuild is throttled, so the kill lands while it runs).
3. SIGKILL the server's process group at a random moment, kill the workload, and tear the
   stack down in the documented order: kill nbdfuse, ``umount -l`` the file system,
   ``losetup -d``, ``umount -l`` the FUSE directory.
4. Restart the server (it replays its write-cache backup), attach again, and check the file
   system: ext4 ``e2fsck -fy`` (journal replay) then ``e2fsck -fn`` must be clean; XFS is
   mounted (log replay), unmounted, and ``xfs_repair -n`` must be clean. Mount it and read
   every file: each whose fsync returned before the kill must hold its content, each
   durably unlinked must stay gone. An operation in flight at the kill may show its old or
   its new state.
5. Repair the array (a spare for a failed slot, the rebuild finished, the faulty device
   removed), wait for the resync, ``ctl check`` must find no inconsistent row, and stop the
   server cleanly. The next run continues on the same file system.

    python scripts/fs_crash_soak.py [--runs 50] [--fs ext4,xfs] [--modes write-through,mirror,log]
        [--events kill,fail,rebuild] [--seed 1] [--json] [--budget-s SECONDS]

It prints one row per file system x mode x event: runs (= kills), fsync'd files checked,
durable operations, fsck results, files lost, corrupt or resurrected, and inconsistent rows.
Exit 0 when nothing was lost. Needs root, /dev/fuse, loop devices, nbdfuse (libnbd-bin),
e2fsprogs and xfsprogs; it says what is missing and exits 0 otherwise (``--strict``: 1).
``tests/test_store_fs.py`` runs one run per cell of a few cells; ``make soak`` runs this.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The stack itself (servers, nbdfuse, loop devices, fsck) lives in fs_stack.py; its names are
# re-exported here for the tests, which import this module.
from fs_stack import (  # noqa: F401
    MKFS,
    RAIDLAB,
    TOOLS,
    MiB,
    Rig,
    Server,
    Skip,
    base_fs,
    ctl,
    fsck_ext4,
    fsck_xfs,
    free_port,
    kill_group,
    loops_backed_by,
    min_block_size,
    mounted,
    mounts_under,
    must,
    preflight,
    run,
    status,
    wait_for,
)

# The workload and the ledger it is checked against live in fs_workload.py (they need no
# root or server); re-exported here for the tests as well.
from fs_workload import (  # noqa: F401
    Check,
    Ledger,
    content,
    file_state,
    fsync_dir,
    pick_size,
    verify,
    workload,
    write_file,
)

MODES: dict[str, list[str]] = {
    "write-through": [],
    "mirror": ["--write-cache-mib", "8", "--backup", "mirror"],
    "log": ["--write-cache-mib", "8", "--backup", "log", "--log-size", "64MiB"],
}
EVENTS = ("kill", "fail", "rebuild")
# RAID-5 of 4 members. XFS refuses file systems under 300 MB.
MEMBER_MIB = {"ext4": 32, "xfs": 104, "ext4-defaults": 96, "xfs-defaults": 104}
# Throttle of the rebuild the "rebuild" event starts, KiB/s per member: a 32 MiB member
# takes 16 s, so the kill lands in the middle of it.
REBUILD_KIB = 2048


# ---- one cell: a file system, a write-cache mode and an event, run after run ----------------


@dataclass
class Cell:
    fs: str
    mode: str
    event: str
    runs: int = 0
    kills: int = 0
    files: int = 0  # fsync'd files checked, summed over the runs
    ops: int = 0  # durable operations (create, replace, unlink) recorded
    fsck_clean: int = 0
    fsck_repaired: int = 0
    fsck_dirty: int = 0
    lost: int = 0
    corrupt: int = 0
    resurrected: int = 0
    mismatched_rows: int = 0
    unconfirmed: int = 0  # operations whose directory fsync returned 0 after the fs failed
    unconfirmed_lost: int = 0  # ... of which the change was not on the disk after recovery
    degraded_at_kill: int = 0
    rebuilding_at_kill: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def row(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "problems"}
        d["problems"] = self.problems[:20]
        return d


class CellRunner:
    """One array and one file system, killed run after run under a workload."""

    def __init__(self, rig: Rig, fs: str, mode: str, event: str, seed: int, log: Callable[[str], None] = lambda s: None) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
        if event not in EVENTS:
            raise ValueError(f"unknown event {event!r} (one of {', '.join(EVENTS)})")
        self.rig, self.fs, self.mode, self.event = rig, fs, mode, event
        self.rng = random.Random(seed)
        self.seed = seed
        self.say = log
        self.cell = Cell(fs, mode, event)
        self.led = Ledger()
        self.dir = rig.base / f"{fs}-{mode}-{event}"
        self.dir.mkdir()
        self.arr = self.dir / "arr"
        self.mnt = self.dir / "mnt"
        self.made = False
        self.spares = 0
        self.removed: list[Path] = []
        self.min_ops = 4
        self.plant_lost_cache = False
        # --reference nbdkit: the same runs over `nbdkit file` on one image the size of the
        # array (only write-through and the kill event make sense there).
        self.reference = False
        self.snapshot = False
        self.image = self.dir / "reference.img"
        self.min_block: int | None = None
        must([*RAIDLAB, "array", "create", str(self.arr), "--level", "raid5", "--disks", "4", "--size", f"{MEMBER_MIB[fs]}MiB"], 120)
        self.member_bytes = (self.arr / "disk0").stat().st_size

    def serve(self, extra: list[str]) -> Server:
        if self.reference:
            return self.rig.start_nbdkit(self.image)
        return self.rig.start_server(self.arr, extra)

    def new_spare(self) -> Path:
        self.spares += 1
        p = self.arr / f"spare-{self.spares}"
        with open(p, "wb") as f:
            f.truncate(self.member_bytes)
        return p

    def one_run(self, run_no: int, kill_window: tuple[float, float] = (0.6, 2.5)) -> None:
        c, rng = self.cell, self.rng
        tag = f"{self.fs}/{self.mode}/{self.event} run {run_no}"
        t0 = time.monotonic()
        extra = list(MODES[self.mode])
        if self.event == "rebuild":
            extra += ["--rebuild-max-kib", str(REBUILD_KIB)]
        if self.plant_lost_cache:
            extra += ["--thresholds", "99/98"]  # the cache keeps its newest 8 MiB
        # Phase A: serve, attach, mount, workload, event, SIGKILL.
        srv = self.serve(extra)
        att = self.rig.attach(srv.uri, f"{self.fs}-{self.mode}-{self.event}-{run_no}a")
        if not self.made:
            self.min_block = min_block_size(srv.uri)
            if self.fs.endswith("-defaults") and (self.min_block or 1) > 512:
                raise Skip(
                    f"the export advertises a minimum block size of {self.min_block} bytes and "
                    f"{MKFS[self.fs][0]} with its defaults writes 512-byte or 1 KiB blocks "
                    "(turns on once the store serves requests below 4 KiB)"
                )
            r = run([*MKFS[self.fs], att.loop], 300)
            if r.returncode != 0:
                raise RuntimeError(f"{tag}: {' '.join(MKFS[self.fs])} failed (exit {r.returncode}): {r.stderr.strip()}\n{srv.log()}")
            self.made = True
        m = self.rig.mount(att, self.mnt)
        if m.returncode != 0:
            raise RuntimeError(f"{tag}: mount failed (exit {m.returncode}): {m.stderr.strip()}")
        workers = []
        journals = []
        for w in range(2):
            prefix = f"r{run_no}w{w}"
            journal = self.dir / f"{prefix}.journal"
            journals.append((journal, prefix))
            workers.append(
                self.rig.spawn(
                    [sys.executable, __file__, "--workload", str(self.mnt / prefix), str(journal), str(self.seed * 1000 + run_no * 10 + w)],
                    self.dir / f"{prefix}.out",
                )
            )
        state_at_kill = ""

        def durable_ops() -> int:
            return sum(line.startswith("D ") for j, _ in journals if j.exists() for line in j.read_text().splitlines())

        try:
            # Each worker's setup is durable and a few operations are, however slow the
            # machine; the event and the kill then come at random moments.
            try:
                wait_for(lambda: durable_ops() >= 2 + self.min_ops, 60, "the workload's first operations", 0.02)
            except RuntimeError:
                pass  # the checks below still run; a run without operations checks little
            if self.event in ("fail", "rebuild"):
                time.sleep(rng.uniform(0.2, 0.8))
                slot = rng.randrange(4)
                failed = Path(status(self.arr)["members"][slot]["path"])
                ctl(self.arr, "fail", str(slot))
                # As an operator would (mdadm --fail, --remove): the failed device leaves
                # the manifest, and its file is deleted once the array no longer lists it.
                ctl(self.arr, "remove", str(slot))
                self.removed.append(failed if failed.is_absolute() else self.arr / failed.name)
                if self.event == "rebuild":
                    ctl(self.arr, "add-spare", str(self.new_spare()))
            time.sleep(rng.uniform(*kill_window))
            try:
                state_at_kill = "" if self.reference else status(self.arr)["state"]
            except (RuntimeError, ValueError):
                state_at_kill = "?"
        finally:
            self.rig.kill_server(srv)
            for p in workers:
                kill_group(p)
        c.kills += 1
        c.degraded_at_kill += state_at_kill == "degraded"
        c.rebuilding_at_kill += state_at_kill == "rebuilding"
        dead = [p.args for p in workers if p.poll() is None]
        left = self.rig.detach(att)
        if left or dead:
            raise RuntimeError(f"{tag}: teardown left {left} and workloads {dead}")
        for journal, prefix in journals:
            self.led.read_journal(journal, prefix)
        if self.snapshot:
            # The crash state as the kill left it (members and backup), before any recovery:
            # with --stop-on-problem it is kept beside the array for a look.
            snap = self.dir / "crash-state"
            shutil.rmtree(snap, ignore_errors=True)
            must(["cp", "-a", "--sparse=always", str(self.arr), str(snap)], 300)
            for journal, _prefix in journals:
                if journal.exists():
                    shutil.copy(journal, snap / journal.name)
        if self.plant_lost_cache:
            # A planted bug, to show the checks catch one: the store forgets its write
            # cache's backup at the crash, so writes it acknowledged are gone.
            for name in ("wb.json", "wb-mirror.img", "wb-log.img"):
                (self.arr / name).unlink(missing_ok=True)
        # Phase B: restart (replays the write cache's backup), recover, check.
        srv = self.serve(list(MODES[self.mode]))
        att = self.rig.attach(srv.uri, f"{self.fs}-{self.mode}-{self.event}-{run_no}b")
        ok = fsck_ext4(att.loop, tag, c) if base_fs(self.fs) == "ext4" else fsck_xfs(self.rig, att, self.mnt, tag, c)
        if ok:
            m = self.rig.mount(att, self.mnt)
            if m.returncode != 0:
                c.problems.append(f"{tag}: mount after recovery failed: {m.stderr.strip()}")
            else:
                chk = verify(self.mnt, self.led, tag)
                c.files += chk.files
                c.lost += chk.lost
                c.corrupt += chk.corrupt
                c.resurrected += chk.resurrected
                c.problems += chk.problems
                # Keep the file system from filling: the runs before the last two are dropped.
                for old in sorted(self.mnt.glob("r*w*")):
                    num = re.match(r"r(\d+)w\d+$", old.name)
                    if num and int(num.group(1)) < run_no - 1:
                        shutil.rmtree(old, ignore_errors=True)
                        for k in [k for k in self.led.durable if k.startswith(old.name + "/")]:
                            del self.led.durable[k]
                u = self.rig.umount(att)
                if u.returncode != 0:
                    c.problems.append(f"{tag}: umount failed: {u.stderr.strip()}")
        if not self.reference:
            self.repair(tag)
        left = self.rig.detach(att)
        rc = self.rig.stop_server(srv)
        if rc != 0:
            c.problems.append(f"{tag}: raidlab serve exited {rc} after SIGTERM\n{srv.log()[-2000:]}")
        listed = {(self.arr / p).resolve() for p in json.loads((self.arr / "members.json").read_text())["paths"]}
        for p in list(self.removed):
            if p.resolve() not in listed:
                p.unlink(missing_ok=True)
                self.removed.remove(p)
        if left:
            raise RuntimeError(f"{tag}: teardown left {left}")
        c.runs += 1
        c.ops = self.led.ops
        c.unconfirmed = self.led.unconfirmed
        c.unconfirmed_lost = self.led.unconfirmed_lost
        c.seconds += time.monotonic() - t0
        if not ok:
            raise RuntimeError(f"{tag}: the file system cannot be recovered; stopping this cell")

    def repair(self, tag: str) -> None:
        """Make the array whole again for the next run: a spare for a failed slot, the rebuild
        finished, the faulty devices forgotten; the resync done; ctl check must be clean."""
        c = self.cell
        st = status(self.arr)
        if st["rebuild"] is None and st["state"] == "degraded":
            ctl(self.arr, "add-spare", str(self.new_spare()))
        wait_for(lambda: (s := status(self.arr))["rebuild"] is None and s["state"] not in ("degraded", "rebuilding"), 300, "the rebuild", 0.2)
        wait_for(lambda: status(self.arr)["resync"]["pending_regions"] == 0, 120, "the resync", 0.1)
        rep = ctl(self.arr, "check", "--wait", timeout=300)
        if rep["mismatches"]:
            c.mismatched_rows += rep["mismatches"]
            c.problems.append(f"{tag}: ctl check found {rep['mismatches']} inconsistent rows")


def run_cell(
    base: Path,
    fs: str,
    mode: str,
    event: str,
    runs: int,
    seed: int,
    budget_s: float | None = None,
    log: Callable[[str], None] = lambda s: None,
    keep_none: bool = False,
    plant_lost_cache: bool = False,
    problem: Callable[[str], None] = lambda s: None,
    stop_on_problem: bool = False,
    reference: bool = False,
    snapshot: bool = False,
) -> Cell:
    """``runs`` kills of one cell in a rig of its own (at most ``budget_s`` seconds of runs);
    everything it made is removed (its files stay when it found a problem, unless
    ``keep_none``)."""
    preflight(fs)
    rig = Rig(Path(tempfile.mkdtemp(prefix=f"fs-{fs}-{mode}-{event}-", dir=base)))
    start = time.monotonic()
    runner = None
    try:
        runner = CellRunner(rig, fs, mode, event, seed, log)
        runner.plant_lost_cache = plant_lost_cache
        runner.snapshot = snapshot
        if reference:
            if (mode, event) != ("write-through", "kill"):
                raise ValueError("--reference nbdkit runs the write-through mode and the kill event only")
            runner.reference = True
            with open(runner.image, "wb") as fimg:
                fimg.truncate(3 * (runner.member_bytes - MiB))
        for k in range(1, runs + 1):
            if budget_s is not None and time.monotonic() - start > budget_s:
                break
            before = len(runner.cell.problems)
            runner.one_run(k)
            log(f"{fs}/{mode}/{event}: run {k}: {runner.cell.files} files checked so far, problems {len(runner.cell.problems)}")
            for p in runner.cell.problems[before : before + 20]:
                problem(p)
            if stop_on_problem and len(runner.cell.problems) > before:
                break
    except RuntimeError as e:
        if runner is None:
            raise
        runner.cell.problems.append(str(e)[:4000])
    finally:
        left = rig.close()
        # A cell that found a problem keeps its files (members, journals, server logs) for a
        # look; its mounts, loop devices and processes are gone all the same.
        keep = runner is not None and runner.cell.problems and not keep_none
        if not left and not keep:
            shutil.rmtree(rig.base, ignore_errors=True)
    if left:
        raise RuntimeError(f"could not remove {left} (under {rig.base})")
    assert runner is not None
    if keep:
        runner.cell.problems.append(f"files kept in {rig.base}")
    return runner.cell


def table(cells: list[Cell]) -> str:
    head = (
        "| fs | mode | event | runs (kills) | degraded / rebuilding at kill | fsync'd files checked | durable ops | "
        "dir fsync 0 after fs failure (change lost) | fsck clean / repaired / dirty | lost | corrupt | resurrected | inconsistent rows | s |"
    )
    lines = [head, "|" + " --- |" * 14]
    for c in cells:
        lines.append(
            f"| {c.fs} | {c.mode} | {c.event} | {c.runs} ({c.kills}) | {c.degraded_at_kill} / {c.rebuilding_at_kill} | {c.files:,} | {c.ops:,} | {c.unconfirmed} ({c.unconfirmed_lost}) | "
            f"{c.fsck_clean} / {c.fsck_repaired} / {c.fsck_dirty} | {c.lost} | {c.corrupt} | {c.resurrected} | {c.mismatched_rows} | {c.seconds:.0f} |"
        )
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) >= 2 and sys.argv[1] == "--workload":
        root, journal, seed = Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
        try:
            workload(root, journal, seed)
        except OSError as e:  # the server went away under the file system
            print(f"workload stopped: {e}", file=sys.stderr)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50, help="kills per cell")
    ap.add_argument("--fs", default="ext4,xfs")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--events", default=",".join(EVENTS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=None, help="stop starting runs in a cell after this many seconds")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--strict", action="store_true", help="exit 1 when the machine cannot run it")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--stop-on-problem", action="store_true", help="end a cell at its first problem (its files are kept)")
    ap.add_argument("--snapshot", action="store_true", help="copy each crash state before recovery (DIR/crash-state; kept with --stop-on-problem)")
    ap.add_argument("--reference", choices=["nbdkit"], default=None, help="control runs: serve with nbdkit file instead of raidlab")
    args = ap.parse_args()
    base = Path("/dev/shm") if os.path.isdir("/dev/shm") else Path(tempfile.gettempdir())
    cells: list[Cell] = []

    # SIGINT (even when started in the background, where it is ignored), SIGTERM and SIGHUP
    # unwind through the cleanup: no mount, loop device or process is left behind.
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)
    interrupted = False

    def say(s: str) -> None:
        if args.verbose:
            print(s, file=sys.stderr, flush=True)

    try:
        for fs in args.fs.split(","):
            for mode in args.modes.split(","):
                for event in args.events.split(","):
                    cell = run_cell(
                        base,
                        fs,
                        mode,
                        event,
                        args.runs,
                        args.seed,
                        args.budget_s,
                        say,
                        problem=lambda p: print(f"  problem: {p}", file=sys.stderr, flush=True),
                        stop_on_problem=args.stop_on_problem,
                        reference=args.reference is not None,
                        snapshot=args.snapshot,
                    )
                    cells.append(cell)
                    print(table([cell]).splitlines()[-1] + f" problems: {len(cell.problems)}", file=sys.stderr, flush=True)
    except Skip as e:
        print(f"fs_crash_soak: skipped: {e}", file=sys.stderr)
        return 1 if args.strict else 0
    except KeyboardInterrupt as e:
        print(f"fs_crash_soak: interrupted ({e}); the cells finished so far:", file=sys.stderr)
        interrupted = True
    if args.json:
        print(json.dumps([c.row() for c in cells], indent=1))
    else:
        print(table(cells))
        for c in cells:
            for p in c.problems[:10]:
                print(f"  {c.fs}/{c.mode}/{c.event}: {p}")
    if interrupted:
        return 130
    return 0 if all(c.ok for c in cells) else 1


if __name__ == "__main__":
    sys.exit(main())
