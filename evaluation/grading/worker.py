"""The sympy worker subprocess: ``python -m evaluation.grading.worker`` (started by :mod:`.pool`).

One JSON request per stdin line (``pred``, ``gold``, ``dataset``), one JSON reply per line (``reason``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from evaluation.grading.equivalence import _slow_verdict
from evaluation.grading.scalar import _ParseError, _to_sympy


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



if __name__ == "__main__":
    _worker_main()
