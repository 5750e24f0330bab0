"""Helpers shared by the benchmarks (run as scripts: ``python benches/bench_*.py``)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def measure_child(child: str, text: str, env: dict[str, str] | None = None) -> dict:
    """Run the Python program ``child`` in a fresh interpreter with ``text`` (a config) on its
    standard input, with ``env`` added to the environment, and return the JSON object it
    prints; a fresh process per measurement keeps one run's allocations and caches out of the
    next."""
    full = {**os.environ, **(env or {})}
    out = subprocess.run([sys.executable, "-c", child], input=text, capture_output=True, text=True, env=full)
    if out.returncode != 0:
        sys.exit(f"benchmark child failed:\n{out.stderr}")
    return json.loads(out.stdout)


def best_of(child: str, text: str, repeat: int) -> dict:
    """The fastest (least ``wall_s``) of ``repeat`` runs of :func:`measure_child`."""
    runs = [measure_child(child, text) for _ in range(max(1, repeat))]
    return min(runs, key=lambda m: m["wall_s"])


def load() -> str:
    """The 1-minute load average, for printing beside a timing (other processes share the cores)."""
    return f"load average {os.getloadavg()[0]:.1f}"


def metrics_child(keys: list[str]) -> str:
    """A child program for :func:`best_of`: one run (one thread) of the TOML config on its
    standard input, printing the named metrics (``None`` for one the run lacks)."""
    return f"""
import json, sys, tomllib
import raidlab
m = raidlab.run(tomllib.loads(sys.stdin.read()), threads=1).runs[0].metrics
print(json.dumps({{k: m.get(k) for k in {keys!r}}}))
"""


def requests_args() -> argparse.Namespace:
    """The common command line: ``--requests N`` (default 1 M) and ``--repeat K`` (default 3)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    return ap.parse_args()
