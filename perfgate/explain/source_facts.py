"""Which files of the code under test differ between the two revisions, and what each holds: the
context a ranked difference is read in (a vector-work change with ``kernels/_quant.py`` changed
is the quantizer's). Read from git in the parent; nothing is ranked for it alone (a comment
changes a file too)."""

from __future__ import annotations

from pathlib import Path

from perfgate.revisions import git

# What a file of kernels/ holds, for the reader (the longest matching prefix wins).
ROLES = {
    "kernels/_quant.py": "the quantizer, fused into the GEMM kernel",
    "kernels/quant.py": "the quantizer's path choice and standalone launcher",
    "kernels/_gemm_kernel.py": "the GEMM kernel",
    "kernels/gemm.py": "the launcher: the host path of every call",
    "kernels/gemm_config.py": "the config and its split-K arithmetic",
    "kernels/configs.py": "config selection (tuned table, occupancy model)",
    "kernels/_configs_amd.py": "gfx950's tuned configs",
    "kernels/_configs_nvidia.py": "sm90's tuned configs",
    "kernels/splitk.py": "the split-K reducer's launcher",
    "kernels/_reduce_kernel.py": "the Triton split-K reducer",
    "kernels/reducer/": "the native split-K reducer",
    "kernels/targets.py": "the targets' facts",
    "kernels/": "the code under test",
}


def role(path: str) -> str:
    best = max((p for p in ROLES if path.startswith(p)), key=len, default=None)
    return ROLES[best] if best else "outside the code under test"


def changed_files(repo: Path, base: str, head: str | None) -> list[str]:
    """Files under ``kernels/`` that differ from ``base`` to ``head`` (None: the working tree,
    uncommitted edits included)."""
    revs = [base] if head is None else [base, head]
    out = git("diff", "--name-only", *revs, "--", "kernels", cwd=repo)
    return sorted(line for line in out.splitlines() if line.strip())


def source_facts(repo: Path, base: str, head: str | None) -> list[dict[str, str]]:
    return [{"path": p, "role": role(p)} for p in changed_files(repo, base, head)]
