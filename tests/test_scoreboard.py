"""Seeds with confidence intervals in reports, and the scoreboard of the papers' claims."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from raidlab import scoreboard
from raidlab.cli import main
from raidlab.replicates import ci95, per_seed, t975, with_ci


def test_ci95_worked_example() -> None:
    mean, hw = ci95([1.0, 2.0, 3.0, 4.0, 5.0])
    # sample sd = sqrt(2.5); t(0.975, 4) = 2.776
    assert mean == 3.0
    assert hw == pytest.approx(2.776 * math.sqrt(2.5) / math.sqrt(5))
    assert math.isnan(ci95([7.0])[1]) and ci95([7.0])[0] == 7.0
    assert math.isnan(ci95([])[0])
    assert t975(4) == 2.776 and t975(25) == 2.086 and t975(1000) == 1.96
    with pytest.raises(ValueError):
        t975(0)


def test_per_seed_pairs_runs_by_seed() -> None:
    frame = pd.DataFrame(
        {
            "run.seed": [1, 1, 2, 2, 3, 3],
            "disks": [5] * 6,
            "policy": ["lru", "vdf", "lru", "vdf", "lru", "vdf"],
            "rgr": [2.0, 1.0, 4.0, 3.0, 6.0, 3.0],
        }
    )

    def gain(f: pd.DataFrame) -> pd.DataFrame:
        t = f.pivot_table(index=["disks"], columns="policy", values="rgr", aggfunc="first")
        return pd.DataFrame({"vdf vs lru": (t["lru"] - t["vdf"]) / t["lru"]})

    mean, hw, n = per_seed(frame, "run.seed", gain)
    # per seed: 1/2, 1/4, 1/2 -> mean 5/12; paired, not a ratio of means (which is 1 - 7/12)
    assert n == 3
    assert mean.loc[5, "vdf vs lru"] == pytest.approx(5 / 12)
    sd = math.sqrt(((0.5 - 5 / 12) ** 2 * 2 + (0.25 - 5 / 12) ** 2) / 2)
    assert hw.loc[5, "vdf vs lru"] == pytest.approx(4.303 * sd / math.sqrt(3))
    shown = with_ci(mean, hw, lambda v: f"{v:+.1%}")
    assert shown.loc[5, "vdf vs lru"] == f"+41.7% ± {4.303 * sd / math.sqrt(3):.1%}"
    # no seed key: the table itself, no interval
    one, one_hw, n1 = per_seed(frame[frame["run.seed"] == 1], None, gain)
    assert n1 == 1 and one.loc[5, "vdf vs lru"] == 0.5 and math.isnan(one_hw.loc[5, "vdf vs lru"])


EXPERIMENT = """
[report]
title = "tiny"
rows = ["array.disks"]
columns = "cache.policy"
value = "rgr"
compare = [["lru", "vdf-lru"]]
paper = [
  { comparison = "vdf-lru vs lru", value = "up to +31.4%", source = "a paper", claim = "VDF-LRU cuts RGR", paper_value = 0.314 },
  { comparison = "lru vs vdf-lru", value = "-5%", source = "a paper", claim = "a claim with no comparison run", paper_value = -0.05 },
]

[workload]
ops = "reads"
synthetic = { kind = "zipf", keys = 20000, alpha = 0.9, requests = 40000 }

[cache]
policy = "lru"
capacity_blocks = 1000

[array]
level = "raid5"
disks = 5
failed = [0]

[run]
mode = "count"

[sweep]
"array.disks" = [4, 5]
"cache.policy" = ["lru", "vdf-lru"]
"run.seed" = [1, 2, 3, 4, 5]
"""


def test_reproduce_with_seeds_and_the_scoreboard(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "tiny.toml").write_text(EXPERIMENT)
    out = tmp_path / "out"
    assert main(["reproduce", "all", "--experiments", str(exp), "--out", str(out), "--workers", "1"]) == 0
    text = capsys.readouterr().out
    assert "mean ± 95% CI over 5 seeds" in text
    page = (out / "tiny" / "report.html").read_text()
    assert "±" in page
    claims = json.loads((out / "tiny" / "claims.json").read_text())
    [row] = [c for c in claims if c["comparison"] == "4: vdf-lru vs lru"]
    assert row["seeds"] == 5 and row["cells"] == 1 and row["best_hw"] > 0
    scores = scoreboard.scoreboard(exp, out)
    assert [s.claim for s in scores] == ["VDF-LRU cuts RGR", "a claim with no comparison run"]
    best = max(c["best"] for c in claims if c["comparison"].endswith("vdf-lru vs lru"))
    assert scores[0].raidlab == best and scores[0].agrees is True and scores[0].seeds == 5
    assert scores[1].raidlab is None and scores[1].agrees is None
    board = (out / "scoreboard.html").read_text()
    assert "VDF-LRU cuts RGR" in board and "tiny/report.html" in board and "not run" in board
    # the scoreboard alone, from the reports already written
    assert main(["reproduce", "scoreboard", "--experiments", str(exp), "--out", str(out)]) == 0
    assert "same direction" in " ".join(capsys.readouterr().out.split())
    # ... and into a document: the table between its markers, the verdicts beside it
    doc = tmp_path / "docs" / "repro.md"
    doc.parent.mkdir()
    doc.write_text(f"# results\n\n{scoreboard.DOC_BEGIN}\nold table\n{scoreboard.DOC_END}\n\nprose\n")
    assert main(["reproduce", "scoreboard", "--experiments", str(exp), "--out", str(out), "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# results\n\n") and text.endswith(f"{scoreboard.DOC_END}\n\nprose\n")
    table = scoreboard.doc_table(text)
    assert "old table" not in table and table == (out / "scoreboard.md").read_text()
    assert json.loads((doc.parent / "claims" / "tiny.json").read_text()) == claims
    assert scoreboard.markdown(scoreboard.scoreboard(exp, doc.parent / "claims")) == table


def test_markdown_table_worked_example() -> None:
    s = scoreboard.Score(
        claim="A | B",
        experiment="x",
        comparison="4: new vs old",
        paper="up to +10% (p)",
        paper_value=0.1,
        raidlab=0.05,
        raidlab_hw=0.01,
        seeds=5,
        stat="best",
        report="x/report.html",
    )
    lost = scoreboard.Score(**{**s.__dict__, "raidlab": -0.02, "raidlab_hw": None, "stat": "median", "seeds": 1})
    assert scoreboard.markdown([s, lost]) == (
        "| claim | experiment | paper | raidlab (mean ± 95% CI) | same direction |\n"
        "| --- | --- | --- | --- | --- |\n"
        "| A \\| B | `x` (4: new vs old) | up to +10% (p) | +5.0% ± 1.0% (best, 5 seeds) | yes |\n"
        "| A \\| B | `x` (4: new vs old) | up to +10% (p) | -2.0% (median, 1 seed) | NO |\n"
    )
    with pytest.raises(Exception, match="no generated scoreboard"):
        scoreboard.doc_table("no markers here")


def test_only_the_newest_report_of_an_experiment_counts(tmp_path: Path) -> None:
    """Two reports ran the same file: the newer one's verdict wins even when the older one
    had a better best cell (a stale run must not stay on the scoreboard)."""
    import os

    row = {"file": "e.toml", "metric": "rgr", "part": "whole", "comparison": "g: a vs b", "median": 0.1, "best_hw": 0.0, "seeds": 5}
    for name, best, mtime in (("old", 0.9, 1_000_000), ("new", 0.2, 2_000_000)):
        (tmp_path / name).mkdir()
        p = tmp_path / name / "claims.json"
        p.write_text(json.dumps([{**row, "best": best}]))
        os.utime(p, (mtime, mtime))
    rows = scoreboard.newest(scoreboard.measured(tmp_path))
    assert [(r["report"], r["best"]) for r in rows] == [("new/report.html", 0.2)]
    frozen = scoreboard.freeze(tmp_path, tmp_path / "frozen")
    assert [p.name for p in frozen] == ["e.json"]
    assert json.loads(frozen[0].read_text())[0]["best"] == 0.2


def test_a_store_report_replaces_every_store_verdict_of_its_experiment(tmp_path: Path) -> None:
    """An older --store report had a `matched` prediction, the newer one has not: the newer
    report's store and store-sim rows count, the older matched row neither counts nor stays
    frozen."""
    import os

    row = {"file": "e.toml", "metric": "rebuild_s", "part": "whole", "comparison": "g: a vs b", "median": 0.1, "best_hw": 0.0, "seeds": 3}
    old = [{**row, "driver": d, "best": 0.9} for d in ("store", "store-sim", "store-sim-matched")]
    new = [{**row, "driver": d, "best": 0.2} for d in ("store", "store-sim")]
    for name, rows, mtime in (("old", old, 1_000_000), ("new", new, 2_000_000)):
        (tmp_path / name).mkdir()
        p = tmp_path / name / "claims.json"
        p.write_text(json.dumps(rows))
        os.utime(p, (mtime, mtime))
    rows = scoreboard.newest(scoreboard.measured(tmp_path))
    assert sorted((r["driver"], r["best"]) for r in rows) == [("store", 0.2), ("store-sim", 0.2)]
    dest = tmp_path / "frozen"
    dest.mkdir()
    (dest / "e.store-sim-matched.json").write_text(json.dumps(old[2:]))
    (dest / "other.store-sim-matched.json").write_text("[]")
    frozen = scoreboard.freeze(tmp_path, dest)
    assert sorted(p.name for p in frozen) == ["e.store-sim.json", "e.store.json"]
    assert sorted(p.name for p in dest.iterdir()) == ["e.store-sim.json", "e.store.json", "other.store-sim-matched.json"]


def test_verdicts_below_saturation_drop_the_cells_where_the_base_saturated() -> None:
    """``max_throughput_ms``: the ``below_saturation`` verdicts keep only the rates at which
    the base's mean response (over seeds) stays under the limit."""
    from raidlab.report import Section, below_saturation, pivot, reductions

    rows = []
    for seed in (1, 2):
        # base: 10, 15, 40 ms at rates 1..3 (saturated at 3); new 10% slower, then 50% faster
        for rate, base, new in ((1, 10.0, 11.0), (2, 15.0, 16.5), (3, 40.0 + seed, 20.0)):
            rows += [
                {"trace": "a", "rate": rate, "arch": "base", "ms": base, "seed": seed},
                {"trace": "a", "rate": rate, "arch": "new", "ms": new, "seed": seed},
            ]
    frame = pd.DataFrame(rows)
    spec = {"rows": ["trace", "rate"], "columns": "arch", "value": "ms", "max_throughput_ms": 20.0}
    red, hw, n = per_seed(frame, "seed", lambda f: reductions(pivot(f, spec), [["base", "new"]]))
    [v] = below_saturation(Section(Path("x.toml"), spec, frame, []), red, hw, [["base", "new"]], 20.0)
    assert n == 2 and v.label == "a: new vs base" and v.cells == 2 and v.improved == 0
    assert v.median == pytest.approx(-0.1) and v.best == pytest.approx(-0.1)
    # over every rate the saturated one would win: best +50%
    assert max(red["new vs base"]) > 0.5


def test_markdown_table_gains_the_store_columns_once_a_store_report_exists() -> None:
    base = dict(claim="C", experiment="x", comparison="2.65: pro vs sequential", paper="+44.7% (p)", paper_value=0.447, stat="best", report="x/report.html")
    sim = scoreboard.Score(**base, raidlab=0.6, raidlab_hw=0.04, seeds=5)
    store = scoreboard.Score(**base, raidlab=0.418, raidlab_hw=0.229, seeds=3)
    pred = scoreboard.Score(**base, raidlab=0.362, raidlab_hw=0.134, seeds=3)
    matched = scoreboard.Score(**base, raidlab=0.339, raidlab_hw=0.148, seeds=3)
    sim.store, sim.store_sim, sim.store_sim_matched = store, pred, matched
    lines = scoreboard.markdown([sim]).splitlines()
    assert lines[0].endswith("| store (mean ± 95% CI) | store - simulator (same set-up) |")
    assert lines[2].endswith(
        "| +41.8% ± 22.9% (best, 3 seeds) | +5.6 pp (sim +36.2%; matched sim +33.9%) |"
    ), lines[2]


def test_the_docs_scoreboard_is_what_the_code_prints_from_the_verdicts() -> None:
    """docs/reproductions.md's table is generated (``raidlab reproduce scoreboard --doc``)
    from the verdicts committed under docs/claims/: this code, run on them now, prints it
    again to the letter. A hand edit of the table, or a claim added to an experiment file
    without its verdict, fails here."""
    repo = Path(__file__).resolve().parent.parent
    text = (repo / "docs" / "reproductions.md").read_text(encoding="utf-8")
    scores = scoreboard.scoreboard(repo / "experiments", repo / "docs" / "claims")
    assert scoreboard.doc_table(text, "docs/reproductions.md") == scoreboard.markdown(scores)
