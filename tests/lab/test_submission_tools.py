"""The tools around submission files, on a CPU: ``lab.scripts.slow_submission`` (one ranked shape's
tuned config replaced, nothing else; both files load in one process) and the import probe's
child process (perfgate.spawn: stopped on a timeout, never left running)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from lab.scripts import slow_submission
from perfgate import spawn
from perfgate.submission import export, load

SHAPE = (16, 2112, 7168)


@pytest.fixture(scope="module")
def sm90(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("slow") / "sub_sm90.py"
    export.export(out, "sm90")
    return out


# -- lab.scripts.slow_submission ------------------------------------------------------------------------
def test_only_the_shapes_entry_changes_and_both_files_load_together(sm90, tmp_path):
    slow = tmp_path / "slow.py"
    assert slow_submission.main([str(sm90), str(slow)]) == 0
    before, after = sm90.read_text().splitlines(), slow.read_text().splitlines()
    assert after[:2] == before[:2]  # the POPCORN lines stay first
    assert after[2].startswith("# lab/scripts/slow_submission.py: (16, 2112, 7168) -> GemmConfig(")
    del after[2]
    changed = [(b, a) for b, a in zip(before, after, strict=True) if a != b]
    assert len(changed) == 2  # the table entry and the private package name
    entry = next(a for b, a in changed if "GemmConfig" in a)
    assert entry.strip() == "(16, 2112, 7168): GemmConfig(16, 128, 128, num_stages=3),  # slowed"

    packages = []
    for path in (sm90, slow):
        sub = load.load(path)
        packages.append(sub.custom_kernel.__module__.partition(".")[0])
    assert packages[0] != packages[1]
    original, slower = (
        importlib.import_module(f"{p}._configs_nvidia").TUNED["sm90"] for p in packages
    )
    assert set(original) == set(slower)
    for key in original:
        want = original[key] if key != SHAPE else None
        got = slower[key]
        if want is None:
            assert (got.block_m, got.block_n, got.block_k, got.split_k, got.num_stages) == (
                16, 128, 128, 1, 3
            )  # fmt: skip
            assert original[key].split_k == 14
        else:
            assert repr(got) == repr(want)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--shape", "1x2x3"], "IN holds 0 tuned entries for 1x2x3 (expected 1: a ranked shape"),
        (["--config", "__import__('os')"], "--config must be a GemmConfig(...) call of literals"),
        (["--config", "GemmConfig(x)"], "--config must be a GemmConfig(...) call of literals"),
    ],
)
def test_what_cannot_be_rewritten_is_exit_2(sm90, tmp_path, capsys, extra, message):
    out = tmp_path / "o.py"
    assert slow_submission.main([str(sm90), str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"lab.scripts.slow_submission: error: {message}") and err.count("\n") == 1
    assert not out.exists()


def test_it_never_writes_over_its_input_nor_takes_a_non_export(sm90, tmp_path, capsys):
    text = sm90.read_text()
    assert slow_submission.main([str(sm90), str(sm90)]) == 2
    assert sm90.read_text() == text
    plain = tmp_path / "plain.py"
    plain.write_text("def custom_kernel(data):\n    return data\n")
    assert slow_submission.main([str(plain), str(tmp_path / "o.py")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "lab.scripts.slow_submission: error: OUT is IN; write the slower copy to another file",
        "lab.scripts.slow_submission: error: IN is not a file written by `perfgate submission export`",
    ]


def test_shape_arguments():
    assert slow_submission.parse_shape("64x7168x2048") == (64, 7168, 2048)
    with pytest.raises(Exception, match="--shape must be MxNxK"):
        slow_submission.parse_shape("64x7168")


# -- the import probe's child ---------------------------------------------------------------------
def test_the_probe_runs_through_spawn_and_stops_its_child_on_a_timeout(tmp_path, monkeypatch):
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(120)\n\ndef custom_kernel(data):\n    return data\n")
    children = []
    real = spawn.popen

    def popen(cmd, **kwargs):
        children.append(real(cmd, **kwargs))
        return children[-1]

    monkeypatch.setattr(spawn, "popen", popen)
    with pytest.raises(load.SubmissionError, match=r"importing it took over 2 s$"):
        load.probe(slow, timeout_s=2)
    assert len(children) == 1
    assert children[0].poll() is not None  # stopped, not left sleeping
