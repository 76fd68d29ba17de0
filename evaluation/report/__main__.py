"""``python -m evaluation.report``: the tables (and, with ``--plots``, the figures) of a results tree."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import evaluation.report as report
from evaluation.report import AVG, FORMATS, ReportOptions, write_report
from evaluation.report.load import AUDIT_MAX_SAMPLES


def _parse_claim(text: str) -> tuple[str, str, float]:
    """``method=gain`` (Avg) or ``method:scope=gain``, gain in percentage points."""
    try:
        key, value = text.split("=", 1)
        method, _, scope = key.partition(":")
        return method.strip(), (scope.strip() or AVG), float(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"--claim wants METHOD[:SCOPE]=GAIN, got {text!r}") from err


def main(argv: Sequence[str] | None = None) -> int:
    description = report.__doc__.split("\n\n")[0]
    parser = argparse.ArgumentParser(prog="python -m evaluation.report", description=description)
    parser.add_argument("--results", type=Path, required=True, help="results tree (OUT) with eval/ and runs/")
    parser.add_argument("--out", type=Path, default=None, help="table directory (default OUT/tables)")
    parser.add_argument("--eval-dir", default="eval", help="summaries under OUT/EVAL_DIR (real_eval: real sets)")
    parser.add_argument("--baseline", default=ReportOptions.baseline, help="method to compare against")
    parser.add_argument("--claim", type=_parse_claim, action="append", default=[],
                        help="claimed gain to check, METHOD[:SCOPE]=PP, e.g. delta=3.26 (repeatable)")  # fmt: skip
    parser.add_argument("--n-boot", type=int, default=ReportOptions.n_boot)
    parser.add_argument("--n-perm", type=int, default=ReportOptions.n_perm)
    parser.add_argument("--seed", type=int, default=ReportOptions.seed)
    parser.add_argument("--alpha", type=float, default=ReportOptions.alpha)
    parser.add_argument("--benchmarks", default="", help="comma list: benchmark column order (others follow)")
    parser.add_argument("--no-ci", action="store_true", help="hide CIs in the Markdown/LaTeX main table")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma list of md,tex,csv,html")
    parser.add_argument("--audit-max-samples", type=int, default=AUDIT_MAX_SAMPLES,
                        help="checker audit: samples re-graded per .samples.jsonl (0: no audit table)")  # fmt: skip
    parser.add_argument("--plots", action="store_true", help="also write figures (see --figures)")
    parser.add_argument("--figures", type=Path, default=None, help="figure directory (default OUT/figures)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    opts = ReportOptions(
        baseline=args.baseline,
        n_boot=args.n_boot,
        n_perm=args.n_perm,
        seed=args.seed,
        alpha=args.alpha,
        claims=tuple(args.claim),
        show_ci=not args.no_ci,
        benchmarks=tuple(b for b in args.benchmarks.split(",") if b),
        formats=tuple(f for f in args.formats.split(",") if f),
        audit_max_samples=args.audit_max_samples,
    )
    if not (args.results / args.eval_dir).is_dir():
        print(f"report: --results {args.results}: no {args.eval_dir}/ folder of summaries there; pass a results "
              "tree (creditbench eval's --out, or the workflow's results/<run>)", file=sys.stderr)
        return 2
    out = args.out or args.results / "tables"
    figures = (args.figures or args.results / "figures") if args.plots else None
    for path in write_report(args.results, out, opts, plots_dir=figures, eval_dir=args.eval_dir):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
