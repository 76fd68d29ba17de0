"""The one subset rule (evaluation.driver.select) of every evaluation path, suites, and creditbench eval's warnings."""

from __future__ import annotations

from collections import Counter

from evaluation import driver, harness
from evaluation.benchmarks import BENCHMARKS, SUITES, Problem, expand_sets, load_benchmark
from evaluation.mcq import letter_warning


def test_subset_of_a_subject_sorted_file_covers_every_subject_in_proportion():
    problems = load_benchmark("mmlu_stem")
    subjects = Counter(p.meta["subject"] for p in problems)
    chosen = driver.select(problems, 100, seed=0)
    got = Counter(p.meta["subject"] for p in chosen)
    assert len(chosen) == 100 and set(got) == set(subjects)  # the first 100 rows are one subject
    assert all(abs(got[s] - 100 * n / len(problems)) < 1 for s, n in subjects.items())
    index = {p.id: i for i, p in enumerate(problems)}
    assert [index[p.id] for p in chosen] == sorted(index[p.id] for p in chosen)  # file order
    assert chosen == driver.select(problems, 100, seed=0) != driver.select(problems, 100, seed=1)


def test_subset_without_subjects_is_seeded_not_the_first_rows():
    problems = [Problem(id=str(i), question="q", answer="1") for i in range(50)]
    chosen = [int(p.id) for p in driver.select(problems, 5, seed=3)]
    assert chosen == sorted(chosen) and chosen != [0, 1, 2, 3, 4]
    assert driver.select(problems, None, seed=3) == problems == driver.select(problems, 80, seed=3)


def test_one_letter_taking_the_predictions_is_warned():
    assert "option A is predicted for 199 of 200" in letter_warning("arc", ["A"] * 199 + ["B"])
    assert letter_warning("arc", ["A", "B", "C", "D"] * 50) is None
    # creditbench eval's printed table carries the warning of results.json, not only the log
    metrics = {"acc": 0.26, "acc_ci95": [0.2, 0.32]}
    warning = letter_warning("arc_challenge", ["A"] * 199 + ["B"])
    results = {"results": {"arc_challenge": {"protocol": "letters", "n": 200, "k": 1, "metrics": metrics,
                                             "warnings": [warning]}}}
    assert harness.format_results(results).splitlines()[-1] == f"warning: {warning}"


def test_math500_subset_is_stratified_by_subject_and_level_and_the_workflow_shares_the_rule():
    from argparse import Namespace

    from common.config import config_from_dict
    from evaluation import evaluate

    problems = load_benchmark("math500")
    chosen = driver.select(problems, 100, seed=0)
    for key in ("subject", "level"):
        everyone, got = Counter(p.meta[key] for p in problems), Counter(p.meta[key] for p in chosen)
        assert all(abs(got[v] - 100 * n / len(problems)) <= 4 for v, n in everyone.items()), key
    cfg = config_from_dict({"experiment": "t", "output_dir": "x", "seeds": [1], "methods": ["dapo"],
                            "eval": {"suites": {"real": {"sets": ["math500"], "limit": 100}}}})
    args = Namespace(suite="real", data=None, data_manifest=None)
    assert evaluate.load_subset(cfg, args, "math500")[0] == chosen  # the workflow's eval jobs draw the same


def test_suites_name_registered_sets_and_expand_in_order_once():
    assert len(SUITES["competition_math"]) == 7 and all(s in BENCHMARKS for v in SUITES.values() for s in v)
    assert expand_sets(["gsm8k", "core"]) == ("gsm8k", "math500", "arc_challenge")
    assert expand_sets(["gsm8k", "gsm8k"]) == ("gsm8k", "gsm8k")  # a set named twice is left to be refused
