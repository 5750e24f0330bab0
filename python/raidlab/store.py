"""The result store of sweeps: one Parquet file per finished run, queried with DuckDB.

Layout of a store directory::

    runs/<run_id>.parquet     one row: run_id, name, version, experiment (the file's name),
                              config_hash, config (JSON, as written), the resolved config's
                              leaf keys (dotted column names, defaults filled in) and the
                              metrics
    series/<run_id>.parquet   a timed run's time series, one row per interval
    ramp/<run_id>.parquet     a ramp run's levels, one row per level
    errors/<run_id>.parquet   a failed run: its error; removed when the run later succeeds

Every file is written to a temporary name in its directory and renamed into place, so a file
that exists is complete whenever the writer is killed. A run is finished when its ``runs``
file exists; its series and ramp are written before it. Values that are lists or tables
(``disk_reads``, ``array.failed``) are stored as JSON text, so every run has the same column
types whatever its lists hold; the file's metadata names those columns and
:func:`read_rows` decodes them.

:func:`connect` opens DuckDB with one view per kind (``runs``, ``series``, ``ramp``,
``errors``) over all files of that kind; a kind without files is an empty view with a
``run_id`` column (and ``name`` for ``runs`` and ``errors``), so every view exists in every
store. Dotted column names are quoted in
SQL: ``SELECT "cache.policy", hit_ratio FROM runs``.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from pathlib import Path
from typing import Any, Iterable, Mapping

from raidlab import _core
from raidlab.api import flatten

KINDS = ("runs", "series", "ramp", "errors")
SUFFIX = ".parquet"
# Parquet key-value metadata naming the columns held as JSON text.
JSON_COLUMNS_KEY = b"raidlab.json_columns"
# Keys of a config that are labels or presentation, not part of what a run computes.
NOT_IDENTITY = ("name", "report")


class StoreError(_core.RaidlabError):
    """A result store cannot be written or queried; ``file`` names the directory."""

    file: str


def io_error(path: Path, what: str, e: OSError) -> _core.RaidlabIOError:
    err = _core.RaidlabIOError(f"{path}: {what}: {e.strerror or e}")
    err.file = str(path)
    return err


def prepare(out: Path) -> None:
    """Create the store's directories and prove they are writable (a typed error otherwise,
    before any run starts); remove temporary files left by writers that are gone."""
    try:
        for kind in KINDS:
            (out / kind).mkdir(parents=True, exist_ok=True)
        probe = out / "runs" / f".probe.{uuid.uuid4().hex}.tmp"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise io_error(out, "cannot write results there", e) from None
    clean_temps(out)


def _host() -> str:
    return socket.gethostname().replace(".", "_")


def _temp_name(final: Path) -> Path:
    # Host and pid in the name let a later sweep remove exactly the leftovers of dead writers.
    return final.with_name(f".{final.name}.{_host()}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def clean_temps(out: Path) -> int:
    """Remove temporary files of writers on this host that are no longer alive."""
    host = _host()
    removed = 0
    for kind in KINDS:
        for p in (out / kind).glob(".*.tmp"):
            parts = p.name.rsplit(".", 4)  # .<final>.<host>.<pid>.<rand>.tmp
            if len(parts) != 5 or parts[1] != host or not parts[2].isdigit():
                continue
            if not _alive(int(parts[2])):
                p.unlink(missing_ok=True)
                removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def path(out: Path, kind: str, run_id: str) -> Path:
    return out / kind / f"{run_id}{SUFFIX}"


def finished(out: Path) -> set[str]:
    """Ids of the runs whose result is in the store (one directory listing)."""
    try:
        names = os.listdir(out / "runs")
    except FileNotFoundError:
        return set()
    return {n[: -len(SUFFIX)] for n in names if n.endswith(SUFFIX) and not n.startswith(".")}


def canonical(value: Any) -> Any:
    """A JSON-ready copy with one spelling per value: keys sorted by the encoder, integral
    floats as integers (a config reads ``1`` and ``1.0`` alike wherever it takes a float)."""
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def canonical_json(value: Any) -> str:
    return json.dumps(canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _row_table(row: Mapping[str, Any]) -> Any:
    """One row as an Arrow table; lists and tables become JSON text named in the metadata."""
    import pyarrow as pa

    flat: dict[str, Any] = {}
    json_cols = []
    for k, v in row.items():
        if _scalar(v):
            flat[k] = v
        else:
            flat[k] = json.dumps(v, separators=(",", ":"))
            json_cols.append(k)
    table = pa.Table.from_pylist([flat])
    return table.replace_schema_metadata({JSON_COLUMNS_KEY: json.dumps(json_cols).encode()})


def _write(table: Any, final: Path) -> None:
    import pyarrow.parquet as pq

    tmp = _temp_name(final)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def config_columns(tree: Mapping[str, Any]) -> dict[str, Any]:
    """The config's leaf keys as columns (dotted), without the run's name and the report."""
    return flatten({k: v for k, v in tree.items() if k not in NOT_IDENTITY})


def config_hash(tree: Mapping[str, Any]) -> str:
    """16 hex digits of SHA-256 over the canonical config (without name and report): equal
    for runs of equal configs, whatever the raidlab version (the run id includes it)."""
    import hashlib

    identity = {k: v for k, v in tree.items() if k not in NOT_IDENTITY}
    return hashlib.sha256(canonical_json(identity).encode()).hexdigest()[:16]


def write_run(
    out: Path,
    run_id: str,
    name: str,
    tree: Mapping[str, Any],
    metrics: Mapping[str, Any],
    *,
    resolved: Mapping[str, Any] | None = None,
    experiment: str = "",
) -> None:
    """Store a finished run: its series and ramp first, its row last (the row marks it done).
    The config columns come from ``resolved`` (defaults filled in) when given."""
    import pyarrow as pa

    metrics = dict(metrics)
    series = metrics.pop("series", None) or {}
    ramp = metrics.pop("ramp", None) or []
    if series:
        n = len(next(iter(series.values())))
        _write(pa.table({"run_id": [run_id] * n, **series}), path(out, "series", run_id))
    if ramp:
        _write(pa.Table.from_pylist([{"run_id": run_id, **p} for p in ramp]), path(out, "ramp", run_id))
    row: dict[str, Any] = {"run_id": run_id, "name": name, "version": _core.__version__}
    row.update({"experiment": experiment, "config_hash": config_hash(tree)})
    row["config"] = canonical_json(tree)
    row.update(config_columns(resolved if resolved is not None else tree))
    row.update(metrics)
    _write(_row_table(row), path(out, "runs", run_id))


def write_error(out: Path, run_id: str, name: str, tree: Mapping[str, Any], kind: str, message: str) -> None:
    row: dict[str, Any] = {"run_id": run_id, "name": name, "version": _core.__version__}
    row.update({"error": kind, "message": message, "config": canonical_json(tree)})
    _write(_row_table(row), path(out, "errors", run_id))


def clear_error(out: Path, run_id: str) -> None:
    path(out, "errors", run_id).unlink(missing_ok=True)


def read_rows(out: Path, kind: str, run_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The stored row of each run id that has one, JSON columns decoded."""
    import pyarrow.parquet as pq

    rows = {}
    for run_id in run_ids:
        p = path(out, kind, run_id)
        try:
            # ParquetFile: a third of read_table's cost on one-row files (no dataset layer).
            table = pq.ParquetFile(p).read(use_threads=False)
        except FileNotFoundError:
            continue
        meta = table.schema.metadata or {}
        json_cols = json.loads(meta.get(JSON_COLUMNS_KEY, b"[]"))
        row = table.to_pylist()[0]
        for c in json_cols:
            row[c] = json.loads(row[c])
        rows[run_id] = row
    return rows


def connect(out: Path) -> Any:
    """A DuckDB connection (in memory) with a view per kind of file present in ``out``."""
    import duckdb

    out = Path(out)
    if not (out / "runs").is_dir() and not (out / "errors").is_dir():
        err = StoreError(f"{out}: not a result store (no runs/ or errors/ directory)")
        err.file = str(out)
        raise err
    con = duckdb.connect(":memory:")
    for kind in KINDS:
        d = out / kind
        if d.is_dir() and any(n.endswith(SUFFIX) and not n.startswith(".") for n in os.listdir(d)):
            glob = str(d.resolve() / f"*{SUFFIX}").replace("'", "''")
            con.execute(f"CREATE VIEW {kind} AS SELECT * FROM read_parquet('{glob}', union_by_name = true)")
        else:
            cols = "NULL::VARCHAR AS run_id" + (", NULL::VARCHAR AS name" if kind in ("runs", "errors") else "")
            con.execute(f"CREATE VIEW {kind} AS SELECT * FROM (SELECT {cols}) WHERE false")
    return con


def query(out: Path, sql: str) -> Any:
    """Run ``sql`` over the store's views; a pandas DataFrame."""
    import duckdb

    con = connect(out)
    try:
        return con.execute(sql).df()
    except duckdb.Error as e:
        hint = ""
        if "." in sql and ("not found" in str(e) or "does not have a column" in str(e)):
            hint = ' (config columns have dotted names: quote them, SELECT "cache.policy" FROM runs)'
        err = StoreError(f"{out}: query failed: {e}{hint}")
        err.file = str(out)
        raise err from None
    finally:
        con.close()
