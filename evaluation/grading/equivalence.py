"""Equivalence: the in-process fast path (no sympy) and the structural + sympy path run by the worker."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from evaluation.grading.forms import (
    amc_gold,
    amc_prediction,
    clock,
    clocks_equal,
    decimal_comma,
    number_with_unit,
    ratio,
    ratios_equal,
)
from evaluation.grading.normalize import (
    BASE_RE,
    CHOICE_RE,
    INT_RE,
    LABEL,
    Norm,
    compare_key,
    depth_ok,
    drop_lhs,
    normalize_answer,
    numbers_equal,
    simple_number,
)
from evaluation.grading.scalar import ParseError, scalar_equal, to_sympy

log = logging.getLogger(__name__)


def _ratio_verdict(pr: list[Fraction] | None, gr: list[Fraction] | None, p_num: Any, g_num: Any) -> str | None:
    """Ratios: proportional parts; a two-part ratio against a non-integer fraction compares its quotient."""
    if pr is None and gr is None:
        return None
    if pr is not None and gr is not None:
        return "correct" if ratios_equal(pr, gr) else "wrong"
    if gr is not None and len(gr) == 2 and gr[1] and p_num is not None and p_num.value.denominator != 1:
        return "correct" if p_num.value == gr[0] / gr[1] else "wrong"
    if pr is not None and len(pr) == 2 and pr[1] and g_num is not None and g_num.value.denominator != 1:
        return "correct" if g_num.value == pr[0] / pr[1] else "wrong"
    return "wrong" if (gr is not None and p_num is not None) or (pr is not None and g_num is not None) else None


def _amc_reduce(pred: str, gold: str) -> tuple[str | None, str, str]:
    """An AMC gold ``\\textbf{(B) }14`` is right as its letter, its value or both (a wrong letter is wrong
    whatever value follows it): (verdict when the letter decides, prediction, gold) with the values left."""
    amc = amc_gold(gold)
    if amc is None:
        return None, pred, gold
    letter, value = amc
    pc = amc_prediction(pred.strip().strip("$").strip())
    if pc is None:
        return None, pred, value
    if pc[0] != letter:
        return "wrong", pred, gold
    return ("correct", pred, gold) if pc[1] is None else (None, pc[1], value)


def fast_verdict(pred: str, gold: str, dataset: str | None) -> str | None:
    """``correct``/``wrong``/``parse_error`` when decidable without sympy, else None."""
    decided, pred, gold = _amc_reduce(pred, gold)
    if decided is not None:
        return decided
    pn, gn = normalize_answer(pred), normalize_answer(gold)
    if not pn.text:
        return "no_answer" if not pred.strip() else "parse_error"
    gc = clock(gold)
    if gc is not None:  # clock times compare as times, never as ratios
        pc = clock(drop_lhs(pred.strip()))
        return "correct" if pc is not None and clocks_equal(pc, gc) else "wrong"
    p_num, g_num = simple_number(pn.text), simple_number(gn.text)
    if g_num is None or p_num is None:
        p_bare, g_bare = drop_lhs(pn.text), drop_lhs(gn.text)
        if compare_key(pn.text) == compare_key(gn.text) and pn.pct == gn.pct:
            return "correct"
        one_sided = (p_bare != pn.text) != (g_bare != gn.text)
        if compare_key(p_bare) == compare_key(g_bare) and pn.pct == gn.pct and one_sided:
            return "correct"  # "x = 5" vs "5"
        p_num, g_num = simple_number(p_bare), simple_number(g_bare)
        verdict = _ratio_verdict(ratio(p_bare), ratio(g_bare), p_num, g_num)
        if verdict is not None:
            return verdict
        if g_num is not None and p_num is None:
            non_integer = g_num.quantum is not None or g_num.value.denominator != 1
            p_num = (decimal_comma(p_bare) if non_integer else None) or number_with_unit(p_bare)
    if g_num is not None and p_num is not None:
        aime_gold = dataset == "aime" and g_num.value.denominator == 1
        if aime_gold and (p_num.value.denominator != 1 or not 0 <= p_num.value <= 999):
            return "wrong"
        return "correct" if numbers_equal(p_num, pn, g_num, gn) else "wrong"
    if gn.is_text or pn.is_text:
        if gn.is_text and pn.is_text:
            a = re.sub(r"^(?:the|a|an) ", "", pn.text.lower()).strip()
            b = re.sub(r"^(?:the|a|an) ", "", gn.text.lower()).strip()
            return "correct" if a == b else "wrong"
        if gn.is_text:
            return "wrong"
    gc = CHOICE_RE.match(gn.text)
    if gc and ("(" in gn.text or "\\text" in gold or len(gn.text) == 1 and not INT_RE.match(pn.text)):
        pc = CHOICE_RE.match(pn.text) or re.match(r"^\(([A-E])\)", pn.text)
        return "correct" if pc and pc.group(1) == gc.group(1) else "wrong"
    gb = BASE_RE.match(gn.text)
    if gb and not INT_RE.match(gn.text):
        pb = BASE_RE.match(pn.text)
        digits = pb.group(1) if pb else pn.text
        base_ok = pb is None or pb.group(2) == gb.group(2)
        return "correct" if base_ok and digits.upper() == gb.group(1).upper() else "wrong"
    if not depth_ok(pn.text) or not depth_ok(gn.text):
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
_BRACKETED_ARRAY_RE = re.compile(r"^[\[(]\s*(\\begin\{array\}.*\\end\{array\})\s*[\])]$", re.S)


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
    return st[0] == "eq" and re.fullmatch(LABEL, st[1].strip()) is not None


def _structure(s: str) -> tuple[Any, ...]:
    """Parse the top-level structure of a normalised answer."""
    s = s.strip()
    mb = _BRACKETED_ARRAY_RE.match(s)
    if mb:
        s = mb.group(1)
    m = _MATRIX_RE.match(s)
    if m:
        rows = [r for r in re.split(r"\\\\", m.group(2)) if r.strip()]
        return ("matrix", tuple(tuple(c.strip() for c in r.split("&")) for r in rows))
    groups = _split_top(s, (";",))
    if len(groups) > 1 and any("," in g for g in groups):  # solutions x=2,y=5;x=5,y=2: one item each
        return ("list", tuple(groups))
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
        return ("ineq", s, tuple(pieces))
    return ("scalar", s)


def _solve_ineq(st: tuple[Any, ...]) -> tuple[Any, ...]:
    """``-x > -3`` or ``2x \\le 6``: the interval sympy solves it to (one variable), else a scalar."""
    import sympy

    if st[0] != "ineq" or len(st[2]) != 3:
        return ("scalar", st[1]) if st[0] == "ineq" else st
    a, op, b = st[2]
    lhs, rhs = to_sympy(a.strip()), to_sympy(b.strip())
    syms = (lhs - rhs).free_symbols
    if len(syms) != 1:
        return ("scalar", st[1])
    rel = {"<": sympy.Lt, ">": sympy.Gt, "\\le": sympy.Le, "\\ge": sympy.Ge}[op.strip()](lhs, rhs)
    sol = sympy.solveset(rel, next(iter(syms)), sympy.S.Reals)
    if isinstance(sol, sympy.Interval):
        o, c = "(" if sol.left_open else "[", ")" if sol.right_open else "]"
        return ("bracket", o, c, (sympy.latex(sol.start), sympy.latex(sol.end)))
    return ("scalar", st[1])


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


def _eq_equal(p: tuple[Any, ...], g: tuple[Any, ...]) -> bool:
    """``l1 = r1`` equals ``l2 = r2`` when the differences are proportional by a nonzero constant."""
    import sympy

    d1 = to_sympy(p[1]) - to_sympy(p[2])
    d2 = to_sympy(g[1]) - to_sympy(g[2])
    if d2 == 0:
        return d1 == 0
    ratio = sympy.cancel(d1 / d2)  # rational functions: canonical, and far cheaper than simplify
    if not ratio.is_number and ratio.is_rational_function():
        return False
    ratio = ratio if ratio.is_number else sympy.simplify(ratio)
    return bool(ratio.is_number and ratio != 0 and ratio.is_finite)


def _labels(items: Sequence[str]) -> dict[str, str] | None:
    """``x = 1, y = 2`` -> {"x": "1", "y": "2"} when every item is a labelled value with a distinct label."""
    out = {}
    for it in items:
        st = _structure(it)
        if not _single_lhs(st):
            return None
        out[re.sub(r"[\s{}]", "", st[1]).lower()] = st[2]
    return out if len(out) == len(items) else None


def _multiset_equal(ps: Sequence[str], gs: Sequence[str], pn: Norm, gn: Norm) -> bool:
    if len(ps) != len(gs):
        return False
    pl, gl = _labels(ps), _labels(gs)
    if pl is not None and gl is not None and set(pl) == set(gl):  # labelled on both sides: match by label
        return all(_elem_equal(pl[k], gl[k], pn, gn) for k in gl)
    used = [False] * len(gs)
    for p in ps:
        for j, g in enumerate(gs):
            if not used[j] and _elem_equal(p, g, pn, gn):
                used[j] = True
                break
        else:
            return False
    return True


def _elem_equal(p: str, g: str, pn: Norm, gn: Norm) -> bool:
    """Equivalence of two elements (each normalised again, structure-aware)."""
    pe, ge = normalize_answer(p), normalize_answer(g)
    pn2 = Norm(pe.text, pe.pct or pn.pct, pe.deg or pn.deg, pe.is_text)
    gn2 = Norm(ge.text, ge.pct or gn.pct, ge.deg or gn.deg, ge.is_text)
    if compare_key(pe.text) == compare_key(ge.text):
        return True
    if ge.is_text or pe.is_text:
        return pe.text.lower() == ge.text.lower()
    return _struct_equal(_structure(pe.text), _structure(ge.text), pn2, gn2)


def _struct_equal(ps: tuple[Any, ...], gs: tuple[Any, ...], pn: Norm, gn: Norm) -> bool:
    ps, gs = _solve_ineq(ps), _solve_ineq(gs)
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
        a, b = simple_number(ps[1]), simple_number(gs[1])
        if a is not None and b is not None:
            return numbers_equal(a, pn, b, gn)
        if pn.pct and not gn.pct:
            return scalar_equal(f"({ps[1]})/100", gs[1])
        return scalar_equal(ps[1], gs[1], pn.deg, gn.deg)
    if kind in ("list", "set"):
        if kind == "list" and ps[0] == "bracket" and ps[1] == "(" and _labels(gs[1]) is not None:
            return len(ps[3]) == len(gs[1]) and all(
                _elem_equal(a, _structure(b)[2], pn, gn) for a, b in zip(ps[3], gs[1]))
        if ps[0] not in ("list", "set"):
            return len(gs[1]) == 1 and _elem_equal(ps[1] if ps[0] == "scalar" else "", gs[1][0], pn, gn)
        return _multiset_equal(ps[1], gs[1], pn, gn)
    if kind == "bracket":
        if ps[0] == "union" and len(ps[1]) == 1:
            ps = _structure(ps[1][0])
        if ps[0] == "list" and gs[1] == "(" and _labels(ps[1]) is not None:  # x = 1, y = 2 vs (1, 2)
            ps = ("bracket", "(", ")", tuple(_structure(e)[2] for e in ps[1]))
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


def slow_verdict(pred: str, gold: str, dataset: str | None) -> str:
    """Full structural + sympy comparison; runs in the worker process."""
    decided, pred, gold = _amc_reduce(pred, gold)
    if decided is not None:
        return decided
    pn, gn = normalize_answer(pred), normalize_answer(gold)
    try:
        ok = _struct_equal(_structure(pn.text), _structure(gn.text), pn, gn)
    except (ParseError, RecursionError, MemoryError):
        return "parse_error"
    except Exception:  # sympy raises TypeError/ValueError/... on odd input
        log.debug("sympy comparison failed", exc_info=True)
        return "parse_error"
    if ok and dataset == "aime" and INT_RE.match(gn.text):
        num = simple_number(pn.text)
        if num is not None and (num.value.denominator != 1 or not 0 <= num.value <= 999):
            return "wrong"
    return "correct" if ok else "wrong"

