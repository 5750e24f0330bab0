"""Failures of the write cache's copies (``fail_cache`` events) on small runs of
experiments/rapid-recovery.toml: recovery of the primary from the backup, data loss, the
fallback to a logical cache disk, and bad input through the CLI.

The full experiment (``raidlab reproduce rapid-recovery``, a few seconds) is in docs/rapid.md.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

import raidlab
from conftest import assert_config_error
from rapid_fixtures import BASE, WC
from raidlab.reproduce import plan_file

REPO = Path(__file__).resolve().parent.parent


def trees(capacity_pages: int = 2048, destage: str = "rapid") -> dict[str, dict[str, Any]]:
    """One run tree per architecture of rapid-recovery.toml, shortened to 12,000 requests (15 s)
    with the primary failing at 10 s."""
    plan = plan_file(REPO / "experiments" / "rapid-recovery.toml", skip_traces=True)
    out = {}
    for t in plan.trees:
        if t["write_cache"]["capacity_pages"] != capacity_pages or t["tags"]["destage"] != destage or t["run"]["seed"] != 1:
            continue
        t["workload"]["synthetic"]["requests"] = 12_000
        t["events"] = [{"at_s": 10.0, "fail_cache": "primary"}]
        out[t["tags"]["arch"]] = t
    assert set(out) == {"none", "dual", "physical", "logical"}
    return out


def run(tree_list: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r.metrics for r in raidlab.run({"runs": tree_list}).runs]


def test_recovery_is_seconds_for_rapid_and_nothing_is_lost_with_a_backup() -> None:
    t = trees()
    none, dual, phys, logi = run([t["none"], t["dual"], t["physical"], t["logical"]])
    # A dual NVRAM and none hold the same pages at the failure (neither delays writes): the
    # mirror restores all of them; without it the dirty ones are lost (those being destaged
    # reach the disks).
    assert dual["bk_lost_pages"] == 0 and dual["bk_recovery_s"] == 0.0
    assert 500 < none["bk_lost_pages"] <= dual["bk_recovered_pages"]
    assert dual["bk_recovered_pages"] - none["bk_lost_pages"] <= 8 * 64
    assert none["bk_recovered_pages"] == 0
    for m in (phys, logi):
        assert m["bk_lost_pages"] == 0
        assert m["bk_primary_failures"] == 1
        assert m["bk_recovery_reads"] > 0 and m["bk_disk_reads"] == m["bk_recovery_reads"]
        assert m["bk_recovered_disk_pages"] < m["bk_recovered_pages"]
    # The paper: "several seconds (tens of seconds at most)". The logical cache disk reads its
    # segments from 16 disks at once.
    assert 0.5 < phys["bk_recovery_s"] < 30.0, phys["bk_recovery_s"]
    assert 0.0 < logi["bk_recovery_s"] < phys["bk_recovery_s"]
    # Writes waited during the recovery.
    assert phys["wc_waited_writes"] > 0


def test_a_lost_cache_disk_moves_the_log_to_the_data_disks() -> None:
    t = trees()["physical"]
    t["events"] = [{"at_s": 5.0, "fail_cache": "cache_disk"}]
    plain = copy.deepcopy(t)
    del plain["events"]
    failed, ok = run([t, plain])
    assert failed["bk_cache_disk_failures"] == 1 and failed["bk_lost_pages"] == 0
    # Without the failure every log write goes to the cache disk (the last device); with it
    # the cache disk takes only those issued before the failure, the data disks the rest.
    assert ok["disk_ops"][-1] == ok["bk_log_writes"]
    assert failed["disk_ops"][-1] < ok["disk_ops"][-1]
    assert failed["bk_log_writes"] - failed["disk_ops"][-1] > 50
    # Pages whose copy was on the lost disk are copied again within the run.
    assert failed["bk_unprotected_pages"] > 0
    assert 0.0 < failed["bk_unprotected_s"] < 10.0


def test_a_primary_failure_after_the_mirror_failed_loses_the_dirty_pages() -> None:
    t = trees()["dual"]
    t["events"] = [{"at_s": 9.999, "fail_cache": "backup"}, {"at_s": 10.0, "fail_cache": "primary"}]
    (m,) = run([t])
    assert m["bk_backup_failures"] == 1
    assert m["bk_lost_pages"] > 0
    assert m["bk_lost_pages"] <= m["bk_unprotected_pages"] + 50


def test_a_failed_data_disk_under_a_logical_cache_disk_is_skipped() -> None:
    t = trees()["logical"]
    t["events"] = [{"at_s": 5.0, "fail": 3}]
    plain = copy.deepcopy(t)
    del plain["events"]
    failed, ok = run([t, plain])
    # RAPID skips the disk: the pages whose copy was in its log segments are copied again from
    # the primary, and nothing is lost.
    assert failed["bk_log_member_failures"] == 1
    assert failed["bk_unprotected_pages"] > 0 and failed["bk_lost_pages"] == 0
    assert 0.0 < failed["bk_unprotected_s"] < 10.0
    assert "bk_log_member_failures" not in ok
    # A primary failure 0.1 ms later loses some of them: those still exposed.
    t["events"].append({"at_s": 5.0001, "fail_cache": "primary"})
    (both,) = run([t])
    assert 0 < both["bk_lost_pages"] <= both["bk_unprotected_pages"]
    assert both["bk_recovered_pages"] > 0


def event(what: str, extra: str = "") -> str:
    return f'[[events]]\nat_s = 1.0\nfail_cache = "{what}"\n{extra}'


@pytest.mark.parametrize(
    ("tables", "key"),
    [
        # No write cache to fail.
        ('[cache]\npolicy = "lru"\ncapacity_blocks = 8\n' + event("primary"), "events[0].fail_cache"),
        # No backup, or no cache disk, of that kind.
        (WC + event("backup"), "events[0].fail_cache"),
        (WC + '[backup]\nkind = "dual"\n' + event("cache_disk"), "events[0].fail_cache"),
        # A logical cache disk fails with its data disk.
        (WC + '[backup]\ncache_disk = "logical"\n' + event("cache_disk"), "events[0].fail_cache"),
        # Unknown name; two actions in one event; a second failure of the same backup.
        (WC + "[backup]\n" + event("nvram"), "events[0].fail_cache"),
        (WC + event("primary", "fail = 0\n"), "events[0].fail_cache"),
        (WC + "[backup]\n" + event("backup") + event("backup"), "events[1].fail_cache"),
        # A data disk failing under the triple RAPID-Cache's logical cache disks (not modelled).
        (
            WC + '[backup]\nkind = "triple"\ncache_disk = "logical"\n[[events]]\nat_s = 0.01\nfail = 1\n',
            "events[0].fail",
        ),
        # Not modelled for the triple RAPID-Cache.
        (WC + '[backup]\nkind = "triple"\n' + event("primary"), "events[0].fail_cache"),
    ],
)
def test_bad_cache_failure_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tables: str, key: str
) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(BASE + tables)
    assert_config_error(cfg, key, capsys)
