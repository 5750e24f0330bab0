"""Shared fixtures: where the real traces are (beside the repository, never in it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
TRACES = Path(os.environ.get("RAIDLAB_TRACES", REPO.parent / "shared" / "traces"))


@pytest.fixture(autouse=True)
def _piped_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's output as a pipe sees it, whoever runs the tests: pytest-xdist's workers set
    COLUMNS=80, which would fold the tables that the tests read."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def traces() -> Path:
    if not TRACES.is_dir():
        pytest.skip(f"real traces not found at {TRACES} (set RAIDLAB_TRACES)")
    return TRACES


def zipf_config(**cache: object) -> dict:
    """A small synthetic config; keyword arguments override the [cache] table."""
    cfg = {
        "workload": {"synthetic": {"kind": "zipf", "keys": 5000, "alpha": 0.9, "requests": 50_000, "seed": 3}},
        "cache": {"policy": "lru", "capacity_blocks": 500},
        "array": {"level": "raid5", "disks": 6, "failed": [2]},
    }
    cfg["cache"].update(cache)
    return cfg


def assert_config_error(path: Path, key: str, capsys: pytest.CaptureFixture[str], api: Any = None) -> None:
    """The config at ``path`` is refused naming ``key``: ``raidlab run`` exits 2 with the key in
    its message, and the Python API (``api``, default :func:`raidlab.run`) raises a
    ``ConfigError`` whose ``key`` is ``key``."""
    import raidlab
    from raidlab.cli import main

    assert main(["run", str(path)]) == 2
    assert key in capsys.readouterr().err
    with pytest.raises(raidlab.ConfigError) as e:
        (api or raidlab.run)(path)
    assert e.value.key == key, str(e.value)


LCS_VERSION = "0.3.5"


@pytest.fixture
def lcs() -> Any:
    """The libcachesim wheel the parity tests compare against (`make test` installs it), or a
    skip saying why. Once `make test` installed it (RAIDLAB_REQUIRE_LIBCACHESIM=1) a missing
    or different wheel fails instead."""
    import importlib.metadata

    required = os.environ.get("RAIDLAB_REQUIRE_LIBCACHESIM") == "1"
    try:
        version = importlib.metadata.version("libcachesim")
        import libcachesim
    except ImportError as e:  # PackageNotFoundError is an ImportError
        why = f"libcachesim=={LCS_VERSION} is not installed ({e}): `make test` installs it, or pip install it"
        if required:
            pytest.fail(why)
        pytest.skip(why)
    if version != LCS_VERSION:
        why = f"libcachesim {version} is installed; the parity tests are pinned to {LCS_VERSION}"
        if required:
            pytest.fail(why)
        pytest.skip(why)
    return libcachesim
