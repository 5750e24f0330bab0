"""Write-cache results as the STOW paper presents them: throughput at a target response time
from a ramp, response time at a given load, occupancy statistics, and the plots of
``raidlab reproduce stow`` (occupancy over time, throughput-response curves).

An experiment's ``[report]`` table opts in with these keys (all optional):

.. code-block:: toml

    [report]
    ramp_at_ms = 20.0          # adds the column iops_at_20ms (from each run's ramp)
    ramp_ms_at = "tags.table2_iops"  # adds ms_at_load: mean ms at the level targeting that load
    occupancy_skip_s = 300     # adds occ_std / occ_mean / full_frac over the series after this
    occupancy_plot = "wc_occupancy"     # one panel per row of `series_facets`, a line per order
    series_facets = ["workload.synthetic.backend"]
    curve_facets = ["tags.backend", "array.level", "tags.thresholds"]  # ramp curves
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from raidlab.plotting import img, pyplot, save


# A level kept up when it served at least this fraction of its target...
KEPT_UP_IOPS = 0.9
# ...and its user requests in flight at the end of its measured window were at most this many
# times the steady population Little's law gives (achieved IOPS x mean response) plus
# `KEPT_UP_SLACK`, or no more than at the window's start (a queue still growing fails both).
KEPT_UP_LITTLE = 2.0
KEPT_UP_SLACK = 10


def level_windows(config: dict[str, Any], levels: int) -> list[tuple[float, float]]:
    """(start, end) in seconds of each ramp level's measured window, from ``run.warmup_s`` and
    ``run.level_s`` (the ramp driver lays the levels back to back)."""
    run = config.get("run", {})
    warm, level = float(run.get("warmup_s", 0.0)), float(run.get("level_s", 0.0))
    return [(i * (warm + level) + warm, (i + 1) * (warm + level)) for i in range(levels)]


def _in_flight_at(series: dict[str, list[Any]], t: float) -> float | None:
    """Requests in flight at the last series row ending by ``t`` (None before the first)."""
    best = None
    for ts, n in zip(series.get("t_s", []), series.get("outstanding", [])):
        if ts > t + 1e-9:
            break
        best = n
    return best


def kept_up(p: dict[str, Any], series: dict[str, list[Any]] | None = None, window: tuple[float, float] | None = None) -> bool:
    """Whether a ramp level kept up with its load: not saturated, achieved IOPS at least 90% of
    the target, and (given the run's series and the level's measured window) its queue not
    still growing at the end of the window."""
    if p["saturated"] or p["iops"] < KEPT_UP_IOPS * p["target_iops"]:
        return False
    if series is None or window is None:
        return True
    start, end = _in_flight_at(series, window[0]), _in_flight_at(series, window[1])
    if start is None or end is None:
        return True
    steady = p["iops"] * p["mean_ms"] / 1000.0
    return end <= KEPT_UP_LITTLE * steady + KEPT_UP_SLACK or end <= start


def iops_at(ramp: list[dict[str, Any]], ms: float, series: dict[str, list[Any]] | None = None, windows: list[tuple[float, float]] | None = None) -> float:
    """Throughput at a mean response time of ``ms`` on a ramp's curve.

    The curve is walked in level order, over levels that kept up (:func:`kept_up`; with the
    run's ``series`` and the levels' measured ``windows`` a still-growing queue also counts as
    not keeping up): the last measured throughput whose mean response is at most ``ms``,
    linearly interpolated towards the next level when that level kept up too. A level that
    did not keep up has no meaningful response time, so it is never an end of the
    interpolation and the answer stays at the last good level. NaN when even the first level
    is slower than ``ms`` or did not keep up.
    """

    def good(i: int) -> bool:
        return kept_up(ramp[i], series, windows[i] if windows and i < len(windows) else None)

    best = math.nan
    for i, p in enumerate(ramp):
        ok = good(i)
        if ok and p["mean_ms"] <= ms:
            best = p["iops"]
            continue
        if i > 0 and ok and ramp[i - 1]["mean_ms"] <= ms and not math.isnan(best):
            a, b = ramp[i - 1], p
            f = (ms - a["mean_ms"]) / (b["mean_ms"] - a["mean_ms"])
            best = a["iops"] + f * (b["iops"] - a["iops"])
        break
    return best


def run_iops_at(run: Any, ms: float, config: dict[str, Any] | None = None) -> float:
    """:func:`iops_at` for a run, with its series and level windows (from ``config``, else the
    run's own; a run read back from a store has none, so pass its ``run.*`` values)."""
    config = config if config is not None else getattr(run, "config", {})
    return iops_at(run.ramp, ms, run.series, level_windows(config, len(run.ramp)))


def closed_curve(runs: list[Any]) -> list[dict[str, float]]:
    """A throughput-response curve from closed-loop runs (one per ``run.outstanding``), sorted
    by outstanding count: each point the run's IOPS and mean response (ms)."""
    pts = [
        {
            "outstanding": float(r.config["run"]["outstanding"]),
            "iops": float(r.metrics["iops"]),
            "mean_ms": float(r.metrics["latency_mean_ms"]),
        }
        for r in runs
    ]
    return sorted(pts, key=lambda p: p["outstanding"])


def closed_iops_at(pts: list[dict[str, float]], ms: float) -> float:
    """Throughput at a mean response of ``ms`` on a closed-loop curve (sorted by outstanding):
    interpolated between the last point at or below ``ms`` and the next (a closed loop
    cannot fall behind: more outstanding only lengthens the queue). NaN when the first point
    is already slower."""
    best = math.nan
    for i, p in enumerate(pts):
        if p["mean_ms"] <= ms:
            best = p["iops"]
            continue
        if i > 0:
            a = pts[i - 1]
            f = (ms - a["mean_ms"]) / (p["mean_ms"] - a["mean_ms"])
            best = a["iops"] + f * (p["iops"] - a["iops"])
        break
    return best


def ms_at_load(ramp: list[dict[str, Any]], target: float) -> float:
    """Mean response time of the ramp level whose target was ``target`` IOPS (NaN if the ramp
    stopped before it or saturated there)."""
    for p in ramp:
        if p["target_iops"] == target and not p["saturated"]:
            return float(p["mean_ms"])
    return math.nan


def occupancy_stats(series: dict[str, list[Any]], skip_s: float, until_s: float = math.inf) -> dict[str, float]:
    """Mean and standard deviation of the per-interval occupancy (fraction of the capacity)
    and the fraction of time full, over the intervals ending after ``skip_s`` and by
    ``until_s`` (pass the run's ``sim_s`` to leave out the final drain)."""
    rows = [i for i, t in enumerate(series.get("t_s", [])) if skip_s < t <= until_s]
    occ = [series["wc_occupancy"][i] for i in rows]
    full = [series["wc_full"][i] for i in rows]
    if not occ:
        return {"occ_mean": math.nan, "occ_std": math.nan, "full_frac": math.nan}
    mean = sum(occ) / len(occ)
    var = sum((x - mean) ** 2 for x in occ) / len(occ)
    return {"occ_mean": mean, "occ_std": math.sqrt(var), "full_frac": sum(full) / len(full)}


def augment(frame: Any, result: Any, spec: dict[str, Any]) -> Any:
    """Add the columns the ``[report]`` keys above ask for, one value per run (in order)."""
    runs = result.runs
    if "ramp_at_ms" in spec:
        ms = float(spec["ramp_at_ms"])
        # The frame carries each run's flattened config (stored runs have no `config`).
        keys = [k for k in ("warmup_s", "level_s") if f"run.{k}" in frame]
        configs = [{"run": {k: frame[f"run.{k}"].iloc[i] for k in keys}} if keys else None for i in range(len(runs))]
        frame[f"iops_at_{ms:g}ms"] = [run_iops_at(r, ms, c) for r, c in zip(runs, configs)]
    if "ramp_ms_at" in spec:
        key = spec["ramp_ms_at"]
        frame["ms_at_load"] = [ms_at_load(r.ramp, float(t)) for r, t in zip(runs, frame[key])]
    if "occupancy_skip_s" in spec:
        skip = float(spec["occupancy_skip_s"])
        stats = [occupancy_stats(r.series, skip, r.metrics["sim_s"]) for r in runs]
        for k in ("occ_mean", "occ_std", "full_frac"):
            frame[k] = [s[k] for s in stats]
    return frame


def _groups(frame: Any, facets: list[str]) -> list[tuple[str, list[int]]]:
    if not facets:
        return [("all", list(range(len(frame))))]
    out: dict[str, list[int]] = {}
    for i in range(len(frame)):
        label = ", ".join(f"{frame[f].iloc[i]}" for f in facets)
        out.setdefault(label, []).append(i)
    return list(out.items())


def plots(frame: Any, result: Any, spec: dict[str, Any], out: Path, stem: str) -> list[str]:
    """Write the occupancy-over-time and throughput-response plots the spec asks for; return
    HTML fragments that show them."""
    plt = pyplot()

    parts: list[str] = []
    series_key = spec.get("occupancy_plot")
    if series_key:
        groups = _groups(frame, list(spec.get("series_facets", [])))
        fig, axes = plt.subplots(len(groups), 1, figsize=(9, 2.6 * len(groups)), squeeze=False)
        for ax, (label, rows) in zip(axes[:, 0], groups):
            for i in rows:
                r = result.runs[i]
                # Up to the last user request: the final drain is not part of the picture.
                keep = [j for j, t in enumerate(r.series["t_s"]) if t <= r.metrics["sim_s"]]
                ax.plot(
                    [r.series["t_s"][j] for j in keep],
                    [r.series[series_key][j] for j in keep],
                    linewidth=0.8,
                    label=str(frame["write_cache.order"].iloc[i]),
                )
            ax.set_title(label, fontsize=9)
            ax.set_ylabel(series_key, fontsize=8)
            ax.set_ylim(0.5, 1.02)
            ax.legend(fontsize=7, loc="lower right")
        axes[-1, 0].set_xlabel("time (s)")
        parts.append(img(save(fig, out / f"{stem}-series.png"), f"{series_key} over time"))
    if "curve_facets" in spec:
        groups = _groups(frame, list(spec["curve_facets"]))
        ncols = min(4, len(groups))
        nrows = -(-len(groups) // ncols)
        fig, grid = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 3.0 * nrows), squeeze=False)
        axes = grid.ravel()
        for ax in axes[len(groups) :]:
            ax.set_visible(False)
        for ax, (label, rows) in zip(axes, groups):
            for i in rows:
                pts = [p for p in result.runs[i].ramp if not p["saturated"]]
                ax.plot([p["iops"] for p in pts], [p["mean_ms"] for p in pts], marker="o", markersize=2, label=str(frame["write_cache.order"].iloc[i]))
            ax.axhline(float(spec.get("ramp_at_ms", 20.0)), color="grey", linewidth=0.5)
            ax.set_ylim(0, 60)
            ax.set_title(label, fontsize=8)
            ax.set_xlabel("IOPS", fontsize=8)
            ax.tick_params(labelsize=7)
        for row in grid:
            row[0].set_ylabel("mean response (ms)")
        axes[len(groups) - 1].legend(fontsize=7)
        parts.append(img(save(fig, out / f"{stem}-curves.png"), "throughput-response curves"))
    return parts
