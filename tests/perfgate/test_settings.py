"""``[tool.perfgate]``: the one home of the gate's settings, its checks and its overrides."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perfgate import checkout
from perfgate.__main__ import build_parser, main
from perfgate.gate import settings
from perfgate.gate.stats import Settings

ROOT = Path(__file__).parents[2]
SHIPPED = (ROOT / "pyproject.toml").read_text()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(text)
    return path


def edited(old: str, new: str | None) -> str:
    """The shipped pyproject.toml with ``old`` replaced (``None``: its whole line dropped)."""
    assert SHIPPED.count(old) == 1, old
    if new is None:
        return re.sub(rf"^{re.escape(old)}.*\n", "", SHIPPED, flags=re.M)
    return SHIPPED.replace(old, new)


# --- the shipped table ------------------------------------------------------------------------


def _shipped_values() -> dict:
    """The table read straight from pyproject.toml, flattened by hand: an independent reading."""
    table = checkout.tomllib.loads(SHIPPED)["tool"]["perfgate"]
    flat = {}
    for name, value in table.items():
        if isinstance(value, dict):
            flat.update({f"{name}.{sub}": v for sub, v in value.items()})
        else:
            flat[name] = value
    return flat


def test_shipped_table_is_complete_and_is_what_settings_default_to():
    gate = settings.load()
    shipped = _shipped_values()
    assert set(gate.values()) == set(settings.KEYS_BY_NAME) == set(shipped)
    assert gate.values() == shipped  # every value as pyproject.toml writes it
    for name in ("alpha", "min_effect", "min_samples", "n_resamples", "seed", "looks"):
        assert getattr(Settings(), name) == shipped[name], name  # Settings() defaults to it
    assert gate.source == str(ROOT / "pyproject.toml")


def test_docs_settings_table_matches_pyproject():
    # The doc lists every key with its shipped value: a changed threshold cannot leave it stale.
    doc = (ROOT / "docs" / "perfgate-compare.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z_.]+)` \| [^|]+ \| `([^`]+)` \|", doc, flags=re.M))
    assert set(rows) == set(settings.KEYS_BY_NAME)
    for name, value in settings.defaults().values().items():
        assert float(rows[name]) == value, name


def test_docs_toml_block_is_the_shipped_table():
    # the doc's copy of [tool.perfgate] parses to exactly what pyproject.toml ships: a key the
    # settings reader refuses (ab_min_effect, once) cannot stay in it
    import tomllib

    doc = (ROOT / "docs" / "perfgate-compare.md").read_text()
    (block,) = re.findall(r"^```toml\n(\[tool\.perfgate\]\n.*?)^```", doc, flags=re.M | re.S)
    with open(ROOT / "pyproject.toml", "rb") as f:
        shipped = tomllib.load(f)["tool"]["perfgate"]
    assert tomllib.loads(block)["tool"]["perfgate"] == shipped


def test_rounds_exist_for_every_timing_mode():
    from perfgate.gate import baseline

    assert set(settings.defaults().rounds) == set(baseline.MODES)


def test_flags_follow_one_rule():
    for key in settings.KEYS:
        assert key.flag == "--" + key.name.replace(".", "-").replace("_", "-")
    assert settings.key("rounds.device").flag == "--rounds-device"
    assert settings.key("isa.vgpr_tolerance_abs").flag == "--isa-vgpr-tolerance-abs"


def test_float_keys_accept_integers_and_stay_floats(tmp_path):
    gate = settings.load(write(tmp_path, edited("noise_factor = 2.0", "noise_factor = 3")))
    assert gate.stats.noise_factor == 3.0 and isinstance(gate.stats.noise_factor, float)
    assert isinstance(Settings(noise_factor=2).noise_factor, float)


# --- refusals: one line that names the key and what was expected ----------------------------


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("min_samples = 10", "min_samples = 10.0", "[tool.perfgate] min_samples must be an int, got float"),
        ("min_samples = 10", "min_samples = true", "min_samples must be an int, got bool"),
        ("alpha = 0.01", 'alpha = "0.01"', "[tool.perfgate] alpha must be a number, got str"),
        ("alpha = 0.01", "alpha = 0.5", "[tool.perfgate] alpha must be a number in (0, 0.5), got 0.5"),
        ("min_effect = 0.03", "min_effect = 3", "min_effect must be a fraction in (0, 1)"),
        ("noise_factor = 2.0", "noise_factor = inf", "noise_factor must be a number in [0, 10], got inf"),
        ("n_resamples = 5000", "n_resamples = 99", "n_resamples must be an int in [100, 100000], got 99"),
        ("seed = 0", "seed = -1", "seed must be an int in [0, 4294967295], got -1"),
        ("device = 200", "device = 1", "[tool.perfgate] rounds.device must be an int in [2, 10000], got 1"),
        ("vgpr_tolerance_abs = 4", "vgpr_tolerance_abs = -4", "isa.vgpr_tolerance_abs must be an int in [0, 512]"),
        ("vgpr_tolerance_rel = 0.05", "vgpr_tolerance_rel = 5", "isa.vgpr_tolerance_rel must be a fraction"),
        ("seed = 0", "seed = 0\nmin_efect = 0.03", "unknown key min_efect; known: alpha, "),
        ("device = 200", "device = 200\nsmoke = 3", "unknown key rounds.smoke"),
        ("seed = 0", None, "[tool.perfgate] lacks seed (an int in [0, 4294967295])"),
        ("leaderboard = 400", None, "lacks rounds.leaderboard"),
        # processes: a run of 0 processes measures nothing; above 16, a run would take minutes
        ("leaderboard = 4  #", "leaderboard = 0  #", "processes.leaderboard must be an int in [1, 16], got 0"),
        ("leaderboard = 4  #", "leaderboard = 17  #", "processes.leaderboard must be an int in [1, 16], got 17"),
        ("host = 1", None, "lacks processes.host"),
        ("[tool.perfgate.isa]", "[tool.perfgate_isa]", "lacks isa.vgpr_tolerance_abs"),
        ("[tool.perfgate.rounds]", "rounds = 3\n[tool.perfgate_rounds]", "rounds must be a table"),
        ("alpha = 0.01 ", "alpha = = 0.01 ", "not valid TOML"),
    ],
)  # fmt: skip
def test_bad_table_is_one_line_naming_the_key(tmp_path, old, new, message):
    path = write(tmp_path, edited(old, new))
    with pytest.raises(settings.SettingsError) as info:
        settings.load(path)
    text = str(info.value)
    assert message in text and "\n" not in text, text
    assert text.startswith(f"{path}: ")


def test_a_pyproject_without_the_table_is_refused(tmp_path):
    path = write(tmp_path, '[project]\nname = "x"\n')
    with pytest.raises(settings.SettingsError, match=r"pyproject.toml: no \[tool.perfgate\] table"):
        settings.load(path)


def test_no_pyproject_is_an_error_not_a_fallback(tmp_path):
    # An installed wheel has no pyproject.toml next to the package: refuse, do not guess.
    with pytest.raises(settings.SettingsError, match=r"not found; .*installed wheel"):
        settings.load(tmp_path / "pyproject.toml")


def test_python_api_messages_name_the_field():
    with pytest.raises(ValueError, match=r"^min_samples must be an int in \[3, 10000\], got 2$"):
        Settings(min_samples=2)
    with pytest.raises(ValueError, match=r"^vgpr_tolerance_rel must be a fraction"):
        settings.IsaTolerances(vgpr_tolerance_abs=4, vgpr_tolerance_rel=1.5)


# --- overrides ----------------------------------------------------------------------------------


def test_overrides_replace_single_keys_and_are_named_in_the_source():
    gate = settings.load(overrides={"min_effect": 0.05, "rounds.device": 400})
    assert gate.stats.min_effect == 0.05 and gate.rounds["device"] == 400
    assert gate.stats.alpha == settings.defaults().stats.alpha  # the rest is the table's
    assert gate.source.endswith("with --min-effect --rounds-device")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"min_effect": 5.0}, "--min-effect: min_effect must be a fraction in (0, 1)"),
        (
            {"rounds.leaderboard": 0},
            "--rounds-leaderboard: rounds.leaderboard must be an int in [2,",
        ),
        (
            {"n_resamples": 100_000_000},
            "--n-resamples: n_resamples must be an int in [100, 100000]",
        ),
        ({"rounds.device": 10**12}, "--rounds-device: rounds.device must be an int in [2, 10000]"),
        ({"seed": 2**32}, "--seed: seed must be an int in [0, 4294967295], got 4294967296"),
        ({"noise_factor": 1e308}, "--noise-factor: noise_factor must be a number in [0, 10]"),
        ({"alpha": float("nan")}, "--alpha: alpha must be a number in (0, 0.5), got nan"),
        ({"min_efect": 0.1}, "unknown setting 'min_efect'; known: alpha"),
    ],
)
def test_bad_override_names_the_option(overrides, message):
    with pytest.raises(settings.SettingsError) as info:
        settings.load(overrides=overrides)
    assert message in str(info.value)


def test_every_command_takes_its_keys_as_options():
    # each command takes the keys it uses, and only those: compare judges with one look against
    # a stored baseline (no looks, no A/B threshold), ab with its process-level sections
    parser = build_parser()
    stats = [k.flag for k in settings.KEYS if k.group == settings.STATS]
    rounds = [k.flag for k in settings.KEYS if k.group in (settings.ROUNDS, settings.PROCESSES)]
    isa = [k.flag for k in settings.KEYS if k.group == settings.ISA]
    ab = [k.flag for k in settings.KEYS if k.group == settings.AB]

    def without(*flags):
        assert set(flags) <= set(stats)
        return [f for f in stats if f not in flags]

    commands = {
        "compare": ["b.json", "c.json"],
        "bench": [],
        "update-baselines": [],
        "ab": ["--base", "HEAD"],
        "isa": ["--target", "gfx950"],
    }
    wanted = {
        "compare": without("--looks"),
        "bench": [*stats, *rounds],
        "update-baselines": without("--looks") + rounds,
        # ab: the process-level A/B's sections at alpha (perfgate.gate.process_ab)
        "ab": ["--alpha", "--inconclusive-exit", *ab],
        "isa": isa,
    }
    for command, positional in commands.items():
        argv = [command, *positional]
        for flag in wanted[command]:
            argv += [flag, "7"]
        args = parser.parse_args(argv)
        got = settings.overrides_from(args)
        assert set(got) == {k.name for k in settings.KEYS if k.flag in wanted[command]}, command
        assert all(v == 7 for v in got.values())
        others = set(settings.KEYS_BY_NAME) - set(got)
        for name in others:  # another command's keys are not options here
            with pytest.raises(SystemExit):
                parser.parse_args([command, *positional, settings.key(name).flag, "7"])


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        ("compare", "--min-effect"),
        ("bench", "--rounds-device"),
        ("isa", "--isa-vgpr-tolerance-rel"),
    ],
)
def test_help_lists_the_options(capsys, command, flag):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert flag in out and "gate settings" in out


def test_no_option_means_no_override():
    args = build_parser().parse_args(["compare", "b.json", "c.json"])
    assert settings.overrides_from(args) == {}
    assert settings.from_args(args) == settings.defaults()


def test_resamples_keeps_its_old_spelling():
    args = build_parser().parse_args(["compare", "b", "c", "--resamples", "700"])
    assert settings.overrides_from(args) == {"n_resamples": 700}


def test_bench_and_update_refuse_a_bad_override_before_anything_runs(monkeypatch, capsys):
    from perfgate.commands import base

    def no_gpu_check():
        raise AssertionError("a bad setting must be refused before looking for a GPU")

    monkeypatch.setattr(base, "gpu_available", no_gpu_check)
    for argv in (["bench", "--alpha", "0.6"], ["update-baselines", "--alpha", "0.6"]):
        assert main(argv) == 2  # the command raises, main answers
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"perfgate {argv[0]}: error: --alpha: alpha must be a number in (0, 0.5)" in err


def test_bench_passes_a_rounds_override_to_its_suite_only():
    from perfgate.measure import session

    args = build_parser().parse_args(["bench", "--rounds-leaderboard", "300", "--", "-x"])
    assert session.rounds_override("leaderboard", args) == ["--perfgate-rounds=300"]
    assert session.rounds_override("device", args) == []  # the plugin reads the table


def test_pyproject_is_read_with_the_standard_parser():
    # tomllib (tomli on 3.10) reads the same table: no hand-rolled TOML.
    table = checkout.tomllib.loads(SHIPPED)["tool"]["perfgate"]
    assert table["rounds"]["device"] == settings.defaults().rounds["device"]


# --- ranges: every numeric setting has one, in its error and its help -------------------------

# Written out here, not read from perfgate.gate.settings: the ranges a user may ask for.
# every mode pyproject.toml gives rounds to, read from the file itself (not from the code)
_SHIPPED_MODES = tuple(checkout.tomllib.loads(SHIPPED)["tool"]["perfgate"]["rounds"])
RANGES = {
    "alpha": "a number in (0, 0.5)",
    "min_effect": "a fraction in (0, 1), e.g. 0.03 for 3%",
    "noise_factor": "a number in [0, 10]",
    "min_samples": "an int in [3, 10000]",
    "n_resamples": "an int in [100, 100000]",
    "seed": "an int in [0, 4294967295]",
    "min_effect_drift": "a fraction in (0, 1), e.g. 0.025 for 2.5%",
    "drift_factor": "a number in [0, 10]",
    "looks": "an int in [1, 8]",
    "inconclusive_exit": "an int in [0, 1]",
    "bootstrap_max_samples": "an int in [100, 20000]",
    "baseline_runs": "an int in [1, 20]",
    **{f"rounds.{m}": "an int in [2, 10000]" for m in _SHIPPED_MODES},
    **{f"processes.{m}": "an int in [1, 16]" for m in _SHIPPED_MODES},
    "isa.vgpr_tolerance_abs": "an int in [0, 512]",
    "isa.vgpr_tolerance_rel": "a fraction in [0, 1)",
    "isa.valu_tolerance_rel": "a fraction in [0, 1)",
    **{
        f"ab_{m}.min_effect": "a fraction in (0, 1), e.g. 0.01 for 1%"
        for m in ("device", "leaderboard")
    },
    **{
        f"ab_{m}.floor": "a fraction in [0, 1), e.g. 0.0025 for 0.25%"
        for m in ("device", "leaderboard")
    },
    **{f"ab_{m}.processes": "an int in [2, 64]" for m in ("device", "leaderboard")},
    **{f"ab_{m}.looks": "an int in [1, 6]" for m in ("device", "leaderboard")},
    **{f"ab_{m}.rounds": "an int in [10, 10000]" for m in ("device", "leaderboard")},
}


def _edges(text: str):
    """(accepted, refused) values at the ends of a range written as above."""
    match = re.search(r"([\[(])([-\d.]+), ([-\d.]+)([\])])", text)
    left, lo, hi, right = match.groups()
    whole = text.startswith("an int")
    lo, hi = (int(lo), int(hi)) if whole else (float(lo), float(hi))
    step = 1 if whole else 1e-9
    accepted = ([] if left == "(" else [lo]) + ([] if right == ")" else [hi])
    refused = (
        [lo - step, hi + step] + ([lo] if left == "(" else []) + ([hi] if right == ")" else [])
    )
    return accepted, refused


@pytest.mark.parametrize("name", list(RANGES))
def test_every_key_has_a_range_and_refuses_beyond_it(name):
    k = settings.key(name)
    assert k.expected == RANGES[name]
    accepted, refused = _edges(RANGES[name])
    for value in accepted:
        assert k.check(value) == value
    for value in refused:
        with pytest.raises(ValueError) as info:
            k.check(value, label=k.flag)
        assert str(info.value) == f"{k.flag} must be {RANGES[name]}, got {value!r}"


def test_a_value_beyond_every_float_is_refused_not_overflowed():
    with pytest.raises(ValueError, match=r"noise_factor must be a number in \[0, 10\], got 1000"):
        settings.key("noise_factor").check(10**400)


@pytest.mark.parametrize(
    ("command", "positional"),
    [
        ("compare", ["b", "c"]),
        ("bench", []),
        ("update-baselines", []),
        ("ab", ["--base", "HEAD"]),
        ("isa", ["--target", "gfx950"]),
    ],
)
def test_help_states_every_range(capsys, command, positional):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    args = build_parser().parse_args([command, *positional])
    for name in args.perfgate_keys:
        assert f"({RANGES[name]})" in text, (command, name)


# --- checks between keys: only those the command uses, naming where each value came from -----


def test_a_table_whose_keys_cannot_work_together_is_refused(tmp_path):
    path = write(tmp_path, edited("device = 200", "device = 9"))
    with pytest.raises(settings.SettingsError) as info:
        settings.load(path)
    assert str(info.value) == (
        f"rounds.device (9, {path} [tool.perfgate]) must be >= min_samples (10, {path} "
        "[tool.perfgate]): a run of fewer rounds can never be judged; ask for at least 10 "
        "rounds (--rounds-device) or fewer samples (--min-samples)"
    )


def test_an_error_between_keys_blames_the_flag_that_was_given():
    with pytest.raises(settings.SettingsError) as info:
        settings.load(overrides={"min_samples": 201})
    text = str(info.value)
    assert "min_samples (201, --min-samples)" in text
    assert f"rounds.device (200, {settings.PYPROJECT} [tool.perfgate])" in text
    assert "\n" not in text


def test_compare_is_not_refused_over_rounds_it_does_not_use(capsys):
    args = build_parser().parse_args(["compare", "b", "c", "--min-samples", "201"])
    assert settings.from_args(args).stats.min_samples == 201
    args = build_parser().parse_args(["bench", "--min-samples", "201"])
    with pytest.raises(settings.SettingsError, match=r"min_samples \(201, --min-samples\)"):
        settings.from_args(args)


def test_more_processes_than_rounds_is_refused_by_the_settings_check(monkeypatch, capsys):
    from perfgate.commands import base

    def no_gpu_check():
        raise AssertionError("a bad setting must be refused before looking for a GPU")

    monkeypatch.setattr(base, "gpu_available", no_gpu_check)
    argv = ["bench", "--mode", "leaderboard", "--processes-leaderboard", "16"]
    assert main([*argv, "--rounds-leaderboard", "10"]) == 2  # the command raises, main answers
    err = capsys.readouterr().err
    assert err == (
        "perfgate bench: error: processes.leaderboard (16, --processes-leaderboard) x "
        f"min_samples (10, {settings.PYPROJECT} [tool.perfgate]) must be <= rounds.leaderboard "
        "(10, --rounds-leaderboard): every process of a run measures at least min_samples "
        "rounds; give fewer --processes-leaderboard or more --rounds-leaderboard\n"
    )
    # the edge: 16 processes of min_samples (10) rounds each, the pytest plugin's minimum run
    args = build_parser().parse_args([*argv, "--rounds-leaderboard", "160"])
    assert settings.from_args(args).processes["leaderboard"] == 16
    args = build_parser().parse_args([*argv, "--rounds-leaderboard", "159"])
    with pytest.raises(settings.SettingsError, match="x min_samples"):
        settings.from_args(args)


def test_the_last_adaptive_look_is_bounded():
    # rounds x 2 ** (looks - 1) rounds a side at the last look: at most 100000
    assert settings.load(overrides={"rounds.device": 10_000, "looks": 4}).rounds["device"] == 10_000
    with pytest.raises(settings.SettingsError) as info:
        settings.load(overrides={"rounds.device": 10_000, "looks": 5})
    assert str(info.value).startswith(
        "rounds.device (10000, --rounds-device) x 2 ** (looks (5, --looks) - 1) must be <= 100000"
    )
    compare = build_parser().parse_args(["compare", "b", "c", "--min-samples", "10"])
    assert settings.from_args(compare)  # compare takes no looks and no rounds: nothing to bound


def test_min_effect_given_as_a_flag_is_the_floor_against_pooled_baselines_too():
    gate = settings.load(overrides={"min_effect": 0.05})
    assert (gate.stats.min_effect, gate.stats.min_effect_drift) == (0.05, 0.05)
    both = settings.load(overrides={"min_effect": 0.05, "min_effect_drift": 0.01})
    assert (both.stats.min_effect, both.stats.min_effect_drift) == (0.05, 0.01)
    table = _shipped_values()
    assert settings.load().stats.min_effect_drift == table["min_effect_drift"]  # no flag, table's


def test_docs_settings_table_states_each_range_and_the_commands_that_take_it():
    doc = (ROOT / "docs" / "perfgate-compare.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z_.]+)` \| (.+) \|$", doc, flags=re.M))
    parser = build_parser()
    taking: dict[str, list[str]] = {}
    for command, positional in [("compare", ["b", "c"]), ("bench", []), ("update-baselines", []),
                                ("ab", ["--base", "HEAD"]),
                                ("isa", ["--target", "gfx950"])]:  # fmt: skip
        for name in parser.parse_args([command, *positional]).perfgate_keys:
            taking.setdefault(name, []).append(command)
    for name, expected in RANGES.items():
        row = rows[name]
        assert f" {expected[0].upper()}{expected[1:]}. |" in row, name
        if name != "baseline_runs":  # update-baselines takes it as --runs
            listed = row.rsplit(": ", 1)[1].split(", ")
            # the lab's command is held to its rows by tests/lab/test_experiments.py
            assert [c for c in listed if not c.startswith("lab ")] == taking[name], name
