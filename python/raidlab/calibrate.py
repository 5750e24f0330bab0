"""``raidlab calibrate``: find the value of one knob (a load level) at which a baseline's
metric meets a target, by bisection over seeds.

Reproductions calibrate a load to the paper's *baseline* (LRU's rebuild time, DOR's response
time), never to the gain: the caller names one run (``--set`` fixes every swept key but the
seed) and the metric of that baseline; the gain is measured afterwards, at the value found.

The metric must move monotonically with the knob over ``[lo, hi]`` (more load, longer
rebuild); the direction is read from the two ends. Each step runs every seed and takes the
mean; a run whose metric is missing (the rebuild did not finish in the run) counts as past
the target on the loaded side, and the step is marked overloaded.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from raidlab import _core, api
from raidlab.replicates import ci95

#: Bound on bisection steps (each runs every seed once).
STEPS_MAX = 24
#: The key of the error that stops an open-loop run the array cannot keep up with.
OVERLOAD_KEY = "run.outstanding_max"


@dataclass
class Step:
    knob: float
    mean: float  # nan when every seed was overloaded
    hw: float
    overloaded: int  # seeds whose metric was missing


def _set(tree: dict[str, Any], key: str, value: Any) -> None:
    node = tree
    parts = api.key_path(key)
    for p in parts[:-1]:
        nxt = node.setdefault(p, {})
        if not isinstance(nxt, dict):
            err = _core.ConfigError(f"{key}: {p} is not a table")
            err.key = key
            raise err
        node = nxt
    node[parts[-1]] = value


def base_config(path: Path, sets: dict[str, Any]) -> dict[str, Any]:
    """The experiment file without its grid (``[sweep]``, ``[[runs]]``) and report, with
    ``sets`` applied."""
    try:
        tree = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        err = _core.RaidlabIOError(f"{path}: {e.strerror or e}")
        err.file = str(path)
        raise err from None
    except tomllib.TOMLDecodeError as e:
        err = _core.ConfigError(f"{path}: {e}")
        err.key = ""
        raise err from None
    for k in ("sweep", "runs", "report"):
        tree.pop(k, None)
    for k, v in sets.items():
        _set(tree, k, v)
    return tree


def measure(tree: dict[str, Any], knob: str, value: float, metric: str, seeds: list[int], threads: int | None) -> Step:
    cfg = json_copy(tree)
    _set(cfg, knob, value)
    cfg["sweep"] = {"run.seed": seeds}
    try:
        runs = api.run(cfg, threads=threads).runs
    except _core.ConfigError as e:
        # An open-loop run whose queue outgrows `run.outstanding_max` is stopped as
        # overloaded: past the target on the loaded side. Any other error is the caller's.
        if getattr(e, "key", None) != OVERLOAD_KEY:
            raise
        runs = getattr(e, "finished").runs
    values = [r.metrics.get(metric) for r in runs]
    got = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    mean, hw = ci95(got) if got else (math.nan, math.nan)
    return Step(value, mean, hw, len(seeds) - len(got))


def json_copy(tree: dict[str, Any]) -> dict[str, Any]:
    import json

    return json.loads(json.dumps(tree))


def bisect(
    run: Callable[[float], Step],
    lo: float,
    hi: float,
    target: float,
    tol: float,
    steps_max: int = 12,
    on_step: Callable[[Step], None] | None = None,
) -> tuple[Step, list[Step]]:
    """The step whose mean is within ``tol`` (relative) of ``target``, or the closest one
    after ``steps_max`` steps; ``run(knob)`` measures one knob value."""
    assert 0 < steps_max <= STEPS_MAX and lo < hi and tol > 0
    done: list[Step] = []

    def go(x: float) -> Step:
        s = run(x)
        done.append(s)
        if on_step is not None:
            on_step(s)
        return s

    def above(s: Step) -> bool:
        # An overloaded seed is past any finite target on the loaded side.
        return s.overloaded > 0 or s.mean > target

    a, b = go(lo), go(hi)
    if above(a) == above(b):
        err = _core.ConfigError(f"the target {target} is not between the metric at {lo} and at {hi} ({a.mean:.4g}, {b.mean:.4g})")
        err.key = "target"
        raise err
    for _ in range(steps_max - 2):
        best = min(done, key=lambda s: abs(s.mean - target) if s.overloaded == 0 else math.inf)
        if within(best, target, tol):
            return best, done
        mid = go((a.knob + b.knob) / 2)
        if above(mid) == above(a):
            a = mid
        else:
            b = mid
    best = min(done, key=lambda s: abs(s.mean - target) if s.overloaded == 0 else math.inf)
    return best, done


def within(s: Step, target: float, tol: float) -> bool:
    return s.overloaded == 0 and abs(s.mean - target) <= tol * target


def add_command(sub: Any, parse_set: Any) -> None:
    """Register ``raidlab calibrate`` on the CLI's subparsers (``parse_set`` reads ``--set``)."""
    c = sub.add_parser(
        "calibrate",
        help="find the load at which a baseline's metric meets a target (bisection over seeds)",
        description="Bisect one knob of an experiment file (its grid removed, --set fixing the "
        "baseline's cell) until the mean of METRIC over the seeds is within --tol of --target. "
        "Calibrate to the paper's baseline, never to a gain. See docs/reproductions.md.",
    )
    c.add_argument("experiment", help="experiment TOML file")
    c.add_argument("--knob", required=True, help="the key to vary, e.g. workload.synthetic.mean_interarrival_ms")
    c.add_argument("--range", required=True, metavar="LO,HI", help="the knob's interval; the target must lie between the metric at its ends")
    c.add_argument("--metric", required=True, help="the run metric to match, e.g. rebuild_s")
    c.add_argument("--target", required=True, type=float, help="the baseline's value in the paper")
    c.add_argument("--tol", type=float, default=0.03, help="relative tolerance (default 0.03)")
    c.add_argument("--seeds", type=int, default=5, help="seeds 1..N per step (default 5)")
    c.add_argument("--steps", type=int, default=12, help=f"at most this many steps (<= {STEPS_MAX}; default 12)")
    c.add_argument("--set", action="append", metavar="KEY=VALUE", help="fix a key (repeatable), as for run")
    c.add_argument("--workers", type=int, default=None, help="runs in parallel (default: cores)")
    c.add_argument("--json", action="store_true", help="print the steps and the choice as JSON")
    c.set_defaults(func=lambda args, console: cmd_calibrate(args, console, parse_set))


def cmd_calibrate(args: Any, console: Any, parse_set: Any) -> int:
    import json

    try:
        lo, hi = (float(x) for x in args.range.split(","))
    except ValueError:
        err = _core.ConfigError(f"--range {args.range!r}: expected LO,HI such as 1.8,3.7")
        err.key = "range"
        raise err from None
    if not (lo < hi) or not (0 < args.tol < 1) or not (1 <= args.seeds <= 100) or not (3 <= args.steps <= STEPS_MAX):
        err = _core.ConfigError("need LO < HI, 0 < --tol < 1, 1 <= --seeds <= 100 and 3 <= --steps <= " f"{STEPS_MAX}")
        err.key = "range"
        raise err
    tree = base_config(Path(args.experiment), parse_set(args.set or []))
    seeds = list(range(1, args.seeds + 1))

    def show(s: Step) -> None:
        if not args.json:
            over = f"  ({s.overloaded} of {args.seeds} seeds did not finish)" if s.overloaded else ""
            console.print(f"{args.knob} = {s.knob:.5g}: {args.metric} {s.mean:.5g} ± {s.hw:.3g}{over}", highlight=False)

    best, steps = bisect(
        lambda x: measure(tree, args.knob, x, args.metric, seeds, args.workers),
        lo,
        hi,
        args.target,
        args.tol,
        args.steps,
        show,
    )
    met = within(best, args.target, args.tol)
    if args.json:
        out = {
            "knob": args.knob,
            "metric": args.metric,
            "target": args.target,
            "seeds": seeds,
            "steps": [s.__dict__ for s in steps],
            "choice": best.knob,
            "met": met,
        }
        print(json.dumps(out, indent=2))
    else:
        verdict = "within" if met else "NOT within"
        console.print(
            f"choice: {args.knob} = {best.knob:.5g} ({args.metric} {best.mean:.5g} ± {best.hw:.3g}, {verdict} {args.tol:.0%} of {args.target:g})",
            highlight=False,
        )
    return 0 if met else 1
