"""`raidlab sweep` and `raidlab results`: a grid equals its runs done one by one, results do
not depend on the worker count, failures are recorded, bad input exits 2."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import raidlab
from raidlab import store
from raidlab.cli import main
from raidlab.sweep import SchedulerError, plan, run_id, sweep
from sweep_fixtures import BASE, CAPACITIES, DISKS, GRID, POLICIES, experiment, stored


def err(capsys) -> str:
    """Captured stderr with rich's line wrapping undone."""
    return " ".join(capsys.readouterr().err.split())


def test_grid_equals_sequential_runs(tmp_path: Path, capsys) -> None:
    """3 x 3 x 2 grid on a trace file: each run's metrics equal `raidlab run` of that run's
    config written out by hand."""
    exp = experiment(tmp_path)
    out = tmp_path / "out"
    assert main(["sweep", str(exp), "--workers", "2", "--out", str(out)]) == 0
    assert "18 runs: 18 done, 0 failed" in capsys.readouterr().out
    frame = sweep(exp, out=out)  # everything is in the store: nothing runs again
    assert len(frame) == 18 and (frame["status"] == "done").all()
    assert frame["run_id"].is_unique
    i = 0
    for policy in POLICIES:
        for capacity in CAPACITIES:
            for disks in DISKS:
                one = tmp_path / f"one-{i}.toml"
                one.write_text(BASE.format(policy=policy, capacity=capacity, disks=disks))
                assert main(["run", str(one), "--json"]) == 0
                expected = json.loads(capsys.readouterr().out)["runs"][0]["metrics"]
                row = frame.iloc[i]
                assert (row["cache.policy"], row["cache.capacity_blocks"], row["array.disks"]) == (policy, capacity, disks)
                for key, value in expected.items():
                    if "wall" not in key:
                        assert row[key] == value or (value is None and row[key] is None), (i, key)
                i += 1
    # The grid is not degenerate: policies and sizes change the result.
    assert frame["rgr"].nunique() > 9


def test_results_sql_prints_a_table(tmp_path: Path, capsys) -> None:
    exp = experiment(tmp_path)
    out = tmp_path / "out"
    assert main(["sweep", str(exp), "--workers", "2", "--out", str(out)]) == 0
    capsys.readouterr()
    sql = 'SELECT "cache.policy" AS policy, count(*) AS runs, min(rgr) AS best FROM runs GROUP BY 1 ORDER BY 1'
    assert main(["results", str(out), "--sql", sql]) == 0
    text = capsys.readouterr().out
    for policy in POLICIES:
        assert policy in text
    assert main(["results", str(out), "--sql", sql, "--csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "policy,runs,best" and [line.split(",")[1] for line in lines[1:]] == ["6", "6", "6"]
    assert main(["results", str(out), "--sql", "SELECT * FROM nope"]) == 2
    assert "query failed" in err(capsys)
    # Lists are stored as JSON text, one type in every file.
    frame = store.query(out, "SELECT disk_reads, \"array.failed\" FROM runs LIMIT 1")
    assert json.loads(frame.iloc[0, 1]) == [1] and len(json.loads(frame.iloc[0, 0])) in DISKS


TIMED = """
[workload.synthetic]
kind = "websearch"
space_gib = 1
requests = 3000
seed = 3
[cache]
policy = "lru"
capacity_blocks = 500
[array]
disks = 5
[run]
mode = "timed"
interval_s = 1
[disk]
model = "constant"
service_ms = 2
[sweep]
"cache.policy" = ["lru", "arc"]
[[sweep.zip]]
"run.interval_s" = [1, 2]
"cache.capacity_blocks" = [100, 400]
"""


def test_one_and_two_workers_give_identical_files(tmp_path: Path) -> None:
    """Same run ids and the same files: series byte for byte, run rows value for value
    (except the wall-clock measurements)."""
    exp = tmp_path / "timed.toml"
    exp.write_text(TIMED)
    one = sweep(exp, workers=1, out=tmp_path / "one")
    two = sweep(exp, workers=2, out=tmp_path / "two")
    assert list(one["run_id"]) == list(two["run_id"]) and len(one) == 4
    # zip: interval and capacity vary together
    assert list(zip(one["run.interval_s"], one["cache.capacity_blocks"])) == [(1, 100), (2, 400)] * 2
    assert stored(tmp_path / "one") == stored(tmp_path / "two")
    for f in (tmp_path / "one" / "series").glob("*.parquet"):
        assert f.read_bytes() == (tmp_path / "two" / "series" / f.name).read_bytes()
    assert len(list((tmp_path / "one" / "series").glob("*.parquet"))) == 4
    series = store.query(tmp_path / "two", "SELECT run_id, count(*) AS n FROM series GROUP BY 1")
    assert len(series) == 4 and (series["n"] > 1).all()


def test_a_local_pool_gives_workload_threads_only_with_cores_to_spare(monkeypatch) -> None:
    from raidlab.sweep import Pool, default_workers

    monkeypatch.delenv("RAIDLAB_WORKLOAD_THREAD", raising=False)  # a setting in the environment would turn them all off
    cores = default_workers()
    for workers in (1, 2, cores):
        pool = Pool(None, workers)
        try:
            assert pool.workload_thread == (2 * workers <= cores), workers
        finally:
            pool.close()
    monkeypatch.setenv("RAIDLAB_WORKLOAD_THREAD", "0")
    pool = Pool(None, 1)
    try:
        assert not pool.workload_thread
    finally:
        pool.close()


def test_run_ids_are_stable_and_canonical() -> None:
    tree = {"cache": {"policy": "lru", "capacity_fraction": 0.25}, "workload": {"trace": "t"}}
    same = {"workload": {"trace": "t"}, "cache": {"capacity_fraction": 0.25, "policy": "lru"}, "name": "other"}
    assert run_id(tree) == run_id(same) == run_id({**tree, "report": {"title": "x"}})
    assert run_id({"a": {"b": 1}}) == run_id({"a": {"b": 1.0}})
    assert run_id(tree) != run_id({**tree, "cache": {"policy": "arc", "capacity_fraction": 0.25}})
    assert len(run_id(tree)) == 16


def test_duplicate_runs_are_done_once(tmp_path: Path) -> None:
    text = GRID.replace('"array.disks" = [5, 6]', '"array.disks" = [5, 5]')
    assert len(plan(experiment(tmp_path, text))) == 9


def test_failed_run_is_recorded_and_the_sweep_goes_on(tmp_path: Path, capsys) -> None:
    text = BASE.format(policy="lru", capacity=50, disks=5) + (
        '[[runs]]\nworkload.trace = "tiny.csv"\n[[runs]]\nworkload.trace = "bad.csv"\n'
        '[sweep]\n"cache.policy" = ["lru", "arc"]\n'
    )
    exp = experiment(tmp_path, text)
    from sweep_fixtures import write_trace

    write_trace(tmp_path / "bad.csv", requests=50, bad_line=40)
    out = tmp_path / "out"
    assert main(["sweep", str(exp), "--workers", "2", "--out", str(out)]) == 1
    text_out = capsys.readouterr().out
    assert "4 runs: 2 done, 2 failed" in text_out and "bad.csv: line 40" in text_out
    errors = store.query(out, "SELECT error, message FROM errors")
    assert list(errors["error"]) == ["TraceError", "TraceError"]
    # --fail-fast: the first failure is raised as what it is (bad input, exit 2).
    assert main(["sweep", str(exp), "--workers", "1", "--out", str(out), "--fail-fast"]) == 2
    assert "bad.csv: line 40" in err(capsys)
    # Fixed trace: the resumed sweep runs the failed runs only and clears their errors.
    write_trace(tmp_path / "bad.csv", requests=50)
    frame = sweep(exp, workers=2, out=out)
    assert (frame["status"] == "done").all()
    assert not list((out / "errors").glob("*.parquet"))


def test_python_api_takes_dicts_and_executors(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    cfg = {
        "workload": {"synthetic": {"kind": "zipf", "keys": 2000, "requests": 5000, "seed": 1}},
        "cache": {"policy": "lru", "capacity_blocks": 100},
        "sweep": {"cache.policy": ["lru", "lfu"]},
    }
    with ThreadPoolExecutor(2) as pool:
        frame = raidlab.sweep(cfg, executor=pool, out=tmp_path / "out")
    assert list(frame["cache.policy"]) == ["lru", "lfu"]
    direct = raidlab.run(cfg).to_frame()
    assert list(frame["hits"]) == list(direct["hits"])


@pytest.mark.parametrize(
    "grid, key",
    [
        ("[sweep]\n", "sweep"),
        ('[sweep]\n"cache.policy" = []\n', "sweep.cache.policy"),
        ('[sweep]\n"cache.polcy" = ["lru"]\n', "sweep.cache.polcy"),
        ('[sweep]\n"nosuch.rate" = [1]\n', "sweep.nosuch.rate"),
        ('[[sweep.zip]]\n"cache.policy" = ["lru"]\n"array.disks" = [5, 6]\n', "sweep.zip[0].array.disks"),
    ],
)
def test_bad_grids_exit_2_naming_the_entry(tmp_path: Path, capsys, grid: str, key: str) -> None:
    exp = experiment(tmp_path, BASE.format(policy="lru", capacity=50, disks=5) + grid)
    assert main(["sweep", str(exp), "--out", str(tmp_path / "out")]) == 2
    assert f"`{key}`" in err(capsys)


def test_unreachable_scheduler_is_a_quick_typed_error(tmp_path: Path, capsys) -> None:
    exp = experiment(tmp_path)
    started = time.monotonic()
    assert main(["sweep", str(exp), "--out", str(tmp_path / "out"), "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert time.monotonic() - started < 10
    assert "cannot reach the Dask scheduler" in err(capsys)
    with pytest.raises(SchedulerError):
        sweep(exp, out=tmp_path / "out", executor="nonsense://x")


def test_unwritable_output_directory_exits_2(tmp_path: Path, capsys) -> None:
    exp = experiment(tmp_path)
    (tmp_path / "file").write_text("")
    assert main(["sweep", str(exp), "--out", str(tmp_path / "file" / "out")]) == 2
    assert "cannot write results" in err(capsys)
    assert main(["results", str(tmp_path / "nowhere")]) == 2


def test_progress_counts_and_the_bar(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from raidlab.progress import SweepBar

    exp = experiment(tmp_path)
    calls: list[tuple[int, int, int, int]] = []
    sweep(exp, workers=2, out=tmp_path / "out", progress=lambda *a: calls.append(a))
    assert calls[-1] == (18, 0, 0, 18)
    assert all(0 <= running <= 2 and total == 18 for _, running, _, total in calls)
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)
    text = io.StringIO()
    bar = SweepBar(Console(file=text, force_terminal=True, width=120), "grid.toml")
    for done, running, failed, total in calls:
        bar(done, running, failed, total)
    bar.close()
    assert "grid.toml" in text.getvalue() and "running" in text.getvalue()


def test_reproduce_runs_through_the_sweep_and_resumes(tmp_path: Path) -> None:
    from raidlab.reproduce import reproduce

    spec = '[report]\ntitle = "t"\nrows = ["array.disks", "cache.capacity_blocks"]\ncolumns = "cache.policy"\nvalue = "rgr"\n'
    exps = tmp_path / "exps"
    exps.mkdir()
    experiment(exps, spec + GRID, name="tiny.toml")
    out = tmp_path / "out"
    report = reproduce("tiny", experiments_dir=exps, out_dir=out, threads=2)
    store_dir = out / "tiny" / "store"
    files = {f: f.stat().st_mtime_ns for f in (store_dir / "runs").glob("*.parquet")}
    assert len(files) == 18 and report.exists()
    # the same run ids as `raidlab sweep` of the file
    assert {f.stem for f in files} == {t.run_id for t in plan(exps / "tiny.toml")}
    reproduce("tiny", experiments_dir=exps, out_dir=out, threads=2)
    assert {f: f.stat().st_mtime_ns for f in (store_dir / "runs").glob("*.parquet")} == files
