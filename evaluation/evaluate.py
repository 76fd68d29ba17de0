"""Evaluate one HF-format checkpoint on one benchmark: generate k samples per problem, grade every
sample, write per-sample records and a summary (avg@k with a 95 % bootstrap CI, pass@k, maj@k).

The same code path serves the embedded synthetic held-out set and the real benchmarks; only the
problem loader and the prompt template differ. Per-sample records keep the response, the extracted
answer, the verdict and its reason, so any number can be re-graded without regenerating. ``generate``
(raw samples) and ``score`` (verdicts + summary) are also used apart by ``evaluation.real_eval``.

    python -m evaluation.evaluate --config config/config.yaml --model-dir M --benchmark synthetic \
        --data heldout.jsonl --method dapo --seed 1 --step 60 --out-prefix OUT/eval/dapo/seed1/step60/synthetic
"""

from __future__ import annotations

import argparse
import json
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from common.config import load_config
from common.io import sha256_file, write_json_atomic, write_jsonl_atomic
from evaluation.benchmarks import Problem, get_benchmark, load_benchmark
from evaluation.grading import GRADER_VERSION, Verdict, equivalent, grade, grade_many
from evaluation.metrics import avg_at_k, bootstrap_ci, maj_at_k, mean_pass_at_k
from evaluation.templates import render, stop_strings

if TYPE_CHECKING:  # torch is imported only where a model is loaded: scoring jobs stay light
    from evaluation.generation import SamplingParams


def _same_answer(bench, timeout_s: float):
    """maj@k's equivalence of two extracted answers: the checker's for math sets, string equality otherwise."""
    if bench.kind != "math":
        return None
    return lambda a, b: equivalent(a, b, dataset=bench.grader_rule, timeout_s=timeout_s)


def grade_samples(problems: list[Problem], texts: list[list[str]], *, rule: str | None, timeout_s: float,
                  workers: int) -> list[list[Verdict]]:
    """Grade every sample (``texts[i][j]``: sample j of problem i); the pool only when asked for."""
    pairs = [(t, p.answer) for p, group in zip(problems, texts) for t in group]
    if workers > 1:
        flat = grade_many(pairs, dataset=rule, timeout_s=timeout_s, workers=workers)
    else:
        flat = [grade(text, gold, dataset=rule, timeout_s=timeout_s) for text, gold in pairs]
    k = len(texts[0]) if texts else 0
    return [flat[i * k : (i + 1) * k] for i in range(len(problems))]


_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)
_IMPORT = re.compile(r"^(?:from\s+\S+\s+)?import\s+\S.*$", re.M)


def code_sample(problem: Problem, text: str, template: str) -> dict:
    """EvalPlus sample: a base-model continuation is a ``completion`` of the prompt; a chat answer's
    last fenced block (or the whole text) is a full ``solution``, after the prompt's own import lines
    that it lacks (answers often drop HumanEval's ``from typing import List``)."""
    if template.startswith("base"):
        return {"task_id": problem.id, "completion": text}
    blocks = _FENCE.findall(text)
    code = blocks[-1] if blocks else text
    missing = [line for line in _IMPORT.findall(problem.question) if line not in code]
    return {"task_id": problem.id, "solution": "".join(f"{line}\n" for line in missing) + code}


def program(problem: Problem, text: str, template: str) -> str:
    """The program EvalPlus runs for a sample: the prompt + a completion, or the full solution."""
    sample = code_sample(problem, text, template)
    return problem.question + sample["completion"] if "completion" in sample else sample["solution"]


def grade_code(problems: list[Problem], texts: list[list[str]], template: str,
               benchmark: str = "mbpp_plus") -> tuple[list[list[Verdict]], dict]:
    """Run MBPP+/HumanEval+ samples through EvalPlus in its sandbox; correct = base and plus tests pass."""
    from evaluation.code_eval import evaluate_evalplus

    samples = [code_sample(p, t, template) for p, group in zip(problems, texts) for t in group]
    result = evaluate_evalplus(benchmark, samples)
    by_index = {r.index: r for r in result.samples}
    k = len(texts[0]) if texts else 0
    verdicts = []
    for i in range(len(problems)):
        row = []
        for j in range(k):
            r = by_index[i * k + j]
            # a sample whose own sandbox run crashed (it killed EvalPlus, or the harness broke) is counted
            # apart from a wrong program, so that a broken harness shows in the failures table
            reason = "correct" if r.passed_plus else "crash" if r.base_status == "crash" else "wrong"
            row.append(Verdict(correct=r.passed_plus, extracted=f"base={r.base_status} plus={r.plus_status}",
                               reason=reason, seconds=0.0))
        verdicts.append(row)
    base = float(np.mean([[by_index[i * k + j].passed_base for j in range(k)] for i in range(len(problems))]))
    return verdicts, {"base_pass_at_1": base, "plus_pass_at_1": float(np.mean(
        [[by_index[i * k + j].passed_plus for j in range(k)] for i in range(len(problems))])),
        "evalplus_version": result.evalplus_version, "sandbox": list(result.isolation)}


def raw_samples(benchmark: str, problems: list[Problem], prompts: list[str], completions) -> list[dict]:
    """Generated samples before grading (problem-major, ``sample`` = index within the problem); ``response``
    is the text graded (cut before the template's stop string)."""
    return [{"benchmark": benchmark, "problem_id": p.id, "sample": j, "prompt": prompt, "response": c.text,
             "tokens": len(c.token_ids), "finish_reason": c.finish_reason, "latency_s": round(c.latency_s, 6)}
            for p, prompt, group in zip(problems, prompts, completions) for j, c in enumerate(group)]


def group_samples(problems: list[Problem], raw: list[dict], k: int) -> list[list[dict]]:
    """``raw`` as k samples per problem, checking that it holds exactly these problems in this order."""
    expected = [(p.id, j) for p in problems for j in range(k)]
    actual = [(r["problem_id"], r["sample"]) for r in raw]
    if actual != expected:
        raise ValueError(f"raw samples do not match the problems x k={k} "
                         f"(first: {actual[:3]} vs {expected[:3]})")
    return [raw[i * k : (i + 1) * k] for i in range(len(problems))]


def grade_letters(problems: list[Problem], texts: list[list[str]]) -> list[list[Verdict]]:
    """Multiple choice scored by log-likelihood: the response *is* the chosen letter."""
    return [[Verdict(correct=t == p.answer, extracted=t, reason="correct" if t == p.answer else "wrong",
                     seconds=0.0) for t in group] for p, group in zip(problems, texts)]


def score(benchmark: str, problems: list[Problem], raw: list[dict], *, k: int, template: str, seed: int,
          grader_timeout_s: float, grader_workers: int = 1,
          loglikelihood: bool = False) -> tuple[list[dict], dict]:
    """Grade raw samples; returns (per-sample records, summary of the scores). ``loglikelihood``: the
    responses are letters chosen by log-likelihood (lm-eval), compared with the gold letter."""
    bench = get_benchmark(benchmark)
    groups = group_samples(problems, raw, k)
    texts = [[r["response"] for r in group] for group in groups]
    extra: dict = {}
    if loglikelihood:
        verdicts = grade_letters(problems, texts)
    elif bench.kind == "code":
        verdicts, extra = grade_code(problems, texts, template, benchmark)
    else:
        verdicts = grade_samples(problems, texts, rule=bench.grader_rule, timeout_s=grader_timeout_s,
                                 workers=grader_workers)
    records, correct, answers = [], [], []
    for p, group, vs in zip(problems, groups, verdicts):
        correct.append([int(v.correct) for v in vs])
        answers.append([v.extracted for v in vs])
        for r, v in zip(group, vs):
            records.append({**r, "answer": p.answer, "extracted": v.extracted, "correct": v.correct,
                            "reason": v.reason, "grade_seconds": round(v.seconds, 6)})
            if bench.kind == "code" and not loglikelihood:
                records[-1]["program"] = program(p, r["response"], template)
    arr = np.asarray(correct, dtype=int).reshape(len(problems), k)  # [P, k]
    lo, hi = bootstrap_ci(arr.mean(axis=1), seed=seed)
    reasons: dict[str, int] = {}
    for r in records:
        reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
    summary = {
        "benchmark": benchmark, "n_problems": len(problems), "k": k, "n_samples": int(arr.size),
        "avg_at_k": avg_at_k(arr), "ci95": [lo, hi], "pass_at_k": mean_pass_at_k(arr, k),
        "maj_at_k": maj_at_k(answers, arr, same=_same_answer(bench, grader_timeout_s)),
        "problem_ids": [p.id for p in problems],
        "per_problem_correct": arr.tolist(), "reasons": dict(sorted(reasons.items())),
        "grader_version": GRADER_VERSION, "template": template,
        "mean_response_tokens": float(np.mean([r.get("tokens", 0) for r in records])) if records else 0.0,
        **extra,
    }
    return records, summary


def sampling_dict(params: SamplingParams, template: str | None = None) -> dict:
    """The sampling record of a summary; with ``template``, its stop strings too."""
    out = {"n": params.n, "temperature": params.temperature, "top_p": params.top_p,
           "max_new_tokens": params.max_new_tokens, "seed": params.seed}
    stop = stop_strings(template) if template else params.stop
    return {**out, "stop": list(stop)} if stop else out


def generate(engine, benchmarks: dict[str, tuple[list[Problem], str]],
             params: SamplingParams) -> dict[str, tuple[list[dict], float]]:
    """Sample every set with one loaded backend; ``benchmarks``: name -> (problems, template).
    Returns name -> (raw samples, generation seconds)."""
    tokenizer = getattr(engine, "tokenizer", None)
    out = {}
    for name, (problems, template) in benchmarks.items():
        prompts = [render(template, p, tokenizer) for p in problems]
        t0 = time.perf_counter()
        completions = engine.generate(prompts, replace(params, stop=stop_strings(template)))
        out[name] = (raw_samples(name, problems, prompts, completions), time.perf_counter() - t0)
    return out


def evaluate(*, model_dir: str, benchmark: str, problems: list[Problem], template: str, params: SamplingParams,
             backend: str, device: str, batch_size: int, grader_timeout_s: float, grader_workers: int = 1):
    """Generate and grade; returns (per-sample records, summary dict without run identifiers)."""
    from evaluation.generation import make_backend

    engine = make_backend(backend, model_dir, seed=params.seed, device=device, batch_size=batch_size)
    raw, gen_seconds = generate(engine, {benchmark: (problems, template)}, params)[benchmark]
    records, summary = score(benchmark, problems, raw, k=params.n, template=template, seed=params.seed,
                             grader_timeout_s=grader_timeout_s, grader_workers=grader_workers)
    summary.update({"sampling": sampling_dict(params, template), "backend": backend,
                    "generation_seconds": round(gen_seconds, 3)})
    return records, summary


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
    from evaluation.generation import SamplingParams

    cfg = load_config(args.config)
    setup_runtime(cfg.runtime)
    ev = cfg.eval
    sha, count = None, None
    if args.data_manifest:
        files = json.loads(Path(args.data_manifest).read_text())["files"]
        entry = next(f for f in files.values() if Path(f["path"]).resolve() == Path(args.data).resolve())
        sha, count = entry["sha256"], entry["count"]
    problems = load_benchmark(args.benchmark, data_dir=cfg.data.benchmarks_dir, gpqa_dir=cfg.data.gpqa_dir,
                              path=args.data, sha256=sha, count=count)
    if ev.limit:
        problems = problems[: ev.limit]
    bench = get_benchmark(args.benchmark)
    # the configured template where it fits the set (or the set is generated), else the set's default
    template = ev.template if (bench.generated or ev.template in bench.templates) else bench.default_template
    params = SamplingParams(n=ev.k, temperature=ev.temperature, top_p=ev.top_p, max_new_tokens=ev.max_new_tokens,
                            seed=args.seed)
    records, summary = evaluate(model_dir=args.model_dir, benchmark=args.benchmark, problems=problems,
                                template=template, params=params, backend=ev.backend, device=cfg.runtime.device,
                                batch_size=ev.batch_size, grader_timeout_s=ev.grader_timeout_s,
                                grader_workers=args.grader_workers)
    manifest_path = Path(args.model_dir) / "manifest.json"
    data_file = args.data or str(Path(cfg.data.benchmarks_dir) / (get_benchmark(args.benchmark).path or ""))
    summary.update({
        "method": args.method, "seed": args.seed, "step": args.step, "model_dir": args.model_dir,
        "data_sha256": sha256_file(data_file) if Path(data_file).is_file() else None,
        "manifest_id": json.loads(manifest_path.read_text())["manifest_id"] if manifest_path.exists() else None,
    })
    write_jsonl_atomic(args.out_prefix + ".samples.jsonl", records)
    write_json_atomic(args.out_prefix + ".summary.json", summary)
    lo, hi = summary["ci95"]
    print(f"{args.benchmark} {args.method} seed{args.seed} step{args.step}: avg@{ev.k} {summary['avg_at_k']:.3f} "
          f"[{lo:.3f}, {hi:.3f}] pass@{ev.k} {summary['pass_at_k']:.3f} ({summary['n_problems']} problems)")


if __name__ == "__main__":
    main()
