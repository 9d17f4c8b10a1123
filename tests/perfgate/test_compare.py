"""``perfgate compare``: matching, verdicts, exit codes, refusals, warnings and the reports."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from perfgate import atomic
from perfgate.gate import compare
from perfgate.gate.stats import Settings

LB = "tests/perf/test_gemm.py::test_leaderboard[m64-n7168-k2048]"
GRID = "tests/perf/test_gemm.py::test_grid[m1|n4096-k512]"  # a pipe: markdown must escape it
RED = "tests/perf/test_reducer.py::test_reduce[s4]"
# Settings for speed only: fewer bootstrap resamples do not change these clear-cut verdicts.
FAST = Settings(n_resamples=500)


@pytest.fixture
def bench(gpu_like):
    """Three benchmarks' samples; seed offset gives an independent rerun of the same build."""

    def make(offset: int = 0, **factors: float) -> dict[str, list[float]]:
        names = {"lb": LB, "grid": GRID, "red": RED}
        return {
            name: gpu_like(seed + offset, median=m, factor=factors.get(key, 1.0))
            for seed, (key, name), m in zip(
                range(3), names.items(), (20e-6, 5e-6, 2e-6), strict=True
            )
        }

    return make


def run(baseline, current, settings=FAST, **kwargs):
    """compare_files with a captured console; returns (exit code, console text)."""
    out = io.StringIO()
    console = Console(file=out, width=250, color_system=None)
    code = compare.compare_files(baseline, current, settings=settings, console=console, **kwargs)
    return code, out.getvalue()


def verdicts(json_path) -> dict[str, str]:
    report = json.loads(json_path.read_text())
    return {b["name"]: b["verdict"] for b in report["benchmarks"]}


# --- verdicts and exit codes -------------------------------------------------------------------


def test_file_compared_with_itself_is_all_unchanged(write_result, bench, tmp_path):
    path = write_result("base.json", bench())
    code, text = run(path, path, json_out=tmp_path / "o.json")
    assert code == 0
    assert verdicts(tmp_path / "o.json") == {LB: "unchanged", GRID: "unchanged", RED: "unchanged"}
    report = json.loads((tmp_path / "o.json").read_text())
    for row in report["benchmarks"]:
        # Identical samples: the ratio is exactly 1. The bootstrap resamples the two sides
        # independently, so the interval has a width, around 1.
        assert row["ratio"] == 1.0
        assert row["ci_low"] < 1.0 < row["ci_high"]
    assert "PASS: 3 unchanged" in text


def test_rerun_of_same_build_passes(write_result, bench):
    code, text = run(write_result("b.json", bench(0)), write_result("c.json", bench(100)))
    assert code == 0
    # Full names, brackets included: rich must not read "[m64-n7168-k2048]" as a markup tag.
    assert LB in text and GRID in text and RED in text


def test_injected_5_percent_slowdown_fails_the_gate(write_result, bench, tmp_path):
    base = write_result("b.json", bench(0))
    cur = write_result("c.json", bench(100, grid=1.05))
    code, text = run(base, cur, json_out=tmp_path / "o.json")
    assert code == 1
    assert verdicts(tmp_path / "o.json") == {LB: "unchanged", GRID: "regression", RED: "unchanged"}
    assert "FAIL: 1 regression, 2 unchanged" in text


def test_improvement_passes(write_result, bench, tmp_path):
    base = write_result("b.json", bench(0))
    cur = write_result("c.json", bench(100, lb=0.93))
    code, _ = run(base, cur, json_out=tmp_path / "o.json")
    assert code == 0
    assert verdicts(tmp_path / "o.json")[LB] == "improvement"


def test_new_benchmark_passes(write_result, bench, gpu_like, tmp_path):
    base = write_result("b.json", bench(0))
    cur = write_result("c.json", {**bench(100), "t.py::fresh": gpu_like(9)})
    code, _ = run(base, cur, json_out=tmp_path / "o.json")
    assert code == 0
    rows = json.loads((tmp_path / "o.json").read_text())["benchmarks"]
    row = next(r for r in rows if r["name"] == "t.py::fresh")
    assert row["verdict"] == "new"
    assert row["ratio"] is None and row["n_baseline"] is None and row["n_current"] == 30


@pytest.mark.parametrize(("allow_missing", "expected"), [(False, 1), (True, 0)])
def test_missing_benchmark_fails_unless_allowed(
    write_result, bench, tmp_path, allow_missing, expected
):
    base = write_result("b.json", bench(0))
    current = bench(100)
    del current[RED]
    cur = write_result("c.json", current)
    code, _ = run(base, cur, json_out=tmp_path / "o.json", allow_missing=allow_missing)
    assert code == expected
    assert verdicts(tmp_path / "o.json")[RED] == "missing"


@pytest.mark.parametrize(
    ("n_base", "n_cur"),
    [
        (3, 30),  # a 3-round current run: the "too short to judge" case
        (30, 3),  # a 3-round baseline is no better
        (1, 1),  # one sample a side, 50% slower: once printed "PASS: 1 inconclusive"
        (9, 30),  # one below min_samples (10)
    ],
)
def test_too_few_rounds_never_passes(write_result, gpu_like, tmp_path, capsys, n_base, n_cur):
    base = write_result("b.json", {LB: gpu_like(1, n=n_base)})
    cur = write_result("c.json", {LB: gpu_like(2, n=n_cur, factor=1.5)})
    code, _ = run(base, cur, json_out=tmp_path / "o.json")
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "rerun with at least 10 rounds" in err
    assert not (tmp_path / "o.json").exists()


def test_exactly_min_samples_is_judged(write_result, gpu_like, tmp_path):
    base = write_result("b.json", {LB: gpu_like(1, n=10)})
    cur = write_result("c.json", {LB: gpu_like(2, n=10, factor=1.5)})
    code, _ = run(base, cur, json_out=tmp_path / "o.json")
    assert code == 1 and verdicts(tmp_path / "o.json") == {LB: "regression"}


@pytest.mark.parametrize(("inconclusive_exit", "expected"), [(1, 1), (0, 0)])
def test_inconclusive_fails_unless_configured_to_warn(
    write_result, gpu_like, tmp_path, inconclusive_exit, expected
):
    # A 3% shift at 1% noise sits on the 3% threshold: the grey zone.
    base = write_result("b.json", {LB: gpu_like(1, n=30)})
    cur = write_result("c.json", {LB: gpu_like(2, n=30, factor=1.03)})
    settings = dataclasses.replace(FAST, inconclusive_exit=inconclusive_exit)
    code, _ = run(base, cur, settings, json_out=tmp_path / "o.json")
    assert verdicts(tmp_path / "o.json") == {LB: "inconclusive"}
    assert code == expected


# --- unusable input: exit 2, one line on stderr ------------------------------------------------


def _corrupt(path, how):
    data = json.loads(path.read_text())
    if how == "invalid json":
        path.write_text(path.read_text()[:-20])
        return
    if how == "empty benchmarks":
        data["benchmarks"] = []
    elif how == "no stats.data":
        del data["benchmarks"][1]["stats"]["data"]
    elif how == "negative sample":
        data["benchmarks"][1]["stats"]["data"][3] = -2e-6
    elif how == "duplicate fullname":
        data["benchmarks"].append(data["benchmarks"][0])
    elif how == "no perfgate block":
        del data["machine_info"]["perfgate"]
    path.write_text(json.dumps(data))


CORRUPTIONS = [
    ("missing file", "no such file"),
    ("invalid json", "not valid JSON"),
    ("empty benchmarks", "'benchmarks' must be a non-empty list"),
    ("no stats.data", "has no stats.data"),
    ("negative sample", "stats.data[3] is -2e-06"),
    ("duplicate fullname", "duplicate benchmark fullname"),
    ("no perfgate block", "no machine_info.perfgate block"),
]


@pytest.mark.parametrize("side", ["baseline", "current"])
@pytest.mark.parametrize(("how", "message"), CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_unusable_file_exits_2(write_result, bench, capsys, side, how, message):
    paths = {
        "baseline": write_result("b.json", bench(0)),
        "current": write_result("c.json", bench(1)),
    }
    bad = paths[side]
    if how == "missing file":
        bad.unlink()
    else:
        _corrupt(bad, how)
    code, text = run(paths["baseline"], paths["current"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # exactly one line
    assert err.startswith(f"perfgate compare: error: {bad}: ")
    assert message in err
    assert text == ""  # no report for unusable input


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"device_key": "gfx950-mi355x"}, "device mismatch: "),
        # Same key, different silicon (a MIG slice, a CPX partition): timings are not comparable.
        ({"compute_units": 66}, "fingerprint.compute_units is 132 in "),
        ({"arch": "sm100"}, "fingerprint.arch is 'sm90' in "),
        ({"mode": "leaderboard"}, "timing mode mismatch: "),
    ],
)
def test_device_or_mode_mismatch_is_refused(write_result, bench, capsys, change, message):
    base = write_result("b.json", bench(0))
    cur = write_result("c.json", bench(1), **change)
    code, text = run(base, cur)
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert text == ""


def test_device_mismatch_message_names_both_devices_and_the_fix(write_result, bench, capsys):
    base = write_result("b.json", bench(0))
    cur = write_result("c.json", bench(1), device_key="gfx950-mi355x")
    run(base, cur)
    err = capsys.readouterr().err
    assert "'nvidia-h200'" in err and "'gfx950-mi355x'" in err
    assert "perf_baselines/gfx950-mi355x/" in err


# --- fingerprint warnings ------------------------------------------------------------------------


@pytest.mark.parametrize("slowdown", [1.0, 1.05])
def test_fingerprint_difference_warns_loudly_but_exits_as_usual(
    write_result, bench, tmp_path, slowdown
):
    base = write_result("b.json", bench(0))
    cur = write_result(
        "c.json",
        bench(100, red=slowdown),
        driver="575.51.03",
        clocks={"sm_mhz": 1755, "mem_mhz": 3201},
        git_commit="fedcba9",
    )
    code, text = run(base, cur, json_out=tmp_path / "o.json", markdown_out=tmp_path / "o.md")
    assert code == (1 if slowdown > 1 else 0)
    expected = [
        "clocks.sm_mhz: baseline 1980 → current 1755",
        "driver: baseline '570.124.06' → current '575.51.03'",
    ]
    summary = json.loads((tmp_path / "o.json").read_text())["summary"]
    assert summary["warnings"] == expected  # git_commit is expected to differ: not a warning
    assert summary["notes"] == ["git_commit: baseline 0123abc → current fedcba9"]
    assert "WARNING: the environment differs" in text
    assert all(w in text for w in expected)
    md = (tmp_path / "o.md").read_text()
    assert "> [!WARNING]" in md and all(f"> - {w}" in md for w in expected)


def test_no_warning_when_fingerprints_match(write_result, bench, tmp_path):
    path = write_result("b.json", bench(0))
    _, text = run(path, path, markdown_out=tmp_path / "o.md")
    assert "WARNING" not in text
    assert "WARNING" not in (tmp_path / "o.md").read_text()


# --- the JSON and markdown reports ---------------------------------------------------------------


def test_json_report(write_result, bench, tmp_path):
    base = write_result("b.json", bench(0))
    cur = write_result("c.json", bench(100, grid=1.10))
    settings = dataclasses.replace(FAST, min_effect=0.04, alpha=0.005)
    code = run(base, cur, settings, json_out=tmp_path / "o.json")[0]
    report = json.loads((tmp_path / "o.json").read_text())
    assert code == report["summary"]["exit_code"] == 1
    assert [b["name"] for b in report["benchmarks"]] == [GRID, LB, RED]  # severity, then name
    row = report["benchmarks"][0]
    assert set(row) == {
        "name", "verdict", "ratio", "ci_low", "ci_high", "p_value", "threshold", "noise",
        "baseline_median", "current_median", "n_baseline", "n_current", "looks", "reason",
    }  # fmt: skip
    assert row["verdict"] == "regression"
    assert row["ci_low"] > 1.04 and row["ci_low"] < row["ratio"] < row["ci_high"]
    assert row["p_value"] < 0.005
    assert row["threshold"] >= 0.04
    assert row["current_median"] / row["baseline_median"] == pytest.approx(row["ratio"], rel=1e-12)
    assert (row["n_baseline"], row["n_current"]) == (30, 30)
    summary = report["summary"]
    assert summary["headline"] == "FAIL: 1 regression, 2 unchanged"
    assert summary["counts"] == {
        "regression": 1, "missing": 0, "inconclusive": 0, "improvement": 0, "new": 0,
        "unchanged": 2,
    }  # fmt: skip
    assert (summary["baseline"], summary["current"]) == (str(base), str(cur))
    assert (summary["device_key"], summary["mode"]) == ("nvidia-h200", "device")
    assert summary["settings"]["alpha"] == 0.005
    assert summary["settings"]["min_effect"] == 0.04
    assert summary["settings"]["confidence"] == 1 - 2 * 0.005


def test_markdown_report(write_result, bench, tmp_path):
    base = write_result("b.json", bench(0))
    cur = write_result("c.json", bench(100, grid=1.10, lb=0.9))
    run(base, cur, markdown_out=tmp_path / "o.md")
    lines = (tmp_path / "o.md").read_text().splitlines()
    assert lines[0] == "### perfgate FAIL: 1 regression, 1 improvement, 1 unchanged"
    rows = [line for line in lines if line.startswith("| **")]
    assert [r.split(" | ")[0] for r in rows] == [
        "| **regression**",
        "| **improvement**",
        "| **unchanged**",
    ]
    # A pipe in a name is escaped, or the table would gain a column.
    grid_row = rows[0]
    assert "`tests/perf/test_gemm.py::test_grid[m1\\|n4096-k512]`" in grid_row
    header = next(line for line in lines if line.startswith("| verdict"))
    cells = grid_row.replace("\\|", "").count("|")
    assert cells == header.count("|")
    assert "+10." in grid_row.split(" | ")[2]  # change column, e.g. +10.1%
    # Unchanged rows are folded away, after the rows that need a look.
    details = lines.index("<details>")
    assert lines[details + 1] == "<summary>1 unchanged</summary>"
    assert lines.index(rows[-1]) > details > lines.index(rows[0])


def test_every_report_echoes_every_setting(write_result, bench, tmp_path):
    path = write_result("b.json", bench(0))
    settings = dataclasses.replace(FAST, min_effect=0.07, seed=3, min_samples=12)
    _, text = run(
        path, path, settings, json_out=tmp_path / "o.json", markdown_out=tmp_path / "o.md"
    )
    used = {
        "alpha": 0.01, "min_effect": 0.07, "noise_factor": 2.0, "min_samples": 12,
        "n_resamples": 500, "seed": 3,
    }  # fmt: skip
    echoed = json.loads((tmp_path / "o.json").read_text())["summary"]["settings"]
    assert {k: echoed[k] for k in used} == used
    assert echoed["confidence"] == pytest.approx(0.98) and echoed["allow_missing"] is False
    # The console caption may wrap: compare the words.
    assert "settings: alpha=0.01, confidence=0.98, min_effect=0.07" in " ".join(text.split())
    markdown = (tmp_path / "o.md").read_text()
    assert "`n_resamples=500`, `bootstrap_max_samples=2000`, `seed=3`" in markdown
    assert "`allow_missing=false`" in markdown and "`ab=" not in markdown  # no round-level A/B
    for key in used:
        assert f"{key}=" in text and f"`{key}=" in markdown, key


def test_unwritable_output_is_exit_2_before_any_work(write_result, bench, tmp_path, capsys):
    path = write_result("b.json", bench(0))
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, text = run(path, path, json_out=blocker / "o.json")  # parent is a file
    assert code == 2 and text == ""  # refused before the comparison, no report printed
    assert capsys.readouterr().err == (
        f"perfgate compare: error: --json {blocker / 'o.json'}: {blocker} is a file, expected "
        "a directory\n"
    )


def test_a_write_that_fails_late_is_exit_2(write_result, bench, tmp_path, capsys, monkeypatch):
    from perfgate import atomic

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    path = write_result("b.json", bench(0))
    monkeypatch.setattr(atomic, "write_json", full)
    code, _ = run(path, path, json_out=tmp_path / "o.json")
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write the report" in err and "No space" in err


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("/proc/x.json", "cannot write in /proc"),
        ("/proc/no/such/dir/x.json", "cannot write in /proc"),
        ("DIR", "is a directory, expected a file path"),
    ],
)
def test_an_output_where_nothing_can_be_written_is_exit_2(
    write_result, bench, tmp_path, capsys, where, message
):
    if where.startswith("/proc") and not Path("/proc/self").is_dir():
        pytest.skip("no /proc on this system")
    path = write_result("b.json", bench(0))
    out = tmp_path if where == "DIR" else Path(where)
    code, text = run(path, path, markdown_out=out)
    err = capsys.readouterr().err
    assert code == 2 and text == "" and err.count("\n") == 1, err
    assert err.startswith(f"perfgate compare: error: --markdown {out}: ") and message in err


@pytest.mark.parametrize(
    ("flag", "target", "named"),
    [
        ("json_out", "b.json", "BASELINE.json"),
        ("markdown_out", "b.json", "BASELINE.json"),
        ("json_out", "c.json", "CURRENT.json"),
        ("markdown_out", "link-to-b.json", "BASELINE.json"),  # a symlink to the baseline
        ("json_out", "hard-b.json", "BASELINE.json"),  # a hard link: the same file
    ],
)
def test_no_output_is_ever_written_over_an_input(
    write_result, bench, tmp_path, capsys, flag, target, named
):
    base = write_result("b.json", bench(0))
    cur = write_result("c.json", bench(1))
    (tmp_path / "link-to-b.json").symlink_to(base)
    import os

    os.link(base, tmp_path / "hard-b.json")
    before = {p: p.read_bytes() for p in (base, cur)}
    out = tmp_path / target
    code, text = run(base, cur, **{flag: out})
    assert code == 2 and text == ""
    err = capsys.readouterr().err
    option = "--json" if flag == "json_out" else "--markdown"
    source = base if named == "BASELINE.json" else cur
    assert err == (
        f"perfgate compare: error: {option} {out} is the input {named} {source}: an output is "
        f"never written over an input; give {option} another path\n"
    )
    assert {p: p.read_bytes() for p in (base, cur)} == before  # both inputs untouched


def test_two_outputs_naming_one_file_are_refused(write_result, bench, tmp_path, capsys):
    path = write_result("b.json", bench(0))
    out = tmp_path / "report"
    code, _ = run(path, path, json_out=out, markdown_out=out)
    assert code == 2 and not out.exists()
    assert "--json " in capsys.readouterr().err


def test_the_settings_file_is_never_an_output(write_result, bench, capsys):
    from perfgate.gate.settings import PYPROJECT

    before = PYPROJECT.read_bytes()
    path = write_result("b.json", bench(0))
    assert run(path, path, json_out=PYPROJECT)[0] == 2
    assert capsys.readouterr().err == (
        f"perfgate compare: error: --json {PYPROJECT}: is a tracked file or folder of the "
        "repository; an output never replaces or joins the project's own files: give a path "
        "outside them (e.g. under .perfgate/)\n"
    )
    assert PYPROJECT.read_bytes() == before


def test_the_settings_file_is_an_input_even_outside_a_checkout(write_result, bench, monkeypatch):
    # an installed copy, or one git cannot read: the settings file is still never an output
    from perfgate import atomic
    from perfgate.gate.compare import check_outputs
    from perfgate.gate.settings import PYPROJECT

    monkeypatch.setattr(atomic, "check_not_tracked", lambda *a, **k: None)
    with pytest.raises(atomic.OutputError, match="is the input the settings file"):
        check_outputs({"--json": PYPROJECT}, {})


# --- input classes that once crashed (a traceback is exit 1: CI would read a regression) -----


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            lambda good: good.replace('"extra_info": {}', '"extra_info": [1, 2]', 1),
            "benchmark 'tests/perf/test_gemm.py::test_leaderboard[m64-n7168-k2048]': extra_info "
            "is a JSON array, expected an object",
        ),
        (lambda good: "[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (lambda good: '{"a":' * 100_000 + "1" + "}" * 100_000, "nested too deeply"),
        (
            lambda good: re.sub(r'"data": \[\s*[0-9.e-]+', '"data": [1' + "0" * 400, good, count=1),
            "stats.data[0] is 10000000000000000000...(401 characters); samples must be finite "
            "seconds > 0, in [1e-15, 10000]",
        ),
        (
            lambda good: re.sub(r'"data": \[\s*[0-9.e-]+', '"data": [5e-324', good, count=1),
            "stats.data[0] is 5e-324; samples must be finite seconds > 0",
        ),
    ],
    ids=["extra_info-list", "nested-arrays", "nested-objects", "10**400", "subnormal"],
)
@pytest.mark.parametrize("side", ["baseline", "current"])
def test_inputs_that_once_crashed_are_one_line_exit_2(
    write_result, bench, tmp_path, capsys, side, text, message
):
    paths = {
        "baseline": write_result("b.json", bench(0)),
        "current": write_result("c.json", bench(1)),
    }
    bad = paths[side]
    bad.write_text(text(bad.read_text()))
    code, out = run(paths["baseline"], paths["current"])
    err = capsys.readouterr().err
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"perfgate compare: error: {bad}: ") and message in err, err


def test_bad_settings_are_a_caller_error(write_result, bench):
    path = write_result("b.json", bench(0))
    with pytest.raises(
        TypeError, match=r"settings must be a perfgate\.gate\.settings\.Settings, got dict"
    ):
        compare.compare_files(path, path, settings={"alpha": 0.01})


# --- the command line ----------------------------------------------------------------------------


def cli(argv: list[str]) -> int:
    """The command as ``python -m perfgate`` runs it (its refusals are answered there)."""
    from perfgate.__main__ import main

    return main(argv)


def test_cli_gate(write_result, bench, tmp_path, capsys):
    base = write_result("b.json", bench(0))
    cur = write_result("c.json", bench(100, red=1.08))
    out = tmp_path / "o.json"
    argv = [
        "compare",
        str(base),
        str(cur),
        "--json",
        str(out),
        "--markdown",
        str(tmp_path / "m.md"),
    ]
    assert cli([*argv, "--resamples", "500"]) == 1
    assert verdicts(out)[RED] == "regression"
    assert (tmp_path / "m.md").read_text().startswith("### perfgate FAIL: 1 regression")
    # The same slowdown is below a 10% minimum effect.
    assert cli([*argv, "--resamples", "500", "--min-effect", "0.10"]) == 0
    assert verdicts(out)[RED] != "regression"
    assert "FAIL" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--alpha", "0.7"], "alpha must be a number in (0, 0.5), got 0.7"),
        (["--min-effect", "5"], "min_effect must be a fraction"),  # 5 meant 5%?
        # a zero threshold is never met: a file against itself would be inconclusive, exit 1
        (
            ["--min-effect", "0"],
            "min_effect must be a fraction in (0, 1), e.g. 0.03 for 3%, got 0.0",
        ),
        (["--min-effect-drift", "0"], "min_effect_drift must be a fraction in (0, 1)"),
        (["--resamples", "10"], "n_resamples must be an int in [100, 100000], got 10"),
        (["--min-samples", "1"], "min_samples must be an int in [3, 10000], got 1"),
        (["--n-resamples", "100000000"], "n_resamples must be an int in [100, 100000]"),
    ],
)
def test_cli_bad_option_is_exit_2(write_result, bench, capsys, option, message):
    path = write_result("b.json", bench(0))
    assert cli(["compare", str(path), str(path), *option]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_cli_settings_come_from_pyproject_and_options_override_them(
    write_result, bench, tmp_path, monkeypatch
):
    from perfgate.gate import settings

    seen = []
    monkeypatch.setattr(compare, "compare_files", lambda *a, **k: seen.append(k["settings"]) or 0)
    path = write_result("b.json", bench(0))
    assert cli(["compare", str(path), str(path)]) == 0
    assert cli(["compare", str(path), str(path), "--seed", "4", "--noise-factor", "3"]) == 0
    assert seen[0] == settings.defaults().stats == Settings()
    assert seen[1] == dataclasses.replace(Settings(), seed=4, noise_factor=3.0)


def test_a_command_module_that_fails_to_import_is_an_error_naming_it(tmp_path, monkeypatch, capsys):
    from perfgate import __main__ as entry

    (tmp_path / "broken_command.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, cause in [
        ("broken_command", "No module named 'no_such_dependency_xyz'"),
        ("perfgate.no_such_command", "No module named 'perfgate.no_such_command'"),
    ]:
        monkeypatch.setattr(entry, "_COMMAND_MODULES", ("perfgate.commands.compare", name))
        with pytest.raises(entry.CommandImportError, match=re.escape(name)):
            entry.build_parser()
        assert entry.main(["compare", "--help"]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"perfgate: error: command module {name} failed to import "
            f"(ModuleNotFoundError: {cause})\n"
        )


def test_cli_missing_file_is_exit_2(tmp_path, capsys):
    assert cli(["compare", str(tmp_path / "nope.json"), str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_cli_allow_missing(write_result, bench):
    base = write_result("b.json", bench(0))
    current = bench(100)
    del current[LB]
    cur = write_result("c.json", current)
    assert cli(["compare", str(base), str(cur), "--resamples", "500"]) == 1
    assert cli(["compare", str(base), str(cur), "--resamples", "500", "--allow-missing"]) == 0


def test_python_m_perfgate_compare_entry_point(write_result, bench, tmp_path):
    # The real command line, in a subprocess: registration in perfgate/__main__.py and the exit
    # code reaching the shell.
    base = write_result("b.json", bench(0))
    cur = write_result("c.json", bench(100, lb=1.08))
    cmd = [sys.executable, "-m", "perfgate", "compare", str(base), str(cur), "--resamples", "200"]
    root = Path(compare.__file__).parents[2]  # the repository, whatever pytest's cwd
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=root)
    assert done.returncode == 1, done.stderr
    assert "FAIL: 1 regression, 2 unchanged" in done.stdout
    done = subprocess.run(
        [*cmd[:4], str(tmp_path / "none.json"), str(cur)],
        capture_output=True,
        text=True,
        check=False,
        cwd=root,
    )
    assert done.returncode == 2
    assert done.stderr == f"perfgate compare: error: {tmp_path / 'none.json'}: no such file\n"


# --- a large input (500 benchmarks x 10k samples once ran 600 s and grew to 1.8 GB) -----------
def test_large_sides_stay_bounded_in_memory_and_bootstrap_size(write_result, tmp_path, monkeypatch):
    import tracemalloc

    import numpy as np
    import scipy.stats

    rng = np.random.default_rng(0)
    names = [f"tests/perf/test_grid.py::test_grid[m{i}]" for i in range(6)]
    base = write_result("b.json", {n: list(1e-5 * (1 + 0.01 * rng.standard_normal(10_000)))
                                   for n in names})  # fmt: skip
    cur = write_result("c.json", {n: list(1e-5 * (1 + 0.01 * rng.standard_normal(10_000)))
                                  for n in names})  # fmt: skip
    sizes = []
    real = scipy.stats.bootstrap

    def recording(data, *args, **kwargs):
        sizes.append((max(len(x) for x in data), kwargs["batch"]))
        return real(data, *args, **kwargs)

    monkeypatch.setattr(scipy.stats, "bootstrap", recording)
    settings = dataclasses.replace(FAST, n_resamples=2000, bootstrap_max_samples=1000)
    tracemalloc.start()
    try:
        code, _ = run(base, cur, settings, json_out=tmp_path / "o.json")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 0 and set(verdicts(tmp_path / "o.json").values()) == {"unchanged"}
    # every bootstrap saw at most 1000 samples a side, in batches of at most 2M elements
    assert len(sizes) == len(names)
    assert all(n <= 1000 and n * batch <= 2_000_000 for n, batch in sizes)
    # one unbatched 10k x 2000 resample matrix alone would be 160 MB
    assert peak < 120e6, f"peak {peak / 1e6:.0f} MB"


# --- the report states what the verdicts used -------------------------------------------------


def test_a_plain_comparison_reports_the_one_look_it_took(write_result, bench, tmp_path):
    # the table's looks (3) are adaptive rounds: a comparison of two files takes one look, at
    # the full alpha, and its footnote and settings must say so
    base = write_result("b.json", bench(0))
    cur = write_result("c.json", bench(100, grid=1.10))
    settings = dataclasses.replace(FAST, looks=3)
    _, text = run(base, cur, settings, json_out=tmp_path / "o.json", markdown_out=tmp_path / "o.md")
    assert json.loads((tmp_path / "o.json").read_text())["summary"]["settings"]["looks"] == 1
    markdown = (tmp_path / "o.md").read_text()
    assert "one-sided Mann-Whitney U test gives p < 0.01 and" in markdown
    assert "looks" not in " ".join(text.split()).split("settings:")[0]
    assert "/ 3 looks" not in markdown and "`looks=1`" in markdown


def test_a_report_of_adaptive_looks_states_the_level_of_each(tmp_path):
    from perfgate.gate.report import Row

    rows = [Row("a", "unchanged", "r", ratio=1.0, ci_low=0.99, ci_high=1.01, threshold=0.03)]
    report = compare.make_report(rows, FAST, baseline_path="b", current_path="c",
                                 device_key="k", mode="device", allow_missing=False, looks=3)  # fmt: skip
    assert report.settings["looks"] == 3
    from perfgate.gate.report import render_markdown

    assert "gives p < 0.01 / 3 looks and" in render_markdown(report)


# --- pooled baselines: their drift sets the threshold, and --min-effect reaches it --------------


def _pooled(make_result, gpu_like, medians_factor, names=(LB,), n=60):
    """A baseline pooled from three runs whose medians sit at ``medians_factor`` x 20 us."""
    from perfgate.gate import baseline as bl

    runs = [
        make_result({name: gpu_like(10 * r + i, n, factor=f) for i, name in enumerate(names)})
        for r, f in enumerate(medians_factor)
    ]
    return bl.pool_runs(runs)


def test_compare_against_a_pooled_baseline_uses_its_drift(
    write_result, make_result, gpu_like, tmp_path
):
    # run medians 1.00, 1.02, 1.04: drift = 1.4826 x MAD 0.02 / 1.02 = 2.907%, threshold
    # 3 x that = 8.72%, far above the 2.5% floor and the 3% single-run floor: a 6% slowdown is
    # not a regression against it, though it is against one run of the same samples

    pooled = _pooled(make_result, gpu_like, (1.00, 1.02, 1.04))
    medians = pooled["benchmarks"][0]["extra_info"]["perfgate_runs"]["medians"]
    expected = (
        3 * 1.4826 * sorted(abs(m - sorted(medians)[1]) for m in medians)[1] / sorted(medians)[1]
    )
    assert 0.07 < expected < 0.10
    base = write_result("b.json", pooled)
    cur = write_result("c.json", {LB: gpu_like(99, 60, factor=1.02 * 1.06)})
    code, _ = run(base, cur, json_out=tmp_path / "o.json")
    (row,) = json.loads((tmp_path / "o.json").read_text())["benchmarks"]
    assert row["threshold"] == pytest.approx(expected, rel=1e-12)
    assert (code, row["verdict"]) == (0, "unchanged")
    single = dict(pooled, benchmarks=[dict(pooled["benchmarks"][0], extra_info={})])
    atomic.write_json(tmp_path / "single.json", single)
    run(tmp_path / "single.json", cur, json_out=tmp_path / "s.json")
    (row,) = json.loads((tmp_path / "s.json").read_text())["benchmarks"]
    assert row["verdict"] == "regression" and row["threshold"] < 0.05


def test_min_effect_on_the_command_line_reaches_a_pooled_baseline(
    write_result, make_result, gpu_like, tmp_path, capsys
):
    # the README's override, --min-effect 0.05, against a committed (pooled, quiet) baseline: a
    # 4% slowdown passes with it and fails without it
    base = write_result("b.json", _pooled(make_result, gpu_like, (1.0, 1.001, 0.999)))
    cur = write_result("c.json", {LB: gpu_like(99, 60, factor=1.04)})
    argv = [
        "compare",
        str(base),
        str(cur),
        "--resamples",
        "500",
        "--json",
        str(tmp_path / "o.json"),
    ]
    assert cli(argv) == 1
    (row,) = json.loads((tmp_path / "o.json").read_text())["benchmarks"]
    assert (row["verdict"], row["threshold"]) == ("regression", 0.025)
    assert cli([*argv, "--min-effect", "0.05"]) == 0
    (row,) = json.loads((tmp_path / "o.json").read_text())["benchmarks"]
    assert row["threshold"] == 0.05 and row["verdict"] != "regression"
    summary = json.loads((tmp_path / "o.json").read_text())["summary"]["settings"]
    assert summary["min_effect"] == summary["min_effect_drift"] == 0.05
