"""Answer forms the fast path decides from the strings alone: clock times, ratios, decimal commas, units."""

from __future__ import annotations

import re
from fractions import Fraction

from evaluation.grading.normalize import Num, simple_number

_CLOCK_RE = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?(?:([ap])\.?m\.?)?$")
_RATIO_RE = re.compile(r"^[+-]?\d+(?:\.\d+)?(?:\s*:\s*[+-]?\d+(?:\.\d+)?)+$")
_DEC_COMMA_RE = re.compile(r"^([+-]?\d+),(\d{1,2}|\d{4,})$|^([+-]?0),(\d{3})$")  # 0,125: no thousands group
_UNITS = ("m|s|g|h|l|L|J|N|W|V|A|K|Pa|Hz|eV|kg|mg|km|cm|mm|nm|ms|min|hr|yr|mi|ft|lb|kJ|kW|MW|kHz|MHz|GHz|keV"
          "|MeV|GeV|mol|atm|bar|Torr|mmHg|kPa|mL|dL|kWh|rad|sr|lm|lx|Wb|T|F|Ohm|\\\\Omega|yd|oz|gal|mph|kph")
_NUM_UNIT_RE = re.compile(
    rf"^([+-]?\d+(?:\.\d+)?(?:e[+-]?\d+)?)\s*(?:{_UNITS})(?:\s*\^\s*\{{?[23]\}}?)?"
    rf"(?:\s*/\s*(?:{_UNITS})(?:\s*\^\s*\{{?[23]\}}?)?)?$"
)


def clock(raw: str) -> tuple[int, int, int, str | None] | None:
    """``3:45 p.m.`` -> (3, 45, 0, "p"); None when not a clock time (minutes need two digits)."""
    s = re.sub(r"\\(?:text|mathrm|mbox)\s*\{|[{}$~\s]|\\[,;! ]", "", raw).lower()
    m = _CLOCK_RE.match(s)
    if not m:
        return None
    h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    if h > 24 or mi > 59 or sec > 59 or (m.group(4) and not 1 <= h <= 12):
        return None
    return h, mi, sec, m.group(4)


def clocks_equal(p: tuple[int, int, int, str | None], g: tuple[int, int, int, str | None]) -> bool:
    """Times compare as times: with am/pm on one side only, the hour compares modulo 12."""
    def h24(t: tuple[int, int, int, str | None]) -> int:
        return t[0] % 12 + (12 if t[3] == "p" else 0) if t[3] else t[0]

    if (p[3] is None) == (g[3] is None):
        return (h24(p) % 24, p[1], p[2]) == (h24(g) % 24, g[1], g[2])
    return (h24(p) % 12, p[1], p[2]) == (h24(g) % 12, g[1], g[2])


def ratio(s: str) -> list[Fraction] | None:
    """``3:4`` -> [3, 4]; None when not a ratio of plain numbers."""
    if not _RATIO_RE.match(s):
        return None
    return [Fraction(x.strip()) for x in s.split(":")]


def ratios_equal(p: list[Fraction], g: list[Fraction]) -> bool:
    """Proportional parts (``6:8`` = ``3:4``); no zero part."""
    if len(p) != len(g) or not all(p) or not all(g):
        return False
    return all(pi * g[0] == gi * p[0] for pi, gi in zip(p, g))


def decimal_comma(s: str) -> Num | None:
    """``3,5`` read as 3.5 (a decimal comma; three digits after the comma are a thousands group, except
    after a lone 0: ``0,125``)."""
    m = _DEC_COMMA_RE.match(s)
    return simple_number(f"{m.group(1) or m.group(3)}.{m.group(2) or m.group(4)}") if m else None


def number_with_unit(s: str) -> Num | None:
    """``5 m``, ``12 km/h``, ``3 cm^2``: the number, when what follows it is a unit symbol."""
    m = _NUM_UNIT_RE.match(s)
    return simple_number(m.group(1)) if m else None


_AMC_GOLD_RE = re.compile(  # a choice letter, then its value
    r"^\s*(?:\\(?:text(?:bf|rm)?|math(?:rm|bf))\s*\{\s*\(([A-E])\)\s*\}|\(([A-E])\))"
    r"\s*(?:\\[ ,;:!]|~|\s)*(\S.*)$", re.S)
_CHOICE_ONLY_RE = re.compile(r"^\s*(?:\\(?:text(?:bf|rm)?|math(?:rm|bf))\s*\{\s*)?\(?([A-E])\)?\s*\}?\s*$")


def amc_gold(gold: str) -> tuple[str, str] | None:
    """``\\textbf{(B) }14`` (an AMC gold: choice letter and value) -> ("B", "14"); None otherwise."""
    m = _AMC_GOLD_RE.match(gold)
    if not m or "\\textbf{(" in m.group(3) or "\\text{(" in m.group(3):
        return None
    return (m.group(1) or m.group(2)), m.group(3).strip()


def amc_prediction(pred: str) -> tuple[str, str | None] | None:
    """A prediction as (letter, value or None) when it names a choice (``B``, ``(B)``, ``\\textbf{(B)} 14``)."""
    m = _CHOICE_ONLY_RE.match(pred)
    if m:
        return m.group(1), None
    m = _AMC_GOLD_RE.match(pred)
    return ((m.group(1) or m.group(2)), m.group(3).strip()) if m else None
