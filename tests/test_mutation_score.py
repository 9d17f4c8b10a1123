"""tools/mutation_score: mutmut's results read into scores per package and module, the floors
that fail the nightly run, and what it refuses."""

from __future__ import annotations

import subprocess

import pytest

from tools import mutation_score as ms

RESULTS = """\
    perfgate.gate.process_ab.x_bounds__mutmut_1: killed
    perfgate.gate.process_ab.x_bounds__mutmut_2: survived
    perfgate.gate.process_ab.xǁDesignǁ__post_init____mutmut_3: timeout
    perfgate.gate.stats.x_compare__mutmut_1: no tests
    perfgate.history.detect.x_steps__mutmut_1: segfault
    kernels.gemm.x_gemm_a16wfp4__mutmut_1: suspicious
"""


def _results(monkeypatch, text=RESULTS, code=0):
    calls = []

    def run(cmd, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, code, text, "")

    monkeypatch.setattr(ms.spawn, "run", run)
    return calls


def test_scores_per_package_and_module(monkeypatch, capsys):
    calls = _results(monkeypatch)
    assert ms.main([]) == 0
    assert calls == [["mutmut", "results", "--all", "True"]]
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        "package  kernels                                  killed     0 of     1 (  0.0%)",
        "package  perfgate.gate                            killed     2 of     4 ( 50.0%)",
        "package  perfgate.history                         killed     1 of     1 (100.0%)",
    ]
    assert "module   perfgate.gate.process_ab                 killed     2 of     3 ( 66.7%)" in out
    assert [ln for ln in out if ln.startswith("alive")] == [
        "alive    perfgate.gate.process_ab.x_bounds__mutmut_2 (survived)",
        "alive    perfgate.gate.stats.x_compare__mutmut_1 (no tests)",
        "alive    kernels.gemm.x_gemm_a16wfp4__mutmut_1 (suspicious)",
    ]


@pytest.mark.parametrize(("floor", "code"), [("66.6", 0), ("66.7", 1), ("100", 1), ("0", 0)])
def test_a_floor_fails_below_it(monkeypatch, capsys, floor, code):
    _results(monkeypatch)
    assert ms.main(["--fail-under", f"perfgate.gate.process_ab={floor}"]) == code


@pytest.mark.parametrize(
    ("text", "code", "argv", "message"),
    [
        ("", 0, [], "nothing complete to score"),
        ("    kernels.gemm.x_f__mutmut_9: not checked\n", 0, [], "nothing complete to score"),
        (RESULTS + "    kernels.gemm.x_f__mutmut_9: odd\n", 0, [], "statuses ['odd']"),
        (
            RESULTS + "    kernels.gemm.x_f__mutmut_9: not checked\n",
            0,
            ["--fail-under", "kernels.gemm=0"],
            "kernels.gemm: its mutants were not all run",
        ),
        (RESULTS, 1, [], "mutmut results exited 1"),
        (RESULTS, 0, ["--fail-under", "perfgate.gate.nothing=90"], "were not all run"),
    ],
)
def test_nothing_to_score_is_exit_2(monkeypatch, capsys, text, code, argv, message):
    _results(monkeypatch, text, code)
    assert ms.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


@pytest.mark.parametrize("floor", ["perfgate.gate.process_ab", "=95", "m=101", "m=x"])
def test_a_bad_floor_is_a_usage_error(monkeypatch, floor):
    _results(monkeypatch)
    with pytest.raises(SystemExit) as stop:
        ms.main(["--fail-under", floor])
    assert stop.value.code == 2


def test_a_narrowed_run_scores_what_it_checked(monkeypatch, capsys):
    _results(monkeypatch, RESULTS + "    kernels.gemm.x_f__mutmut_9: not checked\n")
    assert ms.main(["--fail-under", "perfgate.gate.process_ab=50"]) == 0
    out = capsys.readouterr().out
    assert "unchecked 1 mutants of 1 modules" in out
    assert "module   kernels.gemm                             killed     0 of     1" in out
