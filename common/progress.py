"""Progress inside a set (problems and samples done, rate, time left) for generation, grading and code
scoring: a tqdm bar on a terminal, and a plain line every ``every_s`` seconds (and at the end) in the log,
so that a job whose stderr is a file (a workflow rule's ``log:``, ``creditbench eval ... 2> log``) shows
where it is instead of an hour of silence. ``creditbench eval`` also copies the lines into ``OUT/eval.log``
(:func:`log_to`); ``$CREDITBENCH_PROGRESS_S`` sets the seconds between lines."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

_LOG_FILES: list[Path] = []


def log_to(path: Path | None) -> None:
    """Also append every progress line (and :func:`note`) to ``path`` (None: stop)."""
    _LOG_FILES.clear()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        _LOG_FILES.append(path)


def note(line: str) -> None:
    """One line on stderr and in the log file."""
    print(line, file=sys.stderr, flush=True)
    for path in _LOG_FILES:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s" if m else f"{s} s"


class Progress:
    """``with Progress("gsm8k generate", total=200) as bar: bar.update(problems, samples)``."""

    def __init__(self, desc: str, total: int, *, unit: str = "problem", every_s: float | None = None):
        from tqdm import tqdm

        if every_s is None:  # $CREDITBENCH_PROGRESS_S: seconds between log lines (default 10)
            every_s = float(os.environ.get("CREDITBENCH_PROGRESS_S", "10"))
        self.desc, self.total, self.unit, self.every_s = desc, total, unit, every_s
        self.done = self.samples = 0
        self.t0 = self.last = time.perf_counter()
        tty = sys.stderr.isatty()
        self.bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=not tty, leave=False)
        self.lines_on_stderr = not tty  # a terminal has the bar; a log file gets the lines

    def line(self) -> str:
        elapsed = time.perf_counter() - self.t0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 else float("nan")
        samples = f" ({self.samples} samples)" if self.samples else ""
        eta = duration(left) if left == left else "?"
        return (f"{self.desc}: {self.done}/{self.total} {self.unit}s{samples}, {rate:.2f} {self.unit}s/s, "
                f"{duration(elapsed)} elapsed, {eta} left")

    def _emit(self) -> None:
        text = self.line()
        if self.lines_on_stderr:
            print(text, file=sys.stderr, flush=True)
        for path in _LOG_FILES:
            with open(path, "a", encoding="utf-8") as f:
                f.write(text + "\n")
        self.last = time.perf_counter()

    def update(self, n: int = 1, samples: int = 0) -> None:
        self.done += n
        self.samples += samples
        self.bar.update(n)
        if self.samples:
            self.bar.set_postfix_str(f"{self.samples} samples", refresh=False)
        if time.perf_counter() - self.last >= self.every_s and self.done < self.total:
            self._emit()

    def close(self) -> None:
        self.bar.close()
        if self.total:
            self._emit()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
