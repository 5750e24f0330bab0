"""Backup-cache speed: simulated requests per wall-clock second with the write cache's backups.

``--requests`` requests of synthetic-A (the RAPID-Cache paper's bursty generator), open loop at
1,000 req/s, through a 64 MB LRU read cache and a 16 MB write cache (RAPID destage) in front of
a RAID-5 of 16 ``hp97560_rapid`` disks: the setup of ``experiments/rapid-response.toml``. Cases:
no backup, a dual NVRAM, RAPID with a physical and with a logical cache disk. Each case in its
own child process, one after the other, best of ``--repeat``; the ratio column is each case's
rate over the no-backup case's (what the backup's bookkeeping and log I/O cost the simulator).

    python benches/bench_rapid.py [--requests N] [--repeat K]

Not a pass/fail test.
"""

from __future__ import annotations

from benchlib import best_of, metrics_child, requests_args

CONFIG = """
[workload]
ops = "all"
block_size = 8192
[workload.synthetic]
kind = "bursty"
preset = "synthetic-a"
requests = {requests}
rate_iops = 1000
space_gib = 16.0
seed = 7
[cache]
policy = "lru"
capacity_blocks = 8192
[write_cache]
capacity_pages = 2048
order = "lrw"
rate = "rapid"
max_destages = 8
[array]
level = "raid5"
disks = 16
stripe_unit = 32768
[run]
mode = "timed"
seed = 1
outstanding_max = 1000000
interval_s = 10
[controller]
hit_us = 200
[disk]
preset = "hp97560_rapid"
queue = "fcfs"
"""

CASES = [
    ("no backup", ""),
    ("dual NVRAM", '[backup]\nkind = "dual"\n'),
    ("RAPID, physical cache disk", '[backup]\nkind = "rapid"\ncache_disk = "physical"\nsegment_kib = 256\n'),
    ("RAPID, logical cache disk", '[backup]\nkind = "rapid"\ncache_disk = "logical"\nsegment_kib = 128\n'),
]

CHILD = metrics_child(["requests", "events", "wall_s", "latency_mean_ms", "bk_log_writes"])


def main() -> None:
    args = requests_args()
    rows = []
    for label, tail in CASES:
        rows.append((label, best_of(CHILD, CONFIG.format(requests=args.requests) + tail, args.repeat)))
    print(f"workload: synthetic-A, {args.requests:,} requests at 1,000 req/s; RAID-5 of 16 hp97560_rapid, 64 MB read / 16 MB write cache")
    print(f"{'case':30} {'requests/s':>12} {'ratio':>7} {'events/s':>12} {'mean ms':>9} {'log writes':>11}")
    base = rows[0][1]["requests"] / rows[0][1]["wall_s"]
    for label, m in rows:
        rate = m["requests"] / m["wall_s"]
        logs = f"{m['bk_log_writes']:,}" if m.get("bk_log_writes") is not None else "-"
        print(f"{label:30} {rate:>12,.0f} {rate / base:>7.2f} {m['events'] / m['wall_s']:>12,.0f} {m['latency_mean_ms']:>9.2f} {logs:>11}")


if __name__ == "__main__":
    main()
