"""``python -m lab experiment``'s analysis on synthetic verdicts (the GPU part is the workers'): the
process-level judgements, the rates with their intervals, re-analysis, and the refusals."""

from __future__ import annotations

import json
import typing

import numpy as np
import pytest

from lab import process_experiment as pe
from lab.__main__ import main
from perfgate.gate import process_ab as pa

# -- the process-level design (lab.process_experiment) -------------------------------------


def verdict_trials(verdicts, offset_sd, level=0.0, cases=("x", "y"), design=None, seed=0,
                   levels=(), rounds=40):  # fmt: skip
    """Recorded verdicts of the shipped looks: every process off by N(0, offset_sd) for its life
    (common to its cases), 0.5% round noise; B's injected streams slower by their level."""
    design = design or pa.Design(processes=(3, 6, 12, 24), rounds=rounds)
    rng = np.random.default_rng(seed)
    out = []
    n = design.processes[-1]
    for v in range(verdicts):
        a_lv = 1 + offset_sd * rng.standard_normal(n)
        b_lv = 1 + offset_sd * rng.standard_normal(n)
        looks = [k + 1 for k, p in enumerate(design.processes)
                 for _ in range(p - (design.processes[k - 1] if k else 0))]  # fmt: skip
        for case in cases:

            def procs(levels_, factor):
                return [list(1e-5 * lv * factor * (1 + 0.005 * rng.standard_normal(rounds)))
                        for lv in levels_]  # fmt: skip

            t = pe.VerdictTrial(v, case, procs(a_lv, 1.0), {"plain": procs(b_lv, 1 + level)}, looks)
            for lv in levels:
                t.b[f"{lv:g}"] = procs(b_lv, 1 + lv)
            out.append(t)
    return out, design


def test_process_design_null_with_offsets_of_1pct_raises_no_false_alarm_beyond_1pct():
    # 200 verdicts x 2 benchmarks = 400 judgements of two processes' groups of the same code,
    # every process off by N(0, 1%): at most 1% flagged (4/400)
    trials, design = verdict_trials(200, 0.01, seed=24)
    records = pe.judgements(trials, design, (), "factor")
    flagged = sum(j["verdict"] in ("regression", "improvement") for j in records)
    assert len(records) == 400 and flagged <= 4, flagged
    assert all(j["processes"] in design.processes for j in records)
    # the summary's per-benchmark table reads the planted 1% spread back
    spread = pe.spreads(trials, design.trim)["x"]
    assert spread["process_sd"] == pytest.approx(0.01, rel=0.05)
    assert spread["round_noise"] == pytest.approx(0.005, rel=0.1)
    assert spread["rounds_share"] == pytest.approx(0.005 / 40**0.5, rel=0.1)


def test_process_design_catches_a_true_1pct_with_factor_and_with_measured_streams():
    # 100 verdicts x 2 benchmarks at the H200's measured spread (0.05-0.4%; here 0.2%): a true
    # 1% flagged in >= 95%, both as an exact factor of B's plain rounds and as B's own streams
    trials, design = verdict_trials(100, 0.002, seed=5, levels=(0.01,))
    for injection in ("factor", "sleep"):
        records = [j for j in pe.judgements(trials, design, (0.01,), injection)
                   if j["variant"] == "0.01"]  # fmt: skip
        hits = sum(j["verdict"] == "regression" for j in records)
        assert len(records) == 200 and hits >= 190, (injection, hits)
        sizes = [j["true_size"] for j in records]
        if injection == "factor":
            assert sizes == pytest.approx([0.01] * 200, abs=1e-12)  # exact by construction
        else:
            assert np.median(sizes) == pytest.approx(0.01, abs=0.002)


def test_each_level_is_judged_on_the_looks_it_would_have_seen_alone():
    # look 1 decides a 5% slowdown; the null needs more: the 5% row must not use later looks
    trials, design = verdict_trials(1, 0.003, cases=("x",), seed=3, levels=(0.05,))
    (t,) = trials
    res, look = pe.judge_trial(t, "0.05", design, "sleep")
    assert (res.verdict, look, res.n_base) == ("regression", 1, 3)
    expected = pa.judge(t.a[:3], t.b["0.05"][:3], design, look=1)
    assert (res.ci_low, res.ci_high) == (expected.ci_low, expected.ci_high)
    # a recording that ends before the design's last look stays inconclusive, never invented
    short = pe.VerdictTrial(0, "x", t.a[:3], {"plain": t.b["plain"][:3]}, [1, 1, 1])
    wide = pa.Design(min_effect=0.0001, floor=0.0, processes=(3, 6), rounds=40)
    res, look = pe.judge_trial(short, "plain", wide, "factor")
    assert (res.verdict, look) == ("inconclusive", 1)


class ExperimentWorker:
    """A fake worker of the process design: per-process offset, injected levels as slowdowns,
    a calibration in its prepare answer unless cycles are given (as the real worker)."""

    log: typing.ClassVar[list] = []
    envs: typing.ClassVar[dict] = {}

    def __init__(self, label, root, env=None, *, mode="device"):
        self.label, self.mode = label, mode
        self.rng = np.random.default_rng(len(ExperimentWorker.log))  # a fresh seed per worker
        self.level = 1 + 0.0005 * self.rng.standard_normal()
        ExperimentWorker.envs[label] = dict(env or {})
        ExperimentWorker.log.append(("start", label, mode))

    def ask(self, req):
        if req["op"] == "prepare":
            (case,) = (c["name"] for c in req["cases"])
            ExperimentWorker.log.append(("prepare", self.label, case, req.get("cycles")))
            info = {}
            for lv in req["levels"]:
                v = f"{lv:g}"
                if v in (req.get("cycles") or {}):
                    info[v] = {"cycles": req["cycles"][v], "reused": True}
                else:
                    info[v] = {"cycles": 100, "calibration": {"level": lv, "achieved": lv,
                               "converged": True, "floor_limited": False, "steps": [[100, lv]]}}  # fmt: skip
            return {"ok": True, "cases": {case: info}}
        slow = 1.0 if req["variant"] == "plain" else 1 + float(req["variant"])
        noise = 1 + 0.004 * self.rng.standard_normal(req["rounds"])
        return {"ok": True, "samples": list(1e-5 * self.level * slow * noise)}

    def close(self):
        ExperimentWorker.log.append(("close", self.label))


def _measure_processes(monkeypatch, tmp_path, *argv):
    from perfgate.commands import base
    from perfgate.measure import fingerprint, interleave

    ExperimentWorker.log = []
    monkeypatch.setattr(interleave, "SideProcess", ExperimentWorker)
    monkeypatch.setattr(base, "gpu_available", lambda: True)
    monkeypatch.setattr(fingerprint, "collect",
                        lambda: {"gpu_name": "G", "device_key": "k", "torch": "t", "triton": "r"})  # fmt: skip
    return main(["experiment", "--groups", "leaderboard", "-k", "m16-n2112-k7168", "--out",
                 str(tmp_path), "--ab-device-rounds", "20", "--measure-only", *argv])  # fmt: skip


def test_a_process_experiment_starts_fresh_workers_for_every_verdict(monkeypatch, tmp_path):
    assert _measure_processes(monkeypatch, tmp_path, "--runs", "2", "--inject", "0.03") == 0
    log = ExperimentWorker.log
    starts = [label for what, label, *_ in log if what == "start"]
    # a verdict decided at its first look: 3 + 3 fresh workers (and the next look's 3 + 3
    # started ahead, closed unused), then fresh ones again for the next verdict
    one = ["A1", "A2", "A3", "B1", "B2", "B3", "A4", "A5", "A6", "B4", "B5", "B6"]
    assert starts == one * 2
    prepares = [(label, cycles) for what, label, *rest in log if what == "prepare"
                for _, cycles in [rest]]  # fmt: skip
    assert [p[0] for p in prepares[:6]] == ["A1", "B1", "A2", "B2", "A3", "B3"]  # alternated
    b_cycles = [cycles for label, cycles in prepares if label.startswith("B")]
    # the B workers take their injected variants from the lab (perfgate.variants); A times
    # the kernels alone
    assert {ExperimentWorker.envs[x].get("PERFGATE_VARIANTS") for x in one} == {
        None,
        "lab.variants",
    }
    assert all(ExperimentWorker.envs[x]["PERFGATE_VARIANTS"] == "lab.variants" for x in one[3:6])
    assert all("PERFGATE_VARIANTS" not in ExperimentWorker.envs[x] for x in one[:3])
    assert b_cycles[0] is None  # the first B worker calibrates ...
    assert all(c == {"0.03": 100} for c in b_cycles[1:])  # ... every later one reuses it
    # every worker of a verdict is closed before the next verdict starts one
    second = [i for i, e in enumerate(log) if e[0] == "start"][len(one)]
    assert sorted(e[1] for e in log[:second] if e[0] == "close") == sorted(one)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["verdicts"] == 2 and len(meta["verdict_seconds"]) == 2
    assert meta["design"]["processes"] == [3, 6, 12, 24] and meta["design"]["injection"] == "sleep"
    assert list(meta["calibration"]) == [
        "v0|tests/perf/test_leaderboard.py::test_leaderboard[m16-n2112-k7168]"
    ]
    trials, _ = pe.load([tmp_path / "samples.npz"])
    assert [(t.verdict, len(t.a), sorted(t.b)) for t in trials] == [(0, 3, ["0.03", "plain"]),
                                                                     (1, 3, ["0.03", "plain"])]  # fmt: skip


def test_the_leaderboard_mode_and_factor_injection_reach_the_workers(monkeypatch, tmp_path):
    argv = (
        "--runs",
        "2",
        "--mode",
        "leaderboard",
        "--injection",
        "factor",
        "--ab-leaderboard-rounds",
        "20",
    )
    assert _measure_processes(monkeypatch, tmp_path, *argv) == 2  # --ab-device-rounds: wrong mode?
    ExperimentWorker.log = []
    from perfgate.commands import base
    from perfgate.measure import fingerprint, interleave

    monkeypatch.setattr(interleave, "SideProcess", ExperimentWorker)
    monkeypatch.setattr(base, "gpu_available", lambda: True)
    monkeypatch.setattr(fingerprint, "collect",
                        lambda: {"gpu_name": "G", "device_key": "k", "torch": "t", "triton": "r"})  # fmt: skip
    assert main(["experiment", "--groups", "leaderboard", "-k", "m16-n2112-k7168", "--out",
                 str(tmp_path), "--measure-only", *argv]) == 0  # fmt: skip
    assert {mode for what, _, mode in (e for e in ExperimentWorker.log if e[0] == "start")} == {
        "leaderboard"
    }
    assert all(
        cycles is None
        for what, _, _, cycles in (e for e in ExperimentWorker.log if e[0] == "prepare")
    )
    trials, _ = pe.load([tmp_path / "samples.npz"])
    assert all(sorted(t.b) == ["plain"] for t in trials)  # factor: B measures plain only
    # the re-analysis judges the recorded mode and injection, and writes the table
    assert main(["experiment", "--reanalyse", str(tmp_path / "samples.npz"), "--out",
                 str(tmp_path / "r"), "--inject", "0.01,0.03"]) == 0  # fmt: skip
    md = (tmp_path / "r" / "summary.md").read_text()
    assert "(process-level A/B, leaderboard mode)" in md and "injection: factor" in md
    assert "| ab leaderboard | 3% | +3.00% / +3.00% / +3.00% | 2/2 |" in md


def test_several_process_files_are_judged_as_one_experiment(tmp_path, capsys):
    trials, design = verdict_trials(3, 0.002, cases=("x",), seed=1, levels=(0.03,))
    meta = {"design": {"mode": "device", "injection": "sleep", "processes": list(design.processes),
                       "rounds": design.rounds}, "device": "D", "verdict_seconds": [80.0]}  # fmt: skip
    for part, chunk in (("p1", trials[:2]), ("p2", trials[2:])):
        (tmp_path / part).mkdir()
        pe.save(tmp_path / part / "samples.npz", chunk)
        (tmp_path / part / "meta.json").write_text(json.dumps(meta))
    files = [str(tmp_path / p / "samples.npz") for p in ("p1", "p2")]
    assert main(["experiment", "--reanalyse", *files, "--out", str(tmp_path / "r"),
                 "--inject", "0.03"]) == 0  # fmt: skip
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["meta"]["verdicts"] == 3  # the second file's verdict 0 is the third verdict
    rows = {r["variant"]: r for r in summary["rows"]}
    assert rows["plain"]["n"] == rows["0.03"]["n"] == 3 and rows["0.03"]["flagged"] == 3
    assert summary["meta"]["verdict_seconds"] == [80.0, 80.0]
    assert "GPU time: 2 verdicts in 160 s" in (tmp_path / "r" / "summary.md").read_text()
    # files measured with other designs are not mixed
    meta["design"]["processes"] = [2, 4]
    (tmp_path / "p2" / "meta.json").write_text(json.dumps(meta))
    assert main(["experiment", "--reanalyse", *files, "--out", str(tmp_path / "r2"),
                 "--inject", "0.03"]) == 2  # fmt: skip
    assert "judge like with like" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--runs", "1"], "argument --runs: must be an int in [2, 100], got 1"),
        (["--runs", "1000"], "argument --runs: must be an int in [2, 100], got 1000"),
        (["--budget-s", "0"], "argument --budget-s: must be a number in (0, 604800], got 0.0"),
        (["--budget-s", "nan"], "argument --budget-s: must be a number in (0, 604800], got nan"),
        # the retired round-level design's options and the stored gate's settings
        (["--design", "rounds"], "unrecognized arguments: --design rounds"),
        (["--trials", "3"], "unrecognized arguments: --trials 3"),
        (["--n-resamples", "300"], "unrecognized arguments: --n-resamples 300"),
        (["--ab-min-effect", "0.01"], "unrecognized arguments: --ab-min-effect 0.01"),
        (["--rounds-device", "40"], "unrecognized arguments: --rounds-device 40"),
    ],
)
def test_experiment_refuses_bad_options_in_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        main(["experiment", *argv])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert err == f"lab experiment: error: {message} (see lab experiment --help)\n"


def test_a_settings_conflict_is_refused_in_one_line(capsys, tmp_path):
    assert main(["experiment", "--out", str(tmp_path), "--ab-device-floor", "0.5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lab experiment: error: ")
    assert "ab_device.floor (0.5, --ab-device-floor) must be <=" in err, err
    assert err.count("\n") == 1 and not any(tmp_path.iterdir())


@pytest.mark.parametrize("text", ["", "0", "1", "0.05,0.05", "x", "-0.1"])
def test_bad_levels_are_refused(text):
    with pytest.raises(ValueError, match="--inject"):
        pe.parse_levels(text)


def _reanalyse(path, out, *more):
    return main(["experiment", "--reanalyse", str(path), "--out", str(out), *more])


def _npz(path, arrays):
    np.savez(path, **arrays)
    return path


ONE = "p|v0|x|A0|l1|plain"
ROUND_LEVEL = {"s0|x|t0|A|plain": np.ones(3), "s0|x|t0|B|plain": np.ones(3),
               "s1|x|t0|A|plain": np.ones(3), "s1|x|t0|B|0.03": np.ones(3)}  # fmt: skip


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "none.npz", "no such file"),
        (lambda d: d, "is a directory, expected the samples.npz of an experiment run"),
        (lambda d: (d / "x.npz").write_text("not a zip") and d / "x.npz", "not an .npz archive"),
        (lambda d: _npz(d / "e.npz", {}), "holds no samples"),
        (lambda d: _npz(d / "k.npz", {"foo": np.ones(3)}), "holds an array 'foo'; expected p|v<"),
        (lambda d: _npz(d / "neg.npz", {ONE: -np.ones(3)}), "holds samples that are not finite seconds > 0"),
        (lambda d: _npz(d / "2d.npz", {ONE: np.ones((2, 3))}), "must be a non-empty 1-D array of seconds"),
        (lambda d: _npz(d / "no-b.npz", {ONE: np.ones(3)}), "v0|x lacks B's plain processes"),
        (lambda d: (np.save(d / "a.npy", np.ones(3)), d / "a.npy")[1], "not an .npz archive"),
        (
            lambda d: _npz(d / "rounds.npz", ROUND_LEVEL),
            "holds samples of the retired round-level design (one worker a side); perfgate at "
            f"commit {pe.ROUND_DESIGN_LAST} re-analyses them",
        ),
    ],
    ids=["missing", "directory", "not-a-zip", "no-arrays", "wrong-keys", "negative", "2-d",
         "no-b-stream", "npy", "round-level"],
)  # fmt: skip
def test_an_unusable_samples_file_is_one_line_exit_2(tmp_path, capsys, make, message):
    src = tmp_path / "src"
    src.mkdir()
    path = make(src)
    out = tmp_path / "out"
    assert _reanalyse(path, out) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"lab experiment: error: --reanalyse {path}: ") and message in err
    assert not (out / "summary.md").exists()  # and no report of 0/0


def test_the_round_level_design_is_named_by_a_commit_of_this_history(history_git):
    done = history_git("cat-file", "-e", f"{pe.ROUND_DESIGN_LAST}:perfgate/experiment.py")
    assert done.returncode == 0, f"{pe.ROUND_DESIGN_LAST} holds no round-level experiment"


def _saved(tmp_path):
    trials, _ = verdict_trials(1, 0.002, cases=("x",), seed=1)
    pe.save(tmp_path / "samples.npz", trials)
    return tmp_path / "samples.npz"


def test_a_corrupt_meta_json_beside_the_samples_is_one_line_exit_2(tmp_path, capsys):
    samples = _saved(tmp_path)
    (tmp_path / "meta.json").write_text("{not json")
    assert _reanalyse(samples, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"lab experiment: error: {tmp_path / 'meta.json'}: not a meta.json")
    assert err.count("\n") == 1
    (tmp_path / "meta.json").write_text("[1]")
    assert _reanalyse(samples, tmp_path / "out") == 2
    assert "expected a JSON object" in capsys.readouterr().err


def test_an_out_that_names_a_file_is_one_line_exit_2(tmp_path, capsys):
    samples = _saved(tmp_path)
    blocker = tmp_path / "taken"
    blocker.write_text("mine")
    assert _reanalyse(samples, blocker) == 2
    assert capsys.readouterr().err == (
        f"lab experiment: error: --out {blocker}: is a file, expected a directory\n"
    )
    assert blocker.read_text() == "mine"


@pytest.mark.parametrize(
    ("size", "band"),
    [(0.0424, "below"), (0.0426, "at"), (0.05, "at"), (0.0574, "at"), (0.0576, "above")],
)
def test_size_bands_around_the_level(size, band):
    assert pe.size_band(size, 0.05) == band


def test_the_help_states_the_size_band():
    from lab import experiment

    assert f"±{pe.SIZE_BAND:.0%} of the level" in experiment.__doc__


def test_a_bad_process_samples_file_is_one_line_exit_2(tmp_path, capsys):
    trials, _ = verdict_trials(1, 0.002, cases=("x",), seed=1)
    pe.save(tmp_path / "samples.npz", trials)
    with np.load(tmp_path / "samples.npz") as data:
        arrays = {k: data[k] for k in data.files}
    del arrays["p|v0|x|A4|l2|plain"]
    np.savez(tmp_path / "holed.npz", **arrays)
    assert main(["experiment", "--reanalyse", str(tmp_path / "holed.npz"), "--out",
                 str(tmp_path / "r")]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err == (f"lab experiment: error: --reanalyse {tmp_path / 'holed.npz'}: "
                   "v0|x|A|plain lacks some of its 24 processes\n")  # fmt: skip


@pytest.mark.parametrize(
    ("given", "shown"),
    [("0.005", "0.5%"), ("0.0075", "0.75%"), ("0.01", "1%"), ("0.015", "1.5%"), ("0.2", "20%")],
)
def test_an_injected_level_is_reported_as_given(given, shown):
    assert pe.level_text(given) == shown


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--reanalyse", "{d}/none.npz"], "--reanalyse {d}/none.npz: no such file"),
        (["--reanalyse", "{empty}", "--out", "{d}/out"], "holds no samples"),
        (["--reanalyse", "{good}", "--out", "{d}/out"], "not an .npz archive"),
        (["--reanalyse", "{empty}", "--out", "{taken}"], "--out {taken}: is a file, expected a directory"),
        (["--runs", "1"], "argument --runs: must be an int in [2, 100], got 1"),
    ],
)  # fmt: skip
def test_python_m_lab_answers_bad_input_with_one_line_and_exit_2(tmp_path, argv, expected):
    import subprocess
    import sys

    from perfgate.checkout import REPO

    fill = {"d": str(tmp_path), "empty": str(tmp_path / "empty.npz"),
            "good": str(tmp_path / "good.json"), "taken": str(tmp_path / "taken")}  # fmt: skip
    np.savez(fill["empty"])
    (tmp_path / "good.json").write_text("{}")
    (tmp_path / "taken").write_text("a file, not a directory")
    argv = [a.format(**fill) for a in argv]
    # -X importtime: what loaded before the answer (its lines on stderr, before the error's)
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "lab", "experiment", *argv],
                          cwd=REPO, capture_output=True, text=True, timeout=120)  # fmt: skip
    imported = [ln.rpartition("|")[2].strip() for ln in done.stderr.splitlines()
                if ln.startswith("import time:")]  # fmt: skip
    said = "".join(
        ln + "\n" for ln in done.stderr.splitlines() if not ln.startswith("import time:")
    )
    assert done.returncode == 2, said
    assert said.count("\n") == 1 and said.startswith("lab experiment: error: ")
    assert expected.format(**fill) in said, said
    # bad input is answered before torch loads (the case selection loads it)
    assert "torch" not in imported


def test_the_experiment_offers_exactly_the_ab_modes():
    from lab.__main__ import COMMAND_MODULES
    from perfgate import modes
    from perfgate.__main__ import build_parser

    parser = build_parser("lab", COMMAND_MODULES)
    (action,) = [a for a in parser.commands["experiment"]._actions if "--mode" in a.option_strings]
    assert tuple(action.choices) == modes.AB_MODE_NAMES


def test_the_docs_settings_table_lists_the_keys_the_experiment_takes():
    # docs/perfgate-compare.md names, per key, the commands that take it; the lab's as
    # "lab experiment" (tests/perfgate/test_settings.py holds perfgate's own to the table)
    import re

    from lab.__main__ import COMMAND_MODULES
    from perfgate.__main__ import build_parser
    from perfgate.checkout import REPO

    doc = (REPO / "docs" / "perfgate-compare.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z_.]+)` \| (.+) \|$", doc, flags=re.M))
    listed = {name for name, row in rows.items() if "lab experiment" in row.rsplit(": ", 1)[-1]}
    taken = build_parser("lab", COMMAND_MODULES).parse_args(["experiment"]).perfgate_keys
    assert listed and listed == set(taken)


@pytest.mark.parametrize("command", ["", "experiment"])
def test_lab_help_loads_no_heavy_library(command):
    # as perfgate's --help (tests/perfgate/test_cli.py): the experiment imports torch, scipy and
    # the workers when it runs, never to answer --help
    from tests.perfgate.test_cli import heavy_after_help

    assert heavy_after_help("lab.__main__", command) == "[]", command
