"""Run a submission file where the suite cannot be imported (a script, not a test module).

``python -I isolated_submission.py FILE INPUTS.pt OUTPUTS.pt``: refuses every import of
``kernels``, ``perfgate`` and ``tests`` (an editable install of the suite would otherwise make
them importable from anywhere), imports FILE, calls its ``custom_kernel`` on each saved input
tuple and saves the outputs (on the CPU). The last line of stdout is a JSON report: the
suite's modules that got imported (must be none) and the private package the file installed.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import sys

BLOCKED = ("kernels", "perfgate", "tests")


class _Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} must not be imported by an exported submission")
        return None


def main(file: str, inputs: str, outputs: str) -> None:
    sys.meta_path.insert(0, _Refuse())
    import torch

    spec = importlib.util.spec_from_file_location("submission", file)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    spec.loader.exec_module(module)
    outs = []
    for data in torch.load(inputs):
        out = module.custom_kernel(tuple(data))
        if out.is_cuda:
            torch.cuda.synchronize()
        outs.append(out.cpu())
    torch.save(outs, outputs)
    suite = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    private = sorted(m for m in sys.modules if m.startswith("_mxfp4_submission_") and "." not in m)
    print(json.dumps({"suite_modules": suite, "packages": private}))


if __name__ == "__main__":
    main(*sys.argv[1:])
