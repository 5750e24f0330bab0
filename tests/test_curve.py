"""``raidlab.curve`` and ``raidlab curve``: one-pass curves against per-size counting runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import zipf_config

import raidlab
from raidlab.cli import main

RAID5_DEGRADED = {"level": "raid5", "disks": 5, "stripe_unit": 16384, "failed": [2]}


def bench_trace(path: Path, requests: int, keys: int) -> Path:
    """The bench trace of benches/bench_count.py (Zipf(0.9), 4 KiB objects, oracleGeneral),
    made by the benchmark's own writer, with fewer requests and keys."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))
    from bench_count import write_trace

    write_trace(path, requests, keys, 0.9, seed=7)
    return path


def per_size(config: dict, sizes: list[int]) -> list[tuple[int, int, float]]:
    """(misses, miss_disk_blocks, rgr) of a counting run at each size."""
    runs = [{"cache": {"capacity_blocks": s}} for s in sizes]
    result = raidlab.run({**config, "runs": runs}, threads=2)
    return [(r.metrics["misses"], r.metrics["miss_disk_blocks"], r.metrics["rgr"]) for r in result.runs]


def assert_exact(config: dict, sizes: list[int]) -> None:
    df = raidlab.curve(config, sizes=sizes)
    assert list(df["size_blocks"]) == sorted(sizes)
    got = list(zip(df["misses"], df["miss_disk_blocks"], df["rgr"]))
    assert got == per_size(config, sorted(sizes))


@pytest.mark.parametrize("array", [None, RAID5_DEGRADED], ids=["healthy", "degraded-raid5"])
def test_exact_lru_equals_counting_runs_on_the_bench_trace(tmp_path: Path, array: dict | None) -> None:
    trace = bench_trace(tmp_path / "zipf.oracleGeneral.bin", 200_000, 20_000)
    config: dict = {"workload": {"trace": str(trace), "format": "oracle"}, "cache": {"policy": "lru", "capacity_blocks": 1}}
    if array:
        config["array"] = array
    assert_exact(config, [1, 200, 2000, 8000, 20_000, 40_000])


@pytest.mark.parametrize(
    "rel", ["cloudphysics/cloudPhysicsIO.csv", "websearch/wsrch-small.mqsim.txt", "keys/arc-oltp.u32be.gz"]
)
@pytest.mark.parametrize("array", [None, RAID5_DEGRADED], ids=["healthy", "degraded-raid5"])
def test_exact_lru_equals_counting_runs_on_real_traces(traces: Path, rel: str, array: dict | None) -> None:
    config: dict = {"workload": {"trace": str(traces / rel)}, "cache": {"policy": "lru", "capacity_blocks": 1}}
    if array:
        config["array"] = array
    assert_exact(config, [16, 1024, 16384, 131072])


def test_warmup_counts_like_counting_mode() -> None:
    config = zipf_config()
    config["run"] = {"warmup_requests": 20_000}
    assert_exact(config, [50, 500, 5000])


def test_a_full_sample_is_the_exact_curve() -> None:
    config = zipf_config()
    exact = raidlab.curve(config, sizes=[100, 1000, 4000])
    # Rate 1 and a sample bound above the footprint keep every block: the same numbers.
    for kwargs in ({"sample_rate": 1.0}, {"sample_size": 1_000_000}):
        sampled = raidlab.curve(config, sizes=[100, 1000, 4000], **kwargs)
        assert list(sampled["misses"]) == list(exact["misses"])
        assert list(sampled["rgr"]) == list(exact["rgr"])
    assert set(exact["method"]) == {"stack"}


def test_shards_at_one_percent_tracks_the_exact_curve() -> None:
    # The Rust test's case (crates/raidlab/src/curve/tests.rs): about 15,000 blocks sampled;
    # the RGR error depends on the hash seed's sample (up to 0.02 on other seeds).
    config = {
        "workload": {"synthetic": {"kind": "zipf", "keys": 2_000_000, "alpha": 0.5, "requests": 4_000_000, "seed": 11}},
        "cache": {"policy": "lru", "capacity_blocks": 1},
        "array": RAID5_DEGRADED,
        "run": {"seed": 2},
    }
    sizes = [31_250 << i for i in range(8)]
    exact = raidlab.curve(config, sizes=sizes)
    sampled = raidlab.curve(config, sizes=sizes, sample_rate=0.01)
    mr = float(np.mean(np.abs(sampled["miss_ratio"] - exact["miss_ratio"])))
    span = exact["rgr"].max() - exact["rgr"].min()
    rgr = float(np.mean(np.abs(sampled["rgr"] - exact["rgr"]))) / span
    assert mr <= 0.01 and rgr <= 0.01, (mr, rgr)
    assert set(sampled["method"]) == {"shards"}


@pytest.mark.parametrize("policy", ["fifo", "arc", "2q"])
def test_mini_simulations_are_within_two_points_of_per_size_runs(policy: str) -> None:
    config = {
        "workload": {"synthetic": {"kind": "zipf", "keys": 200_000, "alpha": 0.9, "requests": 1_000_000, "seed": 12}},
        "cache": {"policy": policy, "capacity_blocks": 1},
    }
    sizes = [2000, 8000, 32000]
    mini = raidlab.curve(config, sizes=sizes, sample_rate=0.05)
    full = per_size(config, sizes)
    lookups = int(mini["lookups"].iloc[0])
    for ratio, (misses, _, _) in zip(mini["miss_ratio"], full):
        assert abs(ratio - misses / lookups) <= 0.02
    assert set(mini["method"]) == {"mini-simulation"}


def test_frame_columns_and_many_runs() -> None:
    config = zipf_config()
    config["runs"] = [{"cache": {"policy": "lru"}}, {"cache": {"policy": "fifo"}}]
    df = raidlab.curve(config, sizes=["1MiB", 64])
    assert list(df.columns[:7]) == ["name", "size_blocks", "size_bytes", "misses", "miss_ratio", "miss_disk_blocks", "rgr"]
    assert list(df["size_blocks"]) == [64, 256, 64, 256]
    assert list(df["method"]) == ["stack", "stack", "simulation", "simulation"]
    assert (df["size_bytes"] == df["size_blocks"] * 4096).all()


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"sizes": ["0"]}, "sizes"),
        ({"sizes": ["12 parsecs"]}, "sizes"),
        ({"sizes": [1], "sample_rate": 0.0}, "sample_rate"),
        ({"sizes": [1], "sample_rate": 1.5}, "sample_rate"),
        ({"sizes": [1], "sample_rate": 0.1, "sample_size": 10}, "sample_rate"),
    ],
)
def test_bad_arguments_are_config_errors(kwargs: dict, key: str) -> None:
    with pytest.raises(raidlab.ConfigError) as e:
        raidlab.curve(zipf_config(), **kwargs)
    assert e.value.key == key


def test_unsupported_configs_are_refused() -> None:
    with pytest.raises(raidlab.ConfigError) as e:
        raidlab.curve(zipf_config(policy="fifo"), sizes=[10], sample_size=100)
    assert e.value.key == "sample_size"
    obj = {"workload": {"synthetic": {"kind": "zipf"}}, "cache": {"policy": "lru", "unit": "object", "capacity_bytes": 4096}}
    with pytest.raises(raidlab.ConfigError) as e:
        raidlab.curve(obj, sizes=[10])
    assert e.value.key == "cache.unit"


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def write(tmp_path: Path, config: str) -> Path:
    p = tmp_path / "exp.toml"
    p.write_text(config)
    return p


CLI_CONFIG = """
[workload.synthetic]
kind = "zipf"
keys = 5000
requests = 50000
seed = 3
[cache]
policy = "lru"
capacity = "4MiB"
[array]
level = "raid5"
disks = 5
failed = [2]
"""


def test_cli_table_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str], narrow: None) -> None:
    path = write(tmp_path, CLI_CONFIG)
    png = tmp_path / "curve.png"
    assert main(["curve", str(path), "--sizes", "1MiB,4MiB", "--sizes", "16MiB", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 80 for line in out.splitlines())
    assert "miss ratio" in out and "RGR" in out and "16MiB" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["curve", str(path), "--sizes", "256,1024", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (item,) = doc["curves"]
    points = item["curve"]["points"]
    assert [p["size_blocks"] for p in points] == [256, 1024]
    # A curve's point is the counting run at its size.
    m = raidlab.run(path, overrides={"cache.capacity": None, "cache.capacity_blocks": 1024}).metrics
    assert (points[1]["misses"], points[1]["rgr"]) == (m["misses"], m["rgr"])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--sizes", "0"], "sizes"),
        (["--sizes", "64MiB", "--sample-rate", "2"], "sample_rate"),
        (["--sizes", "64MiB", "--sample-size", "10", "--set", "cache.policy=arc"], "sample_size"),
        (["--sizes", "64MiB", "--set", "cache.policy=nope"], "cache.policy"),
    ],
)
def test_cli_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], narrow: None, args: list[str], needle: str) -> None:
    assert main(["curve", str(write(tmp_path, CLI_CONFIG)), *args]) == 2
    assert needle in capsys.readouterr().err


def test_cli_rejects_both_sampling_flags(tmp_path: Path, narrow: None) -> None:
    with pytest.raises(SystemExit) as e:
        main(["curve", str(write(tmp_path, CLI_CONFIG)), "--sample-rate", "0.1", "--sample-size", "10"])
    assert e.value.code == 2


def test_cli_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], narrow: None) -> None:
    assert main(["curve", str(tmp_path / "absent.toml")]) == 2
    assert "absent.toml" in capsys.readouterr().err
