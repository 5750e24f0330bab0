"""The HTML report as a reader meets it: summary first, folded skip lists, no +inf% cells,
plots and tables that do not widen the page, axes in words; and the page rendered by headless
Chromium (skipped, with a message, when it is not installed)."""

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


PROBE = """<script>
window.__raidlabErrors = [];
const __err = console.error.bind(console);
console.error = (...a) => { window.__raidlabErrors.push(a.join(' ')); __err(...a); };
window.addEventListener('error', (e) => {
  window.__raidlabErrors.push(String(e.message || (e.target && (e.target.src || e.target.href)) || 'error'));
}, true);
window.addEventListener('load', () => {
  const d = document.documentElement;
  const imgs = Array.from(document.images);
  const out = {
    scroll_width: d.scrollWidth,
    viewport_width: window.innerWidth,
    images: imgs.length,
    broken: imgs.filter((i) => !(i.complete && i.naturalWidth > 0)).map((i) => i.getAttribute('src')),
    errors: window.__raidlabErrors,
  };
  const p = document.createElement('pre');
  p.id = 'raidlab-check';
  p.textContent = JSON.stringify(out);
  document.body.appendChild(p);
});
</script>"""


def _chromium() -> str:
    import shutil

    import pytest

    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if exe is None:
        pytest.skip("chromium not installed (Debian package chromium; `make test-python` installs it as root)")
    return exe


def _headless(exe: str, *args: str) -> str:
    import subprocess

    r = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,1600", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_report_page_in_a_real_browser(tmp_path: Path) -> None:
    """Headless Chromium renders the report: nothing wider than the viewport, every image
    loaded, no console error, and a screenshot of the page."""
    import io
    import json

    exe = _chromium()
    skipped = [f"run{i}: trace runs are skipped in the demo (synthetic data only)" for i in range(192)]
    section = Section(tmp_path / "tiny.toml", SPEC, frame(), skipped)
    console = Console(width=80, record=True, file=io.StringIO())
    page = write_report("tiny", [section], tmp_path / "out", console)
    html = page.read_text()
    # The probe page sits beside the report, so the images' relative paths resolve alike.
    probe = page.with_name("probe.html")
    probe.write_text(html.replace("<head>", "<head>" + PROBE, 1) if "<head>" in html else PROBE + html)
    dom = _headless(exe, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    m = re.search(r'<pre id="raidlab-check">(.*?)</pre>', dom, re.S)
    assert m, dom[-2000:]
    got = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    assert got["images"] == 2 and got["broken"] == [], got
    assert got["errors"] == [], got
    assert got["scroll_width"] <= got["viewport_width"], got
    shot = tmp_path / "report.png"
    _headless(exe, f"--screenshot={shot}", page.as_uri())
    assert shot.exists() and shot.stat().st_size > 10_000


def test_the_papers_numbers_stand_beside_raidlabs(tmp_path: Path) -> None:
    import io

    spec = {
        **SPEC,
        "paper": [{"group": "web", "comparison": "vdf-lru vs lru", "value": "up to +31.4%", "source": "VDF §5, Fig. 3"}],
    }
    console = Console(width=200, record=True, file=io.StringIO())
    page = write_report("tiny", [Section(tmp_path / "tiny.toml", spec, frame(), [])], tmp_path / "out", console).read_text()
    summary = page[page.index("<h2>Summary</h2>") : page.index("data:")]
    assert "<th>paper (cited)</th>" in summary
    assert "<td>web: vdf-lru vs lru</td><td>+20.0%</td><td>+20.0%</td><td>3/3</td><td>up to +31.4% (VDF §5, Fig. 3)</td>" in summary
    # A row the paper has no number for says so.
    assert "<td>zipf: vdf-lru vs lru</td><td>+20.0%</td><td>+20.0%</td><td>2/2</td><td>-</td>" in summary
    assert "the paper reports no number for this row" in summary
    assert "web: vdf-lru vs lru: best +20.0%, median +20.0%, improved in 3/3 cells; paper: up to +31.4% (VDF §5, Fig. 3)" in console.export_text()


def test_a_seeded_table_needs_a_first_column_naming_one_run(tmp_path: Path) -> None:
    """Averaging a ``table`` over seeds matches rows by its first column: a column shared by
    several runs of one seed would merge them silently, so it is refused, naming the key."""
    import pytest

    from raidlab import ConfigError
    from raidlab.report import extra_views

    rows = [
        {"name": f"{policy}-{disks}", "cache.policy": policy, "array.disks": disks, "run.seed": seed, "rgr": 0.1 * disks + seed}
        for policy in ("lru", "vdf-lru")
        for disks in (4, 5)
        for seed in (1, 2)
    ]
    df = pd.DataFrame(rows)
    console = Console(record=True, width=120)
    bad = Section(file=Path("exp.toml"), spec={"table": ["cache.policy", "rgr"]}, frame=df, skipped=[])
    with pytest.raises(ConfigError, match="report.table") as e:
        extra_views(bad, tmp_path, "t", console)
    assert e.value.key == "report.table"
    good = Section(file=Path("exp.toml"), spec={"table": ["name", "rgr"]}, frame=df, skipped=[])
    [html] = extra_views(good, tmp_path, "t", console)
    # lru-4: 0.4 + 1 and 0.4 + 2 -> mean 1.9.
    assert "mean ± 95% CI over 2 seeds" in html and "1.9000" in html


def test_series_carry_the_experiments_seed_key() -> None:
    """With ``[report] seeds`` naming another key, each run's series carries that key, so
    the series plot can keep one replicate instead of drawing all as one line."""
    from types import SimpleNamespace

    from raidlab.reproduce import StoredRuns

    runs = StoredRuns(
        [
            SimpleNamespace(name="lru", series={"t_s": [0, 1], "rgr": [0.5, 0.4]}, metrics={"workload.synthetic.seed": s, "run.seed": 1})
            for s in (7, 8)
        ]
    )
    frame = runs.series_frame("workload.synthetic.seed")
    assert list(frame.columns[:2]) == ["name", "workload.synthetic.seed"]
    assert frame["workload.synthetic.seed"].tolist() == [7, 7, 8, 8]
    assert "run.seed" in runs.series_frame().columns
