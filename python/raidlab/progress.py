"""A progress bar for long runs, shared by the CLI and reproductions."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from raidlab import api


class LazyProgress:
    """A rich progress bar that appears only once a run has lasted 2 s; while a footprint
    pre-pass (``capacity_fraction``) reads the workload, it says so."""

    DELAY_S = 2.0
    prepass = True  # takes the pre-pass's progress (see raidlab.api.run)

    def __init__(self, console: Console, label: str) -> None:
        self.console = console
        self.label = label
        self.started = time.monotonic()
        self.bar: Progress | None = None
        self.task: Any = None

    def __call__(self, runs_done: int, runs_total: int, requests: int, prepass: int = 0) -> None:
        if self.bar is None:
            if time.monotonic() - self.started < self.DELAY_S or not self.console.is_terminal:
                return
            self.bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} runs"),
                TextColumn("{task.fields[requests]:,} requests"),
                TextColumn("{task.fields[note]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=runs_total, requests=0, note="")
        note = f"footprint pre-pass: {prepass:,} requests read" if prepass else ""
        self.bar.update(self.task, completed=runs_done, requests=requests, note=note)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def run_with_progress(
    config: api.Config, console: Console, label: str, threads: int | None, overrides: dict[str, Any] | None = None
) -> api.Result:
    progress = LazyProgress(console, label)
    try:
        return api.run(config, threads=threads, progress=progress, overrides=overrides)
    finally:
        progress.close()


class SweepBar:
    """The progress bar of ``raidlab sweep``: runs done / running / failed, and an ETA from
    the runs finished in this invocation (runs found in the store count as done)."""

    def __init__(self, console: Console, label: str) -> None:
        self.console = console
        self.label = label
        self.bar: Progress | None = None
        self.task: Any = None

    def __call__(self, done: int, running: int, failed: int, total: int) -> None:
        if not self.console.is_terminal:
            return
        if self.bar is None:
            from rich.progress import MofNCompleteColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[running]} running, {task.fields[failed]} failed"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total, completed=done, running=0, failed=0)
        self.bar.update(self.task, completed=done + failed, running=running, failed=failed)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
