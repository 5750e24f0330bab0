"""`raidlab reliability` and `raidlab.reliability()`: the RAPID-Cache paper's MTTDL and cost
model (Table 3), --json, and typed errors for bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import raidlab
from raidlab.cli import main

ARCHS = ["single-nvram", "dual-nvram", "rapid-dp", "rapid-np"]

# The paper's Table 3 (read cache 64 MB): write MB -> per architecture (MTTDL hours, $).
PAPER_TABLE3 = {
    16: [(1.25e4, 912), (5.21e7, 1792), (6.70e5, 151), (4.53e7, 1023)],
    32: [(6.25e3, 1792), (2.60e7, 3552), (6.36e5, 159), (3.86e7, 1903)],
    64: [(3.13e3, 3552), (1.30e7, 7072), (5.77e5, 175), (2.98e7, 3663)],
}


def by_arch(result: raidlab.Reliability) -> dict[tuple[float, str], dict]:
    return {(r["write_cache_mb"], r["architecture"]): r for r in result.rows}


def test_table3_reproduced_within_one_percent() -> None:
    # MTTDL columns follow the equations with 4 MB of backup NVRAM, the cost columns with the
    # 2 MB the caption states (../shared/papers/README.md).
    mttdl = by_arch(raidlab.reliability(backup_nvram_mb=4))
    cost = by_arch(raidlab.reliability())
    for write_mb, cells in PAPER_TABLE3.items():
        for arch, (paper_h, paper_usd) in zip(ARCHS, cells):
            got_h = mttdl[(write_mb, arch)]["mttdl_h"]
            got_usd = cost[(write_mb, arch)]["cost_usd"]
            assert got_h == pytest.approx(paper_h, rel=0.01), (write_mb, arch)
            assert got_usd == pytest.approx(paper_usd, rel=0.01), (write_mb, arch)


def test_defaults_are_the_papers_and_echoed() -> None:
    r = raidlab.reliability()
    assert r.inputs["backup_nvram_mb"] == 2
    assert r.inputs["write_cache_mb"] == [16, 32, 64]
    assert r.inputs["mttr_h"] == 48 and r.inputs["mttf_disk_h"] == 1e6
    assert len(r.rows) == 15
    # raidlab's triple RAPID-Cache row: RAPID-DP's MTTDL over the second backup's window failure.
    rows = {(x["write_cache_mb"], x["architecture"]): x for x in r.rows}
    assert rows[(16, "triple-rapid")]["mttdl_h"] == pytest.approx(rows[(16, "rapid-dp")]["mttdl_h"] / (1.1e-5 * 48), rel=1e-9)
    frame = r.to_frame()
    assert list(frame.columns) == ["read_cache_mb", "write_cache_mb", "architecture", "mttdl_h", "cost_usd"]


def test_directions_hold_across_inputs() -> None:
    # A worse NVRAM hurts single NVRAM most; a dedicated cache disk adds $100 to RAPID only.
    base = by_arch(raidlab.reliability(write_cache_mb=[32]))
    worse = by_arch(raidlab.reliability(write_cache_mb=[32], mttf_nvram_h=15_000))
    disk = by_arch(raidlab.reliability(write_cache_mb=[32], dedicated_cache_disk=True))
    for arch in ARCHS:
        assert worse[(32, arch)]["mttdl_h"] < base[(32, arch)]["mttdl_h"]
        extra = disk[(32, arch)]["cost_usd"] - base[(32, arch)]["cost_usd"]
        assert extra == pytest.approx(100.0 if arch.startswith("rapid") else 0.0)
    ratio = worse[(32, "single-nvram")]["mttdl_h"] / base[(32, "single-nvram")]["mttdl_h"]
    assert ratio == pytest.approx(15_000 / 200_000)


def test_config_file_and_overrides(tmp_path: Path) -> None:
    p = tmp_path / "rel.toml"
    p.write_text("[reliability]\nwrite_cache_mb = [128]\nnvram_usd_per_mb = 10\n")
    r = raidlab.reliability(p, read_cache_mb=0)
    row = by_arch(r)[(128, "single-nvram")]
    assert row["cost_usd"] == pytest.approx(1280.0)
    assert raidlab.reliability({"reliability": {"write_cache_mb": [8]}}).rows[0]["write_cache_mb"] == 8


@pytest.mark.parametrize(
    ("inputs", "key"),
    [
        ({"mttf_nvram_h": -200_000}, "reliability.mttf_nvram_h"),
        ({"mttr_h": 0}, "reliability.mttr_h"),
        ({"write_cache_mb": [16, 0]}, "reliability.write_cache_mb[1]"),
        ({"backup_nvram_mb": 0}, "reliability.backup_nvram_mb"),
        ({"disk_usd_per_mb": -1}, "reliability.disk_usd_per_mb"),
        ({"mtbf_h": 1}, "reliability.mtbf_h"),
    ],
)
def test_bad_inputs_name_their_key(inputs: dict, key: str) -> None:
    with pytest.raises(raidlab.ConfigError) as e:
        raidlab.reliability(**inputs)
    assert e.value.key == key


def test_cli_table_and_json(capsys) -> None:
    assert main(["reliability", "--backup-nvram-mb", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"inputs", "rows", "version"}
    rows = {(r["write_cache_mb"], r["architecture"]): r for r in out["rows"]}
    assert rows[(16, "rapid-np")]["mttdl_h"] == pytest.approx(4.53e7, rel=0.01)
    assert main(["reliability", "--write-cache-mb", "16", "64"]) == 0
    text = capsys.readouterr().out
    assert "64/16" in text and "64/64" in text and "64/32" not in text
    assert "1.25e+04" in text and "1,792.00" in text


def test_cli_bad_input_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["reliability", "--mttf-disk-h", "-1"]) == 2
    assert "reliability.mttf_disk_h" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("[reliability]\nmodule_mb = 0\n")
    assert main(["reliability", str(bad)]) == 2
    assert "reliability.module_mb" in capsys.readouterr().err
    bad.write_text("[reliability\n")
    assert main(["reliability", str(bad)]) == 2
    assert "bad.toml: line 1" in " ".join(capsys.readouterr().err.split())
    assert main(["reliability", str(tmp_path / "missing.toml")]) == 2


def test_side_by_side_with_measured_throughput(tmp_path: Path, capsys) -> None:
    """`--throughput STORE`: the model's rows beside the maximum throughput of a (reduced)
    RAPID reproduction store; sizes the store lacks show no throughput."""
    from raidlab.reproduce import plan_file
    from raidlab.sweep import sweep

    plan = plan_file(Path(__file__).resolve().parent.parent / "experiments" / "rapid-response.toml", skip_traces=True)
    trees = [
        t
        for t in plan.trees
        if t["workload"]["synthetic"]["preset"] == "synthetic-c"
        and t["write_cache"]["capacity_pages"] == 2048
        and t["workload"]["synthetic"]["rate_iops"] in (200, 1600)
        and t["run"]["seed"] == 1
    ]
    assert len(trees) == 6
    for t in trees:
        t["workload"]["synthetic"]["requests"] = 20_000
    store_dir = tmp_path / "store"
    frame = sweep({"runs": trees}, out=store_dir, workers=1)
    assert set(frame["status"]) == {"done"}
    perf = raidlab.reliability_throughput(store_dir)
    assert set(perf) == {(16.0, "dual", ""), (16.0, "rapid", "physical"), (16.0, "rapid", "logical")}
    for by_workload in perf.values():
        assert set(by_workload) == {"synthetic-c"}
        # C's read misses saturate the array between the two rates for every architecture.
        assert by_workload["synthetic-c"]["knee"]
        assert 200.0 < by_workload["synthetic-c"]["iops"] < 1600.0
    assert perf[(16.0, "rapid", "physical")] == perf[(16.0, "dual", "")]
    assert perf[(16.0, "rapid", "logical")]["synthetic-c"]["iops"] < perf[(16.0, "dual", "")]["synthetic-c"]["iops"]
    rows = raidlab.reliability_side_by_side(raidlab.reliability(), perf)
    # Five architectures, the three RAPID ones twice (physical and logical cache disk), three
    # sizes.
    assert len(rows) == 24
    row16 = {(r["architecture"], r["cache_disk"]): r for r in rows if r["write_cache_mb"] == 16}
    assert row16[("single-nvram", "")]["max_throughput_iops"] == perf[(16.0, "dual", "")]
    assert row16[("rapid-dp", "logical")]["max_throughput_iops"] == perf[(16.0, "rapid", "logical")]
    assert row16[("rapid-np", "physical")]["mttdl_h"] > row16[("single-nvram", "")]["mttdl_h"]
    assert all(r["max_throughput_iops"] is None for r in rows if r["write_cache_mb"] != 16)
    assert main(["reliability", "--throughput", str(store_dir)]) == 0
    out = capsys.readouterr().out
    assert "req/s synthetic-c" in out and "logical cache disk" in out
    assert main(["reliability", "--throughput", str(store_dir), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["side_by_side"]) == 24


def test_throughput_from_a_path_that_is_no_store_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["reliability", "--throughput", str(tmp_path)]) == 2
    assert "result store" in " ".join(capsys.readouterr().err.split())
