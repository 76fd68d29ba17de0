"""Answer checker for math RLVR rewards and evaluation: extraction, equivalence, hard timeouts.

One function, :func:`grade`, serves both the RL reward and evaluation, so train and eval never
disagree about what counts as correct.  Verdicts carry the extracted answer and a reason
(``correct``, ``wrong``, ``no_answer``, ``parse_error``, ``timeout``); failures are never folded
silently into ``wrong``.

Pipeline
--------
1. **Extraction** (:func:`extract_answer`).  If the response contains ``</think>`` only the text
   after the last one is searched; an unclosed ``<think>`` (truncated reasoning) has no answer.
   Priority: GSM8K ``#### N`` (dataset ``gsm8k`` first, otherwise last) > the last ``\\boxed{}`` /
   ``\\fbox{}`` (nested and escaped braces handled, ``\\boxed 7`` too; boxes separated only by
   commas/"and"/``\\quad`` from the last one are joined as a multiple answer) > the last
   "final answer is" / "the answer is" / "Answer:" / ``**Answer:**`` phrase (its ``$...$`` span or
   the rest of the sentence) > ``#### N``.  Nothing found -> ``no_answer``.  There is no
   "last number in the text" fallback: it rewards lazy, unformatted answers.
2. **Normalisation** (pure string work, cached): ``$``/``\\(``/``\\[`` delimiters, ``\\left``/
   ``\\right``/``\\big``, spacing commands (``\\!``, ``\\,``, ``~``, ``\\quad``), ``\\displaystyle``,
   ``\\dfrac``/``\\tfrac``, ``{,}`` and thousands commas (``10,\\!080`` = 10080), currency ``\\$``,
   ``\\text{}``/``\\mbox{}``/``\\mathrm{}`` (unit words after a number are dropped, other text
   unwrapped), bare unit words of two or more letters after a number (``5 cm``; ``2m`` stays a
   product), a leading ``x \\in``, ``\\frac12``/``\\sqrt2`` shorthands (LaTeX reads one token:
   ``\\sqrt12`` is ``\\sqrt{1}2``), plain-text ``sqrt(2)``, ``pi``, ``cos x``, unicode symbols,
   "and"/"or" inside lists, degree marks and percent signs (remembered as flags),
   ``a \\times 10^{k}`` and ``aek`` scientific notation, number words up to ninety-nine,
   ``infinity``, AIME leading zeros (``042``).
3. **Fast path** (in process, no sympy, microseconds): identical normalised strings; plain
   integers, decimals, ``a/b``, ``\\frac{a}{b}``, mixed numbers and scientific notation on both
   sides are compared with :class:`fractions.Fraction`; choice letters; text answers; base-n.
4. **Sympy path** (worker subprocess with a hard kill): structure first, then scalar equivalence.

Equivalence conventions
-----------------------
* **Exact golds compare exactly.**  Integers, fractions and symbolic golds need exact equality:
  rational differences are exact, ``0.333`` != ``1/3``, ``2^{100}+1`` != ``2^{100}``,
  ``1/2^{99}`` != ``1/2^{98}``, ``3.14`` != ``\\pi``.  Irrational numeric differences are
  accepted only when they vanish to 60 significant digits.  Symbolic expressions are equal when
  ``simplify(a - b) == 0`` or the difference vanishes at three random rational points.
* **Decimal golds** (``0.15``, ``1.2e5``, ``326.5``) accept any value that rounds to them:
  ``|pred - gold| <= quantum / 2`` where quantum is the gold's last decimal place
  (``0.15`` accepts ``0.1500``, ``3/20`` and ``0.149``; rejects ``0.2``).  A decimal whose
  fraction digits are all zero (``27.0``, as AMC golds are stored) is an exact integer.
* **Percent**: ``10\\%`` matches ``10`` and ``0.1``; without a ``%`` on either side ``50`` != ``0.5``.
* **Degrees**: ``90^\\circ`` matches ``90``; a gold in degrees matches a prediction in radians only
  when the prediction contains ``\\pi`` (``\\frac{\\pi}{2}``); a radian gold matches a prediction
  with an explicit degree mark.  A bare ``45`` never matches ``\\frac{\\pi}{4}``.
* **Mixed numbers**: an integer literal directly followed by ``\\frac{p}{q}`` of integer literals
  (``1\\frac{4}{5}``, ``137 \\frac{1}{2}``) is a mixed number.
* **Equations**: ``x=5`` matches ``5`` (a single-variable left side may be dropped on either
  side); two single-variable assignments compare their right sides (``D = (0, 1)`` != ``D = (0,
  1.5)``); general equations match when ``(l1 - r1) / (l2 - r2)`` is a nonzero constant
  (``5x-7y+11z+4=0`` matches ``-10x+14y-22z-8=0``; ``3x-y+13=0`` matches ``y=3x+13``).
* **Intervals and unions**: bracket types must match exactly (``[1,2)`` != ``[1,2]``); unions
  compare as unordered collections of intervals; an inequality in one variable
  (``x \\le 3``, ``-1 < x < 2``) is converted to the interval it denotes.
* **Tuples** ``(a,b)`` compare element-wise in order (same bracket types); **sets** ``\\{a,b\\}``
  and bare **comma lists** (multiple answers, ``1,-2``; ``a \\pm b`` is two answers) compare as
  unordered multisets.  A bare list does not match a tuple gold.  A list prediction against a
  single gold is correct only when every element equals the gold (one answer in two notations).
* **Matrices/vectors**: same shape, element-wise; a ``pmatrix`` column vector also matches a
  parenthesised tuple of the same entries.
* **Complex numbers**: ``i`` is the imaginary unit (``1+2i`` == ``2i+1``); ``e`` is Euler's number.
  Symbol names are case-insensitive (latex2sympy lowercases them).
* **Base-n** (``4210_{5}``): the digits must match (subscript optional on the prediction).
* **Text answers** (``\\text{Evelyn}``) compare case-insensitively as strings; **choice letters**
  (``\\text{(C)}``) match ``C``, ``(C)``, ``\\text{C}``.
* **Datasets**: ``gsm8k`` golds may be full solutions (the part after ``####`` is used);
  ``aime`` answers must be integers 0-999 (leading zeros allowed).
* **Limits**: inputs longer than 2000 characters or nested deeper than 60 brackets are
  ``parse_error``; every sympy check runs in a worker subprocess killed after ``timeout_s``
  (``timeout``), which works off the main thread and inside daemonic worker processes.  The
  worker (a plain ``subprocess``, ``python -m evaluation.grading.worker``, 4 GiB address-space limit) starts
  on first use and takes about a second to import sympy; that start-up is not counted against
  ``timeout_s``.  A killed worker is replaced in the background.  Workers are per process
  (reset after ``fork``), one per concurrent caller, and exit with their parent.

Changelog
---------
* ``creditbench-grader/1`` (2026-11-30): first version.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from evaluation.grading.equivalence import _fast_verdict
from evaluation.grading.extract import _prepare_gold, extract_answer, last_boxed
from evaluation.grading.pool import _slow_in_worker

GRADER_VERSION = "creditbench-grader/1"

log = logging.getLogger(__name__)

REASONS = ("correct", "wrong", "no_answer", "parse_error", "timeout")
DATASETS = (None, "math", "gsm8k", "aime")


@dataclass(frozen=True)
class Verdict:
    """Result of grading one response against one gold answer."""

    correct: bool
    """True only when reason == "correct"."""
    extracted: str | None
    """Answer string pulled from the response (None = no answer found)."""
    reason: str
    """One of "correct", "wrong", "no_answer", "parse_error", "timeout"."""
    seconds: float
    """Wall-clock seconds spent grading (extraction included)."""


def grade(response: str, gold: str, *, dataset: str | None = None, timeout_s: float = 5.0) -> Verdict:
    """Grade a model response against a gold answer (gold second; see the module docstring)."""
    t0 = time.perf_counter()
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset rule {dataset!r}; valid: {DATASETS}")
    extracted = None
    try:
        extracted = extract_answer(response, dataset)
        if extracted is None:
            return Verdict(False, None, "no_answer", time.perf_counter() - t0)
        g = _prepare_gold(gold, dataset)
        reason = _fast_verdict(extracted, g, dataset)
    except (ValueError, TypeError, RecursionError, MemoryError, OverflowError, ZeroDivisionError):
        log.warning("grader fast path failed on %r / %r", response[-200:], gold, exc_info=True)
        return Verdict(False, extracted, "parse_error", time.perf_counter() - t0)
    if reason is None:
        reason = _slow_in_worker(extracted, g, dataset, timeout_s)
    return Verdict(reason == "correct", extracted, reason, time.perf_counter() - t0)


def grade_many(
    pairs: Sequence[tuple[str, str]],
    *,
    dataset: str | None = None,
    timeout_s: float = 5.0,
    workers: int = 1,
) -> list[Verdict]:
    """Grade (response, gold) pairs in order; ``workers`` sympy subprocesses run in parallel."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset rule {dataset!r}; valid: {DATASETS}")
    if workers <= 1 or len(pairs) < 2:
        return [grade(r, g, dataset=dataset, timeout_s=timeout_s) for r, g in pairs]
    with ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(lambda rg: grade(rg[0], rg[1], dataset=dataset, timeout_s=timeout_s), pairs))


def reward(responses: Sequence[str], golds: Sequence[str], *, timeout_s: float = 5.0, workers: int = 4) -> list[float]:
    """The RL reward of a rollout batch: 1.0 where :func:`grade` accepts, else 0.0 (``workers`` in parallel)."""
    if len(responses) != len(golds):
        raise ValueError(f"{len(responses)} responses but {len(golds)} golds")
    verdicts = grade_many(list(zip(responses, golds)), timeout_s=timeout_s, workers=workers)
    return [float(v.correct) for v in verdicts]


__all__ = ["DATASETS", "GRADER_VERSION", "REASONS", "Verdict", "extract_answer", "grade", "grade_many",
           "last_boxed", "reward"]

