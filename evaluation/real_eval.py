"""Real benchmarks on one checkpoint (config ``real_eval``), as two jobs of the workflow, both thin CLIs over
the one driver (``evaluation.driver``, which ``creditbench eval`` runs in one process):

* ``generate`` (GPU-bound): load the model once; sample every math and code set and score the
  multiple-choice sets by log-likelihood through lm-eval (``driver.generate_sets``). Writes
  ``<set>.raw.jsonl`` (one line per sample; for multiple choice the chosen option and the log-likelihoods)
  and ``<set>.gen.json`` (run ids, subset, template, sampling, seconds).
* ``score`` (CPU-bound): grade the raw samples (``driver.score_set``: answer checker; EvalPlus sandbox for
  code; the chosen option vs the gold one, cross-checked with lm-eval's verdict) into ``<set>.summary.json``
  + ``<set>.samples.jsonl``, the schema every evaluation path writes.

Every summary records the grader version, data sha256, template, k, the subset (``limit``, ``subset_seed``,
``n_total``, the problem ids) and n; the subset is ``limit`` problems drawn with ``subset_seed`` by the one
subset rule (``driver.select``). This module also plans the workflow's real-set jobs (which checkpoints,
which sets, their files checked at DAG time).

    python -m evaluation.real_eval generate --config C --model-dir M --method dapo --seed 1 --step 30 \
        --out-dir OUT/real_eval/dapo/seed1/step30 --sets aime24 mbpp_plus arc_challenge
    python -m evaluation.real_eval score --config C --out-dir OUT/real_eval/dapo/seed1/step30 \
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

from common.config import Config, ConfigError, load_config
from common.io import read_jsonl, sha256_file, write_json_atomic, write_jsonl_atomic
from evaluation import driver
from evaluation.benchmarks import BenchmarkError, Problem, benchmark_file, expand_sets, get_benchmark
from evaluation.driver import Sampling
from evaluation.eval_checks import UsageError

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------- the plan

def available_sets(cfg: Config, *, explicit: bool = False) -> tuple[str, ...]:
    """``real_eval.sets`` without external sets (GPQA) whose file is not on this machine. Left out with a
    warning when the list is the schema default (``explicit`` False); a set the config names explicitly
    fails instead (:class:`ConfigError`): a table without it would silently answer another question.
    ``limit_per_set`` keys must be among the sets (a suite's members count)."""
    sets = expand_sets(cfg.real_eval.sets)  # suite names (evaluation.benchmarks.SUITES) as their sets
    if extra := [name for name in cfg.real_eval.limit_per_set if name not in sets]:
        raise ConfigError(f"config key 'real_eval/limit_per_set': {extra} not in real_eval/sets {list(sets)}")
    out = []
    for name in sets:
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
    train_data.dataset) is registered and its file is present with the registry's sha256; the sampling knobs
    of ``eval`` and ``real_eval`` pass :meth:`evaluation.driver.Sampling.check`."""
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
    for section, sets, knobs in (("eval", cfg.eval.benchmarks, Sampling.from_eval(cfg.eval, 0)),
                                 ("real_eval", real_sets, sampling(cfg, 0))):
        try:
            knobs.check(sets, driver.config_key(section))
        except UsageError as err:
            raise ConfigError(str(err)) from None


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


# ----------------------------------------------------------------------------------------- commands

def sampling(cfg: Config, seed: int) -> Sampling:
    return Sampling.from_real_eval(cfg.real_eval, seed)


def load_subset(cfg: Config, name: str) -> tuple[list[Problem], dict[str, Any]]:
    """The set's evaluated problems (file verified against the registry) and their subset record."""
    return driver.load_subset(name, cfg.real_eval.limit_for(name), cfg.real_eval.subset_seed,
                              data_dir=cfg.data.benchmarks_dir, gpqa_dir=cfg.data.gpqa_dir)


def cmd_generate(cfg: Config, args: argparse.Namespace) -> None:
    subsets = {name: load_subset(cfg, name) for name in args.sets}
    produced = driver.generate_sets(args.model_dir, {n: p for n, (p, _) in subsets.items()}, sampling(cfg, args.seed),
                                    backend=cfg.eval.backend, device=cfg.runtime.device, per_problem=True)
    out = Path(args.out_dir)
    ids = driver.run_ids(args.model_dir, args.method, args.seed, args.step)
    for name in args.sets:
        raw, meta = produced[name]
        problems, subset = subsets[name]
        write_jsonl_atomic(out / f"{name}.raw.jsonl", raw)
        write_json_atomic(out / f"{name}.gen.json", {"benchmark": name, **ids, **subset, **meta})
        print(f"{name}: {len(raw)} samples of {len(problems)} problems in {meta['generation_seconds']:.1f} s")


def cmd_score(cfg: Config, args: argparse.Namespace) -> None:
    from evaluation.scoring import drops_text

    out = Path(args.out_dir)
    for name in args.sets:
        meta = json.loads((out / f"{name}.gen.json").read_text())
        problems, subset = load_subset(cfg, name)
        if subset["problem_ids"] != meta["problem_ids"] or subset["data_sha256"] != meta["data_sha256"]:
            raise BenchmarkError(f"{name}: the generated subset (or data sha256) differs from this config's")
        raw = read_jsonl(out / f"{name}.raw.jsonl")
        records, summary = driver.score_set(name, problems, raw, meta, seed=meta["seed"],
                                            grader_timeout_s=cfg.eval.grader_timeout_s)
        write_jsonl_atomic(out / f"{name}.samples.jsonl", records)
        write_json_atomic(out / f"{name}.summary.json", summary)
        print(f"{name} {meta['method']} seed{meta['seed']} step{meta['step']}: avg@{summary['k']} "
              f"{summary['avg_at_k']:.3f} ({summary['n_problems']} problems; {drops_text(summary['drops'])})")


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
