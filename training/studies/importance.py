"""Ground-truth token importance on the synthetic task (issue 16), exact by construction.

The generator (``training.data``) writes a solution as a chain ``a op b = r.`` whose left operand is the
previous written result, and boxes the last result; a *slip* is one unit of the chain written wrong.
So which tokens decide correctness is known without any model. A *unit* is one number or operator of a
calculation (left operand ``a``, operator, right operand ``b``, result ``r``) or the boxed value ``y``.

*Exact effect.* importance(u) = correct(x) - correct(x with u flipped, downstream recomputed): a right unit
flipped to any other value (a slip, as the generator makes them), a wrong unit flipped to its right value,
every later calculation and the boxed value then following the chain. Exact cancellations (a second slip
undoing the first) are ignored. Hence:

- correct response: every unit is decisive, +1 (any single change moves the boxed value off the gold);
- wrong response with exactly one wrong unit in a complete chain: that unit (the slip) is decisive, -1
  (correcting it alone makes the answer right); every other token 0;
- wrong response with several wrong units or a chain of the wrong length: no single token decides, all 0.

Scaffolding (``Let's think step by step.``, ``task.scaffold_repeats`` restatements),
``=``/``.``/``\\boxed{``/``}``/EOS and any other text: 0.
The sign follows the Monte-Carlo definition (``training.studies.mc_importance``): P(correct | through t)
- P(correct | before t) rises at decisive tokens of right solutions and falls at a slip.

A token takes the class and importance of its first non-whitespace character (as
``training.studies.analysis.token_labels``), so a multi-digit number's digit tokens share its unit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from training.data import RESTATEMENT_RE, SCAFFOLD

SCAFFOLDING, OPERAND, RESULT, ANSWER, SLIP, FORMAT, OTHER = (
    "scaffolding", "operand", "result", "answer", "slip", "format", "other")
TOKEN_CLASSES: tuple[str, ...] = (SCAFFOLDING, OPERAND, RESULT, ANSWER, SLIP, FORMAT, OTHER)
DECISIVE_CLASSES: tuple[str, ...] = (OPERAND, RESULT, ANSWER, SLIP)

QUESTION_RE = re.compile(r"has (\d+) \w+\. \w+ (.+?)\. How many")
CLAUSE_RE = re.compile(r"gets (\d+) more|gives away (\d+)")
CALC_RE = re.compile(r"(?P<a>-?\d+)\s*(?P<op>[+\-])\s*(?P<b>\d+)\s*=\s*(?P<r>-?\d+)(?:\s*\.)?")
BOXED = "\\boxed{"
BOXED_RE = re.compile(re.escape(BOXED) + r"\s*(?P<y>-?\d+)")


@dataclass(frozen=True)
class Question:
    """The arithmetic of one problem: start value and (operator, operand) steps."""

    start: int
    steps: tuple[tuple[str, int], ...]

    @property
    def answer(self) -> int:
        value = self.start
        for op, b in self.steps:
            value = value + b if op == "+" else value - b
        return value


@dataclass(frozen=True)
class Unit:
    """One number or operator of the written chain: character span [start, end), class, right or not."""

    start: int
    end: int
    cls: str  # OPERAND, RESULT or ANSWER
    right: bool


def parse_question(text: str) -> Question | None:
    """The chain of a synthetic question (or prompt); None if the text is not one."""
    m = QUESTION_RE.search(text)
    if m is None:
        return None
    steps = []
    for c in CLAUSE_RE.finditer(m.group(2)):
        steps.append(("+", int(c.group(1))) if c.group(1) else ("-", int(c.group(2))))
    return Question(int(m.group(1)), tuple(steps)) if steps else None


def chain_units(text: str, question: Question) -> tuple[list[Unit], bool]:
    """Units of a written solution, each checked against the chain model; and whether the chain has the
    question's number of calculations (and a boxed value)."""
    cut = text.find(BOXED)
    reasoning = text if cut < 0 else text[:cut]
    units: list[Unit] = []
    prev = question.start
    calcs = list(CALC_RE.finditer(reasoning))
    for k, m in enumerate(calcs):
        a, op, b, r = int(m.group("a")), m.group("op"), int(m.group("b")), int(m.group("r"))
        want_op, want_b = question.steps[k] if k < len(question.steps) else (None, None)
        checks = (("a", a == prev), ("op", op == want_op), ("b", b == want_b),
                  ("r", r == (a + b if op == "+" else a - b)))
        for name, ok in checks:
            units.append(Unit(m.start(name), m.end(name), RESULT if name == "r" else OPERAND, ok))
        prev = r
    boxed = BOXED_RE.match(text, cut) if cut >= 0 else None
    if boxed is not None:
        y = int(boxed.group("y"))
        units.append(Unit(boxed.start("y"), boxed.end("y"), ANSWER, y == prev))
    complete = len(calcs) == len(question.steps) and boxed is not None
    return units, complete


def unit_importance(units: Sequence[Unit], complete: bool, correct: bool) -> list[float]:
    """The exact effect of each unit on correctness (module docstring): +1, -1 or 0 per unit."""
    if correct:
        return [1.0] * len(units)
    wrong = [k for k, u in enumerate(units) if not u.right]
    out = [0.0] * len(units)
    if complete and len(wrong) == 1:
        out[wrong[0]] = -1.0
    return out


def char_classes(text: str, units: Sequence[Unit], importance: Sequence[float]) -> tuple[list[str], list[float]]:
    """Class and importance of every character of a response."""
    classes, imp = [OTHER] * len(text), [0.0] * len(text)
    cut = text.find(BOXED)
    reasoning = text if cut < 0 else text[:cut]
    for m in re.finditer(re.escape(SCAFFOLD) + "|" + RESTATEMENT_RE, reasoning):
        classes[m.start() : m.end()] = [SCAFFOLDING] * (m.end() - m.start())
    for m in CALC_RE.finditer(reasoning):
        classes[m.start() : m.end()] = [FORMAT] * (m.end() - m.start())
    if cut >= 0:
        classes[cut:] = [FORMAT] * (len(text) - cut)
    for u, v in zip(units, importance):
        cls = SLIP if not u.right else u.cls
        classes[u.start : u.end] = [cls] * (u.end - u.start)
        imp[u.start : u.end] = [v] * (u.end - u.start)
    return classes, imp


def synthetic_importance(question: str, pieces: Sequence[str], correct: bool) -> tuple[list[str], list[float]]:
    """(class, exact importance) per response token of a synthetic-task response.

    ``question``: the problem text or prompt; ``pieces``: per-token decodes of the response (EOS
    included); ``correct``: the verifiable reward. A question that does not parse gives class ``other``
    and importance 0 everywhere (a response the method cannot be scored on).
    """
    q = parse_question(question)
    text = "".join(pieces)
    if q is None:
        return [OTHER] * len(pieces), [0.0] * len(pieces)
    units, complete = chain_units(text, q)
    classes, imp = char_classes(text, units, unit_importance(units, complete, correct))
    out_c, out_i, pos = [], [], 0
    for piece in pieces:
        first = next((k for k, ch in enumerate(piece) if not ch.isspace()), 0)
        if piece and pos + first < len(text):
            out_c.append(classes[pos + first]), out_i.append(imp[pos + first])
        else:
            out_c.append(OTHER), out_i.append(0.0)
        pos += len(piece)
    return out_c, out_i
