"""``--history`` on bench, update-baselines and ab, and ``bench --against history``, on the CPU:
pytest is replaced by a fake that writes results files (as in test_bench_cli), the A/B
measurement by a fake that writes its samples file. The tests taking ``history_db`` run on a
SQLite store, then on a PostgreSQL one (conftest.py)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from perfgate.__main__ import main
from perfgate.atomic import write_json
from perfgate.commands import ab, base, bench
from perfgate.gate import baseline as bl
from perfgate.gate import paths
from perfgate.history import config, store
from perfgate.history.records import AB_MODE
from tests.perfgate.pgserver import sql

NAMES = [
    "tests/perf/test_leaderboard.py::test_leaderboard[m4-n2880-k512]",
    "tests/perf/test_reducer.py::test_reducer[s8-m16-n2112]",
]
CFG = config.load()


@pytest.fixture
def gpu(monkeypatch, tmp_path, make_result, gpu_like):
    """A GPU machine whose pytest writes results: samples x ``state["factor"]``, fingerprint
    fields from ``state["fingerprint"]``, ``commit_info`` from ``state["commit_info"]``."""
    state = {"factor": 1.0, "runs": 0, "fingerprint": {}, "commit_info": {}, "commands": []}
    monkeypatch.setattr(base, "gpu_available", lambda: True)

    def fake_run(cmd, cwd=None, env=None, check=False):
        state["commands"].append(cmd)
        state["runs"] += 1
        path = Path(next(a for a in cmd if a.startswith("--benchmark-json=")).split("=", 1)[1])
        mode = next(a for a in cmd if a.startswith("--perfgate-mode=")).split("=", 1)[1]
        rounds = [int(a.split("=")[1]) for a in cmd if a.startswith("--perfgate-rounds=")]
        seed = 100 * state["runs"]
        data = make_result(
            {
                n: gpu_like(seed + i, (rounds or [40])[0], factor=state["factor"])
                for i, n in enumerate(NAMES)
            },
            mode=mode,
            **state["fingerprint"],
        )
        data["commit_info"].update(state["commit_info"])
        write_json(path, data)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(bench.spawn, "run", fake_run)
    state["dirs"] = ["--results-dir", str(tmp_path / "r"), "--baselines-dir", str(tmp_path / "pb")]
    state["db"] = tmp_path / "h.sqlite"
    state["tmp"] = tmp_path
    return state


def _runs(db) -> list[tuple]:
    return [
        tuple(r) for r in sql(db, "SELECT mode, branch, git_commit, source FROM runs ORDER BY id")
    ]


def _rows(db: Path):
    with store.open_store(db, write=False) as s:
        return s.rows(), {
            (r.run_id, r.benchmark): s.samples(r.run_id, r.benchmark) for r in s.rows()
        }


# -- bench --history -----------------------------------------------------------------------------
def test_bench_history_appends_each_run_with_its_samples(gpu, history_db, capsys):
    gpu["db"] = history_db
    argv = ["bench", "--allow-missing-baseline", "--history", "--db", str(gpu["db"]), *gpu["dirs"]]
    assert main(argv) == 0
    assert main(argv) == 0
    kept = bl.load(gpu["tmp"] / "r" / "device.json")
    out = capsys.readouterr().out
    assert out.count("--history: appended") == 2
    runs = _runs(gpu["db"])
    assert [r[:3] for r in runs] == [("device", "main", "0123abc")] * 2
    rows, samples = _rows(gpu["db"])
    assert len(rows) == 2 * len(NAMES)
    first = min(r.run_id for r in rows)
    for name, values in bl.samples(kept).items():  # the second file, kept bit for bit
        (row,) = [r for r in rows if r.benchmark == name and r.run_id != first]
        assert samples[(row.run_id, name)] == tuple(values)


def _verdicts(db) -> list:
    return [r[0] for r in sql(db, "SELECT verdict FROM runs ORDER BY id")]


def test_bench_history_keeps_the_gates_verdict(gpu, history_db, capsys):
    gpu["db"] = history_db
    argv = ["bench", "--history", "--db", str(gpu["db"]), *gpu["dirs"]]
    assert main([*argv, "--allow-missing-baseline"]) == 0  # nothing to judge against: no verdict
    assert main(["update-baselines", *gpu["dirs"]]) == 0
    assert main(argv) == 0
    gpu["factor"] = 1.3
    assert main(argv) == 1
    assert _verdicts(gpu["db"]) == [None, "pass", "fail"]
    out = capsys.readouterr().out
    assert out.count(", verdict pass) in") == 1 and out.count(", verdict fail) in") == 1


def _results_with_report(gpu, factor: float) -> tuple[Path, Path]:
    """A bench run (judged against a stored baseline) moved to its own directory, as the
    history job finds it in the artifact."""
    gpu["factor"] = factor
    main(["bench", *gpu["dirs"]])
    where = gpu["tmp"] / f"artifact-{factor}"
    where.mkdir()
    for name in ("device.json", "device.compare.json"):
        (gpu["tmp"] / "r" / name).rename(where / name)
    return where / "device.json", where / "device.compare.json"


def test_history_add_verdicts_reads_the_report_beside_each_run(gpu, history_db, capsys):
    gpu["db"] = history_db
    assert main(["update-baselines", *gpu["dirs"]]) == 0
    good, _ = _results_with_report(gpu, 1.0)
    bad, _ = _results_with_report(gpu, 1.3)
    capsys.readouterr()
    add = ["history", "add", "--db", str(gpu["db"]), "--branch", "main", "--verdicts"]
    assert main([*add, str(good), str(bad)]) == 0
    assert _verdicts(gpu["db"]) == ["pass", "fail"]
    assert ", verdict pass)" in capsys.readouterr().out
    with store.open_store(gpu["db"], write=False) as s:
        assert {r.verdict for r in s.rows() if r.source == str(good)} == {"pass"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (None, "no comparison report"),
        (
            lambda r: r["summary"].update(current="elsewhere/host.json"),
            "it compared elsewhere/host.json",
        ),
        (lambda r: r["summary"].update(mode="host"), "it is of nvidia-h200 in host mode"),
        (lambda r: r["benchmarks"].pop(), "it judged other benchmarks than the run holds"),
        (lambda r: r["summary"].update(exit_code=2), "exit_code 2 is no verdict"),
        (lambda r: r.pop("summary"), "not a perfgate comparison report"),
    ],
)
def test_history_add_verdicts_refuses_a_report_of_another_run(gpu, capsys, change, message):
    assert main(["update-baselines", *gpu["dirs"]]) == 0
    results, report = _results_with_report(gpu, 1.0)
    if change is None:
        report.unlink()
    else:
        data = json.loads(report.read_text())
        change(data)
        report.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["history", "add", "--db", str(gpu["db"]), "--verdicts", str(results)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--verdicts: " in err and message in err
    assert not gpu["db"].exists() or _verdicts(gpu["db"]) == []


def test_a_dirty_run_is_not_appended_and_keeps_its_exit_code(gpu, capsys):
    gpu["fingerprint"] = {"git_dirty": True}
    assert main(["update-baselines", *gpu["dirs"]]) == 0
    capsys.readouterr()
    gpu["factor"] = 1.3
    argv = ["bench", "--history", "--db", str(gpu["db"]), *gpu["dirs"]]
    assert main(argv) == 1  # the regression, as without --history
    err = capsys.readouterr().err.splitlines()
    warned = [line for line in err if "--history" in line]
    assert warned == [
        f"perfgate bench: WARNING: --history: not appended: {gpu['tmp'] / 'r' / 'device.json'}: "
        "recorded with uncommitted changes (fingerprint.git_dirty); its times belong to no commit"
    ]
    assert not gpu["db"].exists()  # nothing created either
    gpu["factor"] = 1.0
    assert main(argv) == 0


def test_a_run_without_a_commit_is_not_appended(gpu, capsys):
    gpu["fingerprint"] = {"git_commit": None}
    argv = ["bench", "--allow-missing-baseline", "--history", "--db", str(gpu["db"]), *gpu["dirs"]]
    assert main(argv) == 0
    assert "WARNING: --history: not appended" in capsys.readouterr().err
    assert not gpu["db"].exists()


def test_history_branch_names_the_branch(gpu):
    gpu["commit_info"] = {"branch": "HEAD"}  # a detached CI checkout
    argv = ["bench", "--allow-missing-baseline", "--history", "--db", str(gpu["db"]), *gpu["dirs"]]
    assert main(argv) == 0
    assert main([*argv, "--history-branch", "main"]) == 0
    assert [r[1] for r in _runs(gpu["db"])] == [None, "main"]


def test_update_baselines_history_appends_the_pooled_baseline(gpu, history_db, capsys):
    gpu["db"] = history_db
    argv = ["update-baselines", "--runs", "3", "--history", "--db", str(gpu["db"]), *gpu["dirs"]]
    assert main(argv) == 0
    (run,) = _runs(gpu["db"])
    assert run[0] == "device" and run[3] == str(gpu["tmp"] / "r" / "device.pooled.json")
    baseline = bl.load(gpu["tmp"] / "pb" / "nvidia-h200" / "device.json")
    rows, samples = _rows(gpu["db"])
    for r in rows:
        assert samples[(r.run_id, r.benchmark)] == tuple(bl.samples(baseline)[r.benchmark])
        assert r.rounds == 3 * 40  # the fake's rounds, three runs
    # the committed baseline file is the same run: adding it again adds nothing
    assert main(["history", "add", "--db", str(gpu["db"]), str(gpu["tmp"] / "pb" / "nvidia-h200" / "device.json")]) == 0  # fmt: skip
    assert "0 runs added, 1 already kept" in capsys.readouterr().out


def test_a_run_that_did_not_complete_appends_nothing(gpu, monkeypatch):
    def failing(cmd, cwd=None, env=None, check=False):
        return subprocess.CompletedProcess(cmd, 1)  # a benchmark failed

    monkeypatch.setattr(bench.spawn, "run", failing)
    argv = ["bench", "--allow-missing-baseline", "--history", "--db", str(gpu["db"]), *gpu["dirs"]]
    assert main(argv) == 1
    assert not gpu["db"].exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--db", "x.sqlite"], "--db x.sqlite: names the store of --history or --against history"),
        (["--history-branch", "main"], "--history-branch main: needs --history"),
        (["--history", "--history-branch", " "], "--history-branch: expected a branch name"),
        (["--history", "--db", "{tmp}"], "is a directory, expected a history database file"),
        (["--history", "--db", "{tmp}/file/h.sqlite"], "cannot create a history there"),
        (["--history", "--db", "{tmp}/r/h.sqlite"], "inside --results-dir"),
        (["--history", "--db", "{tmp}/newer.sqlite"], "newer than this perfgate's"),
        (["--history", "--db", "{tmp}/foreign.sqlite"], "not a perfgate history"),
        (["--against", "history", "--db", "{tmp}/older.sqlite"], "older than this perfgate's"),
        (["--history", "--db", "mysql://ci/h"], "mysql:// is no kind of store"),
    ],
)
def test_unusable_history_options_are_refused_before_anything_runs(gpu, capsys, extra, message):
    tmp = gpu["tmp"]
    (tmp / "file").write_text("")
    for name, version in (("newer", store.SCHEMA_VERSION + 1), ("older", 0)):
        with sqlite3.connect(tmp / f"{name}.sqlite") as c:
            c.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            c.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(version),))
    with sqlite3.connect(tmp / "foreign.sqlite") as c:
        c.execute("CREATE TABLE t (x)")
    before = {p: p.read_bytes() for p in tmp.glob("*.sqlite")}
    argv = ["bench", *(a.replace("{tmp}", str(tmp)) for a in extra), *gpu["dirs"]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("perfgate bench: error: ") and message in err
    assert gpu["commands"] == []  # nothing measured
    assert {p: p.read_bytes() for p in tmp.glob("*.sqlite")} == before  # nothing changed


def test_a_store_failing_during_the_append_is_exit_2(gpu, capsys, monkeypatch):
    def broken(*a, **k):
        raise store.StoreError("h.sqlite: disk I/O error")

    argv = ["bench", "--allow-missing-baseline", "--history", "--db", str(gpu["db"]), *gpu["dirs"]]
    monkeypatch.setattr(store, "open_store", broken)
    assert main(argv) == 2
    assert "perfgate bench: error: --history: h.sqlite: disk I/O error" in capsys.readouterr().err


# -- bench --against history ---------------------------------------------------------------------
def _append(gpu, n: int, *extra: str) -> None:
    for _ in range(n):
        argv = ["bench", "--allow-missing-baseline", "--history", "--db", str(gpu["db"])]
        assert main([*argv, *extra, *gpu["dirs"]]) == 0


def test_against_history_pools_the_last_runs_of_main(gpu, history_db, capsys, monkeypatch):
    gpu["db"] = history_db
    # the history's threshold rule set apart from the stored gate's (both 0.025 and 3.0 in
    # pyproject), so that the report shows which table was read
    import dataclasses

    from perfgate.gate import settings
    from perfgate.history import config

    history_cfg = dataclasses.replace(CFG, gate_min_effect=0.041, gate_drift_factor=4.5)
    monkeypatch.setattr(config, "load", lambda path=None: history_cfg)
    stored = settings.load().stats
    assert (stored.min_effect_drift, stored.drift_factor) != (0.041, 4.5)
    _append(gpu, CFG.min_runs)
    capsys.readouterr()
    against = ["bench", "--against", "history", "--db", str(gpu["db"]), *gpu["dirs"]]
    assert main(against) == 0  # no stored baseline at all: the history is the baseline
    out = capsys.readouterr().out
    pooled = gpu["tmp"] / "r" / "device.history-baseline.json"
    assert f"pooled from the last {CFG.min_runs} runs of main on nvidia-h200" in out
    report = json.loads((gpu["tmp"] / "r" / "device.compare.json").read_text())
    assert report["summary"]["baseline"] == str(pooled)
    assert {b["verdict"] for b in report["benchmarks"]} == {"unchanged"}
    assert report["summary"]["settings"]["min_effect_drift"] == 0.041
    assert report["summary"]["settings"]["drift_factor"] == 4.5
    data = bl.load(pooled)
    assert all(b["extra_info"][bl.RUNS_KEY]["runs"] == CFG.min_runs for b in data["benchmarks"])
    gpu["factor"] = 1.2
    assert main(against) == 1  # a regression against the history, exit as bench
    assert main([*against, "--drift-factor", "7"]) == 1
    report = json.loads((gpu["tmp"] / "r" / "device.compare.json").read_text())
    assert report["summary"]["settings"]["drift_factor"] == 7  # the command line wins


def test_against_history_too_short_falls_back_to_the_stored_baseline(gpu, history_db, capsys):
    gpu["db"] = history_db
    assert main(["update-baselines", *gpu["dirs"]]) == 0
    _append(gpu, CFG.min_runs - 1)
    capsys.readouterr()
    assert main(["bench", "--against", "history", "--db", str(gpu["db"]), *gpu["dirs"]]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "--against" in line]
    assert len(err) == 1 and "WARNING: --against history: the history holds" in err[0]
    assert f"fewer than min_runs = {CFG.min_runs}" in err[0]
    assert err[0].endswith(f"judged against the stored baseline {gpu['tmp'] / 'pb' / 'nvidia-h200' / 'device.json'}")  # fmt: skip
    report = json.loads((gpu["tmp"] / "r" / "device.compare.json").read_text())
    assert report["summary"]["baseline"].endswith("pb/nvidia-h200/device.json")
    gpu["factor"] = 1.2
    assert main(["bench", "--against", "history", "--db", str(gpu["db"]), *gpu["dirs"]]) == 1


def test_against_history_without_a_store_or_a_baseline_is_the_missing_baseline(gpu, capsys):
    assert main(["bench", "--against", "history", "--db", str(gpu["db"]), *gpu["dirs"]]) == 2
    err = capsys.readouterr().err
    assert f"WARNING: --against history: no history at {gpu['db']}" in err
    assert "no device baseline for device 'nvidia-h200'" in err
    assert not gpu["db"].exists()


def test_against_history_judges_alike_on_both_stores(gpu, pg_url, capsys):
    """main's runs in a SQLite store and, copied by history migrate, on the server: bench
    --against history pools the same baseline from each and writes the same reports, for a run
    like them (exit 0) and for a 20% slower one (exit 1)."""
    _append(gpu, CFG.baseline_runs)
    assert main(["history", "migrate", "--from", str(gpu["db"]), "--to", pg_url]) == 0
    results = gpu["tmp"] / "r"
    names = ("device.history-baseline.json", "device.compare.json", "device.md", "device.json")
    answers = {}
    for factor in (1.0, 1.2):
        for db in (gpu["db"], pg_url):
            gpu["runs"], gpu["factor"] = 50, factor  # the same fake samples each time
            capsys.readouterr()
            rc = main(["bench", "--against", "history", "--db", str(db), *gpu["dirs"]])
            out = capsys.readouterr().out.replace(store.display(db), "STORE")
            assert f"pooled from the last {CFG.baseline_runs} runs of main" in out
            files = [(results / name).read_bytes() for name in names]
            answers[(factor, store.is_server(db))] = (rc, out, files)
        assert answers[(factor, False)] == answers[(factor, True)]
    assert [answers[(f, True)][0] for f in (1.0, 1.2)] == [0, 1]
    report = json.loads(answers[(1.2, True)][2][1])
    assert {b["verdict"] for b in report["benchmarks"]} == {"regression"}


@pytest.mark.parametrize(
    ("appended", "judged"),
    [
        ({"branch": "feature"}, {}),  # another branch's runs are not main's history
        ({"fingerprint": {"torch": "2.10.0"}}, {}),  # another fingerprint segment
        ({"fingerprint": {"driver": "999.0"}}, {}),
    ],
)
def test_against_history_takes_only_main_in_this_segment(gpu, capsys, appended, judged):
    gpu["commit_info"] = {"branch": appended.get("branch", "main")}
    gpu["fingerprint"] = appended.get("fingerprint", {})
    _append(gpu, CFG.baseline_runs)
    gpu["commit_info"], gpu["fingerprint"] = {"branch": "main"}, {}
    assert main(["update-baselines", *gpu["dirs"]]) == 0
    capsys.readouterr()
    assert main(["bench", "--against", "history", "--db", str(gpu["db"]), *gpu["dirs"]]) == 0
    assert "judged against the stored baseline" in capsys.readouterr().err


def test_against_baseline_is_the_default_and_writes_the_same_reports(gpu, capsys):
    assert main(["update-baselines", *gpu["dirs"]]) == 0
    outputs = {}
    for extra in ([], ["--against", "baseline"]):
        gpu["runs"] = 10  # the same fake samples both times
        capsys.readouterr()
        assert main(["bench", *extra, *gpu["dirs"]]) == 0
        files = ("device.compare.json", "device.md", "device.json")
        outputs[tuple(extra)] = (
            capsys.readouterr(),
            [(gpu["tmp"] / "r" / f).read_bytes() for f in files],
        )
    assert outputs[()] == outputs[("--against", "baseline")]
    assert not (gpu["tmp"] / "r" / "device.history-baseline.json").exists()


# -- ab --history --------------------------------------------------------------------------------
@pytest.fixture
def repo(tmp_path, monkeypatch):
    import shutil

    if shutil.which("git") is None:
        pytest.skip("needs git on PATH (ab resolves its revisions with git)")
    root = tmp_path / "checkout"
    root.mkdir()
    env = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    for i in range(2):
        (root / "f").write_text(str(i))
        subprocess.run(["git", "add", "f"], cwd=root, check=True)
        date = f"2026-11-0{i + 1}T10:00:00+00:00"
        subprocess.run(
            ["git", *env, "commit", "-q", "-m", str(i)],
            cwd=root,
            check=True,
            env={"GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date, "PATH": "/usr/bin:/bin"},
        )
    monkeypatch.setattr(paths, "REPO", root)
    return root


def _rev(root: Path, rev: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", rev], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def fake_ab(monkeypatch, tmp_path):
    """ab with its measurement replaced: writes ab.samples.json as ab.report does."""
    state = {
        "fingerprint": {"device_key": "nvidia-h200", "git_commit": "c" * 40, "git_dirty": False}
    }
    monkeypatch.setattr(base, "gpu_available", lambda: True)

    def measure(args, gate):
        head = _rev(paths.REPO, args.head) if args.head else None
        write_json(
            ab.outputs(args)["samples"],
            {
                "base": _rev(paths.REPO, args.base),
                "head": head,
                "fingerprint": state["fingerprint"],
                "base_samples": {NAMES[0]: [1e-5, 1.1e-5, 1.2e-5]},
                "head_samples": {NAMES[0]: [2e-5, 2.1e-5, 2.3e-5]},
                "prepare": {},
            },
        )
        return 1  # the head is slower

    monkeypatch.setattr(ab, "_measure", measure)
    state["results"] = tmp_path / "abr"
    state["db"] = tmp_path / "h.sqlite"
    return state


def test_ab_history_keeps_the_head_side_as_mode_ab(repo, fake_ab, capsys):
    argv = ["ab", "--base", "HEAD~1", "--head", "HEAD", "--results-dir", str(fake_ab["results"])]
    assert main([*argv, "--history", "--db", str(fake_ab["db"]), "--history-branch", "pr"]) == 1
    assert "--history: appended" in capsys.readouterr().out
    rows, samples = _rows(fake_ab["db"])
    (row,) = rows
    assert (row.mode, row.branch, row.commit) == (AB_MODE, "pr", _rev(repo, "HEAD"))
    assert row.commit_time == "2026-11-02T10:00:00+00:00"  # the head commit's date
    assert row.group == "leaderboard"
    assert samples[(row.run_id, NAMES[0])] == (2e-5, 2.1e-5, 2.3e-5)  # the head's, not the base's
    # history add of the same file is the same run
    assert main(["history", "add", "--db", str(fake_ab["db"]), str(fake_ab["results"] / "ab.samples.json")]) == 0  # fmt: skip
    assert "0 runs added, 1 already kept" in capsys.readouterr().out


def test_ab_history_of_a_working_tree_head(repo, fake_ab):
    argv = ["ab", "--base", "HEAD~1", "--results-dir", str(fake_ab["results"])]
    assert main([*argv, "--history", "--db", str(fake_ab["db"])]) == 1
    (row,), _ = _rows(fake_ab["db"])
    assert row.commit == "c" * 40 and row.commit_time is None  # not a commit of this checkout


def test_ab_history_of_a_dirty_checkout_is_not_appended(repo, fake_ab, capsys):
    fake_ab["fingerprint"]["git_dirty"] = True
    argv = ["ab", "--base", "HEAD~1", "--results-dir", str(fake_ab["results"])]
    assert main([*argv, "--history", "--db", str(fake_ab["db"])]) == 1  # the A/B's own code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "perfgate ab: WARNING: --history: not appended" in err
    assert "uncommitted changes" in err
    assert not fake_ab["db"].exists()
    assert main(["history", "add", "--db", str(fake_ab["db"]), str(fake_ab["results"] / "ab.samples.json")]) == 2  # fmt: skip


def test_ab_refuses_its_store_as_an_output(repo, fake_ab, capsys):
    out = str(fake_ab["results"].parent / "ab.json")
    argv = ["ab", "--base", "HEAD", "--json", out, "--history", "--db", out]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("perfgate ab: error: --db ") and "is also an output" in err


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"head_samples": {}}, "head_samples must be a non-empty object"),
        ({"head_samples": {"x": [1.0, float("nan")]}}, "must be a non-empty list of finite"),
        ({"head_samples": {"x": [0.0]}}, "must be a non-empty list of finite times > 0"),
        ({"fingerprint": []}, "fingerprint must be an object"),
        ({"fingerprint": {"git_commit": "c" * 40}}, "fingerprint.device_key must be"),
        ({"head": None, "fingerprint": {"device_key": "d"}}, "the head side names no commit"),
    ],
)
def test_a_malformed_ab_samples_file_is_refused_in_one_line(tmp_path, capsys, change, message):
    doc = {
        "base": "b" * 40,
        "head": "a" * 40,
        "fingerprint": {"device_key": "nvidia-h200", "git_commit": "c" * 40},
        "base_samples": {},
        "head_samples": {NAMES[0]: [1e-5]},
    }
    doc.update(change)
    path = tmp_path / "ab.samples.json"
    path.write_text(json.dumps(doc))  # json.dumps writes NaN: a file no perfgate writer makes
    assert main(["history", "add", "--db", str(tmp_path / "h.sqlite"), str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and str(path) in err
