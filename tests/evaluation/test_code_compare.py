"""The type-strict format and the trusted comparison, against EvalPlus's own ``untrusted_check``."""

from __future__ import annotations

import collections
import math

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("evalplus")

from evaluation.code.compare import (  # noqa: E402  (after the importorskip calls)
    END,
    OK,
    RAISED,
    READY,
    FormatError,
    Unserialisable,
    check_outputs,
    decode,
    encode,
    encode_frame,
    encode_value,
    split_frames,
)

VALUES = [None, True, 0, -7, 3**200, -(3**200), 1.5, math.inf, -0.0, "é", b"\x00x", 2 - 3j, (), (1, [2.0, (3,)]),
          [True, 1, 1.0], {1, 2}, frozenset({"a"}), {(1, 2): [None], "k": {"n": frozenset()}}]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_builtins_round_trip_with_their_exact_types(value) -> None:
    def shape(x):  # type structure, recursively
        if isinstance(x, (list, tuple)):
            return type(x), [shape(e) for e in x]
        if isinstance(x, dict):
            return dict, sorted((repr(k), shape(v)) for k, v in x.items())
        return type(x), x

    assert shape(decode(encode(value))) == shape(value)


def test_nan_survives() -> None:
    assert math.isnan(decode(encode(float("nan"))))


class MyList(list):
    pass


class MyInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class Anything:
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value", [MyList([1]), MyInt(3), Anything(), [1, Anything()], (x for x in []), range(3),
                                   np.array([1.0]), {1: MyList()}], ids=lambda v: type(v).__name__)
def test_subclasses_and_custom_objects_are_not_serialisable(value) -> None:
    with pytest.raises(Unserialisable):
        encode(value)


def test_library_values_are_rebuilt_by_exact_type() -> None:
    got = decode(encode([np.float64(0.1), np.int64(3), np.bool_(True), collections.Counter("aab")]))
    assert type(got[0]) is np.float64 and type(got[1]) is np.int64 and type(got[2]) is np.bool_
    assert got[3] == {"a": 2, "b": 1} and type(got[3]) is dict


@pytest.mark.parametrize("raw", [b'{"a": 1}', b'{"t": 1}', b'{"t": [1], "s": [2]}', b'{"n": ["object", 1]}',
                                 b'{"d": [[[1], 2]]}', b'{"x": "zz"}', b"[", b"", b"[1]]", b'{"c": ["1", 2]}',
                                 b"[" * 100000 + b"]" * 100000])
def test_malformed_bytes_are_rejected(raw: bytes) -> None:
    with pytest.raises(FormatError):
        decode(raw)


def test_broken_framing_is_rejected() -> None:
    good = encode_frame([READY]) + encode_frame([0, OK, True])
    assert split_frames(good) == [[READY], [0, OK, True]]
    for bad in (good[:-1], good + b"\x00\x00", (10**6).to_bytes(4, "big") + b"[]"):
        with pytest.raises(FormatError):
            split_frames(bad)


def _frames(outs) -> list:
    data = encode_frame([READY])
    for i, out in enumerate(outs):
        data += encode_frame([i, OK, encode_value(out)])
    return split_frames(data + encode_frame([END]))


@pytest.mark.parametrize("frames", [
    [],  # nothing came back (e.g. os._exit before the tests)
    [[READY], [END]],  # the tests were skipped
    [[READY], [0, RAISED]],
    [[READY], [0, OK, 2], [END]],  # one of two inputs only
    [[READY], [1, OK, 2], [0, OK, 2], [END]],  # out of order
    [[READY], [0, OK, 2], [1, OK, 2]],  # no END
    [[READY], [True, OK, 2], [1, OK, 2], [END]],  # index of the wrong type
])
def test_incomplete_or_reordered_reports_fail(frames) -> None:
    assert not check_outputs("mbpp", "f", [(1,), (1,)], frames, [2, 2], 0)
    assert check_outputs("mbpp", "f", [(1,), (1,)], _frames([2, 2]), [2, 2], 0)


# Programs scored both by EvalPlus's own untrusted_check (its comparison in the program's process) and by
# the format + trusted comparison here; honest outputs must get the same verdict.
AGREEMENT = [
    ("def f(x):\n    return x / 3\n", [(1.0,), (2.0,)], [1 / 3, 2 / 3], 0),
    ("def f(x):\n    return round(x / 3, 7)\n", [(1.0,), (2.0,)], [1 / 3, 2 / 3], 0),  # within EvalPlus's 1e-6
    ("def f(x):\n    return round(x / 3, 3)\n", [(1.0,), (2.0,)], [1 / 3, 2 / 3], 0),
    ("def f(x):\n    return x / 3 + 1e-5\n", [(1.0,)], [1 / 3], 1e-4),  # the task's own atol
    ("def f(x):\n    return [x, x]\n", [(1,)], [(1, 1)], 0),  # list is not tuple
    ("def f(x):\n    return float(x)\n", [(1,)], [1], 0),  # 1.0 == 1
    ("def f(x):\n    return x == 1\n", [(1,)], [1], 0),  # True == 1
    ("import numpy as np\ndef f(x):\n    return np.float64(3 ** x)\n", [(50,)], [3**50], 0),  # numpy's ==
    ("import numpy as np\ndef f(x):\n    return np.int64(x) * 2\n", [(4,)], [8], 0),
    ("import collections\ndef f(x):\n    return collections.Counter(x)\n", [("aab",)], [{"a": 2, "b": 1}], 0),
    ("def f(x):\n    return {x}\n", [(1,)], [frozenset({1})], 0),
    ("def f(x):\n    return [0.1 * x, 0.2]\n", [(3,)], [[0.30000000000000004, 0.2]], 0),
    ("def f(x):\n    return [0.3, 0.2]\n", [(3,)], [[0.30000000000000004, 0.2]], 0),
    ("def f(x):\n    return (0.3, 0.2)\n", [(3,)], [[0.30000000000000004, 0.2]], 0),
    ("def f(x):\n    return float('nan')\n", [(3,)], [float("nan")], 0),
    ("def f(x):\n    return None\n", [(3,)], [None], 0),
    ("def f(x):\n    raise ValueError\n", [(3,)], [None], 0),
]


@pytest.mark.parametrize("code,inputs,expected,atol", AGREEMENT)
def test_verdicts_agree_with_evalplus_untrusted_check(code, inputs, expected, atol) -> None:
    from evalplus.eval import PASS, untrusted_check

    theirs = untrusted_check("mbpp", code, inputs, "f", expected, atol, [0.01] * len(inputs), fast_check=True)[0]
    ns: dict = {}
    exec(code, ns)  # noqa: S102  (our own test programs)
    try:
        frames = _frames([ns["f"](*inp) for inp in inputs])
    except ValueError:
        frames = split_frames(encode_frame([READY]) + encode_frame([0, RAISED]))
    ours = check_outputs("mbpp", "f", inputs, frames, expected, atol)
    assert ours == (theirs == PASS), (theirs, ours)
