"""Training prompts for real recipes: the DAG's ``train.jsonl`` (``id, prompt, answer``; reasoning-gym rows also
``task, entry``) from ``train_data``.

    python -m training.prepare_data --config CFG --train T.jsonl --heldout H.jsonl --manifest M.json

Same outputs as ``python -m training.data`` (the synthetic task), so rule ``make_data`` only swaps
the module when ``train_data.dataset`` or ``train_data.source`` is set:

- ``dataset``: a registered set of ``evaluation.benchmarks`` (sha256 and count verified by
  ``load_benchmark``), e.g. ``dapo_math_17k``;
- ``dataset: reasoning_gym``: seeded draws of the ``train_data.tasks`` mixture (``evaluation.sets.reasoning_gym``),
  disjoint from every registered reasoning-gym held-out set; the manifest records the generator version;
- ``source`` (when ``dataset`` is null): an HF hub dataset, resolved at run time with
  ``datasets.load_dataset(source, subset, split=split)``; ``question_field`` / ``answer_field`` name its
  columns, and a GSM8K-style answer keeps the text after the last ``####`` (commas dropped), as the
  registry's GSM8K loader does. The manifest records the dataset fingerprint instead of a sha256.

Prompts are rendered with ``train_data.template``: ``plain`` is the synthetic task's
``Question: ...\\nAnswer:`` (``training.data.PROMPT_TEMPLATE``); any other name goes through
``evaluation.templates.render`` with the model's tokenizer (``model.source``), the same prompts the
evaluation uses. The held-out file is written empty (real recipes evaluate registered benchmarks).
``max_solution_steps`` keeps the problems a small model can sometimes solve (``real_cpu``: GSM8K's one-
and two-step problems), so that some groups have a reward variance to learn from.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable, Sequence

from common.config import Config, TrainDataConfig, load_config
from common.io import sha256_file, write_json_atomic, write_jsonl_atomic

PLAIN = "plain"
TASK_KEYS = ("task", "entry")
"""Kept in ``train.jsonl`` for reasoning-gym rows: the generator's task and metadata (``entry``: e.g. chain_sum's
``expression``), from which ``training.studies.real_labels`` labels token importance exactly."""


def gsm8k_final(answer: str) -> str:
    """The text after the last ``####`` (commas dropped), or the answer unchanged."""
    _, sep, final = answer.rpartition("####")
    return final.strip().replace(",", "") if sep else answer.strip()


def load_problems(td: TrainDataConfig, *, data_dir: str | None = None) -> tuple[list[Any], dict[str, Any]]:
    """``evaluation.benchmarks.Problem`` rows and their provenance (registry sha256 or hub fingerprint)."""
    from evaluation.benchmarks import Problem, get_benchmark, load_benchmark

    if td.dataset == "reasoning_gym":
        return reasoning_gym_problems(td)
    if td.dataset is not None:
        bench = get_benchmark(td.dataset)
        problems = load_benchmark(td.dataset, data_dir=data_dir)
        prov = {"dataset": td.dataset, "sha256": bench.sha256, "upstream": bench.upstream, "license": bench.license}
    elif td.source is not None:
        from datasets import load_dataset

        ds = load_dataset(td.source, td.subset, split=td.split)
        problems = [Problem(id=f"{td.source}:{td.split}:{i}", question=str(r[td.question_field]),
                            answer=gsm8k_final(str(r[td.answer_field]))) for i, r in enumerate(ds)]
        prov = {"source": td.source, "subset": td.subset, "split": td.split,
                "fingerprint": getattr(ds, "_fingerprint", None)}
    else:
        raise ValueError("train_data: set dataset (registered) or source (hub id); both null = the synthetic task "
                         "(python -m training.data)")
    if td.max_solution_steps is not None:  # GSM8K's calculator annotations count the solution's steps
        problems = [p for p in problems if solution_steps(p) <= td.max_solution_steps]
        if not problems:
            raise ValueError(f"train_data.max_solution_steps {td.max_solution_steps}: no problem left (the set's "
                             "rows need a reference solution with <<...>> steps, as GSM8K's)")
    if td.limit:
        problems = problems[: td.limit]
    return problems, prov


def reasoning_gym_problems(td: TrainDataConfig) -> tuple[list[Any], dict[str, Any]]:
    """``train_data.size`` draws of the ``train_data.tasks`` mixture (``evaluation.sets.reasoning_gym``), none of them a
    question of a registered held-out set. The RL reward is the answer checker, so every gold must be a
    number; text tasks are graded by their verifier in evaluation only."""
    from evaluation.benchmarks import Problem
    from evaluation.sets.reasoning_gym import RG_SETS, RG_VERSION, is_number, training_rows

    rows = training_rows(td.tasks, td.size, td.seed)
    if text := sorted({r["task"] for r in rows if not is_number(r["answer"])}):
        raise ValueError(f"config key 'train_data/tasks': {text} have text answers; the RL reward is the answer "
                         "checker (numbers): train on numeric tasks, evaluate text tasks (their verifier grades them)")
    problems = [Problem(id=r["id"], question=r["question"], answer=r["answer"],
                        meta={"task": r["task"], "entry": r["entry"]}) for r in rows]
    prov = {"dataset": "reasoning_gym", "reasoning_gym": RG_VERSION, "heldout_excluded": sorted(RG_SETS),
            "distinct_questions": len({r["question"] for r in rows})}
    return (problems[: td.limit] if td.limit else problems), prov


def solution_steps(problem: Any) -> int:
    """Calculator steps (``<<expr=result>>``) of a GSM8K reference solution; 0 when it has none."""
    return str(problem.meta.get("solution", "")).count("<<")


def prompt_renderer(cfg: Config) -> Callable[[Any], str]:
    """Problem -> prompt text for ``train_data.template``."""
    template = cfg.train_data.template
    if template == PLAIN:
        from training.data import PROMPT_TEMPLATE

        return lambda p: PROMPT_TEMPLATE.format(question=p.question)
    from transformers import AutoTokenizer

    from evaluation.templates import render  # the evaluation's prompt templates

    tokenizer = AutoTokenizer.from_pretrained(cfg.model.source) if cfg.model.source else None
    return lambda p: render(template, p, tokenizer)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="training prompts (id, prompt, answer) from train_data")
    ap.add_argument("--config", required=True)
    ap.add_argument("--train", required=True)
    ap.add_argument("--heldout", required=True, help="written empty")
    ap.add_argument("--manifest", required=True)
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    problems, prov = load_problems(cfg.train_data, data_dir=cfg.data.benchmarks_dir)
    render = prompt_renderer(cfg)
    rows = [{"id": p.id, "prompt": render(p), "answer": p.answer, **{k: p.meta[k] for k in TASK_KEYS if k in p.meta}}
            for p in problems]
    write_jsonl_atomic(args.train, rows)
    write_jsonl_atomic(args.heldout, [])
    write_json_atomic(args.manifest, {
        "train_data": {**cfg.train_data.__dict__, **prov},
        "files": {"train": {"path": args.train, "count": len(rows), "sha256": sha256_file(args.train)},
                  "heldout": {"path": args.heldout, "count": 0, "sha256": sha256_file(args.heldout)}},
    })
    print(f"wrote {len(rows)} training prompts from {prov.get('dataset') or prov.get('source')}")


if __name__ == "__main__":
    main()
