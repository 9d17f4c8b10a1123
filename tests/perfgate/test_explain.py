"""perfgate explain on the CPU: a planted history (tests/perfgate/planted_causes.py: one commit per cause,
in a clean clone of the kernels), each revision's facts computed by its own child, each pair
compared, and the planted cause ranked first; an unchanged pair explains nothing. The static
compiles are gfx950's and sm90's (no GPU needed); the host census runs its counted, not run,
launches. The per-kernel device split needs a GPU: here only its arithmetic, on a trace."""

from __future__ import annotations

import contextlib
import shutil

import pytest

from perfgate.explain import explain as ex
from perfgate.explain import ranking, revision, source_facts
from perfgate.explain.device_split import SplitError, split_rounds
from tests.perfgate import planted_causes

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="the chain is git commits")
SHAPE = (256, 3072, 1536)  # sm90's tuned entry: 64x256x128, split_k=2, 8 warps, 3 stages
BENCH = ex.Benchmark("m256-n3072-k1536", SHAPE, "m256-n3072-k1536")
TARGETS = ("sm90", "gfx950")


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """The planted chain in a repository holding this tree's kernels/ (all the children import
    of a revision), every commit's facts computed once: by sha, so nothing hides a change."""
    tmp = tmp_path_factory.mktemp("explain")
    src = planted_causes.kernels_repo(tmp / "src")
    clone = tmp / "clone"
    commits = planted_causes.make_chain(clone, SHAPE, src)
    sides = []
    from perfgate.revisions import worktree

    with contextlib.ExitStack() as stack:
        for label, sha in commits:
            root = stack.enter_context(worktree(sha, tmp, label, clone))
            sides.append(revision.Side(label, sha, root))
        deadline = revision.Deadline(None)
        facts = revision.static_and_host(sides, [SHAPE], TARGETS, deadline=deadline)
    return clone, commits, facts


def _explained(chain, cause: str) -> ex.BenchmarkExplanation:
    clone, commits, facts = chain
    labels = [label for label, _ in commits]
    i = labels.index(cause)
    (b_label, base), (h_label, head) = commits[i - 1], commits[i]
    per_side = {
        side: {"targets": facts[label]["static"]["256,3072,1536"],
               "host": facts[label]["host"]["256,3072,1536"], "device": None}
        for side, label in (("base", b_label), ("head", h_label))
    }  # fmt: skip
    source = source_facts.source_facts(clone, base, head)
    return ex.compare(BENCH, per_side, TARGETS, "sm90", source)


@pytest.mark.parametrize("cause", [c for c, e in planted_causes.EXPECTED.items() if e])
def test_each_planted_cause_is_ranked_first(chain, cause):
    bx = _explained(chain, cause)
    assert bx.ranked, bx.notes
    first = bx.ranked[0]
    assert (first.part, first.field) == planted_causes.EXPECTED[cause], [d.text for d in bx.ranked]
    assert not bx.notes, bx.notes  # every fact was compared


def test_the_causes_carry_their_numbers(chain):
    stages = _explained(chain, "stages").ranked[0]
    assert (stages.base, stages.head, stages.target) == (3, 2, "sm90")
    assert stages.text == "sm90 launch: config num_stages 3 -> 2"
    split = _explained(chain, "split-k").ranked
    assert split[0].text == "sm90 launch: config split_k 2 -> 1"
    kernels = next(d for d in split if d.field == "kernels")
    assert (kernels.base, kernels.head) == (["gemm", "reducer"], ["gemm"])
    alloc = _explained(chain, "allocation").ranked[0]
    assert alloc.head == alloc.base + 1
    assert "_Bound.__call__ > aten.empty" in alloc.text
    vector = _explained(chain, "vector").ranked[0]
    assert vector.target == "sm90" and vector.head > vector.base
    assert "kernels/_quant.py (the quantizer, fused into the GEMM kernel)" in vector.text


def test_gfx950_figures_for_every_revision_and_the_quantizer_seen_there_too(chain):
    _, commits, facts = chain
    for label, _ in commits:
        static = facts[label]["static"]["256,3072,1536"]["gfx950"]["static"]
        assert static["valu_per_wave"] > 0 and static["vgpr"] > 0, (label, static)
        assert static["instructions"].get("v_cvt_scalef32_pk_fp4_bf16"), label
    vector = _explained(chain, "vector")
    gfx = [d for d in vector.ranked if d.target == "gfx950" and d.field == "valu_per_wave"]
    assert gfx and gfx[0].head > gfx[0].base, [d.text for d in vector.ranked]
    # an sm90 table change is no gfx950 change
    assert not [d for d in _explained(chain, "stages").ranked if d.target == "gfx950"]


def test_an_unchanged_pair_explains_nothing(chain):
    bx = _explained(chain, "nothing")
    assert bx.ranked == [] and bx.notes == [] and bx.nothing_changed
    from perfgate.explain import render

    assert render.ranked_lines(bx) == [f"- {ex.NOTHING}"]


def test_the_command_explains_a_pair_end_to_end(chain, tmp_path, capsys):
    """python -m perfgate explain's path, in this process, on the unchanged pair and the
    split-K one of the clone (the children are real), with its JSON."""
    import json

    from perfgate.__main__ import main

    clone, commits, _ = chain
    shas = dict(commits)
    out = tmp_path / "e.json"
    argv = ["explain", "--base", shas["split-k"], "--head", shas["nothing"], "-k", BENCH.name,
            "--target", "sm90", "--device", "no", "--repo", str(clone), "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert ex.NOTHING in printed and "gfx950 static (GEMM kernel)" in printed
    answer = json.loads(out.read_text())
    assert answer["benchmarks"][0]["nothing_changed"] is True


# -- refusals: one line, exit 2 ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--base", "no-such-rev-41"], "names no commit"),
        (["--base", "HEAD", "-k", "m9-n9-k9"], "matches no benchmark"),
        (["--base", "HEAD", "--rounds", "0"], "--rounds"),
        (["--base", "HEAD", "--budget-s", "-1"], "--budget-s"),
    ],
)
def test_unusable_input_is_one_line_and_exit_2(argv, says, capsys):
    from perfgate.__main__ import main

    assert main(["explain", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("perfgate explain: error:") and says in err[0]


# -- the ranking and the device split's arithmetic (no compile) --------------------------------
def _launch(**over):
    cfg = dict(block_m=64, block_n=256, block_k=128, split_k=2, num_warps=8, num_stages=3)
    cfg.update(over)
    splits = 2 if cfg["split_k"] > 1 else 1
    return {"config": cfg, "splits": splits, "kernels": ["gemm", "reducer"][:splits],
            "quantizer": "portable (cast)", "grid": [48, splits]}  # fmt: skip


def test_a_config_change_outranks_what_it_causes():
    diffs = ranking.launch_differences(_launch(), _launch(num_stages=2), "sm90", own=True)
    diffs += ranking.static_differences(
        {"vgpr": 236, "valu_per_wave": 1000, "lds_bytes": 132096},
        {"vgpr": 200, "valu_per_wave": 1500, "lds_bytes": 88064},
        "sm90",
        True,
        [],
    )
    ranked = ranking.rank(diffs)
    assert [d.field for d in ranked] == ["num_stages", "valu_per_wave", "lds_bytes", "vgpr"]
    assert ranked[1].score == 50.0  # +50% vector work, weight 1
    assert ranked[2].score == pytest.approx(33.333 * 0.5 * ranking.FASTER, abs=1e-3)


def test_the_device_split_takes_precedence_and_names_the_kernels_cause():
    base = {"kernels": [{"role": "GEMM kernel (quantizer fused)", "median_us": 30.0}],
            "call_median_us": 31.0}  # fmt: skip
    head = {"kernels": [{"role": "GEMM kernel (quantizer fused)", "median_us": 36.0}],
            "call_median_us": 37.0}  # fmt: skip
    diffs = ranking.device_differences(base, head)
    diffs += ranking.static_differences({"valu_per_wave": 100}, {"valu_per_wave": 116}, "sm90", True,
                                        [{"path": "kernels/_quant.py", "role": "the quantizer"}])  # fmt: skip
    ranked = ranking.rank(diffs)
    assert ranked[0].part == "device" and ranked[0].score == pytest.approx(20.0)
    assert "+20.0%" in ranked[0].text and "ALU instructions per warp" in ranked[0].text
    assert "kernels/_quant.py" in ranked[0].text


def test_split_rounds_cuts_the_trace_at_the_flushes():
    trace = []
    for r in range(3):
        t = r * 100.0
        trace += [("flush", t, t + 10), ("gemm_a16wfp4_kernel", t + 11, t + 31 + r),
                  ("splitk_reduce", t + 32 + r, t + 35 + r)]  # fmt: skip
    split = split_rounds(trace, 3, 1)
    assert [k["role"] for k in split["kernels"]] == [
        "GEMM kernel (quantizer fused)",
        "split-K reducer",
    ]
    assert split["kernels"][0]["median_us"] == 21.0 and split["call_median_us"] == 25.0
    with pytest.raises(SplitError, match="not the same call"):
        split_rounds([*trace[:-1], ("other", 235.0, 236.0)], 3, 1)
    with pytest.raises(SplitError, match="do not split"):
        split_rounds(trace[:-1], 3, 1)


def test_merge_passes_pools_each_kernel():
    one = {"kernels": [{"name": "g", "role": "r", "median_us": 1.0, "samples_us": [1.0, 3.0]}],
           "call_samples_us": [2.0, 4.0], "call_median_us": 3.0, "rounds": 2}  # fmt: skip
    merged = ex.merge_passes([{"k": one}, {"k": {"error": "x"}}, {"k": one}])
    assert merged["k"]["kernels"][0]["samples_us"] == [1.0, 3.0, 1.0, 3.0]
    assert merged["k"]["rounds"] == 4
    assert ex.merge_passes([{"k": {"error": "x"}}])["k"] == {"error": "x"}


def test_a_pair_within_the_budget_says_what_it_could_not_finish(tmp_path):
    facts = revision.run_children(
        [tmp_path], "static", [SHAPE], TARGETS, deadline=revision.Deadline(0.5)
    )
    assert facts[tmp_path] == {
        "256,3072,1536": {"error": "not started: the time budget of 0.5 s was spent"}
    }


def test_a_revision_without_kernels_is_answered_without_a_child(tmp_path, monkeypatch):
    def no_child(*args, **kwargs):
        raise AssertionError("a child was started for a tree without kernels")

    monkeypatch.setattr(revision.spawn, "run", no_child)
    facts = revision.run_children([tmp_path], "host", [SHAPE], deadline=revision.Deadline(None))
    assert facts[tmp_path] == {"256,3072,1536": {"error": f"{tmp_path} has no kernels package"}}


def test_the_revisions_a_child_finished_in_time_still_count(tmp_path, monkeypatch):
    import json
    import subprocess

    done, late = tmp_path / "done", tmp_path / "late"
    for root in (done, late):
        (root / "kernels").mkdir(parents=True)
        (root / "kernels" / "__init__.py").write_text("")
    line = json.dumps({"root": str(done), "ok": True, "facts": {"256,3072,1536": {"x": 1}}})

    def timed_out(cmd, **kwargs):
        raise subprocess.TimeoutExpired(cmd, 9.0, output=(line + "\n").encode())

    monkeypatch.setattr(revision.spawn, "run", timed_out)
    facts = revision.run_children([done, late], "static", [SHAPE], TARGETS,
                                  deadline=revision.Deadline(9.0))  # fmt: skip
    assert facts[done] == {"256,3072,1536": {"x": 1}}
    assert facts[late] == {"256,3072,1536": {"error": "not finished within the time budget of 9 s"}}


_FORKS = """
import json, os, signal, sys
from pathlib import Path
from perfgate.explain import child
roots = [Path(sys.argv[1]) / str(i) for i in range(4)]
def compute(root):
    if root == roots[2]:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"ok": True, "pid": os.getpid(), "root": str(root)}
answers = {str(root): a for root, a in child.each_forked(roots, 2, compute)}
print(json.dumps({"forker": os.getpid(), "answers": answers}))
"""


def test_each_revision_is_computed_in_a_process_of_its_own(tmp_path):
    """The child's forks, from a process of one thread as the child is: every root answered
    once, none in the forking process, a crash one line."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _FORKS, str(tmp_path)], cwd=revision.PERFGATE_ROOT,
                          capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    got = json.loads(done.stdout)
    roots = [str(tmp_path / str(i)) for i in range(4)]
    answers = got["answers"]
    assert sorted(answers) == roots, done.stderr
    assert answers.pop(roots[2]) == {"ok": False, "error": "the revision's process was killed by SIGKILL"}  # fmt: skip
    assert all(a["root"] == root for root, a in answers.items())
    pids = {a["pid"] for a in answers.values()}
    assert len(pids) == 3 and got["forker"] not in pids


@pytest.mark.skipif(
    not __import__("kernels.interpreter").interpreter.interpret_mode(),
    reason="the dry census counts interpreted launches (TRITON_INTERPRET=1: the CPU job's)",
)
def test_the_dry_host_census_counts_where_the_interpreter_could_not_run_the_kernels(monkeypatch):
    # On the H200 (triton 3.6) the launcher refuses an interpreter that cannot run dot_scaled;
    # the census stubs every launch, so the host facts are counted all the same
    import kernels.device
    from perfgate.explain import host_facts

    problem = "triton 3.6.0's interpreter cannot run the kernels (planted)"
    monkeypatch.setattr(kernels.device, "INTERPRETER_PROBLEM", problem)
    facts = host_facts.host_facts((16, 64, 512))
    assert facts["dry_launches"] is True
    assert facts["totals"]["launches"] >= 1 and facts["totals"]["allocations"] >= 1
    assert problem == kernels.device.INTERPRETER_PROBLEM  # lifted only while counting
