"""32-element bf16 blocks for the quantizer's property tests: a strategy that reaches every edge
class of the MXFP4 rule, and a classifier that says which classes a block holds.

Uniform 16-bit patterns (or ``st.floats``) almost never put a rounding tie in a block, rarely a
``-0``, and put a NaN into most blocks, where the GEMM's codes are not compared. Here a block is
built around its maximum, which fixes the scale, so its other elements can be placed on that
scale's ties (both signs), next to them, on the grid, at the zeros and the subnormals; about
one block in eight holds a NaN, one in eight an infinity, one in sixteen both
(:data:`CLASS_SHARE` bounds the shares).

:func:`block_classes` decides the classes from the rule itself, in Python floats, independently
of :mod:`kernels.mxfp4`; the tests assert that the strategy reaches each class often enough and
report the classes of every drawn block as ``hypothesis.event`` statistics
(``--hypothesis-show-statistics``).
"""

from __future__ import annotations

import math
import random
import struct

from hypothesis import event
from hypothesis import strategies as st

TIES = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)  # midpoints of the e2m1 grid
GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
POS_INF, NEG_ZERO = 0x7F80, 0x8000

# every class a quantizer strategy must reach, and the share of blocks it must reach it in
CLASS_SHARE = {
    "no-nan": 0.7,
    "nan": 0.05,
    "inf": 0.05,
    "nan-and-inf": 0.02,
    "neg-zero": 0.2,
    "pos-tie": 0.3,
    "neg-tie": 0.3,
    "subnormal": 0.2,
    "subnormal-max": 0.05,
    "saturated": 0.05,
}


def value(pattern: int) -> float:
    """The value of a bf16 bit pattern, exactly (bf16 is the top half of an fp32)."""
    return struct.unpack("<f", struct.pack("<I", (pattern & 0xFFFF) << 16))[0]


def is_nan(p: int) -> bool:
    return p & 0x7FFF > POS_INF


def scale_exponent(block: list[int]) -> int:
    """The rule's scale exponent ``e`` of a block (its finite values and infinities), from the
    fp32 bits of its maximum magnitude."""
    amax = max((abs(value(p)) for p in block if not is_nan(p)), default=0.0)
    bits = (struct.unpack("<I", struct.pack("<f", amax))[0] + 0x200000) & 0x7F800000
    return max(-127, min(127, (bits >> 23) - 127 - 2))


def block_classes(block: list[int]) -> set[str]:
    """The edge classes a block of 32 bf16 patterns holds (keys of :data:`CLASS_SHARE`)."""
    e = scale_exponent(block)
    found = {"nan" if any(is_nan(p) for p in block) else "no-nan"}
    if "nan" in found and any(p & 0x7FFF == POS_INF for p in block):
        found.add("nan-and-inf")
    for p in block:
        if is_nan(p):
            continue
        if p & 0x7FFF == POS_INF:
            found.add("inf")
        elif p == NEG_ZERO:
            found.add("neg-zero")
        elif 0 < p & 0x7FFF < 0x80:
            found.add("subnormal")
        q = abs(value(p)) * 2.0**-e  # exact: a power-of-two scaling of a bf16 value
        if q in TIES:
            found.add("neg-tie" if p & 0x8000 else "pos-tie")
        if 6 < q < math.inf:
            found.add("saturated")
    top = max((p & 0x7FFF for p in block if not is_nan(p)), default=0)
    if 0 < top < 0x80:
        found.add("subnormal-max")
    return found


def report(blocks: list[list[int]]) -> None:
    """One ``hypothesis.event`` per class reached by any of ``blocks``."""
    for name in sorted(set().union(*map(block_classes, blocks))):
        event(f"block class: {name}")


def _scaled(magnitude: float, e: int) -> int | None:
    """The pattern of ``magnitude * 2**e`` if it is a finite bf16 value, else None."""
    v = math.ldexp(magnitude, e)
    if v == 0 or v > 3.3895313892515355e38 or v < 2.0**-133:
        return None
    p = struct.unpack("<I", struct.pack("<f", v))[0]
    return p >> 16 if p & 0xFFFF == 0 else None


def _signed(p: int, negative: bool) -> int:
    return p | 0x8000 if negative else p


# the block maximum, which fixes its scale: any normal value, a subnormal (the scale clamps to
# 2**-127), one past 6 times its scale (mantissa 1.5 .. 1.75: it saturates), or one where the
# scale byte changes
_TOP_EDGES = (0x0000, 0x3F5F, 0x3F60, 0x40C0, 0x40DF, 0x7F5F, 0x7F60, 0x7F7F)


def _top(rnd: random.Random) -> int:
    kind = rnd.randrange(4)
    if kind == 0:
        return rnd.randint(0x0080, 0x7F7F)
    if kind == 1:
        return rnd.randint(0x0001, 0x007F)
    if kind == 2:
        return rnd.randint(1, 254) << 7 | rnd.randint(0x41, 0x5F)
    return rnd.choice(_TOP_EDGES)


# what each of a block's other elements is: a tie of its scale (three times as often as the
# rest), one pattern next to a tie, a grid point, a zero, a subnormal, any pattern
_KINDS = ("tie", "tie", "tie", "next-to-tie", "grid", "zero", "small", "any")


def _element(rnd: random.Random, e: int, top: int) -> int:
    """One element of a block whose scale exponent is ``e`` and maximum magnitude ``top``."""
    kind = rnd.choice(_KINDS)
    p = None
    if kind in ("tie", "next-to-tie"):
        p = _scaled(rnd.choice(TIES), e)
        if p is not None and kind == "next-to-tie":
            p = max(p + rnd.choice((-1, 1)), 0)
    elif kind == "grid":
        p = _scaled(rnd.choice(GRID), e)
    elif kind == "zero":
        p = 0
    elif kind == "small":
        p = rnd.randint(0x0001, 0x007F)  # a subnormal
    if p is None or p > top:  # would move the block maximum: a pattern below it instead
        p = rnd.randint(0, top)
    return _signed(p, rnd.random() < 0.5)


# what a block holds besides finite values: nothing in 13 cases of 16
_SPECIALS = ("none",) * 13 + ("inf", "nan", "inf-nan")


@st.composite
def quant_block(draw) -> list[int]:
    """32 bf16 bit patterns: a maximum, 31 elements placed on its scale, and sometimes an
    infinity (which takes over the maximum) or a NaN (which poisons the block).

    Built from one drawn ``random.Random``: hypothesis' own draws favour the ends of small
    ranges and of ``sampled_from`` so much that the class shares moved from seed to seed
    (NaN blocks from 4% to 30%); a seeded Random keeps them at their design shares, and the
    seed is still hypothesis' choice (derandomized, replayed)."""
    rnd = draw(st.randoms(use_true_random=True))
    special = rnd.choice(_SPECIALS)
    top = POS_INF if special == "inf" else _top(rnd)
    e = scale_exponent([top])
    # the other elements: on the inf's scale (below the largest finite value), or, where a
    # NaN joins the inf, on a finite scale that the inf overrides
    below = 0x7F7F if special == "inf" else top
    if special == "inf-nan":
        top = POS_INF
    block = [_signed(top, rnd.random() < 0.5)] + [_element(rnd, e, below) for _ in range(31)]
    if special.endswith("nan"):
        block[rnd.randrange(32)] = _signed(rnd.randint(POS_INF + 1, 0x7FFF), rnd.random() < 0.5)
    shift = rnd.randrange(32)  # the maximum at any position
    return block[shift:] + block[:shift]
