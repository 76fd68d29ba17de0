"""The data format in which test outputs leave the sandbox, and the trusted comparison with EvalPlus's oracle.

Why a format of our own: EvalPlus compares ``out == exp`` *inside* the solution's interpreter, where an
object with an always-true ``__eq__``, a patched ``numpy.allclose`` or a frame walk that rewrites ``exp``
decide the verdict. Here the untrusted process only *encodes* each return value; the scorer decodes it
into fresh builtin objects and compares them itself (:func:`check_outputs`), so nothing the program does
in its own interpreter can change the verdict.

Encoding (:func:`encode`, run in the sandbox): JSON in which lists, str, int, float (NaN/inf included),
bool and None are JSON values and every other builtin is a one-key tagged object (tuple, set, frozenset,
dict, complex, bytes, big int, numpy scalar). Types are checked with ``type(x) is T``: subclasses and custom objects
are not serialisable, and a test whose output is not serialisable fails. The only conversions are for
library values that honest code returns and EvalPlus's ``==`` accepts: numpy scalars (sent as dtype name
and value, rebuilt by the scorer as that numpy scalar, since numpy's comparison differs from float's) and
the ``collections`` dict types (as dict), chosen by exact type, so a user subclass still fails.
In EvalPlus's ``MBPP_OUTPUT_NOT_NONE_TASKS`` (regex tasks judged on ``out is not None``) the harness sends
that bool for a non-bool result (a ``re.Match``), as EvalPlus compares it.

Decoding (:func:`decode`, trusted side): ``json.loads`` with an ``object_hook`` that accepts exactly the
tags above and nothing else; any malformed, untagged or unhashable input raises :class:`FormatError`.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
from typing import Any

_BIG = 1 << 63  # ints outside +-2**63 travel as hex: json.loads caps decimal ints at 4300 digits

OK, RAISED, READY, END = 0, 1, -1, -2  # child frame kinds: [i, OK, value] | [i, RAISED] | [READY] | [END]


class FormatError(ValueError):
    """Bytes from the sandbox that are not a valid encoding."""


class Unserialisable(TypeError):
    """A return value outside the type-strict format."""


_DICTS = (collections.OrderedDict, collections.defaultdict, collections.Counter)


def _numpy_scalars() -> dict[type, str]:
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy ships with EvalPlus
        return {}
    names = ("bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
             "float32", "float64", "complex64", "complex128")
    return {getattr(np, n): n for n in names}


_NUMPY = _numpy_scalars()


def encode_value(x: Any, depth: int = 0) -> Any:
    if depth > 200:
        raise Unserialisable("nested too deeply")
    t = type(x)
    if t is str or t is bool or x is None:
        return x
    if t is int:
        return x if -_BIG <= x < _BIG else {"x": format(x, "x")}
    if t is float:
        return x
    if t is list:
        return [encode_value(e, depth + 1) for e in x]
    if t is tuple:
        return {"t": [encode_value(e, depth + 1) for e in x]}
    if t is set or t is frozenset:
        return {"s" if t is set else "f": [encode_value(e, depth + 1) for e in x]}
    if t is dict:
        return {"d": [[encode_value(k, depth + 1), encode_value(v, depth + 1)] for k, v in x.items()]}
    if t is complex:
        return {"c": [x.real, x.imag]}
    if t is bytes:
        return {"b": x.hex()}
    if t in _NUMPY:  # rebuilt as the same numpy scalar by the scorer: EvalPlus's == on it is numpy's
        v = x.item()
        return {"n": [_NUMPY[t], [v.real, v.imag] if type(v) is complex else v]}
    if t in _DICTS:
        return encode_value(dict(x), depth + 1)
    raise Unserialisable(f"{t.__module__}.{t.__qualname__} is not a builtin type")


def encode(value: Any) -> bytes:
    """``value`` as type-strict JSON bytes; :class:`Unserialisable` for anything else."""
    return json.dumps(encode_value(value), allow_nan=True, separators=(",", ":")).encode()


def encode_frame(item: Sequence[Any]) -> bytes:
    """A child frame (see the ``OK``/``RAISED``/``READY``/``END`` kinds) with its 4-byte length."""
    body = json.dumps(list(item), allow_nan=True, separators=(",", ":")).encode()
    return len(body).to_bytes(4, "big") + body


def _hook(d: dict) -> Any:
    if len(d) != 1:
        raise FormatError("an encoded object has exactly one tag")
    (tag, v), = d.items()
    if tag == "x" and type(v) is str:
        return int(v, 16)
    if tag == "b" and type(v) is str:
        return bytes.fromhex(v)
    if tag == "c" and type(v) is list and len(v) == 2 and all(type(p) in (int, float) for p in v):
        return complex(*v)
    if type(v) is not list:
        raise FormatError(f"bad tag {tag!r}")
    if tag == "n" and len(v) == 2 and v[0] in _NUMPY.values():
        import numpy as np

        val = complex(*v[1]) if type(v[1]) is list and len(v[1]) == 2 else v[1]
        if type(val) not in (bool, int, float, complex):
            raise FormatError("bad numpy scalar")
        return getattr(np, v[0])(val)
    if tag == "t":
        return tuple(v)
    if tag in ("s", "f"):
        return (set if tag == "s" else frozenset)(v)
    if tag == "d" and all(type(p) is list and len(p) == 2 for p in v):
        return {k: val for k, val in v}
    raise FormatError(f"bad tag {tag!r}")


def decode(data: bytes) -> Any:
    """Inverse of :func:`encode`, for untrusted bytes: fresh builtin objects or :class:`FormatError`."""
    try:
        return json.loads(data, object_hook=_hook)
    except (ValueError, TypeError, RecursionError) as exc:  # FormatError is a ValueError
        raise FormatError(str(exc)[:200]) from None


def split_frames(data: bytes) -> list[Any]:
    """The decoded frames of one check's output stream; :class:`FormatError` if the framing is broken."""
    frames, pos = [], 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise FormatError("truncated frame header")
        n = int.from_bytes(data[pos : pos + 4], "big")
        if pos + 4 + n > len(data):
            raise FormatError("truncated frame")
        frames.append(decode(data[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    return frames


# ------------------------------------------------------------------------------- EvalPlus's oracle

def _matches(dataset: str, entry_point: str, inp: Sequence[Any], out: Any, exp: Any, atol: float) -> tuple[bool, float]:
    """One test, as ``evalplus.eval.unsafe_execute`` (0.3.1) judges it; returns (passed, atol) because
    EvalPlus raises its ``atol`` to 1e-6 at the first float expectation and keeps it for later inputs."""
    import numpy as np
    from evalplus.eval import MBPP_OUTPUT_NOT_NONE_TASKS, MBPP_OUTPUT_SET_EQ_TASKS, is_floats
    from evalplus.eval._special_oracle import _digit_distance_nums, _poly, _surface_Area

    try:
        exact = out == exp
        if dataset == "mbpp":
            if entry_point == "are_equivalent":  # Mbpp/164
                exact = True
            elif entry_point == "sum_div":  # Mbpp/295
                exact = exact or out == 0
            elif entry_point == "surface_Area":  # Mbpp/581
                exact = exact or abs(out - _surface_Area(*inp)) <= atol
            elif entry_point == "digit_distance_nums":  # Mbpp/558
                exact = exact or out == _digit_distance_nums(*inp)
            elif entry_point in MBPP_OUTPUT_SET_EQ_TASKS:
                exact = set(out) == set(exp)
            elif entry_point in MBPP_OUTPUT_NOT_NONE_TASKS:
                exact = out == exp if isinstance(out, bool) else exp == (out is not None)
        if dataset == "humaneval" and entry_point == "find_zero":
            # EvalPlus asserts the root and then `continue`s past its progress counter, so even a right
            # root leaves the check short of len(inputs) results: EvalPlus 0.3.1 fails HumanEval/32 always
            return (False if abs(_poly(*inp, out)) > atol else None), atol  # type: ignore[return-value]
        if atol == 0 and is_floats(exp):
            atol = 1e-6
        if not exact and atol != 0:
            ok = (type(out) is type(exp) and (not isinstance(exp, (list, tuple)) or len(out) == len(exp))
                  and bool(np.allclose(out, exp, rtol=1e-07, atol=atol)))
            return ok, atol
        return bool(exact), atol
    except Exception:  # noqa: BLE001  (EvalPlus: any exception while judging is a failed test)
        return False, atol


def check_outputs(dataset: str, entry_point: str, inputs: Sequence[Any], frames: Sequence[Any],
                  expected: Sequence[Any], atol: float) -> bool:
    """Pass iff the child reported READY, then an OK value for every input in order that EvalPlus's oracle
    accepts, then END. Anything else (an exception, a gap, a bad frame, a missing END) fails."""
    if len(frames) != len(inputs) + 2 or frames[0] != [READY] or frames[-1] != [END]:
        return False
    counted = 0
    for i, (inp, fr) in enumerate(zip(inputs, frames[1:-1])):
        if type(fr) is not list or len(fr) != 3 or type(fr[0]) is not int or fr[0] != i or fr[1] != OK:
            return False
        ok, atol = _matches(dataset, entry_point, inp, fr[2], expected[i], atol)
        if ok is False:
            return False
        counted += ok is True
    return counted == len(inputs)

