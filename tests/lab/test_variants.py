"""The seam (perfgate/variants.py) and the lab's side of it (lab/variants.py): the product finds
the lab's variants only by the name ``PERFGATE_VARIANTS`` holds; the worker's whole-call bench
takes the lab's injected call; a reused calibration is taken as given, a bad one refused."""

from __future__ import annotations

import pytest

from lab import variants as lab_variants
from perfgate import variants
from perfgate.refusal import Refusal


def test_without_the_variable_nothing_is_imported_or_injected(monkeypatch):
    monkeypatch.delenv(variants.VARIANTS_ENV, raising=False)
    assert variants.provider() is None
    assert variants.harness_pass() is None
    assert variants.provider({variants.VARIANTS_ENV: "  "}) is None


def test_the_variable_names_the_labs_provider(monkeypatch):
    assert variants.provider({variants.VARIANTS_ENV: "lab.variants"}) is lab_variants
    monkeypatch.setenv(variants.VARIANTS_ENV, "lab.variants")
    monkeypatch.delenv("MXFP4_BENCH_INJECT_SLOWDOWN", raising=False)
    assert variants.harness_pass() is None  # the lab, asked for no slowdown
    monkeypatch.setenv("MXFP4_BENCH_INJECT_SLOWDOWN", "0.05")
    extra = variants.harness_pass()
    assert isinstance(extra, lab_variants.SlowdownPass) and extra.fraction == 0.05


@pytest.mark.parametrize(
    "name, message",
    [
        ("no_such_module_xyz", "PERFGATE_VARIANTS='no_such_module_xyz': cannot be imported ("),
        ("json", "PERFGATE_VARIANTS='json': lacks harness_pass, prepare; expected a module"),
    ],
)
def test_a_bad_provider_is_a_one_line_refusal(name, message):
    with pytest.raises(Refusal) as caught:
        variants.provider({variants.VARIANTS_ENV: name})
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_levels_without_a_provider_are_refused_by_name(monkeypatch):
    monkeypatch.delenv(variants.VARIANTS_ENV, raising=False)
    unit = variants.Unit("graph", None, None, lambda: None, lambda extra: None)
    with pytest.raises(ValueError, match="PERFGATE_VARIANTS names no provider"):
        variants.prepare(unit, {"0.05": 0.05}, {})


def test_an_unknown_unit_kind_is_refused():
    unit = variants.Unit("batch", None, None, lambda: None, lambda extra: None)
    with pytest.raises(ValueError, match="unit kind must be graph or call, got 'batch'"):
        lab_variants.prepare(unit, {"0.05": 0.05}, {})


def test_the_whole_call_bench_takes_the_labs_reused_sleep(monkeypatch):
    # every level's cycles given by an earlier worker: nothing timed here, one injected call a
    # level, each with the given sleep after the call, recorded as reused
    import torch

    from perfgate.measure import ab_worker
    from perfgate.measure.harness import Work

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setenv(variants.VARIANTS_ENV, "lab.variants")
    work = Work(lambda x: x * 2, [(1,), (2,)], [], [2, 4], lambda out, ref, what: None)
    levels = {"0.01": 0.01, "0.03": 0.03}
    bench, info = ab_worker.prepare_whole_call(work, levels, lambda: None, {"0.01": 7, "0.03": 9})
    assert {v: bench.work(v).extra.cycles for v in levels} == {"0.01": 7, "0.03": 9}
    assert info["0.01"] == {"kind": "device_sleep_in_graph", "cycles": 7, "reused": True,
                            "launch": "direct"}  # fmt: skip
    assert "plain_call_s" not in info  # no level calibrated here: no probe of the plain call


def test_a_reused_calibration_is_taken_as_given_and_a_bad_one_refused():
    assert lab_variants.calibrated(0.01, 1e-5, 1e-9, lambda n: 0.0, 1234) == (1234, None)
    with pytest.raises(ValueError, match="must be an int >= 1"):
        lab_variants.calibrated(0.01, 1e-5, 1e-9, lambda n: 0.0, 0)
    assert lab_variants.describe(5, None)["reused"] is True


def test_the_harness_pass_records_what_it_asked_and_what_it_cost(monkeypatch):
    monkeypatch.setattr(lab_variants, "probe_median", lambda fn, flush, calls, rounds: 2e-6)
    extra = lab_variants.inject.DeviceSleep(1000)
    record = lab_variants.SlowdownPass(0.05).record(extra, 4e-5, lambda: None)
    assert record == {
        "injected_fraction_requested": 0.05,
        "injected_cycles": 1000,
        "injected_fraction_estimated": pytest.approx(0.05),
    }
