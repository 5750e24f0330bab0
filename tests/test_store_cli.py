"""The store's CLI end to end: ``raidlab array create/examine``, ``raidlab serve`` and
``raidlab ctl`` as subprocesses; every bad input exits 2 with a message naming the thing, and
a refused assembly writes nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from store_fixtures import (
    DATA_OFFSET,
    MiB,
    ServerPool,
    check,
    cli_bad_input,
    cli_ok,
    create_array,
    ctl,
    digests,
    examine,
    member_paths,
    one_line,
    qemu_io,
    require_tools,
    run_cli,
    status,
    store_servers,  # noqa: F401 (fixture)
    wait_until,
)

SUPERBLOCK = 4096


def test_create_examine_serve_ctl_round_trip(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = tmp_path / "arr"
    out = create_array(d, "raid5", 5, size="4MiB", spares=1, name="rt")
    assert out["name"] == "rt" and out["level"] == "raid5" and out["layout"] == "left-symmetric"
    assert out["disks"] == 5 and out["chunk_bytes"] == 64 * 1024
    assert out["size_bytes"] == 4 * 4 * MiB and out["data_offset_bytes"] == DATA_OFFSET
    assert len(out["members"]) == 5 and len(out["spares"]) == 1
    for i in range(5):
        p = d / f"disk{i}"
        assert p.stat().st_size == DATA_OFFSET + 4 * MiB
    assert (d / "spare0").exists() and (d / "members.json").exists()

    # The human-readable forms work too.
    text = one_line(cli_ok("array", "examine", d))
    assert "rt raid5 (left-symmetric) of 5 members" in text and "clean" in text

    ex = examine(d)
    assert ex["clean"] is True and ex["events"] >= 1 and ex["warnings"] == []
    assert [m["state"] for m in ex["members"]] == ["in_sync"] * 5
    assert [m["slot"] for m in ex["members"]] == list(range(5))
    assert len(ex["spares"]) == 1

    srv = store_servers.start(d)
    assert "rt" in srv.ready and "accepting connections on " + srv.listen in srv.ready
    st = status(d)
    assert st["ok"] is True and st["state"] == "clean" and st["size_bytes"] == 16 * MiB
    assert st["rebuild"] is None and st["faulty"] == [] and len(st["spares"]) == 1
    assert "state clean" in one_line(cli_ok("ctl", d, "status"))

    if shutil.which("qemu-io"):
        qemu_io(srv.uri, "write -P 0xa5 0 1M", "write -P 0x3c 15M 1M", "read -P 0xa5 0 1M", "read -P 0x3c 15M 1M")
    rep = check(d)
    assert rep["ok"] and rep["mismatches"] == 0 and rep["rows"] == 4 * MiB // (64 * 1024)
    assert "0 mismatches" in one_line(cli_ok("ctl", d, "check", "--wait"))

    # fail 99 is refused with exit 2, and the server keeps serving.
    msg = cli_bad_input("ctl", d, "fail", "99")
    assert "99" in msg and "out of range" in msg
    assert srv.running()
    assert status(d)["state"] in ("clean", "active")
    # A slot that is not a number is a usage error (argparse: exit 2 too).
    r = run_cli("ctl", d, "fail", "one")
    assert r.returncode == 2 and "slot number" in r.stderr

    # fail a member: the spare takes its place by itself.
    assert "fail: ok" in one_line(cli_ok("ctl", d, "fail", "2"))

    def rebuilt() -> bool:
        s = status(d)
        return s["rebuild"] is None and all(m["state"] == "in_sync" for m in s["members"])

    wait_until(rebuilt, 60, "the rebuild onto the spare")
    st = status(d)
    assert st["members"][2]["path"].endswith("spare0")
    assert [f["slot"] for f in st["faulty"]] == [2] and st["spares"] == []
    if shutil.which("qemu-io"):
        qemu_io(srv.uri, "read -P 0xa5 0 1M", "read -P 0x3c 15M 1M")
    assert check(d)["mismatches"] == 0

    # remove the faulty device by its slot.
    assert "removed" in one_line(cli_ok("ctl", d, "remove", "2"))
    assert status(d)["faulty"] == []

    log = srv.stop()
    assert "stopped" in log
    ex = examine(d)
    assert ex["clean"] is True
    assert [Path(m["path"]).name for m in ex["members"]] == ["disk0", "disk1", "spare0", "disk3", "disk4"]

    # served again after a clean stop: same data, nothing to resync.
    srv = store_servers.start(d)
    assert status(d)["resync"]["pending_regions"] == 0
    if shutil.which("qemu-io"):
        qemu_io(srv.uri, "read -P 0xa5 0 1M", "read -P 0x3c 15M 1M")
    srv.stop()


def _rebuild_onto_a_spare(tmp_path: Path, store_servers: ServerPool, *serve: str) -> dict:  # noqa: F811
    """Serve a RAID-5 of 5 with a spare and ``serve`` options (saved with ``--save-config``),
    write two patterns, fail a member, wait for the rebuild and read the patterns back;
    returns ``last_rebuild``."""
    d = tmp_path / "arr"
    create_array(d, "raid5", 5, size="4MiB", spares=1)
    srv = store_servers.start(d, *serve, "--save-config")
    saved = (d / "raidlab.toml").read_text()
    for key, value in zip(serve[::2], serve[1::2]):
        assert f"{key[2:]} = " in saved and value in saved, saved
    if shutil.which("qemu-io"):
        qemu_io(srv.uri, "write -P 0x5a 0 2M", "write -P 0xc3 14M 2M")
    assert "fail: ok" in one_line(cli_ok("ctl", d, "fail", "1"))

    def rebuilt() -> bool:
        s = status(d)
        return s["rebuild"] is None and all(m["state"] == "in_sync" for m in s["members"])

    wait_until(rebuilt, 60, "the rebuild onto the spare")
    last = status(d)["last_rebuild"]
    if shutil.which("qemu-io"):
        qemu_io(srv.uri, "read -P 0x5a 0 2M", "read -P 0xc3 14M 2M")
    assert check(d)["mismatches"] == 0
    srv.stop()
    return dict(last)


def test_rebuild_in_unit_sized_runs_restores_every_byte(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    """``--rebuild-run-kib 64`` (one 64 KiB chunk): the rebuild reads a unit per operation
    (stripe-oriented, four rows in flight) and still restores every byte; it is saved with
    ``--save-config`` like the other serve options."""
    last = _rebuild_onto_a_spare(tmp_path, store_servers, "--rebuild-run-kib", "64")
    assert (last["kind"], last["rows"]) == ("full", 64)


def test_a_disk_oriented_rebuild_restores_every_byte(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    """``--rebuild-executor dor``: the simulator's DOR state machine drives the rebuild (a
    reader per survivor, one 64 KiB unit a read here); every byte comes back, the parity
    checks clean, and with no writes during the rebuild no row is read twice."""
    last = _rebuild_onto_a_spare(tmp_path, store_servers, "--rebuild-executor", "dor,buffers=16", "--rebuild-run-kib", "64")
    assert (last["kind"], last["rows"], last["rows_reread"]) == ("full", 64, 0)


@pytest.mark.parametrize(
    "spec, says",
    [("sor", 'expected "runs" or'), ("dor,depth=0", "depth: expected 1 to 64"), ("dor,width=2", "unknown parameter")],
)
def test_a_bad_rebuild_executor_is_refused(tmp_path: Path, spec: str, says: str) -> None:
    d = _raid5(tmp_path)
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0", "--rebuild-executor", spec)
    assert "--rebuild-executor" in msg and says in msg, msg


@pytest.mark.parametrize("kib", ["0", "3", "1025"])
def test_a_rebuild_run_size_out_of_range_is_refused(tmp_path: Path, kib: str) -> None:
    d = _raid5(tmp_path)
    if kib == "0":
        # argparse's positive integer: a usage error, exit 2 too.
        r = run_cli("serve", d, "--rebuild-run-kib", kib, timeout=60)
        assert r.returncode == 2 and "--rebuild-run-kib" in r.stderr
        return
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0", "--rebuild-run-kib", kib)
    assert "--rebuild-run-kib" in msg and "4 to 1024" in msg and kib in msg


@pytest.mark.parametrize(
    "args, names",
    [
        (["--level", "raid7", "--disks", "5", "--size", "4MiB"], ["--level", "raid7"]),
        (["--level", "raid5", "--disks", "5", "--size", "4XB"], ["--size", "4XB"]),
        (["--level", "raid5", "--disks", "5", "--size", "-1"], ["--size"]),
        (["--level", "raid5", "--disks", "5", "--size", "4MiB", "--chunk", "3000"], ["chunk"]),
        (["--level", "raid5", "--disks", "2", "--size", "4MiB"], ["raid5", "2"]),
        (["--level", "raid10", "--disks", "5", "--size", "4MiB"], ["raid10", "5"]),
        (["--level", "raid5", "--disks", "5", "--size", "4MiB", "--layout", "diagonal"], ["diagonal"]),
    ],
)
def test_create_bad_input(tmp_path: Path, args: list[str], names: list[str]) -> None:
    d = tmp_path / "arr"
    msg = cli_bad_input("array", "create", d, *args)
    for n in names:
        assert n in msg, msg
    assert not (d / "members.json").exists()


def test_create_refuses_existing_array_without_force(tmp_path: Path) -> None:
    d = tmp_path / "arr"
    first = create_array(d, "raid5", 4, size="1MiB")
    before = digests([*member_paths(d), d / "members.json"])
    msg = cli_bad_input("array", "create", d, "--level", "raid6", "--disks", "4", "--size", "1MiB")
    assert "members.json" in msg and "force" in msg
    assert digests([*member_paths(d), d / "members.json"]) == before
    out = cli_ok("array", "create", d, "--level", "raid6", "--disks", "4", "--size", "1MiB", "--force")
    assert "raid6" in out
    assert examine(d)["uuid"] != first["uuid"]


def _raid5(tmp_path: Path, name: str = "arr") -> Path:
    d = tmp_path / name
    create_array(d, "raid5", 5, size="2MiB")
    return d


def _refused(d: Path, names: list[str], extra: list[Path] | None = None) -> None:
    """examine and serve both exit 2 naming every string of ``names``, and change no byte of
    any member file (nor ``extra``)."""
    files = [*member_paths(d), d / "members.json", *(extra or [])]
    before = digests(files)
    for args in (["array", "examine", d], ["serve", d, "--listen", "127.0.0.1:0"]):
        msg = cli_bad_input(*args, timeout=60)
        for n in names:
            assert n in msg, (args, msg)
    assert digests(files) == before
    assert not (d / "control.sock").exists()


def test_corrupt_superblocks_beyond_what_the_level_survives_are_refused(tmp_path: Path) -> None:
    """One corrupt superblock leaves its member out (tests/test_store_ops.py); two stop a
    RAID-5."""
    d = _raid5(tmp_path)
    for name in ("disk1", "disk3"):
        with open(d / name, "r+b") as f:
            f.seek(SUPERBLOCK + 200)
            b = f.read(1)
            f.seek(SUPERBLOCK + 200)
            f.write(bytes([b[0] ^ 0xFF]))
    _refused(d, ["disk1", "disk3", "checksum", "corrupt", "cannot assemble"])


def test_member_of_another_array_is_refused(tmp_path: Path) -> None:
    d = _raid5(tmp_path)
    other = _raid5(tmp_path, "other")
    shutil.copyfile(other / "disk3", d / "disk3")
    _refused(d, ["disk3", "another array", '"other"'])


def test_stale_member_is_refused(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    require_tools("qemu-io")
    d = _raid5(tmp_path)
    old = tmp_path / "disk2.old"
    shutil.copyfile(d / "disk2", old)
    srv = store_servers.start(d)
    qemu_io(srv.uri, "write -P 7 0 1M")
    srv.stop()
    assert examine(d)["events"] > 1
    shutil.copyfile(old, d / "disk2")
    _refused(d, ["disk2", "stale"])


def test_too_small_member_is_refused(tmp_path: Path) -> None:
    d = _raid5(tmp_path)
    with open(d / "disk1", "r+b") as f:
        f.truncate(DATA_OFFSET + MiB)
    _refused(d, ["disk1", "too small"])


def test_two_missing_raid5_members_are_refused(tmp_path: Path) -> None:
    d = _raid5(tmp_path)
    (d / "disk1").unlink()
    (d / "disk3").unlink()
    _refused(d, ["disk1", "disk3", "cannot assemble"])


def test_one_missing_raid5_member_serves_degraded(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    (d / "disk4").unlink()
    ex = examine(d)
    assert any("disk4" in w for w in ex["warnings"]), ex
    srv = store_servers.start(d)
    assert "degraded" in srv.ready
    assert status(d)["state"] == "degraded"
    srv.stop()


def test_ctl_without_server_exits_2(tmp_path: Path) -> None:
    d = _raid5(tmp_path)
    for args in (["status"], ["status", "--json"], ["check"], ["fail", "1"]):
        r = ctl(d, *args, timeout=30)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        msg = one_line(r.stderr)
        assert str(d) in msg or "control.sock" in msg, msg
    r = ctl(tmp_path / "nowhere", "status", timeout=30)
    assert r.returncode == 2 and "nowhere" in r.stderr


def test_examine_of_a_directory_without_array_exits_2(tmp_path: Path) -> None:
    msg = cli_bad_input("array", "examine", tmp_path / "nothing")
    assert "nothing" in msg


def test_create_on_explicit_member_files_resyncs_them_when_served(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    """Explicit members (files here; block devices alike) may follow the options, as with
    mdadm. They keep their old bytes, so the array starts dirty and the first serve resyncs
    parity; a member too small for the size asked is refused before anything is written."""
    files = [tmp_path / f"m{i}" for i in range(3)]
    for i, f in enumerate(files):
        f.write_bytes(bytes([i + 1]) * (3 * MiB))
    d = tmp_path / "arr"
    out = cli_ok("array", "create", d, "--level", "raid5", "--disks", "3", "--chunk", "64KiB", "--size", "2MiB", *files)
    assert "resynced when first served" in out
    ex = examine(d)
    assert [m["path"] for m in ex["members"]] == [str(f) for f in files]
    assert ex["clean"] is False
    srv = store_servers.start(d)
    wait_until(lambda: status(d)["state"] in ("clean", "active"), timeout=60, what="the initial resync")
    assert check(d)["mismatches"] == 0
    srv.stop()
    msg = cli_bad_input("array", "create", tmp_path / "arr2", "--level", "raid1", "--disks", "2", "--size", "2MiB", *files[:2])
    assert "already a member" in msg and "--force" in msg
    fresh, small = tmp_path / "fresh", tmp_path / "small"
    fresh.write_bytes(b"\0" * (3 * MiB))
    small.write_bytes(b"\0" * MiB)
    msg = cli_bad_input("array", "create", tmp_path / "arr3", "--level", "raid1", "--disks", "2", "--size", "2MiB", fresh, small)
    assert "small" in msg
    assert not (tmp_path / "arr3" / "members.json").exists()
