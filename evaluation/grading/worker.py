"""The sympy worker subprocess: ``python -m evaluation.grading.worker`` (started by :mod:`.pool`).

One JSON request per stdin line (``pred``, ``gold``, ``dataset``, ``budget_s``), one JSON reply per line
(``reason``).  The worker stops its own computation at ``budget_s`` (an interval timer; sympy is Python, so
the alarm lands between bytecodes) and answers ``timeout``: a timeout then costs its budget and nothing more,
where a kill would make the next answer wait for a fresh worker's start-up (about 3 s, longer under load).
The grading process keeps its hard kill at the full ``timeout_s`` for computations the alarm cannot reach
(one long C call).

Before it signals ready the worker parses :data:`_WARM_FORMS` once.  Why: latex2sympy's ANTLR parser builds
its prediction DFA lazily, so the first parse of each construct (``x^{10}``, ``a_1``, ``|x-2|``, ``\\cos``)
costs 10-300 ms and a later one about 2 ms; a fresh worker would pay that on its first real answers (profile
of ``cases/hard.tsv``: 78 % of the sympy path's time was ANTLR prediction).  Parsing fills only the
parser's shared DFA (no result is cached), so verdicts cannot change; the sympy calls warm lazily imported
solvers.  The cost (about 2 s of CPU, once per worker) is start-up, which ``timeout_s`` does not count.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

from evaluation.grading.equivalence import slow_verdict
from evaluation.grading.scalar import ParseError, to_sympy

# Generic answer forms (not the case tables' strings): one per grammar path the sympy path meets.
_WARM_FORMS = (
    "12", "-7", "0.25", "\\frac{3}{4}", "-\\frac{5}{2}", "\\frac{a+b}{c-d}", "\\frac{1}{\\frac{2}{3}}", "\\sqrt{7}",
    "\\sqrt[3]{2}", "3\\sqrt{5}", "\\frac{\\sqrt{6}}{4}", "\\frac{2-\\sqrt{3}}{5}", "\\sqrt{4+2\\sqrt{3}}", "x^2",
    "x^{10}-1", "2^{-3}", "e^{i\\pi}", "a_1+a_{12}", "4a \\cdot 5b", "6 \\times 7", "7xy", "3\\pi r^2",
    "(a+1)(a-2)", "2(x-3)^2+1", "|x-2|", "n!", "\\frac{1}{10!}", "\\pi", "\\frac{\\pi}{3}", "\\sin x",
    "\\cos(2\\theta)", "\\tan^{-1} 1", "\\arcsin \\frac{1}{2}", "\\log_2 8", "\\ln 5", "\\binom{6}{3}",
    "x \\le 4", "y > -1", "2x + 3y = 6", "x = \\frac{1}{2}", "3-4i", "\\infty", "-\\infty",
    "\\frac{x^2-1}{x+1}",
)


def _warm() -> None:
    """Fill latex2sympy's prediction DFA and import sympy's lazily loaded solvers (see the module docstring)."""
    import sympy
    from latex2sympy2_extended import latex2sympy

    for form in _WARM_FORMS:
        try:
            latex2sympy(form, normalization_config=None)
        except Exception:  # a form this latex2sympy version rejects still warms the paths it took
            pass
    x = sympy.Symbol("x")
    sympy.solveset(sympy.Lt(-2 * x, 6), x, sympy.S.Reals)
    sympy.simplify(sympy.sqrt(3 + 2 * sympy.sqrt(2)) - 1 - sympy.sqrt(2))
    sympy.N(sympy.pi - sympy.Rational(22, 7), 60)
    sympy.cancel((x**2 - 1) / (x + 1))
    sympy.expand((x + 1) ** 3)


class _OverBudget(BaseException):
    """Raised by the interval timer; a BaseException, so no ``except Exception`` on the way swallows it."""


def _over_budget(signum: int, frame: object) -> None:
    raise _OverBudget


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
    import latex2sympy2_extended  # noqa: F401
    import sympy  # noqa: F401  (warm import before signalling ready)

    try:
        to_sympy("x+1")
    except ParseError:
        pass
    _warm()
    out = sys.stdout
    out.write('{"ready": true}\n')
    out.flush()
    signal.signal(signal.SIGALRM, _over_budget)
    for line in sys.stdin:
        req = json.loads(line)
        try:
            try:
                signal.setitimer(signal.ITIMER_REAL, req.get("budget_s") or 0)
                reason = slow_verdict(req["pred"], req["gold"], req.get("dataset"))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _OverBudget:
            reason = "timeout"
        except (MemoryError, RecursionError):
            reason = "parse_error"
        out.write(json.dumps({"reason": reason}) + "\n")
        out.flush()

if __name__ == "__main__":
    _worker_main()
