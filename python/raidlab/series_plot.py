"""Time-series plots of timed runs for reports: user response time against simulated time,
one line per run, with each run's rebuild start and end marked and its rebuild progress on
a second axis. Driven by an experiment's ``[report.series]`` table:

.. code-block:: toml

    [report.series]
    where = { "array.disks" = 3 }   # which runs (config keys, dotted)
    by = "rebuild.order"            # the label of each line
    y = "mean_ms"                   # series column (default mean_ms)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raidlab.plotting import pyplot, save


def select(frame: Any, where: dict[str, Any]) -> Any:
    """Rows of ``frame`` whose columns equal every value of ``where``."""
    mask = frame["name"].notna()
    for key, want in where.items():
        if key not in frame.columns:
            return frame.iloc[0:0]
        mask &= frame[key] == want
    return frame[mask]


def plot_series(frame: Any, series: Any, spec: dict[str, Any], path: Path) -> list[Path]:
    """Write ``path`` (one PNG) for the runs ``spec["where"]`` selects; ``[]`` if none."""
    plt = pyplot()

    runs = select(frame, dict(spec.get("where", {})))
    if runs.empty or series is None or series.empty:
        return []
    by, y = spec.get("by", "name"), spec.get("y", "mean_ms")
    fig, ax = plt.subplots(figsize=(8.0, 3.6))
    ax2 = ax.twinx()
    for i, (_, run) in enumerate(runs.iterrows()):
        color = f"C{i}"
        rows = series[series["name"] == run["name"]]
        label = str(run[by]) if by in run else str(run["name"])
        ax.plot(rows["t_s"], rows[y], color=color, linewidth=0.9, label=f"{label}: {y}")
        if "rebuild_progress" in rows:
            ax2.plot(rows["t_s"], rows["rebuild_progress"], color=color, linestyle=":", linewidth=1.0)
        for key, style in (("rebuild_start_s", "--"), ("rebuild_end_s", "-.")):
            t = run.get(key)
            if t is not None and t == t:
                ax.axvline(float(t), color=color, linestyle=style, linewidth=0.8)
                ax.annotate(
                    f"{key.split('_')[1]} {label}",
                    (float(t), 1.0),
                    xycoords=("data", "axes fraction"),
                    rotation=90,
                    fontsize=6,
                    va="top",
                    ha="right",
                    color=color,
                )
    ends = runs["rebuild_end_s"].dropna() if "rebuild_end_s" in runs else []
    if len(ends):
        # The rebuild window and a little of the after, not the whole run.
        ax.set_xlim(0, float(max(ends)) * 1.3)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel(f"{y} (per interval)")
    ax2.set_ylabel("rebuild progress (dotted)")
    ax2.set_ylim(0, 1.05)
    ax.legend(fontsize=7, loc="upper right")
    title = ", ".join(f"{k} = {v}" for k, v in dict(spec.get("where", {})).items())
    ax.set_title(f"response time and rebuild progress ({title})", fontsize=9)
    save(fig, path)
    return [path]
