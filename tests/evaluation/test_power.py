"""Power analysis (evaluation/report/power.py) on constructed cases with known answers."""

from __future__ import annotations

import io
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evaluation.report import ReportOptions, load_results
from evaluation.report.power import (
    mde,
    power_table,
    problems_needed,
    random_seed_plan,
    variance_components,
    z_factor,
)

REPO = Path(__file__).resolve().parents[2]


def test_textbook_sample_size_of_a_paired_difference() -> None:
    # sd of the difference 10 pp, δ = 2 pp, α = 0.05, power 0.8: n = (1.960 + 0.842)² · 100 / 4 = 196.2 -> 197
    assert z_factor(0.05) == pytest.approx(2.8016, abs=1e-4)
    assert problems_needed(100.0, 2.0, 0.05) == 197
    assert mde(100.0 / 197, 0.05) <= 2.0 < mde(100.0 / 196, 0.05)


def test_larger_n_gives_smaller_mde_and_zero_variance_gives_zero_or_no_plan() -> None:
    rng = np.random.default_rng(0)
    small, large = (variance_components(rng.normal(1, 10, size=(n, 3))) for n in (50, 800))
    assert mde(small.var_diff / small.n, 0.05) > mde(large.var_diff / large.n, 0.05)
    zero = variance_components(np.zeros((20, 3)))
    assert (zero.var_diff, zero.var_problem, zero.var_seed, zero.var_resid) == (0, 0, 0, 0)
    # seeds fixed: an estimate of 0 is no scale either ("MDE 0, 1 problem" would claim any difference is detected)
    assert math.isnan(mde(zero.var_diff / zero.n, 0.05)) and math.isnan(problems_needed(zero.var_diff, 2.0, 0.05))
    # seeds random: an estimate of 0 is no scale to plan from (the method test is undefined there, not "2 seeds")
    assert all(math.isnan(x) for x in random_seed_plan(zero, 2.0, 0.05))


def test_anova_components_recover_known_variances() -> None:
    rng = np.random.default_rng(1)
    n, s = 4000, 40
    d = 0.5 + rng.normal(0, 3, size=(n, 1)) + rng.normal(0, 2, size=(1, s)) + rng.normal(0, 5, size=(n, s))
    vc = variance_components(d)
    assert vc.var_problem == pytest.approx(9, rel=0.1)
    assert vc.var_seed == pytest.approx(4, rel=0.35)
    assert vc.var_resid == pytest.approx(25, rel=0.05)
    assert vc.var_diff == pytest.approx(9 + 25 / s, rel=0.1)  # the seed effect cancels in a paired row


def test_seed_variance_can_make_a_target_unreachable() -> None:
    # σ²_seed = 16 with 2 seeds: even with infinitely many problems the 1-df t test's SE is √8, so 2 pp is
    # never reached at 80 % power; more seeds reach it, and the least such count is what the plan says
    from evaluation.report.power import VarianceComponents, _expected_anova, c4, seeds_random_power
    from evaluation.report.stats import seeds_random_variance

    vc = VarianceComponents(n=200, seeds=2, delta=0.0, var_diff=50.0, var_problem=40.0, var_seed=16.0,
                            var_resid=20.0)
    mde_r, n_needed, s_needed = random_seed_plan(vc, 2.0, 0.05)
    assert math.isinf(n_needed) and mde_r > mde(vc.var_diff / vc.n, 0.05)
    assert seeds_random_power(vc, 2.0, 0.05, 200, int(s_needed)) >= 0.8 > seeds_random_power(
        vc, 2.0, 0.05, 200, int(s_needed) - 1)
    # the MDE is unbiased for a 1-df variance estimate (c4), so at the plan's own variances power is above 80 %
    df = seeds_random_variance(_expected_anova(vc, 200, 2))[1]
    assert seeds_random_power(vc, mde_r * c4(df), 0.05, 200, 2) == pytest.approx(0.8, abs=1e-4)
    assert c4(2.0) == pytest.approx(math.sqrt(math.pi) / 2)
    one_seed = variance_components(np.ones((10, 1)))
    assert math.isnan(random_seed_plan(one_seed, 2.0, 0.05)[0]) and one_seed.var_diff == 0


@pytest.mark.parametrize("df", [1, 2, 9, 300])
@pytest.mark.parametrize("nc", [0.5, 2.0, 4.0])
def test_t_power_is_the_noncentral_t(df: int, nc: float) -> None:
    from scipy.stats import nct, t

    from evaluation.report.power import t_power

    crit = t.ppf(0.975, df)
    assert t_power(nc, 1.0, df, 0.05) == pytest.approx(nct.sf(crit, df, nc) + nct.cdf(-crit, df, nc), abs=1e-6)
    assert t_power(30.0, 1.0, df, 0.05 / 4) > t_power(4.0, 1.0, df, 0.05 / 4)  # where scipy's nct gives 0 or NaN


def test_power_table_of_a_results_tree(fake_results: Callable[..., Path]) -> None:
    res = load_results(fake_results())
    table = power_table(res, ReportOptions(), "footer")
    data = table.data
    assert list(data["method"]) == ["sft", "delta"] and (data["baseline"] == "dapo").all()
    assert {"n", "k", "seeds", "mde", "problems_for_target", "seeds_for_target"} <= set(data.columns)
    assert (data["mde_holm"] >= data["mde"]).all()
    assert (data["mde_seeds_random_holm"] >= data["mde_seeds_random"]).all()
    identical = power_table(load_results(fake_results("same", identical=True)), ReportOptions(), "footer").data
    same = identical[identical["method"] == "delta"].iloc[0]  # delta's samples are dapo's
    assert (same["delta"], same["sd_diff"]) == (0, 0)
    assert same[["mde", "mde_holm", "problems_for_target", "mde_seeds_random", "mde_seeds_random_holm",
                 "problems_for_target_seeds_random", "seeds_for_target"]].isna().all()


def _report(out: Path) -> dict[str, str]:
    """``python -m evaluation.report`` on ``out`` (the rule's command, small resamples); its tables' text."""
    proc = subprocess.run([sys.executable, "-m", "evaluation.report", "--results", str(out), "--n-boot", "200",
                           "--n-perm", "200"], capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return {name: (out / "tables" / name).read_text(encoding="utf-8")
            for name in ("power.csv", "power.md", "main.md", "significance.csv")}


def test_no_table_prints_an_mde_or_power_at_zero_variance(fake_results: Callable[..., Path]) -> None:
    """Through the report's CLI: DelTA's samples are DAPO's at every seed (zero variance). Every MDE / problem /
    seed count of its row is empty in the CSV, '–' in Markdown with the reason under the table, and the main
    table's design note leaves it out; with one seed (the CI reference's shape) the seeds-fixed cells too."""
    out = fake_results("same", identical=True)
    counts = ["mde", "mde_holm", "problems_for_target", "mde_seeds_random", "mde_seeds_random_holm",
              "problems_for_target_seeds_random", "seeds_for_target"]
    for seeds in (2, 1):
        if seeds == 1:
            for run in (out / "eval").glob("*/seed1"):
                shutil.rmtree(run)
        tables = _report(out)
        power = pd.read_csv(io.StringIO(tables["power.csv"]), dtype=str, keep_default_na=False).set_index("method")
        assert (power.loc["delta", "seeds"], power.loc["delta", "sd_diff"]) == (str(seeds), "0.0000")
        assert (power.loc["delta", counts] == "").all(), power.loc["delta"]
        assert float(power.loc["sft", "mde"]) > 0  # a row with variance keeps its cells, counts as integers
        assert power.loc["sft", "problems_for_target"].isdigit(), power.loc["sft"]
        row = next(line for line in tables["power.md"].splitlines() if line.startswith("| DelTA |"))
        cells = [c.strip() for c in row.split("|")[1:-1]]  # Method n k seeds Δ sd, then the 7 MDE / count columns
        assert cells[5] == "0.00" and cells[6:] == ["–"] * len(counts), row
        assert "'–': undefined, not 0" in tables["power.md"]
        assert "seeds fixed, DelTA: sd of diff 0" in tables["power.md"]
        assert ("seeds random, DelTA: the method test is undefined" in tables["power.md"]) == (seeds == 2)
        assert ("seeds random, every row: 1 seed (the method test needs ≥ 2)" in tables["power.md"]) == (seeds == 1)
        if seeds == 2:
            assert "undefined for DelTA: power.md" in tables["main.md"]
        significance = pd.read_csv(io.StringIO(tables["significance.csv"]), keep_default_na=False)
        avg = significance[(significance["method"] == "delta") & (significance["scope"] == "Avg")].iloc[0]
        assert avg["verdict"] == "undecided"


def test_the_design_note_states_no_mde_when_every_method_test_is_undefined() -> None:
    from evaluation.report.power import design_note

    nan = math.nan
    power = pd.DataFrame({"method": ["grpo", "delta"], "seeds": [3, 3], "n": [24, 24], "k": ["2", "2"],
                          "mde_seeds_random": [nan, nan], "mde_seeds_random_holm": [nan, nan],
                          "seeds_for_target": [nan, nan]})
    note = design_note(power, ReportOptions())
    assert "is undefined for every method" in note and "?" not in note and "detects" not in note
    power.loc[0, ["mde_seeds_random", "mde_seeds_random_holm", "seeds_for_target"]] = [5.0, 6.0, 9]
    note = design_note(power, ReportOptions())
    assert "detects 5.0 pp at 80 % power (6.0 pp at Holm's first step; undefined for DelTA: power.md)" in note
