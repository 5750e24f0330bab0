"""``raidlab reproduce NAME --store`` (issue 30, items 4-5): one tiny store cell end to end — a
served RAID-5 of three disk-timed members, a scheduled replay, a member failed and rebuilt by
control commands at their times — beside the simulator's prediction of the same set-up, in
the report and claims formats the simulator's runs write. A few seconds of real time."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from store_fixtures import (
    ServerPool,
    cli_bad_input,
    cli_ok,
    create_array,
    status,
    store_servers,  # noqa: F401 (fixture)
)

TINY = """
[report]
title = "tiny PRO cell"
rows = ["array.disks"]
columns = "rebuild.order"
values = ["rebuild_s", "during_latency_mean_ms"]
compare = [["sequential", "pro"]]
better = "lower"

[report.store]
seeds = [1]
member_mib = 16
values = ["rebuild_s", "during_latency_mean_ms", "latency_mean_ms"]
workers = 8

[workload]
block_size = 4096

[workload.synthetic]
kind = "websearch"
requests = 100000
mean_interarrival_ms = 10.0
space_gib = 0.03

[cache]
policy = "lru"
capacity_blocks = 1

[array]
level = "raid5"
disks = 3
stripe_unit = 65536

[run]
mode = "timed"
seed = 1
driver = "open"
duration_s = 6

[disk]
preset = "st3146807lc"
queue = "clook"

[rebuild]
spares = 1
order = "sequential"
extent_gib = 0.015625

[[events]]
at_s = 2
fail = 0

[[events]]
at_s = 2
rebuild = 0

[sweep]
"rebuild.order" = ["sequential", "pro"]
"""


def test_a_tiny_store_cell_runs_beside_its_simulator_prediction(tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "tiny.toml").write_text(TINY)
    out = tmp_path / "out"
    cli_ok("reproduce", "tiny", "--store", "--experiments", exp, "--out", out, timeout=300)
    dest = out / "tiny-store"
    assert (dest / "report.html").exists()
    cells = pd.read_csv(dest / "cells.csv")
    # Two orders, each on both drivers.
    assert sorted(zip(cells["rebuild.order"], cells["driver"])) == [
        ("pro", "store"),
        ("pro", "store-sim"),
        ("sequential", "store"),
        ("sequential", "store-sim"),
    ]
    store = cells[cells["driver"] == "store"]
    sim = cells[cells["driver"] == "store-sim"].set_index("rebuild.order")
    assert (store["errors"] == 0).all()
    assert store["rebuild_done"].all()
    # The rows read twice by the disk-oriented rebuild (a write between a job's reads): at
    # most the 256 rows of a 16 MiB member.
    assert store["rebuild_rows_reread"].between(0, 256).all()
    # The same arrivals (the core's schedule, same seed) reach both drivers: 6 s at 10 ms.
    assert (store["completed"] == sim.loc[store["rebuild.order"], "completed"].to_numpy()).all()
    for _, row in store.iterrows():
        s = sim.loc[row["rebuild.order"]]
        # Real time cannot beat the model every member operation waits for; the upper ends
        # leave room for a loaded machine (the store runs the simulator's DOR itself: on a
        # quiet machine 1.21x the model's rebuild here, 1.06x its mean response).
        assert 0.8 * s["latency_mean_ms"] <= row["latency_mean_ms"] <= 3.0 * s["latency_mean_ms"], (row, s)
        assert 0.8 * s["rebuild_s"] <= row["rebuild_s"] <= 3.0 * s["rebuild_s"], (row, s)
        assert row["during_latency_count"] > 0
    claims = json.loads((dest / "claims.json").read_text())
    drivers = {(c["driver"], c["metric"]) for c in claims}
    assert {("store", "rebuild_s"), ("store-sim", "rebuild_s"), ("store", "during_latency_mean_ms")} <= drivers
    assert all(c["file"] == "tiny.toml" and c["comparison"] == "3: pro vs sequential" for c in claims)
    # Run again: the store cells measured with the same config are reused, not re-run.
    again = cli_ok("reproduce", "tiny", "--store", "--experiments", exp, "--out", out, timeout=300)
    assert again.count("store: measured before") == 2, again
    cells2 = pd.read_csv(dest / "cells.csv")
    first = cells[cells["driver"] == "store"]["rebuild_s"].tolist()
    assert cells2[cells2["driver"] == "store"]["rebuild_s"].tolist() == first


def test_an_experiment_without_store_cells_is_refused_naming_the_table(tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "plain.toml").write_text(TINY.replace("[report.store]", "[report.elsewhere]"))
    msg = cli_bad_input("reproduce", "plain", "--store", "--experiments", exp, "--out", tmp_path / "out")
    assert "report.store" in msg and "plain.toml" in msg, msg


RAMP = """
[workload]
block_size = 4096
ops = "reads"

[workload.synthetic]
kind = "uniform"
keys = 1024
requests = 1000000

[cache]
policy = "lru"
capacity_blocks = 1

[array]
level = "raid1"
disks = 2

[run]
mode = "timed"
seed = 3
driver = "ramp"
levels_iops = [20.0, 3000.0, 5000.0]
level_s = 1.0
warmup_s = 0.5

[disk]
preset = "st3146807lc"
"""


def test_a_scheduled_ramp_stops_after_the_level_the_array_cannot_keep_up_with(
    tmp_path: Path,
    store_servers: ServerPool,  # noqa: F811
) -> None:
    d = tmp_path / "arr"
    create_array(d, "raid1", 2, size="4MiB")
    # 10 ms per read and 4 connections: at most 400 reads/s, whatever the machine.
    srv = store_servers.start(d, "--timing", "constant,read-ms=10,write-ms=10")
    cfg = tmp_path / "ramp.toml"
    cfg.write_text(RAMP)
    log = tmp_path / "requests.csv"
    out = json.loads(cli_ok("replay", srv.uri, cfg, "--schedule", "--qd", 4, "--log", log, "--json", timeout=120))
    levels = out["ramp"]
    # 20 IOPS keeps up at about the member's 10 ms; 3000 cannot, and the ramp stops there.
    assert [lv["level_iops"] for lv in levels] == [20.0, 3000.0], levels
    assert not levels[0]["saturated"] and levels[1]["saturated"], levels
    assert 10.0 <= levels[0]["latency_mean_ms"] < 30.0, levels
    assert levels[1]["iops"] < 450.0, levels
    assert out["errors"] == 0
    lines = log.read_text().splitlines()
    assert lines[0] == "arrival_ns,latency_ns,op,ok"
    assert len(lines) - 1 == out["requests"]
    # Every read took at least the member's 10 ms.
    assert min(int(line.split(",")[1]) for line in lines[1:]) >= 10_000_000
    msg = cli_bad_input("replay", srv.uri, cfg, "--log", log)
    assert "--log" in msg and "--schedule" in msg, msg
    msg = cli_bad_input("replay", srv.uri, cfg, "--schedule", "--qd", 1025)
    assert "--qd" in msg and "1 to 1024" in msg, msg
    srv.stop()


def test_a_scheduled_replay_keeps_hundreds_of_requests_in_flight(
    tmp_path: Path,
    store_servers: ServerPool,  # noqa: F811
) -> None:
    """The simulator's open loop puts every arrival in the array at once; the replay comes
    close with up to 1024 connections and a server worker for each. At 3000 reads/s on two
    members of 10 ms each (200/s) the backlog builds in the members' own queues: more than
    the 64 that connections or workers allowed before."""
    d = tmp_path / "arr"
    create_array(d, "raid1", 2, size="4MiB")
    srv = store_servers.start(d, "--timing", "constant,read-ms=10,write-ms=10", "--workers", "256", "--max-connections", "300")
    cfg = tmp_path / "ramp.toml"
    cfg.write_text(RAMP.replace("levels_iops = [20.0, 3000.0, 5000.0]", "levels_iops = [20.0, 3000.0]"))
    out = json.loads(cli_ok("replay", srv.uri, cfg, "--schedule", "--qd", 256, "--json", timeout=120))
    assert out["errors"] == 0 and out["workers"] == 256
    assert [lv["saturated"] for lv in out["ramp"]] == [False, True], out["ramp"]
    queued = [m["timing"]["queue_max"] for m in status(d)["members"]]
    assert sum(queued) > 64 and max(queued) <= 256, queued
    srv.stop()


def test_a_rebuild_is_served_with_the_experiments_dor(tmp_path: Path) -> None:
    from raidlab.storexp import serve_args

    def served(tree: dict) -> tuple[str, str]:
        args = serve_args(tree, tmp_path)
        return args[args.index("--rebuild-executor") + 1], args[args.index("--rebuild-run-kib") + 1]

    tree = {"name": "reb", "disk": {"preset": "st3146807lc"}, "array": {"stripe_unit": 65536}, "rebuild": {"order": "pro"}}
    # The simulator's defaults: 64 buffers, depth 2, a unit a read.
    assert served(tree) == ("dor,buffers=64,depth=2", "64")
    tree["rebuild"].update(buffers=32, depth=3)
    for units, kib in ((1, "64"), (4, "256"), (16, "1024"), (64, "1024")):
        tree["rebuild"]["read_units"] = units
        assert served(tree) == ("dor,buffers=32,depth=3", kib), units
    tree["array"]["stripe_unit"] = 4096
    tree["rebuild"]["read_units"] = 1
    assert served(tree)[1] == "4"
    tree["rebuild"]["executor"] = "sor"
    with pytest.raises(Exception, match="executor") as e:
        serve_args(tree, tmp_path)
    assert getattr(e.value, "key", None) == "rebuild.executor"


def test_a_rapid_backup_is_served_with_its_nvram_segment_buffers(tmp_path: Path) -> None:
    from raidlab.storexp import serve_args

    tree = {
        "name": "rapid",
        "disk": {"preset": "hp97560_rapid"},
        "workload": {"block_size": 8192},
        "write_cache": {"capacity_pages": 2048, "rate": "linear"},
        "backup": {"kind": "rapid", "cache_disk": "logical", "nvram_kib": 2048, "segment_kib": 256, "segment_buffers": 3},
    }
    args = serve_args(tree, tmp_path)
    i = args.index("--backup")
    assert args[i : i + 12] == ["--backup", "log", "--log-mode", "logical", "--segment", "256KiB", "--log-size", "256MiB", "--log-nvram", str(tmp_path / "nvram"), "--log-nvram-slots", "3"]
    # The cache disk's size is the log's.
    tree["backup"]["disk_mib"] = 64
    args = serve_args(tree, tmp_path)
    assert args[args.index("--log-size") + 1] == "64MiB"
    # The dual copy (the store's mirror) is unchanged.
    tree["backup"] = {"kind": "dual"}
    args = serve_args(tree, tmp_path)
    assert args[args.index("--backup") :] == ["--backup", "mirror"]
    # A worker for each of the replay's connections, at least 64; room for them all.
    assert args[args.index("--workers") + 1] == "64" and args[args.index("--max-connections") + 1] == "128"
    args = serve_args(tree, tmp_path, connections=512)
    assert args[args.index("--workers") + 1] == "512" and args[args.index("--max-connections") + 1] == "528"


@pytest.mark.parametrize(
    "path",
    sorted((Path(__file__).resolve().parents[1] / "experiments").glob("*.toml")),
    ids=lambda p: p.stem,
)
def test_every_shipped_experiment_loads_and_its_store_cells_plan(path: Path) -> None:
    """Each experiment file validates in the core (every run of its sweep), and where it has
    a ``[report.store]`` table, the cells it keeps map onto ``raidlab serve`` options; a file
    broken by a renamed key fails here, not an hour into a reproduction."""
    from raidlab import reproduce, storexp

    plan = reproduce.plan_file(path, skip_traces=True)
    assert plan.trees or plan.skipped, path
    store = plan.spec.get("store")
    if store is None:
        return
    cells = storexp.cells(plan.trees, store, path)
    # Every seed the table names is served (a `where` that drops a seed's runs is a typo).
    assert {tree["run"]["seed"] for tree in cells} == set(store.get("seeds", [tree["run"]["seed"] for tree in cells]))
    for tree in cells:
        args = storexp.serve_args(tree, Path("cell"))
        assert args[0] == "--timing" and args[1].startswith(tree["disk"]["preset"]), args
