"""The scoreboard: each headline claim of the five papers beside raidlab's number.

A claim is a ``[[report.paper]]`` entry of an experiment file that carries ``claim`` (the
sentence) and ``paper_value`` (the paper's number as a fraction, signed like the report's
comparisons: ``0.314`` for a 31.4% cut in RGR, ``0.45`` for a 45% shorter rebuild). Its
raidlab number is read from that experiment's ``claims.json`` (written by every report):
the comparison named by ``comparison`` (and ``group``, ``metric``, ``part``), taken as
``stat`` = ``"best"`` (the best cell's mean and 95% interval, for "up to" claims) or
``"median"`` (the median cell). Gains are signed so that positive means the new scheme is
better, whatever the metric's direction, so the direction agrees when raidlab's sign is the
paper's.

Reports of ``raidlab reproduce NAME --store`` tag their rows with ``driver``: ``store`` (a
served array with disk-timed members) and ``store-sim`` (the simulator on that same scaled
set-up). The board shows the store's number beside the simulator's, and the difference of
the store from the simulator's prediction of the same set-up (percentage points of gain).
"""

from __future__ import annotations

import html
import json
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from raidlab import fit


@dataclass
class Score:
    claim: str
    experiment: str
    comparison: str
    paper: str  # the paper's number as it prints it, with its source
    paper_value: float
    raidlab: float | None  # None: not run yet (no claims.json) or no such comparison
    raidlab_hw: float | None
    seeds: int
    stat: str
    report: str  # the report holding the verdict, relative to the output directory
    store: "Score | None" = None  # the same claim measured on the store
    store_sim: "Score | None" = None  # the simulator's prediction of the store's set-up
    # ... with the store's own mechanisms where they differ (`[report.store] matched`)
    store_sim_matched: "Score | None" = None

    @property
    def agrees(self) -> bool | None:
        if self.raidlab is None:
            return None
        return (self.raidlab > 0) == (self.paper_value > 0)


def claims_of(experiments: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(experiment stem, entry)`` of every ``[[report.paper]]`` entry with a ``claim``."""
    out = []
    for f in sorted(experiments.glob("*.toml")):
        try:
            spec = tomllib.loads(f.read_text(encoding="utf-8")).get("report", {})
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
            continue
        for e in spec.get("paper", []):
            if "claim" in e and "paper_value" in e:
                out.append((f.stem, {**e, "_default_metric": spec.get("value", (spec.get("values") or ["rgr"])[0])}))
    return out


def measured(out_dir: Path) -> list[dict[str, Any]]:
    """Every verdict the reports under ``out_dir`` wrote, newest report first, each with the
    report it came from (``report``, relative to ``out_dir``). ``out_dir`` is a reports
    directory (``NAME/claims.json``) or a frozen copy of their verdicts (``NAME.json``, see
    :func:`freeze`)."""
    rows: list[dict[str, Any]] = []
    found_paths = [(p, p.parent.name) for p in out_dir.glob("*/claims.json")]
    # A frozen copy keeps each driver of an experiment in its own file (STEM.DRIVER.json):
    # they are one report, named by the experiment.
    found_paths += [(p, p.stem.split(".")[0]) for p in out_dir.glob("*.json")]
    for path, name in sorted(found_paths, key=lambda x: (-x[0].stat().st_mtime, x[1])):
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        rows.extend({**r, "report": f"{name}/report.html"} for r in found)
    return rows


def newest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of ``measured``'s rows (newest report first), for each experiment file only those of
    the newest report that ran it: an older report's better cell must not win a "best"."""
    first: dict[tuple[str, str], str] = {}
    for r in rows:
        first.setdefault(_family(r), r["report"])
    return [r for r in rows if first[_family(r)] == r["report"]]


def _family(r: dict[str, Any]) -> tuple[str, str]:
    """The report a verdict must come from: one ``--store`` report writes the store's rows
    and the simulator's predictions beside them (``store-sim``, ``store-sim-matched``), so
    they count together, and a prediction an older report made is not mixed with a newer
    store measurement."""
    file, driver = _source(r)
    return (file, "store" if driver.startswith("store") else driver)


def _source(r: dict[str, Any]) -> tuple[str, str]:
    """What a verdict measured: its experiment file and its driver (the simulator unless a
    row says otherwise); the newest report of each source counts."""
    return (str(r.get("file")), str(r.get("driver", "simulator")))


def freeze(out_dir: Path, dest: Path) -> list[Path]:
    """Write the verdicts of the newest report of each experiment file (and driver) under
    ``out_dir`` to ``dest/STEM.json`` (``STEM.DRIVER.json`` for another driver than the
    simulator; what a generated scoreboard table is computed from, small enough to
    commit beside it); files of experiments not run under ``out_dir`` are kept."""
    dest.mkdir(parents=True, exist_ok=True)
    by_source: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in newest(measured(out_dir)):
        by_source.setdefault(_source(r), []).append({k: v for k, v in r.items() if k != "report"})
    written = []
    for (file, driver), rows in sorted(by_source.items()):
        suffix = "" if driver == "simulator" else f".{driver}"
        target = dest / f"{Path(file).stem}{suffix}.json"
        target.write_text(json.dumps(rows, indent=1, allow_nan=False) + "\n", encoding="utf-8")
        written.append(target)
    # A store report re-frozen replaces all of its experiment's store files: a driver the new
    # report has not (a `matched` prediction dropped from the file) must not stay behind.
    for file in {f for f, d in by_source if d.startswith("store")}:
        for old in dest.glob(f"{Path(file).stem}.store*.json"):
            if old not in written:
                old.unlink()
    return written


#: The generated table in a Markdown document lies between these two lines.
DOC_BEGIN = "<!-- scoreboard:begin (generated by `raidlab reproduce scoreboard --doc`) -->"
DOC_END = "<!-- scoreboard:end -->"


def markdown(scores: list[Score]) -> str:
    """The scoreboard as a Markdown table (one line per claim, in ``claims_of`` order)."""
    # The store's two columns once a `--store` report exists.
    stored = any(s.store is not None for s in scores)
    extra = " store (mean ± 95% CI) | store - simulator (same set-up) |" if stored else ""
    lines = [
        "| claim | experiment | paper | raidlab (mean ± 95% CI) | same direction |" + extra,
        "| --- | --- | --- | --- | --- |" + (" --- | --- |" if stored else ""),
    ]
    for s in scores:
        cells = [s.claim, f"`{s.experiment}` ({s.comparison})", s.paper, number(s), verdict(s)]
        if stored:
            cells += [store_number(s), store_vs_sim(s)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def doc_table(text: str, where: str = "document") -> str:
    """The generated table of a document (between :data:`DOC_BEGIN` and :data:`DOC_END`)."""
    begin, end = text.find(DOC_BEGIN), text.find(DOC_END)
    if begin < 0 or end < begin:
        from raidlab import _core

        err = _core.ConfigError(f"{where}: no generated scoreboard (the lines {DOC_BEGIN!r} and {DOC_END!r})")
        err.key = "doc"
        raise err
    return text[begin + len(DOC_BEGIN) : end].strip("\n") + "\n"


def update_doc(doc: Path, table: str) -> None:
    """Replace the generated table of ``doc`` with ``table``."""
    text = doc.read_text(encoding="utf-8")
    doc_table(text, str(doc))  # the markers must be there
    begin, end = text.find(DOC_BEGIN) + len(DOC_BEGIN), text.find(DOC_END)
    doc.write_text(text[:begin] + "\n" + table + text[end:], encoding="utf-8")


def score(stem: str, e: dict[str, Any], rows: list[dict[str, Any]]) -> Score:
    metric = e.get("metric", e["_default_metric"])
    part = e.get("part", "whole")
    label = f"{e['group']}: {e['comparison']}" if "group" in e else None
    stat = e.get("stat", "best")
    hits = [
        r
        for r in rows
        if r["metric"] == metric
        and r["part"] == part
        and (r["comparison"] == label if label else r["comparison"].endswith(f": {e['comparison']}"))
    ]
    # Without a group the claim is over every group: its best cell, or the first group's
    # median.
    hit = max(hits, key=lambda r: r["best"] if r["best"] is not None else -math.inf) if hits and stat == "best" else (hits[0] if hits else None)
    value = hw = None
    seeds = 0
    report = f"{stem}/report.html"
    if hit is not None:
        report = hit["report"]
        value = hit["best"] if stat == "best" else hit["median"]
        hw = hit["best_hw"] if stat == "best" else None
        seeds = int(hit.get("seeds", 1))
    return Score(
        claim=str(e["claim"]),
        experiment=stem,
        comparison=label or str(e["comparison"]),
        paper=f"{e.get('value', e['paper_value'])} ({e.get('source', 'paper')})",
        paper_value=float(e["paper_value"]),
        raidlab=value,
        raidlab_hw=hw,
        seeds=seeds,
        stat=stat,
        report=report,
    )


def scoreboard(experiments: Path, out_dir: Path) -> list[Score]:
    """Every claim with raidlab's number from the reports under ``out_dir`` (and the store's,
    where a ``--store`` report exists)."""
    rows = newest(measured(out_dir))
    out = []
    for stem, e in claims_of(experiments):
        mine = [r for r in rows if r.get("file") == f"{stem}.toml"]
        by = {d: [r for r in mine if r.get("driver", "simulator") == d] for d in ("simulator", "store", "store-sim", "store-sim-matched")}
        s = score(stem, e, by["simulator"])
        if by["store"]:
            s.store = score(stem, e, by["store"])
            s.store_sim = score(stem, e, by["store-sim"])
            if by["store-sim-matched"]:
                s.store_sim_matched = score(stem, e, by["store-sim-matched"])
        out.append(s)
    return out


def store_number(s: Score) -> str:
    if s.store is None or s.store.raidlab is None:
        return "not run"
    return number(s.store)


def store_vs_sim(s: Score) -> str:
    """The store's gain minus the simulator's prediction of the same set-up."""
    if s.store is None or s.store.raidlab is None or s.store_sim is None or s.store_sim.raidlab is None:
        return "-"
    text = f"{(s.store.raidlab - s.store_sim.raidlab) * 100:+.1f} pp (sim {s.store_sim.raidlab:+.1%}"
    m = s.store_sim_matched
    if m is not None and m.raidlab is not None:
        text += f"; matched sim {m.raidlab:+.1%}"
    return text + ")"


def number(s: Score) -> str:
    if s.raidlab is None:
        return "not run"
    text = f"{s.raidlab:+.1%}"
    if s.raidlab_hw is not None:
        text += f" ± {s.raidlab_hw:.1%}"
    return f"{text} ({s.stat}, {s.seeds} seed{'s' if s.seeds != 1 else ''})"


def verdict(s: Score) -> str:
    return {None: "-", True: "yes", False: "NO"}[s.agrees]


def write(scores: list[Score], out_dir: Path, console: Console) -> Path:
    """Print the scoreboard and write ``out_dir/scoreboard.html`` (links to each report)."""
    # The store's columns once a `--store` report exists (a narrow terminal keeps the rest).
    stored = any(s.store is not None for s in scores)
    fit.print_table(
        console,
        "claim",
        [s.claim for s in scores],
        [
            fit.Column("paper", [f"{s.paper_value:+.1%}" for s in scores]),
            fit.Column("raidlab", [number(s) for s in scores], numeric=False),
            fit.Column("same direction", [verdict(s) for s in scores], numeric=False),
        ]
        + (
            [
                fit.Column("store", [store_number(s) for s in scores], numeric=False),
                fit.Column("store - simulator", [store_vs_sim(s) for s in scores], numeric=False),
            ]
            if stored
            else []
        ),
        title="scoreboard: each headline claim beside raidlab's number",
    )
    rows = "".join(
        "<tr>"
        f"<td style='text-align:left'>{html.escape(s.claim)}</td>"
        f"<td style='text-align:left'>{html.escape(s.comparison)}</td>"
        f"<td>{html.escape(s.paper)}</td>"
        f"<td>{html.escape(number(s))}</td>"
        f"<td>{verdict(s)}</td>"
        f"<td>{html.escape(store_number(s))}</td>"
        f"<td>{html.escape(store_vs_sim(s))}</td>"
        f"<td><a href='{html.escape(s.report)}'>report</a></td>"
        "</tr>"
        for s in scores
    )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>raidlab scoreboard</title><style>"
        "body{font-family:sans-serif;max-width:1200px;margin:auto;padding:0 8px}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
        "</style></head><body><h1>raidlab: the papers' headline claims</h1>"
        "<p>Gains are signed so that positive means the paper's scheme is better. raidlab's number is the "
        "mean over seeds with its 95% confidence interval; <i>best</i> is the best cell of the experiment's "
        "grid (for the papers' 'up to' claims), <i>median</i> the median cell. The causes of the remaining "
        "gaps are in docs/reproductions.md.</p>"
        "<table><tr><th>claim</th><th>comparison</th><th>paper</th><th>raidlab</th><th>same direction</th><th>store</th><th>store - simulator (same set-up)</th><th></th></tr>"
        f"{rows}</table></body></html>"
    )
    path = out_dir / "scoreboard.html"
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    (out_dir / "scoreboard.md").write_text(markdown(scores), encoding="utf-8")
    return path
