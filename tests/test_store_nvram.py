"""The log backup's NVRAM segment buffers (``--log-nvram``, RAPID-Cache) served over NBD: a
SIGKILL with acknowledged writes only in the cache, the NVRAM slots and the log, then a
restart that replays the NVRAM onto the log before the log is read; a missing NVRAM file the
record names is refused naming it; bad option values are refused naming the option."""

from __future__ import annotations

import json
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
    nbd_read_all,
    qemu_io,
    require_tools,
    status,
    store_servers,  # noqa: F401 (fixture)
    wait_until,
)

MEMBER = 4 * MiB
SLOT = 4 * KiB + 128 * KiB


def make(tmp_path: Path, name: str = "arr") -> Path:
    d = tmp_path / name
    create_array(d, "raid5", 5, size=f"{MEMBER // MiB}MiB", chunk="16KiB")
    return d


def nv_args(nvram: Path, mode: str = "physical", slots: int | None = None) -> list[str]:
    out = ["--write-cache-mib", "8", "--thresholds", "99/98", "--backup", "log", "--log-mode", mode, "--log-size", "32MiB", "--log-nvram", str(nvram)]
    return out + (["--log-nvram-slots", str(slots)] if slots is not None else [])


@pytest.fixture
def clients() -> None:
    require_tools("qemu-io", "nbdcopy")


@pytest.mark.parametrize(("mode", "slots"), [("physical", None), ("logical", 2)])
def test_sigkill_keeps_writes_acknowledged_to_the_nvram(tmp_path: Path, store_servers: ServerPool, clients: None, mode: str, slots: int | None) -> None:  # noqa: F811
    d = make(tmp_path)
    nvram = tmp_path / "nvram"
    args = nv_args(nvram, mode, slots)
    srv = store_servers.start(d, *args)
    rec = json.loads((d / "wb.json").read_text())
    n = slots or 4
    assert rec["nvram"] == {"path": str(nvram), "slots": n}, rec
    assert nvram.stat().st_size == n * SLOT
    model = bytearray(MEMBER)
    write_scattered(srv.uri, model, 0x51)
    st = status(d)["write_cache"]
    assert st["destages"] == 0 and st["occupied_pages"] > 0, st
    # 596 KiB written (plus batch headers): more than one 128 KiB segment, so slots drained.
    assert st["backup_stats"]["nvram_slots"] == n and st["backup_stats"]["nvram_drained"] >= 1, st
    srv.kill()
    # Restarted with the same options: the NVRAM's staged segments go onto the log first
    # (the head's segment at least), then the log is replayed, then a fresh NVRAM is laid out.
    srv = store_servers.start(d, *args)
    log = srv.log()
    assert "NVRAM segment(s) written to the log" in log and "write-cache backup replayed" in log, log
    back = nbd_read_all(srv.uri, tmp_path / "back")
    assert back[: len(model)] == model
    wait_until(lambda: status(d)["resync"]["pending_regions"] == 0, 60, "the resync")
    assert check(d)["mismatches"] == 0
    srv.stop()


def test_a_missing_nvram_is_refused_naming_it(tmp_path: Path, store_servers: ServerPool, clients: None) -> None:  # noqa: F811
    d = make(tmp_path)
    nvram = tmp_path / "nvram"
    srv = store_servers.start(d, *nv_args(nvram))
    qemu_io(srv.uri, "write -P 0x42 0 256k")
    srv.kill()
    nvram.unlink()
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0")
    assert str(nvram) in msg and "NVRAM" in msg and "missing" in msg and "--backup-discard" in msg, msg
    srv = store_servers.start(d, "--backup-discard")
    assert "--backup-discard" in srv.log()
    srv.stop()


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--backup", "mirror", "--log-nvram", "nv"], ["--log-nvram", "--backup log"]),
        (["--backup", "log", "--log-nvram", "nv", "--log-nvram-slots", "0"], ["--log-nvram-slots", "got 0"]),
        (["--backup", "log", "--log-nvram-slots", "4"], ["--log-nvram-slots", "without --log-nvram"]),
    ],
)
def test_bad_nvram_options_exit_2(tmp_path: Path, args: list[str], names: list[str]) -> None:
    d = make(tmp_path)
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0", "--write-cache-mib", "8", *args)
    for n in names:
        assert n in msg, msg
