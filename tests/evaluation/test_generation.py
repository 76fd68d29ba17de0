"""Stop strings: the HF backend ends a sample at the template's stop string and returns the text before it."""

from __future__ import annotations

import pytest

from evaluation.benchmarks import Problem
from evaluation.driver import Sampling, generate_set
from evaluation.generation import SamplingParams, make_backend
from evaluation.generation.types import cut_at_stop
from evaluation.templates import STOP_STRINGS, render, stop_strings


def test_cut_at_stop_keeps_the_text_before_the_earliest_stop_string():
    answer = "So the answer is \\boxed{4}.\n\nProblem:\nWhat is 2+3?\n\nSolution:\n\\boxed{5}"
    assert cut_at_stop(answer, ("\nQuestion:", "\nProblem:")) == ("So the answer is \\boxed{4}.\n", "\nProblem:")
    assert cut_at_stop("no stop here", ("\nProblem:",)) == ("no stop here", None)
    assert cut_at_stop("abc", ()) == ("abc", None)


def test_base_templates_stop_at_a_new_problem_or_question():
    problem = Problem(id="p", question="What is 1+1?", answer="2")
    for name in ("base_boxed", "base_fewshot"):
        assert "\nProblem:" in stop_strings(name) and "\nQuestion:" in stop_strings(name)
        prompt = render(name, problem)
        # the few-shot delimiter is what the prompt itself puts between problems
        assert prompt.count("Problem:") == (1 if name == "base_boxed" else 5)
    assert stop_strings("chat_boxed") == () and stop_strings("qa") == () and set(STOP_STRINGS) <= {
        "base_boxed", "base_fewshot", "base_mcq"}


@pytest.fixture(scope="module")
def hf(tiny_env):
    return make_backend("hf", str(tiny_env["model"]), seed=0, batch_size=4)


def test_hf_backend_ends_the_sample_at_a_stop_string(hf):
    prompts = ["Question: What is 3 + 4?\nAnswer:", "Question: What is 12 - 5?\nAnswer:"]
    params = SamplingParams(n=1, temperature=1.0, top_p=1.0, max_new_tokens=24, seed=0)  # same seed: same prefix
    free = [group[0] for group in hf.generate(prompts, params)]
    text = free[0].text
    # a stop string that first occurs a few characters in (the untrained model's text is arbitrary)
    stop = next(text[i : i + n] for i in range(3, len(text) - 3) for n in (1, 2, 3)
                if text[i : i + n].strip() and text.find(text[i : i + n]) == i)
    stopped = [group[0] for group in hf.generate(prompts, SamplingParams(**{**params.__dict__, "stop": (stop,)}))]
    assert stopped[0].text == text[: text.index(stop)] and stopped[0].finish_reason == "stop"
    assert len(stopped[0].token_ids) < len(free[0].token_ids)  # generation itself stopped, not only the text
    if stop not in free[1].text:  # a row without the stop string is unchanged
        assert stopped[1].text == free[1].text


def test_generate_applies_the_templates_stop_strings_and_records_the_cut_text(hf):
    problem = Problem(id="p", question="What is 1+1?", answer="2")
    raw, meta = generate_set(hf, "gsm8k", [problem],
                             Sampling(k=2, temperature=1.0, max_new_tokens=24, seed=0, template="base_fewshot"))
    assert meta["template"] == "base_fewshot" and "\nProblem:" in meta["sampling"]["stop"]
    assert len(raw) == 2 and all("\nProblem:" not in r["response"] for r in raw)
