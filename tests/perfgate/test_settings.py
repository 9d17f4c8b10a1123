"""``[tool.perfgate]``: the one home of the gate's settings, its checks and its overrides."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perfgate import settings
from perfgate.__main__ import build_parser
from perfgate.stats import Settings

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


def test_shipped_table_is_complete_and_is_what_settings_default_to():
    gate = settings.load()
    assert set(gate.values()) == set(settings.KEYS_BY_NAME)
    assert Settings() == gate.stats == settings.defaults().stats
    assert gate.source == str(ROOT / "pyproject.toml")


def test_docs_settings_table_matches_pyproject():
    # The doc lists every key with its shipped value: a changed threshold cannot leave it stale.
    doc = (ROOT / "docs" / "perfgate-compare.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z_.]+)` \| [^|]+ \| `([^`]+)` \|", doc, flags=re.M))
    assert set(rows) == set(settings.KEYS_BY_NAME)
    for name, value in settings.defaults().values().items():
        assert float(rows[name]) == value, name


def test_rounds_exist_for_every_timing_mode():
    from perfgate import baseline

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
        ("alpha = 0.01", "alpha = 0.5", "[tool.perfgate] alpha must be in (0, 0.5), got 0.5"),
        ("min_effect = 0.03", "min_effect = 3", "min_effect must be a fraction in [0, 1)"),
        ("noise_factor = 2.0", "noise_factor = inf", "noise_factor must be finite and >= 0, got inf"),
        ("n_resamples = 5000", "n_resamples = 99", "n_resamples must be >= 100, got 99"),
        ("seed = 0", "seed = -1", "seed must be >= 0, got -1"),
        ("device = 200", "device = 1", "[tool.perfgate] rounds.device must be >= 2, got 1"),
        ("vgpr_tolerance_abs = 4", "vgpr_tolerance_abs = -4", "isa.vgpr_tolerance_abs must be >= 0"),
        ("vgpr_tolerance_rel = 0.05", "vgpr_tolerance_rel = 5", "isa.vgpr_tolerance_rel must be a fraction"),
        ("seed = 0", "seed = 0\nmin_efect = 0.03", "unknown key min_efect; known: alpha, "),
        ("device = 200", "device = 200\nsmoke = 3", "unknown key rounds.smoke"),
        ("seed = 0", None, "[tool.perfgate] lacks seed (int, >= 0)"),
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
    with pytest.raises(ValueError, match=r"^min_samples must be >= 3, got 2$"):
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
        ({"min_effect": 5.0}, "--min-effect: min_effect must be a fraction in [0, 1)"),
        ({"rounds.leaderboard": 0}, "--rounds-leaderboard: rounds.leaderboard must be >= 2"),
        ({"min_efect": 0.1}, "unknown setting 'min_efect'; known: alpha"),
    ],
)
def test_bad_override_names_the_option(overrides, message):
    with pytest.raises(settings.SettingsError) as info:
        settings.load(overrides=overrides)
    assert message in str(info.value)


def test_every_command_takes_its_keys_as_options():
    parser = build_parser()
    stats = [k.flag for k in settings.KEYS if k.group == settings.STATS]
    rounds = [k.flag for k in settings.KEYS if k.group in (settings.ROUNDS, settings.PROCESSES)]
    isa = [k.flag for k in settings.KEYS if k.group == settings.ISA]
    commands = {
        "compare": ["b.json", "c.json"],
        "bench": [],
        "update-baselines": [],
        "isa": ["--target", "gfx950"],
    }
    wanted = {
        "compare": stats,
        "bench": stats + rounds,
        "update-baselines": stats + rounds,
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
    from perfgate import bench

    def no_gpu_check():
        raise AssertionError("a bad setting must be refused before looking for a GPU")

    monkeypatch.setattr(bench, "gpu_available", no_gpu_check)
    for argv in (["bench", "--alpha", "0.6"], ["update-baselines", "--alpha", "0.6"]):
        args = build_parser().parse_args(argv)
        assert args.func(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"perfgate {argv[0]}: error: --alpha: alpha must be in (0, 0.5)" in err


def test_bench_passes_a_rounds_override_to_its_suite_only():
    from perfgate import bench

    args = build_parser().parse_args(["bench", "--rounds-leaderboard", "300", "--", "-x"])
    assert bench._rounds_override("leaderboard", args) == ["--perfgate-rounds=300"]
    assert bench._rounds_override("device", args) == []  # the plugin reads the table


def test_pyproject_is_read_with_the_standard_parser():
    # tomllib (tomli on 3.10) reads the same table: no hand-rolled TOML.
    table = settings.tomllib.loads(SHIPPED)["tool"]["perfgate"]
    assert table["rounds"]["device"] == settings.defaults().rounds["device"]
