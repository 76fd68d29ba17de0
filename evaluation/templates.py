r"""Prompt templates per model family; every result should record the template name it was rendered with.

* ``base_boxed``   zero-shot for base models, asks for ``\boxed{}``.
* ``base_fewshot`` few-shot math for base models (four short worked examples written for this project).
* ``chat_boxed``   the tokenizer's chat template around the zero-shot ``\boxed{}`` instruction.
* ``chat_answer``  the chat template around a one-line ``\boxed{}`` instruction (short procedural tasks).
* ``base_mcq`` / ``chat_mcq``   multiple choice, answer is a letter.
* ``base_code`` / ``chat_code`` MBPP+/HumanEval+: direct completion of the prompt / a fenced code answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from evaluation.benchmarks import LETTERS, Problem

BOXED_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
ANSWER_INSTRUCTION = "Put the final answer in \\boxed{}."
MCQ_CHAT_INSTRUCTION = ("Answer the following multiple choice question. Think step by step, then put only "
                        "the letter of the correct option within \\boxed{}.")
CODE_CHAT_INSTRUCTION = ("Write a self-contained Python solution to the task below. Reply with the complete "
                         "code in one ```python code block.")

# Written for this project (not taken from any published prompt set).
FEWSHOT_MATH: tuple[tuple[str, str, str], ...] = (
    ("A box holds 6 red and 9 blue marbles. How many marbles are in 4 such boxes?",
     "One box holds 6 + 9 = 15 marbles, so 4 boxes hold 4 * 15 = 60 marbles.", "60"),
    ("Solve for $x$: $3x - 7 = 11$.", "Adding 7 gives $3x = 18$, so $x = 6$.", "6"),
    ("What is the remainder when $2^{10}$ is divided by 7?",
     "$2^3 = 8 \\equiv 1 \\pmod 7$, so $2^{10} = (2^3)^3 \\cdot 2 \\equiv 2 \\pmod 7$.", "2"),
    ("A rectangle has perimeter 20 and length 6. What is its area?",
     "The width is $20/2 - 6 = 4$, so the area is $6 \\cdot 4 = 24$.", "24"),
)

Family = Literal["base", "chat"]


@dataclass(frozen=True)
class Template:
    """A named prompt template; ``kinds`` lists the benchmark kinds it applies to."""

    name: str
    family: Family
    kinds: tuple[str, ...]
    description: str


def _options(problem: Problem) -> str:
    if not problem.choices:
        raise ValueError(f"{problem.id}: multiple-choice template needs choices")
    return "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(problem.choices))


def _chat(tokenizer: Any, content: str, template: str) -> str:
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"template {template!r} needs a tokenizer with a chat template")
    return tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                         add_generation_prompt=True)


def _base_boxed(p: Problem, tok: Any) -> str:
    return f"Problem:\n{p.question}\n\n{BOXED_INSTRUCTION}\n\nSolution:\n"


def _base_fewshot(p: Problem, tok: Any) -> str:
    shots = "".join(f"Problem:\n{q}\n\nSolution:\n{s} The final answer is $\\boxed{{{a}}}$.\n\n"
                    for q, s, a in FEWSHOT_MATH)
    return f"{shots}Problem:\n{p.question}\n\nSolution:\n"


def _chat_boxed(p: Problem, tok: Any) -> str:
    return _chat(tok, f"{p.question}\n{BOXED_INSTRUCTION}", "chat_boxed")


def _chat_answer(p: Problem, tok: Any) -> str:
    return _chat(tok, f"{p.question}\n{ANSWER_INSTRUCTION}", "chat_answer")


def _qa(p: Problem, tok: Any) -> str:
    """The embedded synthetic task's own format (training.data.PROMPT_TEMPLATE)."""
    return f"Question: {p.question}\nAnswer:"


def _base_mcq(p: Problem, tok: Any) -> str:
    return f"Question: {p.question}\n{_options(p)}\nAnswer:"


def _chat_mcq(p: Problem, tok: Any) -> str:
    return _chat(tok, f"{MCQ_CHAT_INSTRUCTION}\n\n{p.question}\n\n{_options(p)}", "chat_mcq")


def _base_code(p: Problem, tok: Any) -> str:
    return p.question


def _chat_code(p: Problem, tok: Any) -> str:
    return _chat(tok, f"{CODE_CHAT_INSTRUCTION}\n\n```python\n{p.question.strip()}\n```", "chat_code")


TEMPLATES: Mapping[str, Template] = MappingProxyType({
    "base_boxed": Template("base_boxed", "base", ("math",), "zero-shot, \\boxed{} instruction"),
    "base_fewshot": Template("base_fewshot", "base", ("math",), f"{len(FEWSHOT_MATH)}-shot math, \\boxed{{}}"),
    "chat_boxed": Template("chat_boxed", "chat", ("math",), "chat template, \\boxed{} instruction"),
    "chat_answer": Template("chat_answer", "chat", ("math",), "chat template, one-line \\boxed{} instruction "
                            "(short tasks: no step-by-step request)"),
    "qa": Template("qa", "base", ("math",), "Question/Answer lines of the synthetic task (training.data)"),
    "base_mcq": Template("base_mcq", "base", ("mcq",), "lettered options, 'Answer:' cue"),
    "chat_mcq": Template("chat_mcq", "chat", ("mcq",), "chat template, letter in \\boxed{}"),
    "base_code": Template("base_code", "base", ("code",), "direct completion of the task prompt"),
    "chat_code": Template("chat_code", "chat", ("code",), "chat template, fenced python answer"),
})

_RENDER: Mapping[str, Callable[[Problem, Any], str]] = MappingProxyType({
    "base_boxed": _base_boxed, "base_fewshot": _base_fewshot, "chat_boxed": _chat_boxed,
    "chat_answer": _chat_answer, "qa": _qa, "base_mcq": _base_mcq, "chat_mcq": _chat_mcq, "base_code": _base_code,
    "chat_code": _chat_code,
})


STOP_STRINGS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    # a base model that has answered goes on with the few-shot layout: a new "Problem:" or "Question:"
    "base_boxed": ("\nProblem:", "\nQuestion:"),
    "base_fewshot": ("\nProblem:", "\nQuestion:"),
    "base_mcq": ("\nQuestion:",),
})
"""Stop strings per template, honoured by both generation backends. Chat templates end at the chat's end
token (eos); ``qa`` (the synthetic task, trained to end with eos) and code completions have none."""


def stop_strings(template_name: str) -> tuple[str, ...]:
    return STOP_STRINGS.get(template_name, ())


def render(template_name: str, problem: Problem, tokenizer: Any = None) -> str:
    """Render ``problem`` with the named template (chat templates need ``tokenizer``)."""
    try:
        fn = _RENDER[template_name]
    except KeyError:
        raise KeyError(f"unknown template {template_name!r}; known: {', '.join(TEMPLATES)}") from None
    return fn(problem, tokenizer)
