"""Answer checker for math RLVR rewards and evaluation: extraction, equivalence, hard timeouts.

One function, :func:`grade`, serves both the RL reward and evaluation, so train and eval never
disagree about what counts as correct.  Verdicts carry the extracted answer and a reason
(``correct``, ``wrong``, ``no_answer``, ``parse_error``, ``timeout``); failures are never folded
silently into ``wrong``.

Pipeline
--------
1. **Extraction** (:func:`extract_answer`, linear time).  If the response contains ``</think>`` only the
   text after the last one is searched; an unclosed ``<think>`` (truncated reasoning) has no answer.  A
   leaked chat-template turn (``<|im_start|>``, ``<|endoftext|>``, ``\\nUser:``, ``\\nQuestion:``, ...)
   and everything after it is cut, then only the last 20,000 characters are searched.  Priority: GSM8K
   ``#### N`` (dataset ``gsm8k``) > the last non-empty ``\\boxed{}``/``\\fbox{}`` (empty and echoed
   boxes such as the instruction's ``\\boxed{}`` are skipped; boxes joined by commas/"and"/"or"/
   ``\\quad``, or on the same line with such a separator, are read together as one answer set) -- unless
   a "Final Answer:" phrase follows the last box, which then supersedes it > the last "final answer is"
   / "the answer is" / "Answer:" phrase (its ``$...$`` span or the rest of the sentence; trailing
   words after a number dropped: ``18 apples``; an arithmetic chain ``3 + 4 = 7`` -- no letters left
   of its first ``=`` -- gives its last value, in a box too; a phrase followed by a comma is skipped)
   > ``#### N`` > the closing statement: display math closing the response (the value after its last
   ``=``), else the last sentence of the last line (a closing pleasantry skipped) when it holds exactly
   one value (an integer, decimal, ``a/b`` or a decimal comma ``3,75``, so a closing sentence in another
   language counts too), or ends "is/=/makes/costs/, so ... N [words]".  A sentence with several values and no such
   ending has no answer ("The value is 5 and then 7." is ``no_answer``): there is no "last number
   anywhere" fallback.
2. **Normalisation** (pure string work, cached): ``$``/``\\(``/``\\[`` delimiters, ``\\left``/
   ``\\right``/``\\big``, spacing commands (``\\!``, ``\\,``, ``~``, ``\\quad``), ``\\displaystyle``,
   ``\\dfrac``/``\\tfrac``, ``{,}`` and thousands commas (``10,\\!080`` = 10080), currency ``\\$``,
   ``\\text{}``/``\\mbox{}``/``\\mathrm{}`` (unit words after a number are dropped, other text
   unwrapped), bare unit words of two or more letters after a number (``5 cm``; ``2m`` stays a
   product), a leading ``x \\in``, ``\\frac12``/``\\sqrt2`` shorthands (LaTeX reads one token:
   ``\\sqrt12`` is ``\\sqrt{1}2``), plain-text ``sqrt(2)``, ``pi``, ``cos x``, unicode symbols,
   "and"/"or" inside lists, degree marks and percent signs (remembered as flags),
   ``a \\times 10^{k}`` and ``aek`` scientific notation, number words up to ninety-nine,
   ``infinity``, AIME leading zeros (``042``); v2 adds: unicode and ASCII relations (``<=``, ``!=``),
   repeating decimals (``0.\\overline{3}``, ``0.1(6)``, ``0.333...``) as exact fractions, number words
   to the billions and simple fractions (``three quarters``), plain-text mixed numbers (``2 1/2``),
   space thousands separators (``1 000``), redundant outer braces and trailing ``\\\\``.  Inputs over
   2000 characters are a ``parse_error`` before any normalisation (the cap comes first).
3. **Fast path** (in process, no sympy, microseconds): identical normalised strings; plain
   integers, decimals, ``a/b``, ``\\frac{a}{b}``, mixed numbers and scientific notation on both
   sides are compared with :class:`fractions.Fraction`; choice letters; text answers; base-n.
4. **Sympy path** (worker subprocess with a hard kill): structure first, then scalar equivalence.

Equivalence conventions
-----------------------
* **Exact golds compare exactly.**  Integers, fractions and symbolic golds need exact equality:
  rational differences are exact (sums, products and integer powers of rationals are computed exactly:
  ``(10^{1000}+1)/10^{1000}`` != ``1``), ``0.333`` != ``1/3`` (``0.\\overline{3}`` == ``1/3``),
  ``2^{100}+1`` != ``2^{100}``, ``1/2^{99}`` != ``1/2^{98}``, ``3.14`` != ``\\pi``.  Irrational numeric
  differences are accepted only when they vanish to 60 significant digits relative to the gold (confirmed
  at 120 digits, or twice the digits of the largest number involved plus 60, up to 20,000; without
  ``simplify``: reordered nested radicals decide in milliseconds).  Symbolic expressions are equal when
  ``simplify(a - b) == 0`` or the difference vanishes at three random rational points.
* **Decimal golds** (``0.15``, ``1.2e5``, ``326.5``) accept any value that rounds to them:
  ``|pred - gold| <= quantum / 2`` where quantum is the gold's last decimal place
  (``0.15`` accepts ``0.1500``, ``3/20`` and ``0.149``; rejects ``0.2``).  A decimal whose
  fraction digits are all zero (``27.0``, as AMC golds are stored) is an exact integer.
* **Percent**: against a bare gold a ``%`` on the prediction names either the gold itself (the unit a
  "what percent" question asks for, which MATH and GSM8K store bare: ``25%`` == ``25``) or its hundredth
  (a percent for a probability gold: ``10%`` == ``0.1``; ``3%`` != ``0.3``).  Against a percent gold a
  bare number reads as that many percent:
  ``10`` matches ``10\\%``; a bare decimal or fraction (``0.1``, ``\\frac{1}{10}``) is wrong.
  Without a ``%`` on either side ``50`` != ``0.5``.
* **Angles**: ``90^\\circ`` matches ``90`` and a degree mark on the prediction matches a bare gold;
  an angle in the other unit than the gold's is wrong, because the requested unit counts
  (``\\frac{\\pi}{2}`` != ``90^\\circ``; ``45^\\circ`` != ``\\frac{\\pi}{4}``; ``45`` != ``\\frac{\\pi}{4}``).
* **Clock times**: a gold ``h:mm`` (optionally ``:ss``, ``am``/``pm``) is a time, compared as a time and
  never as a ratio (``1:30`` != ``2:60``); with am/pm on one side only the hour compares modulo 12
  (``3:45 pm`` == ``15:45`` == ``3:45``).
* **Ratios**: ``a:b`` compares with proportional parts (``6:8`` == ``3:4``, same number of parts); a
  two-part ratio against a non-integer fraction compares its quotient (``3:4`` == ``\\frac{3}{4}``).
* **Units and decimal commas**: a plain-number gold accepts the number followed by unit words or symbols
  (``5 cm``, ``12 km/h``, ``\\mathrm{m/s}``); a non-integer decimal gold accepts a decimal comma
  (``3,5`` == ``3.5``; three digits after a comma are a thousands group).
* **Mixed numbers**: an integer literal directly followed by ``\\frac{p}{q}`` of integer literals
  (``1\\frac{4}{5}``, ``137 \\frac{1}{2}``) is a mixed number.
* **Equations and labels**: ``x=5`` matches ``5`` (a label -- a variable, a tuple of variables
  ``(x, y)``, a named ratio ``AB:BC`` or ``S_{ABC}:S``, a segment ``AB``, an angle ``\\angle ABC``, ``f(2)``,
  a length ``|PQ|`` or ``|\\vec{v}|``, a ratio of segments ``\\frac{AM}{MB}`` (uppercase) -- may be dropped on
  either side); solution groups separated by ``;`` (``x=2,y=5;x=5,y=2``) match a list of tuples in any
  order; labelled lists (``x = 1, y = 2``) match by label when both sides are labelled
  with the same names (``x=2, y=1`` != ``x=1, y=2``), and in order against a tuple ``(1, 2)``;
  two single-variable assignments compare their right sides (``D = (0, 1)`` != ``D = (0, 1.5)``);
  general equations match when ``(l1 - r1) / (l2 - r2)`` is a nonzero constant
  (``5x-7y+11z+4=0`` matches ``-10x+14y-22z-8=0``; ``3x-y+13=0`` matches ``y=3x+13``).
* **Intervals and unions**: bracket types must match exactly (``[1,2)`` != ``[1,2]``); unions
  compare as unordered collections of intervals; an inequality in one variable
  (``x \\le 3``, ``-1 < x < 2``, ``-2x > -6`` -- solved, so multiplying by a negative flips it) is
  converted to the interval it denotes.
* **Tuples** ``(a,b)`` compare element-wise in order (same bracket types); **sets** ``\\{a,b\\}``
  and bare **comma lists** (multiple answers, ``1,-2``; ``a \\pm b`` is two answers) compare as
  unordered multisets.  A bare list does not match a tuple gold.  A list prediction against a
  single gold is correct only when every element equals the gold (one answer in two notations).
* **Matrices/vectors** (``pmatrix``/``bmatrix``/``array`` in brackets): same shape,
  element-wise; a ``pmatrix`` column vector also matches a parenthesised tuple of the same entries.
* **Complex numbers**: ``i`` is the imaginary unit (``1+2i`` == ``2i+1``); ``e`` is Euler's number.
  Symbol names are case-insensitive (latex2sympy lowercases them).
* **Base-n** (``4210_{5}``): the digits must match (subscript optional on the prediction).
* **Text answers** (``\\text{Evelyn}``) compare case-insensitively as strings; **choice letters**
  (``\\text{(C)}``) match ``C``, ``(C)``, ``\\text{C}``.  An AMC gold with letter and value
  (``\\textbf{(B) }14``) accepts the letter, the value (in any equal form) or both; a wrong letter is wrong
  whatever value follows it, and the right letter with a wrong value is wrong.
* **Datasets**: ``gsm8k`` golds may be full solutions (the part after ``####`` is used);
  ``aime`` answers must be integers 0-999 (leading zeros allowed).
* **Limits**: inputs longer than 2000 characters or nested deeper than 60 brackets are
  ``parse_error``; every sympy check runs in a worker subprocess that stops itself (an interval timer) a
  little before ``timeout_s`` and answers ``timeout``, and is killed just before ``timeout_s`` (counted from the
  call) when it does not, which works off the main thread and inside daemonic worker processes: a timeout costs at
  most its budget, not a restart.  The
  worker (a plain ``subprocess``, ``python -m evaluation.grading.worker``, 4 GiB address-space limit) starts
  on first use and takes about 3 s to import sympy and warm its parser; that start-up is not counted against
  ``timeout_s``.  A killed worker is replaced in the background.  Workers are per process
  (reset after ``fork``), one per concurrent caller, and exit with their parent.

Changelog
---------
* ``creditbench-grader/1`` (2026-11-30): first version.
* ``creditbench-grader/2`` (2026-12-02): answers without a box (closing statements, display math),
  empty/echoed boxes skipped, a closing "Final Answer:" supersedes a box, leaked chat turns cut; labels,
  ratios, clock times, units, decimal commas, repeating decimals, number words, ASCII relations,
  solved inequalities; the percent and angle conventions above (``10\\%`` != ``0.1``, ``25%`` != ``25``,
  ``90^\\circ`` != ``\\frac{\\pi}{2}``); linear-time extraction with the length caps first.
* ``creditbench-grader/3`` (2026-12-02, from an audit of real SmolLM2-135M-Instruct generations): an
  arithmetic chain after an answer phrase or in a box states its last value (``the final answer is
  3858 - 2820 = 428 books`` is ``428``); an answer phrase followed by a comma ("the previous answer is,
  because") is skipped for the one before it; a closing sentence ending ", so N" states N; a closing
  "This is the (final) answer." is skipped like a pleasantry.
* ``creditbench-grader/4`` (2026-12-03, issue 25): closing sentences state fractions and decimal commas;
  ``m+n = 256+37 = 293`` states 293; labels ``|PQ|``, ``|\\vec v|``, ``S_{ABC}:S``, ``\\frac{AM}{MB}`` and
  ``;``-separated solution groups; AMC letter+value golds; GSM8K ``40%`` for the bare percent gold; a
  control space ``\\ `` at the end of a box; exact comparison of rational expressions, and a confirming
  precision that grows with the numbers' size (``\\sqrt{10^{2000}+1}`` != ``10^{1000}``).
* ``creditbench-grader/5`` (2026-12-03, from two held-out sets written blind to the code: 192/193 and 204/206
  at their one grading): a decimal comma with four or more digits (``0,35625``) in a closing sentence; a
  closing clause after "so"/"therefore"/"thus"/"hence" with one value and words after it ("..., so Robert
  went down the slide 84 times."); choice letters in ``\\mathrm{}``/``\\mathbf{}`` (``\\mathrm{(A)}``).
* ``creditbench-grader/6`` (2026-12-06, issue 38): thousands grouped by a LaTeX thin space (``12\\,345``) in a
  closing sentence; a ``%`` on the prediction matches the bare gold it names in every dataset (``25%`` ==
  ``25``; was GSM8K only); a closing sentence ending in bare LaTeX without dollars ("Hence the angle is
  \\frac{\\pi}{6}."); a last line whose ``$`` signs are all currency (``3 * $15 = $45``) is an equation, not
  math spans; a leaked turn whose template tokens were decoded away (bare ``user`` line), ``[INST]`` and
  ``### Instruction:`` are cut; an equation whose left side is a sum (``\\sum``, ``\\prod``, ``\\int``, an
  elided series ``a_1 + \\cdots + a_n``) compares its right side; the sympy worker stops itself at its budget
  (no restart after a timeout).
* ``creditbench-grader/7`` (2026-12-06, issue 38, from 690 probes of its kinds in many phrasings): thousands
  grouped by ``{,}`` or an apostrophe (``12'345``), grouped thousands with a decimal comma (``1.234,5``,
  ``1 234,5``); CJK closing sentences (``答案是12。``); an interval, tuple, set or matrix closing a sentence
  without dollars (``Das Ergebnis ist (1, 2).``); a count in words after a stating verb ("there are twenty-one
  marbles"); ``m + n = 14`` against a gold that is no equation states 14; ``$3$ or $4$`` after an answer phrase
  is a list (a hedge, wrong against 3); a reason clause (", since ...", ", which ...", a closing parenthetical)
  after the value is cut; a last line asking the reader something ("Does that make sense?") is skipped; a left
  side whose only letters are LaTeX commands (``5 \\times 6 = 30``) is a computation; ``### Human:``,
  ``# User:`` and "Next question:" turns are cut; a closing list ("The roots are -1 and 2.", "$x = 1$ and
  $x = -3$", "3 or 4": a hedge is a list, wrong against 3); unions of intervals, ``\\left(`` tuples,
  ``\\sqrt[3]{2}``, Unicode powers (``10²³``, in a box too) and ``π``, base subscripts (``4210_5``) and
  ``5!.`` in closing sentences; a unit's exponent (``m^2``, ``m²``) is no value of its own; counts in words opening a
  sentence ("So, twenty-four students passed."); a clause after the value (", attained at ...", ", i.e. ...",
  " — ...", "and the remainder is ...", ", not 42") is cut; a last sentence addressing the reader ("Want me to
  check it another way?") is skipped; ``$10 = x + y$`` stays an equation; "approximately 3.14" after an answer
  phrase is 3.14 (still wrong against ``\\pi``); "The correct option is B." and a lone "**B**" line are letters;
  "z = 3 + 4i" closes a sentence; "36 cm^2" is 36; a trailing clause offering another value ("3 — or maybe 4",
  "3 (possibly 4)") is not cut, so the hedge is never right.
* ``creditbench-grader/8`` (2026-12-06, issue 38, from the eight misses of blind set D): remark paragraphs closing
  the response after its committed value (a ``---`` rule, "*Remark:*", "Note:", "Check:") are not the answer; a
  closing line of praise ("Great job, class! That's 16 more ...") is skipped even with numbers; ``$x = 1$, $y = -2$``
  (distinct variables, no "or") is the tuple ``(1, -2)``; a value stated after a sentence's last math span
  ("..., so the vertex is (1.5, 0).", "which is 4π."); Unicode ``∞``, ``∪``, ``∩`` in closing sentences; "1011 in
  base 2" is ``1011_2``.
* ``creditbench-grader/9`` (2026-12-06, issue 38, from the misses of blind set E): a box inside closing remark
  paragraphs ("Note: without the restriction it would be \\boxed{64}") does not override the box committed before
  them; a leading ``-`` is a sign unless a space follows (``**-4**`` is -4, ``- 4`` a bullet); closing lines
  ``- x = 4`` / ``- y = -1`` are the tuple ``(4, -1)``; a restatement after "i.e." / "that is" with one value is the
  answer ("= 0.2$, i.e. the price rose by 20%."); "33 multiples of 3" states 33; Unicode powers after letters
  (``cm³``, ``x² + 1``) and vulgar fractions (``½``, ``2½``); a count in words after any verb ("He runs thirty
  miles."); points grouping thousands in a German/French/Spanish/Italian/Portuguese sentence ("3.000 Stifte" is 3000;
  in English 3.000 stays 3); "7 degrees below zero" is -7.
* ``creditbench-grader/10`` (2026-12-06, issue 38, from the last misses of blind sets E and F): a sentence's last math
  span after a stating verb and before its noun is the value ("..., so there are $2\\,048$ subsets."; "$3$ or more",
  "$5$ less than ..." state nothing); a value questioned after an answer phrase and stated again is the later
  statement ("the answer is 3.5 dollars? No units; it's $\\frac{7}{2}$."; a bare "12? Yes." is unread as before);
  a closing praise line holding the answer ("Great job! The class collected 96 cans.") is read when nothing before
  it states a value (a comparison after the praise stays a remark).
* ``creditbench-grader/11`` (2026-12-06, issue 38, from the misses of blind set G): a unit in ``\\text{}`` after a
  multiple of ``\\pi`` (``16\\pi \\text{ cm}^2``); the asked object named on the left (``A^{-1} =``, ``A^T =``,
  ``f^{-1}(x) =``, ``f'(x) =``) is a label, and a derivative operator opening the left side (``\\frac{d}{dx} x^3 =``)
  restates the question; a condition after the value's span ("$= 1 + x$ for $x \\neq 1$") is not the answer; "20
  is $25\\%$ of 80" states the percent; "the minimum value occurs at $x = a$, where $f(a) = v$" states v; a
  closing sum (product, difference) of exactly the boxed values states it ("$\\boxed{2}$ and $\\boxed{5}$ ...
  their sum, $2 + 5 = 7$"); a count in words after "been" and closing a sentence with numerals ("that is sixty
  thousand widgets"; "seven or eight" is a hedge); plain mixed numbers in sentences ("4 1/2 cups"); "probably 8"
  after an answer phrase is 8; a self-correction ("nein, ... 5.040") reads what follows it; a closing question
  offering another value ("maybe it's 9?") leaves an answer phrase uncommitted (``no_answer``).  The percent
  convention is unchanged: ``0.25\\%`` names the gold 0.25 (= 1/4) as ``25\\%`` names 25.
* ``creditbench-grader/12`` (2026-12-06, issue 38, session 13's leftovers): a count in words with an "or more/less/
  fewer" bound states the count, as a numeral does ("that is sixty thousand or more widgets"; ``$60000$ or more``), and
  is read whole; a count in words after a stating verb that closes a sentence is its last statement, after a math span
  too, and when it states nothing ("sixty thousand more", "sixty or seventy thousand") no earlier value is read in its
  place; a value questioned after an answer phrase and confirmed ("12? Yes.") is the answer, and one retracted
  without another ("12? No.") is ``no_answer``; a closing praise line stating a value ("Great job! The class
  collected 96 cans.") is the last statement even after a line stating another value.  Timeouts: the budget
  counts from the call to :func:`grade` (extraction included), and a worker killed at it is reaped and replaced in
  the background, and the kill comes min(50 ms, 10 %) before the budget, so a timeout whose worker missed its own stop
  no longer runs 10-50 ms past its budget on a loaded machine.
* ``creditbench-grader/13`` (2026-12-06, issue 38, from the five misses of blind set H): an emoticon standing alone
  (``:)``, ``;-)``, ``:D``) is a tone, never part of a value ("The answer is 31 :)"); a function applied at a number
  on the left (``f(g(2)) = 24``, ``h(-1) = 7``) names the value asked for, so the right side is stated (``f(x) =``
  stays a label); a count 0-20 or a ten in Spanish, French or German after that language's answer phrase ("La
  respuesta es quince.", only there); a count in words after a colon closes a sentence ("...: ten."); a closing
  sentence about the problem ("This problem is a great example of ...") with no value, no number word and no
  negation of its own is a remark, like a pleasantry; an "or more/less/fewer" bound after the value's noun states the
  value as one right after it does ("$2\\,048$ subsets or more", "sixty thousand widgets or more").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from common.records import REASONS
from evaluation.grading.boxes import last_boxed
from evaluation.grading.equivalence import fast_verdict
from evaluation.grading.extract import answer_start, extract_answer, prepare_gold
from evaluation.grading.normalize import MAX_LEN, drop_named_sum, drop_restated_side
from evaluation.grading.pool import slow_in_worker

GRADER_VERSION = "creditbench-grader/13"

log = logging.getLogger(__name__)

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


def _check_args(dataset: str | None, timeout_s: float) -> None:
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset rule {dataset!r}; valid: {DATASETS}")
    if not 0 < timeout_s < float("inf"):
        raise ValueError(f"timeout_s must be a finite number of seconds > 0, got {timeout_s!r}")


def grade(response: str, gold: str, *, dataset: str | None = None, timeout_s: float = 5.0) -> Verdict:
    """Grade a model response against a gold answer (gold second; see the module docstring)."""
    t0 = time.perf_counter()
    _check_args(dataset, timeout_s)
    extracted = None
    try:
        extracted = extract_answer(response, dataset)
        if extracted is None:
            return Verdict(False, None, "no_answer", time.perf_counter() - t0)
        g = prepare_gold(gold, dataset)
        if len(extracted) > MAX_LEN or len(g) > MAX_LEN:  # the cap comes before any normalisation
            return Verdict(False, extracted[:MAX_LEN], "parse_error", time.perf_counter() - t0)
        pred, g = drop_restated_side(extracted), drop_restated_side(g)
        pred = drop_named_sum(pred, g)
        reason = fast_verdict(pred, g, dataset)
    except (ValueError, TypeError, RecursionError, MemoryError, OverflowError, ZeroDivisionError):
        log.warning("grader fast path failed on %r / %r", response[-200:], gold, exc_info=True)
        return Verdict(False, extracted, "parse_error", time.perf_counter() - t0)
    if reason is None:  # the budget counts from the call: extraction and the fast path spent part of it
        reason = slow_in_worker(pred, g, dataset, timeout_s - (time.perf_counter() - t0))
    return Verdict(reason == "correct", extracted, reason, time.perf_counter() - t0)


def equivalent(answer: str, other: str, *, dataset: str | None = None, timeout_s: float = 5.0) -> bool:
    """Whether two extracted answers are the same under the checker's conventions (``other`` read as the gold),
    so that maj@k votes on equivalence classes (``1/2`` and ``0.5``), not on strings."""
    _check_args(dataset, timeout_s)
    if answer == other:
        return True
    try:
        g = prepare_gold(other, dataset)
        if len(answer) > MAX_LEN or len(g) > MAX_LEN:
            return False
        answer, g = drop_restated_side(answer), drop_restated_side(g)
        reason = fast_verdict(answer, g, dataset)
    except (ValueError, TypeError, RecursionError, MemoryError, OverflowError, ZeroDivisionError):
        return False
    if reason is None:
        reason = slow_in_worker(answer, g, dataset, timeout_s)
    return reason == "correct"


def grade_many(
    pairs: Sequence[tuple[str, str]],
    *,
    dataset: str | None = None,
    timeout_s: float = 5.0,
    workers: int = 1,
) -> list[Verdict]:
    """Grade (response, gold) pairs in order; ``workers`` sympy subprocesses run in parallel."""
    _check_args(dataset, timeout_s)
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


__all__ = ["DATASETS", "GRADER_VERSION", "REASONS", "Verdict", "answer_start", "equivalent", "extract_answer", "grade",
           "grade_many", "last_boxed", "reward"]

