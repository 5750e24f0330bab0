"""``raidlab ctl``: the commands that talk to a served array through ``DIR/control.sock``
(status, check and repair, watch, fail, add-spare, remove, re-add, test-event) and the text
they print.

Kept apart from :mod:`raidlab.array_cli` (the commands that create and serve an array, and
the arguments of every store command), which imports ``cmd_ctl`` from here; the few helpers
both use live here too, so the import goes one way.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import Any

from rich.console import Console
from rich.progress_bar import ProgressBar
from rich.table import Table

from raidlab import _core, daemon


# Shared with array_cli's commands, which import them from here.
def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _shape(out: dict[str, Any]) -> str:
    """'raid5 (left-symmetric) of 5 members, chunk 64.0 KiB, 256.0 MiB' of a create,
    examine or status reply."""
    return (
        f"{out['level']} ({out['layout']}) of {out['disks']} members, "
        f"chunk {_size(out['chunk_bytes'])}, {_size(out['size_bytes'])}"
    )


def _print_json_or(args: argparse.Namespace, out: dict[str, Any]) -> bool:
    """Print ``out`` as JSON when ``--json`` was given; tells whether it did."""
    if args.json:
        print(json.dumps(out, indent=2))
    return bool(args.json)


_NBD_SCHEMES = ("nbd://", "nbds://", "nbd+unix://", "nbds+unix://")


def _device(text: str) -> str:
    """A device argument: an NBD URI (a remote member) as it is; a path made absolute from
    the caller's working directory (the server would resolve a relative one against the
    array directory)."""
    return text if text.startswith(_NBD_SCHEMES) else os.path.abspath(text)


def _ctl(dir: str, req: dict[str, Any]) -> dict[str, Any]:
    reply: dict[str, Any] = json.loads(_core.ctl_request(dir, json.dumps(req)))
    if not reply.get("ok"):
        err = _core.StoreError(f"{dir}: {reply.get('error', 'request failed')}")
        err.file = dir
        raise err
    return reply


def _status_text(st: dict[str, Any], console: Console) -> None:
    console.print(
        f"state [bold]{st['state']}[/bold], {_shape(st)}, "
        f"data_offset_bytes {st['data_offset_bytes']}, events {st['events']}"
    )
    if st.get("failure"):
        console.print(f"[red]{st['failure']}[/red]")
    t = Table(box=None)
    for col in ("slot", "device", "state", "read blocks", "write blocks", "errors"):
        t.add_column(col, justify="right" if col in ("slot", "read blocks", "write blocks", "errors") else "left")
    for m in st["members"]:
        t.add_row(
            str(m["slot"]), m["path"] or "-", m["state"], f"{m['read_blocks']:,}", f"{m['write_blocks']:,}", str(m["errors"])
        )
    console.print(t)
    timed = [m for m in st["members"] if m.get("timing")]
    if timed:
        t = Table(box=None)
        for col in ("slot", "timing", "ops", "service us", "wait us", "late us", "queue max", "busy"):
            t.add_column(col, justify="left" if col == "timing" else "right")
        for m in timed:
            tm = m["timing"]
            t.add_row(
                str(m["slot"]),
                tm["spec"],
                f"{tm['ops']:,}",
                f"{tm['service_us_mean']:,.0f}",
                f"{tm['wait_us_mean']:,.0f}",
                f"{tm['late_us_mean']:,.0f}",
                str(tm["queue_max"]),
                f"{tm['utilization']:.0%}",
            )
        console.print(t)
    for p in st["spares"]:
        console.print(f"spare: {p}")
    for f in st["faulty"]:
        was = f" (was slot {f['slot']})" if f["slot"] < st["disks"] else ""
        console.print(f"faulty: {f['path']}{was}")
    rb = st.get("rebuild")
    if rb:
        partial = f", partial: {rb['regions']} dirty region(s)" if rb.get("kind") == "partial" else ""
        line = (
            f"rebuild of slot {rb['slot']} ({rb['order']}{partial}): {rb['units_done']:,}/{rb['units']:,} units, "
            f"{100 * rb['fraction']:.1f}%, {rb['rate_mb_s']:.1f} MB/s"
        )
        if console.is_terminal:
            grid = Table.grid(padding=1)
            grid.add_row(ProgressBar(total=1.0, completed=rb["fraction"], width=40), line)
            console.print(grid)
        else:
            console.print(line)
    lr = st.get("last_rebuild")
    if lr and not rb:
        what = f"partial, {lr['regions']} dirty region(s)" if lr["kind"] == "partial" else "full"
        console.print(
            f"last rebuild: slot {lr['slot']} onto {lr['device']} ({what}): "
            f"{lr['bytes']:,} of {lr['member_bytes']:,} bytes written"
        )
    rs = st["resync"]
    if rs["pending_regions"] or rs["resynced_rows"]:
        console.print(
            f"resync: {rs['pending_regions']} region(s) pending, {rs['resynced_rows']:,} rows resynced, "
            f"{rs['repaired_rows']:,} repaired"
        )
    wc = st.get("write_cache")
    if wc:
        mode = wc["mode"]["state"] + (f" ({wc['mode']['why']})" if wc["mode"].get("why") else "")
        console.print(
            f"write cache {wc['order']} {wc['thresholds_pct'][0]:g}/{wc['thresholds_pct'][1]:g}, backup {wc['backup']}: {mode}; "
            f"{wc['occupied_pages']:,}/{wc['capacity_pages']:,} pages held, {wc['destages']:,} destages "
            f"({wc['full_stripe_destages']:,} full-stripe), {wc['read_hit_pages']:,}/{wc['read_pages']:,} read pages hit"
        )
        if wc.get("backup_detail"):
            console.print(f"  {wc['backup_detail']}")
        if wc.get("failure"):
            console.print(f"[red]  {wc['failure']}[/red]")
    ck = st.get("check")
    if ck:
        console.print(_check_line(ck))
    c = st.get("cache")
    if c:
        total = c["hits"] + c["misses"]
        ratio = c["hits"] / total if total else 0.0
        console.print(
            f"cache {c['policy']}: {c['resident_blocks']:,}/{c['capacity_blocks']:,} blocks, "
            f"{c['hits']:,} hits, {c['misses']:,} misses (hit ratio {ratio:.4f}), {c['evictions']:,} evictions"
        )


def _check_line(ck: dict[str, Any]) -> str:
    """'check running: 45.3% (29/64 rows), 1 mismatch(es) at rows 2 (...)' of a job."""
    line = (
        f"{ck['kind']} {ck['state']}: {100 * ck['fraction']:.1f}% ({ck['rows_done']:,}/{ck['rows']:,} rows) "
        f"in {ck['elapsed_s']:.1f} s, {ck['mismatches']:,} mismatches, {ck['skipped']:,} skipped"
    )
    if ck["kind"] == "repair" and ck["repaired"]:
        line += f" ({ck['repaired']:,} rows repaired)"
    first = ck.get("first_mismatches") or []
    if first:
        line += "; first at rows " + ", ".join(
            f"{m['row']} (array offset {m['array_offset_bytes']}, member offset {m['member_offset_bytes']})" for m in first[:4]
        )
    if ck.get("error"):
        line += f"; {ck['error']}"
    return line


def cmd_check(args: argparse.Namespace, console: Console) -> int:
    """``ctl DIR check|repair``: start the job (md's ``sync_action``), or wait for it."""
    req: dict[str, Any] = {"cmd": args.action}
    if args.cancel:
        req["cancel"] = True
    else:
        req["wait"] = bool(args.wait or args.test)
        if args.max_kib:
            req["max_kib_s"] = args.max_kib
    rep = _ctl(args.dir, req)
    ck = rep["check"]
    if args.json:
        print(json.dumps(rep))
    elif args.cancel:
        console.print(f"{ck['kind']} cancelled: {_check_line(ck)}")
    elif rep.get("started"):
        console.print(f"{ck['kind']} started: {ck['rows']:,} rows (`raidlab ctl DIR status` shows its progress)")
    elif args.action == "repair":
        console.print(f"repaired: checked {ck['rows_done']:,} rows: {ck['mismatches']:,} mismatches rewritten, {ck['skipped']:,} skipped")
    else:
        console.print(f"checked {ck['rows_done']:,} rows: {ck['mismatches']:,} mismatches, {ck['skipped']:,} skipped")
        if ck["first_mismatches"]:
            console.print(_check_line(ck))
    return 1 if args.test and not rep.get("started") and ck["mismatches"] else 0


def _event_text(ev: dict[str, Any]) -> str:
    dev = f" {ev['device']}" if ev.get("device") else ""
    return f"{ev.get('time', '')} {ev['event']}{dev}: {ev.get('msg', '')}"


def cmd_watch(args: argparse.Namespace, console: Console) -> int:
    """``ctl DIR watch``: print the server's events as they come, until interrupted, the
    server stops (exit 0) or ``--count`` events were printed."""
    path = os.path.join(os.path.abspath(args.dir), "control.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError as e:
        err = _core.StoreError(f"{path}: no server answers ({e.strerror or e}); is `raidlab serve` running?")
        err.file = path
        raise err from None
    with s, s.makefile("r", encoding="utf-8") as f:
        s.sendall(b'{"cmd": "watch"}\n')
        first = json.loads(f.readline() or "{}")
        if not first.get("ok"):
            err = _core.StoreError(f"{args.dir}: {first.get('error', 'the server closed the connection')}")
            err.file = args.dir
            raise err
        seen = 0
        for line in f:
            ev = json.loads(line)
            if "event" not in ev:
                print(f"raidlab ctl watch: {ev.get('error', line.strip())}", file=sys.stderr)
                return 1
            print(json.dumps(ev) if args.json else _event_text(ev), flush=True)
            seen += 1
            if args.count and seen >= args.count:
                return 0
    return 0


def cmd_ctl(args: argparse.Namespace, console: Console) -> int:
    action = args.action
    if action in ("check", "repair"):
        return cmd_check(args, console)
    if action == "watch":
        return cmd_watch(args, console)
    if action == "test-event":
        rep = _ctl(args.dir, {"cmd": "test-event"})
        if args.json:
            print(json.dumps(rep))
        else:
            console.print(f"TestMessage sent ({rep['watchers']} watcher(s); the event program runs if one is set)")
        return 0
    if action == "status":
        st = _ctl(args.dir, {"cmd": "status"})
        if args.prometheus:
            sys.stdout.write(daemon.prometheus(st, os.path.abspath(args.dir)))
        elif not _print_json_or(args, st):
            _status_text(st, console)
        return daemon.status_exit_code(st) if args.test else 0
    if action == "fail":
        rep = _ctl(args.dir, {"cmd": "fail", "slot": args.target, "force": args.force})
    elif action == "add-spare":
        rep = _ctl(args.dir, {"cmd": "add-spare", "path": _device(args.target)})
    else:
        rep = _ctl(args.dir, {"cmd": action, "target": _slot_or_path(args.target)})
    if args.json:
        print(json.dumps(rep))
    else:
        if rep.get("warning"):
            console.print(f"[yellow]warning:[/yellow] {rep['warning']}")
        console.print(
            f"{action}: ok"
            + (f", array {rep['state']}" if "state" in rep else "")
            + (f", removed {rep['removed']}" if "removed" in rep else "")
            + (f", {rep['re_added']} is a spare again" if "re_added" in rep and rep.get("resync") != "partial" else "")
        )
        if rep.get("resync") == "partial":
            console.print(
                f"{rep['re_added']} is back in slot {rep['slot']}: resyncing {rep['regions']} dirty region(s), "
                f"{rep['bytes']:,} of {rep['member_bytes']:,} bytes"
            )
        elif rep.get("full_because"):
            console.print(f"full rebuild: {rep['full_because']}")
    return 0


def _slot_or_path(text: str) -> str:
    """A slot number as it is; a device as `_device` takes it."""
    return text if text.isdigit() else _device(text)
