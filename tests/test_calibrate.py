"""``raidlab calibrate``: bisection to a baseline's target, worked examples."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from raidlab import calibrate
from raidlab.cli import main

REPO = Path(__file__).resolve().parent.parent


def fake(f):  # a noiseless "experiment": the metric is f(knob)
    return lambda x: calibrate.Step(x, f(x), 0.0, 0)


def test_bisection_finds_the_knob_worked_example() -> None:
    # rebuild time 1000 / x s at inter-arrival x ms; target 400 s -> x = 2.5
    seen: list[float] = []
    best, steps = calibrate.bisect(fake(lambda x: 1000 / x), 1.0, 4.0, 400.0, 0.01, 12, lambda s: seen.append(s.knob))
    assert seen == [1.0, 4.0, 2.5]
    assert best.knob == 2.5 and best.mean == 400.0 and len(steps) == 3


def test_overloaded_seeds_count_as_past_the_target() -> None:
    # below x = 2 the rebuild never finishes (no metric): such steps are on the loaded side
    def run(x: float) -> calibrate.Step:
        return calibrate.Step(x, math.nan, math.nan, 5) if x < 2 else calibrate.Step(x, 3000 / x, 0.0, 0)

    best, steps = calibrate.bisect(run, 1.0, 4.0, 1000.0, 0.02, 20)
    assert best.overloaded == 0 and abs(best.mean - 1000) <= 20 and abs(best.knob - 3.0) < 0.07
    assert any(s.overloaded for s in steps)


def test_a_target_outside_the_range_is_an_error() -> None:
    with pytest.raises(Exception, match="not between"):
        calibrate.bisect(fake(lambda x: 1000 / x), 1.0, 4.0, 100.0, 0.01)


def test_calibrate_cli_on_a_small_timed_experiment(tmp_path: Path, capsys) -> None:
    """End to end on a tiny timed config: the open-loop rate at which the mean response time
    of RAID-5 on constant 1 ms disks is 1.5 ms. The top of the range overloads the array (its
    queue outgrows run.outstanding_max): those seeds count as past the target."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[workload.synthetic]\nkind = "uniform"\nkeys = 4096\nrequests = 3000\n'
        '[cache]\npolicy = "lru"\ncapacity_blocks = 1\n'
        '[array]\nlevel = "raid5"\ndisks = 3\nstripe_unit = 4096\n'
        '[run]\nmode = "timed"\ndriver = "open"\niops = 100\noutstanding_max = 64\n'
        '[disk]\nmodel = "constant"\nservice_ms = 1\n'
        '[sweep]\n"run.iops" = [100, 200]\n'
    )
    args = ["calibrate", str(cfg), "--knob", "run.iops", "--range", "100,6000", "--metric", "latency_mean_ms"]
    rc = main([*args, "--target", "1.5", "--tol", "0.05", "--seeds", "2", "--workers", "1"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "choice: run.iops = " in out and "within 5% of 1.5" in out
    assert "run.iops = 6000: latency_mean_ms nan ± nan  (2 of 2 seeds did not finish)" in out
    assert main([*args, "--target", "1.5", "--range", "5"]) == 2
    assert "expected LO,HI" in capsys.readouterr().err
