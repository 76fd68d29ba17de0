"""Verdicts that decide (evaluation/report/sequential.py): the group-sequential boundaries reproduce the published
Lan-DeMets values and spend exactly α on simulated Brownian paths; one look is the fixed-sample Holm test; TOST and
the sequential design keep their promises in small simulations through the significance table (the larger runs:
``python -m evaluation.report.calibrate --sequential ...``, results/MEASUREMENTS.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm
from scipy.stats import t as student_t

from evaluation.report import calibrate, plan
from evaluation.report.load import AVG, ReportOptions
from evaluation.report.sequential import boundaries, looks_schedule, nominal_levels, spending, tost_p
from evaluation.report.significance import significance_table
from evaluation.report.stats import SeedsRandomResult

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize(("kind", "expected"), [
    ("obf", (4.877, 3.357, 2.680, 2.290, 2.031)),  # gsDesign sfLDOF, 5 equal looks, two-sided 0.05
    ("pocock", (2.438, 2.427, 2.410, 2.397, 2.386)),  # Lan-DeMets Pocock type (Jennison & Turnbull Table 7.6)
])
def test_boundaries_match_published_values(kind: str, expected: tuple[float, ...]) -> None:
    got = boundaries(tuple(i / 5 for i in range(1, 6)), 0.05, True, kind)
    assert np.allclose(got, expected, atol=2e-3)


def test_one_look_is_the_fixed_sample_test() -> None:
    assert boundaries((1.0,), 0.05, True) == pytest.approx((norm.ppf(0.975),))
    assert nominal_levels((1.0,), 0.0125, True) == pytest.approx((0.0125,))
    assert nominal_levels((1.0,), 0.05, False) == pytest.approx((0.05,))
    assert spending(1.0, 0.05) == pytest.approx(0.05) and spending(0.0, 0.05) == 0.0


@pytest.mark.parametrize("two_sided", [True, False])
def test_boundaries_spend_alpha_on_brownian_paths(two_sided: bool) -> None:
    """Crossing probability of the boundaries under H0 on 400k simulated score paths, looks at 3, 6, 9, 12, 16."""
    looks = (3, 6, 9, 12, 16)
    t = np.array(looks) / looks[-1]
    c = np.array(boundaries(tuple(t), 0.05, two_sided))
    rng = np.random.default_rng(0)
    b = np.cumsum(rng.normal(size=(400_000, len(t))) * np.sqrt(np.diff(t, prepend=0)), axis=1)
    z = b / np.sqrt(t)
    crossed = (np.abs(z) if two_sided else z) >= c
    rate = crossed.any(axis=1).mean()
    assert abs(rate - 0.05) < 3 * math.sqrt(0.05 * 0.95 / 400_000)
    # the spending schedule itself, look by look
    first = crossed.argmax(axis=1)[crossed.any(axis=1)]
    spent = np.cumsum(np.bincount(first, minlength=len(t))) / crossed.shape[0]
    want = [2 * spending(x, 0.025) if two_sided else spending(x, 0.05) for x in t]
    assert np.allclose(spent, want, atol=0.0015)


def test_looks_schedule_ends_at_the_cap() -> None:
    assert looks_schedule(3, 3, 15) == (3, 6, 9, 12, 15)
    assert looks_schedule(3, 4, 12) == (3, 7, 11, 12)
    assert looks_schedule(4, 2, 4) == (4,)


def test_tost_uses_the_method_test_estimate_se_and_df() -> None:
    test = SeedsRandomResult(0.5, 0.4, 3.0, math.nan, math.nan, math.nan, 200, 4)
    lo, hi = tost_p(test, 2.0)
    assert lo == pytest.approx(float(student_t.sf(2.5 / 0.4, 3)))
    assert hi == pytest.approx(float(student_t.cdf(-1.5 / 0.4, 3)))
    assert max(tost_p(SeedsRandomResult(3.0, 0.4, 3.0, 0, 0, 0, 200, 4), 2.0)) > 0.5
    # no SE, or a Satterthwaite df below 1: neither one-sided test can reject (NaN), whatever the margin
    for se, df in ((0.0, 3.0), (0.4, 0.8)):
        degenerate = SeedsRandomResult(0.0, se, df, math.nan, math.nan, math.nan, 200, 4)
        assert degenerate.undefined and all(math.isnan(p) for p in tost_p(degenerate, 1000.0))


def test_identical_arms_are_undecided_not_equivalent() -> None:
    """Arms whose samples agree at every seed (run-effect sd 0, no run × problem effect: common random numbers
    make every method's samples the baseline's) give a variance estimate of 0. Neither TOST nor Holm decides
    then, at any margin (a 1000 pp margin was 'equivalent', a 0.01 pp one too); the plan adds seeds up to the
    cap; every row says why."""
    design = calibrate.Design(seeds=3, seed_sd_pp=0.0, interaction=0.0)
    res = calibrate.simulate(design, calibrate.truth(design), np.random.default_rng(0))
    for margin in (0.01, 1000.0):
        out = plan.plan(res, methods=["dapo", *calibrate.METHODS], baseline="dapo", looks=[3, 6], look=1,
                        margin=margin)
        assert all(v["verdict"] == "undecided" and "no between-seed variance" in v["reason"]
                   for v in out["verdicts"].values()), out["verdicts"]
        assert set(out["seeds"].values()) == {6}
        sig = significance_table(res, ReportOptions(baseline="dapo", n_boot=20, n_perm=20,
                                                    equivalence_margin=margin), "").data
        assert (sig["verdict"] == "undecided").all() and sig["p"].isna().all() and sig["p_tost"].isna().all()
        assert sig["stop_reason"].str.contains("no between-seed variance").all()
        assert sig["delta_ci_lo"].isna().all() and (sig["delta"] == 0).all()


def test_fixed_design_verdicts_are_holm_and_tost_at_the_seeds_present() -> None:
    """Without looks the Avg verdict is better / worse exactly when Holm p < α, else equivalent when TOST p < α."""
    design = calibrate.Design(seeds=6, effect_pp=3.0)
    truth = calibrate.truth(design)
    rng = np.random.default_rng(3)
    opts = ReportOptions(baseline=calibrate.BASELINE, n_boot=20, n_perm=20)
    for _ in range(4):
        sig = significance_table(calibrate.simulate(design, truth, rng), opts, "").data
        for row in sig.itertuples():
            want = (("better" if row.delta > 0 else "worse") if row.p_holm < 0.05
                    else "equivalent" if row.p_tost < 0.05 else "undecided")
            assert row.verdict == want, row
        avg = sig[sig["scope"] == AVG]
        assert all(r == "fixed design (6 seeds)" or "at look 1" in r for r in avg["stop_reason"])


def test_tost_at_the_margin_rarely_says_equivalent_and_at_zero_mostly_does() -> None:
    """Small version of the acceptance run (MEASUREMENTS.md has 300 experiments per row): sequential looks at
    3, 6, 9, 12, 16 seeds, seed sd 1.8 pp, the first method exactly at +δ = 2 pp."""
    looks = (3, 6, 9, 12, 16)
    at_margin = calibrate.run_verdicts(calibrate.Design(seeds=16, effect_pp=2.0), 40, looks=looks, seed=5)
    assert at_margin.first_equivalent <= 0.05 + 2.5 * at_margin.se(0.05)
    assert at_margin.null_equivalent >= 0.8  # the three equal methods, TOST at true 0
    assert at_margin.first_better >= 0.6  # power at 2 pp (80.0 ± 3.3 % in 150 experiments)
    assert at_margin.any_better_worse_null <= 0.05 + 2.5 * at_margin.se(0.05)
    assert at_margin.mean_runs < 5 * 16  # stopping early saves runs against the fixed 16-seed design


def test_calibrate_sequential_command_prints_the_acceptance_rows(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's ``python -m evaluation.report.calibrate --sequential ... --fixed-seeds ...``, scaled down."""
    assert calibrate.main(["--experiments", "2", "--sequential", "3,6", "--fixed-seeds", "6"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| sequential") or
            line.startswith("| fixed")]
    assert len(rows) == 6 and all(line.count("|") == 10 for line in rows)


def test_the_plan_adds_seeds_only_to_undecided_methods() -> None:
    """After look 1 of (3, 6, 9): a method 30 pp better is decided and keeps its 3 seeds, an equal one under a
    0.01 pp margin is undecided and gets 6, and so does the baseline (``python -m evaluation.report.plan``)."""
    design = calibrate.Design(seeds=3, effect_pp=30.0)
    res = calibrate.simulate(design, calibrate.truth(design), np.random.default_rng(0))
    out = plan.plan(res, methods=["dapo", "grpo", "delta"], baseline="dapo", looks=[3, 6, 9], look=1, margin=0.01)
    assert out["verdicts"]["grpo"]["verdict"] == "better" and out["verdicts"]["delta"]["verdict"] == "undecided"
    assert out["seeds"] == {"grpo": 3, "delta": 6, "dapo": 6}
    # the report's replay of the same look agrees
    sig = significance_table(res, ReportOptions(baseline="dapo", n_boot=20, n_perm=20, looks=(3, 6, 9),
                                                equivalence_margin=0.01), "").data
    avg = sig[sig["scope"] == AVG].set_index("method")
    assert avg.at["grpo", "verdict"] == "better" and avg.at["delta", "stop_reason"].startswith("waiting for seeds")
