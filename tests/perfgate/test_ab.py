"""``perfgate ab`` on the CPU: ABBA order, the worker protocol, the adaptive A/B loop with
synthetic sides, the benchmark cases, revisions and worktrees, and the command's refusals."""

from __future__ import annotations

import io
import json
import subprocess

import numpy as np
import pytest

from perfgate import catalog, revisions
from perfgate.__main__ import main
from perfgate.commands import ab, base
from perfgate.gate import paths
from perfgate.gate.stats import REGRESSION, UNCHANGED, Settings
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
    """A worker answering ``run`` with synthetic samples: ``factor`` per case, 0.5% noise.
    Every side given the same ``order`` list records there what it was asked, so that the order
    in which the sides were measured is seen, not inferred from two separate logs."""

    def __init__(
        self, label: str, factors: dict[str, float], seed: int, order: list | None = None
    ) -> None:
        self.label, self.factors = label, factors
        self.rng = np.random.default_rng(seed)
        self.log: list[tuple[str, int]] = []
        self.order = [] if order is None else order

    def ask(self, req):
        if req["op"] == "prepare":
            self.log.append(("prepare", [c["name"] for c in req["cases"]]))
            self.order.append((self.label, "prepare"))
            return {"ok": True, "cases": {}}
        self.log.append((req["case"], req["rounds"]))
        self.order.append((self.label, req["case"], req["rounds"]))
        f = self.factors.get(req["case"], 1.0)
        return {
            "ok": True,
            "samples": list(f * (1 + 0.005 * self.rng.standard_normal(req["rounds"]))),
        }


def test_measure_ab_flags_the_slower_head_and_interleaves():
    settings = Settings(n_resamples=500)
    order: list = []
    sides = {
        "base": FakeSide("base", {}, 1, order),
        "head": FakeSide("head", {"slow": 1.03}, 2, order),
    }
    cases = [{"name": "slow"}, {"name": "same"}]
    decisions, samples = ab_measure.measure_ab(sides, cases, settings, rounds=40)
    assert decisions["slow"].result.verdict == REGRESSION
    assert decisions["same"].result.verdict == UNCHANGED
    for name, d in decisions.items():
        assert (
            len(samples[("base", name, "plain")])
            == len(samples[("head", name, "plain")])
            == d.rounds
        )
    # both sides asked for the same blocks: every round of one side has its twin on the other
    assert sides["base"].log == sides["head"].log
    # one case prepared at a time, all its rounds measured before the next is prepared
    log = sides["head"].log
    assert log[0] == ("prepare", ["slow"])
    second = log.index(("prepare", ["same"]))
    assert all(entry[0] == "slow" for entry in log[1:second])
    assert all(entry[0] == "same" for entry in log[second + 1 :])
    # the one shared record: per case, blocks of 10 rounds in ABBA order, base first
    for name, d in decisions.items():
        runs = [(label, k) for label, *rest in order if rest[0] == name for k in rest[1:]]
        labels = [label for label, _ in runs]
        blocks = d.rounds // 10
        abba = (("base", "head"), ("head", "base"))
        assert labels == [side for i in range(blocks) for side in abba[i % 2]]
        assert all(k == 10 for _, k in runs)


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
    code = (
        "import sys; from perfgate.measure import worker as sampler; "
        f"sampler.use_kernels_from({str(tree)!r}); import kernels; print(kernels.WHERE)"
    )
    out = subprocess.run(
        ["python3", "-c", code], capture_output=True, text=True, check=True, cwd=interleave.REPO
    )
    assert out.stdout.strip() == "base"
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
    # before any git or GPU: a bad value, and a --min-effect it would ignore (ab judges with
    # ab_min_effect alone)
    assert main(["ab", "--base", "HEAD", "--ab-min-effect", "5"]) == 2
    assert capsys.readouterr().err == (
        "perfgate ab: error: --ab-min-effect: ab_min_effect must be a fraction in [0, 1), e.g. "
        "0.015 for 1.5%, got 5.0\n"
    )
    with pytest.raises(SystemExit) as info:
        main(["ab", "--base", "HEAD", "--min-effect", "0.05"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        "perfgate ab: error: unrecognized arguments: --min-effect 0.05 (see perfgate ab --help)\n"
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


def test_ab_report_has_compare_shape(tmp_path, monkeypatch):
    from argparse import Namespace

    from perfgate.gate import settings
    from perfgate.measure import adaptive, fingerprint

    gate = settings.load(overrides={"n_resamples": 500})
    sides = {"base": FakeSide("base", {}, 1), "head": FakeSide("head", {"a": 1.05}, 2)}
    decisions, samples = ab_measure.measure_ab(
        sides, [{"name": "a"}, {"name": "b"}], gate.stats, 20
    )
    monkeypatch.setattr(
        fingerprint,
        "collect",
        lambda: {"device_key": "nvidia-h200", "git_commit": "c" * 40, "git_dirty": True},
    )
    args = Namespace(
        base="HEAD~1", head=None, results_dir=tmp_path, json_out=None, markdown_out=None
    )
    infos = {"base": {}, "head": {}}
    code = ab.report(args, gate, decisions, samples, infos, "b" * 40, None)
    report = json.loads((tmp_path / "ab.json").read_text())
    assert code == report["summary"]["exit_code"] == 1
    assert report["summary"]["settings"]["ab"] is True
    assert {b["name"]: b["verdict"] for b in report["benchmarks"]} == {
        "a": "regression",
        "b": "unchanged",
    }
    assert all(b["looks"] >= 1 for b in report["benchmarks"])
    assert "uncommitted" in report["summary"]["current"]
    assert (tmp_path / "ab.md").read_text().startswith("### perfgate FAIL")
    assert adaptive.schedule(20, gate.stats.looks)[0] == 20


@needs_git
def test_ab_run_end_to_end_with_fake_workers(tmp_path, monkeypatch):
    # everything but the GPU: the worktree of the base, the per-side builds and workers, the
    # interleaved adaptive rounds, the reports; the head's benchmark is 4% slower
    from argparse import Namespace

    from perfgate.gate import settings
    from perfgate.measure import fingerprint

    roots, built = {}, []

    class Side(FakeSide):
        def __init__(self, label, root, env):
            roots[label] = (root, env)
            factors = {n: 1.04 for n in names} if label == "head" else {}
            super().__init__(label, factors, seed=len(roots))
            self.reducer_backend = "native"

        def close(self):
            self.closed = True

    names = [c["name"] for c in catalog.cases(ab.DEFAULT_GROUPS, keyword="m16-n2112-k7168")]
    monkeypatch.setattr(interleave, "SideProcess", Side)
    monkeypatch.setattr(
        ab_measure, "build", lambda root, cache, label: built.append((label, cache))
    )
    monkeypatch.setattr(fingerprint, "collect", lambda: {"device_key": "nvidia-h200"})
    gate = settings.load(overrides={"n_resamples": 500, "rounds.device": 20})
    args = Namespace(base="HEAD", head=None, groups="leaderboard", keyword="m16-n2112-k7168",
                     results_dir=tmp_path, json_out=None, markdown_out=None)  # fmt: skip
    assert ab._measure(args, gate) == 1
    report = json.loads((tmp_path / "ab.json").read_text())
    assert [(b["name"], b["verdict"]) for b in report["benchmarks"]] == [(names[0], "regression")]
    base_root, base_env = roots["base"]
    assert base_root.name.startswith("base-") and not base_root.exists()  # worktree removed
    assert base_env["MXFP4_CACHE_DIR"].endswith("cache-base")  # the base's own reducer cache
    assert roots["head"][0] == paths.REPO and roots["head"][1] == {}
    assert [label for label, _ in built] == ["base", "head"]
    samples = json.loads((tmp_path / "ab.samples.json").read_text())
    assert len(samples["base_samples"][names[0]]) == len(samples["head_samples"][names[0]])


def test_the_ab_report_judges_with_the_ab_threshold(tmp_path, monkeypatch):
    # a head 2% slower at 0.5% noise: beyond ab_min_effect (1.5%), within the stored-run floor
    # (min_effect 3%): only the A/B threshold fails it
    from argparse import Namespace

    from perfgate.gate import settings
    from perfgate.measure import fingerprint

    gate = settings.load(overrides={"n_resamples": 500, "ab_min_effect": 0.015, "min_effect": 0.03})
    sides = {"base": FakeSide("base", {}, 1), "head": FakeSide("head", {"a": 1.02}, 2)}
    decisions, samples = ab_measure.measure_ab(sides, [{"name": "a"}], gate.stats, 40)
    monkeypatch.setattr(fingerprint, "collect", lambda: {"device_key": "nvidia-h200"})
    args = Namespace(base="HEAD", head=None, results_dir=tmp_path, json_out=None, markdown_out=None)
    code = ab.report(args, gate, decisions, samples, {"base": {}, "head": {}}, "b" * 40, None)
    report = json.loads((tmp_path / "ab.json").read_text())
    (row,) = report["benchmarks"]
    assert (code, row["verdict"], row["threshold"]) == (1, "regression", 0.015)
    assert "±1.5% (same-job A/B" in (tmp_path / "ab.md").read_text()


def test_every_ab_look_is_judged_at_alpha_over_looks(monkeypatch):
    from perfgate.gate import stats

    seen = []
    real = stats.compare_samples

    def recording(*args, **kwargs):
        seen.append((kwargs.get("looks"), kwargs.get("ab")))
        return real(*args, **kwargs)

    monkeypatch.setattr(stats, "compare_samples", recording)
    settings = Settings(n_resamples=300, looks=3)
    sides = {"base": FakeSide("base", {}, 1), "head": FakeSide("head", {"edge": 1.016}, 2)}
    ab_measure.measure_ab(sides, [{"name": "edge"}], settings, rounds=20)
    assert seen and set(seen) == {(3, True)}


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
        def __init__(self, label, root, env):
            roots[label] = (root, env, (root / "kernels").is_dir())
            super().__init__(label, {}, seed=len(roots))
            self.reducer_backend = "native"

        def close(self):
            pass

    monkeypatch.setattr(interleave, "SideProcess", Side)
    monkeypatch.setattr(
        ab_measure, "build", lambda root, cache, label: built.append((label, root, cache))
    )
    monkeypatch.setattr(fingerprint, "collect", lambda: {"device_key": "nvidia-h200"})
    gate = settings.load(overrides={"n_resamples": 500, "rounds.device": 20})
    args = Namespace(base="HEAD", head="HEAD", groups="leaderboard", keyword="m16-n2112-k7168",
                     results_dir=tmp_path / "results", json_out=None, markdown_out=None)  # fmt: skip
    assert ab._measure(args, gate) == 0
    report = json.loads((tmp_path / "results" / "ab.json").read_text())
    assert [b["verdict"] for b in report["benchmarks"]] == ["unchanged"]
    (base_root, base_env, base_tree), (head_root, head_env, head_tree) = roots.values()
    assert base_tree and head_tree and base_root != head_root  # two real checkouts
    assert base_root.name.startswith("base-") and head_root.name.startswith("head-")
    assert not base_root.exists() and not head_root.exists()  # both removed
    assert base_env["MXFP4_CACHE_DIR"] != head_env["MXFP4_CACHE_DIR"]
    assert [label for label, *_ in built] == ["base", "head"]
    listed = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True)
    assert len(listed.stdout.splitlines()) == 1  # git's list holds the checkout alone again
    head = revisions.resolve("HEAD")
    assert report["summary"]["baseline"] == f"base HEAD ({head[:12]})"
    assert report["summary"]["current"] == f"head HEAD ({head[:12]})"
