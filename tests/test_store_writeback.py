"""The store's write-back cache served over NBD: real clients (fio with verify, qemu-io)
through each backup (mirror, RAPID-Cache's log in its physical and logical modes, none), a
SIGKILL with acknowledged writes only in the cache and its backup, a member failure with
dirty pages cached, and bad input (thresholds, names, a corrupt, foreign, truncated or too
small backup), each refused with exit code 2 and a message naming what is wrong."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from store_fixtures import (
    write_scattered,
    KiB,
    MiB,
    ServerPool,
    check,
    cli_bad_input,
    create_array,
    ctl,
    examine,
    fio_args,
    nbd_read_all,
    qemu_io,
    require_tools,
    run_fio,
    status,
    store_servers,  # noqa: F401 (fixture)
    wait_until,
)

MEMBER = 4 * MiB
BACKUPS = {
    "mirror": ["--backup", "mirror"],
    "log": ["--backup", "log", "--log-size", "32MiB"],
    "log-logical": ["--backup", "log", "--log-mode", "logical", "--log-size", "32MiB"],
    "none": ["--backup", "none"],
}


def make(tmp_path: Path, level: str = "raid5", disks: int = 5, name: str = "arr") -> Path:
    d = tmp_path / name
    create_array(d, level, disks, size=f"{MEMBER // MiB}MiB", chunk="16KiB")
    return d


def wb_args(backup: str, mib: int = 8, destage: str = "stow", thresholds: str = "80/20") -> list[str]:
    return ["--write-cache-mib", str(mib), "--destage", destage, "--thresholds", thresholds, *BACKUPS[backup]]


@pytest.fixture
def clients() -> None:
    require_tools("qemu-io", "nbdcopy", "fio")


@pytest.mark.parametrize(("backup", "destage", "level"), [("mirror", "stow", "raid5"), ("log", "wow", "raid6"), ("log-logical", "lrw", "raid5"), ("none", "cscan", "raid10")])
def test_fio_verifies_through_the_write_cache(tmp_path: Path, store_servers: ServerPool, clients: None, backup: str, destage: str, level: str) -> None:  # noqa: F811
    d = make(tmp_path, level, 6 if level == "raid6" else 4 if level == "raid10" else 5)
    srv = store_servers.start(d, *wb_args(backup, destage=destage))
    size = 8 * MiB
    run_fio(fio_args(srv.uri, size, "--rw=randwrite", "--bsrange=4k-64k", "--iodepth=16", "--do_verify=1"), tmp_path)
    st = status(d)["write_cache"]
    assert st is not None and st["backup"].startswith(backup.split("-")[0]) and st["mode"]["state"] == "backed", st
    assert st["page_writes"] >= size // (4 * KiB) and st["destages"] > 0, st
    if backup != "none":
        assert st["backup_stats"]["commits"] > 0, st
    # The text status names the write cache.
    r = ctl(d, "status")
    assert r.returncode == 0 and "write cache" in r.stdout and destage in r.stdout, r.stdout
    srv.stop()
    assert examine(d)["clean"] is True
    # Everything was destaged at the clean stop: served without a cache, fio verifies again.
    srv = store_servers.start(d)
    run_fio(fio_args(srv.uri, size, "--rw=randwrite", "--bsrange=4k-64k", "--iodepth=16", "--verify_only"), tmp_path)
    rep = check(d)
    assert rep["mismatches"] == 0, rep
    srv.stop()


@pytest.mark.parametrize("backup", ["mirror", "log", "log-logical"])
def test_sigkill_keeps_writes_acknowledged_only_to_the_cache(tmp_path: Path, store_servers: ServerPool, clients: None, backup: str) -> None:  # noqa: F811
    d = make(tmp_path)
    # Thresholds high enough that nothing is destaged: the writes are only in the cache and
    # its backup when the server dies.
    srv = store_servers.start(d, *wb_args(backup, mib=8, thresholds="99/98"))
    model = bytearray(4 * MiB)
    write_scattered(srv.uri, model, 0x31)
    st = status(d)["write_cache"]
    assert st["destages"] == 0 and st["occupied_pages"] > 0, st
    srv.kill()
    # Restarted without a write cache: the backup recorded in wb.json is replayed anyway.
    srv = store_servers.start(d)
    wait_until(lambda: status(d)["resync"]["pending_regions"] == 0, 60, "the resync")
    assert "write-cache backup replayed" in srv.log(), srv.log()
    back = nbd_read_all(srv.uri, tmp_path / "back")
    assert back[: len(model)] == model
    assert check(d)["mismatches"] == 0
    srv.stop()
    assert not (d / "wb.json").exists(), "the replayed backup is retired"


def test_dirty_pages_survive_a_member_failure(tmp_path: Path, store_servers: ServerPool, clients: None) -> None:  # noqa: F811
    d = make(tmp_path)
    srv = store_servers.start(d, *wb_args("mirror", mib=16, thresholds="99/98"))
    qemu_io(srv.uri, "write -P 0x77 0 2M")
    assert status(d)["write_cache"]["occupied_pages"] > 0
    r = ctl(d, "fail", "2")
    assert r.returncode == 0, r.stderr
    qemu_io(srv.uri, "read -P 0x77 0 2M")
    srv.stop()
    # Destaged onto the degraded array at the stop.
    srv = store_servers.start(d)
    assert status(d)["state"] == "degraded"
    qemu_io(srv.uri, "read -P 0x77 0 2M")
    srv.stop()


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--write-cache-mib", "8", "--thresholds", "20/80"], ["--thresholds", "20/80"]),
        (["--write-cache-mib", "8", "--thresholds", "eighty"], ["--thresholds"]),
        (["--write-cache-mib", "8", "--destage", "fifo"], ["--destage", "fifo", "stow"]),
        (["--write-cache-mib", "8", "--backup", "tape"], ["--backup", "tape", "mirror"]),
        (["--write-cache-mib", "8", "--backup", "log", "--log-mode", "sideways"], ["--log-mode", "sideways"]),
        (["--write-cache-mib", "8", "--segment", "3KiB"], ["--segment"]),
        (["--write-cache-mib", "8", "--max-destages", "0"], ["--max-destages", "1 to 256"]),
        (["--write-cache-mib", "8", "--max-destages", "257"], ["--max-destages", "257"]),
        (["--write-cache-mib", "8", "--backup", "log", "--log-size", "1MiB"], ["--log-size", "too small", "wb-log.img"]),
    ],
)
def test_bad_write_cache_options_exit_2(tmp_path: Path, args: list[str], names: list[str]) -> None:
    d = make(tmp_path)
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0", *args)
    for n in names:
        assert n in msg, msg
    assert not (d / "control.sock").exists()


def _crash_with_dirty_mirror(tmp_path: Path, store_servers: ServerPool, name: str) -> Path:  # noqa: F811
    d = make(tmp_path, name=name)
    srv = store_servers.start(d, *wb_args("mirror", mib=8, thresholds="99/98"))
    qemu_io(srv.uri, "write -P 0x42 0 1M")
    srv.kill()
    return d


def test_corrupt_truncated_and_foreign_backups_are_refused(tmp_path: Path, store_servers: ServerPool, clients: None) -> None:  # noqa: F811
    d = _crash_with_dirty_mirror(tmp_path, store_servers, "a")
    mirror = d / "wb-mirror.img"
    good = mirror.read_bytes()
    # Both superblock copies destroyed.
    bad = bytearray(good)
    bad[0:64] = b"\xff" * 64
    bad[4096 : 4096 + 64] = b"\xff" * 64
    mirror.write_bytes(bytes(bad))
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0")
    assert "wb-mirror.img" in msg and "not a readable write-cache backup" in msg and "--backup-discard" in msg, msg
    # Truncated.
    mirror.write_bytes(good[: 64 * KiB])
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0")
    assert "wb-mirror.img" in msg and "truncated" in msg, msg
    # Missing.
    mirror.unlink()
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0")
    assert "wb-mirror.img" in msg and "missing" in msg, msg
    # Another array's backup.
    other = _crash_with_dirty_mirror(tmp_path, store_servers, "b")
    shutil.copy(other / "wb-mirror.img", mirror)
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0")
    assert "another array" in msg, msg
    # The operator may accept the loss explicitly.
    srv = store_servers.start(d, "--backup-discard")
    assert "--backup-discard" in srv.log()
    srv.stop()
    # The record itself garbled.
    (other / "wb.json").write_text("{not json")
    msg = cli_bad_input("serve", other, "--listen", "127.0.0.1:0")
    assert "wb.json" in msg and "line 1" in msg, msg
    json.loads((d / "members.json").read_text())


def test_logical_log_with_a_failed_member_falls_back_to_a_mirror(tmp_path: Path, store_servers: ServerPool, clients: None) -> None:  # noqa: F811
    d = make(tmp_path)
    args = wb_args("log-logical", mib=8, thresholds="99/98")
    srv = store_servers.start(d, *args)
    qemu_io(srv.uri, "write -P 0x61 0 1M")
    assert ctl(d, "fail", "1").returncode == 0
    qemu_io(srv.uri, "write -P 0x62 1M 1M")
    srv.kill()
    # Restarted degraded with the same options: the log is replayed, and the write cache
    # is backed by a mirror until the array is whole.
    srv = store_servers.start(d, *args)
    log = srv.log()
    assert "write-cache backup replayed" in log and "falls back" not in log and "mirror file" in log, log
    assert status(d)["write_cache"]["backup"] == "mirror"
    qemu_io(srv.uri, "read -P 0x61 0 1M")
    qemu_io(srv.uri, "read -P 0x62 1M 1M")
    srv.stop()


def test_a_crash_during_recovery_is_just_another_crash(tmp_path: Path, store_servers: ServerPool, clients: None) -> None:  # noqa: F811
    import os
    import signal
    import subprocess
    import time

    from store_fixtures import CLI_ENV, free_port, raidlab_cmd

    d = make(tmp_path)
    args = wb_args("log", mib=8, thresholds="99/98")
    srv = store_servers.start(d, *args)
    qemu_io(srv.uri, "write -P 0x71 0 6M")
    assert status(d)["write_cache"]["destages"] == 0
    srv.kill()
    # Restarts killed while they replay the log, at growing delays (bounded: 4 tries).
    for delay in (0.15, 0.3, 0.5, 0.8):
        with open(tmp_path / "killed.log", "ab") as err:
            p = subprocess.Popen(
                [*raidlab_cmd(), "serve", str(d), "--listen", f"127.0.0.1:{free_port()}", *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=CLI_ENV,
                start_new_session=True,
            )
        time.sleep(delay)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=30)
    srv = store_servers.start(d)
    assert "write-cache backup replayed" in srv.log(), srv.log()
    qemu_io(srv.uri, "read -P 0x71 0 6M")
    wait_until(lambda: status(d)["resync"]["pending_regions"] == 0, 60, "the resync")
    assert check(d)["mismatches"] == 0
    srv.stop()
