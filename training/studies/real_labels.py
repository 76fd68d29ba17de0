"""Exact token importance on real model text where the task defines it (issue 34): reasoning-gym ``chain_sum``.

A chain_sum problem is ``t1 op2 t2 ... opn tn =`` (the entry's ``expression``; ``op`` is + or -), so which
numbers decide correctness is known from the problem alone, as on the synthetic task
(``training.studies.importance``), without any model. The running results r_k = r_(k-1) op_k t_k
(k = 2..n, r_n the gold) are the *correct partial sums*. Each number written in a response (``-?\\d+(.\\d+)?``,
the minus a sign only where no digit or ``)`` precedes it: ``6 - 3`` is an operation, ``= -3`` and ``is -3``
negative) is, in order:

- skipped when it is an enumeration marker (``1.`` / ``2)`` opening a line, ``Step 2``): not a number of the
  computation;
- at a *result position* (after ``=``, or the last number of a response that ended, the answer it states; a
  response cut at the length cap states none): right iff it is a correct partial sum (the gold included);
- elsewhere: right iff it is an operand (t_i, or -t_i where op_i is -) or a correct partial sum.

Importance, with the synthetic task's signs (rises at what makes a right answer, falls at the slip):

- right response (the verifiable reward is 1): every right number is decisive, +1 (the operands, the correct
  partial sums, the answer); a wrong number in a right response, 0;
- wrong response: the *first wrong number*, -1 (the slip), everything else 0; a wrong response with no wrong
  number (no number at all, cut off before its answer) has no decisive token and no defined ρ.

Whitespace is never labelled; a token is decisive when one of its non-whitespace characters lies in a decisive
number (a sign token `` -`` included). Character offsets are those of the response's own tokens (the per-token
decodes of the generated ids, concatenated), so the labels sit on the tokens the credit is on, not on a
re-tokenisation of the text. Any other task has no exact labels: :func:`task_labels` returns None and the table
says "not defined" for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TERM_RE = re.compile(r"([+\-]?)\s*(\d+)")
NUMBER_RE = re.compile(r"(?<![\d.])\d+(?:\.\d+)?(?![\d])")
ENUM_RE = re.compile(r"(?:^|\n)[ \t]*$")
STEP_RE = re.compile(r"\bstep\s*$", re.IGNORECASE)
MINUS = ("-", "−")


@dataclass(frozen=True)
class Chain:
    """Operand values and correct partial sums of one chain_sum problem."""

    operands: frozenset[float]
    partials: frozenset[float]
    gold: float


@dataclass(frozen=True)
class Number:
    """One number written in a response: character span [start, end), value, whether it is right."""

    start: int
    end: int
    value: float
    right: bool


def parse_chain(expression: str) -> Chain:
    """The chain of ``t1 op t2 op ... tn`` (raises ValueError when it is not one)."""
    expr = expression.strip().rstrip("=").strip()
    terms = [(op or "+", float(d)) for op, d in TERM_RE.findall(expr)]
    if not terms or TERM_RE.sub("", expr).strip():
        raise ValueError(f"chain_sum expression {expression!r}: not a chain of + and - terms")
    value, partials, operands = terms[0][1] * (-1 if terms[0][0] == "-" else 1), [], set()
    operands.add(value), operands.add(terms[0][1])
    for op, t in terms[1:]:
        value = value + t if op == "+" else value - t
        partials.append(value)
        operands.add(t), operands.add(-t if op == "-" else t)
    return Chain(frozenset(operands), frozenset(partials or [value]), value)


def numbers(text: str, chain: Chain, ended: bool = True) -> list[Number]:
    """The numbers of a response that belong to the computation, each checked (module docstring)."""
    found = []
    for m in NUMBER_RE.finditer(text):
        start, before = m.start(), text[: m.start()]
        after = text[m.end() : m.end() + 2]
        if (ENUM_RE.search(before) and after[:1] in (".", ")") and after[1:2] in (" ", "\n")) \
                or STEP_RE.search(before):
            continue
        if start and text[start - 1] in MINUS and not before[:-1].rstrip()[-1:].isdigit() \
                and not before[:-1].rstrip().endswith(")"):
            start -= 1
        value = float(text[start : m.end()].replace("−", "-"))
        found.append((start, m.end(), value, text[:start].rstrip().endswith("=")))
    out = []
    for k, (start, end, value, after_eq) in enumerate(found):
        result = after_eq or (ended and k == len(found) - 1)
        right = value in chain.partials or (not result and value in chain.operands)
        out.append(Number(start, end, value, right))
    return out


def chain_importance(expression: str, pieces: Sequence[str], correct: bool, ended: bool = True) -> list[float]:
    """Exact importance (+1, -1 or 0) of each token of a chain_sum response; ``pieces``: per-token decodes of
    the generated ids (EOS included), ``correct``: the verifiable reward, ``ended``: not cut at the length cap."""
    text = "".join(pieces)
    nums = numbers(text, parse_chain(expression), ended)
    if correct:
        decisive = [(n, 1.0) for n in nums if n.right]
    else:
        decisive = [(n, -1.0) for n in nums if not n.right][:1]
    chars = [0.0] * len(text)
    for n, v in decisive:
        chars[n.start : n.end] = [v] * (n.end - n.start)
    out, pos = [], 0
    for piece in pieces:
        marks = [chars[pos + j] for j, ch in enumerate(piece) if not ch.isspace() and chars[pos + j]]
        out.append(marks[0] if marks else 0.0)
        pos += len(piece)
    return out


def task_labels(problem: Mapping[str, Any], pieces: Sequence[str], correct: bool,
                ended: bool = True) -> list[float] | None:
    """Exact importance per token of a response to ``problem`` (a training row: ``task``, ``entry``), or None
    when its task defines none (every task not in :data:`LABELLED_TASKS`)."""
    labeller = LABELLERS.get(problem.get("task"))
    return None if labeller is None else labeller(problem, pieces, correct, ended)


def chain_sum_labels(problem: Mapping[str, Any], pieces: Sequence[str], correct: bool, ended: bool) -> list[float]:
    """:func:`chain_importance` of a chain_sum training row, after checking its expression sums to its answer."""
    expression = problem["entry"]["expression"]
    if parse_chain(expression).gold != float(problem["answer"]):
        raise ValueError(f"training row {problem.get('id')}: expression {expression!r} does not sum to its answer "
                         f"{problem['answer']!r}; remake train.jsonl (rule make_data)")
    return chain_importance(expression, pieces, correct, ended)


LABELLERS = {"chain_sum": chain_sum_labels}
"""reasoning-gym task -> its exact labeller (module docstring); every other task: not defined."""
LABELLED_TASKS: tuple[str, ...] = tuple(LABELLERS)
