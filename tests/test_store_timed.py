"""Disk-timed members (issue 30): ``raidlab serve --timing`` puts each member behind one of the
core's disk models, ``ctl status`` shows the model and its counters, and a bad spec is refused
naming the option. Only lower bounds on real time are asserted (the machine may be loaded)."""

from __future__ import annotations

import time
from pathlib import Path

from store_fixtures import (
    ServerPool,
    check,
    cli_bad_input,
    cli_ok,
    create_array,
    qemu_io,
    require_tools,
    status,
    store_servers,  # noqa: F401 (fixture)
    wait_until,
)


def test_timed_members_take_their_model_time_and_show_it(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = tmp_path / "arr"
    # 2 MiB per member in 64 KiB chunks: a check reads 32 rows, one unit per member each.
    create_array(d, "raid5", 4, size="2MiB", spares=1)
    srv = store_servers.start(d, "--timing", "constant,read-ms=2,write-ms=2 1=sata_ssd,scheduler=sstf")
    t = time.monotonic()
    rep = check(d)
    elapsed = time.monotonic() - t
    assert rep["mismatches"] == 0, rep
    # Member 0 served its 32 check reads one at a time, 2 ms each.
    assert elapsed >= 32 * 0.002, elapsed
    members = status(d)["members"]
    specs = [m["timing"]["spec"] for m in members]
    assert specs == ["constant,read-ms=2,write-ms=2", "sata_ssd,scheduler=sstf"] + ["constant,read-ms=2,write-ms=2"] * 2
    for m in members:
        tm = m["timing"]
        assert tm["ops"] >= 32, m
        assert tm["queue_max"] >= 1 and tm["queue_now"] == 0, m
        assert tm["late_us_mean"] >= 0, m
        # The check's reads carry the background class (foreground, destage, rebuild, background).
        assert tm["class_ops"][3] >= 32, m
    assert members[0]["timing"]["service_us_mean"] == 2000.0
    # One operation in service at a time, 2 ms each: busy exactly that long; the check's
    # reads waited in the background class only.
    m0 = members[0]["timing"]
    assert m0["busy_us"] == m0["ops"] * 2000, m0
    assert len(m0["class_wait_us"]) == 4 and m0["class_wait_us"][0:3] == [0, 0, 0], m0
    assert 0 < members[1]["timing"]["service_us_mean"] < 2000.0
    text = cli_ok("ctl", d, "status")
    assert "sata_ssd,scheduler=sstf" in text and "service us" in text, text
    prom = cli_ok("ctl", d, "status", "--prometheus")
    assert f'raidlab_member_timed_service_us_mean{{array="{d}",slot="0"}} 2000' in prom, prom
    assert "# TYPE raidlab_member_timed_ops_total counter" in prom
    srv.stop()
    # Untimed again: no timing in the status.
    srv = store_servers.start(d)
    assert all(m["timing"] is None for m in status(d)["members"])
    srv.stop()


def test_a_logical_logs_writes_queue_on_the_timed_members(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    # RAPID's logical cache disk is a partition of every member: its writes must take the
    # members' model time in their queues, not bypass them.
    require_tools("qemu-io")
    d = tmp_path / "arr"
    create_array(d, "raid5", 4, size="2MiB")
    wb = ["--write-cache-mib", "4", "--thresholds", "99/98", "--backup", "log", "--log-mode", "logical", "--log-size", "16MiB"]
    srv = store_servers.start(d, "--timing", "constant,read-ms=1,write-ms=1", *wb)
    before = [m["timing"]["ops"] for m in status(d)["members"]]
    for i in range(16):
        qemu_io(srv.uri, f"write -P 0x5a {i * 64}k 64k")
    st = status(d)
    assert st["write_cache"]["destages"] == 0 and st["write_cache"]["write_through_pages"] == 0, st["write_cache"]
    after = [m["timing"]["ops"] for m in st["members"]]
    # Every acknowledged write was committed to the log first: at least one timed write each.
    assert sum(after) - sum(before) >= 16, (before, after)
    assert sum(1 for a, b in zip(after, before, strict=True) if a > b) >= 2, (before, after)
    srv.stop()


def test_a_rebuild_onto_a_timed_spare_carries_the_rebuild_class(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = tmp_path / "arr"
    create_array(d, "raid5", 4, size="2MiB", spares=1)
    srv = store_servers.start(d, "--timing", "constant,read-ms=1,write-ms=1")
    cli_ok("ctl", d, "fail", "2")
    st = wait_until(
        lambda: (s := status(d))["last_rebuild"] and s["state"] in ("clean", "active") and s,
        120,
        "the rebuild onto the spare",
    )
    # 32 rows in two runs of 16: the survivors read and the spare written in the rebuild
    # class, one operation per run (not per row), beside the superblock writes of the
    # background thread, which runs in that class too.
    assert st["members"][2]["path"].endswith("spare0"), st["members"][2]
    for slot in (2, 0):
        ops = st["members"][slot]["timing"]["class_ops"][2]
        assert 2 <= ops < 32, st["members"][slot]
    srv.stop()


def test_bad_timing_is_refused_naming_the_option(tmp_path: Path) -> None:
    d = tmp_path / "arr"
    create_array(d, "raid1", 2, size="2MiB")
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0", "--timing", "wd10")
    assert "--timing" in msg and "unknown disk model" in msg and "wd10eals" in msg and "sata_ssd" in msg, msg
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0", "--timing", "wd10eals,scheduler=elevator")
    assert "--timing" in msg and "fcfs, sstf or clook" in msg, msg
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0", "--timing", "2=wd10eals")
    assert "slot 2" in msg, msg
    (d / "raidlab.toml").write_text('timing = "nope"\n')
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0")
    assert "raidlab.toml" in msg and "timing" in msg and "unknown disk model" in msg, msg


def test_timing_from_the_config_file(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = tmp_path / "arr"
    create_array(d, "raid1", 2, size="2MiB")
    (d / "raidlab.toml").write_text('timing = "hp97560,scheduler=clook"\n')
    srv = store_servers.start(d)
    check(d)
    for m in status(d)["members"]:
        assert m["timing"]["spec"] == "hp97560,scheduler=clook"
        assert m["timing"]["ops"] > 0
    srv.stop()
