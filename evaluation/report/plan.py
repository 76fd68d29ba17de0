"""``python -m evaluation.report.plan``: the seeds each method gets next (the ``seeds: auto`` checkpoint).

After look j of the schedule (``sequential.looks_schedule``) the Snakemake checkpoint ``seed_plan`` runs this on
the results tree: it replays the report's sequential verdicts over looks 1..j (``sequential.decide``, the same
call the significance table makes, so plan and table agree) and writes ``OUT/seeds/look<j>.json``:
``{"look": j, "looks": [...], "seeds": {method: n}, "verdicts": {method: {verdict, reason, seeds}}}``. An
undecided method gets the next look's seeds, a decided one keeps the seeds of its decision, the baseline gets
the most any method gets. The workflow (``workflow/rules/common.smk``) reads it to schedule the next batch.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from common.io import write_text_atomic
from evaluation.report.load import Results, load_results, order_benchmarks, sort_methods
from evaluation.report.sequential import SPENDING, decide, seeds_wanted
from evaluation.report.stats import final_records


def plan(res: Results, *, methods: Sequence[str], baseline: str, looks: Sequence[int], look: int,
         alpha: float = 0.05, margin: float = 2.0, kind: str = "obf") -> dict:
    """The plan after look ``look`` (1-based) for the trained ``methods`` (module docstring)."""
    final = final_records(res)
    family = [m for m in sort_methods(set(final)) if m != baseline]  # the significance table's family
    decisions = decide(final, baseline, family, order_benchmarks(res.benchmarks), looks=tuple(looks),
                       alpha=alpha, margin=margin, kind=kind, upto=look)
    wanted = seeds_wanted(decisions, looks)
    seeds = {m: wanted.get(m, looks[0]) for m in methods if m != baseline}
    seeds[baseline] = max([looks[0], *seeds.values()])
    verdicts = {m: {"verdict": d.verdict, "reason": d.reason, "seeds": d.seeds} for m, d in decisions.items()}
    return {"look": look, "looks": list(looks), "seeds": seeds, "verdicts": verdicts}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.report.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--eval-dir", default="eval", help="summaries under RESULTS/EVAL_DIR (workflow: eval/curve)")
    parser.add_argument("--out", type=Path, required=True, help="the plan (JSON)")
    parser.add_argument("--methods", required=True, help="comma list of trained methods (baseline included)")
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--looks", required=True, help="comma list: seeds at each look")
    parser.add_argument("--look", type=int, required=True, help="the look just completed (1-based)")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--equivalence-margin", type=float, default=2.0)
    parser.add_argument("--spending", choices=SPENDING, default="obf")
    args = parser.parse_args(argv)
    looks = [int(x) for x in args.looks.split(",")]
    out = plan(load_results(args.results, args.eval_dir), methods=args.methods.split(","), baseline=args.baseline,
               looks=looks, look=args.look, alpha=args.alpha, margin=args.equivalence_margin, kind=args.spending)
    write_text_atomic(args.out, json.dumps(out, indent=2, sort_keys=True) + "\n")
    for method, v in out["verdicts"].items():
        nxt = out["seeds"].get(method, "-")
        print(f"look {args.look}: {method}: {v['verdict']} ({v['reason']}); next: {nxt} seeds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
