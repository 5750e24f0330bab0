"""The HTML report as a reader meets it: summary first, folded skip lists, no +inf% cells,
plots and tables that do not widen the page, axes in words. (A headless-browser check of the
rendered page is not part of this test.)"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from rich.console import Console

from raidlab.report import Section, reductions, write_report

SPEC = {
    "title": "tiny: RGR",
    "rows": ["tags.workload", "cache.capacity_fraction"],
    "columns": "cache.policy",
    "value": "rgr",
    "compare": [["lru", "vdf-lru"]],
    "plot_x": "cache.capacity_fraction",
    "plot_facets": ["tags.workload"],
}


def frame() -> pd.DataFrame:
    rows = []
    for wl in ("web", "zipf"):
        for f in (0.01, 0.1, 0.5):
            for policy, base in (("lru", 1.0), ("vdf-lru", 0.8)):
                rgr = 0.0 if (wl, f) == ("zipf", 0.5) else base * (1 - f)
                rows.append({"tags.workload": wl, "cache.capacity_fraction": f, "cache.policy": policy, "rgr": rgr})
    return pd.DataFrame(rows)


def test_reductions_of_a_zero_base_are_empty_not_infinite() -> None:
    table = frame().pivot_table(index=SPEC["rows"], columns="cache.policy", values="rgr", aggfunc="first")
    red = reductions(table, SPEC["compare"])
    assert red.isna().sum().sum() == 1
    assert not red.abs().eq(float("inf")).any().any()


def test_report_page_reads_at_a_glance(tmp_path: Path) -> None:
    skipped = [f"run{i}: trace runs are skipped in the demo (synthetic data only)" for i in range(192)]
    section = Section(tmp_path / "tiny.toml", SPEC, frame(), skipped)
    import io

    console = Console(width=80, record=True, file=io.StringIO())
    page = write_report("tiny", [section], tmp_path / "out", console).read_text()
    # the summary (verdicts) comes before the first data table
    assert page.index("<h2>Summary</h2>") < page.index("data:")
    # 192 identical reasons are one line, the runs folded under it
    assert "192 runs: trace runs are skipped in the demo" in page
    assert page.count("trace runs are skipped") == 1
    assert "inf%" not in page and "no value (a base of 0" in page
    assert "img{max-width:100%" in page and "<div class='wide'>" in page
    assert "RGR (disk blocks read / block requested)" in page
    assert len(re.findall(r"<img ", page)) == 2
    # the console tables fit 80 columns
    for line in console.export_text().splitlines():
        assert len(line) <= 80, line
