"""``raidlab ctl DIR re-add`` with the write-intent bitmap (md's ``--re-add``): a member that
left in sync goes back into its slot and only the regions written while it was away are
rebuilt onto it; the bits of those regions are kept while the array is degraded, across a
``kill -9`` and a restart."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from store_fixtures import (
    KiB,
    MiB,
    Server,
    ServerPool,
    check,
    cli_ok,
    create_array,
    examine,
    qemu_io,
    require_tools,
    status,
    store_servers,  # noqa: F401 (fixture)
    wait_until,
)

CHUNK = 64 * KiB
# RAID-5 of 4: a row holds 3 data chunks; 4 MiB per member make 64 rows, one bitmap region
# each (`--bitmap-chunk 64KiB`; md's default, 64 MiB, would make the array one region).
ROW = 3 * CHUNK
MEMBER = 4 * MiB
BASE = 0x11
# (row, pattern) of the 4 KiB writes made while slot 2 is out: three distinct regions.
DEGRADED_WRITES = [(5, 0x21), (17, 0x22), (40, 0x23), (17, 0x24)]


def _offset(i: int, row: int) -> int:
    return row * ROW + (i % 3) * 4 * KiB


def _start(tmp_path: Path, store_servers: ServerPool) -> tuple[Path, Server]:  # noqa: F811
    require_tools("qemu-io")
    d = tmp_path / "arr"
    create_array(d, "raid5", 4, size="4MiB", chunk="64KiB", bitmap_chunk="64KiB")
    srv = store_servers.start(d)
    qemu_io(srv.uri, f"write -P {BASE} 0 {64 * ROW}")
    # Healthy: the bits of the first writes are cleared once idle (2 s).
    wait_until(lambda: status(d)["resync"]["dirty_regions"] == 0, 30, "the bitmap to clear")
    return d, srv


def _write_degraded(srv: Server) -> None:
    for i, (row, p) in enumerate(DEGRADED_WRITES):
        qemu_io(srv.uri, f"write -P {p} {_offset(i, row)} 4k")


def _verify(srv: Server) -> None:
    """Every block reads back as written: BASE everywhere but the degraded writes."""
    last: dict[int, int] = {}
    for i, (row, p) in enumerate(DEGRADED_WRITES):
        last[_offset(i, row)] = p
    cmds = []
    at = 0
    for off in sorted(last):
        if off > at:
            cmds.append(f"read -P {BASE} {at} {off - at}")
        cmds.append(f"read -P {last[off]} {off} 4k")
        at = off + 4 * KiB
    cmds.append(f"read -P {BASE} {at} {64 * ROW - at}")
    qemu_io(srv.uri, *cmds)


def _re_add_and_wait(d: Path, target: object) -> tuple[dict[str, Any], dict[str, Any]]:
    rep: dict[str, Any] = json.loads(cli_ok("ctl", d, "re-add", target, "--json"))
    st = wait_until(lambda: (s := status(d))["state"] in ("clean", "active") and s, 60, "the partial resync")
    return rep, st


def _assert_partial(rep: dict[str, Any], st: dict[str, Any]) -> None:
    regions = 3
    region_bytes = st["resync"]["region_bytes"]
    assert region_bytes == CHUNK
    assert rep["resync"] == "partial", rep
    assert (rep["slot"], rep["regions"], rep["bytes"], rep["member_bytes"]) == (2, regions, regions * CHUNK, MEMBER), rep
    last = st["last_rebuild"]
    assert last["kind"] == "partial" and last["slot"] == 2, last
    assert last["bytes"] < last["member_bytes"] == MEMBER, last
    assert last["bytes"] == last["regions"] * region_bytes == regions * CHUNK == 196_608, last
    assert [m["state"] for m in st["members"]] == ["in_sync"] * 4


def test_re_add_after_remove_resyncs_only_the_dirty_regions(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d, srv = _start(tmp_path, store_servers)
    cli_ok("ctl", d, "fail", "2")
    cli_ok("ctl", d, "remove", "2")
    assert "disk2" not in (d / "members.json").read_text()
    ex = examine(d / "disk2")
    assert (ex["role"], ex["former_slot"]) == ("faulty", 2) and ex["left_in_sync"] <= ex["events"], ex
    text = cli_ok("array", "examine", d / "disk2")
    assert f"left slot 2 in sync at event {ex['left_in_sync']}" in text, text
    _write_degraded(srv)
    # Degraded: the bits stay set past the idle time that clears them on a whole array.
    time.sleep(2.6)
    assert status(d)["resync"]["dirty_regions"] == 3
    rep, st = _re_add_and_wait(d, d / "disk2")
    _assert_partial(rep, st)
    assert "disk2" in (d / "members.json").read_text()
    assert "re-add of" in srv.log() and "resyncing 3 dirty region(s)" in srv.log(), srv.log()
    assert "partial re-add, 3 dirty region(s): 3 rows, 196608 of 4194304 bytes written" in srv.log(), srv.log()
    assert check(d)["mismatches"] == 0
    _verify(srv)
    # Whole again: the bits are cleared.
    wait_until(lambda: status(d)["resync"]["dirty_regions"] == 0, 30, "the bitmap to clear")
    text = cli_ok("ctl", d, "status")
    assert "last rebuild: slot 2" in text and "(partial, 3 dirty region(s))" in text, text
    srv.stop()


def test_re_add_after_a_kill_while_degraded(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d, srv = _start(tmp_path, store_servers)
    cli_ok("ctl", d, "fail", "2")
    _write_degraded(srv)
    srv.kill()
    # Restarted dirty and degraded: disk2 is left out (its superblock says faulty), the
    # bitmaps still hold the regions written while it was out.
    srv = store_servers.start(d)
    st = wait_until(lambda: (s := status(d))["resync"]["pending_regions"] == 0 and s, 60, "the resync")
    assert st["state"] == "degraded" and st["faulty"] == [{"path": str(d / "disk2"), "slot": 2}], st
    assert st["resync"]["dirty_regions"] == 3
    text = cli_ok("ctl", d, "re-add", "2")
    assert "back in slot 2: resyncing 3 dirty region(s), 196,608 of 4,194,304 bytes" in text, text
    st = wait_until(lambda: (s := status(d))["state"] in ("clean", "active") and s, 60, "the partial resync")
    _assert_partial({"resync": "partial", "slot": 2, "regions": 3, "bytes": 3 * CHUNK, "member_bytes": MEMBER}, st)
    assert check(d)["mismatches"] == 0
    _verify(srv)
    srv.stop()
    # And a clean restart serves it whole.
    srv = store_servers.start(d)
    assert [m["state"] for m in status(d)["members"]] == ["in_sync"] * 4
    _verify(srv)
    srv.stop()


def test_re_add_of_a_stranger_is_a_full_rebuild(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d, srv = _start(tmp_path, store_servers)
    cli_ok("ctl", d, "fail", "1")
    cli_ok("ctl", d, "remove", "1")
    _write_degraded(srv)
    # Bits cleared while it was away cannot happen here; a device that was never a member can.
    blank = tmp_path / "blank"
    blank.write_bytes(b"")
    with open(blank, "r+b") as f:
        f.truncate(MEMBER + MiB)
    rep, st = _re_add_and_wait(d, blank)
    assert rep["resync"] == "full" and "not a raidlab member" in rep["full_because"], rep
    assert st["last_rebuild"]["kind"] == "full" and st["last_rebuild"]["bytes"] == MEMBER, st["last_rebuild"]
    assert "re-add of" in srv.log() and "full rebuild" in srv.log()
    assert check(d)["mismatches"] == 0
    _verify(srv)
    srv.stop()
