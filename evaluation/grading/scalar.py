"""Scalars: parsing into sympy, exact comparison of rational expressions, numeric confirmation (worker only).

Exact golds compare exactly: a difference between rational expressions is computed, never approximated
(``(10^{1000}+1)/10^{1000}`` != ``1``); an irrational difference must vanish at 60 digits and again at a
precision that grows with the size of the numbers involved (``\\sqrt{10^{2000}+1}`` != ``10^{1000}``).
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from functools import lru_cache
from typing import Any

from evaluation.grading.normalize import depth_ok, simple_number


class ParseError(Exception):
    pass


@lru_cache(maxsize=8192)
def to_sympy(s: str) -> Any:
    """Parse a normalised scalar into sympy (floats made exact rationals, ``i`` the unit)."""
    import sympy
    from latex2sympy2_extended import latex2sympy

    if not s or not depth_ok(s):
        raise ParseError(s)
    num = simple_number(s)
    if num is not None:
        return sympy.Rational(num.value.numerator, num.value.denominator)
    try:
        expr = latex2sympy(s, normalization_config=None)
    except Exception as exc:  # antlr/sympy raise many kinds
        raise ParseError(s) from exc
    if not isinstance(expr, sympy.Basic) or isinstance(expr, (sympy.Set, sympy.MatrixBase)):
        raise ParseError(s)
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
    num = simple_number(s.strip())
    return num.quantum if num is not None else None


def _numeric_zero(d: Any, scale: Any, digits: int = 60) -> bool | None:
    """True/False when the numeric value of d settles it, None when it cannot be evaluated."""
    import sympy

    try:
        v = sympy.N(d, digits)
        sv = abs(sympy.N(scale, digits))
    except Exception:
        return None
    if not v.is_number or v.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo):
        return None
    try:
        return bool(abs(v) <= sympy.Float(10, digits) ** -(digits - 5) * (sv if sv != 0 else 1))
    except TypeError:
        return None


_EXACT_BITS = 1 << 20  # an exact rational of up to ~10^315,000 is computed, not approximated


def _exact_rational(expr: Any) -> Fraction | None:
    """The exact value of a sum/product/integer power of rationals, or None (anything else, or too big).

    Why: a numeric difference that vanishes to 60 (and 120) digits is not zero when both sides are
    rational: ``(10^{1000}+1)/10^{1000}`` differs from ``1`` by ``10^{-1000}`` and must stay unequal."""
    import sympy

    if isinstance(expr, sympy.Rational):
        return Fraction(int(expr.p), int(expr.q))
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        vals = [_exact_rational(a) for a in expr.args]
        if any(v is None for v in vals):
            return None
        out = Fraction(0 if isinstance(expr, sympy.Add) else 1)
        for v in vals:
            out = out + v if isinstance(expr, sympy.Add) else out * v
            if max(out.numerator.bit_length(), out.denominator.bit_length()) > _EXACT_BITS:
                return None
        return out
    if isinstance(expr, sympy.Pow) and isinstance(expr.exp, sympy.Integer):
        base = _exact_rational(expr.base)
        e = int(expr.exp)
        if base is None or (base == 0 and e < 0):
            return None
        if abs(e) * max(base.numerator.bit_length(), base.denominator.bit_length(), 1) > _EXACT_BITS:
            return None
        return base ** e
    return None


def _confirm_digits(expr: Any) -> int:
    """Digits that confirm a numeric zero: 120, or twice the size of the largest number in ``expr`` (a power
    counted by its value's digits) plus 60, up to 20,000: ``\\sqrt{10^{2000}+1} - 10^{1000}`` is 10^-1000
    and only shows at over 2,000 digits."""
    import sympy

    size = 0
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Integer):
            size = max(size, len(str(abs(int(node)))))
        elif isinstance(node, sympy.Pow) and node.base.is_Integer and node.exp.is_Integer and node.base != 0:
            size = max(size, int(abs(int(node.exp)) * math.log10(max(2, abs(int(node.base))))) + 1)
    return max(120, min(2 * size + 60, 20_000))


def scalar_equal(p: str, g: str, deg_p: bool = False, deg_g: bool = False) -> bool:
    """Sympy equivalence of two normalised scalars (gold second)."""
    import sympy

    gq = _decimal_quantum(g)
    a = to_sympy(p)
    b = to_sympy(g)
    if (deg_g and not deg_p and a.has(sympy.pi)) or (deg_p and not deg_g and b.has(sympy.pi)):
        return False  # an angle in the other unit: the requested unit counts
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
    ea, eb = _exact_rational(a), _exact_rational(b)
    if ea is not None and eb is not None:
        return ea == eb
    d = a - b
    if not d.free_symbols:
        if d.is_Rational:
            return d == 0
        dn = _numeric_zero(d, b)
        if dn is not None and not dn:
            return False
        confirm = _numeric_zero(d, b, _confirm_digits(d)) if dn else None
        if confirm is not None:  # vanishes to 60 digits, and to 120+ or not: no simplify (nested radicals
            return confirm  # can take minutes); a difference of 10^-1000 shows at the larger precision
        try:
            ds = sympy.simplify(d)
        except Exception:
            ds = d
        if ds == 0:
            return True
        if ds.is_Rational:
            return False
        return bool(dn)
    rng = random.Random(1234)  # random points first: a nonzero value decides "wrong" before any expand
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
        if sympy.expand(d) == 0:
            return True
    except Exception:
        pass
    try:
        return sympy.simplify(d) == 0
    except Exception:
        return False
