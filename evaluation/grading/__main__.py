"""CLI: grade a JSONL of predictions.

``python -m evaluation.grading --input pairs.jsonl --output verdicts.jsonl [--dataset gsm8k|aime|math]
[--timeout 5] [--workers N]``

Each input line needs ``prediction`` (the model response) and ``answer`` (the gold), strings or numbers,
never null; every other field is kept.  Bad input stops the run with one line naming ``file:line`` and the
field, before anything is graded.  Each output line adds ``correct`` (bool), ``extracted`` (str or null)
and ``reason``.  The output is
written atomically (temp file + ``os.replace``); counts per reason are printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

from common.records import CODE_ONLY_REASONS
from evaluation.grading import GRADER_VERSION, REASONS, grade_many


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text!r}")
    return value


def _read(path: Path) -> list[dict]:
    """The input rows; SystemExit with ``file:line: ...`` on the first bad one."""
    rows = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(row, dict):
                raise SystemExit(f"{where}: expected a JSON object, got {type(row).__name__}")
            for key in ("prediction", "answer"):
                if key not in row:
                    raise SystemExit(f"{where}: missing field {key!r}")
                if not isinstance(row[key], (str, int, float)) or isinstance(row[key], bool):
                    kind = "null" if row[key] is None else type(row[key]).__name__
                    raise SystemExit(f"{where}: field {key!r} must be a string or a number, got {kind}")
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.grading",
                                 description="Grade model predictions against gold answers.")
    ap.add_argument("--input", required=True, type=Path, help="JSONL with `prediction` and `answer`")
    ap.add_argument("--output", required=True, type=Path, help="JSONL written atomically")
    ap.add_argument("--dataset", choices=["math", "gsm8k", "aime"], default=None, help="dataset rules")
    ap.add_argument("--timeout", type=_positive, default=5.0, help="per-pair wall-clock limit, seconds (> 0)")
    ap.add_argument("--workers", type=int, default=1, help="parallel sympy worker processes")
    args = ap.parse_args(argv)

    if args.workers < 1:
        ap.error(f"--workers must be >= 1, got {args.workers}")
    try:
        rows = _read(args.input)
    except OSError as exc:
        raise SystemExit(f"{args.input}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise SystemExit(f"{args.input}: not UTF-8 text ({exc.reason})") from None
    verdicts = grade_many(
        [(str(r["prediction"]), str(r["answer"])) for r in rows],
        dataset=args.dataset,
        timeout_s=args.timeout,
        workers=args.workers,
    )
    out_dir = args.output.resolve().parent
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".{args.output.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            for row, v in zip(rows, verdicts):
                row = dict(row, correct=v.correct, extracted=v.extracted, reason=v.reason)
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, args.output)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    counts = Counter(v.reason for v in verdicts)
    print(f"{GRADER_VERSION}: {len(verdicts)} graded -> {args.output}")
    for reason in (r for r in REASONS if r not in CODE_ONLY_REASONS):  # the answer checker's own reasons
        print(f"  {reason:<12} {counts.get(reason, 0)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
