"""``lab.scripts.leaderboard_drift`` on a CPU: the block order, the loop (settling samples apart, every
output checked, a reading after each block), the statistics and the table, with fakes for the
variants and the timer; the timing itself needs a GPU (docs/submission.md has the command)."""

from __future__ import annotations

import math

import pytest

from lab.scripts import leaderboard_drift as ld


def test_blocks_go_round_the_variants_until_each_has_its_samples():
    assert ld.block_order(["a", "b"], samples=10, block=8) == ["a", "b", "a", "b"]  # 5 kept a block
    assert ld.block_order(["a", "b", "c"], samples=5, block=8) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="--block must exceed 3"):
        ld.block_order(["a"], samples=5, block=3)


def test_the_loop_times_each_call_checks_it_and_keeps_the_settling_samples_apart():
    events = []
    clock = iter(range(1, 10_000))

    def variant(name):
        def before():
            data = (name, next(clock))
            events.append(("before", data))
            return data, lambda out: events.append(("check", out))

        return ld.Variant(name, before)

    def time_call(fn):
        out = fn()
        events.append(("timed", out))
        return out, float(out[1])  # the "ns" of a sample: its data's serial number

    got = ld.run_blocks([variant("a"), variant("b")], lambda data: data, time_call,
                        samples=3, block=5, after_block=lambda name: {"after": name})  # fmt: skip
    # one block each: 5 calls, the first 3 apart, the next 2 kept; a second round for 1 more
    assert got["a"]["first"] == [1.0, 2.0, 3.0, 11.0, 12.0, 13.0]
    assert got["a"]["kept"] == [4.0, 5.0, 14.0]  # capped at samples=3
    assert got["b"]["kept"] == [9.0, 10.0, 19.0]
    assert got["a"]["after"] == [{"after": "a"}, {"after": "a"}]
    # before, timed, check: in that order, for every one of the 20 calls
    assert [e[0] for e in events] == ["before", "timed", "check"] * 20
    assert all(events[i][1] == events[i + 1][1] == events[i + 2][1] for i in range(0, 60, 3))


def test_summary_is_the_samples_statistics():
    kept = [10.0] * 8 + [11.0, 30.0]  # one outlier: the mean moves, the median does not
    row = ld.summary(kept, [50.0, 60.0], reference_ns=10.0)
    assert (row["n"], row["median"], row["max"], row["first_median"]) == (10, 10.0, 30.0, 55.0)
    assert row["mean"] == pytest.approx(12.1)
    assert row["trimmed_mean"] == pytest.approx((10.0 * 7 + 11.0) / 8)  # 10% cut at each end
    assert row["p90"] == 30.0
    assert (row["median_vs_a"], row["mean_vs_a"]) == (0.0, pytest.approx(0.21))
    assert math.isnan(ld.summary([1.0, 2.0], [], 1.0)["first_median"])


def test_the_table_names_each_variant():
    row = ld.summary([9000.0, 9100.0, 9200.0], [9500.0], reference_ns=9000.0)
    text = ld.shape_table("m4-n2880-k512", {"d": row}, {"d": [{"sm_mhz": 1980, "power_w": 300}]})
    lines = text.splitlines()
    assert lines[0] == "m4-n2880-k512 (µs; vs a = against a's median)"
    assert lines[2].startswith("  d 62.5 GiB randn fill, regenerated inputs (the harness)")
    assert "   9.100    9.100 " in lines[2] and "+1.1%" in lines[2] and "[(1980, 300)]" in lines[2]


def test_refusals_are_one_line(tmp_path, capsys):
    sub = tmp_path / "sub.py"
    sub.write_text("def custom_kernel(data):\n    return data\n")
    assert ld.main([str(sub), "--json", str(sub)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is the input FILE" in err
    with pytest.raises(SystemExit) as info:
        ld.main([str(sub), "--shapes", "m5-n1-k1"])
    assert info.value.code == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith(
            "error: --shapes names none of m4-n2880-k512, m16-n2112-k7168, m32-n4096-k512, "
            "m32-n2880-k512, m64-n7168-k2048, m256-n3072-k1536"
        )
    )
    import torch

    if not torch.cuda.is_available():
        assert ld.main([str(sub)]) == 2
        assert capsys.readouterr().err == "lab.scripts.leaderboard_drift: error: needs a GPU\n"
