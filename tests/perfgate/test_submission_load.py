"""perfgate.submission.load: any submission file imported in isolation, its custom_kernel found,
one line for a file that cannot be used."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from perfgate.submission import load

REPO = Path(__file__).resolve().parents[2]
NO_GPU = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}

GOOD = "import torch\n\n\ndef custom_kernel(data):\n    return data[0] * 2\n"


def _file(tmp_path, text: str, name: str = "submission.py"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_good_file_gives_its_custom_kernel(tmp_path):
    path = _file(tmp_path, "#!POPCORN leaderboard amd-mxfp4-mm\n#!POPCORN gpu MI355X\n" + GOOD)
    sub = load.load(path)
    assert sub.custom_kernel((torch.ones(2),)).tolist() == [2.0, 2.0]
    assert sub.path == path.resolve() and len(sub.sha256) == 64
    assert sub.describe() == {
        "path": str(path.resolve()),
        "sha256": sub.sha256,
        "leaderboard": "amd-mxfp4-mm",
        "gpu": "MI355X",
    }


def test_each_load_is_a_fresh_module(tmp_path):
    path = _file(tmp_path, GOOD + "STATE = []\n")
    first, second = load.load(path), load.load(path)
    first.module.STATE.append(1)
    assert first.module is not second.module and second.module.STATE == []
    assert first.module.__name__ in sys.modules  # dataclasses and pickling find it


def test_the_files_directory_is_importable_while_it_loads_and_task_exists(tmp_path):
    _file(tmp_path, "FACTOR = 3\n", "helper_for_h23.py")
    text = (
        "from task import input_t, output_t\n\nfrom helper_for_h23 import FACTOR\n\n\n"
        "def custom_kernel(data: input_t) -> output_t:\n    return data[0] * FACTOR\n"
    )
    sub = load.load(_file(tmp_path, text))
    assert sub.custom_kernel((torch.ones(1),)).tolist() == [3.0]
    assert str(tmp_path) not in sys.path


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("x = 1\n", r"submission\.py: defines no custom_kernel"),
        ("custom_kernel = 5\n", r"custom_kernel is a int, not a function"),
        ("import no_such_module_h23\n", r"does not import \(ModuleNotFoundError: No module"),
        ("def custom_kernel(:\n", r"does not import \(SyntaxError"),
        ("raise SystemExit(3)\n", r"does not import \(SystemExit: 3\)"),
        ("raise RuntimeError('two\\nlines')\n", r"does not import \(RuntimeError: two lines\)$"),
    ],
    ids=["no-kernel", "not-callable", "import-error", "syntax", "exit", "multiline"],
)
def test_an_unusable_file_is_one_line(tmp_path, text, match):
    with pytest.raises(load.SubmissionError, match=match) as info:
        load.load(_file(tmp_path, text))
    assert "\n" not in str(info.value)


# In a fresh process: what a file imports decides what loads, and triton's mode is chosen at
# its first import, whenever that comes (here, where torch sees no GPU: the interpreter).
AFTER_LOAD = (
    "import os, sys\nfrom perfgate.submission import load\nsub = load.load(sys.argv[1])\n"
    "{call}print(sorted(m for m in ('torch', 'triton') if m in sys.modules), "
    "os.environ.get('TRITON_INTERPRET'), {extra})\n"
)
IMPORTS_TRITON = "import triton\n\n\ndef custom_kernel(data):\n    return triton.__name__\n"
TRITON_LATER = "def custom_kernel(data):\n    import triton\n\n    return triton.__name__\n"
NAMES_THE_OUTPUT = "from task import output_t\n\n\ndef custom_kernel(data):\n    return data\n"


@pytest.mark.parametrize(
    ("text", "call", "extra", "want"),
    [
        ("def custom_kernel(data):\n    return data\n", "", "''", "[] None "),
        (IMPORTS_TRITON, "", "''", "['torch', 'triton'] 1 "),
        (TRITON_LATER, "", "''", "[] None "),
        (TRITON_LATER, "sub.custom_kernel(None)\n", "''", "['torch', 'triton'] 1 "),
        (NAMES_THE_OUTPUT, "", "sub.module.output_t.__name__", "['torch'] None Tensor"),
    ],
    ids=["plain", "triton", "triton-later", "triton-later-called", "output-type"],
)
def test_a_file_loads_what_it_imports_and_no_more(tmp_path, text, call, extra, want):
    path = _file(tmp_path, text)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | NO_GPU
    code = AFTER_LOAD.format(call=call, extra=extra)
    done = subprocess.run([sys.executable, "-c", code, str(path)], cwd=REPO, env=env,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == want + "\n"


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(load.SubmissionError, match=r"nope\.py: no such file"):
        load.load(tmp_path / "nope.py")


def test_the_probe_runs_in_a_fresh_process(tmp_path):
    # (a good file's probe: tests/perfgate/test_submission_command.py)
    with pytest.raises(load.SubmissionError, match=r"^\S+bad\.py: defines no custom_kernel"):
        load.probe(_file(tmp_path, "x = 1\n", "bad.py"))


def test_device_calls_call_custom_kernel_once_per_set(tmp_path):
    sub = load.load(_file(tmp_path, GOOD))
    sets = [(torch.full((2,), float(i)),) for i in range(3)]
    assert [c().tolist() for c in sub.device_calls(sets)] == [[0.0, 0.0], [2.0, 2.0], [4.0, 4.0]]


def test_directives_stop_at_the_first_other_line():
    assert load.directives("#!POPCORN gpu H100\nx\n#!POPCORN leaderboard late\n") == {"gpu": "H100"}


def test_kernel_for_names_what_is_timed(tmp_path):
    from kernels.gemm import custom_kernel

    assert load.kernel_for(None) == (custom_kernel, {"source": "kernels"})
    path = _file(tmp_path, GOOD)
    kernel, what = load.kernel_for(path)
    assert kernel((torch.ones(1),)).tolist() == [2.0]
    assert what == {"source": "submission", "path": str(path.resolve()), "sha256": what["sha256"]}
    assert len(what["sha256"]) == 64


def test_loading_a_submission_writes_nothing_beside_it(tmp_path, monkeypatch):
    # with bytecode writing on (the ROCm container's default), importing the file would leave a
    # __pycache__ in the user's directory: loading must write nothing where the file lies
    import sys

    from perfgate.submission import load as load_module

    (tmp_path / "helper_mod.py").write_text("VALUE = 3\n")
    path = tmp_path / "sub.py"
    path.write_text("import helper_mod\n\ndef custom_kernel(data):\n    return helper_mod.VALUE\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    before = sorted(p.name for p in tmp_path.iterdir())
    sub = load_module.load(path)
    assert sub.custom_kernel(None) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert sys.dont_write_bytecode is False  # restored
    sys.modules.pop("helper_mod", None)
