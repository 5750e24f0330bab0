"""Online rebuild end to end: a disk fails, a hot spare takes over, the array rebuilds while
users keep reading; the metrics, the time series and bad input (exit code 2, key named)."""

from __future__ import annotations

import pytest

import raidlab
from conftest import assert_config_error

BASE = """
[workload.synthetic]
kind = "websearch"
requests = 30000
space_gib = 2.0
mean_interarrival_ms = 5
cluster_kib = 16384
seed = 3
[cache]
policy = "lru"
capacity_blocks = 1
[array]
level = "raid5"
disks = 4
stripe_unit = 65536
[run]
mode = "timed"
interval_s = 5
[disk]
preset = "st3146807lc"
queue = "clook"
[rebuild]
extent_gib = 1.0
{rebuild}
[[events]]
at_s = 10
fail = 2
[[events]]
at_s = 20
rebuild = 2
"""


def run(tmp_path, rebuild: str = "") -> dict:
    p = tmp_path / "r.toml"
    p.write_text(BASE.format(rebuild=rebuild))
    return raidlab.run(p).runs[0]


def test_states_metrics_and_series(tmp_path) -> None:
    r = run(tmp_path)
    m = r.metrics
    assert m["rebuild_done"] and m["rebuild_disk"] == 2 and m["rebuild_spare"] == 0
    assert m["rebuild_failed_s"] == 10.0 and m["rebuild_start_s"] == 20.0
    assert m["rebuild_end_s"] > 20.0
    assert m["rebuild_window_s"] == pytest.approx(m["rebuild_end_s"] - 10.0)
    assert m["rebuild_units"] == 16384 == m["rebuild_rebuilt"]
    # Each unit is read from the three survivors once; the spare took every unit.
    assert m["rebuild_reads"] == 3 * 16384
    assert len(m["disk_ops"]) == 5 and m["disk_ops"][4] >= m["rebuild_writes"]
    # Users suffer during the rebuild and recover after.
    assert m["during_latency_mean_ms"] > m["after_latency_mean_ms"]
    assert m["before_latency_count"] + m["during_latency_count"] + m["after_latency_count"] == m["completed"]
    assert m["mttdl_hours"] > 1e6 and m["rebuild_mib_s"] > 1.0
    s = r.series_frame()
    assert {"t_s", "mean_ms", "iops", "rebuild_progress"} <= set(s.columns)
    assert s["rebuild_progress"].is_monotonic_increasing
    assert s["rebuild_progress"].iloc[0] == 0.0 and s["rebuild_progress"].iloc[-1] == 1.0


def test_executors_rates_and_redirection(tmp_path) -> None:
    dor = run(tmp_path).metrics
    sor = run(tmp_path, 'executor = "sor"').metrics
    sor4 = run(tmp_path, 'executor = "sor"\nstripes = 4').metrics
    # SOR waits for the slowest survivor of every stripe; more stripes in flight help.
    assert dor["rebuild_s"] < sor4["rebuild_s"] < sor["rebuild_s"]
    # md pacing at 2 MiB/s while users are busy (1 GiB at most ~2-4 MiB/s: 256-512 s).
    md = run(tmp_path, 'rate = "md"\nmin_kib_s = 2048\nmax_kib_s = 4096').metrics
    assert 250 < md["rebuild_s"] < 520, md["rebuild_s"]
    assert md["during_latency_mean_ms"] < dor["during_latency_mean_ms"]
    # Without redirection no user read goes to the replacement during the rebuild.
    off = run(tmp_path, "redirect = false").metrics
    assert off["rebuild_redirected_reads"] == 0 < dor["rebuild_redirected_reads"]




@pytest.mark.parametrize(
    "text,key",
    [
        (BASE.format(rebuild="spares = 0"), "events[1].rebuild"),
        (BASE.format(rebuild="spares = 2") + "[[events]]\nat_s = 30\nrebuild = 2\n", "events[2].rebuild"),
        (
            BASE.replace("level = \"raid5\"\ndisks = 4", "level = \"raid6\"\ndisks = 5").format(rebuild="spares = 2")
            + "[[events]]\nat_s = 30\nfail = 1\n[[events]]\nat_s = 30\nrebuild = 1\nspare = 0\n",
            "events[3].spare",
        ),
        (BASE.format(rebuild='rate = "md"\nmin_kib_s = 9\nmax_kib_s = 5'), "rebuild.min_kib_s"),
        # A level without redundancy (no failure events: RAID-0 cannot even lose a disk).
        (BASE.replace("level = \"raid5\"", "level = \"raid0\"").format(rebuild="").split("[[events]]")[0], "rebuild"),
    ],
)
def test_bad_input_names_the_key_and_exits_2(tmp_path, capsys, text: str, key: str) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(text)
    assert_config_error(p, key, capsys)


def test_reproduce_writes_tables_and_the_series_plot(tmp_path) -> None:
    from rich.console import Console

    from raidlab.reproduce import reproduce

    exp = tmp_path / "exp"
    exp.mkdir()
    report = """
[report]
rows = ["array.disks"]
columns = "rebuild.order"
values = ["rebuild_s", "during_latency_mean_ms"]
compare = [["sequential", "pro"]]
[report.series]
where = { "array.disks" = 4 }
by = "rebuild.order"
[sweep]
"rebuild.order" = ["sequential", "pro"]
"""
    (exp / "tiny.toml").write_text(report + BASE.format(rebuild="").replace("requests = 30000", "requests = 8000"))
    out = reproduce("tiny", experiments_dir=exp, out_dir=tmp_path / "out", console=Console(quiet=True))
    page = out.read_text()
    assert "tiny-series.png" in page and (out.parent / "tiny-series.png").stat().st_size > 0
    assert "rebuild_s" in page and "during_latency_mean_ms" in page
