"""Rule ``evaluate``: one checkpoint on one set of ``eval.benchmarks`` (the synthetic held-out set, or a
registered one), generated and graded in one job through the one driver (``evaluation.driver``); writes
``PREFIX.samples.jsonl`` and ``PREFIX.summary.json`` (avg@k with a 95 % bootstrap CI, pass@k, maj@k, the drop
counts and the engine's identity).

    python -m evaluation.evaluate --config config/config.yaml --model-dir M --benchmark synthetic \\
        --data heldout.jsonl --method dapo --seed 1 --step 60 --out-prefix OUT/eval/dapo/seed1/step60/synthetic
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from common.config import load_config
from common.io import write_json_atomic, write_jsonl_atomic


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="evaluate a checkpoint on one benchmark (avg@k, pass@k, maj@k)")
    parser.add_argument("--config", required=True)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--data", help="file for generated sets (synthetic); its manifest gives the sha256")
    parser.add_argument("--data-manifest", help="manifest JSON of the generated set (sha256 + count checked)")
    parser.add_argument("--method", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--step", type=int, required=True)
    parser.add_argument("--out-prefix", required=True, help="writes PREFIX.samples.jsonl and PREFIX.summary.json")
    parser.add_argument("--grader-workers", type=int, default=1)
    args = parser.parse_args(argv)
    from common.runtime import setup_runtime
    from evaluation import driver
    from evaluation.scoring import drops_text

    cfg = load_config(args.config)
    setup_runtime(cfg.runtime)
    ev = cfg.eval
    sampling = driver.Sampling.from_eval(ev, args.seed)
    sampling.check([args.benchmark], driver.config_key("eval"))
    sha, count = None, None
    if args.data_manifest:
        files = json.loads(Path(args.data_manifest).read_text())["files"]
        entry = next(f for f in files.values() if Path(f["path"]).resolve() == Path(args.data).resolve())
        sha, count = entry["sha256"], entry["count"]
    problems, subset = driver.load_subset(args.benchmark, ev.limit, ev.subset_seed, data_dir=cfg.data.benchmarks_dir,
                                          gpqa_dir=cfg.data.gpqa_dir, path=args.data, sha256=sha, count=count)
    (records, summary), = driver.evaluate_sets(
        args.model_dir, {args.benchmark: problems}, sampling, backend=ev.backend, device=cfg.runtime.device,
        grader_timeout_s=ev.grader_timeout_s, grader_workers=args.grader_workers).values()
    summary.update({**driver.run_ids(args.model_dir, args.method, args.seed, args.step), **subset})
    write_jsonl_atomic(args.out_prefix + ".samples.jsonl", records)
    write_json_atomic(args.out_prefix + ".summary.json", summary)
    lo, hi = summary["ci95"]
    print(f"{args.benchmark} {args.method} seed{args.seed} step{args.step}: avg@{ev.k} {summary['avg_at_k']:.3f} "
          f"[{lo:.3f}, {hi:.3f}] pass@{ev.k} {summary['pass_at_k']:.3f} ({summary['n_problems']} problems; "
          f"{drops_text(summary['drops'])})")


if __name__ == "__main__":
    main()
