"""``perfgate ab`` on the CPU: ABBA order, the worker protocol, the adaptive A/B loop with
synthetic sides, the benchmark cases, revisions and worktrees, and the command's refusals."""

from __future__ import annotations

import io
import json
import os
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from perfgate import catalog, revisions
from perfgate.__main__ import main
from perfgate.commands import ab, base
from perfgate.gate import paths
from perfgate.gate import process_ab as pa
from perfgate.gate.stats import REGRESSION
from perfgate.measure import ab as ab_measure
from perfgate.measure import interleave
from perfgate.measure import worker as sampler


def test_block_order_is_abba():
    order = [s for s, _ in interleave.block_order(["A", "B"], 40, block=10)]
    assert order == ["A", "B", "B", "A", "A", "B", "B", "A"]
    assert [k for _, k in interleave.block_order(["A", "B"], 25, block=10)] == [10] * 4 + [5, 5]
    assert list(interleave.block_order(["A"], 0)) == []
    with pytest.raises(ValueError):
        list(interleave.block_order(["A"], 5, block=0))


class FakeSide:
    """A worker answering ``run`` with synthetic samples: ``factor`` per case, times a level of
    its own for its life (``offset``, the per-process offset the design is built for), 0.5%
    round noise. Every worker given the same ``order`` list records there what it was asked
    (prepares, blocks of rounds, its close), so that the order across workers is seen."""

    def __init__(
        self, label, factors, seed, order=None, offset=0.0, *, prepare_error=None, noisy=None
    ):
        self.label, self.factors = label, factors
        self.rng = np.random.default_rng(seed)
        self.level = 1.0 + offset * self.rng.standard_normal()
        # per case, a level of this process's own for that case alone (SD by case)
        self.case_level = {
            c: 1.0 + sd * self.rng.standard_normal() for c, sd in (noisy or {}).items()
        }
        self.log: list[tuple] = []
        self.order = [] if order is None else order
        self.prepare_error = prepare_error
        self.closed = False

    def ask(self, req):
        if req["op"] == "prepare":
            names = [c["name"] for c in req["cases"]]
            self.log.append(("prepare", names))
            self.order.append((self.label, "prepare", names[0]))
            if self.prepare_error and names[0] in self.prepare_error:
                raise interleave.WorkerError(f"{self.label}: prepare {names[0]}: wrong output")
            return {"ok": True, "cases": {}, "reducer_backend": "native"}
        self.log.append((req["case"], req["rounds"]))
        self.order.append((self.label, req["case"], req["rounds"]))
        f = self.factors.get(req["case"], 1.0) * self.level * self.case_level.get(req["case"], 1)
        return {
            "ok": True,
            "samples": list(1e-5 * f * (1 + 0.005 * self.rng.standard_normal(req["rounds"]))),
        }

    def close(self):
        self.closed = True
        self.order.append((self.label, "close"))


def starter(factors_by_side, order, offset=0.0, started=None, **kw):
    """``start(spec, index)`` for measure_ab: a FakeSide per worker, seeded by its name."""

    def start(spec, index):
        name = f"{spec.label}{index + 1}"
        seed = zlib.crc32(name.encode())  # the same every run (hash() is salted)
        side = FakeSide(name, factors_by_side.get(spec.label, {}), seed, order, offset, **kw)
        if started is not None:
            started.append(side)
        return side

    return start


DESIGN_FOR = pa.design_for  # the real one (a test may patch the module's)
SPECS = {
    "base": ab_measure.SideSpec("base", paths.REPO),
    "head": ab_measure.SideSpec("head", paths.REPO),
}


def test_measure_ab_alternates_processes_and_adds_them_for_the_undecided():
    # "slow" is 5% slower (decided at the first look); "noisy" has processes off by N(0, 3%):
    # 2 + 2 of them cannot settle it, so it goes on to 2 more a side in new workers
    design = pa.Design(processes=(2, 4), rounds=20)
    order: list = []
    started: list = []
    start = starter({"head": {"slow": 1.05}}, order, started=started, noisy={"noisy": 0.03})
    cases = [{"name": "slow"}, {"name": "noisy"}]
    decisions, store = ab_measure.measure_ab(SPECS, cases, design, start)
    assert decisions["slow"].result.verdict == REGRESSION and decisions["slow"].look == 1
    assert decisions["noisy"].look == 2 and decisions["noisy"].processes == 4
    # the store: one list of rounds per process, 2 then 4 processes a side
    assert [len(p) for p in store["base"]["slow"]["plain"]] == [20, 20]
    assert [len(p) for p in store["head"]["noisy"]["plain"]] == [20] * 4
    labels = [s.label for s in started]
    assert labels == ["base1", "base2", "head1", "head2", "base3", "base4", "head3", "head4"]
    # look 1: every case prepared one worker at a time, base1 head1 base2 head2; its rounds in
    # ABBA blocks over that order; the look's workers closed together while look 2 prepares,
    # before look 2 times a round
    look1 = order[: order.index(("base3", "prepare", "noisy"))]
    prepares = [(w, c) for w, what, *rest in look1 if what == "prepare" for c in rest]
    alternated = ["base1", "head1", "base2", "head2"]
    assert prepares == [(w, "slow") for w in alternated] + [(w, "noisy") for w in alternated]
    runs = [w for w, what, *_ in look1 if what == "slow"]
    warm = ab_measure.WARMUP_ROUNDS // 10
    blocks = [alternated] * warm + [alternated, alternated[::-1]]  # warm-up, then 20 rounds
    assert runs == [w for b in blocks for w in b]
    look2 = order[len(look1) :]
    closed = [w for w, what, *_ in look2 if what == "close"]
    first_round = next(i for i, (w, what, *_) in enumerate(look2) if what == "noisy")
    assert set(closed[:4]) == set(alternated)
    assert max(look2.index((w, "close")) for w in alternated) < first_round
    # look 2: only the undecided case, in the new workers only
    assert {c for _, what, *rest in look2 if what == "prepare" for c in rest} == {"noisy"}
    assert {w for w, what, *_ in look2 if what != "close"} == {"base3", "head3", "base4", "head4"}
    assert all(s.closed for s in started)


def test_a_look_closes_its_workers_even_when_a_prepare_fails():
    # a wrong head output is the pull request's fault (exit 1), the base's unusable input (2)
    design = pa.Design(processes=(2,), rounds=20)
    for side, code in (("head", 1), ("base", 2)):
        started: list = []
        start = starter({}, [], started=started)

        def failing(spec, index, start=start, side=side):
            w = start(spec, index)
            w.prepare_error = {"x"} if spec.label == side else None
            return w

        with pytest.raises(revisions.AbError) as info:
            ab_measure.measure_ab(SPECS, [{"name": "x"}], design, failing)
        assert info.value.code == code and "wrong output" in str(info.value)
        assert started and all(w.closed for w in started)


def test_close_all_asks_every_worker_to_quit_before_waiting():
    events = []

    class W:
        def __init__(self, name):
            self.name = name

        def begin_close(self):
            events.append(("quit", self.name))

        def close(self):
            events.append(("wait", self.name))

    interleave.close_all([W("a"), W("b"), W("c")])
    assert events == [("quit", "a"), ("quit", "b"), ("quit", "c"),
                      ("wait", "a"), ("wait", "b"), ("wait", "c")]  # fmt: skip
    assert interleave.alternate([["a1", "a2"], ["b1", "b2"]]) == ["a1", "b1", "a2", "b2"]
    with pytest.raises(ValueError, match="as many workers"):
        interleave.alternate([["a1", "a2"], ["b1"]])


def test_the_leaderboard_mode_reaches_the_worker_command_line(monkeypatch):
    seen = []

    def popen(cmd, **kw):
        seen.append(cmd)
        raise OSError("not started in a test")

    monkeypatch.setattr(interleave.spawn, "popen", popen)
    for mode in ("device", "leaderboard"):
        with pytest.raises(OSError):
            interleave.SideProcess("head1", paths.REPO, mode=mode)
    device, leaderboard = seen
    assert "--mode" not in device  # device mode: the worker's command as before
    assert leaderboard[-2:] == ["--mode", "leaderboard"]
    assert leaderboard[:-2] == device


def test_the_worker_takes_a_mode_and_passes_reused_cycles(monkeypatch):
    from perfgate.measure import worker as w

    made = []

    class Fake:
        def __init__(self, mode="device"):
            made.append(mode)

        def prepare(self, cases, levels, cycles=None):
            return {"cases": {c["name"]: {"cycles": cycles} for c in cases}}

    lines = [
        json.dumps(
            {"op": "prepare", "cases": [{"name": "x"}], "levels": [0.01], "cycles": {"0.01": 77}}
        ),
        json.dumps({"op": "prepare", "cases": [{"name": "y"}], "levels": [0.01]}),
    ]
    answers = []
    sampler.serve(lambda: Fake("leaderboard"), io.StringIO("\n".join(lines)), answers.append)
    assert made == ["leaderboard"]
    assert answers[0]["cases"]["x"]["cycles"] == {"0.01": 77}
    assert answers[1]["cases"]["y"]["cycles"] is None  # calibrated in that worker
    with pytest.raises(SystemExit):
        w.main(["--kernels-root", ".", "--mode", "host"])  # only device and leaderboard


def test_worker_protocol_answers_errors_in_one_line():
    class Fake:
        def prepare(self, cases, levels):
            return {"cases": {c["name"]: {"calls": 1} for c in cases}}

        def run(self, name, variant, rounds):
            if name == "bad":
                raise AssertionError("wrong GEMM output\non copy 0")
            return [1e-6] * rounds

    lines = [
        json.dumps({"op": "prepare", "cases": [{"name": "x"}]}),
        "",
        json.dumps({"op": "run", "case": "x", "variant": "plain", "rounds": 3}),
        json.dumps({"op": "run", "case": "bad", "variant": "plain", "rounds": 3}),
        json.dumps({"op": "nope"}),
        json.dumps({"op": "quit"}),
        json.dumps({"op": "run", "case": "x", "variant": "plain", "rounds": 3}),  # after quit
    ]
    answers = []
    sampler.serve(Fake, io.StringIO("\n".join(lines)), answers.append)
    assert answers[0] == {"ok": True, "cases": {"x": {"calls": 1}}}
    assert answers[1] == {"ok": True, "samples": [1e-6] * 3}
    assert answers[2] == {"ok": False, "error": "AssertionError: wrong GEMM output on copy 0"}
    assert answers[3]["ok"] is False and "unknown op" in answers[3]["error"]
    assert answers[4] == {"ok": True} and len(answers) == 5


def test_worker_imports_kernels_from_the_chosen_tree(tmp_path, monkeypatch):
    tree = tmp_path / "rev"
    (tree / "kernels").mkdir(parents=True)
    (tree / "kernels" / "__init__.py").write_text("WHERE = 'base'\n")
    (tree / "kernels" / "gemm.py").write_text("WHERE = 'base gemm'\n")
    code = (
        "import sys; from perfgate.measure import worker as sampler; "
        f"sampler.use_kernels_from({str(tree)!r}); import kernels, kernels.gemm, perfgate.flags; "
        "print(kernels.WHERE, kernels.gemm.WHERE, kernels.gemm.__file__, perfgate.flags.__file__)"
    )
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = subprocess.run(
        ["python3", "-c", code], capture_output=True, text=True, check=True, cwd=interleave.REPO,
        env=dict(os.environ, TMPDIR=str(scratch)),
    )  # fmt: skip
    gemm, flags = tree.resolve() / "kernels" / "gemm.py", interleave.REPO / "perfgate" / "flags.py"
    assert out.stdout.split() == ["base", "base", "gemm", str(gemm), str(flags)]
    assert list(scratch.iterdir()) == []  # nothing written for the choice: nothing left behind
    with pytest.raises(FileNotFoundError, match="has no kernels package"):
        sampler.use_kernels_from(tmp_path)
    import kernels  # noqa: F401  (this process has the checkout's: too late to choose)

    with pytest.raises(RuntimeError, match="imported before"):
        sampler.use_kernels_from(tree)


def test_cases_are_named_as_the_pytest_benchmarks():
    from perfgate import catalog as shapes

    names = [c["name"] for c in catalog.cases(ab.DEFAULT_GROUPS)]
    assert len(names) == len(shapes.LEADERBOARD) + len(shapes.REDUCER)
    assert (
        names[0] == f"tests/perf/test_leaderboard.py::test_leaderboard[{shapes.LEADERBOARD[0].id}]"
    )
    assert any(n.startswith("tests/perf/test_reducer.py::test_reducer[s") for n in names)
    assert len(catalog.cases(("grid",))) == len(shapes.GRID)
    assert [c["name"] for c in catalog.cases(ab.DEFAULT_GROUPS, keyword="m16-n2112-k7168")] == [
        "tests/perf/test_leaderboard.py::test_leaderboard[m16-n2112-k7168]"
    ]
    with pytest.raises(ValueError, match="--groups"):
        catalog.cases(("nope",))


def _in_git() -> bool:
    return (
        subprocess.run(["git", "rev-parse", "HEAD"], cwd=paths.REPO, capture_output=True).returncode
        == 0
    )


needs_git = pytest.mark.skipif(not _in_git(), reason="not a git checkout (a copied tree)")


@needs_git
def test_revisions_and_worktrees(tmp_path):
    head = revisions.resolve("HEAD")
    assert len(head) == 40
    with pytest.raises(revisions.AbError, match="names no commit"):
        revisions.resolve("no-such-revision-xyz")
    with pytest.raises(revisions.AbError, match="must name a git revision"):
        revisions.resolve("--all")
    with revisions.worktree(head, tmp_path) as tree:
        assert (tree / "kernels" / "__init__.py").is_file()
    assert not tree.exists()  # removed, also from git's list
    assert (
        str(tree)
        not in subprocess.run(
            ["git", "worktree", "list"], cwd=paths.REPO, capture_output=True, text=True
        ).stdout
    )


def test_ab_refuses_settings_it_cannot_use_in_one_line(capsys):
    # before any git or GPU: a bad value, a floor above the band, another mode's section, and
    # the round-level keys ab no longer reads (its verdict is the process-level one)
    cases = [
        (["--ab-device-min-effect", "5"], "--ab-device-min-effect: ab_device.min_effect must be "
         "a fraction in (0, 1), e.g. 0.01 for 1%, got 5.0"),
        (["--ab-device-floor", "0.02"], "ab_device.floor (0.02, --ab-device-floor) must be <= "
         "ab_device.min_effect (0.01, "),
        (["--ab-device-processes", "64", "--ab-device-looks", "4"], "ab_device.processes (64, "
         "--ab-device-processes) x 2 ** (ab_device.looks (4, --ab-device-looks) - 1) must be <= "
         "128"),
        (["--ab-leaderboard-rounds", "50"], "--ab-leaderboard-rounds sets the leaderboard-mode "
         "A/B; this run is --mode device"),
    ]  # fmt: skip
    for argv, message in cases:
        assert main(["ab", "--base", "HEAD", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("perfgate ab: error: ") and message in err and err.count("\n") == 1
    for flag in ("--min-effect", "--ab-min-effect", "--rounds-device", "--n-resamples"):
        with pytest.raises(SystemExit) as info:
            main(["ab", "--base", "HEAD", flag, "0.05"])
        assert info.value.code == 2
        assert capsys.readouterr().err == (
            f"perfgate ab: error: unrecognized arguments: {flag} 0.05 (see perfgate ab --help)\n"
        )


@needs_git
def test_ab_command_refusals(capsys, monkeypatch):
    assert main(["ab", "--base", "no-such-revision-xyz"]) == 2
    assert "names no commit" in capsys.readouterr().err
    assert main(["ab", "--base", "HEAD", "--groups", "nope"]) == 2
    monkeypatch.setattr(base, "gpu_available", lambda: False)
    monkeypatch.setenv("PERFGATE_REQUIRE_GPU", "1")
    assert main(["ab", "--base", "HEAD"]) == 2
    monkeypatch.delenv("PERFGATE_REQUIRE_GPU")
    assert main(["ab", "--base", "HEAD"]) == 0
    assert "no GPU" in capsys.readouterr().out


def _report(tmp_path, monkeypatch, factors, *, design=None, mode="device", head=None):
    from argparse import Namespace

    from perfgate.gate import settings
    from perfgate.measure import fingerprint

    gate = settings.load()
    design = design or DESIGN_FOR(gate, mode)
    start = starter({"head": factors}, [], offset=0.002)
    names = sorted({*factors, "b"})
    decisions, store = ab_measure.measure_ab(SPECS, [{"name": n} for n in names], design, start)
    monkeypatch.setattr(
        fingerprint,
        "collect",
        lambda: {"device_key": "nvidia-h200", "git_commit": "c" * 40, "git_dirty": True},
    )
    monkeypatch.setattr(pa, "design_for", lambda gate, mode: design)
    args = Namespace(base="HEAD~1", head=head, results_dir=tmp_path, json_out=None,
                     markdown_out=None, mode=mode)  # fmt: skip
    infos = {"base": {"reducer_backend": "native"}, "head": {"reducer_backend": "native"}}
    code = ab.report(args, gate, decisions, store, infos, "b" * 40, None)
    return code, json.loads((tmp_path / "ab.json").read_text()), decisions


def test_the_ab_report_shows_the_per_process_figures(tmp_path, monkeypatch, capsys):
    code, report, decisions = _report(tmp_path, monkeypatch, {"a": 1.05})
    assert code == report["summary"]["exit_code"] == 1
    by_name = {b["name"]: b for b in report["benchmarks"]}
    assert {n: b["verdict"] for n, b in by_name.items()} == {"a": "regression", "b": "unchanged"}
    settings = report["summary"]["settings"]
    assert (settings["unit"], settings["section"], settings["processes"], settings["min_effect"],
            settings["floor"], settings["looks"]) == ("process", "ab_device", "3/6/12/24", 0.01, 0.0025, 4)  # fmt: skip
    assert not any(key.startswith("ab") for key in settings)  # the retired round-level keys
    assert settings["confidence"] == pytest.approx(1 - 2 * 0.01 / 4)
    for name, b in by_name.items():
        d = decisions[name]
        # n is processes a side; the figures are each process's level, as judged
        assert b["n_baseline"] == b["n_current"] == d.processes == len(b["processes"]["base"])
        assert b["processes"]["base_rounds"] == [100] * d.processes
        assert b["threshold"] == 0.01 and b["looks"] == d.look
        assert f"{d.processes}+{d.processes} processes x 100 rounds, process SD" in b["reason"]
        levels = np.array(b["processes"]["head"]) / np.array(b["processes"]["base"])
        assert np.exp(np.log(levels).mean()) == pytest.approx(b["ratio"], rel=1e-12)
    notes = report["summary"]["notes"]
    assert notes[0] == "reducer: base native, head native"
    assert notes[1].startswith("a: per-process levels against the base's ")
    assert "uncommitted" in report["summary"]["current"]
    md = (tmp_path / "ab.md").read_text()
    assert md.startswith("### perfgate FAIL") and "99.5% CI" in md
    assert "Student's t over the processes' log levels" in md and "above +0.25%" in md
    assert "unchanged when within ±1.0% ([tool.perfgate.ab_device])" in md
    assert "a: per-process levels" in capsys.readouterr().out
    samples = json.loads((tmp_path / "ab.samples.json").read_text())
    assert samples["unit"] == "process"
    assert [len(p) for p in samples["head_samples"]["a"]] == [100] * decisions["a"].processes


def test_the_ab_report_judges_at_the_process_level_threshold(tmp_path, monkeypatch):
    # 2% slower in device mode (band 1%, floor 0.25%): a regression; in leaderboard mode (band
    # 2%, floor 0.5%) too, with that mode's settings named in the report
    for mode, threshold in (("device", 0.01), ("leaderboard", 0.02)):
        out = tmp_path / mode
        code, report, _ = _report(out, monkeypatch, {"a": 1.02}, mode=mode)
        row = next(b for b in report["benchmarks"] if b["name"] == "a")
        assert (code, row["verdict"], row["threshold"]) == (1, "regression", threshold)
        assert report["summary"]["settings"]["section"] == f"ab_{mode}"
        assert report["summary"]["mode"] == mode


def test_every_ab_look_is_judged_at_alpha_over_looks(monkeypatch):
    seen = []
    real = pa.judge

    def recording(base, head, design, *, look):
        seen.append((look, design.looks, design.look_alpha))
        return real(base, head, design, look=look)

    monkeypatch.setattr(pa, "judge", recording)
    design = pa.Design(processes=(2, 4, 8), rounds=20)
    start = starter({}, [], noisy={"edge": 0.05})  # undecided until the last look
    ab_measure.measure_ab(SPECS, [{"name": "edge"}], design, start)
    assert [look for look, *_ in seen] == [1, 2, 3]
    assert {(n, a) for _, n, a in seen} == {(3, 0.01 / 3)}


@needs_git
def test_ab_run_end_to_end_with_fake_workers(tmp_path, monkeypatch):
    # everything but the GPU: the worktree of the base, the per-side builds and workers, the
    # looks of fresh workers, the reports; the head's benchmark is 4% slower
    from argparse import Namespace

    from perfgate.gate import settings
    from perfgate.measure import fingerprint

    roots, built, modes = {}, [], []
    events = []

    class Side(FakeSide):
        def __init__(self, label, root, env, *, mode="device"):
            roots.setdefault(label[:4], (root, env))
            modes.append(mode)
            events.append(("start", label))
            factors = {n: 1.04 for n in names} if label.startswith("head") else {}
            super().__init__(label, factors, seed=len(modes))

    names = [c["name"] for c in catalog.cases(ab_measure.default_groups("device").split(","),
                                              keyword="m16-n2112-k7168")]  # fmt: skip
    monkeypatch.setattr(interleave, "SideProcess", Side)

    def build(root, cache, label):
        built.append((label, cache))
        events.append(("build", label))

    monkeypatch.setattr(ab_measure, "build", build)
    monkeypatch.setattr(fingerprint, "collect", lambda: {"device_key": "nvidia-h200"})
    gate = settings.load(overrides={"ab_device.rounds": 20})
    for mode in ("device", "leaderboard"):
        events.clear()
        modes.clear()
        out = tmp_path / mode
        args = Namespace(base="HEAD", head=None, groups="leaderboard", keyword="m16-n2112-k7168",
                         results_dir=out, json_out=None, markdown_out=None, mode=mode)  # fmt: skip
        assert ab._measure(args, gate) == 1
        report = json.loads((out / "ab.json").read_text())
        assert [(b["name"], b["verdict"]) for b in report["benchmarks"]] == [
            (names[0], "regression")
        ]
        # 3 + 3 fresh workers measured, in that mode, and the next look's 3 + 3 started ahead
        # (warming up during the prepares) and closed unused: the regression was decided
        assert set(modes) == {mode} and len(modes) == 12
        # the first look's workers warm up while the reducers build
        first_build = events.index(next(e for e in events if e[0] == "build"))
        assert sorted(label for _, label in events[:first_build]) == sorted(
            f"{side}{i}" for side in ("base", "head") for i in (1, 2, 3)
        )
    base_root, base_env = roots["base"]
    assert base_root.name.startswith("base-") and not base_root.exists()  # worktree removed
    # the base's reducer is built in the cache of its sources' content, kept between runs
    from kernels.reducer.cache import cache_root

    cache = Path(base_env["MXFP4_CACHE_DIR"])
    assert cache.parent == cache_root() / "ab" and len(cache.name) == 20
    assert roots["head"][0] == paths.REPO and roots["head"][1] == {}
    assert sorted(label for label, _ in built) == ["base", "base", "head", "head"]
    samples = json.loads((tmp_path / "device" / "ab.samples.json").read_text())
    assert len(samples["base_samples"][names[0]]) == len(samples["head_samples"][names[0]]) == 3


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A git repository of its own with a kernels package, as ab's checkout: the worktree tests
    then run wherever git does, a copied tree of this project included."""
    import shutil

    if shutil.which("git") is None:
        pytest.skip("needs git on PATH (ab checks revisions out as git worktrees)")
    root = tmp_path / "checkout"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "__init__.py").write_text("")
    env = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "."], [*env, "commit", "-q", "-m", "one"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    monkeypatch.setattr(paths, "REPO", root)
    return root


def test_a_revision_compared_with_itself_passes(tmp_path, monkeypatch, repo):
    # --base HEAD --head HEAD: two worktrees of one revision, each with its own build and cache,
    # measured as two processes of the same code: no regression
    from argparse import Namespace

    from perfgate.gate import settings
    from perfgate.measure import fingerprint

    roots, built = {}, []

    class Side(FakeSide):
        def __init__(self, label, root, env, *, mode="device"):
            roots.setdefault(label[:4], (root, env, (root / "kernels").is_dir()))
            super().__init__(label, {}, seed=len(roots) * 100 + int(label[4:]))

    monkeypatch.setattr(interleave, "SideProcess", Side)
    monkeypatch.setattr(
        ab_measure, "build", lambda root, cache, label: built.append((label, root, cache))
    )
    monkeypatch.setattr(fingerprint, "collect", lambda: {"device_key": "nvidia-h200"})
    gate = settings.load(overrides={"ab_device.rounds": 20})
    args = Namespace(base="HEAD", head="HEAD", groups="leaderboard", keyword="m16-n2112-k7168",
                     results_dir=tmp_path / "results", json_out=None, markdown_out=None,
                     mode="device")  # fmt: skip
    assert ab._measure(args, gate) == 0
    report = json.loads((tmp_path / "results" / "ab.json").read_text())
    assert [b["verdict"] for b in report["benchmarks"]] == ["unchanged"]
    (base_root, base_env, base_tree), (head_root, head_env, head_tree) = roots.values()
    assert base_tree and head_tree and base_root != head_root  # two real checkouts
    assert base_root.name.startswith("base-") and head_root.name.startswith("head-")
    assert not base_root.exists() and not head_root.exists()  # both removed
    # one revision, one reducer: both sides build into the cache of its content (the second
    # build finds the first's); a differing reducer gets a cache of its own
    assert base_env["MXFP4_CACHE_DIR"] == head_env["MXFP4_CACHE_DIR"]
    assert sorted(label for label, *_ in built) == ["base", "head"]
    other = tmp_path / "other" / "kernels" / "reducer"
    other.mkdir(parents=True)
    (other / "splitk_reduce.cu").write_text("// another reducer\n")
    assert ab_measure.build_cache(other.parents[1]) != Path(base_env["MXFP4_CACHE_DIR"])
    listed = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True)
    assert len(listed.stdout.splitlines()) == 1  # git's list holds the checkout alone again
    head = revisions.resolve("HEAD")
    assert report["summary"]["baseline"] == f"base HEAD ({head[:12]})"
    assert report["summary"]["current"] == f"head HEAD ({head[:12]})"


def test_whole_call_mode_times_one_rotating_call_and_checks_it(monkeypatch):
    # leaderboard mode's bench on the CPU: every input set checked before timing, one call a
    # round rotating over the sets, the last timed output checked after the block
    import torch

    from perfgate.measure import ab_worker
    from perfgate.measure.harness import Work

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    calls, checked = [], []

    def fn(x):
        calls.append(x)
        return x * 2

    def check(out, ref, what):
        checked.append(what)
        if out != ref:
            raise AssertionError(f"wrong output ({what})")

    work = Work(fn, [(1,), (2,), (3,)], [], [2, 4, 6], check)
    bench, info = ab_worker.prepare_whole_call(work, {}, lambda: None, {})
    assert calls == [1, 2, 3] and len(checked) == 3  # each set once, before any timing
    assert (info["calls"], info["launch"], info["sets"], bench.calls) == (1, "direct", 3, 1)
    call = bench.work("plain")
    for _ in range(4):
        call()
    assert calls[3:] == [1, 2, 3, 1]  # one call a round, rotating
    bench.check()
    assert checked[-1] == "timed call on set 0"
    work.refs[0] = 99  # the kernel now disagrees with its reference on set 0
    bench.work("plain")
    with pytest.raises(AssertionError, match="timed call on set 0"):
        bench.check()
    with pytest.raises(KeyError):
        bench.work("0.01")  # no such injected variant
