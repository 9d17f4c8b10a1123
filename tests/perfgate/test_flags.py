"""On/off environment variables (perfgate.flags): every spelling on, off or refused, and the
refusal at the start of every command (one line, exit 2)."""

from __future__ import annotations

import pytest

from perfgate import __main__ as entry
from perfgate import flags
from perfgate.commands import base

ON = ["1", "true", "True", "YES", "on", " on "]
OFF = ["0", "false", "FALSE", "no", "Off", "", "  "]
NEITHER = ["2", "maybe", "ture", "y", "n", "-1", "enabled", "0.0"]


@pytest.mark.parametrize(("value", "expected"), [(v, True) for v in ON] + [(v, False) for v in OFF])
def test_each_spelling_is_on_or_off(value, expected):
    assert flags.flag("X", {"X": value}) is expected


def test_unset_is_off():
    assert flags.flag("X", {}) is False


@pytest.mark.parametrize("value", NEITHER)
def test_anything_else_is_refused_by_name(value):
    with pytest.raises(flags.FlagError) as err:
        flags.flag("PERFGATE_REQUIRE_GPU", {"PERFGATE_REQUIRE_GPU": value})
    assert str(err.value) == (
        "PERFGATE_REQUIRE_GPU must be one of 1, true, yes, on (on) or 0, false, no, off or "
        f"empty (off), got {value!r}"
    )


@pytest.mark.parametrize("value", ["false", "0", "off"])
def test_require_gpu_false_is_not_a_gpu_job(monkeypatch, value):
    monkeypatch.setenv("PERFGATE_REQUIRE_GPU", value)  # "false" used to count as set
    assert base.gpu_required() is False


@pytest.mark.parametrize("name", flags.NAMES)
def test_every_command_refuses_a_bad_flag_before_it_starts(monkeypatch, capsys, tmp_path, name):
    monkeypatch.setenv(name, "maybe")
    missing = str(tmp_path / "none.json")
    assert entry.main(["compare", missing, missing]) == 2  # refused before the files are read
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"perfgate compare: error: {name} must be one of 1, true, yes, on")
