"""Small inputs for the sweep tests: a synthetic MSR-format trace and grid configs over it."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow.parquet as pq

# An experiment on a trace file beside it; the grid's keys are set by format().
BASE = """
[workload]
trace = "tiny.csv"
format = "msr"
ops = "all"
[cache]
policy = "{policy}"
capacity_blocks = {capacity}
writes = "invalidate"
[array]
level = "raid5"
disks = {disks}
failed = [1]
"""

POLICIES = ["lru", "arc", "vdf-lru"]
CAPACITIES = [50, 200, 800]
DISKS = [5, 6]

GRID = (
    BASE.format(policy="lru", capacity=50, disks=5)
    + f"""
[sweep]
"cache.policy" = {POLICIES!r}
"cache.capacity_blocks" = {CAPACITIES!r}
"array.disks" = {DISKS!r}
""".replace("'", '"')
)


def write_trace(path: Path, requests: int = 3000, seed: int = 7, bad_line: int | None = None) -> Path:
    """An MSR Cambridge CSV: 70% of requests on 300 hot blocks, the rest over 32 MiB; 4-16
    KiB requests, 1/5 writes, 1 ms apart. ``bad_line`` (1-based) gets a malformed direction."""
    rng = random.Random(seed)
    lines = []
    for i in range(requests):
        block = rng.randrange(300) if rng.random() < 0.7 else rng.randrange(8192)
        size = rng.choice((4096, 8192, 16384))
        op = "Write" if rng.random() < 0.2 else "Read"
        if bad_line == i + 1:
            op = "Trim"
        lines.append(f"{128166372000000000 + i * 10_000},host,0,{op},{block * 4096},{size},100")
    path.write_text("\n".join(lines) + "\n")
    return path


def experiment(tmp_path: Path, text: str = GRID, name: str = "grid.toml", **trace: int) -> Path:
    """``text`` as an experiment file beside a fresh ``tiny.csv``."""
    write_trace(tmp_path / "tiny.csv", **trace)
    p = tmp_path / name
    p.write_text(text)
    return p


def stored(out: Path, kind: str = "runs") -> dict[str, list[dict]]:
    """run id -> stored rows without the wall-clock measurements (``wall_s``,
    ``*_per_wall_s``), the only values that differ between identical runs."""
    rows = {}
    for f in sorted((out / kind).glob("*.parquet")):
        table = pq.read_table(f)
        for row in table.to_pylist():
            for k in [k for k in row if "wall" in k]:
                del row[k]
            rows.setdefault(f.stem, []).append(row)
    return rows
