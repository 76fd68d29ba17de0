"""Where this checker and Math-Verify disagree on a generations file.

``python -m evaluation.checks.audit GENERATIONS.jsonl [--dataset math|gsm8k|aime] [--out table.md] [--examples 5]``

Lines need ``prediction`` or ``response`` plus ``answer``.  The table counts agreements and
disagreements by direction and lists examples of each disagreement, so users see how much the choice
of checker moves their numbers.  :func:`audit` returns the same information as a dict.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from common.io import write_text_atomic
from evaluation.grading import GRADER_VERSION, grade


def _math_verify(response: str, gold: str) -> bool | None:
    """Math-Verify's verdict with the gold wrapped in ``$...$``; None when it raised."""
    from math_verify import parse, verify

    try:
        return bool(verify(parse(f"${gold}$"), parse(response)))
    except Exception:
        return None


def audit(
    records: Iterable[Mapping[str, Any]],
    *,
    dataset: str | None = None,
    timeout_s: float = 5.0,
    max_examples: int = 5,
) -> dict[str, Any]:
    """Grade every record with both checkers.

    Returns ``{"grader_version", "n", "counts", "accuracy_ours", "accuracy_math_verify",
    "delta_points", "reasons", "examples"}``; ``counts`` has ``both_correct``, ``both_wrong``,
    ``ours_only`` (we accept, Math-Verify rejects), ``math_verify_only`` and ``math_verify_error``;
    ``examples`` maps ``ours_only``/``math_verify_only`` to lists of
    ``{"gold", "extracted", "reason", "response_tail"}``.
    """
    counts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    examples: dict[str, list[dict[str, Any]]] = {"ours_only": [], "math_verify_only": []}
    n = ours_total = mv_total = 0
    for rec in records:
        response = str(rec.get("prediction", rec.get("response", "")))
        gold = str(rec["answer"])
        ds = dataset or rec.get("dataset")
        v = grade(response, gold, dataset=ds, timeout_s=timeout_s)
        mv = _math_verify(response, gold.rsplit("####", 1)[-1].strip())
        n += 1
        reasons[v.reason] += 1
        ours_total += v.correct
        mv_total += bool(mv)
        if mv is None:
            counts["math_verify_error"] += 1
        key = (
            "both_correct" if v.correct and mv else
            "both_wrong" if not v.correct and not mv else
            "ours_only" if v.correct else "math_verify_only"
        )
        counts[key] += 1
        if key in examples and len(examples[key]) < max_examples:
            examples[key].append(
                {"gold": gold, "extracted": v.extracted, "reason": v.reason, "response_tail": response[-160:]}
            )
    return {
        "grader_version": GRADER_VERSION,
        "n": n,
        "counts": {k: counts.get(k, 0) for k in
                   ("both_correct", "both_wrong", "ours_only", "math_verify_only", "math_verify_error")},
        "accuracy_ours": ours_total / n if n else 0.0,
        "accuracy_math_verify": mv_total / n if n else 0.0,
        "delta_points": 100.0 * (ours_total - mv_total) / n if n else 0.0,
        "reasons": dict(reasons),
        "examples": examples,
    }


def _cell(s: object) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def to_markdown(result: Mapping[str, Any]) -> str:
    """Render an :func:`audit` result as a Markdown report."""
    c, n = result["counts"], result["n"]
    lines = [
        f"# Checker audit ({result['grader_version']} vs Math-Verify), n = {n}",
        "",
        "| outcome | count | share |",
        "|---|---|---|",
    ]
    for key, label in (
        ("both_correct", "both accept"),
        ("both_wrong", "both reject"),
        ("ours_only", "ours accepts, Math-Verify rejects"),
        ("math_verify_only", "Math-Verify accepts, ours rejects"),
        ("math_verify_error", "Math-Verify raised"),
    ):
        lines.append(f"| {label} | {c[key]} | {100.0 * c[key] / n if n else 0:.1f}% |")
    lines += [
        "",
        f"Accepted: ours {100 * result['accuracy_ours']:.2f}%, Math-Verify "
        f"{100 * result['accuracy_math_verify']:.2f}% (delta {result['delta_points']:+.2f} points).",
        f"Our reasons: {result['reasons']}",
    ]
    for key, title in (("ours_only", "Ours accepts, Math-Verify rejects"),
                       ("math_verify_only", "Math-Verify accepts, ours rejects")):
        ex = result["examples"][key]
        if not ex:
            continue
        lines += ["", f"## {title} (examples)", "", "| gold | extracted | our reason | response tail |",
                  "|---|---|---|---|"]
        lines += [
            f"| `{_cell(e['gold'])}` | `{_cell(e['extracted'])}` | {e['reason']} "
            f"| {_cell(e['response_tail'])} |"
            for e in ex
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Where this checker and Math-Verify disagree.")
    ap.add_argument("generations", type=Path)
    ap.add_argument("--dataset", choices=["math", "gsm8k", "aime"], default=None)
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown table here (atomically)")
    ap.add_argument("--examples", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=5.0)
    args = ap.parse_args(argv)
    with args.generations.open() as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    md = to_markdown(audit(records, dataset=args.dataset, timeout_s=args.timeout, max_examples=args.examples))
    if args.out:
        write_text_atomic(args.out, md)
    print(md)


if __name__ == "__main__":
    main()
