"""``raidlab reproduce NAME --store``: an experiment's cells on a served array with disk-timed
members, beside the simulator's prediction of the very same set-up.

An experiment file opts in with a ``[report.store]`` table:

.. code-block:: toml

    [report.store]
    where = { "array.disks" = 3, "workload.synthetic.mean_interarrival_ms" = 2.65 }  # which runs
    seeds = [1, 2, 3]                      # run.seed values kept
    member_mib = 256                       # bytes per member of the served array
    set = { "rebuild.extent_gib" = 0.25, "workload.synthetic.space_gib" = 0.5, "run.duration_s" = 60 }
    values = ["rebuild_s", "during_latency_mean_ms"]   # the metrics the store reports
    workers = 32                           # NBD connections of the replay (requests in flight at most, up to 1024)

Each kept run, with ``set`` applied (the scaling, stated in the file), is one *cell*. The cell
runs twice:

- **store**: ``raidlab array create`` (``member_mib`` per member, no spare), ``raidlab serve``
  with ``--timing PRESET,scheduler=QUEUE`` from ``[disk]``, the read cache, rebuild order
  and write-back cache the config names; a replay at the timed run's own arrivals
  (``raidlab replay --schedule``: the core's arrival schedule, same seed); the config's
  ``[[events]]`` sent as control commands at their times (``fail = d`` as ``ctl fail d``,
  ``rebuild = d`` as ``ctl add-spare``, which starts the rebuild; ``array.failed`` before the
  replay); the rebuild's end seen by polling ``ctl status`` every 0.1 s;
- **simulator**: :func:`raidlab.run` of the same scaled config (timed mode).

Both give the metrics of timed mode's names (``rebuild_s``, ``during_latency_mean_ms``,
``latency_mean_ms``, a ramp's ``iops_at_20ms``), so the report code reads both. The report
(``OUT/NAME-store/``) has one section per driver, the per-cell store-vs-simulator table, and
a ``claims.json`` whose rows carry ``driver`` (``store`` or ``store-sim``) for the scoreboard.
"""

from __future__ import annotations

import copy
import csv
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from raidlab import _core, api, wcache
from raidlab.report import Section, write_report

MiB = 1 << 20
# The rebuild's end is seen by polling `ctl status` this often (its resolution).
POLL_S = 0.1
# A cell gives up waiting for its server or its rebuild after this long.
READY_TIMEOUT_S = 60.0
REBUILD_TIMEOUT_S = 1800.0
# `serve --workers` of a store cell at least (a request holds its worker while its members
# sleep out their model time); a cell whose replay keeps more requests in flight gets one
# worker per connection, so every request the replay sends is in the array at once, as in
# the simulator's open loop.
SERVE_WORKERS = 64
# The drivers a claims.json row can name.
STORE = "store"
STORE_SIM = "store-sim"
STORE_SIM_MATCHED = "store-sim-matched"


def _with(tree: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    t = copy.deepcopy(tree)
    for k, v in overrides.items():
        _set(t, k, v)
    return t


def measured_cells(path: Path) -> list[dict[str, Any]]:
    """The store rows of an earlier ``cells.csv``."""
    import pandas as pd

    if not path.exists():
        return []
    frame = pd.read_csv(path)
    rows = frame[frame["driver"] == STORE].to_dict("records")
    return [{k: v for k, v in r.items() if not (isinstance(v, float) and math.isnan(v))} for r in rows]


def measured_before(done: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """The row of ``done`` that measured this very cell (the same config)."""
    return next((r for r in done if r.get("cell_config") == key), None)


def _error(msg: str, key: str) -> _core.ConfigError:
    err = _core.ConfigError(msg)
    err.key = key
    return err


def _get(tree: dict[str, Any], dotted: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def cells(trees: list[dict[str, Any]], store: dict[str, Any], file: Path) -> list[dict[str, Any]]:
    """The runs ``[report.store]`` keeps, each with ``set`` applied."""
    where = store.get("where", {})
    seeds = store.get("seeds")
    out = []
    for tree in trees:
        # A list in `where` keeps any of its values.
        if any(_get(tree, k) not in (v if isinstance(v, list) else [v]) for k, v in where.items()):
            continue
        if seeds is not None and _get(tree, "run.seed") not in seeds:
            continue
        t = copy.deepcopy(tree)
        for k, v in store.get("set", {}).items():
            _set(t, k, v)
        out.append(t)
    if not out:
        raise _error(f"{file}: report.store.where keeps no run", "report.store.where")
    return out


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("raidlab")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "raidlab.cli"]


def _mib_arg(nbytes: int) -> str:
    return f"{max(1, nbytes // 1024)}KiB"


def serve_args(tree: dict[str, Any], cell_dir: Path | None = None, connections: int = 32) -> list[str]:
    """The ``raidlab serve`` options that run ``tree``'s policies on the store (``cell_dir``:
    the cell's scratch directory, where a RAPID backup's NVRAM file goes; ``connections``:
    the replay's, each with one request in flight)."""
    disk = tree.get("disk", {})
    preset = disk.get("preset")
    if preset is None:
        raise _error(f"{tree.get('name')}: the store cell needs [disk] preset", "disk.preset")
    # NBD workers: a request holds its worker while its members sleep out their model time,
    # so the default (twice the cores, for memory-speed members) would cap the requests the
    # array serves at once far below what the disks can queue.
    workers = max(SERVE_WORKERS, connections)
    args = ["--timing", f"{preset},scheduler={disk.get('queue', 'fcfs')}", "--workers", str(workers)]
    args += ["--max-connections", str(max(128, connections + 16))]
    cache = tree.get("cache", {})
    bs = int(tree.get("workload", {}).get("block_size", 4096))
    if cache.get("capacity_blocks", 0) > 1:
        args += ["--cache", str(cache["policy"]), "--cache-mib", _mib_arg(int(cache["capacity_blocks"]) * bs)]
    rebuild = tree.get("rebuild")
    if rebuild:
        args += ["--rebuild-order", str(rebuild.get("order", "sequential"))]
        if rebuild.get("rate", "full") != "full":
            raise _error(f"{tree.get('name')}: the store cell runs rebuilds at full rate only", "rebuild.rate")
        executor = rebuild.get("executor", "dor")
        if executor != "dor":
            raise _error(f"{tree.get('name')}: the store cell runs executor = \"dor\" only, got {executor!r}", "rebuild.executor")
        # The simulator's DOR state machine drives the store's rebuild with the experiment's
        # buffers and depth; its readers merge up to `read_units` units (whole chunks, 4 KiB
        # to 1 MiB).
        unit = int(tree.get("array", {}).get("stripe_unit", 65536))
        kib = min(1024, max(4, int(rebuild.get("read_units", 1)) * unit // 1024))
        dor = f"dor,buffers={int(rebuild.get('buffers', 64))},depth={int(rebuild.get('depth', 2))}"
        args += ["--rebuild-executor", dor, "--rebuild-run-kib", str(kib)]
    wc = tree.get("write_cache")
    if wc:
        args += ["--write-cache-mib", _mib_arg(int(wc["capacity_pages"]) * bs)]
        args += ["--destage", str(wc.get("order", "stow"))]
        rate = wc.get("rate", "linear")
        if rate != "linear":
            raise _error(f"{tree.get('name')}: the store destages at the linear rate only (set write_cache.rate)", "write_cache.rate")
        args += ["--thresholds", f"{int(wc.get('high', 80))}/{int(wc.get('low', 20))}"]
        if "max_destages" in wc:
            args += ["--max-destages", str(int(wc["max_destages"]))]
        backup = tree.get("backup", {}).get("kind", "dual")
        if backup == "dual":
            args += ["--backup", "mirror"]
        elif backup == "rapid":
            b = tree["backup"]
            args += ["--backup", "log", "--log-mode", "logical" if b.get("cache_disk") == "logical" else "physical"]
            # RAPID's segment buffers: an NVRAM file in the cell's scratch directory (tmpfs
            # when there is one), one slot per buffer, segments of the buffers' size.
            args += ["--segment", f"{int(b.get('segment_kib', 128))}KiB"]
            # The cache disk's space, as the simulator's RAPID has it (its default too): the
            # log laps only as often as the model's does. The store's own default (4x the
            # cache) made a 16 MiB cache's log lap within a 15 s cell, which the model's
            # 256 MiB never did.
            args += ["--log-size", f"{int(b.get('disk_mib', 256))}MiB"]
            if cell_dir is None:
                raise _error(f"{tree.get('name')}: a RAPID backup needs the cell's directory for its NVRAM", "backup.kind")
            args += ["--log-nvram", str(cell_dir / "nvram"), "--log-nvram-slots", str(int(b.get("segment_buffers", 4)))]
        else:
            raise _error(f"{tree.get('name')}: backup kind {backup!r} has no store counterpart", "backup.kind")
    return args


class Cell:
    """One served array in a scratch directory (tmpfs when there is one): created, served,
    stopped, removed."""

    def __init__(self, tree: dict[str, Any], member_mib: int, scratch: Path, connections: int = 32) -> None:
        self.tree = tree
        self.connections = connections
        self.dir = Path(tempfile.mkdtemp(prefix="storexp-", dir=scratch))
        self.arr = self.dir / "arr"
        self.sock = self.dir / "nbd.sock"
        self.member_mib = member_mib
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> "Cell":
        a = self.tree["array"]
        cmd = [*_cli(), "array", "create", str(self.arr), "--level", str(a.get("level", "raid5")), "--disks", str(a["disks"])]
        cmd += ["--chunk", f"{int(a.get('stripe_unit', 65536)) // 1024}KiB", "--size", f"{self.member_mib}MiB"]
        if a.get("layout"):
            cmd += ["--layout", str(a["layout"])]
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
        cmd = [*_cli(), "serve", str(self.arr), "--listen", f"unix:{self.sock}", *serve_args(self.tree, self.dir, self.connections)]
        self.log = open(self.dir / "serve.log", "w")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True)
        line = _readline(self.proc, READY_TIMEOUT_S)
        if not line:
            self.close()
            raise _core.StoreError(f"raidlab serve did not start: {(self.dir / 'serve.log').read_text()[-2000:]}")
        return self

    @property
    def uri(self) -> str:
        return f"nbd+unix:///?socket={self.sock}"

    def ctl(self, req: dict[str, Any]) -> dict[str, Any]:
        reply: dict[str, Any] = json.loads(_core.ctl_request(str(self.arr), json.dumps(req)))
        if not reply.get("ok"):
            raise _core.StoreError(f"ctl {req}: {reply.get('error')}")
        return reply

    def status(self) -> dict[str, Any]:
        return self.ctl({"cmd": "status"})

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            # The scratch array is thrown away: no clean stop (which would destage a full
            # write cache through the timed members first).
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        if hasattr(self, "log"):
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __exit__(self, *exc: object) -> None:
        self.close()


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    t.start()
    t.join(timeout)
    return box[0] if box else ""


def _latency(ms: list[float], prefix: str) -> dict[str, float]:
    if not ms:
        return {f"{prefix}_mean_ms": math.nan, f"{prefix}_p99_ms": math.nan, f"{prefix}_count": 0}
    s = sorted(ms)
    return {
        f"{prefix}_mean_ms": sum(s) / len(s),
        f"{prefix}_p99_ms": s[min(len(s) - 1, round((len(s) - 1) * 0.99))],
        f"{prefix}_count": len(s),
    }


def run_store(tree: dict[str, Any], member_mib: int, workers: int, scratch: Path, keep_log: Path | None = None) -> dict[str, Any]:
    """Run one cell on the store; metrics named as timed mode names them. ``keep_log``: where
    to keep the replay's per-request log."""
    events = sorted(tree.get("events", []), key=lambda e: float(e.get("at_s", 0)))
    for e in events:
        if "fail_cache" in e:
            raise _error(f"{tree.get('name')}: fail_cache events have no store counterpart yet", "events.fail_cache")
    wall0 = time.monotonic()
    with Cell(tree, member_mib, scratch, workers) as cell:
        for d in tree.get("array", {}).get("failed", []):
            cell.ctl({"cmd": "fail", "slot": int(d)})
        log = cell.dir / "requests.csv"
        box: dict[str, Any] = {}

        def replay() -> None:
            try:
                box["out"] = json.loads(_core.replay(cell.uri, json.dumps(tree), None, os.getcwd(), qd=workers, schedule=True, log=str(log)))
            except BaseException as e:  # re-raised on the main thread
                box["err"] = e

        t0_unix = time.time()
        th = threading.Thread(target=replay, daemon=True)
        th.start()
        marks: dict[str, float] = {}
        locks_at_start: dict[str, Any] = {}
        spare = 0
        for e in events:
            due = t0_unix + float(e.get("at_s", 0))
            while time.time() < due and th.is_alive():
                time.sleep(min(0.05, max(0.0, due - time.time())))
            if "fail" in e:
                cell.ctl({"cmd": "fail", "slot": int(e["fail"])})
                marks.setdefault("fail", time.time())
            if "rebuild" in e:
                path = cell.arr / f"spare{spare}"
                spare += 1
                # A new device as large as a member (add-spare allocates it in full).
                with open(path, "wb") as f:
                    f.truncate((cell.arr / "disk0").stat().st_size)
                locks_at_start = cell.status().get("row_locks") or {}
                cell.ctl({"cmd": "add-spare", "path": str(path)})
                marks.setdefault("rebuild_start", time.time())
        status_end: dict[str, Any] | None = None
        if "rebuild_start" in marks:
            deadline = time.monotonic() + REBUILD_TIMEOUT_S
            while time.monotonic() < deadline:
                st = cell.status()
                if st["rebuild"] is None and st["state"] not in ("rebuilding", "degraded") and st.get("last_rebuild"):
                    marks["rebuild_end"] = time.time()
                    status_end = st
                    break
                time.sleep(POLL_S)
        th.join(timeout=REBUILD_TIMEOUT_S)
        if "err" in box:
            raise box["err"]
        out = box["out"]
        final = cell.status()
        rows = list(csv.DictReader(log.open()))
        if keep_log is not None:
            keep_log.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, keep_log)
    m: dict[str, Any] = {"driver": STORE, "store_wall_s": time.monotonic() - wall0}
    lat = out["latency"] or {}
    m["latency_mean_ms"] = lat.get("mean_ms", math.nan)
    m["latency_p99_ms"] = lat.get("p99_ms", math.nan)
    for k in ("read", "write"):
        m[f"{k}_latency_mean_ms"] = (out[f"{k}_latency"] or {}).get("mean_ms", math.nan)
    m["iops"] = out["iops"]
    m["completed"] = out["completed"]
    m["errors"] = out["errors"]
    m["late"] = out["late"]
    # The replay's clock starts once its connections are open; the events were sent on the
    # wall clock and are placed in the replay's frame by its start.
    start_unix = float(out["started_unix_s"])
    m["store_start_lag_s"] = start_unix - t0_unix
    first = min((marks[k] for k in ("fail", "rebuild_start") if k in marks), default=None)
    if first is not None:
        # Before the first event: the simulator's `before_latency_*`, which, like the rebuild's
        # `during_latency_*`, covers the warm-up too.
        cut = first - start_unix
        before = [int(r["latency_ns"]) / 1e6 for r in rows if int(r["arrival_ns"]) / 1e9 < cut]
        m.update(_latency(before, "before_latency"))
    if "rebuild_end" in marks:
        a, b = marks["rebuild_start"] - start_unix, marks["rebuild_end"] - start_unix
        m["rebuild_s"] = b - a
        m["rebuild_done"] = True
        during = [int(r["latency_ns"]) / 1e6 for r in rows if a <= int(r["arrival_ns"]) / 1e9 < b]
        m.update(_latency(during, "during_latency"))
        util = [mm["timing"]["utilization"] for mm in (status_end or final)["members"] if mm.get("timing")]
        m["store_util_mean"] = sum(util) / len(util) if util else math.nan
        # Rows the disk-oriented rebuild read twice: a user write fell between a job's reads.
        m["rebuild_rows_reread"] = ((status_end or final).get("last_rebuild") or {}).get("rows_reread", 0)
        # Row-lock waits while the rebuild ran: shared ones are degraded reads and the
        # rebuild's own writes waiting for users' writes; the rest are users' writes waiting.
        end_locks = (status_end or final).get("row_locks") or {}
        for k in ("waits", "wait_ms", "shared_waits", "shared_wait_ms"):
            m[f"store_rebuild_row_lock_{k}"] = end_locks.get(k, 0) - locks_at_start.get(k, 0)
    elif "rebuild_start" in marks:
        m["rebuild_done"] = False
    timed = [mm["timing"] for mm in final["members"] if mm.get("timing")]
    # What the members did, per priority class (foreground, destage, rebuild, background),
    # and the write cache's destages: the evidence for the causes in docs/reproductions.md.
    for c, label in enumerate(("fg", "destage", "rebuild", "background")):
        m[f"store_{label}_ops"] = sum(t["class_ops"][c] for t in timed)
    m["store_util_end_mean"] = sum(t["utilization"] for t in timed) / len(timed) if timed else math.nan
    m["store_service_us_mean"] = sum(t["service_us_mean"] for t in timed) / len(timed) if timed else math.nan
    m["store_wait_us_mean"] = sum(t["wait_us_mean"] for t in timed) / len(timed) if timed else math.nan
    # Requests that waited for a stripe row another held (the timed engine has no row locks).
    locks = final.get("row_locks") or {}
    m["store_row_lock_waits"] = locks.get("waits", 0)
    m["store_row_lock_wait_ms"] = locks.get("wait_ms", 0.0)
    m["store_row_lock_shared_waits"] = locks.get("shared_waits", 0)
    m["store_row_lock_shared_wait_ms"] = locks.get("shared_wait_ms", 0.0)
    wc = final.get("write_cache") or {}
    # The cells inject no cache failure (a `fail_cache` event is refused), so a backup that is
    # not in use at the end was lost by the store itself: the cell measured write-through
    # time, not the set-up. Refused rather than reported.
    state = (wc.get("mode") or {}).get("state", "backed") if wc.get("backup") not in (None, "none") else "backed"
    if state != "backed":
        raise _error(
            f"the store's write-cache backup was lost during the cell ({wc['mode'].get('why', state)}); its numbers would be write-through time",
            "write_cache",
        )
    m["store_write_through_pages"] = wc.get("write_through_pages", 0)
    for k in ("destages", "full_stripe_destages", "destaged_pages"):
        if k in wc:
            m[f"store_{k}"] = wc[k]
    # The backup's own traffic: a log's segments drained from NVRAM, the writes that waited
    # for a slot, its released images, the release entries naming them, and the voids
    # written in place instead (those that cost a member write).
    bs = wc.get("backup_stats") or {}
    for k in ("commits", "nvram_stalls", "nvram_drained", "images_released", "release_entries",
              "image_void_leg_writes"):
        if k in bs:
            m[f"store_backup_{k}"] = bs[k]
    # Write-intent bitmap writes (each a write of every member's bitmap): member operations
    # the simulator does not model.
    rw = final.get("row_writes") or {}
    for k in ("rows", "member_ops"):
        if k in rw:
            m[f"store_row_write_{k}"] = rw[k]
    resync = final.get("resync") or {}
    for k in ("bitmap_set_writes", "bitmap_clear_writes"):
        if k in resync:
            m[f"store_{k}"] = resync[k]
    late = [mm["timing"]["late_us_mean"] for mm in final["members"] if mm.get("timing")]
    m["store_late_us_mean"] = sum(late) / len(late) if late else math.nan
    ramp = [
        {"target_iops": r["level_iops"], "iops": r["iops"], "mean_ms": r["latency_mean_ms"] if r["latency_mean_ms"] is not None else math.nan, "saturated": r["saturated"]}
        for r in out["ramp"]
    ]
    if ramp:
        m["ramp"] = ramp
    return m


def run_sim(tree: dict[str, Any]) -> dict[str, Any]:
    """The simulator's prediction of the same scaled cell (timed mode)."""
    r = api.run(tree, threads=1).runs[0]
    m = {"driver": STORE_SIM, **{k: v for k, v in r.metrics.items() if isinstance(v, (int, float, str, bool))}}
    if r.ramp:
        m["ramp"] = [{"target_iops": p["target_iops"], "iops": p["iops"], "mean_ms": p["mean_ms"], "saturated": p["saturated"]} for p in r.ramp]
    return m


def ramp_metrics(m: dict[str, Any], spec: dict[str, Any], tree: dict[str, Any]) -> None:
    """A ramp cell's ``iops_at_<ms>ms`` and ``ms_at_load``, as :func:`raidlab.wcache.augment`
    computes them (from the levels alone, for both drivers)."""
    ramp = m.pop("ramp", None)
    if ramp is None:
        return
    if "ramp_at_ms" in spec:
        ms = float(spec["ramp_at_ms"])
        m[f"iops_at_{ms:g}ms"] = wcache.iops_at(ramp, ms)
    if "ramp_ms_at" in spec:
        target = _get(tree, spec["ramp_ms_at"])
        m["ms_at_load"] = wcache.ms_at_load(ramp, float(target)) if target is not None else math.nan
    m["ramp_levels"] = json.dumps(ramp)


def _scratch() -> Path:
    env = os.environ.get("RAIDLAB_STORE_SCRATCH")
    if env:
        return Path(env)
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


def reproduce_store(plan: Any, name: str, out_dir: Path, console: Console) -> Path:
    """Run the store cells of one experiment file (a :class:`raidlab.reproduce.Plan`) and
    write ``out_dir/NAME-store/report.html`` and its ``claims.json``."""
    import pandas as pd

    spec = plan.spec
    store = spec.get("store")
    if not store:
        raise _error(f"{plan.file}: no [report.store] table: the experiment has no store cells", "report.store")
    member_mib = int(store.get("member_mib", 256))
    workers = int(store.get("workers", 32))
    scratch = _scratch()
    dest = out_dir / f"{name}-store"
    dest.mkdir(parents=True, exist_ok=True)
    done = measured_cells(dest / "cells.csv")
    rows: list[dict[str, Any]] = []
    todo = cells(plan.trees, store, plan.file)
    matched = store.get("matched")
    drivers = [STORE_SIM, *([STORE_SIM_MATCHED] if matched else []), STORE]
    for i, tree in enumerate(todo):
        flat = api.flatten({k: v for k, v in tree.items() if k not in ("events", "name")})
        # What the cell computes: the config without its labels and presentation, and the
        # options the store is served with (how the config maps onto the store can change).
        config = {k: v for k, v in tree.items() if k not in ("name", "report")}
        key = json.dumps({**config, "serve": serve_args(tree, Path("cell"), workers)}, sort_keys=True)
        for driver in drivers:
            t = time.monotonic()
            before = measured_before(done, key) if driver == STORE else None
            if before is not None:
                # Measured before with this very config: the store's cells are the expensive
                # part, and an interrupted run resumes (the simulator's are re-run).
                rows.append(before)
                console.print(f"[{i + 1}/{len(todo)}] {tree['name']} seed {_get(tree, 'run.seed')} store: measured before", highlight=False)
                continue
            if driver == STORE_SIM:
                m = run_sim(tree)
            elif driver == STORE_SIM_MATCHED:
                m = run_sim(_with(tree, matched))
                m["driver"] = STORE_SIM_MATCHED
            else:
                seed = _get(tree, "run.seed")
                m = run_store(tree, member_mib, workers, scratch, dest / "requests" / f"cell{i + 1}-seed{seed}.csv")
            ramp_metrics(m, spec, tree)
            wall = time.monotonic() - t
            console.print(
                f"[{i + 1}/{len(todo)}] {tree['name']} seed {_get(tree, 'run.seed')} {driver}: "
                + ", ".join(f"{v} {m.get(v, math.nan):.4g}" for v in store.get("values", []))
                + f" ({wall:.0f} s)",
                highlight=False,
            )
            rows.append({"name": tree["name"], **flat, **m, "wall_s": wall, "cell_config": key})
            # After every cell, so an interrupted run keeps what it measured.
            pd.DataFrame(rows).to_csv(dest / "cells.csv", index=False)
    frame = pd.DataFrame(rows)
    frame.to_csv(dest / "cells.csv", index=False)
    sections = []
    values = store.get("values") or spec.get("values") or [spec.get("value")]
    betters = spec.get("better", "lower")
    better_of = dict(zip(spec.get("values", []), betters)) if isinstance(betters, list) else {}
    base = {k: v for k, v in spec.items() if k not in ("values", "value", "better", "series", "store", "plot_x")}
    base["values"] = values
    base["better"] = [better_of.get(v, betters if isinstance(betters, str) else "lower") for v in values]
    present = set(frame[spec["columns"]]) if spec.get("columns") in frame.columns else set()
    base["compare"] = [p for p in spec.get("compare", []) if set(p) <= present]
    extra = [comparison_html(frame, spec, values)]
    titles = [
        (STORE, "store (disk-timed members, real time)"),
        (STORE_SIM, "simulator, the store's set-up"),
        (STORE_SIM_MATCHED, "simulator, the store's set-up with the store's own mechanisms (report.store.matched)"),
    ]
    for driver, title in titles:
        if driver not in set(frame["driver"]):
            continue
        sub = frame[frame["driver"] == driver].reset_index(drop=True)
        s = {**base, "title": f"{spec.get('title', plan.file.stem)}: {title}", "driver": driver}
        sections.append(Section(plan.file, s, sub, [], None, extra if driver == STORE else []))
    return write_report(f"{name}-store", sections, dest, console)


def comparison_html(frame: Any, spec: dict[str, Any], values: list[str]) -> str:
    """Per cell and metric: the store's mean over seeds, the simulator's predictions, and the
    store's difference from each, relative to the prediction."""
    import html

    keys = [k for k in [*spec.get("rows", []), spec.get("columns")] if k and k in frame.columns]
    body = []
    for v in values:
        if v not in frame.columns:
            continue
        t = frame.pivot_table(index=keys, columns="driver", values=v, aggfunc="mean")
        if STORE not in t:
            continue
        shown = t.map(lambda x: f"{x:.4g}")
        for sim in (STORE_SIM, STORE_SIM_MATCHED):
            if sim in t:
                shown[f"store vs {sim}"] = [f"{x:+.1%}" for x in (t[STORE] - t[sim]) / t[sim]]
        body.append(f"<h3>{html.escape(v)}: store vs the simulator's predictions (mean over seeds)</h3>" + shown.to_html())
    return "".join(body)
