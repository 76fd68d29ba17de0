"""rliable aggregates (evaluation/report/aggregates.py) on cases with known answers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from evaluation.report import ReportOptions, load_results
from evaluation.report.aggregates import iqm, probability_of_improvement, rliable_table


def test_iqm_drops_the_outer_quarters() -> None:
    assert iqm(np.array([[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 100.0]])) == pytest.approx(3.5)  # mean of 2..5


@pytest.mark.parametrize(("x", "y", "expected"), [
    ([[1.0], [1.0]], [[0.0], [0.0]], 1.0),  # every X run beats every Y run
    ([[0.5], [0.5]], [[0.5], [0.5]], 0.5),  # ties count one half
    ([[1.0, 0.0]], [[0.0, 1.0]], 0.5),      # one problem each way
    ([[2.0], [0.0]], [[1.0], [1.0]], 0.5),  # Mann-Whitney over run pairs: 2 wins, 2 losses
])
def test_probability_of_improvement(x, y, expected) -> None:
    assert probability_of_improvement(np.array(x), np.array(y)) == pytest.approx(expected)


def test_rliable_table_of_a_results_tree(fake_results: Callable[..., Path]) -> None:
    opts = ReportOptions(n_boot=300)
    data = rliable_table(load_results(fake_results()), opts, "footer").data.set_index("method")
    assert data.loc["delta", "runs"] == 2 and data.loc["delta", "problems"] == 63
    assert data.loc["delta", "iqm_ci_lo"] <= data.loc["delta", "iqm"] <= data.loc["delta", "iqm_ci_hi"]
    assert data.loc["delta", "poi_ci_lo"] > 50 and np.isnan(data.loc["dapo", "poi"])
    same = rliable_table(load_results(fake_results("same", identical=True)), opts, "footer").data.set_index("method")
    assert same.loc["delta", "poi"] == pytest.approx(50.0)  # delta's samples are dapo's
