"""Normalisation (pure string work, cached) and exact parsing of plain numbers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from evaluation.grading.boxes import match_brace
from evaluation.grading.prose import superscripts_as_tex

MAX_LEN = 2000
_MAX_DEPTH = 60

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
_DOUBLE_PAREN_RE = re.compile(r"\(\s*\(([^()]*)\)\s*\)")
_ONE_CHAR_GROUP_RE = re.compile(r"(?<!\\)\{(\w)\}")
_PLAIN_RE = re.compile(r"[+-]?(?:\d+|(?!0)\d{1,3}(?:,\d{3})+)(?:\.\d+)?")  # 0,125 is not a thousands group
_THOUSANDS_RE = re.compile(r"^[+-]?(?!0)\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_SCI_TEX_RE = re.compile(
    r"^([+-]?\d+(?:[.,]\d+)?)\s*(?:\\times|\\cdot|\*|x)\s*10\s*\^\s*\{?\s*([+-]?\d+)\s*\}?$"  # 1,2: decimal comma
)
_VAR = r"[a-zA-Z](?:_\{?[a-zA-Z0-9]+\}?)?"
_NAME = r"[A-Za-z]{1,3}(?:_\{?[A-Za-z0-9]{1,4}\}?)?"  # S, AB, S_{ABC}
# a label on the left of "=": a variable, a tuple of variables, a named ratio (``S_{ABC}:S``), a segment, an
# angle, a length ``|PQ|``/``|\vec{v}|`` or a ratio of segments ``\frac{AM}{MB}`` (uppercase names only)
LABEL = (rf"(?:{_VAR}|\({_VAR}(?:\s*,\s*{_VAR})+\)|{_NAME}(?:\s*:\s*{_NAME})+|[A-Z]{{2,3}}"
          rf"|(?:m\s*)?\\angle\s*[A-Z]{{1,3}}|[a-zA-Z]\s*(?:\^\{{?-1\}}?|'{{1,2}})?\s*\(\s*[a-zA-Z0-9]\s*\)"
          rf"|[A-Z]\s*\^\s*\{{?\s*(?:-1|T|\\top)\s*\}}?"  # f^{{-1}}(x), f'(x), A^{{-1}}, A^T: the asked object named
          rf"|\|\s*(?:\\(?:vec|overrightarrow|overline)\s*\{{\s*[A-Za-z]{{1,3}}\s*\}}|{_NAME})\s*\|"
          rf"|\\frac\{{\s*[A-Z]{{1,3}}\s*\}}\{{\s*[A-Z]{{1,3}}\s*\}})")
_ASSIGN_RE = re.compile(rf"^{LABEL}\s*=\s*")
_IN_RE = re.compile(rf"^{_VAR}\s*\\in(?![a-zA-Z])\s*")
CHOICE_RE = re.compile(r"^\(?([A-E])\)?$")
_BASE_WORDS_RE = re.compile(r"^(?=[0-9A-Za-z]*\d)([0-9A-Za-z]+)\s*(?:\(\s*|in\s+|,\s*)?base[\s\-]*(\d+)\s*\)?\.?$",
                            re.I)
BASE_RE = re.compile(r"^(?=[0-9A-Za-z]*\d)([0-9A-Za-z]+)_\{?\(?(\d+)\)?\}?$")


# a big operator or an elided series: an equation side holding one restates the question
_RESTATED_RE = re.compile(r"\\(?:sum|prod|int|lim|cdots|ldots|dots)(?![a-zA-Z])|\.\.\."
                          # a derivative operator opening the side, applied to what follows (\frac{d}{dx} x^3; not
                          # the ODE m\frac{dv}{dt} + bv = f)
                          r"|^\s*\\[dt]?frac\s*\{\s*(?:d|\\partial)(?:\^\{?\d\}?)?\s*\}\s*\{\s*(?:d|\\partial)\s*[a-zA-Z]")


def drop_restated_side(s: str) -> str:
    """``\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}`` -> ``\\frac{n(n+1)}{2}``: when the left side of a one-``=``
    equation is a sum (a big operator or an elided series ``a_1 + \\cdots + a_n``) and the right side is
    not, the left restates what was asked and the right is the answer (as a label, but one no parser reads)."""
    depth, eqs = 0, []
    for i, c in enumerate(s):  # "=" outside braces: \sum_{k=1}^{n} holds one of its own
        depth += (c == "{") - (c == "}")
        if c == "=" and depth == 0:
            eqs.append(i)
    if len(eqs) != 1 or s[eqs[0] - 1 : eqs[0]] in ("<", ">", "!", ":"):
        return s
    left, right = s[: eqs[0]], s[eqs[0] + 1 :].strip()
    return right if right and _RESTATED_RE.search(left) and not _RESTATED_RE.search(right) else s


# "m + n = 14", "a+b+c = 30": a sum of named unknowns, then its value (the quantity a problem asks for)
_NAMED_SUM_RE = re.compile(rf"^\s*\d*{_VAR}(?:\s*[+\-]\s*\d*{_VAR})+\s*=\s*([^=a-zA-Z]*\d[^=a-zA-Z]*)$")


def drop_named_sum(pred: str, gold: str) -> str:
    """``m + n = 14`` -> ``14`` when the gold is no equation: the left side names the asked sum, as a label
    (``x = 5``) names its variable.  Against an equation gold (``x + y = 10``) the equation is compared."""
    m = _NAMED_SUM_RE.match(pred) if "=" not in gold and "=" in pred else None
    return m.group(1).strip() if m else pred


_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}
_DENOMS = {"half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4, "fourth": 4,
           "fourths": 4, "fifth": 5, "fifths": 5, "sixth": 6, "sixths": 6, "seventh": 7, "sevenths": 7,
           "eighth": 8, "eighths": 8, "ninth": 9, "ninths": 9, "tenth": 10, "tenths": 10}


def _cardinal(words: list[str]) -> int | None:
    """``two hundred and five`` -> 205 (cardinals below 10^12)."""
    total = cur = 0
    seen = False
    for w in words:
        if w == "and" and seen:
            continue
        if w in _NUMBER_WORDS:
            cur += _NUMBER_WORDS[w]
        elif w in _TENS:
            cur += _TENS[w]
        elif w in _SCALES and seen:
            if w == "hundred":
                cur = (cur or 1) * 100
            else:
                total, cur = total + (cur or 1) * _SCALES[w], 0
        elif w == "hundred":
            cur = 100
        else:
            return None
        seen = True
    return total + cur if seen else None


def _number_word(s: str) -> str | None:
    """A number written in words as a numeral string: ``forty-two``, ``three quarters``, ``a half``."""
    words = s.lower().strip().replace("-", " ").split()
    if not words or len(words) > 8:
        return None
    if words[-1] == "dozen" and len(words) <= 2:
        return "12" if words[0] in ("a", "one", "dozen") else None
    if len(words) >= 2 and words[-1] in _DENOMS:
        num = 1 if words[:-1] in (["a"], ["one"], ["an"]) else _cardinal(words[:-1])
        if num is None or (num > 1) != words[-1].endswith("s") and words[-1] not in ("half",):
            return None
        return f"\\frac{{{num}}}{{{_DENOMS[words[-1]]}}}"
    n = _cardinal(words)
    return None if n is None else str(n)


def _replace_text_groups(s: str) -> tuple[str, bool]:
    """Drop unit words inside ``\\text{}`` after a number, unwrap other text; flag "degrees"."""
    deg = False
    while True:
        m = _TEXT_CMDS_RE.search(s)
        if not m:
            return s, deg
        k = match_brace(s, m.end() - 1)
        if k < 0:
            return s, deg
        inner, before, after = s[m.end() : k].strip(), s[: m.start()], s[k + 1 :]
        low = inner.lower()
        if low in ("degree", "degrees", "deg"):
            deg, inner = True, ""
        elif low in ("and", "or"):
            inner = ","
        elif re.fullmatch(r"[a-zA-Z\u00b5\u03bc\u03a9][a-zA-Z0-9 ./^\u00b5\u03bc\u03a9-]*", inner) and re.search(
            r"(?:[\d}]|\d\s*\\pi)\s*$", before  # 16\pi \text{ cm}^2: a unit after a multiple of pi
        ):
            rest = re.sub(r"^\s*\^\s*\{?[23]\}?", "", after)
            if not rest.strip():
                inner, after = "", rest  # unit after a number
        s = before + inner + after


@dataclass(frozen=True)
class Norm:
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
def normalize_answer(raw: str) -> Norm:
    """Normalise an answer string (pure, cached; longer than the cap: returned as is, a parse error later)."""
    if len(raw) > MAX_LEN:
        return Norm(text=raw, pct=False, deg=False, is_text=False)
    plain = raw.strip()
    if _PLAIN_RE.fullmatch(plain):  # fast lane: 42, -3.5, 1,000
        return Norm(text=plain.replace(",", ""), pct=False, deg=False, is_text=False)
    s = _BASE_WORDS_RE.sub(r"\1_{\2}", _strip_delims(raw))  # "1011 in base 2" is 1011_2
    if s.endswith("\\") and not s.endswith("\\\\"):
        s = s[:-1].rstrip()  # a control space ``\ `` whose space the extraction trimmed: ``5\``
    for a, b in _UNICODE:
        s = s.replace(a, b)
    s = superscripts_as_tex(s)
    s = _ASCII_REL_RE.sub(lambda m: _ASCII_REL[m.group(0)], s)
    s = _repeating(s)
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
            s = nw
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
        s = _strip_braces(s)
        if _EU_DECIMAL_RE.match(s):  # 1.234,5 / 1 234,5
            s = re.sub(r"[. ]", "", s).replace(",", ".")
        if _THOUSANDS_RE.match(s) or _SPACE_THOUSANDS_RE.match(s):
            s = re.sub(r"[, '’]", "", s)
        m = _TEXT_MIXED_RE.match(s)
        if m and int(m.group(3)) < int(m.group(4)):
            s = f"{m.group(1)}{m.group(2)}\\frac{{{m.group(3)}}}{{{m.group(4)}}}"
        m = _SCI_TEX_RE.match(s)
        if m:
            s = f"{m.group(1).replace(',', '.')}e{m.group(2)}"
    s = s.strip()
    return Norm(text=s, pct=pct, deg=deg, is_text=is_text)


_UNICODE = (("∞", "\\infty "), ("π", "\\pi "), ("√", "\\sqrt"), ("−", "-"), ("–", "-"), ("≤", "\\le "),
            ("≥", "\\ge "), ("≠", "\\ne "), ("∪", "\\cup "), ("×", "\\times "), ("·", "\\cdot "),
            ("⩽", "\\le "), ("⩾", "\\ge "), ("÷", "/"),
            ("½", " 1/2"), ("⅓", " 1/3"), ("⅔", " 2/3"), ("¼", " 1/4"), ("¾", " 3/4"))  # 2½ = 2 1/2: mixed
_ASCII_REL = {"<=": "\\le ", ">=": "\\ge ", "=<": "\\le ", "!=": "\\ne ", "=/=": "\\ne "}
_ASCII_REL_RE = re.compile(r"=/=|<=|>=|=<|!=")
_EU_DECIMAL_RE = re.compile(r"^[+-]?\d{1,3}(?:\.\d{3})+,\d+$|^[+-]?\d{1,3}(?: \d{3})+,\d+$")
_SPACE_THOUSANDS_RE = re.compile(r"^[+-]?\d{1,3}(?:[ '’]\d{3})+(?:\.\d+)?$")  # 12 345, Swiss 12'345
_TEXT_MIXED_RE = re.compile(r"^([+-]?)(\d+)\s*(?:\s|and\s*|\+\s*)(\d+)\s*/\s*(\d+)$")
_REPEAT_RE = re.compile(
    r"(\d*)\.(\d*)(?:\\overline\s*\{(\d+)\}|\\dot\s*\{(\d)\}|\((\d+)\)(?![\d.])|(\d)(?=\6\6)\6*(?:\.\.\.|\\[lc]?dots))"
)


def _repeating(s: str) -> str:
    """Repeating decimals as exact fractions: ``0.\\overline{3}``, ``0.1(6)``, ``0.333...`` -> ``\\frac{p}{q}``."""
    if "." not in s:
        return s

    def frac(m: re.Match[str]) -> str:
        ip, fp = m.group(1) or "0", m.group(2)
        rep = next(g for g in m.group(3, 4, 5, 6) if g)
        whole = int(ip + fp + rep) - int(ip + fp)
        den = (10 ** len(rep) - 1) * 10 ** len(fp)
        f = Fraction(whole, den)
        return f"\\frac{{{f.numerator}}}{{{f.denominator}}}" if f.denominator != 1 else str(f.numerator)

    return _REPEAT_RE.sub(frac, s)


def _strip_braces(s: str) -> str:
    """Redundant outer braces, doubled parentheses and trailing LaTeX line breaks: ``{{5}}`` -> ``5``,
    ``5 \\\\`` -> ``5``."""
    s = s.rstrip()
    while s.endswith("\\\\"):
        s = s[:-2].rstrip()
    while len(s) >= 2 and s[0] == "{" and s[-1] == "}" and match_brace(s, 0) == len(s) - 1:
        s = s[1:-1].strip()
    while True:  # doubled parentheses are one: ((x+1)) -> (x+1); 40 of them cost the LaTeX parser seconds
        t = _DOUBLE_PAREN_RE.sub(r"(\1)", s)
        if t == s:
            return s
        s = t


def drop_lhs(s: str) -> str:
    """``s`` without a single-variable left-hand side (``x = 5`` -> ``5``)."""
    return _ASSIGN_RE.sub("", s, count=1) if s.count("=") == 1 else s


def compare_key(s: str) -> str:
    """Whitespace-free comparison key; braces around one character dropped (``x^{2}`` = ``x^2``)."""
    return _ONE_CHAR_GROUP_RE.sub(r"\1", "".join(s.split()))


INT_RE = re.compile(r"^[+-]?\d+$")
_DEC_RE = re.compile(r"^([+-]?)(\d*)\.(\d+)$|^([+-]?)(\d+)\.$")
_SLASH_RE = re.compile(r"^([+-]?\d+)\s*/\s*([+-]?\d+)$")
_FRAC_RE = re.compile(r"^([+-]?)\\frac\{\s*([+-]?\d+)\s*\}\{\s*([+-]?\d+)\s*\}$")
_MIXED_RE = re.compile(r"^([+-]?)(\d+)\s*\\frac\{\s*(\d+)\s*\}\{\s*(\d+)\s*\}$")
_SCI_RE = re.compile(r"^([+-]?)(\d+)(?:\.(\d+))?[eE]([+-]?\d+)$")


@dataclass(frozen=True)
class Num:
    value: Fraction
    quantum: Fraction | None  # last decimal place of a decimal literal; None = exact


@lru_cache(maxsize=65536)
def simple_number(s: str) -> Num | None:
    """Parse a plain integer/decimal/fraction/mixed number/scientific literal exactly."""
    if len(s) > 400:
        return None
    if INT_RE.match(s):
        return Num(Fraction(int(s)), None)
    m = _DEC_RE.match(s)
    if m:
        if m.group(3) is not None:
            sign, ip, fp = m.group(1), m.group(2) or "0", m.group(3)
        else:
            sign, ip, fp = m.group(4), m.group(5), ""
        v = Fraction(int(ip + fp or "0"), 10 ** len(fp))
        exact = not fp or not fp.strip("0")  # "27.0" is a float-serialised integer: exact
        return Num(-v if sign == "-" else v, None if exact else Fraction(1, 10 ** len(fp)))
    m = _SLASH_RE.match(s)
    if m and int(m.group(2)) != 0:
        return Num(Fraction(int(m.group(1)), int(m.group(2))), None)
    m = _FRAC_RE.match(s)
    if m and int(m.group(3)) != 0:
        v = Fraction(int(m.group(2)), int(m.group(3)))
        return Num(-v if m.group(1) == "-" else v, None)
    m = _MIXED_RE.match(s)
    if m and int(m.group(4)) != 0:
        v = int(m.group(2)) + Fraction(int(m.group(3)), int(m.group(4)))
        return Num(-v if m.group(1) == "-" else v, None)
    m = _SCI_RE.match(s)
    if m and abs(int(m.group(4))) <= 400:
        fp = m.group(3) or ""
        e = int(m.group(4)) - len(fp)
        v = Fraction(int(m.group(2) + fp)) * (Fraction(10) ** e)
        return Num(-v if m.group(1) == "-" else v, (Fraction(10) ** e) if fp else None)
    return None


def _num_match(p: Fraction, g: Num) -> bool:
    if g.quantum is None:
        return p == g.value
    return abs(p - g.value) <= g.quantum / 2


def numbers_equal(p: Num, pn: Norm, g: Num, gn: Norm) -> bool:
    """Compare plain numbers with the percent and decimal-gold rules.

    Against a bare gold a ``%`` on the prediction names either the gold itself (the unit a "what percent"
    question asks for, which MATH and GSM8K store bare: ``40%`` matches ``40``) or its hundredth (``25\\%``
    matches 0.25); against a percent gold a bare number reads as that many percent (``10`` matches
    ``10\\%``, ``0.1`` not).
    """
    if pn.pct and not gn.pct:
        return _num_match(p.value / 100, g) or _num_match(p.value, g)
    return _num_match(p.value, g)


def depth_ok(s: str) -> bool:
    if len(s) > MAX_LEN:
        return False
    depth = best = 0
    for c in s:
        if c in "([{":
            depth += 1
            best = max(best, depth)
        elif c in ")]}":
            depth -= 1
    return best <= _MAX_DEPTH

