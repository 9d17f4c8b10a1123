"""The gate's settings: the ``[tool.perfgate]`` table of the repository's ``pyproject.toml``.

Every threshold of the timing gate, the default rounds per timing mode and the ISA gate's
tolerances live in that table and nowhere else: this module holds the names, types and valid
ranges of the keys, never their values. docs/perfgate-compare.md lists the keys.

```toml
[tool.perfgate]                  # the statistical gate (perfgate.gate.stats.Settings)
alpha = 0.01
...
[tool.perfgate.rounds]           # measured rounds per benchmark, per timing mode
device = 200
[tool.perfgate.processes]        # pytest processes a run's rounds are split over, per mode
leaderboard = 4
[tool.perfgate.isa]              # the static ISA gate (perfgate.isa.gate)
vgpr_tolerance_abs = 4
```

A key has one name everywhere: in the table, as a Python attribute, in the ``settings`` block
of the compare JSON, and on the command line as ``--`` plus the key with ``.`` and ``_`` written
``-`` (``min_effect`` is ``--min-effect``, ``rounds.device`` is ``--rounds-device``,
``isa.vgpr_tolerance_abs`` is ``--isa-vgpr-tolerance-abs``). A command-line value overrides the
table for that run only and is checked by the same rules. Every key is required: the table is
the only copy of the defaults, so a key missing from it is an error rather than a silent
fallback.

**Where the file is found:** ``pyproject.toml`` in the parent directory of the ``perfgate``
package, i.e. the repository root of a checkout or an editable install (``pip install -e .``,
which is how every nox session installs the suite). An installed wheel carries no
``pyproject.toml``; there, loading without an explicit ``path`` raises :class:`SettingsError`
(the commands exit 2 with that one line). Decision: the gate refuses to guess its thresholds;
falling back to numbers frozen into the wheel would gate with values no reviewer sees in the
repository. Library callers outside a checkout pass ``load(path=...)``.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from perfgate.checkout import read_toml
from perfgate.gate.paths import PYPROJECT
from perfgate.modes import AB_MODE_NAMES, MODE_NAMES
from perfgate.refusal import Refusal

TABLE = "tool.perfgate"

# Option groups, by the commands that use them.
STATS, ROUNDS, PROCESSES, ISA, BASELINE = "stats", "rounds", "processes", "isa", "baseline"
AB = "ab"  # the process-level same-job A/B, one section per mode it runs in: [tool.perfgate.ab_<mode>]
AB_MODES = AB_MODE_NAMES


class SettingsError(Refusal, ValueError):
    """A settings file or override that cannot be used; the message is one line naming the key."""


@dataclass(frozen=True)
class Key:
    """One setting: its dotted name under ``[tool.perfgate]``, its type and its valid range.

    The range is data (``lo``, ``hi``), so that the check, its error and the option's help all
    state the same interval."""

    name: str
    kind: type  # int or float (an int is accepted for a float key: ``noise_factor = 2``)
    lo: float
    hi: float
    meaning: str
    group: str
    hi_open: bool = False  # [lo, hi) rather than [lo, hi]
    lo_open: bool = False  # (lo, hi]
    example: str = ""  # appended to the range, e.g. ", e.g. 0.03 for 3%"

    @property
    def flag(self) -> str:
        return "--" + self.name.replace(".", "-").replace("_", "-")

    @property
    def dest(self) -> str:
        return "perfgate_" + self.name.replace(".", "_")

    @property
    def expected(self) -> str:
        """Completes "<name> must be ...": the type and the interval."""
        if self.kind is int:
            what, lo, hi = "an int", str(int(self.lo)), str(int(self.hi))
        else:
            fraction = (self.lo, self.hi, self.hi_open) == (0, 1, True)
            what, lo, hi = (
                ("a fraction" if fraction else "a number"),
                f"{self.lo:g}",
                f"{self.hi:g}",
            )
        left, right = "(" if self.lo_open else "[", ")" if self.hi_open else "]"
        return f"{what} in {left}{lo}, {hi}{right}{self.example}"

    def valid(self, value: int | float) -> bool:
        above = value > self.lo if self.lo_open else value >= self.lo
        below = value < self.hi if self.hi_open else value <= self.hi
        return above and below  # NaN fails both comparisons

    def check(self, value: Any, *, label: str | None = None) -> int | float:
        """The value as ``kind``; TypeError / ValueError "``label`` must be ..., got ...".

        The default label is the key's name, so that ``Settings(min_samples=2)`` says
        ``min_samples must be an int in [3, 10000], got 2``.
        """
        label = self.name if label is None else label
        ok_type = (int,) if self.kind is int else (int, float)
        if isinstance(value, bool) or not isinstance(value, ok_type):
            what = "an int" if self.kind is int else "a number"
            raise TypeError(f"{label} must be {what}, got {type(value).__name__}")
        try:
            value = self.kind(value)
        except OverflowError:  # an int too large for a float key
            raise ValueError(f"{label} must be {self.expected}, got {value!r}") from None
        if not self.valid(value):
            raise ValueError(f"{label} must be {self.expected}, got {value!r}")
        return value

    def help(self) -> str:
        # argparse %-formats help strings: "3%" would break --help
        return f"{self.meaning} ({self.expected})".replace("%", "%%")


# The most worker processes a side the last look of a process-level A/B may reach: 5x the
# shipped device design's 24 (each look's new workers are alive at once, one GPU).
MAX_AB_PROCESSES = 128


def _ab_keys(mode: str) -> tuple[Key, ...]:
    """The process-level A/B of ``mode`` (perfgate.gate.process_ab, docs/ab-process-level.md)."""
    section = f"ab_{mode}"
    return (
        Key(
            f"{section}.min_effect",
            float,
            0,
            1,
            f"{mode}-mode A/B (perfgate ab, experiment): the change it must see; a benchmark "
            "is unchanged when the CI of its change lies within +- this",
            AB,
            lo_open=True,
            hi_open=True,
            example=", e.g. 0.01 for 1%",
        ),
        Key(
            f"{section}.floor",
            float,
            0,
            1,
            f"{mode}-mode A/B: the smallest slowdown that fails, a regression when the CI's "
            "lower bound is above + this (at most min_effect)",
            AB,
            hi_open=True,
            example=", e.g. 0.0025 for 0.25%",
        ),
        Key(
            f"{section}.processes",
            int,
            2,
            64,
            f"{mode}-mode A/B: worker processes a side at the first look (the unit the "
            "statistics replicate over); doubled at each later look for the benchmarks still "
            "undecided, in new processes",
            AB,
        ),
        Key(
            f"{section}.looks",
            int,
            1,
            6,
            f"{mode}-mode A/B: looks at processes x 1, 2, 4, ...; each tests at alpha / looks",
            AB,
        ),
        Key(
            f"{section}.rounds",
            int,
            10,
            _MAX_ROUNDS,
            f"{mode}-mode A/B: measured rounds per worker process and benchmark",
            AB,
        ),
    )


# Upper bounds: what a user could want, well short of runs that would never end. Rounds: 10,000
# a side is 50x the shipped device rounds, and adaptive looks double it twice more. Resamples:
# 100,000 is 20x the shipped 5000 (about a second per benchmark of 200 samples).
_MAX_ROUNDS = 10_000
# The most rounds a side any look may measure (the plugin's --perfgate-rounds too): 125x the
# shipped device mode's last look (200 x 2 x 2).
MAX_LOOK_ROUNDS = 100_000
KEYS: tuple[Key, ...] = (
    Key(
        "alpha",
        float,
        0,
        0.5,
        "significance level of the one-sided rank test; the bootstrap CI is two-sided at "
        "1 - 2 * alpha, so each bound is one-sided at 1 - alpha",
        STATS,
        hi_open=True,
        lo_open=True,
    ),
    Key(
        "min_effect",
        float,
        0,
        1,
        "smallest change that counts, as a fraction: the floor of the threshold. Given on the "
        "command line it is the floor against a pooled baseline too (min_effect_drift), unless "
        "--min-effect-drift is also given",
        STATS,
        hi_open=True,
        lo_open=True,  # a zero threshold is never met: every comparison inconclusive
        example=", e.g. 0.03 for 3%",
    ),
    Key(
        "noise_factor",
        float,
        0,
        10,
        "threshold = max(min_effect, noise_factor x robust noise)",
        STATS,
    ),
    Key(
        "min_samples",
        int,
        3,
        _MAX_ROUNDS,
        "fewer samples on either side is too few to judge",
        STATS,
    ),
    Key("n_resamples", int, 100, 100_000, "bootstrap resamples per benchmark", STATS),
    Key("seed", int, 0, 2**32 - 1, "seed of the bootstrap (verdicts repeat)", STATS),
    Key(
        "min_effect_drift",
        float,
        0,
        1,
        "floor of the threshold against a baseline that records its run-to-run spread",
        STATS,
        hi_open=True,
        lo_open=True,  # a zero threshold is never met: every comparison inconclusive
        example=", e.g. 0.025 for 2.5%",
    ),
    Key(
        "drift_factor",
        float,
        0,
        10,
        "threshold against such a baseline = max(min_effect_drift, drift_factor x the robust "
        "run-to-run drift: 1.4826 x MAD / median of the per-run medians)",
        STATS,
    ),
    Key(
        "looks",
        int,
        1,
        8,
        "adaptive rounds: looks at rounds x 1, 2, 4, ...; alpha is divided by it (Bonferroni)",
        STATS,
    ),
    Key(
        "inconclusive_exit",
        int,
        0,
        1,
        "exit code of a benchmark still inconclusive after every look: 0 warns, 1 fails",
        STATS,
    ),
    Key(
        "bootstrap_max_samples",
        int,
        100,
        20_000,
        "a side with more samples is bootstrapped m-out-of-n with m = this (bounded time, memory)",
        STATS,
    ),
    Key(
        "baseline_runs",
        int,
        1,
        20,
        "independent runs update-baselines records and pools (>= 2 measures the spread)",
        BASELINE,
    ),
    *(
        Key(
            f"rounds.{mode}",
            int,
            2,
            _MAX_ROUNDS,
            f"measured rounds per benchmark in {mode} mode",
            ROUNDS,
        )
        for mode in MODE_NAMES
    ),
    *(
        Key(
            f"processes.{mode}",
            int,
            1,
            16,
            f"separate pytest processes one {mode}-mode run is made of: its rounds are split "
            "evenly over them and their samples pooled, so that a state fixed for a process's "
            "life is averaged over several",
            PROCESSES,
        )
        for mode in MODE_NAMES
    ),
    *(k for mode in AB_MODES for k in _ab_keys(mode)),
    Key(
        "isa.vgpr_tolerance_abs",
        int,
        0,
        512,  # the whole register file of a gfx950 wave (256 VGPRs + 256 AGPRs)
        "VGPR growth allowed per entry: max(this, vgpr_tolerance_rel x baseline)",
        ISA,
    ),
    Key(
        "isa.vgpr_tolerance_rel",
        float,
        0,
        1,
        "relative VGPR growth allowed per entry (see vgpr_tolerance_abs)",
        ISA,
        hi_open=True,
    ),
    Key(
        "isa.valu_tolerance_rel",
        float,
        0,
        1,
        "growth of an entry's vector instructions per wave (static cost) allowed, as a fraction "
        "of the baseline",
        ISA,
        hi_open=True,
    ),
)
KEYS_BY_NAME: Mapping[str, Key] = MappingProxyType({k.name: k for k in KEYS})
_SECTIONS = frozenset(k.name.split(".")[0] for k in KEYS if "." in k.name)
# Every timing mode has a rounds key (derived above from perfgate.modes).
_ROUND_MODES = tuple(k.name.split(".", 1)[1] for k in KEYS if k.group == ROUNDS)


def key(name: str) -> Key:
    try:
        return KEYS_BY_NAME[name]
    except KeyError:
        raise KeyError(
            f"unknown perfgate setting {name!r}; known: {', '.join(KEYS_BY_NAME)}"
        ) from None


@dataclass(frozen=True)
class IsaTolerances:
    """How much an ISA entry may grow before the gate calls it a regression."""

    vgpr_tolerance_abs: int
    vgpr_tolerance_rel: float
    # The table always gives it; a direct construction without it (tests) gates VALU strictly.
    valu_tolerance_rel: float = 0.0

    def __post_init__(self) -> None:
        for name in ("vgpr_tolerance_abs", "vgpr_tolerance_rel", "valu_tolerance_rel"):
            key(f"isa.{name}").check(getattr(self, name), label=name)

    def vgpr(self, baseline_vgpr: int) -> float:
        """VGPRs an entry with ``baseline_vgpr`` may grow by and still pass."""
        return max(self.vgpr_tolerance_abs, self.vgpr_tolerance_rel * baseline_vgpr)

    def valu(self, baseline_valu: int) -> float:
        """Vector instructions per wave an entry with ``baseline_valu`` may grow by and pass."""
        return self.valu_tolerance_rel * baseline_valu

    def describe(self) -> str:
        return (
            f"vgpr_tolerance_abs={self.vgpr_tolerance_abs:g}, "
            f"vgpr_tolerance_rel={self.vgpr_tolerance_rel:g}, "
            f"valu_tolerance_rel={self.valu_tolerance_rel:g}"
        )


# -- the verdict's knobs ---------------------------------------------------------------------
def _configured(name: str) -> Any:
    """A field whose default is the ``[tool.perfgate]`` value (pyproject.toml, read once)."""
    return field(default_factory=lambda: stats_default(name))


@dataclass(frozen=True)
class Settings:
    """The knobs of the verdict. The defaults are the documented gate, read from
    ``[tool.perfgate]`` in pyproject.toml (this module), the only copy of them."""

    alpha: float = _configured("alpha")
    min_effect: float = _configured("min_effect")
    noise_factor: float = _configured("noise_factor")
    min_samples: int = _configured("min_samples")
    n_resamples: int = _configured("n_resamples")
    seed: int = _configured("seed")
    min_effect_drift: float = _configured("min_effect_drift")
    drift_factor: float = _configured("drift_factor")
    looks: int = _configured("looks")
    inconclusive_exit: int = _configured("inconclusive_exit")
    bootstrap_max_samples: int = _configured("bootstrap_max_samples")

    def __post_init__(self) -> None:
        # One set of rules for the table, the command line and this constructor.
        for f in fields(self):
            object.__setattr__(self, f.name, stats_field(f.name, getattr(self, f.name)))

    @property
    def confidence(self) -> float:
        """Two-sided level of the bootstrap interval; each bound is one-sided at 1 - alpha."""
        return 1 - 2 * self.alpha

    def look_alpha(self, looks: int = 1) -> float:
        """The level of each look when a verdict may take ``looks`` looks (Bonferroni: the
        chance that any look raises a false alarm stays below ``alpha``)."""
        if isinstance(looks, bool) or not isinstance(looks, int) or looks < 1:
            raise ValueError(f"looks must be an int >= 1, got {looks!r}")
        return self.alpha / looks

    def threshold(self, noise: float, *, drift: float | None = None) -> float:
        """The smallest change that counts (a fraction): see the module docstring."""
        if drift is not None:
            return max(self.min_effect_drift, self.drift_factor * drift)
        return max(self.min_effect, self.noise_factor * noise)


@dataclass(frozen=True)
class GateSettings:
    """Everything in ``[tool.perfgate]``, checked, with any overrides applied."""

    stats: Settings
    rounds: Mapping[str, int]  # timing mode -> measured rounds per benchmark (per run)
    isa: IsaTolerances
    source: str  # the file read, and the overridden keys, for messages
    baseline_runs: int  # independent runs update-baselines pools
    processes: Mapping[str, int]  # timing mode -> pytest processes per run
    # A/B mode -> {min_effect, floor, processes, looks, rounds} ([tool.perfgate.ab_<mode>])
    ab: Mapping[str, Mapping[str, int | float]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def values(self) -> dict[str, int | float]:
        """Every key by its dotted name: the flat view that reports echo."""
        out: dict[str, int | float] = {
            k.name: getattr(self.stats, k.name) for k in KEYS if k.group == STATS
        }
        out.update({f"rounds.{mode}": n for mode, n in self.rounds.items()})
        out.update({f"processes.{mode}": n for mode, n in self.processes.items()})
        out["isa.vgpr_tolerance_abs"] = self.isa.vgpr_tolerance_abs
        out["isa.vgpr_tolerance_rel"] = self.isa.vgpr_tolerance_rel
        out["isa.valu_tolerance_rel"] = self.isa.valu_tolerance_rel
        out["baseline_runs"] = self.baseline_runs
        out.update({f"ab_{m}.{k}": v for m, keys in self.ab.items() for k, v in keys.items()})
        return out


def load(
    path: str | os.PathLike[str] | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    used: Collection[str] | None = None,
) -> GateSettings:
    """Read ``[tool.perfgate]`` from ``path`` (default: the repository's pyproject.toml).

    ``overrides`` maps key names to values (command-line overrides; their errors name the
    option, e.g. ``--min-effect``). ``used``: the keys the calling command uses (default: all);
    the checks between keys (rounds against ``min_samples``, processes against rounds) involve
    only those, so that a command is never refused over a key it does not read. Every key of the
    table is checked on its own whatever ``used`` says: the file is one file. Raises
    :class:`SettingsError` with a one-line message.

    ``min_effect`` given as an override is the floor against a pooled baseline too
    (``min_effect_drift``), unless that is overridden as well: "the smallest change that
    counts" is what a user asking for ``--min-effect 0.05`` means, whatever baseline the
    benchmark meets.
    """
    path = Path(PYPROJECT if path is None else path)
    values = _read_table(path)
    where = f"{path}: [{TABLE}]"
    checked: dict[str, int | float] = {}
    for k in KEYS:
        if k.name not in values:
            raise SettingsError(f"{where} lacks {k.name} ({k.expected}): {k.meaning}")
        checked[k.name] = _check(k, values[k.name], f"{where} {k.name}")
    sources = {name: f"{path} [{TABLE}]" for name in checked}
    overridden = []
    for name, value in (overrides or {}).items():
        if name not in KEYS_BY_NAME:
            raise SettingsError(f"unknown setting {name!r}; known: {', '.join(KEYS_BY_NAME)}")
        k = KEYS_BY_NAME[name]
        checked[name] = _check(k, value, f"{k.flag}: {k.name}")
        sources[name] = k.flag
        overridden.append(k.flag)
    if "min_effect" in (overrides or {}) and "min_effect_drift" not in (overrides or {}):
        checked["min_effect_drift"] = checked["min_effect"]
        sources["min_effect_drift"] = "--min-effect"
    source = str(path) + (f" with {' '.join(overridden)}" if overridden else "")
    _check_between_keys(checked, sources, frozenset(KEYS_BY_NAME if used is None else used))
    return _build(checked, source)


def _check_between_keys(
    values: Mapping[str, int | float], sources: Mapping[str, str], used: frozenset[str]
) -> None:
    """Settings that cannot work together, among the keys a command uses. Each is named with
    where its value came from (an option or the table).

    - ``rounds.<mode>`` >= ``min_samples``: a run of fewer rounds can never be judged, the gate
      would only ever answer "rerun with more rounds";
    - ``processes.<mode>`` x ``min_samples`` <= ``rounds.<mode>``: every process of a run is
      a pytest run of its share of the rounds, and the plugin refuses a run shorter than
      ``min_samples`` (it could never be judged on its own);
    - ``rounds.<mode>`` x 2 ** (``looks`` - 1) <= :data:`MAX_LOOK_ROUNDS`: the last adaptive
      look measures that many rounds a side."""

    def named(name: str) -> str:
        return f"{name} ({values[name]:g}, {sources[name]})"

    for mode in AB_MODES:
        floor, band = f"ab_{mode}.floor", f"ab_{mode}.min_effect"
        first, looks = f"ab_{mode}.processes", f"ab_{mode}.looks"
        if {floor, band} <= used and values[floor] > values[band]:
            raise SettingsError(
                f"{named(floor)} must be <= {named(band)}: a slowdown of the size the gate must "
                f"see would pass; give a smaller {key(floor).flag} or a larger {key(band).flag}"
            )
        if {first, looks} <= used and (values[first] * 2 ** (values[looks] - 1) > MAX_AB_PROCESSES):
            raise SettingsError(
                f"{named(first)} x 2 ** ({named(looks)} - 1) must be <= {MAX_AB_PROCESSES}: "
                f"the last look measures that many worker processes a side; give fewer "
                f"{key(first).flag} or {key(looks).flag}"
            )

    for mode in _ROUND_MODES:
        rounds, processes = f"rounds.{mode}", f"processes.{mode}"
        if {rounds, "min_samples"} <= used and values[rounds] < values["min_samples"]:
            raise SettingsError(
                f"{named(rounds)} must be >= {named('min_samples')}: a run of fewer rounds "
                f"can never be judged; ask for at least {values['min_samples']:g} rounds "
                f"({key(rounds).flag}) or fewer samples ({key('min_samples').flag})"
            )
        if {rounds, processes, "min_samples"} <= used and (
            values[processes] * values["min_samples"] > values[rounds]
        ):
            raise SettingsError(
                f"{named(processes)} x {named('min_samples')} must be <= {named(rounds)}: "
                f"every process of a run measures at least min_samples rounds; give fewer "
                f"{key(processes).flag} or more {key(rounds).flag}"
            )
        if {rounds, "looks"} <= used and (
            values[rounds] * 2 ** (values["looks"] - 1) > MAX_LOOK_ROUNDS
        ):
            raise SettingsError(
                f"{named(rounds)} x 2 ** ({named('looks')} - 1) must be <= {MAX_LOOK_ROUNDS}: "
                f"the last adaptive look measures that many rounds a side; give fewer "
                f"{key(rounds).flag} or {key('looks').flag}"
            )


@functools.cache
def defaults() -> GateSettings:
    """The repository's settings, read once per process (what ``Settings()`` starts from)."""
    return load()


def add_options(
    parser: argparse.ArgumentParser, *groups: str, only: Collection[str] = (), skip=()
) -> None:
    """Add ``--<key>`` for every key of ``groups`` (STATS, ROUNDS, PROCESSES, ISA) and every key
    named in ``only``, less those in ``skip``; unset means the table's. The command's keys are
    recorded on the parser (``args.perfgate_keys``), for :func:`from_args`."""
    group = parser.add_argument_group(
        "gate settings", f"override [{TABLE}] of pyproject.toml for this run"
    )
    chosen = [k for k in KEYS if (k.group in groups or k.name in only) and k.name not in skip]
    for k in chosen:
        names = [k.flag]
        if k.name == "n_resamples":
            names.append("--resamples")  # the option's name before [tool.perfgate] existed
        group.add_argument(
            *names,
            dest=k.dest,
            type=k.kind,
            default=None,
            metavar="N" if k.kind is int else "X",
            help=k.help(),
        )
    parser.set_defaults(perfgate_keys=tuple(k.name for k in chosen))


def overrides_from(args: argparse.Namespace) -> dict[str, int | float]:
    """The keys given on the command line (options added by :func:`add_options`)."""
    return {k.name: getattr(args, k.dest) for k in KEYS if getattr(args, k.dest, None) is not None}


def from_args(args: argparse.Namespace) -> GateSettings:
    """The repository's settings with the command line's overrides applied, checked against each
    other where the command uses them."""
    return load(overrides=overrides_from(args), used=getattr(args, "perfgate_keys", None))


def argument(k: Key, flag: str) -> Callable[[str], int | float]:
    """An argparse ``type`` for a command's own numeric option (``--runs``, ``--jobs``) checked
    by ``k``'s range, so that its error and help state the range the way the keys' do."""

    def parse(text: str) -> int | float:
        try:
            value = k.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {k.expected}, got {text!r}") from None
        try:
            return k.check(value, label=flag)
        except (TypeError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{flag} ")) from None

    parse.__name__ = k.kind.__name__  # argparse names the type in "invalid <type> value"
    return parse


def stats_field(name: str, value: Any) -> int | float:
    """Check one :class:`perfgate.gate.stats.Settings` field (TypeError / ValueError)."""
    return key(name).check(value)


def stats_default(name: str) -> int | float:
    """The table's value of one stats key: the default of that ``Settings`` field."""
    return getattr(defaults().stats, name)


def describe(settings: Settings) -> str:
    """``alpha=0.01, min_effect=0.03, ...``: one line for reports."""
    return ", ".join(f"{k.name}={getattr(settings, k.name):g}" for k in KEYS if k.group == STATS)


# -- internals -----------------------------------------------------------------------------------
def _read_table(path: Path) -> dict[str, Any]:
    """``[tool.perfgate]`` flattened to dotted keys; unknown keys and sections are errors."""
    doc = read_toml(path, SettingsError, f"its gate settings from [{TABLE}]")
    table = doc.get("tool", {}).get("perfgate")
    if not isinstance(table, dict):
        raise SettingsError(f"{path}: no [{TABLE}] table (the gate's settings)")
    flat: dict[str, Any] = {}
    for name, value in table.items():
        if name in _SECTIONS:
            if not isinstance(value, dict):
                raise SettingsError(f"{path}: [{TABLE}] {name} must be a table ([{TABLE}.{name}])")
            flat.update({f"{name}.{sub}": v for sub, v in value.items()})
        else:
            flat[name] = value
    unknown = [name for name in flat if name not in KEYS_BY_NAME]
    if unknown:
        raise SettingsError(
            f"{path}: [{TABLE}] has unknown key {unknown[0]}; known: {', '.join(KEYS_BY_NAME)}"
        )
    return flat


def _check(k: Key, value: Any, label: str) -> int | float:
    try:
        return k.check(value, label=label)
    except (TypeError, ValueError) as exc:
        raise SettingsError(str(exc)) from None


def _build(values: Mapping[str, int | float], source: str) -> GateSettings:
    stats = Settings(**{k.name: values[k.name] for k in KEYS if k.group == STATS})
    return GateSettings(
        stats=stats,
        rounds=MappingProxyType({mode: int(values[f"rounds.{mode}"]) for mode in _ROUND_MODES}),
        isa=IsaTolerances(
            vgpr_tolerance_abs=int(values["isa.vgpr_tolerance_abs"]),
            vgpr_tolerance_rel=float(values["isa.vgpr_tolerance_rel"]),
            valu_tolerance_rel=float(values["isa.valu_tolerance_rel"]),
        ),
        source=source,
        baseline_runs=int(values["baseline_runs"]),
        processes=MappingProxyType(
            {mode: int(values[f"processes.{mode}"]) for mode in _ROUND_MODES}
        ),
        ab=MappingProxyType(
            {
                mode: MappingProxyType(
                    {
                        k.name.split(".", 1)[1]: values[k.name]
                        for k in KEYS
                        if k.name.startswith(f"ab_{mode}.")
                    }
                )
                for mode in AB_MODES
            }
        ),
    )
