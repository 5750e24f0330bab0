"""Sweeps: every run of a config on a process pool or a Dask cluster, into a result store.

``raidlab.sweep(config, executor=None, out="results")`` expands the config (``[[runs]]``,
``[sweep]``, ``[[sweep.zip]]``; the Rust core validates every run before any starts), skips
the runs whose result is already in ``out`` (see :mod:`raidlab.store`), runs the others and
returns one row per run as a DataFrame.

A run is recognised by its id: a hash of its merged config (keys sorted, integral floats as
integers, without its ``name`` and the ``report`` table) and the raidlab version. Workers get
the config (a few hundred bytes) and read traces from their path themselves; results go
from the worker straight to the store. A failed run's error is stored and the sweep goes on,
unless ``fail_fast``.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import os
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from raidlab import _core, api, store

# progress(done, running, failed, total); done counts runs already in the store.
SweepProgressFn = Callable[[int, int, int, int], None]
# Tasks kept in flight per worker: one running, one queued so a worker never waits for the
# main process between tiny runs.
IN_FLIGHT_PER_WORKER = 2
# How often the main loop wakes to report progress when no run finishes.
TICK_S = 0.2
# A local pool whose worker died (killed, out of memory) is replaced at most this often.
POOL_RESTARTS_MAX = 5
# Seconds to wait for a Dask scheduler before giving up.
SCHEDULER_TIMEOUT_S = 3


class SchedulerError(_core.RaidlabError):
    """The Dask scheduler cannot be reached; ``address`` names it."""

    address: str


class RunError(_core.RaidlabError):
    """A run failed for a reason other than its input (a worker died, a result could not be
    written)."""


_ERRORS: dict[str, type[_core.RaidlabError]] = {
    c.__name__: c
    for c in (_core.ConfigError, _core.TraceError, _core.FormatError, _core.RaidlabIOError, RunError)
}


@dataclass(frozen=True)
class Task:
    """One run to do: small enough to send to any worker."""

    run_id: str
    name: str
    config: str  # JSON of the merged config, with its name
    base_dir: str  # where relative trace paths resolve
    experiment: str = ""  # the experiment file's name without .toml ("" for a dict)

    @property
    def tree(self) -> dict[str, Any]:
        return json.loads(self.config)


def run_id(tree: Mapping[str, Any]) -> str:
    """The stable id of a run: 16 hex digits of SHA-256 over its canonical config."""
    identity = {k: v for k, v in tree.items() if k not in store.NOT_IDENTITY}
    text = store.canonical_json({"config": identity, "raidlab": _core.__version__})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def tasks(trees: Iterable[tuple[str, dict[str, Any]]], base_dir: str, experiment: str = "") -> list[Task]:
    """Tasks of (name, merged config) pairs; a run that appears twice is done once."""
    out: dict[str, Task] = {}
    for name, tree in trees:
        tree = {**tree, "name": name}
        rid = run_id(tree)
        out.setdefault(rid, Task(rid, name, json.dumps(tree), base_dir, experiment))
    return list(out.values())


def plan(config: api.Config, overrides: Mapping[str, Any] | None = None) -> list[Task]:
    """Validate ``config`` (with ``overrides``, dotted key -> value, applied to every run
    last) and return its runs as tasks, in config order."""
    text, file, base = api._source(config)
    runs = _core.load_config(text, file, base, api.nest(overrides))
    experiment = Path(file).stem if file else ""
    return tasks(((name, json.loads(tree)) for name, tree in runs), base or os.getcwd(), experiment)


# ---- the worker side ---------------------------------------------------------------------


def execute(task: Task, out: str, workload_thread: bool = False) -> tuple[str, str, str, dict[str, Any]]:
    """Run one task and store its result. Returns ``(status, error kind, message,
    attributes)``; errors are returned as data because the core's exception classes do not
    cross process boundaries. ``workload_thread``: draw the run's workload on a thread of
    its own (the pool says whether its workers leave a core for one)."""
    try:
        (_, metrics, resolved, err), *_ = _core.run(
            task.config, None, task.base_dir, 1, None, workload_thread=workload_thread
        )
        if err is not None:
            raise err
        store.write_run(
            Path(out),
            task.run_id,
            task.name,
            task.tree,
            json.loads(metrics),
            resolved=json.loads(resolved),
            experiment=task.experiment,
        )
        return ("done", "", "", {})
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - a panic surfaces as a BaseException
        kind = type(e).__name__
        if not isinstance(e, _core.RaidlabError):
            kind, msg = "RunError", f"{type(e).__name__}: {e}"
        else:
            msg = str(e)
        attrs = {a: getattr(e, a) for a in ("file", "line", "key") if hasattr(e, a)}
        return ("failed", kind, msg, attrs)


def _watch_parent() -> None:
    """Pool worker initializer: exit when the sweep process is gone (a killed sweep must not
    leave workers behind), and leave Ctrl-C to the sweep process."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.25)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="raidlab-parent-watch").start()


# ---- executors ---------------------------------------------------------------------------


def default_workers() -> int:
    """The cores this process may use (CPU affinity and any CPU quota, as the core counts
    them): one worker each."""
    return int(_core.cores())


def _is_dask_client(x: Any) -> bool:
    return type(x).__module__.startswith("distributed") and hasattr(x, "scheduler_info")


def connect_scheduler(address: str) -> Any:
    """A Dask client of the scheduler at ``address``; a typed error within seconds if it
    cannot be reached."""
    import asyncio  # here, not at the top: it costs every `import raidlab` ~20 ms

    from distributed import Client
    from distributed.comm import parse_address
    from distributed.comm.registry import get_backend

    def fail(why: object) -> SchedulerError:
        err = SchedulerError(f"{address}: cannot reach the Dask scheduler: {why}")
        err.address = address
        return err

    try:
        scheme, location = parse_address(address)
        get_backend(scheme)
    except ValueError as e:
        # Checked before Client(): a client that never connected hangs in its finalizer.
        raise fail(e) from None
    if not location:
        raise fail("expected an address like tcp://host:8786")
    # A handshake first, on its own loop and thread (callers may run an event loop): a Client
    # that fails to connect, or meets something that is not a scheduler, hangs in its
    # finalizer for twice its timeout.
    try:
        with cf.ThreadPoolExecutor(1) as probe:
            probe.submit(asyncio.run, _handshake(address)).result()
    except Exception as e:  # noqa: BLE001 - whatever answered, it is not a usable scheduler
        raise fail(e) from None
    try:
        return Client(address, timeout=f"{SCHEDULER_TIMEOUT_S}s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise fail(e) from None


async def _handshake(address: str) -> None:
    from distributed.comm import connect

    comm = await connect(address, timeout=SCHEDULER_TIMEOUT_S)
    await comm.close()


class Pool:
    """The executor of a sweep: a local process pool it owns, or a caller's executor
    (``concurrent.futures.Executor`` or ``distributed.Client``) it only submits to."""

    def __init__(self, executor: Any, workers: int | None) -> None:
        # Each run draws its workload on a thread of its own only in a local pool that
        # leaves a core per worker for it; a cluster's cores are taken to be busy.
        self.workload_thread = False
        self.owned_client = False
        self.local_workers = 0
        self.restarts = 0
        if executor is None or isinstance(executor, int):
            n = executor if executor is not None else workers
            if n is not None and n < 1:
                raise ValueError(f"workers: expected a positive count, got {n}")
            self.local_workers = n or default_workers()
            self.executor: Any = self._local()
            self.workers = self.local_workers
            self.workload_thread = bool(_core.spare_cores(self.local_workers))
        elif isinstance(executor, str):
            self.executor = connect_scheduler(executor)
            self.owned_client = True
            self.workers = self._dask_threads()
        elif _is_dask_client(executor):
            self.executor = executor
            self.workers = self._dask_threads()
        elif isinstance(executor, cf.Executor):
            self.executor = executor
            self.workers = max(1, workers or getattr(executor, "_max_workers", 0) or default_workers())
        else:
            raise TypeError(f"executor: expected None, a worker count, a scheduler address, an Executor or a dask Client, got {executor!r}")

    def _local(self) -> cf.ProcessPoolExecutor:
        import multiprocessing

        # spawn: workers start clean (no copied threads or locks) on every platform.
        ctx = multiprocessing.get_context("spawn")
        return cf.ProcessPoolExecutor(self.local_workers, mp_context=ctx, initializer=_watch_parent)

    def _dask_threads(self) -> int:
        """Worker threads of the cluster now (an adaptive cluster's later growth is not seen)."""
        try:
            info = self.executor.scheduler_info(n_workers=-1)  # some versions list 5 by default
        except TypeError:  # versions without the argument list every worker
            info = self.executor.scheduler_info()
        return max(1, sum(w.get("nthreads", 1) for w in info.get("workers", {}).values()))

    @property
    def slots(self) -> int:
        return self.workers * IN_FLIGHT_PER_WORKER

    def submit(self, task: Task, out: str) -> Any:
        if _is_dask_client(self.executor):
            return self.executor.submit(execute, task, out, self.workload_thread, pure=False)
        return self.executor.submit(execute, task, out, self.workload_thread)

    def restart(self) -> bool:
        """Replace a broken local pool; False when it is not ours or restarted too often."""
        if not self.local_workers or self.restarts >= POOL_RESTARTS_MAX:
            return False
        self.restarts += 1
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.executor = self._local()
        return True

    def close(self, abort: bool = False) -> None:
        if self.local_workers:
            if abort:
                # Do not wait for runs in flight: their files are written atomically, and the
                # next sweep does them again.
                for p in list(getattr(self.executor, "_processes", {}).values()):
                    p.terminate()
            self.executor.shutdown(wait=not abort, cancel_futures=True)
        elif self.owned_client:
            self.executor.close()


# ---- the sweep ---------------------------------------------------------------------------


@dataclass
class Outcome:
    status: str  # "done" | "failed"
    kind: str = ""
    message: str = ""
    attrs: dict[str, Any] | None = None
    broken: bool = False  # the executor failed (a worker died), not the run

    def error(self) -> _core.RaidlabError:
        err = _ERRORS.get(self.kind, RunError)(self.message)
        for k, v in (self.attrs or {}).items():
            setattr(err, k, v)
        return err


def _outcome(future: Any) -> Outcome:
    try:
        status, kind, message, attrs = future.result()
    except (cf.CancelledError, KeyboardInterrupt):
        raise
    except Exception as e:
        msg = f"a worker failed while this run was in flight: {type(e).__name__}: {e}"
        return Outcome("failed", "RunError", msg, broken=True)
    return Outcome(status, kind, message, attrs)


def run_tasks(
    todo: list[Task],
    *,
    out: str | os.PathLike[str] = "results",
    executor: Any = None,
    workers: int | None = None,
    fail_fast: bool = False,
    progress: SweepProgressFn | None = None,
) -> Any:
    """Run the tasks not yet in the store ``out``; a DataFrame with one row per task."""
    out_dir = Path(out).resolve()
    store.prepare(out_dir)
    done_ids = store.finished(out_dir)
    pending = deque(t for t in todo if t.run_id not in done_ids)
    state = _State(total=len(todo), done=len(todo) - len(pending))
    if pending:
        pool = Pool(executor, workers)
        aborted = True
        try:
            _drive(pool, pending, out_dir, state, fail_fast, progress)
            aborted = False
        finally:
            pool.close(abort=aborted)
    if state.first_error is not None:
        raise state.first_error
    return frame(out_dir, todo, state.outcomes)


@dataclass
class _State:
    total: int
    done: int
    failed: int = 0
    first_error: _core.RaidlabError | None = None
    outcomes: dict[str, Outcome] = field(default_factory=dict)


def _drive(
    pool: Pool,
    pending: deque[Task],
    out_dir: Path,
    state: _State,
    fail_fast: bool,
    progress: SweepProgressFn | None,
) -> None:
    """Keep ``pool.slots`` tasks in flight until every task is done or an error stops the
    sweep; record each outcome in the store as it arrives."""
    finished: queue.SimpleQueue[Any] = queue.SimpleQueue()
    inflight: dict[Any, tuple[Task, int]] = {}
    generation = 0  # bumped when a broken local pool is replaced
    while inflight or (pending and state.first_error is None):
        while pending and len(inflight) < pool.slots and state.first_error is None:
            t = pending.popleft()
            f = pool.submit(t, str(out_dir))
            inflight[f] = (t, generation)
            f.add_done_callback(finished.put)
        if progress:
            progress(state.done, min(len(inflight), pool.workers), state.failed, state.total)
        try:
            f = finished.get(timeout=TICK_S)
        except queue.Empty:
            continue
        entry = inflight.pop(f, None)
        if entry is None or f.cancelled():
            continue
        task, gen = entry
        o = _outcome(f)
        state.outcomes[task.run_id] = o
        if o.status == "done":
            state.done += 1
            store.clear_error(out_dir, task.run_id)
            continue
        state.failed += 1
        store.write_error(out_dir, task.run_id, task.name, task.tree, o.kind, o.message)
        if o.broken and gen == generation and pool.local_workers:
            # Every run in flight on the dead pool fails with it; replace the pool once.
            if pool.restart():
                generation += 1
            else:
                state.first_error = state.first_error or o.error()
        if fail_fast and state.first_error is None:
            state.first_error = o.error()
        if state.first_error is not None:
            for g in [g for g in inflight if g.cancel()]:
                del inflight[g]
    if progress:
        progress(state.done, 0, state.failed, state.total)


def frame(out_dir: Path, todo: list[Task], outcomes: Mapping[str, Outcome]) -> Any:
    """One row per task, in task order: the stored row of a finished run (``status`` =
    ``"done"``), or its config and error (``"failed"``)."""
    import pandas as pd

    rows = store.read_rows(out_dir, "runs", (t.run_id for t in todo))
    out = []
    for t in todo:
        row = rows.get(t.run_id)
        if row is not None:
            out.append({**row, "status": "done", "error": None})
            continue
        o = outcomes.get(t.run_id, Outcome("failed", "RunError", "not run"))
        base = {"run_id": t.run_id, "name": t.name, "version": _core.__version__}
        out.append({**base, **store.config_columns(t.tree), "status": o.status, "error": f"{o.kind}: {o.message}"})
    return pd.DataFrame(out)


def sweep(
    config: api.Config,
    *,
    executor: Any = None,
    workers: int | None = None,
    out: str | os.PathLike[str] = "results",
    fail_fast: bool = False,
    progress: SweepProgressFn | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Any:
    """Run every run of ``config`` not yet in the store ``out`` and return all of them.
    ``overrides`` (dotted key -> value, as ``--set`` gives them) apply to every run last.

    ``executor``: ``None`` (a local process pool of ``workers`` processes, default: the
    machine's cores), a scheduler address (``"tcp://host:8786"``), a ``distributed.Client``
    or any ``concurrent.futures.Executor``. The result is a DataFrame, one row per run in
    config order: ``run_id``, ``name``, the config's leaf keys (dotted), the metrics,
    ``status`` (``"done"`` or ``"failed"``) and ``error``. Results do not depend on the
    executor or the number of workers (only the wall-clock measurements ``wall_s`` and
    ``*_per_wall_s`` do).
    """
    tasks_ = plan(config, overrides)
    return run_tasks(tasks_, out=out, executor=executor, workers=workers, fail_fast=fail_fast, progress=progress)
