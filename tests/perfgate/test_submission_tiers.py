"""The leaderboard tier outside pytest, on a CPU: :mod:`perfgate.submission.tiers` in a fresh
process (what ``bench --submission`` and the ``ab`` sides run before timing), its rule against
the harness's semantics, and the refusals of bench, update-baselines and ab (a file failing the
tier is never timed: exit 1, or 2 for an A/B base; a strict departure is no refusal)."""

from __future__ import annotations

import math

import pytest
import torch

from perfgate.__main__ import main
from perfgate.submission import load, tiers


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_cases_are_task_yml():
    assert [(c.kind, c.m, c.n, c.k, c.seed) for c in tiers.CHECKS] == [
        ("test", 8, 2112, 7168, 124), ("test", 16, 3072, 1536, 6635),
        ("test", 64, 3072, 1536, 45), ("test", 256, 2880, 512, 78),
        ("benchmark", 4, 2880, 512, 4565), ("benchmark", 16, 2112, 7168, 15),
        ("benchmark", 32, 4096, 512, 457), ("benchmark", 32, 2880, 512, 54),
        ("benchmark", 64, 7168, 2048, 687), ("benchmark", 256, 3072, 1536, 7856),
    ]  # fmt: skip
    bench = tiers.CHECKS[4]
    assert bench.seeds("cpu") == (4565,)
    gpu = bench.seeds("cuda")  # the first checked call, then seed + 13 before each timed one
    assert len(gpu) == 101 and gpu[:3] == (4565, 4578, 4591) and gpu[-1] == 4565 + 1300
    assert tiers.CHECKS[0].seeds("cuda") == (124,)


def _bf16(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32).to(torch.bfloat16)


@pytest.mark.parametrize(
    ("out", "ref", "bad"),
    [
        ([1.0, 100.0], [1.0, 100.0], [False, False]),
        ([1.0195, 0.0], [1.0, 0.0], [False, False]),  # 1.0195 in bf16 is 1.015625: within 0.02
        ([1.03125, 0.0], [1.0, 0.0], [True, False]),  # 0.03125 > 0.01 + 0.01
        ([math.nan, math.inf], [math.nan, math.inf], [False, False]),  # NaN/inf matched
        ([math.nan, -math.inf], [1.0, math.inf], [True, True]),
        ([3.0e38, 1.0], [math.inf, math.nan], [True, True]),
    ],
)
def test_the_rule_is_the_harnesses(out, ref, bad):
    assert tiers.rule_mismatches(_bf16(out), _bf16(ref)).tolist() == bad


def test_the_tolerance_is_computed_in_the_references_dtype():
    # 0.01 + 0.01 * 398 = 3.99 in float64, but 4.0 in bf16 (0.01 * 398 -> 3.984375, + 0.01 ->
    # 4.0): upstream accepts 402 against 398, where the suite's float64 rule would not
    from kernels.reference import check_leaderboard

    out, ref = _bf16([402.0]), _bf16([398.0])
    assert tiers.rule_mismatches(out, ref).tolist() == [False]
    assert not check_leaderboard(out, ref)
    assert tiers.rule_mismatches(_bf16([404.0]), ref).tolist() == [True]
    assert tiers.rule_failure([1], _bf16([1.0])) == "the output is a list, not a tensor"
    assert tiers.rule_failure(_bf16([1.0, 2.0]), _bf16([1.0])).startswith("SIZE MISMATCH")


def test_the_generator_passes_the_upstream_dtypes():
    data = tiers.leaderboard_input(4, 64, 128, 7, "cpu")
    if hasattr(torch, "float4_e2m1fn_x2"):
        assert [t.dtype for t in data[2:]] == [
            torch.float4_e2m1fn_x2, torch.float4_e2m1fn_x2, torch.float8_e8m0fnu
        ]  # fmt: skip
    assert [t.dtype for t in data[:2]] == [torch.bfloat16, torch.bfloat16]


def test_a_departure_names_class_element_and_bits():
    want = _bf16([[1.0, math.inf], [2.0, math.nan]])
    got = _bf16([[1.0, 3.0e38], [2.0, math.nan]])
    d = tiers.bit_departure("inf class", got, want)
    assert (d.cls, d.element, d.got, d.want, d.count, d.total) == (
        "inf class", (0, 1), 0x7F62, 0x7F80, 1, 4
    )  # fmt: skip
    assert str(d) == "departs in inf class; first at (0, 1): got 0x7F62 want 0x7F80; 1 of 4 differ"
    assert tiers.bit_departure("inf class", want.clone(), want) is None  # NaN by position
    import pickle

    assert pickle.loads(pickle.dumps(d)).as_dict() == d.as_dict()


# -- in a fresh process, as bench and ab run it -----------------------------------------------
def test_an_independent_file_passes_the_tier_in_a_fresh_process(third_party, monkeypatch):
    # On the CPU, wherever this runs: on a GPU the fresh process checks 101 seeds a benchmark,
    # minutes of this numpy file; the GPU's run of the tier in a fresh process is the GPU job's
    # `bench --submission` step, on the export.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "")
    assert tiers.check_file(third_party) == (
        f"perfgate: {third_party} passes the leaderboard tier on cpu (10 checks, 10 calls checked)"
    )


def test_a_wrong_file_fails_the_tier_naming_the_check(wrong_scale_rule):
    with pytest.raises(tiers.TierFailure) as info:
        tiers.check_file(wrong_scale_rule)
    assert str(info.value).startswith(
        f"{wrong_scale_rule} fails the leaderboard tier: test-m8-n2112-k7168 seed 124: "
    )


def test_a_file_without_custom_kernel_is_unusable(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("X = 1\n")
    with pytest.raises(load.SubmissionError, match=r"bad.py: defines no custom_kernel"):
        tiers.check_file(bad)


@pytest.mark.parametrize("command", ["bench", "update-baselines"])
def test_bench_never_times_a_file_the_leaderboard_rejects(
    command, wrong_scale_rule, capsys, monkeypatch
):
    from perfgate.commands import base
    from perfgate.measure import session

    monkeypatch.setattr(base, "gpu_available", lambda: True)  # past the GPU check, on a CPU
    ran = []
    monkeypatch.setattr(session, "run_mode", lambda *a, **k: ran.append(a) or (0, None))
    rc, out, err = _cli(capsys, command, "--submission", str(wrong_scale_rule))
    assert rc == 1 and ran == []
    assert (
        out.splitlines()[-1]
        == f"perfgate {command}: the leaderboard tier on {wrong_scale_rule} first"
    )
    (line,) = err.splitlines()
    assert line.startswith(
        f"perfgate {command}: {wrong_scale_rule} fails the leaderboard tier: test-m8-n2112-k7168 "
    ) and line.endswith("; not timed")


# A file that passes the tier at the reference's cost: the side checked before the rejected one
# (the third-party file passes too, at three times the cost; its own test is above).
THE_REFERENCE = """from kernels.reference import reference_gemm


def custom_kernel(data):
    a, _b, _b_q, b_shuffle, b_scale_sh = data
    return reference_gemm(a, b_shuffle, b_scale_sh)
"""


@pytest.mark.parametrize(("side", "code"), [("head", 1), ("base", 2)])
def test_ab_never_times_a_file_the_leaderboard_rejects(
    side, code, wrong_scale_rule, capsys, monkeypatch
):
    from perfgate.commands import base
    from perfgate.measure import ab as ab_measure

    monkeypatch.setattr(base, "gpu_available", lambda: True)
    monkeypatch.setattr(ab_measure, "run_submissions", lambda *a, **k: pytest.fail("timed"))
    passing = wrong_scale_rule.parent / "the_reference.py"
    passing.write_text(THE_REFERENCE)
    files = {"base": passing, "head": passing, side: wrong_scale_rule}
    rc, out, err = _cli(capsys, "ab", "--base-submission", str(files["base"]),
                        "--head-submission", str(files["head"]), "--groups", "leaderboard",
                        "--results-dir", str(wrong_scale_rule.parent / "r"))  # fmt: skip
    assert rc == code
    (line,) = err.splitlines()
    assert line.startswith(
        f"perfgate ab: error: --{side}-submission: {wrong_scale_rule} fails the leaderboard tier: "
    ) and line.endswith("; not timed")
    if side == "head":  # the base was checked first and passed
        assert f"perfgate ab: base: perfgate: {passing} passes the leaderboard tier" in out
