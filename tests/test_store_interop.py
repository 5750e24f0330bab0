"""The store served over NBD to real clients (nbdinfo, nbdcopy, qemu-io, fio's nbd engine) on
RAID-0, 1, 10, 5 and 6: whole-device write and verify, a member failed while fio runs, a spare
added (and rebuilt onto) while fio runs, and kill -9 in the middle of writes followed by a
restart, a resync and a check. After every scenario each block reads back as last written
and ``raidlab ctl DIR check`` counts no mismatch."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from store_fixtures import (
    DATA_OFFSET,
    KiB,
    MiB,
    Background,
    Server,
    ServerPool,
    check,
    cli_ok,
    create_array,
    examine,
    fio_args,
    fio_result,
    nbd_read_all,
    nbdinfo,
    qemu_io,
    random_file,
    require_tools,
    run_fio,
    run_tool,
    status,
    store_servers,  # noqa: F401 (fixture)
    tool_ok,
    wait_until,
)

MEMBER = 4 * MiB
DISKS = {"raid0": 4, "raid1": 3, "raid10": 4, "raid5": 5, "raid6": 5}
DATA_DISKS = {"raid0": 4, "raid1": 1, "raid10": 2, "raid5": 4, "raid6": 3}
# The slots failed in the degraded scenarios: one while fio writes, one while it verifies
# (RAID-5 survives only the second; RAID-10 loses one member of each pair).
FAIL: dict[str, list[int | None]] = {"raid1": [0, 2], "raid10": [1, 2], "raid5": [None, 2], "raid6": [1, 4]}
ALL = list(DISKS)
REDUNDANT = list(FAIL)


def size_of(level: str) -> int:
    return DATA_DISKS[level] * MEMBER


def make(tmp_path: Path, level: str) -> Path:
    d = tmp_path / "arr"
    out = create_array(d, level, DISKS[level], size=f"{MEMBER // MiB}MiB", chunk="64KiB")
    assert out["size_bytes"] == size_of(level)
    return d


def fio_rw(srv: Server, size: int, *extra: str) -> list[str]:
    """fio's write-then-verify job over the whole device (random 4-64 KiB writes)."""
    return fio_args(srv.uri, size, "--rw=randwrite", "--bsrange=4k-64k", "--iodepth=8", *extra)


def verify_only(srv: Server, size: int, cwd: Path) -> None:
    """fio re-reads what the last fio_rw job wrote (same seed and sizes) and checks it."""
    job = run_fio(fio_rw(srv, size, "--verify_only"), cwd)
    assert job["read"]["io_bytes"] > 0.9 * size, job["read"]["io_bytes"]


def assert_consistent(d: Path, level: str) -> None:
    rep = check(d)
    assert rep["ok"] and rep["mismatches"] == 0, rep


def wait_healthy(d: Path, timeout: float = 90) -> dict[str, Any]:
    def healthy() -> dict[str, Any] | None:
        st = status(d)
        ok = (
            st["rebuild"] is None
            and st["state"] in ("clean", "active")
            and all(m["state"] == "in_sync" for m in st["members"])
            and st["resync"]["pending_regions"] == 0
        )
        return st if ok else None

    return wait_until(healthy, timeout, f"{d} to be clean/active with no rebuild or resync", interval=0.2)


@pytest.fixture
def clients() -> None:
    require_tools("qemu-io", "nbdinfo", "nbdcopy", "fio")


@pytest.mark.parametrize("level", ALL)
def test_clients_write_and_verify(tmp_path: Path, store_servers: ServerPool, clients: None, level: str) -> None:  # noqa: F811
    d = make(tmp_path, level)
    size = size_of(level)
    srv = store_servers.start(d)

    info = nbdinfo(srv.uri)
    assert info["export-size"] == size
    # Any byte range by default: requests below the array's 4 KiB block are read-modify-written.
    assert info["block_size_minimum"] == 1
    assert info["block_size_preferred"] >= 4096 and info["block_size_maximum"] >= info["block_size_preferred"]
    assert info["is_read_only"] is False and info["can_flush"] is True
    assert '"virtual-size": %d' % size in tool_ok(["qemu-img", "info", "--output", "json", srv.uri], timeout=30)

    # nbdcopy: the whole device, then read back.
    image = random_file(tmp_path / "image", size, seed=len(level))
    tool_ok(["nbdcopy", str(tmp_path / "image"), srv.uri])
    assert nbd_read_all(srv.uri, tmp_path / "back") == image
    assert_consistent(d, level)

    # qemu-io: patterns (first and last blocks, across chunks and rows), FUA, zeroes, files.
    piece = random_file(tmp_path / "piece", 72 * KiB, seed=9)
    qemu_io(
        srv.uri,
        "write -P 0x11 0 4k",
        f"write -P 0x22 {size - 4 * KiB} 4k",
        "write -P 0x33 60k 136k",
        "write -f -P 0x44 1M 64k",
        "write -z 2M 128k",
        f"write -s {tmp_path / 'piece'} 400k 72k",
        "flush",
        "read -P 0x11 0 4k",
        f"read -P 0x22 {size - 4 * KiB} 4k",
        "read -P 0x33 60k 136k",
        "read -P 0x44 1M 64k",
        "read -P 0 2M 128k",
    )
    expect = bytearray(image)
    for off, ln, byte in ((0, 4, 0x11), (size // KiB - 4, 4, 0x22), (60, 136, 0x33), (1024, 64, 0x44), (2048, 128, 0)):
        expect[off * KiB : (off + ln) * KiB] = bytes([byte]) * (ln * KiB)
    expect[400 * KiB : 472 * KiB] = piece
    assert nbd_read_all(srv.uri, tmp_path / "back2") == expect
    # A request past the end fails, and the connection goes on serving.
    r = run_tool(["qemu-io", "-f", "raw", "-c", f"read {size} 4k", "-c", "read -P 0x11 0 4k", srv.uri], timeout=30)
    assert "read failed" in r.stdout + r.stderr and "read 4096/4096 bytes at offset 0" in r.stdout, r

    # fio: write and verify the whole device, then verify again in a separate pass.
    job = run_fio(fio_rw(srv, size, "--do_verify=1"), tmp_path)
    assert job["write"]["io_bytes"] > 0.9 * size
    verify_only(srv, size, tmp_path)
    assert_consistent(d, level)

    # After a clean stop and restart the data is still there.
    srv.stop()
    assert examine(d)["clean"] is True
    srv = store_servers.start(d)
    verify_only(srv, size, tmp_path)
    assert_consistent(d, level)
    srv.stop()


# The degraded scenarios use 16 KiB blocks: fio then verifies what it reads in a plain
# randread job (each block's header and CRC), which, unlike --verify_only, honours --rate.
def fio_write16(srv: Server, size: int, *extra: str) -> list[str]:
    return fio_args(srv.uri, size, "--rw=randwrite", "--bs=16k", "--iodepth=8", "--do_verify=1", *extra)


def fio_read16(srv: Server, size: int, *extra: str) -> list[str]:
    return fio_args(srv.uri, size, "--rw=randread", "--bs=16k", "--iodepth=8", *extra)


def fio_background(args: list[str], tmp_path: Path, tag: str) -> tuple[Background, Path]:
    out = tmp_path / f"{tag}.json"
    return Background([*args, "--output-format=json", f"--output={out}"], tmp_path, tag), out


def fio_finished_ok(bg: Background, out: Path, timeout: float = 60) -> dict[str, Any]:
    rc = bg.wait(timeout=timeout)
    job = fio_result(out)
    assert rc == 0 and job["error"] == 0, bg.output()
    return job


def fail_during(bg: Background, d: Path, slot: int | None, at: float = 1.0) -> None:
    if slot is None:
        return
    time.sleep(max(0.0, at - (time.monotonic() - bg.started)))
    assert bg.proc.poll() is None, "fio finished before the failure was injected: " + bg.output()
    assert "fail: ok" in cli_ok("ctl", d, "fail", slot)


@pytest.mark.parametrize("level", REDUNDANT)
def test_fail_member_while_fio_verifies(tmp_path: Path, store_servers: ServerPool, clients: None, level: str) -> None:  # noqa: F811
    d = make(tmp_path, level)
    size = size_of(level)
    srv = store_servers.start(d)
    during_write, during_verify = FAIL[level]
    # About 2 s of random writes (then fio's verify of them), a member failed after 1 s...
    bg, out = fio_background(fio_write16(srv, size, f"--rate=,{size // 2}"), tmp_path, "fio-write")
    try:
        fail_during(bg, d, during_write)
        fio_finished_ok(bg, out)
    finally:
        bg.kill()
    # ... then about 2 s of verifying reads, a member failed after 1 s.
    bg, out = fio_background(fio_read16(srv, size, f"--rate={size // 2}"), tmp_path, "fio-verify")
    try:
        fail_during(bg, d, during_verify)
        job = fio_finished_ok(bg, out)
    finally:
        bg.kill()
    assert job["read"]["io_bytes"] == size

    st = status(d)
    assert st["state"] == "degraded", st["state"]
    assert sorted(f["slot"] for f in st["faulty"]) == sorted(s for s in FAIL[level] if s is not None)
    run_fio(fio_read16(srv, size), tmp_path)
    assert_consistent(d, level)
    srv.stop()
    # The failed members stay out after a restart, and the data reads back.
    ex = examine(d)
    assert ex["clean"] is True
    srv = store_servers.start(d)
    assert "degraded" in srv.ready
    run_fio(fio_read16(srv, size), tmp_path)
    srv.stop()


@pytest.mark.parametrize("level", REDUNDANT)
def test_add_spare_while_fio_verifies(tmp_path: Path, store_servers: ServerPool, clients: None, level: str) -> None:  # noqa: F811
    d = make(tmp_path, level)
    size = size_of(level)
    # Rebuild slowly (about 4 s for a 4 MiB member) so that it overlaps both fio runs.
    srv = store_servers.start(d, "--rebuild-min-kib", "512", "--rebuild-max-kib", "1024")
    run_fio(fio_write16(srv, size), tmp_path)
    failed = 2
    assert "fail: ok" in cli_ok("ctl", d, "fail", failed)
    assert status(d)["state"] == "degraded"

    spare = tmp_path / "spare-new"
    with open(spare, "wb") as f:
        f.truncate(DATA_OFFSET + MEMBER)
    saw_rebuild = False
    # About 2 s of verifying reads; the spare is added 0.3 s in.
    bg, out = fio_background(fio_read16(srv, size, f"--rate={size // 2}"), tmp_path, "fio-verify")
    try:
        time.sleep(0.3)
        assert "add-spare: ok" in cli_ok("ctl", d, "add-spare", spare)
        # The rebuild starts by itself (it may already be under way, or over).
        saw_rebuild = bool(
            wait_until(
                lambda: status(d)["rebuild"] is not None or Path(status(d)["members"][failed]["path"] or "").name == "spare-new",
                10,
                "the rebuild onto the new spare to start",
            )
        )
        fio_finished_ok(bg, out)
        # Then about 2 s of new writes (another seed) and their verification, still during
        # the rebuild.
        bg, out = fio_background(fio_write16(srv, size, f"--rate=,{size // 2}", "--randseed=99"), tmp_path, "fio-write")
        fio_finished_ok(bg, out)
    finally:
        bg.kill()
    assert saw_rebuild, "no rebuild in progress right after add-spare"

    st = wait_healthy(d)
    assert Path(st["members"][failed]["path"]).name == "spare-new", st["members"]
    assert st["spares"] == []
    assert_consistent(d, level)
    run_fio(fio_read16(srv, size, "--randseed=99"), tmp_path)
    srv.stop()
    ex = examine(d)
    assert ex["clean"] is True and all(m["state"] == "in_sync" for m in ex["members"])
    assert Path(ex["members"][failed]["path"]).name == "spare-new"


# Deterministic writes into the lower half of the device (offsets and lengths in KiB):
# inside a chunk, across chunks, across rows, overwriting earlier ones.
WRITES = [(0, 4), (60, 8), (100, 200), (256, 64), (4, 16), (1000, 300), (150, 40), (1020, 8), (2028, 20), (64, 64)]


@pytest.mark.parametrize("level", ALL)
def test_kill9_during_writes_then_resync(tmp_path: Path, store_servers: ServerPool, clients: None, level: str) -> None:  # noqa: F811
    d = make(tmp_path, level)
    size = size_of(level)
    half = size // 2
    assert max(o + n for o, n in WRITES) * KiB <= half
    srv = store_servers.start(d)

    # Background writes in the upper half keep requests in flight when the server dies.
    bg = Background(
        [
            *fio_args(srv.uri, half, "--rw=randwrite", "--bs=4k", "--iodepth=16", "--time_based", "--runtime=60", offset=half),
            "--verify=0",
        ],
        tmp_path,
        "fio",
    )
    model = bytearray(half)
    try:
        time.sleep(0.3)
        for i, (off, ln) in enumerate(WRITES):
            pat = 0x21 + i
            # Each write is acknowledged (qemu-io exits after the reply) before the next.
            qemu_io(srv.uri, f"write -P {pat} {off}k {ln}k")
            model[off * KiB : (off + ln) * KiB] = bytes([pat]) * (ln * KiB)
        assert bg.proc.poll() is None, "the background writer stopped early: " + bg.output()
        srv.kill()
    finally:
        bg.kill()

    ex = examine(d)
    assert ex["clean"] is False, "the array was marked clean although writes were in flight"
    srv = store_servers.start(d)
    if level != "raid0":
        st = status(d)
        rs = st["resync"]
        assert "resyncing" in srv.ready or rs["pending_regions"] > 0 or rs["resynced_rows"] > 0, (srv.ready, rs)
    wait_healthy(d, timeout=60)

    # Every acknowledged write reads back.
    back = nbd_read_all(srv.uri, tmp_path / "back")
    assert back[:half] == model, "acknowledged writes lost: first difference at byte %d" % next(
        i for i in range(half) if back[i] != model[i]
    )
    last_off, last_len = WRITES[-1]
    qemu_io(srv.uri, f"read -P {0x21 + len(WRITES) - 1} {last_off}k {last_len}k")
    assert_consistent(d, level)
    # And the array works normally afterwards.
    run_fio(fio_rw(srv, half, "--do_verify=1"), tmp_path)
    assert_consistent(d, level)
    srv.stop()
    assert examine(d)["clean"] is True
