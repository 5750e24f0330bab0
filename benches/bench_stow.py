"""Write-cache speed: simulated SPC-1-like requests per wall-clock second with STOW.

1 M requests of the SPC-1-like generator (full backend), open loop at a fixed 1000 IOPS,
through a 32K-page write cache (STOW, linear threshold 90/80, 20 destages in flight, no read
cache) in front of a RAID-5 4+P of ``ibm40k1052`` disks (mechanical model, C-LOOK), 64 KiB
strips: the setup of the STOW paper's Figure 7. For reference the same run with WOW. Each
case in its own child process, one after the other, best of ``--repeat``; rates are over the
whole run (generator included, final drain included).

    python benches/bench_stow.py [--requests N] [--repeat K]

Target: >= 1 M simulated requests per wall second for STOW. Not a pass/fail test.
"""

from __future__ import annotations

from benchlib import best_of, metrics_child, requests_args

CONFIG = """
[workload]
ops = "all"
[workload.synthetic]
kind = "spc1"
requests = {requests}
iops = 1000.0
seed = 1
[array]
level = "raid5"
disks = 5
stripe_unit = 65536
[run]
mode = "timed"
interval_s = 10
[disk]
preset = "ibm40k1052"
queue = "clook"
"""

WRITE_CACHE = """
[write_cache]
capacity_pages = 32768
order = "{order}"
high = 90
low = 80
"""

CASES = [
    ("stow", WRITE_CACHE.format(order="stow")),
    ("wow", WRITE_CACHE.format(order="wow")),
]

CHILD = metrics_child(["requests", "events", "wall_s", "sim_s", "latency_mean_ms", "wc_destages"])


def main() -> None:
    args = requests_args()
    rows = []
    for label, tail in CASES:
        text = CONFIG.format(requests=args.requests) + tail
        best = best_of(CHILD, text, args.repeat)
        rows.append((label, best))
    print(f"workload: SPC-1-like, {args.requests:,} requests at 1000 IOPS; RAID-5 4+P of ibm40k1052, 32K-page write cache")
    print(f"{'case':32} {'requests/s':>14} {'events/s':>14} {'sim s':>10} {'mean ms':>9} {'destages':>10}")
    for label, m in rows:
        rate = m["requests"] / m["wall_s"]
        events = m["events"] / m["wall_s"]
        destages = f"{m['wc_destages']:,}" if m.get("wc_destages") is not None else "-"
        print(f"{label:32} {rate:>14,.0f} {events:>14,.0f} {m['sim_s']:>10,.1f} {m['latency_mean_ms']:>9.2f} {destages:>10}")
    stow = rows[0][1]
    print(f"STOW: {stow['requests'] / stow['wall_s']:,.0f} simulated requests per wall second (target >= 1,000,000)")


if __name__ == "__main__":
    main()
