"""Metrics over per-problem samples: avg@k, unbiased pass@k, maj@k, bootstrap CIs, weighted average.

``correct`` arrays are [P, k] of 0/1 (problem x sample). avg@k is the DelTA paper's "avg@16"
(mean accuracy over all k samples); pass@k is the unbiased estimator of Chen et al. 2021 (Codex §2.1).
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np


def avg_at_k(correct: np.ndarray) -> float:
    """Mean over problems of the fraction of correct samples (avg@k)."""
    correct = np.asarray(correct, dtype=float)
    return float(correct.mean()) if correct.size else float("nan")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n-c, k) / C(n, k) for one problem with n samples, c correct."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(correct: np.ndarray, k: int) -> float:
    correct = np.asarray(correct, dtype=int)
    return float(np.mean([pass_at_k(row.size, int(row.sum()), k) for row in correct]))


def maj_at_k(answers: Sequence[Sequence[str | None]], correct: np.ndarray) -> float:
    """Majority vote over extracted answers per problem (ties: first seen; None never wins)."""
    hits = []
    for row_answers, row_correct in zip(answers, np.asarray(correct)):
        votes = Counter(a for a in row_answers if a is not None)
        if not votes:
            hits.append(0.0)
            continue
        winner = max(votes, key=lambda a: (votes[a], -list(row_answers).index(a)))
        hits.append(float(row_correct[list(row_answers).index(winner)]))
    return float(np.mean(hits)) if hits else float("nan")


def bootstrap_ci(per_problem: np.ndarray, *, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
                 ) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean over problems (resampling problems, seeded)."""
    values = np.asarray(per_problem, dtype=float)
    if values.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, values.size, size=(n_boot, values.size))
    means = values[idx].mean(axis=1)
    return float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


def weighted_average(values: Sequence[float], weights: Sequence[float]) -> float:
    """Average weighted by problem count (how the DelTA paper's Avg column is computed)."""
    v, w = np.asarray(values, dtype=float), np.asarray(weights, dtype=float)
    return float((v * w).sum() / w.sum())
