"""The user surface as a new user meets it, at an 80-column terminal (``COLUMNS=80``):
tables that fit, ``--set`` and sizes with units, the config-free quick form, errors that say
what is wrong, and one ``--json`` shape checked against ``docs/run.schema.json``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import raidlab
from raidlab import fit
from raidlab.cli import main

REPO = Path(__file__).resolve().parent.parent

BASE = """
[workload.synthetic]
kind = "zipf"
keys = 20000
requests = 200000
seed = 5
[cache]
policy = "lru"
capacity_blocks = 2000
[array]
level = "raid5"
disks = 5
failed = [1]
"""

SWEEP = BASE + """
[sweep]
"cache.policy" = ["lru", "vdf-lru", "arc"]
"cache.capacity_blocks" = [1000, 2000]
"""


@pytest.fixture(autouse=True)
def columns_80(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def write(tmp_path: Path, text: str, name: str = "exp.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["run", *args, "--json"]) == 0
    out: dict = json.loads(capsys.readouterr().out)
    return out


def assert_fits(text: str, width: int = 80) -> None:
    for line in text.splitlines():
        assert len(line) <= width, line
    assert "…" not in text


# ---- terminal output that fits ------------------------------------------------------------


def test_run_table_fits_80_columns_with_every_number_whole(tmp_path, capsys) -> None:
    path = write(tmp_path, SWEEP)
    data = run_json(capsys, str(path))
    assert main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    assert_fits(out)
    for r in data["runs"]:
        m = r["metrics"]
        assert f"{m['disk_reads_total']:,}" in out
        assert f"{m['hit_ratio']:.4f}" in out
    # names keep only what differs, with the last part of each key
    assert "cache.policy" not in out and "vdf-lru" in out
    # a value the same for every run is said once
    assert "same for every run: requests 200,000" in out


@pytest.mark.parametrize("width", [40, 60, 100])
def test_run_table_never_cuts_at_any_width(tmp_path, capsys, monkeypatch, width: int) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    path = write(tmp_path, SWEEP)
    data = run_json(capsys, str(path))
    assert main(["run", str(path), "--columns", "requests,disk_reads_total,hit_ratio,rgr,disk_writes_total"]) == 0
    out = capsys.readouterr().out
    assert_fits(out, width)
    flat = re.sub(r"\s+", " ", out)
    for r in data["runs"]:
        assert f"{r['metrics']['disk_reads_total']:,}" in flat
        assert f"{r['metrics']['rgr']:.4f}" in flat


def test_columns_choose_and_unknown_metric_is_refused(tmp_path, capsys) -> None:
    path = write(tmp_path, SWEEP)
    assert main(["run", str(path), "--metrics", "hit_ratio,rgr"]) == 0
    out = capsys.readouterr().out
    assert "RGR" in out and "disk reads" not in out and "wall" not in out
    assert main(["run", str(path), "--columns", "hit_ration"]) == 2
    err = capsys.readouterr().err
    assert "hit_ration" in err and "hit_ratio" in err


def test_many_runs_start_with_a_summary(tmp_path, capsys) -> None:
    text = BASE + '[sweep]\n"cache.capacity_blocks" = [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1100, 1200]\n'
    assert main(["run", str(write(tmp_path, text))]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("12 runs")
    assert re.search(r"hit ratio: 0\.\d{4} \(capacity_blocks=100\) \.\. 0\.\d{4} \(capacity_blocks=1200\)", out)
    assert_fits(out)


def test_short_names() -> None:
    names = ["cache.policy=lru array.disks=5", "cache.policy=arc array.disks=5", "cache.policy=lru array.disks=6"]
    short, common = fit.short_names(names)
    assert short == ["policy=lru disks=5", "policy=arc disks=5", "policy=lru disks=6"]
    assert common == ""
    short, common = fit.short_names(["tags.workload=web search x=1", "tags.workload=web search x=2"])
    assert (short, common) == (["x=1", "x=2"], "tags.workload=web search")
    assert fit.short_names(["a", "b"]) == (["a", "b"], "")


def test_results_shows_a_default_column_set_that_fits(tmp_path, capsys) -> None:
    path = write(tmp_path, SWEEP)
    store = tmp_path / "store"
    assert main(["sweep", str(path), "--out", str(store), "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["results", str(store)]) == 0
    out = capsys.readouterr().out
    assert_fits(out)
    assert "hit_ratio" in out and "rgr" in out
    assert "workload.synthetic.keys" not in out  # the same in every run: not a column
    assert "columns shown" in out and '"cache.policy"' in out  # how to see more, and quoting
    assert main(["results", str(store), "--columns", "hit_ratio"]) == 0
    assert "rgr" not in capsys.readouterr().out
    assert main(["results", str(store), "--sql", "SELECT cache.policy FROM runs"]) == 2
    assert '"cache.policy"' in capsys.readouterr().err


# ---- command-line convenience -------------------------------------------------------------


def test_set_overrides_any_key_typed_by_the_schema(tmp_path, capsys) -> None:
    path = write(tmp_path, BASE)
    data = run_json(capsys, str(path), "--set", "cache.policy=arc", "--set", "cache.capacity=1MiB", "--set", "array.disks=6")
    (r,) = data["runs"]
    assert r["config"]["cache"]["policy"] == "arc"
    assert r["metrics"]["capacity"] == 256  # 1 MiB of 4 KiB blocks
    assert r["config"]["array"]["disks"] == 6
    assert "capacity_blocks" not in r["config"]["cache"]  # --set cache.capacity replaced it
    assert r["name"] == "cache.policy=arc cache.capacity=1MiB array.disks=6"
    # `name` is text: a value that reads as a number is taken as typed
    (r,) = run_json(capsys, str(path), "--set", "name=2024")["runs"]
    assert r["name"] == "2024"
    # a list, and a sweep key in quotes
    data = run_json(capsys, str(path), "--set", "array.failed=[0]", "--set", 'sweep."cache.policy"=["lru", "arc"]')
    assert [r["config"]["cache"]["policy"] for r in data["runs"]] == ["lru", "arc"]
    assert data["runs"][0]["config"]["array"]["failed"] == [0]
    assert main(["run", str(path), "--set", "cache.polcy=arc"]) == 2
    assert 'did you mean "policy"' in capsys.readouterr().err
    assert main(["run", str(path), "--set", "nothing"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_sizes_with_units_in_files(tmp_path, capsys) -> None:
    text = BASE.replace("capacity_blocks = 2000", 'capacity_blocks = "8MiB"').replace(
        'level = "raid5"', 'level = "raid5"\nstripe_unit = "32KiB"'
    )
    (r,) = run_json(capsys, str(write(tmp_path, text)))["runs"]
    assert r["metrics"]["capacity"] == 2048
    assert r["config"]["array"]["stripe_unit"] == "32KiB"
    obj = BASE.replace("capacity_blocks = 2000", 'unit = "object"\ncapacity_bytes = "1.5MB"').split("[array]")[0]
    (r,) = run_json(capsys, str(write(tmp_path, obj)))["runs"]
    assert r["metrics"]["capacity"] == 1_500_000
    for bad in ['"lots"', '"12 parsecs"', '"0KiB"']:
        path = write(tmp_path, BASE.replace("capacity_blocks = 2000", f"capacity_blocks = {bad}"))
        assert main(["run", str(path)]) == 2
        assert "cache.capacity_blocks" in capsys.readouterr().err


def test_quick_form_runs_a_trace_without_a_config(tmp_path, capsys) -> None:
    trace = tmp_path / "t.mqsim.txt"
    trace.write_text("".join(f"{i * 1000} 0 {(i % 7) * 8} 8 1\n" for i in range(200)))
    (r,) = run_json(capsys, "--trace", str(trace), "--policy", "lru", "--size", "16KiB")["runs"]
    assert r["config"]["workload"]["trace"].endswith("t.mqsim.txt")
    assert r["metrics"]["capacity"] == 4 and r["metrics"]["requests"] == 200
    assert main(["run", "--trace", str(trace), "--policy", "arc", "--size", "16KiB"]) == 0
    assert_fits(capsys.readouterr().out)
    assert main(["run"]) == 2
    assert "--trace" in capsys.readouterr().err


def test_quick_form_on_a_real_trace(traces, capsys) -> None:
    (r,) = run_json(capsys, "--trace", str(traces / "msr" / "hm0-sample.msr.csv"), "--policy", "lru", "--size", "1MiB")["runs"]
    assert r["metrics"]["requests"] > 0 and r["metrics"]["capacity"] == 256


def test_workers_is_the_name_and_threads_still_works(tmp_path, capsys) -> None:
    path = write(tmp_path, SWEEP)
    assert main(["run", str(path), "--workers", "2"]) == 0
    capsys.readouterr()
    assert main(["run", str(path), "--threads", "1"]) == 0
    assert "--threads is deprecated; use --workers" in capsys.readouterr().err


# ---- errors that tell the truth -----------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "key", "near"),
    [
        ("capacity_blocks = 2000", "capacity_blok = 2000", "cache.capacity_blok", "capacity_blocks"),
        ('policy = "lru"', 'polcy = "lru"', "cache.polcy", "policy"),
        ("[cache]", "[cach]", "cach", "cache"),
        ("disks = 5", "disk = 5", "array.disk", "disks"),
        ("seed = 5", "sed = 5", "workload.synthetic.sed", "seed"),
    ],
)
def test_a_key_typo_is_an_unknown_key_with_a_did_you_mean(tmp_path, capsys, old, new, key, near) -> None:
    path = write(tmp_path, BASE.replace(old, new))
    assert main(["run", str(path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "unknown key" in err and f'did you mean "{near}"' in err
    with pytest.raises(raidlab.ConfigError) as e:
        raidlab.load(path)
    assert e.value.key == key


def test_a_csv_read_as_oracle_general_stops_at_record_1(tmp_path, capsys) -> None:
    csv = tmp_path / "trace.csv"
    csv.write_text("".join(f"128166372{i:05d},hm,0,Read,{i * 4096},4096,100\n" for i in range(400)))
    cfg = f'[workload]\ntrace = "{csv.name}"\nformat = "oracleGeneral"\n[cache]\npolicy = "lru"\nunit = "object"\ncapacity_bytes = 100000\n'
    path = write(tmp_path, cfg)
    assert main(["run", str(path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "trace.csv: record 1: not an oracleGeneral record" in err and "text" in err
    with pytest.raises(raidlab.TraceError) as e:
        raidlab.run(path)
    assert e.value.line == 1


def test_auto_never_takes_random_bytes_for_keys(tmp_path, capsys) -> None:
    import random

    noise = tmp_path / "noise.bin"
    noise.write_bytes(random.Random(7).randbytes(64 * 1024))
    assert main(["trace", "stats", str(noise)]) == 2
    err = capsys.readouterr().err
    assert "noise.bin" in err and "set `format` explicitly" in " ".join(err.split())
    with pytest.raises(raidlab.FormatError):
        raidlab.run({"workload": {"trace": str(noise)}, "cache": {"policy": "lru", "capacity_blocks": 10}})
    keys = tmp_path / "keys.bin"
    keys.write_bytes(b"".join(random.Random(1).randrange(1 << 20).to_bytes(4, "big") for _ in range(4096)))
    assert main(["trace", "stats", str(keys), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "keys-u32be"


def test_a_text_file_is_called_text(tmp_path, capsys) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("Trace notes — café\nthese are not trace records at all\n" * 20, encoding="utf-8")
    assert main(["trace", "stats", str(notes)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "this is a text file" in err and "binary" not in err


def test_finished_runs_are_kept_when_a_later_run_fails(tmp_path, capsys) -> None:
    (tmp_path / "bad.mqsim.txt").write_text("0 0 0 8 1\n1000 0 8 8 1\nnot a record\n")
    base, array = BASE.split("[cache]")
    text = (
        "[cache]" + array + '\n[[runs]]\nname = "good"\n' + base.replace("[workload.synthetic]", "[runs.workload.synthetic]")
        + '\n[[runs]]\nname = "bad"\nworkload = { trace = "bad.mqsim.txt" }\n'
    )
    path = write(tmp_path, text)
    assert main(["run", str(path), "--workers", "1"]) == 2
    cap = capsys.readouterr()
    assert "1 run finished before a run failed" in cap.out and "good" in cap.out
    assert "bad.mqsim.txt" in cap.err
    with pytest.raises(raidlab.RaidlabError) as e:
        raidlab.run(path)
    assert [r.name for r in e.value.finished.runs] == ["good"]  # type: ignore[attr-defined]
    assert main(["run", str(path), "--json"]) == 2
    assert [r["name"] for r in json.loads(capsys.readouterr().out)["runs"]] == ["good"]


# ---- one JSON schema ----------------------------------------------------------------------


def test_json_has_one_shape_with_the_resolved_config(tmp_path, capsys) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "docs" / "run.schema.json").read_text())
    one = run_json(capsys, str(write(tmp_path, BASE)))
    many = run_json(capsys, str(write(tmp_path, SWEEP)))
    timed = BASE.replace("requests = 200000", "requests = 2000") + '[run]\nmode = "timed"\niops = 500\ninterval_s = 1\n'
    ramp = (
        BASE.replace("requests = 200000", "requests = 20000")
        + '[run]\nmode = "timed"\ndriver = "ramp"\nlevels_iops = [100, 400]\nlevel_s = 2\nwarmup_s = 0.5\n'
    )
    hierarchy = (
        '[workload.files]\nkind = "zipf"\nfiles = 64\nfile_blocks = 8\nreads = 400\n'
        '[host]\nfs_cache_blocks = 200\n[cache]\npolicy = "xray"\ncapacity_blocks = 100\n'
    )
    others = [run_json(capsys, str(write(tmp_path, t))) for t in (timed, ramp, hierarchy)]
    assert "series" in others[0]["runs"][0] and "ramp" in others[1]["runs"][0]
    assert others[2]["runs"][0]["metrics"]["mode"] == "hierarchy"
    for data in (one, many, *others):
        jsonschema.validate(data, schema)
    assert len(one["runs"]) == 1 and len(many["runs"]) == 6
    cfg = one["runs"][0]["config"]
    # defaults filled in
    assert cfg["workload"]["block_size"] == 4096 and cfg["workload"]["ops"] == "reads"
    assert cfg["workload"]["synthetic"]["alpha"] == 0.9
    assert cfg["cache"]["unit"] == "block" and cfg["cache"]["writes"] == "ignore"
    assert cfg["array"]["layout"] == "left-symmetric" and cfg["array"]["stripe_unit"] == 65536
    assert cfg["run"] == {"mode": "count", "seed": 1, "warmup_requests": 0, "footprint": False}
    # the resolved config runs to the same result
    again = raidlab.run(cfg).runs[0].metrics
    assert again["hit_ratio"] == one["runs"][0]["metrics"]["hit_ratio"]


def test_the_readme_first_example_is_quick_and_fits(capsys) -> None:
    import time

    start = time.monotonic()
    assert main(["run", str(REPO / "examples" / "quickstart.toml")]) == 0
    assert time.monotonic() - start < 10
    out = capsys.readouterr().out
    assert_fits(out)
    assert len(out.splitlines()) < 25
    assert "run examples/quickstart.toml" in (REPO / "README.md").read_text()


# ---- reproduce ----------------------------------------------------------------------------


def test_reproduce_lists_experiments_from_any_directory(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAIDLAB_EXPERIMENTS", raising=False)
    assert main(["reproduce"]) == 0
    out = capsys.readouterr().out
    assert "vdf-rgr" in out and "RGR" in out
    assert_fits(out)
    assert main(["reproduce", "vdf-rgx"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "did you mean vdf-rgr" in err and "known:" in err


def test_reproduce_takes_a_path_to_one_experiment_file(tmp_path, capsys, monkeypatch) -> None:
    """A path ending in .toml runs that file alone (not NAME*.toml beside it), wherever it is."""
    monkeypatch.chdir(tmp_path)
    tiny = (
        '[report]\ntitle = "tiny"\nrows = ["cache.capacity_blocks"]\ncolumns = "cache.policy"\n'
        'values = ["hit_ratio"]\n[workload.synthetic]\nkind = "zipf"\nkeys = 1000\nrequests = 2000\n'
        '[cache]\npolicy = "lru"\ncapacity_blocks = 10\n[sweep]\n"cache.policy" = ["lru", "fifo"]\n'
        '"cache.capacity_blocks" = [10, 100]\n'
    )
    d = tmp_path / "mine"
    d.mkdir()
    (d / "one.toml").write_text(tiny)
    (d / "one-more.toml").write_text(tiny.replace('title = "tiny"', 'title = "other"'))
    assert main(["reproduce", str(d / "one.toml"), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "one" / "report.html").exists()
    assert not (tmp_path / "out" / "one-more").exists()
    capsys.readouterr()
    assert main(["reproduce", str(d / "none.toml")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "none.toml: no such experiment file" in err


# ---- result store -------------------------------------------------------------------------


def test_store_keeps_resolved_values_experiment_and_every_view(tmp_path, capsys, monkeypatch) -> None:
    from raidlab.store import query

    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, SWEEP, "grid.toml")
    assert main(["sweep", str(path), "--workers", "1"]) == 0
    assert "results/grid" in capsys.readouterr().out  # one store per experiment by default
    store = tmp_path / "results" / "grid"
    frame = query(store, 'SELECT experiment, config_hash, "workload.block_size", "array.stripe_unit", "run.mode" FROM runs')
    assert len(frame) == 6 and set(frame["experiment"]) == {"grid"}
    assert frame["config_hash"].str.fullmatch(r"[0-9a-f]{16}").all() and frame["config_hash"].is_unique
    assert (frame["workload.block_size"] == 4096).all() and (frame["array.stripe_unit"] == 65536).all()
    assert set(frame["run.mode"]) == {"count"}
    for view in ("series", "ramp", "errors"):  # present, and empty, in a counting-mode store
        assert len(query(store, f"SELECT * FROM {view}")) == 0


# ---- trace stats and object mode ----------------------------------------------------------


def test_trace_stats_limit_device_and_one_footprint(tmp_path, capsys) -> None:
    p = tmp_path / "t.mqsim.txt"
    # device 0: 8 KiB reads of blocks 0-1; device 1: 512-byte reads inside one block
    p.write_text("".join(f"{i * 1000} {i % 2} {0 if i % 2 == 0 else 1} {16 if i % 2 == 0 else 1} 1\n" for i in range(10)))
    assert main(["trace", "stats", str(p), "--json", "--limit", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 4
    assert main(["trace", "stats", str(p), "--json", "--device", "1"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["requests"], s["footprint_blocks"], s["total_bytes"]) == (5, 1, 5 * 512)
    # the simulator's footprint: distinct blocks times the block size, said so in the table
    assert s["footprint_bytes"] == 4096
    assert main(["trace", "stats", str(p), "--json"]) == 0
    devices = json.loads(capsys.readouterr().out)["devices"]
    assert devices == [
        {"device": 0, "requests": 5, "reads": 5, "writes": 0, "bytes": 5 * 8192},
        {"device": 1, "requests": 5, "reads": 5, "writes": 0, "bytes": 5 * 512},
    ]
    assert main(["trace", "stats", str(p)]) == 0
    out = capsys.readouterr().out
    assert_fits(out)
    assert "blocks x block size" in " ".join(out.split())
    assert "2 devices" in out
    keys = tmp_path / "k.u32be"
    keys.write_bytes(b"".join(k.to_bytes(4, "big") for k in [1, 2, 1, 3]))
    assert main(["trace", "stats", str(keys), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["sized"] is False and s["footprint_bytes"] is None and s["size_histogram"] == []
    assert main(["trace", "stats", str(keys)]) == 0
    assert "none in this format" in capsys.readouterr().out
    assert main(["trace", "stats", str(keys), "--device", "1"]) == 2


def test_object_mode_has_a_byte_miss_ratio(tmp_path, capsys) -> None:
    import random

    rng = random.Random(3)
    p = tmp_path / "t.mqsim.txt"
    # keys 0-19, skewed; even keys are 4 KiB objects, odd keys 16 KiB ones
    keys = [min(int(rng.expovariate(0.2)), 19) for _ in range(600)]
    p.write_text("".join(f"{i * 1000} 0 {k * 64} {8 if k % 2 == 0 else 32} 1\n" for i, k in enumerate(keys)))
    (r,) = run_json(capsys, "--trace", str(p), "--unit", "object", "--size", "20KiB")["runs"]
    m = r["metrics"]
    assert m["capacity"] == 20 * 1024
    assert 0 < m["byte_miss_ratio"] < 1 and m["byte_miss_ratio"] != m["miss_ratio"]
    assert m["miss_bytes"] <= m["lookup_bytes"]
    assert main(["run", "--trace", str(p), "--unit", "object", "--size", "20KiB"]) == 0
    out = capsys.readouterr().out
    assert_fits(out)
    assert "byte miss ratio" in out
    (r,) = run_json(capsys, "--trace", str(p), "--size", "20KiB")["runs"]
    assert "byte_miss_ratio" not in r["metrics"]  # block mode: blocks are all one size


def test_progress_reports_the_footprint_prepass() -> None:
    seen: list[int] = []

    def progress(done: int, total: int, requests: int, prepass: int) -> None:
        seen.append(prepass)

    progress.prepass = True  # type: ignore[attr-defined]
    cfg = {
        "workload": {"synthetic": {"kind": "zipf", "keys": 20000, "requests": 300_000, "seed": 1}},
        "cache": {"policy": "lru", "capacity_fraction": 0.1},
    }
    raidlab.run(cfg, progress=progress, threads=1)
    assert max(seen) >= 65536  # the pre-pass said how far it had read
    old: list[int] = []
    raidlab.run(cfg, progress=lambda d, t, r: old.append(r), threads=1)  # three arguments still work
    assert old


def test_short_names_drop_keys_that_follow_from_others() -> None:
    names = [
        f"tags.workload={w} workload.synthetic.kind={k} workload.synthetic.requests={n} array.disks={d}"
        for w, k, n in (("web (synthetic)", "websearch", 1000), ("zipf 0.9", "zipf", 5000))
        for d in (5, 8)
    ]
    short, _ = fit.short_names(names)
    assert short == ["workload=web (synthetic) disks=5", "workload=web (synthetic) disks=8", "workload=zipf 0.9 disks=5", "workload=zipf 0.9 disks=8"]


def test_reliability_table_fits_80_columns(capsys) -> None:
    assert main(["reliability"]) == 0
    out = capsys.readouterr().out
    assert_fits(out)
    assert "1.25e+04" in out and "1,792.00" in out


def test_results_of_a_store_with_only_failures_says_where_they_are(tmp_path, capsys) -> None:
    text = '[workload]\ntrace = "absent.trace"\n[cache]\npolicy = "lru"\ncapacity_blocks = 2000\n'
    path = write(tmp_path, text)
    store = tmp_path / "store"
    assert main(["sweep", str(path), "--out", str(store), "--workers", "1"]) == 1
    capsys.readouterr()
    assert main(["results", str(store)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "no rows" in out and "FROM errors" in out


def test_a_csv_read_as_keys_is_refused(tmp_path, capsys) -> None:
    csv = tmp_path / "trace.csv"
    csv.write_text("".join(f"128166372{i:05d},hm,0,Read,{i * 4096},4096,100\n" for i in range(400)))
    assert main(["trace", "stats", str(csv), "--format", "keys-u32le"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "trace.csv: record 1: not a u32 key stream" in err


def test_sweep_takes_set_too(tmp_path, capsys) -> None:
    from raidlab.store import query

    path = write(tmp_path, SWEEP)
    store = tmp_path / "store"
    assert main(["sweep", str(path), "--out", str(store), "--workers", "1", "--set", "array.disks=6"]) == 0
    frame = query(store, 'SELECT DISTINCT "array.disks" AS d FROM runs')
    assert list(frame["d"]) == [6]


def test_serve_cache_sizes_take_units(capsys) -> None:
    from raidlab.cli import parser

    args = parser().parse_args(["serve", "d", "--cache-mib", "1GiB", "--write-cache-mib", "256MiB"])
    assert (args.cache_mib, args.write_cache_mib) == (1024, 256)
    assert parser().parse_args(["serve", "d", "--cache-mib", "64"]).cache_mib == 64
    for bad in ("1.5MiB", "512KiB", "0", "lots"):
        with pytest.raises(SystemExit) as e:
            parser().parse_args(["serve", "d", "--cache-mib", bad])
        assert e.value.code == 2
        assert "--cache-mib" in capsys.readouterr().err


def test_grid_run_names_become_values_under_group_headings() -> None:
    from raidlab import fit

    names = [f"workload=websearch (UMass sample) disks={d} capacity_fraction={c} policy={p}" for d in (5, 6) for c in (0.0078125, 0.25) for p in ("lru", "vdf-lru", "lfu")]
    # Room for every value: one group, the keys named once in the header.
    [(heading, rows, header, labels)] = fit.grid_groups(names, 80)
    assert (heading, rows, header) == ("", list(range(12)), "workload / disks / capacity_fraction / policy")
    assert labels[1] == "websearch (UMass sample) / 5 / 0.0078125 / vdf-lru"
    # Too narrow: the leading key moves to a heading per group, as long as groups keep six rows.
    groups = fit.grid_groups(names, 20)
    assert [(h, r[:2], hd) for h, r, hd, _ in groups] == [
        ("workload=websearch (UMass sample) disks=5", [0, 1], "capacity_fraction / policy"),
        ("workload=websearch (UMass sample) disks=6", [6, 7], "capacity_fraction / policy"),
    ]
    assert groups[1][3][:2] == ["0.0078125 / lru", "0.0078125 / vdf-lru"]
    # Names that are not a grid stay as they are.
    assert fit.grid_groups(["a=1 b=2", "a=2"], 5) == [("", [0, 1], "run", ["a=1 b=2", "a=2"])]
