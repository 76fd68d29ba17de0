"""CLI: grade a JSONL of predictions.

``python -m evaluation.grading --input pairs.jsonl --output verdicts.jsonl [--dataset gsm8k|aime|math]
[--timeout 5] [--workers N]``

Each input line needs ``prediction`` (the model response) and ``answer`` (the gold); every other field is
kept.  Each output line adds ``correct`` (bool), ``extracted`` (str or null) and ``reason``.  The output is
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

from evaluation.grading import GRADER_VERSION, REASONS, grade_many


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Grade model predictions against gold answers.")
    ap.add_argument("--input", required=True, type=Path, help="JSONL with `prediction` and `answer`")
    ap.add_argument("--output", required=True, type=Path, help="JSONL written atomically")
    ap.add_argument("--dataset", choices=["math", "gsm8k", "aime"], default=None, help="dataset rules")
    ap.add_argument("--timeout", type=float, default=5.0, help="per-pair wall-clock limit, seconds")
    ap.add_argument("--workers", type=int, default=1, help="parallel sympy worker processes")
    args = ap.parse_args(argv)

    rows = []
    with args.input.open() as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            missing = [k for k in ("prediction", "answer") if k not in row]
            if missing:
                ap.error(f"{args.input}:{lineno}: missing field(s) {missing}")
            rows.append(row)
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
    for reason in REASONS:
        print(f"  {reason:<12} {counts.get(reason, 0)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
