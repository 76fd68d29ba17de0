"""``python -m evaluation.checks.bench_grader``: deterministic pairs, ratio and case accuracy printed in one run."""

from __future__ import annotations

import pytest

from evaluation.checks import bench_grader


def test_pairs_are_deterministic_and_mixed() -> None:
    try:
        a, b = bench_grader.build_pairs(400, seed=3), bench_grader.build_pairs(400, seed=3)
    except SystemExit:
        pytest.skip("no benchmark data")
    assert a == b and len(a) == 400
    assert {d for _, _, d in a} >= {"math", "gsm8k"}
    assert any("\\boxed{}" in r for r, _, _ in a) and any("<|im_end|>" in r for r, _, _ in a)


def _need_math_verify_and_data() -> None:
    pytest.importorskip("math_verify")
    try:
        bench_grader.build_pairs(1)
    except SystemExit:
        pytest.skip("no benchmark data")


def test_main_prints_ratio_and_case_accuracy(capsys: pytest.CaptureFixture[str]) -> None:
    _need_math_verify_and_data()
    cases = bench_grader.Path(__file__).with_name("cases")
    bench_grader.main(["--n", "40", "--cases", str(cases)])
    out = capsys.readouterr().out
    assert "throughput_ratio_vs_math_verify " in out
    assert "cases " in out and "math_verify " in out and "cases_throughput_ratio_vs_math_verify " in out


def test_repeated_rounds_print_the_spread_and_timeouts_past_their_budget(capsys: pytest.CaptureFixture[str]) -> None:
    """``--repeat`` prints each round's ratio; a timeout verdict reports how far its wall clock ran past the budget."""
    _need_math_verify_and_data()
    bench_grader._ADVERSARIAL, saved = (("\\boxed{9^{9^{9^{9}}}}", "1"),), bench_grader._ADVERSARIAL
    try:
        bench_grader.main(["--n", "10", "--adversarial", "0.1", "--repeat", "2", "--timeout", "1"])
    finally:
        bench_grader._ADVERSARIAL = saved
    out = capsys.readouterr().out
    rounds = next(line for line in out.splitlines() if line.startswith("ratio_per_round median "))
    assert len(rounds.split(": ", 1)[1].split()) == 2
    assert "timeouts 2: wall clock minus budget" in out  # one adversarial pair, timed out in each round
    assert "of 22 verdicts (wall clock around grade())" in out  # how many ran past it depends on the machine's load


def test_worker_warm_forms_all_parse() -> None:
    """The worker's start-up warm-up (evaluation.grading.worker._WARM_FORMS) only fills latex2sympy's parser
    cache if its forms parse; a latex2sympy upgrade that rejects one would silently slow the first answers."""
    from latex2sympy2_extended import latex2sympy

    from evaluation.grading.worker import _WARM_FORMS

    for form in _WARM_FORMS:
        assert latex2sympy(form, normalization_config=None) is not None, form
