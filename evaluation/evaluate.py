"""One checkpoint on one evaluation suite (config ``eval.suites.<suite>``), as two jobs of the workflow, both
thin CLIs over the one driver (``evaluation.driver``, which ``creditbench eval`` runs in one process):

* ``generate`` (GPU-bound): load the model once; sample every math and code set of the suite and score the
  multiple-choice sets by log-likelihood through lm-eval (``driver.generate_sets``). Writes
  ``<set>.raw.jsonl`` (one line per sample; for multiple choice the chosen option and the log-likelihoods)
  and ``<set>.gen.json`` (run ids, subset, template, sampling, engine, seconds).
* ``score`` (CPU-bound): grade the raw samples (``driver.score_set``: answer checker; EvalPlus sandbox for
  code; the chosen option vs the gold one, cross-checked with lm-eval's verdict) into ``<set>.summary.json``
  (avg@k with a 95 % bootstrap CI, pass@k, maj@k, drop counts, engine identity) + ``<set>.samples.jsonl``,
  the schema every evaluation path writes.

Every summary records the grader version, data sha256, template, k, the subset (``limit``, ``subset_seed``,
``n_total``, the problem ids) and n. The sampling seed is ``--seed`` (the run's; the SFT start's: the suite's
first seed). ``--data`` / ``--data-manifest``: the generated held-out set (``synthetic``) and its manifest.

    python -m evaluation.evaluate generate --config C --suite real --model-dir M --method dapo --seed 1 \\
        --step 30 --out-dir OUT/eval/real/dapo/seed1/step30 --sets aime24 mbpp_plus arc_challenge
    python -m evaluation.evaluate score --config C --suite real --out-dir OUT/eval/real/dapo/seed1/step30 \\
        --sets aime24 mbpp_plus arc_challenge
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common.config import Config, load_config
from common.io import read_jsonl, write_json_atomic, write_jsonl_atomic
from evaluation import driver
from evaluation.benchmarks import BenchmarkError, Problem, get_benchmark


def load_subset(cfg: Config, args: argparse.Namespace, name: str) -> tuple[list[Problem], dict[str, Any]]:
    """The set's evaluated problems (file verified against the registry or, for the generated held-out set,
    its manifest's sha256 and count) and their subset record."""
    suite, path, sha, count = cfg.eval.suites[args.suite], None, None, None
    if get_benchmark(name).generated:
        if not (args.data and args.data_manifest):
            raise BenchmarkError(f"{name}: a generated set needs --data and --data-manifest")
        files = json.loads(Path(args.data_manifest).read_text())["files"]
        entry = next(f for f in files.values() if Path(f["path"]).resolve() == Path(args.data).resolve())
        path, sha, count = args.data, entry["sha256"], entry["count"]
    return driver.load_subset(name, suite.limit_for(name), suite.subset_seed, data_dir=cfg.data.benchmarks_dir,
                              gpqa_dir=cfg.data.gpqa_dir, path=path, sha256=sha, count=count)


def cmd_generate(cfg: Config, args: argparse.Namespace) -> None:
    suite = cfg.eval.suites[args.suite]
    sampling = driver.Sampling.from_suite(suite, args.seed)
    sampling.check(args.sets, driver.config_key(f"eval/suites/{args.suite}"))
    subsets = {name: load_subset(cfg, args, name) for name in args.sets}
    produced = driver.generate_sets(args.model_dir, {n: p for n, (p, _) in subsets.items()}, sampling,
                                    backend=cfg.eval.backend, device=cfg.runtime.device,
                                    per_problem=suite.per_problem_seeds)
    out = Path(args.out_dir)
    ids = driver.run_ids(args.model_dir, args.method, args.seed, args.step)
    for name in args.sets:
        raw, meta = produced[name]
        problems, subset = subsets[name]
        write_jsonl_atomic(out / f"{name}.raw.jsonl", raw)
        write_json_atomic(out / f"{name}.gen.json", {"benchmark": name, "suite": args.suite, **ids, **subset, **meta})
        print(f"{name}: {len(raw)} samples of {len(problems)} problems in {meta['generation_seconds']:.1f} s")


def cmd_score(cfg: Config, args: argparse.Namespace) -> None:
    from evaluation.scoring import drops_text

    out = Path(args.out_dir)
    for name in args.sets:
        meta = json.loads((out / f"{name}.gen.json").read_text())
        problems, subset = load_subset(cfg, args, name)
        if subset["problem_ids"] != meta["problem_ids"] or subset["data_sha256"] != meta["data_sha256"]:
            raise BenchmarkError(f"{name}: the generated subset (or data sha256) differs from this config's")
        raw = read_jsonl(out / f"{name}.raw.jsonl")
        records, summary = driver.score_set(name, problems, raw, meta, seed=meta["seed"],
                                            grader_timeout_s=cfg.eval.grader_timeout_s,
                                            grader_workers=args.grader_workers)
        write_jsonl_atomic(out / f"{name}.samples.jsonl", records)
        write_json_atomic(out / f"{name}.summary.json", summary)
        lo, hi = summary["ci95"]
        print(f"{name} {meta['method']} seed{meta['seed']} step{meta['step']}: avg@{summary['k']} "
              f"{summary['avg_at_k']:.3f} [{lo:.3f}, {hi:.3f}] ({summary['n_problems']} problems; "
              f"{drops_text(summary['drops'])})")


COMMANDS = {"generate": cmd_generate, "score": cmd_score}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.evaluate", description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=sorted(COMMANDS))
    ap.add_argument("--config", required=True)
    ap.add_argument("--suite", required=True, help="a suite of config eval.suites (curve, real, ...)")
    ap.add_argument("--out-dir", required=True, help="OUT/eval/<suite>/<method>/seed<s>/step<n>")
    ap.add_argument("--sets", nargs="+", required=True)
    ap.add_argument("--data", help="file of the generated held-out set (synthetic)")
    ap.add_argument("--data-manifest", help="its manifest JSON (sha256 + count checked)")
    ap.add_argument("--model-dir", help="generate: the checkpoint")
    ap.add_argument("--method", help="generate")
    ap.add_argument("--seed", type=int, help="generate: run seed (also the sampling seed)")
    ap.add_argument("--step", type=int, help="generate")
    ap.add_argument("--grader-workers", type=int, default=1, help="score: parallel answer-checker processes")
    args = ap.parse_args(argv)
    if args.command != "score" and None in (args.model_dir, args.method, args.seed, args.step):
        ap.error(f"{args.command} needs --model-dir, --method, --seed and --step")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cfg = load_config(args.config)
    if args.suite not in cfg.eval.suites:
        ap.error(f"--suite {args.suite}: not in config eval.suites ({', '.join(cfg.eval.suites)})")
    if args.command != "score":
        from common.runtime import setup_runtime

        setup_runtime(cfg.runtime)
    COMMANDS[args.command](cfg, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
