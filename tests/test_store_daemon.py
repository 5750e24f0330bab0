"""A daemon an operator can run (issue 29, item 5): timestamped and levelled log lines (text
or JSON), the event program (``serve --event-program``, mdadm's ``--monitor --program``),
``ctl watch``, the config file ``DIR/raidlab.toml``, and check / repair as a background job
(md's ``sync_action``)."""

from __future__ import annotations

import json
import re
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

from store_fixtures import (
    DATA_OFFSET,
    KiB,
    Background,
    ServerPool,
    cli_bad_input,
    cli_ok,
    create_array,
    ctl,
    raidlab_cmd,
    status,
    store_servers,  # noqa: F401 (fixture)
    wait_until,
)

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
CHUNK = 64 * KiB


def _raid5(tmp_path: Path, spares: int = 0) -> Path:
    d = tmp_path / "arr"
    create_array(d, "raid5", 4, size="2MiB", spares=spares)
    return d


def _program(tmp_path: Path) -> tuple[Path, Path]:
    """An event program that appends its arguments to a file."""
    out = tmp_path / "events.txt"
    prog = tmp_path / "alert.sh"
    prog.write_text(f'#!/bin/sh\necho "$@" >> "{out}"\n')
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    return prog, out


def _records(log: str) -> list[str]:
    """The log's records: every line but the one saying where the server listens
    (``raidlab serve: ... accepting connections``, for scripts that wait for it)."""
    return [line for line in log.splitlines() if line.strip() and not line.startswith("raidlab serve: ")]


def _read(p: Path) -> str:
    return p.read_text() if p.exists() else ""


def test_event_program_and_watch_see_a_failure_and_the_rebuild(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path, spares=1)
    prog, out = _program(tmp_path)
    srv = store_servers.start(d, "--event-program", prog)
    disk1 = status(d)["members"][1]["path"]
    spare = status(d)["spares"][0]
    watch = Background([*raidlab_cmd(), "ctl", str(d), "watch", "--json"], tmp_path, "watch")
    try:
        # The watcher is subscribed once a test event reaches it.
        wait_until(
            lambda: json.loads(cli_ok("ctl", d, "test-event", "--json"))["watchers"] == 1 and "TestMessage" in _read(watch.out),
            20,
            "ctl watch to subscribe",
            interval=0.2,
        )
        cli_ok("ctl", d, "fail", "1")
        wait_until(lambda: "SpareActive" in _read(watch.out), 30, "the rebuild onto the spare, seen by watch")
        events = [json.loads(line) for line in _read(watch.out).splitlines()]
        names = [e["event"] for e in events]
        assert names[-4:] == ["Fail", "RebuildStarted", "RebuildFinished", "SpareActive"], names
        fail = events[-4]
        assert fail["device"] == disk1 and fail["slot"] == 1 and fail["dir"] == str(d), fail
        assert RFC3339.match(fail["time"]), fail
        assert events[-1]["device"] == spare
    finally:
        watch.kill()
    wait_until(lambda: "SpareActive" in _read(out), 20, "the event program's run for SpareActive")
    lines = _read(out).splitlines()
    assert f"TestMessage {d}" in lines, lines
    assert f"Fail {d} {disk1}" in lines, lines
    assert lines.index(f"Fail {d} {disk1}") < lines.index(f"SpareActive {d} {spare}"), lines
    log = srv.stop()
    assert f"DeviceDisappeared {d}" in _read(out).splitlines(), "the stop is an event too"
    assert "Fail" in log and "RebuildFinished" in log and "MB/s" in log, log


def test_watch_ends_when_the_server_stops_and_needs_a_server(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    msg = cli_bad_input("ctl", d, "watch")
    assert "control.sock" in msg and "no server answers" in msg, msg
    srv = store_servers.start(d)
    watch = Background([*raidlab_cmd(), "ctl", str(d), "watch"], tmp_path, "watch")
    wait_until(
        lambda: json.loads(cli_ok("ctl", d, "test-event", "--json"))["watchers"] == 1 and "TestMessage" in _read(watch.out),
        20,
        "ctl watch to subscribe",
        interval=0.2,
    )
    srv.stop()
    assert watch.wait(20) == 0, watch.output()
    assert "DeviceDisappeared" in watch.output(), watch.output()


def test_log_lines_are_timestamped_json_or_text(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    srv = store_servers.start(d, "--log-format", "json")
    cli_ok("ctl", d, "fail", "2")
    wait_until(lambda: "Fail" in srv.log(), 10, "the Fail record")
    log = srv.stop()
    records = [json.loads(line) for line in _records(log)]
    assert records, log
    for r in records:
        assert RFC3339.match(r["ts"]) and r["level"] in ("error", "warn", "info", "debug") and r["msg"], r
    by_event = {r.get("event"): r for r in records}
    assert by_event["Fail"]["level"] == "warn" and by_event["Fail"]["slot"] == 2, by_event["Fail"]
    assert "Ready" in by_event and "Stopped" in by_event and "DeviceDisappeared" in by_event, sorted(map(str, by_event))

    # Text, at warn: only the warnings, each line led by its timestamp and level.
    srv = store_servers.start(d, "--log-level", "warn")
    log = srv.stop()
    lines = _records(log)
    assert lines, log
    for line in lines:
        ts, level, _ = line.split(" ", 2)
        assert RFC3339.match(ts) and level in ("WARN", "ERROR"), line
    assert "DegradedArray" in log, log
    msg = cli_bad_input("serve", d, "--log-format", "xml")
    assert "--log-format" in msg, msg


def test_config_file_round_trip_and_bad_keys(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    prog, out = _program(tmp_path)
    srv = store_servers.start(d, "--log-format", "json", "--event-program", prog, "--save-config")
    srv.stop()
    cfg = d / "raidlab.toml"
    text = cfg.read_text()
    assert 'log-format = "json"' in text and f'event-program = "{prog}"' in text and "listen = " in text, text
    assert "cache" not in text, "only the options given are saved"
    out.unlink()
    # The next start takes them from the file: JSON log lines, the event program runs.
    srv = store_servers.start(d)
    cli_ok("ctl", d, "test-event")
    wait_until(lambda: "TestMessage" in _read(out), 20, "the event program from the file")
    log = srv.stop()
    assert all(json.loads(line)["ts"] for line in _records(log))
    # The command line wins over the file.
    srv = store_servers.start(d, "--log-format", "text")
    log = srv.stop()
    assert not log.lstrip().startswith("{"), log

    def bad(body: str, *needles: str) -> None:
        cfg.write_text(body)
        msg = cli_bad_input("serve", d, "--listen", "127.0.0.1:0")
        for n in (str(cfg), *needles):
            assert n in msg, (n, msg)
        assert not (d / "control.sock").exists()

    bad('listen = "127.0.0.1:0"\n\nbogus = 1\n', ":3:", "bogus", "unknown key")
    bad('# comment\ncache-mib = "lots"\n', ":2:", "cache-mib")
    bad('cache-mib = true\n', ":1:", "cache-mib", "expected")
    bad('\ncache = "nope"\n', ":2:", "cache", "unknown policy")
    bad('log-level = "loud"\n', ":1:", "log-level")
    bad('listen = \n', ":1:", "not valid TOML")


def _flip(member: Path, offset: int) -> None:
    with open(member, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def test_check_job_progress_and_repair_of_a_planted_mismatch(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    row = 5
    # Planted with the server stopped: one byte of row 5 on member 0.
    _flip(d / "disk0", DATA_OFFSET + row * CHUNK + 10)
    srv = store_servers.start(d)
    rep = json.loads(cli_ok("ctl", d, "check", "--wait", "--json"))
    assert (rep["mismatches"], rep["rows"], rep["skipped"]) == (1, 32, 0), rep
    first = rep["first_mismatches"][0]
    assert first["row"] == row and first["member_offset_bytes"] == DATA_OFFSET + row * CHUNK
    assert first["array_offset_bytes"] == row * 3 * CHUNK
    assert ctl(d, "check", "--test").returncode == 1

    # A paced job (5 rows/s) shows its progress in the status, and can be cancelled.
    started = json.loads(cli_ok("ctl", d, "check", "--max-kib", str(5 * 64), "--json"))
    assert started["started"] and started["check"]["state"] == "running"
    wait_until(lambda: status(d)["check"]["rows_done"] >= 3, 20, "the check's progress")
    st = status(d)["check"]
    assert st["state"] == "running" and 0 < st["fraction"] < 1, st
    text = cli_ok("ctl", d, "status")
    assert "check running" in text, text
    prom = cli_ok("ctl", d, "status", "--prometheus")
    assert "raidlab_check_running" in prom and "raidlab_check_mismatches" in prom, prom
    refused = ctl(d, "repair")
    assert refused.returncode == 2 and "already running" in refused.stderr, refused.stderr
    cancelled = json.loads(cli_ok("ctl", d, "check", "--cancel", "--json"))
    assert cancelled["check"]["state"] == "cancelled"

    rep = json.loads(cli_ok("ctl", d, "repair", "--wait", "--json"))
    assert rep["mismatches"] == 1 and rep["repaired"] == 1, rep
    assert ctl(d, "check", "--test").returncode == 0
    log = srv.stop()
    assert "CheckFinished" in log, log
    # Repaired on the members: a fresh server finds nothing.
    store_servers.start(d)
    assert json.loads(cli_ok("ctl", d, "check", "--wait", "--json"))["mismatches"] == 0


def test_repair_is_refused_read_only(tmp_path: Path, store_servers: ServerPool) -> None:  # noqa: F811
    d = _raid5(tmp_path)
    store_servers.start(d, "--read-only")
    r = ctl(d, "repair", "--wait")
    assert r.returncode == 2 and "read-only" in r.stderr, r.stderr
    assert json.loads(cli_ok("ctl", d, "check", "--wait", "--json"))["mismatches"] == 0


def test_socket_activation_serves_on_the_inherited_socket(tmp_path: Path) -> None:
    """systemd's LISTEN_FDS/LISTEN_PID: the server takes fd 3 and ignores --listen."""
    d = _raid5(tmp_path)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    fd = sock.fileno()
    # exec keeps the wrapper's pid, so LISTEN_PID names the server; fd 3 is the socket.
    script = (
        f"import os, sys; os.dup2({fd}, 3); os.close({fd}); "
        "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1'); os.execvp(sys.argv[1], sys.argv[1:])"
    )
    err = tmp_path / "serve.err"
    with open(err, "wb") as e:
        proc = subprocess.Popen(
            [sys.executable, "-c", script, *raidlab_cmd(), "serve", str(d), "--listen", "127.0.0.1:1"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=e,
            pass_fds=(fd,),
            start_new_session=True,
        )
    sock.close()
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert f"accepting connections on 127.0.0.1:{port}" in line, (line, err.read_text())
        # An NBD client's first bytes: the server's greeting (NBDMAGIC).
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            assert c.recv(8) == b"NBDMAGIC"
        assert "socket activation" in err.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, err.read_text()
        if proc.stdout is not None:
            proc.stdout.close()
