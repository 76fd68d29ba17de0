"""``creditbench eval``: one model, any registered sets, N problems each -> one results JSON + per-sample JSONL.

The lm-eval habit (``lm_eval --model hf --model_args pretrained=DIR --tasks arc_challenge --limit 200``)
without an experiment config or run labels:

    creditbench eval --model DIR --sets gsm8k,math500,arc_challenge --limit 200 --k 4 --temperature 0.6

Math and code sets are sampled (``evaluation.generation``) and graded (``evaluation.evaluate.score``: the
answer checker, EvalPlus for code); multiple-choice sets are scored by log-likelihood through lm-eval
(``evaluation.mcq``; cloze by default, as lm-eval's standard tasks). ``OUT/results.json`` holds the
config, package versions, git commit, each set's data sha256 and problem ids, the grader version and
per-set metrics with 95 % bootstrap CIs; ``OUT/samples_<set>.jsonl`` holds every graded sample with
exactly what was graded. ``--limit`` draws a seeded subset, stratified by subject where the set has
subjects (MMLU-STEM), kept in file order: never the first rows of a sorted file.
"""

from __future__ import annotations

import argparse
import logging
import math
import random
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from common.io import write_json_atomic, write_jsonl_atomic
from common.manifest import git_state, package_versions
from evaluation.benchmarks import BENCHMARKS, Problem, get_benchmark, load_benchmark
from evaluation.grading import GRADER_VERSION
from evaluation.mcq import letter_warning
from evaluation.metrics import bootstrap_ci, mean_g_pass_at_k

log = logging.getLogger(__name__)



def subset(problems: Sequence[Problem], limit: int | None, seed: int) -> list[Problem]:
    """``limit`` problems drawn with ``seed``, stratified by ``meta['subject']`` when present, in file order.

    Strata get ``limit`` in proportion to their size (largest remainders first), so a sorted file's first
    subject cannot fill the subset.
    """
    problems = list(problems)
    if limit is None or limit >= len(problems):
        return problems
    strata: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(problems):
        strata[str(p.meta.get("subject", ""))].append(i)
    quota = {s: limit * len(idx) / len(problems) for s, idx in strata.items()}
    take = {s: math.floor(q) for s, q in quota.items()}
    for s in sorted(quota, key=lambda s: (take[s] - quota[s], s))[: limit - sum(take.values())]:
        take[s] += 1
    rng = random.Random(seed)
    keep = sorted(i for s, idx in sorted(strata.items()) for i in rng.sample(idx, take[s]))
    return [problems[i] for i in keep]


def _ci(per_problem: np.ndarray, seed: int) -> list[float]:
    return list(bootstrap_ci(per_problem, seed=seed))


def _generated_sets(engine: Any, jobs: dict[str, tuple[list[Problem], str]], args: argparse.Namespace,
                    bar: Any) -> dict[str, tuple[dict, list[dict]]]:
    """Sample and grade the math and code sets: name -> (metrics, per-sample records)."""
    from evaluation.evaluate import generate, sampling_dict, score
    from evaluation.generation import SamplingParams

    params = SamplingParams(n=args.k, temperature=args.temperature, top_p=args.top_p,
                            max_new_tokens=args.max_new_tokens, seed=args.seed)
    out = {}
    for name, (problems, template) in jobs.items():
        bar.set_postfix_str(name)
        raw, seconds = generate(engine, {name: (problems, template)}, params)[name]
        records, summary = score(name, problems, raw, k=args.k, template=template, seed=args.seed,
                                 grader_timeout_s=args.grader_timeout_s)
        arr = np.asarray(summary["per_problem_correct"], dtype=int)
        metrics = {key: summary[key] for key in ("avg_at_k", "pass_at_k", "maj_at_k") if key in summary}
        metrics["avg_at_k_ci95"] = summary["ci95"]
        if args.k > 1:
            metrics.update({f"g_pass_at_k_tau{tau}": mean_g_pass_at_k(arr, args.k, tau) for tau in (0.5, 1.0)})
        metrics.update({key: summary[key] for key in ("base_pass_at_1", "plus_pass_at_1") if key in summary})
        out[name] = ({"kind": get_benchmark(name).kind, "protocol": "generate", "template": template,
                      "n": len(problems), "k": args.k, "metrics": metrics, "reasons": summary["reasons"],
                      "sampling": sampling_dict(params, template), "seconds": round(seconds, 3),
                      "mean_response_tokens": summary["mean_response_tokens"]}, records)
        bar.update(1)
    return out


def _mcq_sets(engine: Any, sets: dict[str, list[Problem]], args: argparse.Namespace,
              bar: Any) -> dict[str, tuple[dict, list[dict]]]:
    """Score the multiple-choice sets through lm-eval: name -> (metrics, per-item records)."""
    from evaluation.mcq import run_ood

    bar.set_postfix_str(",".join(sets))
    t0 = time.perf_counter()
    results = run_ood(args.model, tasks=list(sets), problems=sets, device=args.device, batch_size=args.batch_size,
                      seed=args.seed, num_fewshot=args.num_fewshot, protocol=args.mcq_protocol,
                      model=getattr(engine, "model", None), tokenizer=getattr(engine, "tokenizer", None))
    seconds = round(time.perf_counter() - t0, 3)
    out = {}
    for name, res in results.items():
        if res.skipped:
            raise RuntimeError(f"{name}: {res.skipped}")
        records = [{"benchmark": name, "problem_id": it.id, "prompt": it.prompt, "choices": list(it.choices),
                    "logliks": list(it.logliks), "extracted": it.predicted, "answer": it.target,
                    "correct": it.correct, "predicted_norm": it.predicted_norm, "correct_norm": it.correct_norm}
                   for it in res.items]
        acc = np.array([r["correct"] for r in records], dtype=float)
        metrics: dict[str, Any] = {"acc": float(acc.mean()), "acc_ci95": _ci(acc, args.seed)}
        if res.protocol == "cloze":
            norm = np.array([r["correct_norm"] for r in records], dtype=float)
            metrics.update({"acc_norm": float(norm.mean()), "acc_norm_ci95": _ci(norm, args.seed)})
        warning = letter_warning(name, [r["extracted"] for r in records])
        if warning:
            log.warning(warning)
        out[name] = ({"kind": "mcq", "protocol": res.protocol, "template": res.template, "n": len(records), "k": 1,
                      "metrics": metrics, "lm_eval_acc": res.acc, "warnings": [warning] if warning else [],
                      "seconds": seconds}, records)
        bar.update(1)
    return out


def evaluate_model(args: argparse.Namespace) -> dict[str, Any]:
    """Evaluate ``args.model`` on ``args.sets``; writes ``results.json`` and ``samples_<set>.jsonl`` to ``args.out``."""
    from tqdm import tqdm

    t0 = time.perf_counter()
    chosen: dict[str, list[Problem]] = {}
    data: dict[str, dict[str, Any]] = {}
    for name in args.sets:
        bench = get_benchmark(name)
        problems = load_benchmark(name, data_dir=args.data_dir)  # sha256 and count verified
        chosen[name] = subset(problems, args.limit, args.seed)
        data[name] = {"sha256": bench.sha256, "n_total": len(problems), "license": bench.license,
                      "problem_ids": [p.id for p in chosen[name]]}
    gen = {n: p for n, p in chosen.items() if get_benchmark(n).kind != "mcq"}
    mcq = {n: p for n, p in chosen.items() if n not in gen}
    jobs = {}
    for name, problems in gen.items():
        bench = get_benchmark(name)
        template = args.template if args.template in bench.templates else bench.default_template
        if args.template and args.template != template:
            log.warning("%s: template %s does not fit this set; using %s", name, args.template, template)
        jobs[name] = (problems, template)
    engine = None
    if gen or args.backend == "hf":
        from evaluation.generation import make_backend

        engine = make_backend(args.backend, args.model, seed=args.seed, device=args.device,
                              batch_size=args.batch_size)
    per_set: dict[str, tuple[dict, list[dict]]] = {}
    with tqdm(total=len(chosen), desc="creditbench eval", unit="set", file=sys.stderr) as bar:
        if jobs:
            per_set.update(_generated_sets(engine, jobs, args, bar))
        if mcq:
            per_set.update(_mcq_sets(engine if args.backend == "hf" else None, mcq, args, bar))
    out = Path(args.out)
    for name, (_, records) in per_set.items():
        write_jsonl_atomic(out / f"samples_{name}.jsonl", records)
    commit, dirty = git_state()
    config = {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()
              if key not in ("func", "out", "verbose")}
    results = {
        "results": {name: per_set[name][0] for name in args.sets},
        "config": config,
        "data": data,
        "grader_version": GRADER_VERSION,
        "versions": {**package_versions(), "python": sys.version.split()[0]},
        "git": {"commit": commit, "dirty": dirty},
        "samples": {name: f"samples_{name}.jsonl" for name in args.sets},
        "total_evaluation_time_seconds": round(time.perf_counter() - t0, 3),
    }
    write_json_atomic(out / "results.json", results)
    return results


def format_results(results: dict[str, Any]) -> str:
    """A short table, one line per set: the headline metric with its CI."""
    lines = [f"{'set':<16} {'protocol':<9} {'n':>5} {'k':>3}  metric"]
    for name, r in results["results"].items():
        m = r["metrics"]
        key = "acc_norm" if "acc_norm" in m else "acc" if "acc" in m else "avg_at_k"
        lo, hi = m[f"{key}_ci95"]
        lines.append(f"{name:<16} {r['protocol']:<9} {r['n']:>5} {r['k']:>3}  "
                     f"{key} {100 * m[key]:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]")
    lines += [f"warning: {w}" for r in results["results"].values() for w in r.get("warnings", [])]
    return "\n".join(lines)


def build_parser(prog: str = "creditbench eval") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0],
                                 usage=f"{prog} --model DIR --sets A,B[,...] [--limit N] [options]",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--model", required=True, help="HF model folder (or hub id where the hub is reachable)")
    ap.add_argument("--sets", required=True, type=lambda s: [x for x in s.split(",") if x],
                    help=f"comma list of registered sets ({len(BENCHMARKS)}: creditbench benchmarks list)")
    ap.add_argument("--limit", type=int, default=None, help="problems per set (seeded, stratified subset)")
    ap.add_argument("--k", type=int, default=1, help="samples per problem (math, code)")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--template", default=None, help="prompt template (default: each set's own)")
    ap.add_argument("--mcq-protocol", choices=("cloze", "letters"), default="cloze",
                    help="multiple choice: option text (acc, acc_norm) or option letters")
    ap.add_argument("--num-fewshot", type=int, default=0, help="multiple choice: few-shot examples")
    ap.add_argument("--backend", choices=("hf", "vllm"), default="hf")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0, help="sampling and subset seed")
    ap.add_argument("--grader-timeout-s", type=float, default=5.0)
    ap.add_argument("--data-dir", type=Path, default=None, help="benchmark files (default data/benchmarks)")
    ap.add_argument("--out", type=Path, default=Path("results/eval"), help="writes results.json, samples_*.jsonl")
    ap.add_argument("-v", "--verbose", action="store_true")
    return ap


def main(argv: Sequence[str] | None = None, prog: str = "creditbench eval") -> int:
    ap = build_parser(prog)
    args = ap.parse_args(argv)
    unknown = [s for s in args.sets if s not in BENCHMARKS or BENCHMARKS[s].generated]
    if unknown:
        ap.error(f"unknown sets {unknown}; see `creditbench benchmarks list`")
    if args.k < 1 or (args.limit is not None and args.limit < 1):
        ap.error("--k and --limit must be at least 1")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    results = evaluate_model(args)
    print(format_results(results))
    print(f"wrote {Path(args.out) / 'results.json'} in {results['total_evaluation_time_seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(prog="python -m evaluation.harness"))
