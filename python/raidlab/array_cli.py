"""The store's commands: ``raidlab array``, ``raidlab serve`` and ``raidlab ctl``.

    raidlab array create DIR --level raid5 --disks 5 --chunk 64KiB --size 1GiB [--layout L]
                             [--spares K] [--name NAME] [--force] [MEMBER ...]
    raidlab array examine DIR|MEMBER [--json]
    raidlab serve DIR [--listen 127.0.0.1:10809 | --listen unix:PATH] [--cache POLICY --cache-mib N]
                      [--write-cache-mib N --destage ORDER --thresholds H/L --backup none|mirror|log]
                      [--rebuild-order sequential|pro] [--rebuild-min-kib N] [--rebuild-max-kib N] [--rebuild-run-kib N]
                      [--rebuild-executor runs|dor[,buffers=N][,depth=N]]
                      [--timing "[SLOT=]MODEL[,scheduler=S,...] ..."]
                      [--tls off|on|require (--tls-certificates DIR [--tls-verify-peer] | --tls-psk FILE)]
                      [--force] [--read-only] [--pid-file PATH]
                      [--log-format text|json] [--log-level L] [--event-program PROG] [--save-config]
    raidlab ctl DIR status [--json | --prometheus] [--test] | fail K [--force] | add-spare PATH
                    | remove K|PATH | re-add K|PATH | check|repair [--wait] [--test] [--cancel]
                    | watch [--json] [--count N] | test-event
    raidlab replay URI WORKLOAD.toml [--qd N] [--timestamps SCALE | --schedule [--log CSV]] [--requests N] [--json]

The work is done by the Rust store (``raidlab._core``); this module parses arguments and
prints. Bad input raises a ``RaidlabError`` (exit code 2). The ``ctl`` commands, which talk
to a served array through its control socket, are in :mod:`raidlab.ctl_cli`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any

from rich.console import Console

from raidlab import _core, daemon, serve_config
from raidlab.ctl_cli import _device, _print_json_or, _shape, cmd_ctl


def mib_size(text: str) -> int:
    """A cache size for `serve`: whole MiB as a bare number (`64`) or a size with a unit
    (`512MiB`, `2GiB`), at least 1 MiB and a whole number of MiB."""
    bare = text.strip().isdigit()
    try:
        mib = float(text) if bare else _core.parse_size(text) / 2**20
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if mib < 1 or mib != int(mib):
        raise argparse.ArgumentTypeError(f"expected a whole number of MiB, at least 1 (64, 512MiB, 2GiB), got {text!r}")
    return int(mib)


def cmd_array_create(args: argparse.Namespace, console: Console) -> int:
    out = json.loads(
        _core.array_create(
            args.dir,
            args.level,
            args.disks,
            args.chunk,
            args.size,
            layout=args.layout,
            spares=args.spares,
            name=args.name,
            # Absolute, from the caller's working directory (the manifest records them so).
            members=[_device(m) for m in args.members],
            force=args.force,
            bitmap_chunk=args.bitmap_chunk,
        )
    )
    if _print_json_or(args, out):
        return 0
    console.print(
        f"created [bold]{out['name']}[/bold]: {_shape(out)} usable, "
        f"data at offset {out['data_offset_bytes']} on each member, uuid {out['uuid']}"
    )
    for p in out["members"]:
        console.print(f"  member {p}")
    for p in out["spares"]:
        console.print(f"  spare  {p}")
    if out["initial_resync"]:
        console.print("  the members kept their old contents: parity is resynced when first served")
    return 0


def cmd_array_examine(args: argparse.Namespace, console: Console) -> int:
    out = json.loads(_core.array_examine(args.dir))
    if _print_json_or(args, out):
        return 0
    if "member" in out:
        role = out["role"] if isinstance(out["role"], str) else f"slot {out['role']}"
        console.print(
            f"[bold]{out['member']}[/bold]: {role} of [bold]{out['name']}[/bold] (uuid {out['uuid']}), {_shape(out)}, "
            f"events {out['events']}, {'clean' if out['clean'] else 'dirty'}" + (", [red]array failed[/red]" if out["failed"] else "")
        )
        console.print(f"  slots: {', '.join(f'{i} {st}' for i, st in enumerate(out['slots']))}")
        if out.get("left_in_sync") is not None:
            console.print(f"  left slot {out['former_slot']} in sync at event {out['left_in_sync']}")
        bm = out["bitmap"]
        cleared = f", bits cleared last at event {bm['cleared_events']}" if bm.get("cleared_events") is not None else ""
        console.print(
            f"  bitmap: {bm['error']}" if "error" in bm else f"  bitmap: {bm['dirty_regions']}/{bm['regions']} regions dirty (events {bm['events']}{cleared})"
        )
        return 0
    console.print(
        f"[bold]{out['name']}[/bold] {_shape(out)}, events {out['events']}, "
        f"{'clean' if out['clean'] else 'dirty'}"
    )
    for m in out["members"]:
        console.print(f"  slot {m['slot']}: {m['path'] or '-'} ({m['state']})")
    for p in out["spares"]:
        console.print(f"  spare: {p}")
    for f in out.get("faulty", []):
        console.print(f"  faulty: {f['path']}" + (f" (was slot {f['slot']})" if f["slot"] is not None else ""))
    for w in out["warnings"]:
        console.print(f"  [yellow]warning:[/yellow] {w}")
    return 0


def cmd_serve(args: argparse.Namespace, console: Console) -> int:
    loaded = serve_config.resolve(args)
    if args.save_config:
        saved = serve_config.save(args, loaded)
        print(f"raidlab serve: options saved to {saved}", file=sys.stderr, flush=True)
    try:
        return _serve(args)
    except _core.ConfigError as e:
        raise serve_config.blame(loaded, e, args._config_given) from None


def _serve(args: argparse.Namespace) -> int:
    pid_file = daemon.PidFile(args.pid_file)

    def ready(line: str) -> None:
        pid_file.write()
        print(line, flush=True)
        daemon.sd_notify(f"READY=1\nMAINPID={os.getpid()}\nSTATUS={line}")

    # The store stops on SIGINT/SIGTERM by itself (drain, checkpoint, mark clean); Python's
    # own handlers would turn the same signal into a KeyboardInterrupt afterwards.
    old = {s: signal.signal(s, signal.SIG_DFL) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        out = json.loads(
            _core.serve(
                args.dir,
                args.listen,
                cache=args.cache,
                cache_mib=args.cache_mib,
                rebuild_order=args.rebuild_order,
                rebuild_min_kib_s=args.rebuild_min_kib,
                rebuild_max_kib_s=args.rebuild_max_kib,
                rebuild_run_kib=args.rebuild_run_kib,
                rebuild_executor=args.rebuild_executor,
                workers=args.workers,
                ready=ready,
                write_cache_mib=args.write_cache_mib,
                destage=args.destage,
                thresholds=args.thresholds,
                max_destages=args.max_destages,
                backup=args.backup,
                backup_path=args.backup_path,
                log_mode=args.log_mode,
                log_size=args.log_size,
                segment=args.segment,
                log_nvram=args.log_nvram,
                log_nvram_slots=args.log_nvram_slots,
                backup_discard=args.backup_discard,
                min_block=args.min_block,
                handshake_timeout=args.handshake_timeout,
                idle_timeout=args.idle_timeout,
                max_connections=args.max_connections,
                payload_mib=args.payload_mib,
                conn_payload_mib=args.conn_payload_mib,
                zero_piece_mib=args.zero_piece_mib,
                poll_us=args.poll_us,
                insecure=args.insecure,
                force=args.force,
                read_only=args.read_only,
                tls=args.tls,
                tls_certificates=args.tls_certificates,
                tls_psk=args.tls_psk,
                tls_verify_peer=args.tls_verify_peer,
                log_format=args.log_format,
                log_level=args.log_level,
                event_program=args.event_program,
                event_timeout=args.event_timeout,
                timing=args.timing,
                member_timeout=args.member_timeout,
                missing_grace=args.missing_grace,
            )
        )
    finally:
        daemon.sd_notify("STOPPING=1")
        pid_file.remove()
        for s, h in old.items():
            signal.signal(s, h)
    if args.json:
        print(json.dumps(out))
    return 0


def cmd_replay(args: argparse.Namespace, console: Console) -> int:
    from raidlab.api import _source

    text, file, base = _source(args.workload)
    if args.log is not None and not args.schedule:
        err = _core.ConfigError("--log: only with --schedule")
        err.key = "--log"
        raise err
    out = json.loads(
        _core.replay(
            args.uri,
            text,
            file,
            base,
            qd=args.qd,
            time_scale=args.timestamps,
            requests_max=args.requests,
            schedule=args.schedule,
            log=os.path.abspath(args.log) if args.log else None,
        )
    )
    if args.schedule:
        return _print_scheduled(out, args.json, console)
    if args.json:
        print(json.dumps(out))
        return 0
    console.print(
        f"replayed {out['requests']:,} requests ({out['nbd_reads']:,} reads, {out['nbd_writes']:,} writes) "
        f"at depth {out['qd']} in {out['elapsed_s']:.2f} s: {out['iops']:,.0f} IOPS, {out['mb_s']:,.1f} MB/s"
        + (f", [red]{out['errors']} errors[/red]" if out["errors"] else "")
    )
    for kind in ("read", "write"):
        lat = out[f"{kind}_latency"]
        if lat:
            console.print(
                f"  {kind} latency ms: mean {lat['mean_ms']:.3f}, p50 {lat['p50_ms']:.3f}, p90 {lat['p90_ms']:.3f}, "
                f"p99 {lat['p99_ms']:.3f}, p99.9 {lat['p999_ms']:.3f}, max {lat['max_ms']:.3f}"
            )
    return 0 if out["errors"] == 0 else 1


def _print_scheduled(out: dict[str, Any], as_json: bool, console: Console) -> int:
    if as_json:
        print(json.dumps(out))
        return 0 if out["errors"] == 0 else 1
    lat = out["latency"] or {}
    console.print(
        f"replayed {out['requests']:,} requests at their scheduled arrivals over {out['workers']} connections in "
        f"{out['elapsed_s']:.2f} s: {out['completed']:,} measured, {out['iops']:,.1f} IOPS, "
        f"mean {lat.get('mean_ms', 0.0):.3f} ms, p99 {lat.get('p99_ms', 0.0):.3f} ms"
        + (f", [red]{out['errors']} errors[/red]" if out["errors"] else "")
    )
    for lv in out["ramp"]:
        mean = "-" if lv["latency_mean_ms"] is None else f"{lv['latency_mean_ms']:.2f} ms"
        console.print(
            f"  level {lv['level_iops']:,.0f} IOPS: {lv['iops']:,.1f} IOPS, mean {mean}"
            + (" (saturated)" if lv["saturated"] else "")
        )
    return 0 if out["errors"] == 0 else 1


def _micros(text: str) -> int:
    """A whole number of microseconds, zero or more (the upper bound is the core's check)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of microseconds, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected zero or more microseconds, got {v}")
    return v


def _slot(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a slot number, got {text!r}")
    return n


def add_commands(sub: Any, positive_int: Any) -> None:
    a = sub.add_parser("array", help="create or examine a RAID array on member files")
    asub = a.add_subparsers(dest="array_command", required=True)
    c = asub.add_parser("create", help="create an array: sparse files DIR/disk0.. or explicit MEMBER paths")
    c.add_argument("dir", help="array directory (holds the members manifest and the control socket)")
    c.add_argument("--level", required=True, help="raid0, raid1, raid10, raid5 or raid6")
    c.add_argument("--disks", type=positive_int, required=True, help="members")
    c.add_argument("--chunk", default="64KiB", help="chunk (stripe unit), e.g. 64KiB (default)")
    c.add_argument("--size", required=True, help="data bytes per member, e.g. 1GiB (like mdadm --size)")
    c.add_argument("--layout", default=None, help="RAID-5/6 layout (default left-symmetric)")
    c.add_argument("--spares", type=int, default=0, help="hot spares")
    c.add_argument("--name", default=None, help="array and export name (default: the directory's name)")
    c.add_argument("--force", action="store_true", help="overwrite an array in DIR or reuse devices with a superblock")
    c.add_argument(
        "--bitmap-chunk",
        default=None,
        help="member bytes per write-intent bitmap region, whole chunks (default 64MiB, md's; smaller regions resync less after a crash and write the bitmap more often)",
    )
    c.add_argument("--json", action="store_true")
    c.add_argument("members", nargs="*", help="explicit members (files, block devices, or NBD URIs nbd://HOST:PORT/EXPORT, nbd+unix:///EXPORT?socket=PATH): disks, then spares")
    c.set_defaults(func=cmd_array_create)
    e = asub.add_parser("examine", help="read the superblocks and show what assembly would find, or one member's superblock (writes nothing)")
    e.add_argument("dir", help="array directory, or one member file or block device")
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=cmd_array_examine)

    s = sub.add_parser("serve", help="serve an array over NBD (foreground; SIGINT/SIGTERM stop it cleanly)")
    s.add_argument("dir", help="array directory")
    s.add_argument("--listen", default="127.0.0.1:10809", help="HOST:PORT or unix:PATH (default 127.0.0.1:10809)")
    s.add_argument("--cache", default=None, help="read cache policy: lru, fifo, lfu, clock, 2q, arc, mq, sieve, s3fifo, slru, lirs, wtinylfu, vdf-lru, vdf-lfu, vdf-clock, vdf-sieve, vdf-arc, vdf-s3fifo, greedydual")
    s.add_argument("--cache-mib", type=mib_size, default=None, help="read cache size: MiB, or with a unit such as 512MiB or 2GiB (default 64)")
    s.add_argument("--rebuild-order", default="sequential", help="sequential (md) or pro (popularity-based)")
    s.add_argument("--rebuild-min-kib", type=positive_int, default=None, help="md's speed_limit_min, KiB/s per member")
    s.add_argument("--rebuild-max-kib", type=positive_int, default=None, help="md's speed_limit_max, KiB/s per member")
    s.add_argument(
        "--rebuild-run-kib",
        type=positive_int,
        default=None,
        help="KiB a rebuild run reads from each survivor at once, 4 to 1024, whole chunks (default 1024; one chunk reads a unit at a time); with --rebuild-executor dor, the most a survivor's reader merges into one read",
    )
    s.add_argument(
        "--rebuild-executor",
        default=None,
        help="runs (default: four threads, each a run of consecutive units) or dor[,buffers=N][,depth=N] (the simulator's disk-oriented reconstruction: a reader per survivor keeping depth reads at its disk, buffers unit buffers; defaults 64 and 2)",
    )
    s.add_argument("--workers", type=positive_int, default=None, help="NBD worker threads")
    s.add_argument(
        "--timing",
        default=None,
        metavar='"[SLOT=]MODEL[,KEY=V...] ..."',
        help="disk-timed members: each operation takes the time of a core disk model (wd10eals, cheetah9lp, sata_ssd, constant, ...); "
        "keys scheduler=fcfs|sstf|clook, ncq=N, aging-ms=MS, queue=N (docs/store.md: Disk-timed members)",
    )
    w = s.add_argument_group("write-back cache (docs/store.md: what each backup promises)")
    w.add_argument("--write-cache-mib", type=mib_size, default=None, help="write-back cache size: MiB, or with a unit such as 256MiB (default: none, writes go to the members)")
    w.add_argument("--destage", default="stow", help="destage order: lrw, cscan, wow or stow (default)")
    w.add_argument("--thresholds", default="80/20", metavar="H/L", help="linear-threshold destage rate, percent of the cache (default 80/20)")
    w.add_argument("--max-destages", type=int, default=16, metavar="N", help="most destages in flight, one round's groups (default 16; the simulator's write_cache.max_destages)")
    w.add_argument("--backup", default="mirror", help="second copy of dirty pages: mirror (default), log (RAPID-Cache) or none (volatile)")
    w.add_argument("--backup-path", default=None, help="mirror or physical log file (default DIR/wb-mirror.img or DIR/wb-log.img)")
    w.add_argument("--log-mode", default="physical", help="physical (a log file of its own) or logical (a partition past each member's data)")
    w.add_argument("--log-size", default=None, help="log size, e.g. 256MiB (default 4x the cache, at least 16 MiB)")
    w.add_argument("--segment", default="128KiB", help="log segment size (default 128KiB)")
    w.add_argument("--log-nvram", default=None, metavar="PATH", help="NVRAM segment buffers in front of the log (RAPID-Cache): a file, e.g. on tmpfs; a write is answered once synced there")
    w.add_argument("--log-nvram-slots", type=int, default=None, metavar="N", help="segment buffers in the --log-nvram file (default 4)")
    w.add_argument("--backup-discard", action="store_true", help="start even if the last run's backup cannot be read (its dirty pages are lost)")
    n = s.add_argument_group("NBD limits against slow and hostile clients (docs/store.md)")
    n.add_argument("--min-block", type=positive_int, default=1, help="advertised minimum block in bytes, a power of two; below 4096 smaller requests are read-modify-written (default 1; 4096 refuses them)")
    n.add_argument("--handshake-timeout", type=float, default=10.0, metavar="SECS", help="close a connection that has not finished its handshake (default 10)")
    n.add_argument("--idle-timeout", type=float, default=30.0, metavar="SECS", help="close a connection whose request header or write payload stops arriving (default 30)")
    n.add_argument("--max-connections", type=positive_int, default=128, help="connections at once; when full, the oldest one still in its handshake makes room (default 128)")
    n.add_argument("--payload-mib", type=positive_int, default=128, help="payload memory over all connections, MiB (default 128)")
    n.add_argument("--conn-payload-mib", type=positive_int, default=32, help="payload memory per connection, MiB (default 32)")
    n.add_argument("--zero-piece-mib", type=positive_int, default=4, help="TRIM and WRITE_ZEROES run in pieces of this many MiB, a power of two (default 4)")
    n.add_argument("--poll-us", type=_micros, default=50, metavar="US", help="a connection whose requests come back to back has its socket polled this long before its reader sleeps, and its lone requests run on the reader when the array answers in memory time; 0 to 1000, 0 never polls (default 50)")
    n.add_argument("--insecure", action="store_true", help="allow a --listen address other than loopback without --tls require")
    t = s.add_argument_group("TLS through NBD_OPT_STARTTLS, as nbdkit --tls (docs/store.md: TLS)")
    t.add_argument("--tls", default="off", metavar="off|on|require", help="off (default); on: clients may upgrade; require: every option before STARTTLS is refused")
    t.add_argument("--tls-certificates", default=None, metavar="DIR", help="directory with server-cert.pem, server-key.pem (and ca-cert.pem for --tls-verify-peer)")
    t.add_argument("--tls-psk", default=None, metavar="FILE", help="pre-shared keys instead of certificates: GnuTLS's username:hexkey lines, as nbdkit --tls-psk (needs a build with the tls-psk feature, i.e. OpenSSL)")
    t.add_argument("--tls-verify-peer", action="store_true", help="require a client certificate signed by DIR/ca-cert.pem")
    r = s.add_argument_group("remote members (docs/store.md: Remote members)")
    r.add_argument("--member-timeout", type=float, default=5.0, metavar="SECS", help="a remote member's request deadline: past it, its host is taken as away and the member is missing (default 5)")
    r.add_argument("--missing-grace", type=float, default=30.0, metavar="SECS", help="how long a missing member's slot waits for its host before a spare is rebuilt onto it (default 30)")
    s.add_argument("--force", action="store_true", help="start an array recorded failed, or with a stale member, as md's --assemble --force (every region is resynced)")
    s.add_argument("--read-only", action="store_true", help="export read-only and write nothing to the members (no resync or rebuild; ctl fail/add-spare/remove/re-add refused)")
    s.add_argument("--pid-file", default=None, help="write the server's process id here once it accepts connections (removed at exit)")
    s.add_argument("--json", action="store_true", help="print a JSON summary at exit")
    o = s.add_argument_group("operation (docs/store.md: Operating an array)")
    o.add_argument("--log-format", default="text", help="stderr log lines: text (default) or json (one object per line)")
    o.add_argument("--log-level", default="info", help="error, warn, info (default) or debug")
    o.add_argument("--event-program", default=None, metavar="PROG", help="run PROG EVENT DIR [DEVICE] for each event (mdadm --monitor --program), one at a time")
    o.add_argument("--event-timeout", type=float, default=30.0, metavar="SECS", help="kill an event program run after this long (default 30)")
    o.add_argument("--save-config", action="store_true", help=f"write the options given to DIR/{serve_config.CONFIG_NAME} (read at every start; the command line wins), then serve")
    serve_config.mark_defaults(s)
    s.set_defaults(func=cmd_serve)

    t = sub.add_parser("ctl", help="control a served array through DIR/control.sock")
    t.add_argument("dir", help="array directory")
    tsub = t.add_subparsers(dest="action", required=True)
    p = tsub.add_parser("status", help="show the state")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--prometheus", action="store_true", help="Prometheus text exposition")
    p.add_argument("--test", action="store_true", help="exit 1 when degraded or rebuilding, 2 when failed (mdadm --detail --test)")
    for name, what in (("check", "compare parity/mirrors with the data, like md's sync_action check"), ("repair", "check and rewrite the parity/mirrors of mismatching rows from their data (md's repair)")):
        p = tsub.add_parser(name, help=f"{what}: starts a background job (`ctl status` shows it)")
        p.add_argument("--wait", action="store_true", help="wait for the job and print its report")
        p.add_argument("--test", action="store_true", help="wait, and exit 1 when mismatches were found")
        p.add_argument("--cancel", action="store_true", help="stop the job running")
        p.add_argument("--max-kib", type=positive_int, default=None, help="at most this many KiB/s per member (default: unlimited)")
        p.add_argument("--json", action="store_true")
    p = tsub.add_parser("watch", help="print the server's events as they happen (until interrupted)")
    p.add_argument("--json", action="store_true", help="one JSON object per event")
    p.add_argument("--count", type=positive_int, default=None, help="exit after N events")
    p = tsub.add_parser("test-event", help="send a TestMessage event (to the event program and watchers)")
    p.add_argument("--json", action="store_true")
    f = tsub.add_parser("fail", help="fail a member (like mdadm --fail)")
    f.add_argument("target", type=_slot, help="slot number")
    f.add_argument("--force", action="store_true", help="fail it even when the array cannot survive that")
    f.add_argument("--json", action="store_true")
    p = tsub.add_parser("add-spare", help="add a hot spare (a rebuild starts by itself if a slot is failed)")
    p.add_argument("target", help="path of a file or block device at least as large as a member")
    p.add_argument("--json", action="store_true")
    r = tsub.add_parser("remove", help="remove a spare or a failed device")
    r.add_argument("target", help="its path, or the slot a failed device was taken out of")
    r.add_argument("--json", action="store_true")
    r = tsub.add_parser(
        "re-add",
        help="put a device that left back: into its slot with only the bitmap's dirty regions resynced when it is recent enough, else as a spare with a full rebuild",
    )
    r.add_argument("target", help="its path (also a removed device), or the slot it was taken out of")
    r.add_argument("--json", action="store_true")
    t.set_defaults(func=cmd_ctl)

    p = sub.add_parser("replay", help="replay a config's workload against an NBD export; IOPS and latency")
    p.add_argument("uri", help="nbd://HOST:PORT[/EXPORT] or nbd+unix:///EXPORT?socket=PATH; over TLS nbds://... or nbds+unix://... with ?tls-certificates=DIR (ca-cert.pem)")
    p.add_argument("workload", help="experiment TOML file (its first run's [workload] is replayed)")
    p.add_argument("--qd", type=positive_int, default=1, help="requests in flight (default 1)")
    p.add_argument("--timestamps", type=float, default=None, metavar="SCALE", help="issue at trace time x SCALE (default: as fast as possible)")
    p.add_argument("--requests", type=positive_int, default=None, help="stop after N requests")
    p.add_argument(
        "--schedule",
        action="store_true",
        help="issue at the timed run's own arrivals ([run] open loop or ramp, seeded by run.seed) over --qd connections",
    )
    p.add_argument("--log", default=None, metavar="CSV", help="with --schedule: one line per request (arrival_ns,latency_ns,op,ok)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_replay)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run as: raidlab array|serve|ctl ...")
