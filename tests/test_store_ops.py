"""Operator safety of ``raidlab serve`` / ``raidlab ctl`` / ``raidlab array`` (issue 29): device
locks, refusals that change no byte, the durable failure record and ``serve --force``, faulty
devices across restarts and ``ctl re-add``, a corrupt superblock, SIGHUP, paths resolved from
the caller's directory, and the daemon helpers (pid file, systemd notification, status exit
codes, Prometheus text)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path

from store_fixtures import (
    CLI_ENV,
    DATA_OFFSET,
    MiB,
    ServerPool,
    cli_bad_input,
    cli_ok,
    create_array,
    ctl,
    digests,
    examine,
    member_paths,
    one_line,
    raidlab_cmd,
    run_cli,
    status,
    store_servers,  # noqa: F401 (fixture)
    wait_until,
)

SUPERBLOCK = 4096


def _raid5(tmp_path: Path, name: str = "arr", spares: int = 0) -> Path:
    d = tmp_path / name
    create_array(d, "raid5", 4, size="2MiB", spares=spares)
    return d


def _flip_superblock_byte(p: Path) -> None:
    with open(p, "r+b") as f:
        f.seek(SUPERBLOCK + 200)
        b = f.read(1)
        f.seek(SUPERBLOCK + 200)
        f.write(bytes([b[0] ^ 0xFF]))


def test_a_second_server_on_a_shared_member_is_refused(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    # A second array directory whose manifest names the same member files.
    twin = tmp_path / "twin"
    twin.mkdir()
    paths = [str(p.resolve()) for p in member_paths(d)]
    (twin / "members.json").write_text(json.dumps({"format": "raidlab-members", "version": 1, "paths": paths}))
    srv = store_servers.start(d)
    files = member_paths(d)
    before = digests(files)
    msg = cli_bad_input("serve", twin, "--listen", "127.0.0.1:0")
    assert "in use" in msg and "disk0" in msg, msg
    assert digests(files) == before
    assert not (twin / "control.sock").exists()
    assert status(d)["state"] == "clean"
    srv.stop()
    # Stopped, the locks are gone: the twin serves.
    srv2 = store_servers.start(twin)
    srv2.stop()


def test_create_never_overwrites_a_running_array_even_with_force(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    srv = store_servers.start(d)
    files = [*member_paths(d), d / "members.json"]
    before = digests(files)
    msg = cli_bad_input("array", "create", d, "--level", "raid1", "--disks", "2", "--size", "1MiB", "--force")
    assert str(d) in msg and "running" in msg and "--force" in msg, msg
    # Its members named explicitly for another array: locked.
    msg = cli_bad_input(
        "array", "create", tmp_path / "other", "--level", "raid1", "--disks", "2", "--size", "1MiB", "--force", d / "disk0", d / "disk1"
    )
    assert "disk0" in msg and "in use" in msg, msg
    assert not (tmp_path / "other").exists()
    assert digests(files) == before
    srv.stop()
    # Stopped, --force overwrites it as before.
    cli_ok("array", "create", d, "--level", "raid1", "--disks", "2", "--size", "1MiB", "--force")
    assert examine(d)["level"] == "raid1"


def test_members_are_preallocated(tmp_path: Path) -> None:
    d = _raid5(tmp_path)
    for p in member_paths(d):
        st = os.stat(p)
        assert st.st_size == DATA_OFFSET + 2 * MiB
        assert st.st_blocks * 512 >= st.st_size, (p, st.st_blocks)


def _cli_in(cwd: Path, *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*raidlab_cmd(), *map(str, args)], capture_output=True, text=True, timeout=60, env=CLI_ENV, cwd=cwd, check=False)


def test_paths_resolve_from_the_callers_directory(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    srv = store_servers.start(d)
    spare = tmp_path / "spare-x"
    spare.write_bytes(b"\0" * (DATA_OFFSET + 2 * MiB))
    r = _cli_in(tmp_path, "ctl", "arr", "add-spare", "spare-x")
    assert r.returncode == 0, r.stderr
    assert status(d)["spares"] == [str(spare)]
    assert str(spare) in (d / "members.json").read_text()
    # A member named relative to the caller is refused as already part of the array.
    r = _cli_in(tmp_path, "ctl", "arr", "add-spare", "arr/disk2")
    assert r.returncode == 2 and "already" in r.stderr and "arr/arr" not in r.stderr, r.stderr
    r = _cli_in(tmp_path, "ctl", "arr", "remove", "spare-x")
    assert r.returncode == 0, r.stderr
    assert status(d)["spares"] == []
    srv.stop()


def test_fail_that_would_kill_the_array_needs_force_and_the_failure_is_durable(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    srv = store_servers.start(d)
    assert json.loads(cli_ok("ctl", d, "fail", "1", "--json"))["state"] == "degraded"
    files = member_paths(d)
    before = digests(files)
    r = ctl(d, "fail", "2")
    assert r.returncode == 2, (r.stdout, r.stderr)
    msg = one_line(r.stderr)
    assert "would fail the array" in msg and "raid5 survives 1" in msg and "--force" in msg, msg
    assert digests(files) == before, "a refused fail changes no byte"
    assert status(d)["state"] == "degraded"
    out = json.loads(cli_ok("ctl", d, "fail", "2", "--force", "--json"))
    assert out["state"] == "failed" and "warning" in out
    r = ctl(d, "status", "--test")
    assert r.returncode == 2, r.stdout
    srv.stop()
    # Recorded: the next start is refused without --force, and changes nothing.
    before = digests([*files, d / "members.json"])
    msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0")
    assert "failed" in msg and "--force" in msg, msg
    msg = cli_bad_input("array", "examine", d)
    assert "failed" in msg
    assert digests([*files, d / "members.json"]) == before
    srv = store_servers.start(d, "--force")
    assert "--force" in srv.log() and "resynced" in srv.log()
    st = wait_until(lambda: (s := status(d))["state"] == "degraded" and s, 60, "the forced start's resync")
    assert [m["state"] for m in st["members"]] == ["in_sync", "failed", "in_sync", "in_sync"]
    srv.stop()
    # The forced start was recorded: no --force needed any more.
    store_servers.start(d).stop()


def test_faulty_devices_are_listed_after_a_restart_and_re_added(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    srv = store_servers.start(d)
    cli_ok("ctl", d, "fail", "1")
    srv.stop()
    srv = store_servers.start(d)
    st = status(d)
    assert st["faulty"] == [{"path": str(d / "disk1"), "slot": 1}], st["faulty"]
    text = cli_ok("ctl", d, "status")
    assert f"faulty: {d / 'disk1'} (was slot 1)" in one_line(text), text
    r = ctl(d, "re-add", tmp_path / "nothing")
    assert r.returncode == 2 and "not a faulty device" in r.stderr
    cli_ok("ctl", d, "re-add", d / "disk1")
    wait_until(lambda: status(d)["state"] in ("clean", "active"), 60, "the rebuild onto the re-added device")
    st = status(d)
    assert st["faulty"] == [] and st["members"][1]["path"] == str(d / "disk1")
    assert json.loads(cli_ok("ctl", d, "check", "--wait", "--json"))["mismatches"] == 0
    srv.stop()


def test_a_corrupt_superblock_leaves_its_member_out(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    _flip_superblock_byte(d / "disk2")
    ex = examine(d)
    assert ex["members"][2]["path"] is None
    assert ex["faulty"] == [{"path": str(d / "disk2"), "slot": 2}]
    assert any("disk2" in w and "checksum" in w for w in ex["warnings"]), ex["warnings"]
    srv = store_servers.start(d)
    assert "degraded" in srv.ready and "checksum" in srv.log()
    assert status(d)["faulty"][0]["slot"] == 2
    cli_ok("ctl", d, "remove", "2")
    assert status(d)["faulty"] == []
    assert "disk2" not in (d / "members.json").read_text()
    srv.stop()


def test_two_corrupt_superblocks_stop_a_raid5_and_change_nothing(tmp_path: Path) -> None:
    d = _raid5(tmp_path)
    _flip_superblock_byte(d / "disk1")
    _flip_superblock_byte(d / "disk3")
    files = [*member_paths(d), d / "members.json"]
    before = digests(files)
    for args in (["array", "examine", d], ["serve", d, "--listen", "127.0.0.1:0"]):
        msg = cli_bad_input(*args)
        assert "cannot assemble" in msg and "checksum" in msg, msg
    assert digests(files) == before


def test_sighup_is_ignored(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    srv = store_servers.start(d)
    os.kill(srv.proc.pid, signal.SIGHUP)
    wait_until(lambda: "SIGHUP received: ignored" in srv.log(), 10, "the SIGHUP log line")
    assert srv.running()
    assert status(d)["state"] == "clean"
    log = srv.stop()
    assert "marked clean" in log


def test_status_exit_codes_and_prometheus(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    srv = store_servers.start(d)
    assert ctl(d, "status", "--test").returncode == 0
    assert ctl(d, "check", "--test").returncode == 0
    cli_ok("ctl", d, "fail", "3")
    r = ctl(d, "status", "--test")
    assert r.returncode == 1 and "degraded" in r.stdout
    prom = cli_ok("ctl", d, "status", "--prometheus")
    a = f'array="{d}"'
    assert f'raidlab_array_state{{{a},state="degraded"}} 1' in prom, prom
    assert f'raidlab_member_in_sync{{{a},slot="3"}} 0' in prom
    assert "# TYPE raidlab_member_read_blocks_total counter" in prom
    assert run_cli("ctl", d, "status", "--json", "--prometheus").returncode == 2
    srv.stop()


def test_pid_file_and_systemd_notification(tmp_path: Path) -> None:
    d = _raid5(tmp_path)
    notify = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(notify))
    sock.settimeout(60)
    pid_file = tmp_path / "serve.pid"
    env = {**CLI_ENV, "NOTIFY_SOCKET": str(notify)}
    proc = subprocess.Popen(
        [*raidlab_cmd(), "serve", str(d), "--listen", "127.0.0.1:0", "--pid-file", str(pid_file)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    try:
        ready = sock.recv(4096).decode()
        assert "READY=1" in ready and f"MAINPID={proc.pid}" in ready, ready
        assert pid_file.read_text().strip() == str(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert "STOPPING=1" in sock.recv(4096).decode()
        assert not pid_file.exists()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        sock.close()


def test_read_only_serve_writes_nothing(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    from store_fixtures import qemu_io, require_tools, tool_ok

    require_tools("qemu-io")
    d = _raid5(tmp_path, spares=1)
    srv = store_servers.start(d)
    qemu_io(srv.uri, "write -P 9 0 1M")
    srv.stop()
    files = [*member_paths(d), d / "members.json"]
    before = digests(files)
    srv = store_servers.start(d, "--read-only")
    assert "read-only" in srv.log()
    out = tool_ok(["qemu-io", "-r", "-f", "raw", "-c", "read -P 9 0 1M", srv.uri], timeout=60)
    assert "pattern verification" not in out, out
    # The export is read-only: a writer cannot even open it.
    r = subprocess.run(["qemu-io", "-f", "raw", "-c", "write -P 1 0 4k", srv.uri], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode != 0 and "permission denied" in r.stderr.lower(), (r.stdout, r.stderr)
    for args in (["fail", "1"], ["remove", "spare0"], ["re-add", "1"]):
        r = ctl(d, *args)
        assert r.returncode == 2 and "read-only" in r.stderr, (args, r.stderr)
    srv.stop()
    assert digests(files) == before
    msg = cli_bad_input("serve", d, "--read-only", "--force", "--listen", "127.0.0.1:0")
    assert "--read-only" in msg


def test_examine_one_member(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    srv = store_servers.start(d)
    cli_ok("ctl", d, "fail", "1")
    # Examined while served: read-only, no lock needed.
    one = json.loads(cli_ok("array", "examine", d / "disk0", "--json"))
    assert one["member"] == str(d / "disk0") and one["role"] == 0 and one["slots"][1] == "failed"
    srv.stop()
    out = json.loads(cli_ok("array", "examine", d / "disk1", "--json"))
    assert (out["role"], out["former_slot"]) == ("faulty", 1)
    text = one_line(cli_ok("array", "examine", d / "disk1"))
    assert "faulty of arr" in text and "bitmap:" in text, text
    _flip_superblock_byte(d / "disk2")
    msg = cli_bad_input("array", "examine", d / "disk2")
    assert "disk2" in msg and "checksum" in msg
