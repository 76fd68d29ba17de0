"""Metrics over per-problem samples: avg@k, unbiased pass@k, maj@k, G-Pass@k, bootstrap CIs, weighted average.

``correct`` arrays are [P, n] of 0/1 (problem x sample), n >= k. Each @k metric is the expectation over
the k-subsets of a problem's n samples, averaged over problems: avg@k is the DelTA paper's "avg@16"
(mean accuracy, the same for every k <= n); pass@k is the unbiased estimator of Chen et al. 2021 (Codex
§2.1); maj@k votes within each subset; G-Pass@k_tau (Liu et al. 2024) asks for at least ceil(tau·k)
correct samples in the subset (tau 1.0: all k). Fewer than k samples is an error, never a silent
smaller k.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import Callable, Sequence

import numpy as np

MAJ_MAX_SUBSETS = 100_000
"""maj@k with k < n enumerates the k-subsets; more than this many per problem is refused."""


def _check_k(n: int, k: int | None, metric: str) -> None:
    if k is not None and not 1 <= k <= n:
        raise ValueError(f"{metric}@{k} needs at least {k} samples per problem (and k >= 1), got {n}")


def avg_at_k(correct: np.ndarray, k: int | None = None) -> float:
    """Mean over problems of the fraction of correct samples (avg@k); ``k`` only checks n >= k."""
    correct = np.asarray(correct, dtype=float)
    if correct.ndim == 2:
        _check_k(correct.shape[1], k, "avg")
    return float(correct.mean()) if correct.size else float("nan")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n-c, k) / C(n, k) for one problem with n samples, c correct."""
    _check_k(n, k, "pass")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n correct samples, got c={c}, n={n}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(correct: np.ndarray, k: int) -> float:
    """pass@k averaged over problems; every row needs at least k samples."""
    correct = np.asarray(correct, dtype=int)
    return float(np.mean([pass_at_k(row.size, int(row.sum()), k) for row in correct]))


def g_pass_at_k(n: int, c: int, k: int, tau: float) -> float:
    """G-Pass@k_tau = P(at least ceil(tau·k) of k samples drawn without replacement are correct).

    Hypergeometric tail (Liu et al. 2024, "Are Your LLMs Capable of Stable Reasoning?"); tau 1.0 is
    the probability that all k are correct, a small tau approaches pass@k.
    """
    _check_k(n, k, "G-Pass")
    if not 0 <= c <= n:
        raise ValueError(f"G-Pass@k needs 0 <= c <= n correct samples, got c={c}, n={n}")
    if not 0.0 < tau <= 1.0:
        raise ValueError(f"G-Pass@k needs 0 < tau <= 1, got {tau}")
    need = math.ceil(tau * k - 1e-12)
    hits = sum(math.comb(c, j) * math.comb(n - c, k - j) for j in range(need, min(c, k) + 1))
    return hits / math.comb(n, k)


def mean_g_pass_at_k(correct: np.ndarray, k: int, tau: float) -> float:
    correct = np.asarray(correct, dtype=int)
    return float(np.mean([g_pass_at_k(row.size, int(row.sum()), k, tau) for row in correct]))


def _classes(answers: Sequence[str | None], same: Callable[[str, str], bool] | None) -> list[str | None]:
    """Each answer replaced by the first earlier answer it is ``same`` as (its class representative)."""
    if same is None:
        return list(answers)
    reps: list[str] = []
    out: list[str | None] = []
    for a in answers:
        if a is None:
            out.append(None)
            continue
        rep = next((r for r in reps if r == a or same(a, r)), None)
        if rep is None:
            reps.append(a)
            rep = a
        out.append(rep)
    return out


def _vote(answers: Sequence[str | None], correct: Sequence[int]) -> float:
    """1.0 when the most frequent non-None answer is correct (ties: the one seen first; all None: 0)."""
    votes = Counter(a for a in answers if a is not None)
    if not votes:
        return 0.0
    first = {a: i for i, a in reversed(list(enumerate(answers)))}
    winner = max(votes, key=lambda a: (votes[a], -first[a]))
    return float(correct[first[winner]])


def maj_at_k(answers: Sequence[Sequence[str | None]], correct: np.ndarray, k: int | None = None,
             same: Callable[[str, str], bool] | None = None) -> float:
    """Majority vote over extracted answers per problem (ties: first seen in sample order; None never wins).

    ``same`` (e.g. ``evaluation.grading.equivalent``) groups answers into equivalence classes before the
    vote, so ``1/2`` and ``0.5`` vote together; without it answers vote as strings.
    ``k`` None or n: one vote over all n samples. ``k`` < n: the mean vote over every k-subset (samples
    keep their order within a subset), the maj@k analogue of the unbiased pass@k.
    """
    hits = []
    for row_answers, row_correct in zip(answers, np.asarray(correct)):
        row_answers, row_correct = _classes(list(row_answers), same), list(row_correct)
        n = len(row_answers)
        _check_k(n, k, "maj")
        if k is None or k == n:
            hits.append(_vote(row_answers, row_correct))
            continue
        if math.comb(n, k) > MAJ_MAX_SUBSETS:
            raise ValueError(f"maj@{k} of {n} samples: C({n},{k}) subsets exceed {MAJ_MAX_SUBSETS}")
        subsets = itertools.combinations(range(n), k)
        votes = [_vote([row_answers[i] for i in s], [row_correct[i] for i in s]) for s in subsets]
        hits.append(float(np.mean(votes)))
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
