"""Hypothesis strategies for split-K partials that reach every class the reducers treat apart.

A plain ``st.floats`` or ``st.integers(0, 2**32 - 1)`` almost never draws a bf16 rounding tie, an
overflow midpoint or a sum that cancels, and hypothesis shrinks S towards 1 (no addition at
all). Here each fp32 word is drawn from a mix of classes, S is at least 2 most of the time, and
:func:`classes` names what an example reached, so a test can prove that the strategy reaches
every class (``tests/test_splitk.py::test_partials_strategy_reaches_every_class``).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

# fp32 words the reducers must treat exactly: signed zeros, infinities, NaNs of both signs with
# quiet/signalling payloads, the subnormal edges, the bf16 overflow edges.
SPECIAL_WORDS = (
    0x00000000,  # +0
    0x80000000,  # -0
    0x7F800000,  # +inf
    0xFF800000,  # -inf
    0x7FC00000,  # +qNaN
    0xFFC00001,  # -qNaN with a payload
    0x7F800001,  # +sNaN
    0xFFFFFFFF,  # -NaN, all payload bits
    0x00000001,  # smallest subnormal
    0x807FFFFF,  # largest negative subnormal
    0x00800000,  # smallest normal
    0x7F7F7FFF,  # just below the bf16 overflow midpoint: max finite bf16
    0x7F7F8000,  # the overflow midpoint: RNE goes to inf
    0xFF7F8000,  # the negative one
    0x7F7FFFFF,  # largest finite fp32
)

# A bf16 tie: low half exactly 0x8000, any high half (both parities and signs).
_tie = st.integers(0, 0xFFFF).map(lambda hi: (hi << 16) | 0x8000)
# Words that sit on a bf16 value (low half zero): sums of a few of them hit ties and exact results.
_bf16_exact = st.integers(0, 0xFFFF).map(lambda hi: hi << 16)
_word = st.one_of(
    st.sampled_from(SPECIAL_WORDS),
    _tie,
    _bf16_exact,
    st.integers(0, 2**32 - 1),
)


def _to_float(words: list[int]) -> torch.Tensor:
    return torch.tensor(words, dtype=torch.int64).to(torch.int32).view(torch.float32)


@st.composite
def partials(draw, max_s: int = 16, max_m: int = 4, max_n: int = 40) -> torch.Tensor:
    """fp32 (S, M, N) on the CPU. S == 1 (no addition) is one branch of four; N covers odd
    widths and multiples of 4 (the native reducer's 16-byte path)."""
    s = draw(st.one_of(st.just(1), *[st.integers(2, max_s)] * 3))
    m = draw(st.integers(1, max_m))
    n = draw(st.one_of(st.integers(1, max_n), st.integers(1, max_n // 4).map(lambda k: 4 * k)))
    words = draw(st.lists(_word, min_size=s * m * n, max_size=s * m * n))
    # One column in three is a cancellation: x, then -x, so a sum reaches an exact zero/tie.
    flat = _to_float(words).reshape(s, m * n)
    if s >= 2 and draw(st.booleans()):
        flat[1, ::3] = -flat[0, ::3]
    # A -0 sum needs every split of a column to be -0 (x + -x is +0): too rare to leave to the
    # word mix, so one example in three plants such a column.
    if draw(st.integers(0, 2)) == 0:
        flat[:, draw(st.integers(0, m * n - 1))] = -0.0
    return flat.reshape(s, m, n).contiguous()


def classes(p: torch.Tensor) -> set[str]:
    """The classes one example reaches, judged on its inputs and its in-order fp32 sum."""
    s = p.shape[0]
    acc = p[0].clone()
    for k in range(1, s):
        acc = acc + p[k]
    words = p.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    sums = acc.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    magnitude = sums & 0x7FFFFFFF
    found = {"one split" if s == 1 else "several splits"}
    checks = {
        "NaN partial": bool(torch.isnan(p).any()),
        "NaN sum": bool(torch.isnan(acc).any()),
        "inf sum": bool(torch.isinf(acc).any()),
        "-0 sum": bool((sums == 0x80000000).any()),
        "+0 sum": bool((sums == 0).any()),
        "subnormal sum": bool(((magnitude > 0) & (magnitude < 0x00800000)).any()),
        "bf16 tie sum": bool((((sums & 0xFFFF) == 0x8000) & torch.isfinite(acc)).any()),
        "rounds to inf": bool(((magnitude >= 0x7F7F8000) & (magnitude < 0x7F800000)).any()),
        "subnormal partial": bool(
            (((words & 0x7FFFFFFF) > 0) & ((words & 0x7FFFFFFF) < 0x00800000)).any()
        ),
        "odd width": p.shape[2] % 2 == 1,
        "width multiple of 4": p.shape[2] % 4 == 0,
        "several rows": p.shape[1] > 1,
    }
    return found | {name for name, hit in checks.items() if hit}


ALL_CLASSES = frozenset(
    {
        "one split",
        "several splits",
        "NaN partial",
        "NaN sum",
        "inf sum",
        "-0 sum",
        "+0 sum",
        "subnormal sum",
        "bf16 tie sum",
        "rounds to inf",
        "subnormal partial",
        "odd width",
        "width multiple of 4",
        "several rows",
    }
)
