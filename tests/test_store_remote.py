"""Remote members: an array whose members and spare are NBD exports served by ``nbdkit``
(on Unix sockets here; ``scripts/remote_faults.py`` puts each on a host of its own, in a
network namespace). A host that goes away is *missing*, the array serves degraded, and when
the host comes back its member is re-added by bitmap: only the regions written while it was
away are resynced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from store_fixtures import (
    Background,
    KiB,
    MiB,
    ServerPool,
    check,
    cli_ok,
    fio_args,
    fio_result,
    qemu_io,
    require_tools,
    status,
    store_servers,  # noqa: F401 (fixture)
    wait_until,
)

CHUNK = 64 * KiB
MEMBER = 4 * MiB
IMG = 1 * MiB + MEMBER + 1 * MiB
ROOT = Path(__file__).resolve().parents[1]


class Kit:
    """``nbdkit file`` on a Unix socket, killed (and reaped) by :meth:`kill`."""

    def __init__(self, dir: Path, name: str) -> None:
        self.img = dir / f"{name}.img"
        with open(self.img, "wb") as f:
            f.truncate(IMG)
        self.sock = dir / f"{name}.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def uri(self) -> str:
        return f"nbd+unix:///?socket={self.sock}"

    def start(self) -> None:
        self.sock.unlink(missing_ok=True)
        args = ["nbdkit", "--foreground", "--exit-with-parent", "--unix", str(self.sock), "file", f"file={self.img}"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self.sock.exists, 10, f"nbdkit to listen on {self.sock}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture
def kits(tmp_path: Path) -> Any:
    require_tools("nbdkit", "qemu-io")
    made: list[Kit] = []

    def make(name: str) -> Kit:
        k = Kit(tmp_path, name)
        made.append(k)
        return k

    yield make
    for k in made:
        k.kill()


def test_raid5_of_remote_members_survives_a_host_restart_and_rebuilds_onto_a_remote_spare(
    tmp_path: Path,
    store_servers: ServerPool,  # noqa: F811
    kits: Any,
) -> None:
    hosts = [kits(f"h{i}") for i in range(4)]
    d = tmp_path / "arr"
    out = json.loads(
        cli_ok("array", "create", d, "--level", "raid5", "--disks", "3", "--spares", "1", "--chunk", "64KiB", "--size", "4MiB", "--bitmap-chunk", "64KiB", *[h.uri for h in hosts], "--json")
    )
    assert out["members"] == [h.uri for h in hosts[:3]] and out["spares"] == [hosts[3].uri], out
    manifest = json.loads((d / "members.json").read_text())
    assert manifest["paths"] == [h.uri for h in hosts], manifest
    srv = store_servers.start(d, "--member-timeout", "1", "--missing-grace", "600")
    rows = MEMBER // CHUNK
    qemu_io(srv.uri, f"write -P 0x11 0 {rows * 2 * CHUNK}")
    wait_until(lambda: status(d)["resync"]["dirty_regions"] == 0, 30, "the bitmap to clear")

    # Host 1 goes away: its member is missing, not faulty, and the array serves degraded.
    hosts[1].kill()
    qemu_io(srv.uri, f"write -P 0x22 {5 * 2 * CHUNK} 4k", f"write -P 0x23 {40 * 2 * CHUNK} 4k")
    st = status(d)
    assert st["state"] == "degraded" and st["faulty"] == [], st
    assert [m["slot"] for m in st["missing"]] == [1] and st["members"][1]["state"] == "missing", st
    assert st["spares"] == [hosts[3].uri], "the grace keeps the spare out of a missing slot"
    qemu_io(srv.uri, f"read -P 0x22 {5 * 2 * CHUNK} 4k", f"read -P 0x11 {6 * 2 * CHUNK} 4k")

    # It comes back: re-added by bitmap, only the two regions written meanwhile resynced.
    hosts[1].start()
    st = wait_until(lambda: (s := status(d))["state"] in ("clean", "active") and not s["missing"] and s, 30, "the re-add")
    last = st["last_rebuild"]
    assert (last["kind"], last["slot"], last["regions"]) == ("partial", 1, 2), last
    assert last["bytes"] == 2 * st["resync"]["region_bytes"] < last["member_bytes"] == MEMBER, last
    assert "host away; missing" in srv.log() and "re-added, resyncing its dirty regions" in srv.log(), srv.log()
    assert check(d)["mismatches"] == 0

    # The spare's host goes away, and then a member fails for good: the failure's
    # superblock update finds the spare away, so it is missing (no slot) and the slot
    # waits; when its host is back it is a spare again and the rebuild goes onto it.
    hosts[3].kill()
    cli_ok("ctl", d, "fail", "0")
    st = status(d)
    assert st["spares"] == [] and [m["slot"] for m in st["missing"]] == [None], st
    assert st["state"] == "degraded", st
    hosts[3].start()
    st = wait_until(lambda: (s := status(d))["state"] in ("clean", "active") and s, 60, "the rebuild onto the remote spare")
    assert st["members"][0]["path"] == hosts[3].uri, st["members"]
    assert st["last_rebuild"]["kind"] == "full", st["last_rebuild"]
    assert check(d)["mismatches"] == 0
    qemu_io(srv.uri, f"read -P 0x22 {5 * 2 * CHUNK} 4k", f"read -P 0x23 {40 * 2 * CHUNK} 4k", f"read -P 0x11 0 {5 * 2 * CHUNK}")
    srv.stop()
    # Assembled again from the manifest's URIs.
    srv = store_servers.start(d)
    qemu_io(srv.uri, f"read -P 0x23 {40 * 2 * CHUNK} 4k")
    srv.stop()


def test_an_unreachable_member_at_create_is_an_error_naming_it(tmp_path: Path) -> None:
    uri = f"nbd+unix:///?socket={tmp_path / 'nobody.sock'}"
    r = subprocess.run(
        [sys.executable, "-m", "raidlab.cli", "array", "create", str(tmp_path / "a"), "--level", "raid1", "--disks", "2", "--size", "4MiB", uri, uri.replace("nobody", "none")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r
    assert "nobody.sock" in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize(("levels", "modes", "faults"), [("raid5", "wt", "link,restart"), ("raid1", "wb", "eio,slow")])
def test_emulated_hosts_fault_cells(levels: str, modes: str, faults: str) -> None:
    """A few cells of the fault table (``make soak-remote`` runs them all): hosts in network
    namespaces, faults injected while the verifying writer runs."""
    args = [sys.executable, str(ROOT / "scripts" / "remote_faults.py"), "--levels", levels, "--modes", modes, "--faults", faults, "--member-mib", "4", "--away", "2", "--json"]
    t = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    if r.returncode == 77:
        pytest.skip(r.stderr.strip())
    assert r.returncode in (0, 1), f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    rows = json.loads(r.stdout)
    assert len(rows) == len(faults.split(",")), rows
    for row in rows:
        assert (row["client_errors"], row["lost"], row["corrupt"], row["check_mismatches"]) == (0, 0, 0, 0), row
        assert row["writes_acked"] > 100, row
        if row["fault"] in ("link", "restart", "eio"):
            assert row["resync"] == "partial" and 0 < row["resynced_bytes"] < row["member_bytes"], row
        if row["fault"] == "slow":
            assert row["resync"] is None and row["after_fault"] == {"missing": [], "faulty": []}, row
        if row["fault"] in ("link", "restart"):
            assert row["after_fault"]["faulty"] == [], row
    assert time.monotonic() - t < 120


def test_raid10_across_two_machines_survives_losing_one_and_a_host_away_at_start_comes_back(
    tmp_path: Path,
    store_servers: ServerPool,  # noqa: F811
    kits: Any,
) -> None:
    # Machine A serves slots 0 and 2, machine B slots 1 and 3: every mirror pair (0,1), (2,3)
    # has one copy on each machine.
    hosts = [kits(f"h{i}") for i in range(4)]
    machine_b = [hosts[1], hosts[3]]
    d = tmp_path / "arr"
    cli_ok("array", "create", d, "--level", "raid10", "--disks", "4", "--chunk", "64KiB", "--size", "4MiB", "--bitmap-chunk", "64KiB", *[h.uri for h in hosts])
    srv = store_servers.start(d, "--member-timeout", "1")
    size = 2 * MEMBER
    qemu_io(srv.uri, f"write -P 0x31 0 {size}")
    for h in machine_b:
        h.kill()
    qemu_io(srv.uri, f"write -P 0x32 0 64k", f"write -P 0x33 {size - 64 * KiB} 64k", f"read -P 0x31 {64 * KiB} 64k")
    st = wait_until(lambda: (s := status(d))["missing"] and len(s["missing"]) == 2 and s, 10, "both of machine B's members missing")
    assert st["state"] == "degraded" and sorted(m["slot"] for m in st["missing"]) == [1, 3], st
    for h in machine_b:
        h.start()
    # One rebuild at a time: the second member waits for the first's partial resync.
    st = wait_until(lambda: (s := status(d))["state"] in ("clean", "active") and not s["missing"] and s, 60, "both re-adds")
    assert [m["state"] for m in st["members"]] == ["in_sync"] * 4, st
    assert check(d)["mismatches"] == 0
    srv.stop()

    # Host 2 is down when the server starts: missing (slot unknown until it answers), and
    # re-added once it is back.
    hosts[2].kill()
    srv = store_servers.start(d, "--member-timeout", "1")
    st = status(d)
    assert st["state"] == "degraded" and [m["slot"] for m in st["missing"]] == [None], st
    qemu_io(srv.uri, f"write -P 0x34 {MEMBER} 64k")
    hosts[2].start()
    st = wait_until(lambda: (s := status(d))["state"] in ("clean", "active") and not s["missing"] and s, 60, "the re-add of host 2")
    last = st["last_rebuild"]
    assert (last["kind"], last["slot"]) == ("partial", 2) and last["bytes"] < MEMBER, last
    assert check(d)["mismatches"] == 0
    qemu_io(srv.uri, f"read -P 0x32 0 64k", f"read -P 0x34 {MEMBER} 64k", f"read -P 0x33 {size - 64 * KiB} 64k", f"read -P 0x31 {64 * KiB} {MEMBER - 64 * KiB}")

    # Host 3 goes away and the server is stopped before it returns: at the next start its
    # superblock still claims slot 3, recorded failed by the others, and it is re-added.
    wait_until(lambda: status(d)["resync"]["dirty_regions"] == 0, 30, "the bitmap to clear")
    hosts[3].kill()
    qemu_io(srv.uri, f"write -P 0x35 {64 * KiB} 64k")
    assert [m["slot"] for m in status(d)["missing"]] == [3]
    srv.stop()
    hosts[3].start()
    srv = store_servers.start(d, "--member-timeout", "1")
    assert "its host was away; it is re-added when it has settled" in srv.log(), srv.log()
    st = wait_until(lambda: (s := status(d))["state"] in ("clean", "active") and not s["missing"] and s, 60, "the re-add of host 3")
    last = st["last_rebuild"]
    assert (last["kind"], last["slot"], last["regions"]) == ("partial", 3, 1), last
    assert check(d)["mismatches"] == 0
    qemu_io(srv.uri, f"read -P 0x35 {64 * KiB} 64k", f"read -P 0x34 {MEMBER} 64k")
    srv.stop()


def test_fio_verifies_through_a_host_restart_and_remove_then_re_add_by_uri(
    tmp_path: Path,
    store_servers: ServerPool,  # noqa: F811
    kits: Any,
) -> None:
    require_tools("fio")
    hosts = [kits(f"h{i}") for i in range(5)]
    d = tmp_path / "arr"
    cli_ok("array", "create", d, "--level", "raid6", "--disks", "5", "--chunk", "64KiB", "--size", "4MiB", "--bitmap-chunk", "64KiB", *[h.uri for h in hosts])
    srv = store_servers.start(d, "--member-timeout", "1")
    size = 3 * MEMBER
    # About 3 s of verified random writes (fio checks every block it wrote at the end);
    # host 2 is killed after 1 s and started again 1 s later.
    out = tmp_path / "fio.json"
    args = fio_args(srv.uri, size, "--rw=randwrite", "--bs=16k", "--iodepth=8", "--do_verify=1", f"--rate=,{size // 3}")
    bg = Background([*args, "--output-format=json", f"--output={out}"], tmp_path, "fio")
    try:
        time.sleep(1.0)
        hosts[2].kill()
        time.sleep(1.0)
        assert bg.proc.poll() is None, "fio finished before the host came back: " + bg.output()
        hosts[2].start()
        rc = bg.wait(timeout=120)
    finally:
        bg.kill()
    job = fio_result(out)
    assert rc == 0 and job["error"] == 0, bg.output()
    assert job["write"]["io_bytes"] == size
    st = wait_until(lambda: (s := status(d))["state"] in ("clean", "active") and not s["missing"] and s, 60, "the re-add of host 2")
    assert st["last_rebuild"]["kind"] == "partial" and st["last_rebuild"]["slot"] == 2, st["last_rebuild"]
    assert check(d)["mismatches"] == 0

    # The operator gives up on a missing host: `ctl remove` forgets it, its return is then
    # ignored, and `ctl re-add URI` brings it back, by bitmap.
    wait_until(lambda: status(d)["resync"]["dirty_regions"] == 0, 30, "the bitmap to clear")
    hosts[2].kill()
    qemu_io(srv.uri, "write -P 0x41 0 64k", "write -P 0x42 1M 64k", "write -P 0x43 2M 64k")
    assert [m["slot"] for m in status(d)["missing"]] == [2]
    cli_ok("ctl", d, "remove", "2")
    assert status(d)["missing"] == [] and hosts[2].uri not in (d / "members.json").read_text()
    hosts[2].start()
    time.sleep(1.5)
    assert status(d)["members"][2]["state"] == "failed"
    rep = json.loads(cli_ok("ctl", d, "re-add", hosts[2].uri, "--json"))
    assert (rep["resync"], rep["slot"], rep["regions"]) == ("partial", 2, 3) and rep["bytes"] == 3 * CHUNK, rep
    assert hosts[2].uri in (d / "members.json").read_text()
    wait_until(lambda: status(d)["state"] in ("clean", "active"), 60, "the partial resync")
    assert check(d)["mismatches"] == 0
    qemu_io(srv.uri, "read -P 0x41 0 64k", "read -P 0x42 1M 64k", "read -P 0x43 2M 64k")
    srv.stop()
