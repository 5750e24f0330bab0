"""What an operator's service manager needs from ``raidlab serve`` and ``raidlab ctl``.

- :func:`sd_notify`: systemd's readiness protocol (``Type=notify``): one datagram to the
  ``AF_UNIX`` socket named by ``$NOTIFY_SOCKET`` (an abstract socket when it starts with
  ``@``). Without the variable it does nothing.
- :class:`PidFile`: ``--pid-file``: written once the server accepts connections, removed at
  exit when it still names this process.
- :func:`status_exit_code`: ``ctl status --test``, as ``mdadm --detail --test``: 0 healthy,
  1 degraded (or rebuilding), 2 failed.
- :func:`prometheus`: ``ctl status --prometheus``: the status as Prometheus text exposition
  (with the last check or repair job's progress and mismatch count).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any


def sd_notify(state: str, env: dict[str, str] | None = None) -> bool:
    """Send ``state`` (``"READY=1"``, ``"STOPPING=1"``, ``"STATUS=..."``) to the service
    manager; True when a datagram was sent."""
    addr = (env if env is not None else os.environ).get("NOTIFY_SOCKET", "")
    if not addr or addr[0] not in "/@":
        return False
    target = "\0" + addr[1:] if addr[0] == "@" else addr
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(state.encode(), target)
    except OSError:
        return False
    return True


class PidFile:
    """Holds ``path`` with this process's id while the server runs."""

    def __init__(self, path: str | None) -> None:
        self.path = Path(path).absolute() if path else None
        self.written = False

    def write(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(f"{os.getpid()}\n")
        tmp.replace(self.path)
        self.written = True

    def remove(self) -> None:
        if self.path is None or not self.written:
            return
        try:
            if self.path.read_text().strip() == str(os.getpid()):
                self.path.unlink()
        except OSError:
            pass


def status_exit_code(st: dict[str, Any]) -> int:
    """``mdadm --detail --test``'s codes: 0 the array is healthy, 1 degraded or rebuilding,
    2 failed."""
    state = st.get("state")
    if state == "failed":
        return 2
    if state in ("degraded", "rebuilding") or any(m.get("state") != "in_sync" for m in st.get("members", [])):
        return 1
    return 0


_STATES = ("clean", "active", "resyncing", "degraded", "rebuilding", "failed")


def _label(v: object) -> str:
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus(st: dict[str, Any], array: str) -> str:
    """The status reply ``st`` of array directory ``array`` in the Prometheus text format
    (version 0.0.4)."""
    a = f'array="{_label(array)}"'
    out: list[str] = []

    def metric(name: str, kind: str, help: str, samples: list[tuple[str, float]]) -> None:
        out.append(f"# HELP raidlab_{name} {help}")
        out.append(f"# TYPE raidlab_{name} {kind}")
        for labels, v in samples:
            out.append(f"raidlab_{name}{{{a}{labels}}} {v:g}")

    metric(
        "array_state",
        "gauge",
        "1 for the array's current state.",
        [(f',state="{s}"', 1.0 if st["state"] == s else 0.0) for s in _STATES],
    )
    metric("array_size_bytes", "gauge", "Usable bytes of the array.", [("", st["size_bytes"])])
    metric("array_events", "counter", "Superblock event counter.", [("", st["events"])])
    metric("array_disks", "gauge", "Slots of the array.", [("", st["disks"])])
    metric(
        "array_failed_members",
        "gauge",
        "Slots not in sync (failed or rebuilding).",
        [("", sum(1 for m in st["members"] if m["state"] != "in_sync"))],
    )
    metric("array_spares", "gauge", "Hot spares.", [("", len(st["spares"]))])
    metric("array_faulty_devices", "gauge", "Failed devices not yet removed.", [("", len(st["faulty"]))])
    per: list[tuple[str, str, str]] = [
        ("member_read_blocks_total", "Data blocks read from the member.", "read_blocks"),
        ("member_write_blocks_total", "Data blocks written to the member.", "write_blocks"),
        ("member_errors_total", "I/O errors of the member.", "errors"),
    ]
    for name, help, key in per:
        metric(name, "counter", help, [(f',slot="{m["slot"]}"', m[key]) for m in st["members"]])
    metric(
        "member_in_sync",
        "gauge",
        "1 when the slot's member is in sync.",
        [(f',slot="{m["slot"]}"', 1.0 if m["state"] == "in_sync" else 0.0) for m in st["members"]],
    )
    timed = [m for m in st["members"] if m.get("timing")]
    if timed:
        # Disk-timed members (serve --timing): the model's counters.
        for name, kind, help, key in [
            ("member_timed_ops_total", "counter", "Operations a disk-timed member completed.", "ops"),
            ("member_timed_service_us_mean", "gauge", "Mean model service time, microseconds.", "service_us_mean"),
            ("member_timed_wait_us_mean", "gauge", "Mean model queue wait, microseconds.", "wait_us_mean"),
            ("member_timed_late_us_mean", "gauge", "Mean lateness of real completions behind the model, microseconds.", "late_us_mean"),
            ("member_timed_queue_max", "gauge", "Largest number of operations present at once.", "queue_max"),
            ("member_timed_utilization", "gauge", "Fraction of time with an operation in service.", "utilization"),
        ]:
            metric(name, kind, help, [(f',slot="{m["slot"]}"', m["timing"][key]) for m in timed])
    rb = st.get("rebuild")
    metric("rebuild_fraction", "gauge", "Rebuild progress, 0 to 1 (0 when none runs).", [("", rb["fraction"] if rb else 0.0)])
    rs = st["resync"]
    metric("resync_pending_regions", "gauge", "Bitmap regions waiting for resync.", [("", rs["pending_regions"])])
    ck = st.get("check")
    metric("check_running", "gauge", "1 while a check or repair runs.", [("", 1.0 if ck and ck["state"] == "running" else 0.0)])
    if ck:
        metric("check_fraction", "gauge", "Progress of the last check or repair, 0 to 1.", [("", ck["fraction"])])
        metric("check_mismatches", "gauge", "Mismatching rows found by the last check or repair (md's mismatch_cnt).", [("", ck["mismatches"])])
    c = st.get("cache")
    if c:
        metric("read_cache_hits_total", "counter", "Read cache hits (blocks).", [("", c["hits"])])
        metric("read_cache_misses_total", "counter", "Read cache misses (blocks).", [("", c["misses"])])
        metric("read_cache_evictions_total", "counter", "Read cache evictions.", [("", c["evictions"])])
    wc = st.get("write_cache")
    if wc:
        metric("write_cache_pages", "gauge", "Dirty pages held by the write cache.", [("", wc["occupied_pages"])])
        metric("write_cache_destages_total", "counter", "Write-cache destages.", [("", wc["destages"])])
    return "\n".join(out) + "\n"
