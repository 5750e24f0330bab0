"""The Python API: run(), Result, determinism, and typed errors."""

from __future__ import annotations

import numpy as np
import pytest

import raidlab
from conftest import zipf_config

METRIC_NAMES = ["requests", "block_requests", "hits", "misses", "hit_ratio", "rgr", "disk_reads", "disk_writes", "wall_s"]


def test_run_returns_the_contract_metrics() -> None:
    res = raidlab.run(zipf_config())
    m = res.metrics
    for name in METRIC_NAMES:
        assert name in m, name
    assert m["requests"] == 50_000
    assert m["block_requests"] == 50_000
    assert m["hits"] + m["misses"] == 50_000
    assert m["hit_ratio"] == pytest.approx(m["hits"] / 50_000)
    assert len(m["disk_reads"]) == 6
    assert m["disk_reads"][2] == 0  # the failed disk is never read
    # every miss on the failed disk reads the 5 survivors, others read 1 block
    assert m["rgr"] == pytest.approx(m["miss_disk_blocks"] / 50_000)
    assert m["misses"] <= m["miss_disk_blocks"] <= 5 * m["misses"]


def test_same_config_same_results_bit_for_bit() -> None:
    a = raidlab.run(zipf_config(policy="vdf-lfu")).metrics
    b = raidlab.run(zipf_config(policy="vdf-lfu")).metrics
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b


def test_threads_do_not_change_results() -> None:
    cfg = zipf_config()
    cfg["sweep"] = {"cache.policy": ["lru", "arc", "mq", "vdf-lru"]}
    one = raidlab.run(cfg, threads=1)
    two = raidlab.run(cfg, threads=2)
    strip = lambda r: [{k: v for k, v in x.metrics.items() if k != "wall_s"} for x in r.runs]  # noqa: E731
    assert strip(one) == strip(two)
    assert [r.name for r in one.runs] == [f"cache.policy={p}" for p in ["lru", "arc", "mq", "vdf-lru"]]


def _metrics(cfg: dict, workload_thread: bool) -> list[dict]:
    """Each run's metrics without the wall-clock ones, the workload drawn on its own thread
    or not."""
    runs = raidlab.run(cfg, workload_thread=workload_thread).runs
    return [{k: v for k, v in r.metrics.items() if "wall" not in k} | {"series": r.series} for r in runs]


def test_the_workload_thread_changes_no_result() -> None:
    timed = {
        "workload": {"synthetic": {"kind": "websearch", "requests": 20_000, "space_gib": 2.0, "seed": 5}},
        "cache": {"policy": "lru", "capacity_blocks": 2000},
        "array": {"level": "raid5", "disks": 5, "failed": [1]},
        "run": {"mode": "timed"},
        "disk": {"preset": "nearline7200"},
    }
    for cfg in (zipf_config(policy="arc"), timed):
        assert _metrics(cfg, True) == _metrics(cfg, False)


def test_a_trace_error_drawn_on_the_workload_thread_is_in_its_place(tmp_path) -> None:
    # oracleGeneral records; record 3000's next_access_vtime is one no such file holds. An
    # array keeps the run off the counting engine's own oracleGeneral loop.
    rec = np.zeros(4000, dtype=[("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    rec["id"] = np.arange(4000) % 300
    rec["size"] = 4096
    rec["next"] = -1
    rec["next"][2999] = 1 << 60
    p = tmp_path / "bad.oracleGeneral.bin"
    rec.tofile(p)
    cfg = {"workload": {"trace": str(p), "format": "oracle"}, "cache": {"policy": "lru", "capacity_blocks": 64}, "array": {"level": "raid5", "disks": 5}}
    for own in (True, False):
        with pytest.raises(raidlab.TraceError) as e:
            _metrics(cfg, own)
        assert e.value.line == 3000, own


def test_to_frame_has_one_row_per_run() -> None:
    cfg = zipf_config()
    cfg["runs"] = [{"cache": {"policy": "lru"}}, {"cache": {"policy": "lfu"}}]
    res = raidlab.run(cfg)
    df = res.to_frame()
    assert list(df["cache.policy"]) == ["lru", "lfu"]
    assert {"rgr", "hit_ratio", "name", "array.disks"} <= set(df.columns)
    with pytest.raises(ValueError):
        _ = res.metrics


def test_toml_file_and_relative_paths(tmp_path) -> None:
    (tmp_path / "t.txt").write_text("0 0 0 8 1\n1000 0 8 8 1\n2000 0 0 8 1\n")
    (tmp_path / "e.toml").write_text(
        '[workload]\ntrace = "t.txt"\nformat = "mqsim"\n[cache]\npolicy = "lru"\ncapacity_blocks = 4\n'
    )
    m = raidlab.run(tmp_path / "e.toml").metrics
    assert (m["requests"], m["hits"], m["misses"]) == (3, 1, 2)


@pytest.mark.parametrize(
    ("patch", "key"),
    [
        ({"cache": {"policy": "lru3"}}, "cache.policy"),
        ({"cache": {"capacity_blocks": -1}}, "cache.capacity_blocks"),
        ({"array": {"disks": 2}}, "array"),
        ({"array": {"failed": [7]}}, "array.failed"),
        ({"array": {"failed": [1, 2]}}, "array.failed"),
        ({"workload": {"block_size": 1000}}, "workload.block_size"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_bad_config_is_a_config_error_naming_the_key(patch: dict, key: str) -> None:
    cfg = zipf_config()
    for table, values in patch.items():
        if isinstance(values, dict):
            cfg.setdefault(table, {}).update(values)
        else:
            cfg[table] = values
    with pytest.raises(raidlab.ConfigError) as e:
        raidlab.run(cfg)
    assert e.value.key.startswith(key), (e.value.key, str(e.value))
    assert isinstance(e.value, raidlab.RaidlabError)


def test_bad_trace_line_names_file_and_line(tmp_path) -> None:
    p = tmp_path / "bad.txt"
    p.write_text("0 0 0 8 1\n1000 0 zz 8 1\n")
    cfg = {"workload": {"trace": str(p), "format": "mqsim"}, "cache": {"policy": "lru", "capacity_blocks": 4}}
    with pytest.raises(raidlab.TraceError) as e:
        raidlab.run(cfg)
    assert (e.value.file.endswith("bad.txt"), e.value.line) == (True, 2)
    assert "bad.txt: line 2:" in str(e.value)


def test_missing_trace_is_an_io_error(tmp_path) -> None:
    cfg = {"workload": {"trace": str(tmp_path / "nope.csv"), "format": "msr"}, "cache": {"policy": "lru", "capacity_blocks": 4}}
    with pytest.raises(raidlab.RaidlabIOError):
        raidlab.run(cfg)
