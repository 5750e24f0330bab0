"""`import raidlab` stays light: the core and `raidlab.run` only; the rest loads on first use,
and the functions named like their modules (`curve`, `reliability`, `sweep`) stay functions."""

from __future__ import annotations

import json
import subprocess
import sys


def fresh(code: str) -> dict:
    """Run `code` in a fresh interpreter; it prints one JSON value."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_import_loads_no_data_stack() -> None:
    loaded = fresh(
        "import json, sys, raidlab\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pandas', 'pyarrow', 'numpy', 'asyncio', 'duckdb', 'dask', 'matplotlib') or m.startswith('raidlab'))))"
    )
    assert loaded == ["raidlab", "raidlab._core", "raidlab.api"]


def test_lazy_names_resolve_and_stay_functions() -> None:
    kinds = fresh(
        "import json, types, raidlab\n"
        "import raidlab.sweep\n"
        "from raidlab.reliability import side_by_side\n"
        "import raidlab.curve as c\n"
        "names = ['curve', 'reliability', 'sweep', 'Reliability', 'reliability_side_by_side', 'reliability_throughput']\n"
        "kinds = {n: type(getattr(raidlab, n)).__name__ for n in names}\n"
        "kinds['c'] = type(c).__name__\n"
        "kinds['same'] = raidlab.reliability_side_by_side is side_by_side\n"
        "print(json.dumps(kinds))"
    )
    assert kinds == {
        "curve": "function",
        "reliability": "function",
        "sweep": "function",
        "Reliability": "type",
        "reliability_side_by_side": "function",
        "reliability_throughput": "function",
        "c": "function",
        "same": True,
    }


def test_star_import_and_unknown_names() -> None:
    out = fresh(
        "import json, raidlab\n"
        "ns = {}\n"
        "exec('from raidlab import *', ns)\n"
        "try:\n"
        "    raidlab.no_such_name\n"
        "    err = None\n"
        "except AttributeError as e:\n"
        "    err = str(e)\n"
        "print(json.dumps({'all': sorted(n for n in raidlab.__all__ if n not in ns), 'err': err}))"
    )
    assert out == {"all": [], "err": "module 'raidlab' has no attribute 'no_such_name'"}
