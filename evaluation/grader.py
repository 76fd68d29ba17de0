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
  worker (a plain ``subprocess``, loading this file by path, 4 GiB address-space limit) starts
  on first use and takes about a second to import sympy; that start-up is not counted against
  ``timeout_s``.  A killed worker is replaced in the background.  Workers are per process
  (reset after ``fork``), one per concurrent caller, and exit with their parent.

Changelog
---------
* ``creditbench-grader/1`` (2026-11-30): first version.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import random
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

GRADER_VERSION = "creditbench-grader/1"

log = logging.getLogger(__name__)

REASONS = ("correct", "wrong", "no_answer", "parse_error", "timeout")
DATASETS = (None, "math", "gsm8k", "aime")
_MAX_LEN = 2000
_MAX_DEPTH = 60
_MAX_IDLE_WORKERS = 16


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


# =====================================================================================
# Extraction
# =====================================================================================

_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])")
_ANSWER_PHRASE_RE = re.compile(r"(?i)\b(?:final\s+answer|answer)\s*(?:is\s*:?|:)\s*")
_GSM_RE = re.compile(r"####\s*([^\n]*)")
_BOX_JOIN_GAP_RE = re.compile(r"^[\s$,;]*(?:and|or|&|\\quad|\\qquad|\\text\{\s*(?:and|or)\s*\})?[\s$,;]*$")


def _match_brace(text: str, open_idx: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``open_idx`` (escaped braces skipped), or -1."""
    depth = 0
    i = open_idx
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "{}":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _boxed_spans(text: str) -> list[tuple[int, int, str]]:
    """All ``\\boxed``/``\\fbox`` contents as (start, end, content)."""
    spans = []
    for m in _BOX_RE.finditer(text):
        j = m.end()
        while j < len(text) and text[j] == " ":
            j += 1
        if j < len(text) and text[j] == "{":
            k = _match_brace(text, j)
            if k < 0:
                continue
            spans.append((m.start(), k + 1, text[j + 1 : k]))
        elif j > m.end():  # "\boxed 7"
            tok = re.match(r"[^\s$]+", text[j:])
            if tok:
                spans.append((m.start(), j + tok.end(), tok.group(0)))
    return spans


def _phrase_tail(tail: str) -> str | None:
    """The answer in the text following an "answer is" phrase."""
    t = tail.strip().replace("**", "").strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if t.startswith(left):
            end = t.find(right, len(left))
            while end > 0 and left == "$" and t[end - 1] == "\\":  # skip an escaped \$
                end = t.find(right, end + 1)
            if end > len(left):
                return t[len(left) : end].strip()
    t = t.split("\n", 1)[0]
    t = re.split(r"\.\s|\.$|(?i:\bI hope\b)", t, maxsplit=1)[0]
    t = t.strip().rstrip(".,;:").strip()
    return t or None


def _strip_think(response: str) -> str | None:
    """Text after the last ``</think>``; None when reasoning was opened and never closed."""
    if "</think>" in response:
        return response.rsplit("</think>", 1)[1]
    if "<think>" in response:
        return None
    return response


def extract_answer(response: str, dataset: str | None = None) -> str | None:
    """The answer string in a model response, or None when there is none (see module docstring)."""
    text = _strip_think(response or "")
    if text is None:
        return None
    gsm = _GSM_RE.findall(text)
    if dataset == "gsm8k" and gsm and gsm[-1].strip():
        return gsm[-1].strip()
    spans = _boxed_spans(text)
    if spans:
        parts = [spans[-1]]
        for prev in reversed(spans[:-1]):
            if prev[1] <= parts[0][0] and _BOX_JOIN_GAP_RE.match(text[prev[1] : parts[0][0]]):
                parts.insert(0, prev)
            else:
                break
        ans = ", ".join(p[2].strip() for p in parts).strip()
        return ans or None
    phrases = list(_ANSWER_PHRASE_RE.finditer(text.replace("**", "")))
    if phrases:
        plain = text.replace("**", "")
        ans = _phrase_tail(plain[phrases[-1].end() :])
        if ans:
            return ans
    if gsm and gsm[-1].strip():
        return gsm[-1].strip()
    return None


# =====================================================================================
# Normalisation (string level)
# =====================================================================================

_TEXT_CMDS_RE = re.compile(
    r"\\(?:textbf|textit|textrm|textnormal|mathrm|mathbf|mathit|mbox|operatorname|text)\s*\{"
)
_NOISE_RE = re.compile(
    r"~|\\displaystyle|\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big)(?![a-zA-Z])\.?"
    r"|(?<!\\)\\[!,;:> ]|\\q?quad(?![a-zA-Z])"
)
# Bare unit words dropped after a number.  Single letters (m, s, g, ...) are left alone: "2m" may be
# a product of variables; inside \text{} any word after a number counts as a unit.
_UNIT_WORDS = (
    "square|sq|cubic|units?|cm|mm|km|meters?|metres?|centimeters?|kilometers?|inch(?:es)?|feet|foot|ft|"
    "yards?|yd|miles?|mph|kph|km/h|hours?|hrs?|minutes?|mins?|seconds?|secs?|days?|weeks?|months?|"
    "years?|dollars?|cents?|pounds?|lbs?|ounces?|oz|kg|kilograms?|grams?|liters?|litres?|ml|gallons?|"
    "people|persons?|students?|apples?|eggs?|cookies?|books?|boxes|marbles?|pages?|points?|times|ways"
)
_TRAIL_UNIT_RE = re.compile(
    rf"(?<=[\d}}])\s*(?:(?:{_UNIT_WORDS})(?:\s+(?:{_UNIT_WORDS}))*)\b(?:\^\{{?[23]\}}?)?\s*$"
)
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {
    w: 10 * (i + 2) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())
}
_FUNCS = ("sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "log", "ln", "exp")
_ONE_CHAR_GROUP_RE = re.compile(r"(?<!\\)\{(\w)\}")
_PLAIN_RE = re.compile(r"[+-]?(?:\d+|\d{1,3}(?:,\d{3})+)(?:\.\d+)?")
_THOUSANDS_RE = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_SCI_TEX_RE = re.compile(
    r"^([+-]?\d+(?:\.\d+)?)\s*(?:\\times|\\cdot|\*|x)\s*10\s*\^\s*\{?\s*([+-]?\d+)\s*\}?$"
)
_VAR = r"[a-zA-Z](?:_\{?[a-zA-Z0-9]+\}?)?"
_ASSIGN_RE = re.compile(rf"^{_VAR}\s*=\s*")
_IN_RE = re.compile(rf"^{_VAR}\s*\\in(?![a-zA-Z])\s*")
_CHOICE_RE = re.compile(r"^\(?([A-E])\)?$")
_BASE_RE = re.compile(r"^(?=[0-9A-Za-z]*\d)([0-9A-Za-z]+)_\{?\(?(\d+)\)?\}?$")


def _number_word(s: str) -> int | None:
    w = s.lower().strip().replace("-", " ")
    parts = w.split()
    if not parts or len(parts) > 2:
        return None
    if len(parts) == 1:
        if parts[0] in _NUMBER_WORDS:
            return _NUMBER_WORDS[parts[0]]
        if parts[0] in _TENS:
            return _TENS[parts[0]]
        if parts[0] == "hundred":
            return 100
        return None
    if parts[0] in _TENS and parts[1] in _NUMBER_WORDS and 0 < _NUMBER_WORDS[parts[1]] < 10:
        return _TENS[parts[0]] + _NUMBER_WORDS[parts[1]]
    return None


def _replace_text_groups(s: str) -> tuple[str, bool]:
    """Drop unit words inside ``\\text{}`` after a number, unwrap other text; flag "degrees"."""
    deg = False
    while True:
        m = _TEXT_CMDS_RE.search(s)
        if not m:
            return s, deg
        k = _match_brace(s, m.end() - 1)
        if k < 0:
            return s, deg
        inner, before, after = s[m.end() : k].strip(), s[: m.start()], s[k + 1 :]
        low = inner.lower()
        if low in ("degree", "degrees", "deg"):
            deg, inner = True, ""
        elif low in ("and", "or"):
            inner = ","
        elif re.fullmatch(r"[a-zA-Z][a-zA-Z .]*", inner) and re.search(r"[\d}]\s*$", before):
            rest = re.sub(r"^\s*\^\s*\{?[23]\}?", "", after)
            if not rest.strip():
                inner, after = "", rest  # unit after a number
        s = before + inner + after


@dataclass(frozen=True)
class _Norm:
    """A normalised answer."""

    text: str  # normalised LaTeX-ish string
    pct: bool  # a percent sign was present
    deg: bool  # a degree mark was present
    is_text: bool  # the answer is a word/phrase, compared as a string


def _strip_delims(s: str) -> str:
    s = s.strip()
    changed = True
    while changed and s:
        changed = False
        for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
            if s.startswith(left) and s.endswith(right) and len(s) >= len(left) + len(right):
                s = s[len(left) : len(s) - len(right)].strip()
                changed = True
    return s


def _fix_shorthands(s: str) -> str:
    """``\\frac12`` -> ``\\frac{1}{2}``, ``\\sqrt2`` -> ``\\sqrt{2}``, ``sqrt(x)`` -> ``\\sqrt{x}``."""
    s = re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*(\d)\s*\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\frac\s*(\{[^{}]*\})\s*(\d)", r"\\frac\1{\2}", s)
    s = re.sub(r"\\frac\s*([a-zA-Z])\s*([a-zA-Z0-9])", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\sqrt\s*(\d|[a-zA-Z](?![a-zA-Z]))", r"\\sqrt{\1}", s)  # LaTeX: one token
    # \sqrt(...) and sqrt(...)
    while True:
        m = re.search(r"(?<![a-zA-Z])\\?sqrt\s*\(", s)
        if not m:
            break
        depth, j = 0, m.end() - 1
        while j < len(s):
            if s[j] == "(":
                depth += 1
            elif s[j] == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if j >= len(s):
            break
        s = s[: m.start()] + "\\sqrt{" + s[m.end() : j] + "}" + s[j + 1 :]
    s = re.sub(r"(?<![\\a-zA-Z])pi(?![a-zA-Z])", r"\\pi", s)
    s = re.sub(rf"(?<![\\a-zA-Z])({'|'.join(_FUNCS)})(?![a-zA-Z])", r"\\\1", s)
    s = re.sub(r"(?<![\\a-zA-Z])(?:infinity|inf)(?![a-zA-Z])", r"\\infty", s)
    s = s.replace("∞", "\\infty").replace("π", "\\pi").replace("√", "\\sqrt").replace("−", "-")
    s = s.replace("≤", "\\le ").replace("≥", "\\ge ").replace("∪", "\\cup ").replace("×", "\\times ")
    s = s.replace("**", "^")
    return s


@lru_cache(maxsize=65536)
def _normalize(raw: str) -> _Norm:
    """Normalise an answer string (pure, cached)."""
    plain = raw.strip()
    if _PLAIN_RE.fullmatch(plain):  # fast lane: 42, -3.5, 1,000
        return _Norm(text=plain.replace(",", ""), pct=False, deg=False, is_text=False)
    s = _strip_delims(raw)
    s = s.replace("\n", " ").replace("{,}", ",")
    s = re.sub(r",\\!\s*", ",", s)
    s = _NOISE_RE.sub(" ", s)
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = s.replace("\\$", "").replace("$", "").replace("\\dots", "").replace("\\ldots", "")
    s = s.replace("\\infin ", "\\infty ").replace("\\leq", "\\le").replace("\\geq", "\\ge")
    s = s.replace("\\lt", "<").replace("\\gt", ">").replace("\\neq", "\\ne")
    pct = False
    if re.search(r"\\?%|\\text\{\s*percent\s*\}|\bpercent\b", s):
        pct = True
        s = re.sub(r"\\?%|\\text\{\s*percent\s*\}|\bpercent\b", "", s)
    deg = False
    if re.search(r"\^\s*\{?\s*\\circ\s*\}?|°|\\circ|\\degree", s):
        deg = True
        s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|°|\\circ|\\degree", "", s)
    s, deg2 = _replace_text_groups(s)
    deg = deg or deg2
    if "," in s:  # "19, 46, and 82" / "19, 46, \text{ and } 82": list words become commas
        s = re.sub(r"(?:\s*,)?\s+(?:and|or)\s+", ", ", s)
        s = re.sub(r",(?:\s*,)+", ",", s)
    s = s.strip()
    m = re.fullmatch(r"(.*?\S)\s*(?:degrees?|deg)\.?", s)
    if m and re.search(r"[\d}]$", m.group(1)):
        deg, s = True, m.group(1)
    is_text = False
    if re.fullmatch(r"[A-Za-z][A-Za-z .'-]*[A-Za-z]\.", s):
        s = s[:-1]  # "even." -> "even"
    if re.fullmatch(r"[A-Za-z][A-Za-z .'-]*[A-Za-z]", s) and len(s) >= 3 and "\\" not in s:
        nw = _number_word(s)
        if nw is not None:
            s = str(nw)
        elif s.lower() in ("infinity", "inf", "infinite"):
            s = "\\infty"
        elif (
            re.fullmatch(r"[A-Za-z]+(?: [A-Za-z]+)*", s)
            and (" " in s or len(s) >= 4 or "\\text" in raw or "\\mbox" in raw)
            and not any(len(w) < 2 or w.lower() in _FUNCS for w in s.split())
        ):
            is_text = True
    if not is_text:
        s = _TRAIL_UNIT_RE.sub("", s) if re.search(r"\d", s) else s
        s = _fix_shorthands(s)
        s = _IN_RE.sub("", s, count=1)
        s = re.sub(r"\s+", " ", s).strip().rstrip(".").strip()
        if _THOUSANDS_RE.match(s):
            s = s.replace(",", "")
        m = _SCI_TEX_RE.match(s)
        if m:
            s = f"{m.group(1)}e{m.group(2)}"
    s = s.strip()
    return _Norm(text=s, pct=pct, deg=deg, is_text=is_text)


def _bare(s: str) -> str:
    """``s`` without a single-variable left-hand side (``x = 5`` -> ``5``)."""
    return _ASSIGN_RE.sub("", s, count=1) if s.count("=") == 1 else s


def _key(s: str) -> str:
    """Whitespace-free comparison key; braces around one character dropped (``x^{2}`` = ``x^2``)."""
    return _ONE_CHAR_GROUP_RE.sub(r"\1", "".join(s.split()))


# =====================================================================================
# Fast path: plain numbers
# =====================================================================================

_INT_RE = re.compile(r"^[+-]?\d+$")
_DEC_RE = re.compile(r"^([+-]?)(\d*)\.(\d+)$|^([+-]?)(\d+)\.$")
_SLASH_RE = re.compile(r"^([+-]?\d+)\s*/\s*([+-]?\d+)$")
_FRAC_RE = re.compile(r"^([+-]?)\\frac\{\s*([+-]?\d+)\s*\}\{\s*([+-]?\d+)\s*\}$")
_MIXED_RE = re.compile(r"^([+-]?)(\d+)\s*\\frac\{\s*(\d+)\s*\}\{\s*(\d+)\s*\}$")
_SCI_RE = re.compile(r"^([+-]?)(\d+)(?:\.(\d+))?[eE]([+-]?\d+)$")


@dataclass(frozen=True)
class _Num:
    value: Fraction
    quantum: Fraction | None  # last decimal place of a decimal literal; None = exact


@lru_cache(maxsize=65536)
def _simple_number(s: str) -> _Num | None:
    """Parse a plain integer/decimal/fraction/mixed number/scientific literal exactly."""
    if len(s) > 400:
        return None
    if _INT_RE.match(s):
        return _Num(Fraction(int(s)), None)
    m = _DEC_RE.match(s)
    if m:
        if m.group(3) is not None:
            sign, ip, fp = m.group(1), m.group(2) or "0", m.group(3)
        else:
            sign, ip, fp = m.group(4), m.group(5), ""
        v = Fraction(int(ip + fp or "0"), 10 ** len(fp))
        exact = not fp or not fp.strip("0")  # "27.0" is a float-serialised integer: exact
        return _Num(-v if sign == "-" else v, None if exact else Fraction(1, 10 ** len(fp)))
    m = _SLASH_RE.match(s)
    if m and int(m.group(2)) != 0:
        return _Num(Fraction(int(m.group(1)), int(m.group(2))), None)
    m = _FRAC_RE.match(s)
    if m and int(m.group(3)) != 0:
        v = Fraction(int(m.group(2)), int(m.group(3)))
        return _Num(-v if m.group(1) == "-" else v, None)
    m = _MIXED_RE.match(s)
    if m and int(m.group(4)) != 0:
        v = int(m.group(2)) + Fraction(int(m.group(3)), int(m.group(4)))
        return _Num(-v if m.group(1) == "-" else v, None)
    m = _SCI_RE.match(s)
    if m and abs(int(m.group(4))) <= 400:
        fp = m.group(3) or ""
        e = int(m.group(4)) - len(fp)
        v = Fraction(int(m.group(2) + fp)) * (Fraction(10) ** e)
        return _Num(-v if m.group(1) == "-" else v, (Fraction(10) ** e) if fp else None)
    return None


def _num_match(p: Fraction, g: _Num) -> bool:
    if g.quantum is None:
        return p == g.value
    return abs(p - g.value) <= g.quantum / 2


def _numbers_equal(p: _Num, pn: _Norm, g: _Num, gn: _Norm) -> bool:
    """Compare plain numbers with the percent and decimal-gold rules."""
    if _num_match(p.value, g):
        return True
    if pn.pct and not gn.pct:
        return _num_match(p.value / 100, g)
    if gn.pct and not pn.pct:
        return _num_match(p.value * 100, g)
    return False


# =====================================================================================
# Gold preparation and the fast path
# =====================================================================================


@lru_cache(maxsize=16384)
def _prepare_gold(gold: str, dataset: str | None) -> str:
    """The gold answer string as compared (``####`` part, ``\\boxed`` content)."""
    g = gold.strip()
    if "####" in g:
        g = g.rsplit("####", 1)[1].strip()
    elif "\\boxed" in g or "\\fbox" in g:
        spans = _boxed_spans(g)
        if spans:
            g = spans[-1][2].strip()
    return g


def _depth_ok(s: str) -> bool:
    if len(s) > _MAX_LEN:
        return False
    depth = best = 0
    for c in s:
        if c in "([{":
            depth += 1
            best = max(best, depth)
        elif c in ")]}":
            depth -= 1
    return best <= _MAX_DEPTH


def _fast_verdict(pred: str, gold: str, dataset: str | None) -> str | None:
    """``correct``/``wrong``/``parse_error`` when decidable without sympy, else None."""
    pn, gn = _normalize(pred), _normalize(gold)
    if not pn.text:
        return "no_answer" if not pred.strip() else "parse_error"
    p_num, g_num = _simple_number(pn.text), _simple_number(gn.text)
    if g_num is None or p_num is None:
        p_bare, g_bare = _bare(pn.text), _bare(gn.text)
        if _key(pn.text) == _key(gn.text) and pn.pct == gn.pct:
            return "correct"
        if _key(p_bare) == _key(g_bare) and pn.pct == gn.pct and (p_bare != pn.text) != (g_bare != gn.text):
            return "correct"  # "x = 5" vs "5"
        p_num, g_num = _simple_number(p_bare), _simple_number(g_bare)
    if g_num is not None and p_num is not None:
        aime_gold = dataset == "aime" and g_num.value.denominator == 1
        if aime_gold and (p_num.value.denominator != 1 or not 0 <= p_num.value <= 999):
            return "wrong"
        return "correct" if _numbers_equal(p_num, pn, g_num, gn) else "wrong"
    if gn.is_text or pn.is_text:
        if gn.is_text and pn.is_text:
            a = re.sub(r"^(?:the|a|an) ", "", pn.text.lower()).strip()
            b = re.sub(r"^(?:the|a|an) ", "", gn.text.lower()).strip()
            return "correct" if a == b else "wrong"
        if gn.is_text:
            return "wrong"
    gc = _CHOICE_RE.match(gn.text)
    if gc and ("(" in gn.text or "\\text" in gold or len(gn.text) == 1 and not _INT_RE.match(pn.text)):
        pc = _CHOICE_RE.match(pn.text) or re.match(r"^\(([A-E])\)", pn.text)
        return "correct" if pc and pc.group(1) == gc.group(1) else "wrong"
    gb = _BASE_RE.match(gn.text)
    if gb and not _INT_RE.match(gn.text):
        pb = _BASE_RE.match(pn.text)
        digits = pb.group(1) if pb else pn.text
        base_ok = pb is None or pb.group(2) == gb.group(2)
        return "correct" if base_ok and digits.upper() == gb.group(1).upper() else "wrong"
    if not _depth_ok(pn.text) or not _depth_ok(gn.text):
        return "parse_error"
    return None


# =====================================================================================
# Sympy path (runs inside the worker subprocess)
# =====================================================================================


def _split_top(s: str, seps: tuple[str, ...]) -> list[str]:
    """Split at separators outside brackets."""
    parts, depth, cur, i = [], 0, [], 0
    while i < len(s):
        c = s[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if depth == 0:
            hit = next((sep for sep in seps if s.startswith(sep, i)), None)
            if hit is not None:
                parts.append("".join(cur))
                cur = []
                i += len(hit)
                continue
        cur.append(c)
        i += 1
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _outer_bracket(s: str) -> tuple[str, str, str] | None:
    """(open, close, inner) when s is one bracketed group like ``(a,b]`` or ``\\{a,b\\}``."""
    if s.startswith("\\{") and s.endswith("\\}"):
        inner = s[2:-2]
        if _split_top(inner, ("\\}",)) == [inner.strip()]:
            return "{", "}", inner
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]":
        depth = 0
        for i, c in enumerate(s):
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            if depth == 0 and i < len(s) - 1:
                return None
        return s[0], s[-1], s[1:-1]
    return None


_MATRIX_RE = re.compile(r"^\\begin\{([pbvBV]?matrix|array)\}(?:\{[^}]*\})?(.*)\\end\{\1\}$", re.S)
_INEQ_RE = re.compile(r"(\\le|\\ge|<|>)")


_PM_RE = re.compile(r"\\(pm|mp)(?![a-zA-Z])")


def _expand_pm(elems: Sequence[str]) -> tuple[str, ...]:
    """``a \\pm b`` stands for the two answers ``a + b`` and ``a - b``."""
    out: list[str] = []
    for e in elems:
        if _PM_RE.search(e):
            out.append(_PM_RE.sub(lambda m: "+" if m.group(1) == "pm" else "-", e, count=1))
            out.append(_PM_RE.sub(lambda m: "-" if m.group(1) == "pm" else "+", e, count=1))
        else:
            out.append(e)
    return tuple(out)


def _single_lhs(st: tuple[Any, ...]) -> bool:
    """An equation whose left side is one variable (``x = ...``)."""
    return st[0] == "eq" and re.fullmatch(_VAR, st[1].strip()) is not None


def _structure(s: str) -> tuple[Any, ...]:
    """Parse the top-level structure of a normalised answer."""
    s = s.strip()
    m = _MATRIX_RE.match(s)
    if m:
        rows = [r for r in re.split(r"\\\\", m.group(2)) if r.strip()]
        return ("matrix", tuple(tuple(c.strip() for c in r.split("&")) for r in rows))
    parts = _split_top(s, (",", ";"))
    if len(parts) > 1:
        return ("list", _expand_pm(parts))
    unions = _split_top(s, ("\\cup",))
    if len(unions) > 1:
        return ("union", tuple(unions))
    ob = _outer_bracket(s)
    if ob is not None:
        o, c, inner = ob
        elems = tuple(_split_top(inner, (",",)))
        if o == "{":
            return ("set", _expand_pm(elems))
        if len(elems) > 1:
            return ("bracket", o, c, elems)
    if _PM_RE.search(s):
        return ("list", _expand_pm([s]))
    if s.count("=") == 1 and not re.search(r"\\[lg]e|<|>", s):
        lhs, rhs = s.split("=")
        return ("eq", lhs.strip(), rhs.strip())
    pieces = _INEQ_RE.split(s)
    if len(pieces) in (3, 5):
        iv = _ineq_to_interval(pieces)
        if iv is not None:
            return iv
    return ("scalar", s)


def _ineq_to_interval(p: list[str]) -> tuple[Any, ...] | None:
    """``x < a``, ``a \\le x``, ``a < x \\le b`` -> ("bracket", o, c, (lo, hi))."""
    is_var = lambda t: re.fullmatch(r"[a-zA-Z]", t.strip()) is not None  # noqa: E731
    op = lambda o: o.strip()  # noqa: E731
    if len(p) == 3:
        a, o, b = p
        if is_var(a):  # x OP b
            if op(o) in ("<", "\\le"):
                return ("bracket", "(", "]" if op(o) == "\\le" else ")", ("-\\infty", b.strip()))
            return ("bracket", "[" if op(o) == "\\ge" else "(", ")", (b.strip(), "\\infty"))
        if is_var(b):  # a OP x
            if op(o) in ("<", "\\le"):
                return ("bracket", "[" if op(o) == "\\le" else "(", ")", (a.strip(), "\\infty"))
            return ("bracket", "(", "]" if op(o) == "\\ge" else ")", ("-\\infty", a.strip()))
        return None
    a, o1, x, o2, b = p
    if is_var(x) and op(o1) in ("<", "\\le") and op(o2) in ("<", "\\le"):
        lo_br = "[" if op(o1) == "\\le" else "("
        hi_br = "]" if op(o2) == "\\le" else ")"
        return ("bracket", lo_br, hi_br, (a.strip(), b.strip()))
    return None


class _ParseError(Exception):
    pass


@lru_cache(maxsize=8192)
def _to_sympy(s: str) -> Any:
    """Parse a normalised scalar into sympy (floats made exact rationals, ``i`` the unit)."""
    import sympy
    from latex2sympy2_extended import latex2sympy

    if not s or not _depth_ok(s):
        raise _ParseError(s)
    num = _simple_number(s)
    if num is not None:
        return sympy.Rational(num.value.numerator, num.value.denominator)
    try:
        expr = latex2sympy(s, normalization_config=None)
    except Exception as exc:  # antlr/sympy raise many kinds
        raise _ParseError(s) from exc
    if not isinstance(expr, sympy.Basic) or isinstance(expr, (sympy.Set, sympy.MatrixBase)):
        raise _ParseError(s)
    reps = {}
    for sym in expr.free_symbols:
        if sym.name == "i":
            reps[sym] = sympy.I
    if reps:
        expr = expr.xreplace(reps)
    floats = list(expr.atoms(sympy.Float))
    if floats:
        expr = expr.xreplace({f: sympy.Rational(str(f)) for f in floats})
    return expr


def _decimal_quantum(s: str) -> Fraction | None:
    num = _simple_number(s.strip())
    return num.quantum if num is not None else None


def _numeric_zero(d: Any, scale: Any) -> bool | None:
    """True/False when the numeric value of d settles it, None when it cannot be evaluated."""
    import sympy

    try:
        v = sympy.N(d, 60)
        sv = abs(sympy.N(scale, 60))
    except Exception:
        return None
    if not v.is_number or v.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo):
        return None
    try:
        return bool(abs(v) <= sympy.Float(10, 60) ** -55 * max(1, sv))
    except TypeError:
        return None


def _scalar_equal(p: str, g: str, deg_p: bool = False, deg_g: bool = False) -> bool:
    """Sympy equivalence of two normalised scalars (gold second)."""
    import sympy

    gq = _decimal_quantum(g)
    a = _to_sympy(p)
    b = _to_sympy(g)
    if deg_g and not deg_p and a.has(sympy.pi):
        a = a * 180 / sympy.pi
    elif deg_p and not deg_g and b.has(sympy.pi):
        a = a * sympy.pi / 180
    if a == b:
        return True
    if gq is not None:  # decimal gold: accept values that round to it
        try:
            va = sympy.N(a, 40)
            if va.is_real:
                return bool(abs(va - b) <= sympy.Rational(gq.numerator, gq.denominator) / 2)
        except Exception:
            return False
        return False
    if a.is_infinite or b.is_infinite:
        return False
    d = a - b
    if not d.free_symbols:
        if d.is_Rational:
            return d == 0
        dn = _numeric_zero(d, b)
        if dn is not None and not dn:
            return False
        try:
            ds = sympy.simplify(d)
        except Exception:
            ds = d
        if ds == 0:
            return True
        if ds.is_Rational:
            return False
        return bool(dn)
    try:
        if sympy.expand(d) == 0:
            return True
    except Exception:
        pass
    rng = random.Random(1234)
    syms = sorted(d.free_symbols, key=lambda x: x.name)
    hits = 0
    for _ in range(3):
        point = {x: sympy.Rational(rng.randint(2, 97), rng.randint(2, 19)) for x in syms}
        try:
            z = _numeric_zero(d.subs(point), b.subs(point))
        except Exception:
            z = None
        if z is False:
            return False
        hits += z is True
    if hits == 3:
        return True
    try:
        return sympy.simplify(d) == 0
    except Exception:
        return False


def _eq_equal(p: tuple[Any, ...], g: tuple[Any, ...]) -> bool:
    """``l1 = r1`` equals ``l2 = r2`` when the differences are proportional by a nonzero constant."""
    import sympy

    d1 = _to_sympy(p[1]) - _to_sympy(p[2])
    d2 = _to_sympy(g[1]) - _to_sympy(g[2])
    if d2 == 0:
        return d1 == 0
    ratio = sympy.simplify(d1 / d2)
    return bool(ratio.is_number and ratio != 0 and ratio.is_finite)


def _multiset_equal(ps: Sequence[str], gs: Sequence[str], pn: _Norm, gn: _Norm) -> bool:
    if len(ps) != len(gs):
        return False
    used = [False] * len(gs)
    for p in ps:
        for j, g in enumerate(gs):
            if not used[j] and _elem_equal(p, g, pn, gn):
                used[j] = True
                break
        else:
            return False
    return True


def _elem_equal(p: str, g: str, pn: _Norm, gn: _Norm) -> bool:
    """Equivalence of two elements (each normalised again, structure-aware)."""
    pe, ge = _normalize(p), _normalize(g)
    pn2 = _Norm(pe.text, pe.pct or pn.pct, pe.deg or pn.deg, pe.is_text)
    gn2 = _Norm(ge.text, ge.pct or gn.pct, ge.deg or gn.deg, ge.is_text)
    if _key(pe.text) == _key(ge.text):
        return True
    if ge.is_text or pe.is_text:
        return pe.text.lower() == ge.text.lower()
    return _struct_equal(_structure(pe.text), _structure(ge.text), pn2, gn2)


def _struct_equal(ps: tuple[Any, ...], gs: tuple[Any, ...], pn: _Norm, gn: _Norm) -> bool:
    kind = gs[0]
    if kind != "eq" and _single_lhs(ps):
        ps = _structure(ps[2])  # "x = 5" against "5"
    if kind == "eq":
        if ps[0] == "eq":
            if _single_lhs(ps) and _single_lhs(gs):
                prhs, grhs = _structure(ps[2]), _structure(gs[2])
                if _struct_equal(prhs, grhs, pn, gn):
                    return True
                if prhs[0] != "scalar" or grhs[0] != "scalar":
                    return False  # D = (0, 1): the right sides decide
            return _eq_equal(ps, gs)
        return _single_lhs(gs) and _struct_equal(ps, _structure(gs[2]), pn, gn)
    if kind == "scalar":
        if ps[0] == "list":  # the same answer boxed twice in two notations
            return all(_elem_equal(p, gs[1], pn, gn) for p in ps[1])
        if ps[0] != "scalar":
            return False
        a, b = _simple_number(ps[1]), _simple_number(gs[1])
        if a is not None and b is not None:
            return _numbers_equal(a, pn, b, gn)
        if pn.pct != gn.pct:
            ok = _scalar_equal(ps[1], gs[1])
            if ok:
                return True
            factor = "/100" if pn.pct else "*100"
            return _scalar_equal(f"({ps[1]}){factor}", gs[1])
        return _scalar_equal(ps[1], gs[1], pn.deg, gn.deg)
    if kind in ("list", "set"):
        if ps[0] not in ("list", "set"):
            return len(gs[1]) == 1 and _elem_equal(ps[1] if ps[0] == "scalar" else "", gs[1][0], pn, gn)
        return _multiset_equal(ps[1], gs[1], pn, gn)
    if kind == "bracket":
        if ps[0] == "union" and len(ps[1]) == 1:
            ps = _structure(ps[1][0])
        if ps[0] != "bracket" or ps[1:3] != gs[1:3] or len(ps[3]) != len(gs[3]):
            return False
        return all(_elem_equal(a, b, pn, gn) for a, b in zip(ps[3], gs[3]))
    if kind == "union":
        pitems = ps[1] if ps[0] == "union" else None
        if pitems is None:
            return False
        if len(pitems) != len(gs[1]):
            return False
        used = [False] * len(gs[1])
        for p in pitems:
            for j, g in enumerate(gs[1]):
                if not used[j] and _struct_equal(_structure(p), _structure(g), pn, gn):
                    used[j] = True
                    break
            else:
                return False
        return True
    if kind == "matrix":
        grid = gs[1]
        if ps[0] == "matrix":
            if len(ps[1]) != len(grid) or any(len(a) != len(b) for a, b in zip(ps[1], grid)):
                return False
            return all(_elem_equal(x, y, pn, gn) for ra, rb in zip(ps[1], grid) for x, y in zip(ra, rb))
        flat = [c for row in grid for c in row]
        is_vector = len(grid) == 1 or all(len(r) == 1 for r in grid)
        if ps[0] == "bracket" and is_vector and len(ps[3]) == len(flat):
            return all(_elem_equal(x, y, pn, gn) for x, y in zip(ps[3], flat))
        return False
    return False


def _slow_verdict(pred: str, gold: str, dataset: str | None) -> str:
    """Full structural + sympy comparison; runs in the worker process."""
    pn, gn = _normalize(pred), _normalize(gold)
    try:
        ok = _struct_equal(_structure(pn.text), _structure(gn.text), pn, gn)
    except (_ParseError, RecursionError, MemoryError):
        return "parse_error"
    except Exception:  # sympy raises TypeError/ValueError/... on odd input
        log.debug("sympy comparison failed", exc_info=True)
        return "parse_error"
    if ok and dataset == "aime" and _INT_RE.match(gn.text):
        num = _simple_number(pn.text)
        if num is not None and (num.value.denominator != 1 or not 0 <= num.value <= 999):
            return "wrong"
    return "correct" if ok else "wrong"


# =====================================================================================
# Worker subprocesses with a hard kill
# =====================================================================================


def _worker_main() -> None:
    """Loop of the worker subprocess: one JSON request per stdin line, one JSON reply per line."""
    try:
        import resource

        lim = 4 * 1024**3
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    except (ImportError, ValueError, OSError):
        pass
    sys.setrecursionlimit(5000)
    parent = os.getppid()

    def watchdog() -> None:  # exit when the parent dies mid-computation
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    import sympy  # noqa: F401  (warm import before signalling ready)
    import latex2sympy2_extended  # noqa: F401

    try:
        _to_sympy("x+1")
    except _ParseError:
        pass
    out = sys.stdout
    out.write('{"ready": true}\n')
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        try:
            reason = _slow_verdict(req["pred"], req["gold"], req.get("dataset"))
        except (MemoryError, RecursionError):
            reason = "parse_error"
        out.write(json.dumps({"reason": reason}) + "\n")
        out.flush()


# The worker loads this file by path, so nothing else in the ``evaluation`` package is imported.
_WORKER_BOOT = (
    "import importlib.util, sys; "
    "spec = importlib.util.spec_from_file_location('_creditbench_grader_worker', sys.argv[1]); "
    "mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; "
    "spec.loader.exec_module(mod); mod._worker_main()"
)


class _Worker:
    """One sympy worker subprocess speaking JSON lines over pipes."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER_BOOT, os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            close_fds=True,
        )
        self.buf = b""
        self.ready = False
        self.poller = select.poll()  # poll, not select: no FD_SETSIZE limit in fd-heavy trainers
        out_fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        self.poller.register(out_fd, select.POLLIN | select.POLLHUP | select.POLLERR)

    def _readline(self, deadline: float) -> bytes | None:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not self.poller.poll(max(1, int(left * 1000))):
                continue  # re-check the deadline
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError("grader worker exited")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def wait_ready(self, limit: float = 120.0) -> None:
        if not self.ready:
            line = self._readline(time.monotonic() + limit)
            if line is None:
                raise TimeoutError("grader worker did not start")
            self.ready = True

    def ask(self, pred: str, gold: str, dataset: str | None, timeout_s: float) -> str | None:
        """The worker's reason, or None on timeout (the caller then kills the worker)."""
        msg = json.dumps({"pred": pred, "gold": gold, "dataset": dataset}) + "\n"
        self.proc.stdin.write(msg.encode())  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        line = self._readline(time.monotonic() + timeout_s)
        return None if line is None else json.loads(line)["reason"]

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except Exception:
            pass

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(timeout=2)
        except Exception:
            self.kill()


class _WorkerPool:
    """Idle sympy workers; thread-safe; reset after a fork (workers belong to one process)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Worker] = []
        self.pid = os.getpid()

    def acquire(self) -> _Worker:
        with self.lock:
            if self.pid != os.getpid():  # inherited through fork: not ours to use
                self.idle, self.pid = [], os.getpid()
            if self.idle:
                return self.idle.pop()
        return _Worker()

    def release(self, w: _Worker) -> None:
        with self.lock:
            if self.pid == os.getpid() and len(self.idle) < _MAX_IDLE_WORKERS:
                self.idle.append(w)
                return
        w.close()

    def spare(self) -> None:
        """Start a replacement worker in the background (after a kill)."""
        self.release(_Worker())

    def close_all(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
            mine = self.pid == os.getpid()
        if mine:
            for w in idle:
                w.close()


_POOL = _WorkerPool()  # process handles only; no grading state lives here
atexit.register(_POOL.close_all)


def _slow_in_worker(pred: str, gold: str, dataset: str | None, timeout_s: float) -> str:
    w = _POOL.acquire()
    try:
        w.wait_ready()
        reason = w.ask(pred, gold, dataset, timeout_s)
    except (OSError, EOFError, TimeoutError, ValueError):
        w.kill()
        log.warning("grader worker failed; restarting", exc_info=True)
        return "parse_error"
    if reason is None:
        w.kill()
        _POOL.spare()
        return "timeout"
    _POOL.release(w)
    return reason


# =====================================================================================
# Public API
# =====================================================================================


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


def reward(response: str, gold: str, *, timeout_s: float) -> float:
    """The RL reward: 1.0 if the checker accepts the response, else 0.0 (the same verdict evaluation uses)."""
    return float(grade(response, gold, timeout_s=timeout_s).correct)


__all__ = ["DATASETS", "GRADER_VERSION", "REASONS", "Verdict", "extract_answer", "grade", "grade_many", "reward"]

