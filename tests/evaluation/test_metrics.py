"""@k metrics against brute-force enumeration of the k-subsets of each problem's samples."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from evaluation import metrics as M


def _subsets(n: int, k: int) -> list[tuple[int, ...]]:
    return list(itertools.combinations(range(n), k))


def _brute_vote(answers, correct) -> float:
    """Majority by counting, ties to the earliest sample, None never votes (written independently)."""
    best, best_count, best_pos = None, 0, None
    for pos, a in enumerate(answers):
        if a is None:
            continue
        count = sum(1 for b in answers if b == a)
        if count > best_count:
            best, best_count, best_pos = a, count, pos
    return 0.0 if best is None else float(correct[best_pos])


def _random_problem(rng: np.random.Generator, n: int) -> tuple[list[str | None], list[int]]:
    answers = [None if rng.random() < 0.2 else str(rng.integers(0, 3)) for _ in range(n)]
    correct = [int(a == "0") for a in answers]  # "0" is the gold answer
    return answers, correct


@pytest.mark.parametrize("n,k", [(1, 1), (4, 1), (4, 2), (5, 3), (6, 6), (8, 4)])
def test_avg_and_pass_at_k_equal_the_mean_over_k_subsets(n: int, k: int) -> None:
    rng = np.random.default_rng(n * 10 + k)
    correct = (rng.random((7, n)) < 0.4).astype(int)
    subsets = _subsets(n, k)
    avg = np.mean([[correct[p, list(s)].mean() for s in subsets] for p in range(7)])
    pas = np.mean([[float(correct[p, list(s)].any()) for s in subsets] for p in range(7)])
    assert M.avg_at_k(correct, k) == pytest.approx(avg)
    assert M.mean_pass_at_k(correct, k) == pytest.approx(pas)
    for c in range(n + 1):
        row = [1] * c + [0] * (n - c)
        assert M.pass_at_k(n, c, k) == pytest.approx(np.mean([max(row[i] for i in s) for s in subsets]))


@pytest.mark.parametrize("n,k", [(3, 1), (4, 2), (5, 3), (6, 4), (7, 7)])
def test_maj_at_k_is_the_mean_vote_over_k_subsets(n: int, k: int) -> None:
    rng = np.random.default_rng(100 + n * 10 + k)
    problems = [_random_problem(rng, n) for _ in range(12)]
    answers = [a for a, _ in problems]
    correct = np.array([c for _, c in problems])
    expected = np.mean(
        [np.mean([_brute_vote([a[i] for i in s], [c[i] for i in s]) for s in _subsets(n, k)]) for a, c in problems]
    )
    assert M.maj_at_k(answers, correct, k) == pytest.approx(expected)


def test_maj_at_k_ties_go_to_the_answer_seen_first_and_none_never_wins() -> None:
    # "2" and "1" tie with two votes each; "2" comes first, and it is the correct one.
    assert M.maj_at_k([["2", "1", "1", "2"]], np.array([[1, 0, 0, 1]])) == 1.0
    assert M.maj_at_k([["1", "2", "2", "1"]], np.array([[0, 1, 1, 0]])) == 0.0
    assert M.maj_at_k([[None, None, "3"]], np.array([[0, 0, 1]])) == 1.0  # three Nones do not outvote "3"
    assert M.maj_at_k([[None, None]], np.array([[0, 0]])) == 0.0
    # maj@1 is the accuracy of single samples, whatever the votes of the others.
    answers, correct = [["1", "2", "2", None]], np.array([[1, 0, 0, 0]])
    assert M.maj_at_k(answers, correct, 1) == pytest.approx(0.25)


@pytest.mark.parametrize("tau", [0.5, 1.0])
@pytest.mark.parametrize("n,k", [(4, 2), (6, 3), (8, 4), (5, 5)])
def test_g_pass_at_k_is_the_share_of_k_subsets_with_enough_correct(n: int, k: int, tau: float) -> None:
    for c in range(n + 1):
        row = [1] * c + [0] * (n - c)
        need = math.ceil(tau * k)
        expected = np.mean([sum(row[i] for i in s) >= need for s in _subsets(n, k)])
        assert M.g_pass_at_k(n, c, k, tau) == pytest.approx(expected)
    correct = np.array([[1] * n, [0] * n])
    assert M.mean_g_pass_at_k(correct, k, tau) == pytest.approx(0.5)


def test_fewer_samples_than_k_is_an_error() -> None:
    correct = np.ones((3, 2), dtype=int)
    with pytest.raises(ValueError, match="at least 4 samples"):
        M.avg_at_k(correct, 4)
    with pytest.raises(ValueError, match="at least 4 samples"):
        M.mean_pass_at_k(correct, 4)
    with pytest.raises(ValueError, match="at least 3 samples"):
        M.pass_at_k(2, 1, 3)
    with pytest.raises(ValueError, match="at least 3 samples"):
        M.maj_at_k([["1", "1"]] * 3, correct, 3)
    with pytest.raises(ValueError, match="at least 3 samples"):
        M.g_pass_at_k(2, 2, 3, 1.0)


def test_bootstrap_ci_is_deterministic_per_seed_and_brackets_the_mean() -> None:
    values = np.random.default_rng(0).random(50)
    a = M.bootstrap_ci(values, n_boot=500, seed=3)
    assert a == M.bootstrap_ci(values, n_boot=500, seed=3)
    assert a != M.bootstrap_ci(values, n_boot=500, seed=4)
    assert a[0] < values.mean() < a[1]
    assert M.bootstrap_ci(np.full(10, 0.5), n_boot=100) == (0.5, 0.5)
    assert all(math.isnan(x) for x in M.bootstrap_ci(np.array([])))


def test_weighted_average_weights_by_problem_count() -> None:
    assert M.weighted_average([10.0, 40.0], [3, 1]) == pytest.approx(17.5)


def test_maj_at_k_votes_on_the_checkers_equivalence_classes() -> None:
    from evaluation.grading import equivalent

    answers, correct = [["1/2", "0.5", "\\frac{1}{2}", "3", "3"]], np.array([[1, 1, 1, 0, 0]])
    assert M.maj_at_k(answers, correct) == 0.0  # as strings "3" wins 2 to 1
    assert M.maj_at_k(answers, correct, same=equivalent) == 1.0  # as values one half wins 3 to 2
    assert equivalent("0.5", "1/2") and not equivalent("0.333", "1/3")


@pytest.mark.parametrize("c", [-1, 5])
def test_pass_and_g_pass_reject_impossible_counts(c: int) -> None:
    with pytest.raises(ValueError, match="0 <= c <= n"):
        M.pass_at_k(4, c, 2)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        M.g_pass_at_k(4, c, 2, 0.5)
