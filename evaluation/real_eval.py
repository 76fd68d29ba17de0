"""Real benchmarks on one checkpoint (config ``real_eval``), as two jobs of the workflow:

* ``generate`` (GPU-bound): load the model once; sample every math and code set (``evaluation.generation``)
  and score the multiple-choice sets by log-likelihood through lm-eval (``evaluation.mcq``, with the
  loaded model; ``real_eval.mcq_protocol``: cloze, scored by acc_norm, or letters, scored by acc).
  Writes ``<set>.raw.jsonl`` (one line per sample; for multiple choice the chosen letter and the
  log-likelihoods) and ``<set>.gen.json`` (template, sampling,
  subset, data sha256, seconds).
* ``score`` (CPU-bound): grade the raw samples (answer checker; EvalPlus sandbox for code; the chosen
  letter vs the gold one for multiple choice, cross-checked with lm-eval's own verdict) into
  ``<set>.summary.json`` + ``<set>.samples.jsonl``, the files ``evaluation.evaluate`` writes.

Every summary records the grader version, data sha256, template, k, the subset (``limit``,
``subset_seed``, ``n_total``, the problem ids) and n. The subset is fixed: the first N problems in file
order, or N drawn with ``subset_seed`` by the one subset rule (stratified by subject / level, file order).

    python -m evaluation.real_eval generate --config C --model-dir M --method dapo --seed 1 --step 30 \
        --out-dir OUT/real_eval/dapo/seed1/step30 --sets aime24 mbpp_plus arc_challenge
    python -m evaluation.real_eval score --config C --out-dir OUT/real_eval/dapo/seed1/step30 \
        --sets aime24 mbpp_plus arc_challenge
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common.config import Config, ConfigError, load_config
from common.io import read_jsonl, sha256_file, write_json_atomic, write_jsonl_atomic
from evaluation.benchmarks import (
    BenchmarkError,
    Problem,
    benchmark_file,
    get_benchmark,
    load_benchmark,
    stratified_subset,
)

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------- the plan

def available_sets(cfg: Config, *, explicit: bool = False) -> tuple[str, ...]:
    """``real_eval.sets`` without external sets (GPQA) whose file is not on this machine. Left out with a
    warning when the list is the schema default (``explicit`` False); a set the config names explicitly
    fails instead (:class:`ConfigError`): a table without it would silently answer another question."""
    out = []
    for name in cfg.real_eval.sets:
        bench = get_benchmark(name)
        path = benchmark_file(bench, data_dir=cfg.data.benchmarks_dir, gpqa_dir=cfg.data.gpqa_dir)
        if bench.external and not path.is_file():
            if explicit:
                raise ConfigError(f"config key 'real_eval/sets': {name} file {path} not found; set "
                                  f"CREDITBENCH_GPQA_DIR or data.gpqa_dir to its folder, or drop {name}")
            log.warning("real_eval: %s left out: %s not found (data.gpqa_dir)", name, path)
            continue
        out.append(name)
    return tuple(out)


def check_data_files(cfg: Config, real_sets: Sequence[str]) -> None:
    """At DAG time, before any training: every benchmark the config uses (eval.benchmarks, the real sets,
    train_data.dataset) is registered and its file is present with the registry's sha256."""
    used = [("eval/benchmarks", n) for n in cfg.eval.benchmarks] + [("real_eval/sets", n) for n in real_sets]
    if cfg.train_data.dataset:
        used.append(("train_data/dataset", cfg.train_data.dataset))
    for key, name in used:
        try:
            bench = get_benchmark(name)
        except KeyError as err:
            raise ConfigError(f"config key '{key}': {err.args[0]}") from None
        if bench.generated:
            continue
        path = benchmark_file(bench, data_dir=cfg.data.benchmarks_dir, gpqa_dir=cfg.data.gpqa_dir)
        if not path.is_file():
            raise ConfigError(f"config key '{key}': {name} file {path} not found (data.benchmarks_dir / "
                              "data.gpqa_dir / CREDITBENCH_GPQA_DIR)")
        if bench.sha256 is not None and (actual := sha256_file(path)) != bench.sha256:
            raise ConfigError(f"config key '{key}': {path} has sha256 {actual[:12]}..., the registry pins "
                              f"{bench.sha256[:12]}...; restore the file (git checkout / re-download)")


def split_sets(sets: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(generated and graded: math + code, lm-eval: multiple choice)."""
    mcq = tuple(s for s in sets if get_benchmark(s).kind == "mcq")
    return tuple(s for s in sets if s not in mcq), mcq


def checkpoints(cfg: Config) -> list[tuple[str, int, int]]:
    """(method, seed, step) evaluated: ``sft`` at step 0 and/or each method's last RL step."""
    re_ = cfg.real_eval
    seeds = re_.seeds if re_.seeds is not None else cfg.seeds[:1]
    methods = re_.methods if re_.methods is not None else cfg.methods
    out = []
    for seed in seeds:
        if "sft" in re_.checkpoints:
            out.append(("sft", seed, 0))
        if "final" in re_.checkpoints:
            out += [(m, seed, cfg.rl.steps) for m in methods]
    return out


# ----------------------------------------------------------------------------------------- subsets

def select(problems: list[Problem], limit: int | None, seed: int | None) -> list[Problem]:
    """The first ``limit`` problems (smoke runs), or ``limit`` drawn with ``seed`` by the one subset rule
    (``evaluation.benchmarks.stratified_subset``: stratified by subject / level, file order); all if None."""
    if limit is None or limit >= len(problems):
        return list(problems)
    if seed is None:
        return problems[:limit]
    return stratified_subset(problems, limit, seed)


def load_subset(cfg: Config, name: str) -> tuple[list[Problem], dict[str, Any]]:
    """The verified set's evaluated problems and the subset record that goes into every summary
    (``load_benchmark`` has checked the file against the registry's sha256)."""
    problems = load_benchmark(name, data_dir=cfg.data.benchmarks_dir, gpqa_dir=cfg.data.gpqa_dir)
    limit = cfg.real_eval.limit_for(name)
    chosen = select(problems, limit, cfg.real_eval.subset_seed)
    return chosen, {"limit": limit, "subset_seed": cfg.real_eval.subset_seed if limit else None,
                    "n_total": len(problems), "data_sha256": get_benchmark(name).sha256}


def template_for(cfg: Config, name: str) -> str:
    return cfg.real_eval.templates[get_benchmark(name).kind]


def run_ids(args: argparse.Namespace) -> dict[str, Any]:
    """Run identifiers recorded in every summary (the checkpoint's manifest id when it has one)."""
    manifest = Path(args.model_dir) / "manifest.json"
    return {"method": args.method, "seed": args.seed, "step": args.step, "model_dir": args.model_dir,
            "manifest_id": json.loads(manifest.read_text())["manifest_id"] if manifest.exists() else None}


# ----------------------------------------------------------------------------------------- commands

def generate_samples(cfg: Config, args: argparse.Namespace, engine: Any, subsets: dict) -> dict[str, tuple]:
    """Math and code sets: name -> (raw samples, meta)."""
    from evaluation.evaluate import generate, sampling_dict
    from evaluation.generation import SamplingParams

    re_ = cfg.real_eval
    params = SamplingParams(n=re_.k, temperature=re_.temperature, top_p=re_.top_p,
                            max_new_tokens=re_.max_new_tokens, seed=args.seed)
    jobs = {name: (problems, template_for(cfg, name)) for name, (problems, _) in subsets.items()}
    out = {}
    for name, (samples, seconds) in generate(engine, jobs, params).items():
        out[name] = (samples, {"template": jobs[name][1], "sampling": sampling_dict(params, jobs[name][1]),
                               "backend": cfg.eval.backend, "generation_seconds": round(seconds, 3)})
    return out


def loglikelihood_samples(cfg: Config, args: argparse.Namespace, engine: Any,
                          subsets: dict) -> dict[str, tuple]:
    """Multiple-choice sets through lm-eval (the loaded HF model, else ``--model-dir``): name -> (raw, meta)."""
    import lm_eval

    from evaluation.mcq import run_ood

    t0 = time.perf_counter()
    results = run_ood(args.model_dir, tasks=list(subsets), problems={n: p for n, (p, _) in subsets.items()},
                      device=cfg.runtime.device, batch_size=cfg.real_eval.batch_size, seed=args.seed,
                      num_fewshot=cfg.real_eval.num_fewshot, model=getattr(engine, "model", None),
                      tokenizer=getattr(engine, "tokenizer", None), protocol=cfg.real_eval.mcq_protocol)
    seconds = round(time.perf_counter() - t0, 3)  # one lm-eval call for all of them
    out = {}
    for name, res in results.items():
        if res.skipped:
            raise BenchmarkError(f"{name}: {res.skipped}")
        # cloze is scored as lm-eval's standard tasks report it: acc_norm (per-character log-likelihood)
        norm = res.protocol == "cloze"
        raw = [{"benchmark": name, "problem_id": item.id, "sample": 0, **prompt_record(name, item.prompt),
                "response": item.predicted_norm if norm else item.predicted, "logliks": list(item.logliks),
                "lm_eval_correct": item.correct_norm if norm else item.correct} for item in res.items]
        metric = "acc_norm" if norm else "acc"
        sampling = {"n": 1, "loglikelihood": True, "num_fewshot": cfg.real_eval.num_fewshot}
        out[name] = (raw, {"template": res.template, "grader_version": f"lm-eval/{lm_eval.__version__} {metric}",
                           "sampling": sampling, "backend": f"lm-eval/{lm_eval.__version__} hf",
                           "generation_seconds": seconds, "lm_eval_acc": res.acc_norm if norm else res.acc,
                           "mcq_protocol": res.protocol, "mcq_metric": metric})
    return out


def prompt_record(name: str, prompt: str) -> dict[str, str]:
    """The prompt, or only its sha256 for an external set (GPQA asks that its items not be published)."""
    if get_benchmark(name).external:
        return {"prompt_sha256": hashlib.sha256(prompt.encode()).hexdigest()}
    return {"prompt": prompt}


def cmd_generate(cfg: Config, args: argparse.Namespace) -> None:
    from evaluation.generation import make_backend

    subsets = {name: load_subset(cfg, name) for name in args.sets}
    gen_sets, mcq_sets = split_sets(args.sets)
    engine = make_backend(cfg.eval.backend, args.model_dir, seed=args.seed, device=cfg.runtime.device,
                          batch_size=cfg.real_eval.batch_size)
    produced = generate_samples(cfg, args, engine, {n: subsets[n] for n in gen_sets}) if gen_sets else {}
    if mcq_sets:
        produced.update(loglikelihood_samples(cfg, args, engine, {n: subsets[n] for n in mcq_sets}))
    out = Path(args.out_dir)
    for name in args.sets:
        raw, meta = produced[name]
        problems, subset = subsets[name]
        write_jsonl_atomic(out / f"{name}.raw.jsonl", raw)
        write_json_atomic(out / f"{name}.gen.json", {"benchmark": name, **run_ids(args), **subset, **meta,
                                                     "problem_ids": [p.id for p in problems]})
        print(f"{name}: {len(raw)} samples of {len(problems)} problems in {meta['generation_seconds']:.1f} s")


def cmd_score(cfg: Config, args: argparse.Namespace) -> None:
    from evaluation.evaluate import score

    out = Path(args.out_dir)
    for name in args.sets:
        meta = json.loads((out / f"{name}.gen.json").read_text())
        problems, subset = load_subset(cfg, name)
        if [p.id for p in problems] != meta["problem_ids"] or subset["data_sha256"] != meta["data_sha256"]:
            raise BenchmarkError(f"{name}: the generated subset (or data sha256) differs from this config's")
        raw = read_jsonl(out / f"{name}.raw.jsonl")
        loglik = bool(meta["sampling"].get("loglikelihood"))
        t0 = time.perf_counter()
        records, summary = score(name, problems, raw, k=meta["sampling"]["n"], template=meta["template"],
                                 seed=meta["seed"], grader_timeout_s=cfg.eval.grader_timeout_s,
                                 loglikelihood=loglik)
        if loglik:
            from evaluation.mcq import letter_warning

            check_lm_eval(name, records)
            warning = letter_warning(name, [r["response"] for r in records])  # the chosen option letters
            summary["warnings"] = [warning] if warning else []
            if warning:
                log.warning(warning)
        # run ids, subset, sampling from the generate job; lm-eval's grader version for multiple choice
        summary.update({k: v for k, v in meta.items() if k not in summary or k == "grader_version"})
        summary["scoring_seconds"] = round(time.perf_counter() - t0, 3)
        write_jsonl_atomic(out / f"{name}.samples.jsonl", records)
        write_json_atomic(out / f"{name}.summary.json", summary)
        print(f"{name} {meta['method']} seed{meta['seed']} step{meta['step']}: avg@{summary['k']} "
              f"{summary['avg_at_k']:.3f} ({summary['n_problems']} problems)")


def check_lm_eval(name: str, records: list[dict]) -> None:
    """Our letter match must agree with lm-eval's own verdict on every item."""
    bad = [r["problem_id"] for r in records if r["correct"] != r["lm_eval_correct"]]
    if bad:
        raise ValueError(f"{name}: letter match and lm-eval disagree on {bad[:5]}")


COMMANDS = {"generate": cmd_generate, "score": cmd_score}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.real_eval", description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=sorted(COMMANDS))
    ap.add_argument("--config", required=True)
    ap.add_argument("--out-dir", required=True, help="OUT/real_eval/<method>/seed<s>/step<n>")
    ap.add_argument("--sets", nargs="+", required=True)
    ap.add_argument("--model-dir", help="generate: the checkpoint")
    ap.add_argument("--method", help="generate")
    ap.add_argument("--seed", type=int, help="generate: run seed (also the sampling seed)")
    ap.add_argument("--step", type=int, help="generate")
    args = ap.parse_args(argv)
    if args.command != "score" and None in (args.model_dir, args.method, args.seed, args.step):
        ap.error(f"{args.command} needs --model-dir, --method, --seed and --step")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # score: the workflow's resolved config is already validated; the preset lookup would import torch
    cfg = load_config(args.config)
    if args.command != "score":
        from common.runtime import setup_runtime

        setup_runtime(cfg.runtime)
    COMMANDS[args.command](cfg, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
