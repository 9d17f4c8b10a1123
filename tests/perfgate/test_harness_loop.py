"""``tools.harness_loop`` on the CPU: eval.py's statistics, stopping rule and loop order with
fakes for the clock, the timer and the inputs; the timing itself needs a GPU."""

from __future__ import annotations

import math

import pytest

from tools import harness_loop as hl


def test_stats_are_evals():
    s = hl.stats([1000.0, 1002.0, 1004.0, 1006.0])
    assert s.runs == 4 and s.mean == 1003.0 and s.best == 1000.0 and s.worst == 1006.0
    assert s.std == math.sqrt(20 / 3)  # squared deviations 9+1+1+9, over n - 1
    assert s.err == s.std / 2
    with pytest.raises(ValueError, match="need >= 2"):
        hl.stats([1.0])


@pytest.mark.parametrize(
    ("durations", "elapsed", "cap", "want"),
    [
        ([100.0, 100.0], 0, 1e9, None),  # never before the third sample
        ([100.0, 100.0, 100.0], 0, 1e9, "error"),  # identical readings: a zero error
        ([100.0, 110.0, 90.0], 0, 1e9, None),  # err/mean = 5.8%: go on
        ([100.0, 110.0, 90.0], 0, 299.0, "time cap"),  # mean 100 x 3 runs > 299
        ([100.0, 110.0, 90.0], 120e9 + 1, 1e9, "wall time"),
        ([100.0, 110.0, 90.0], 120e9, 1e9, None),  # the wall limit is strict
    ],
)
def test_stop_reason(durations, elapsed, cap, want):
    assert hl.stop_reason(hl.stats(durations), elapsed, cap) == want


class _Fakes:
    """Inputs by seed, a scripted timer and clock, and a log of what happened in which order."""

    def __init__(self, durations, *, wall_step=0, bad_seed=None):
        self.durations = list(durations)
        self.log = []
        self.wall = 0
        self.wall_step = wall_step
        self.bad_seed = bad_seed

    def make_data(self, seed):
        self.log.append(("data", seed))
        return {"seed": seed}, {"seed": seed}

    def call(self, data):
        self.log.append(("call", data["seed"]))
        return data["seed"]

    def check(self, check_copy, out):
        self.log.append(("check", out))
        if out == self.bad_seed:
            raise hl.WrongOutput(f"seed {out}: wrong")

    def time_call(self, fn):
        out = fn()
        return out, self.durations.pop(0)

    def prepare(self):
        self.log.append(("flush",))

    def now(self):
        self.wall += self.wall_step
        return self.wall


def _run(fakes, **kw):
    opts = {"seed": 100, **hl.LEADERBOARD, **kw}
    return hl.harness_benchmark(
        fakes.make_data, fakes.call, fakes.check, fakes.time_call, fakes.prepare,
        now_ns=fakes.now, **opts,
    )  # fmt: skip


def test_the_leaderboard_loop_regenerates_flushes_times_and_checks_in_evals_order():
    durations = [500.0, 501.0, 502.0, 500.0, 520.0, 480.0]
    fakes = _Fakes(durations)
    out = _run(fakes)
    assert fakes.log[:3] == [("data", 100), ("call", 100), ("check", 100)]  # the first check
    one_repeat = [("data", 113), ("flush",), ("call", 113), ("check", 113)]
    assert fakes.log[3:7] == one_repeat
    assert out.seeds == (113, 126, 139, 152)
    # err/mean: 0.115% after three samples (go on), 0.096% after four (stop)
    rel = [hl.stats(durations[:n]).err / hl.stats(durations[:n]).mean for n in (3, 4)]
    assert [round(x, 6) for x in rel] == [0.001152, 0.000956]
    assert out.stats.runs == 4 and out.stopped == "error" and out.stats.mean == 500.75


def test_it_may_stop_after_three_samples():
    out = _run(_Fakes([8192.0, 8192.0, 8192.0, 9000.0]))
    assert out.stats.runs == 3 and out.stopped == "error" and out.stats.err == 0


def test_the_warmup_never_regenerates_nor_rechecks():
    fakes = _Fakes([1.0, 2.0, 3.0, 4.0] * 30)
    out = _run(fakes, **hl.WARMUP)
    assert [e for e in fakes.log if e[0] == "data"] == [("data", 100)]
    assert [e for e in fakes.log if e[0] == "check"] == [("check", 100)]
    assert set(out.seeds) == {100}
    # mean 2.x ns x runs never reaches 10 ms and err/mean stays above 0.1%: all 100 repeats
    assert out.stats.runs == 100 and out.stopped == "repeats"


def test_time_cap_and_wall_time_stop_the_loop():
    capped = _run(_Fakes([10e9, 12e9, 9e9, 11e9]))  # mean ~10.3 s x 3 > 30 s
    assert capped.stats.runs == 3 and capped.stopped == "time cap"
    slow = _run(_Fakes([100.0, 150.0, 90.0, 130.0], wall_step=121e9))  # 121 s at the third
    assert slow.stats.runs == 3 and slow.stopped == "wall time"


def test_a_wrong_output_is_raised():
    with pytest.raises(hl.WrongOutput, match="seed 126: wrong"):
        _run(_Fakes([500.0, 700.0, 600.0, 650.0], bad_seed=126))


def test_rows_and_scores():
    h = hl.Outcome(hl.stats([1000.0, 1000.0, 1000.0]), "error", (1, 2, 3))
    r = hl.row("m4-n2880-k512", h, [800.0, 800.0, 800.0, 1200.0])
    assert r["leaderboard_mean_ns"] == 900.0 and r["leaderboard_median_ns"] == 800.0
    assert r["harness_vs_leaderboard"] == pytest.approx(1000 / 900 - 1)
    r2 = hl.row("m16-n2112-k7168", hl.Outcome(hl.stats([4000.0] * 3), "error", ()), [4000.0] * 2)
    s = hl.summary([r, r2])
    assert s["harness_score_ns"] == pytest.approx(2000.0)  # sqrt(1000 * 4000)
    assert s["leaderboard_score_ns"] == pytest.approx(math.sqrt(900 * 4000))
    table = hl.format_table([r, r2], "NVIDIA H200")
    assert "| m4-n2880-k512 | 1.000 | 3 | error | 0.00% | 0.900 | 0.800 | +11.1% |" in table
    assert table.splitlines()[-1].startswith("| score (geometric mean) | 2.000 |")


def test_without_a_gpu_it_says_so(monkeypatch, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert hl.main([]) == 2
    assert "needs a GPU" in capsys.readouterr().err


def test_bad_arguments_are_refused(capsys):
    with pytest.raises(SystemExit) as info:
        hl.main(["--rounds", "1"])
    assert info.value.code == 2 and "--rounds must be >= 2" in capsys.readouterr().err
