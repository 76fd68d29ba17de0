"""Scoring of generated samples, one set at a time: grade every sample (the answer checker; EvalPlus in its
sandbox for code; the chosen letter for multiple choice) into per-sample records and one summary: avg@k with
a 95 % bootstrap CI, pass@k, maj@k, and a ``metrics`` block in lm-eval's naming (``*_stderr``, ``*_ci95``;
``acc`` / ``acc_norm`` for multiple choice). Per-sample records keep the response, the extracted answer, the
verdict and its reason, so any number can be re-graded without regenerating. Every summary also says where its
samples went (:func:`drop_counts`: requested, graded, failed, overlong, without an answer; the rule is
``common.records.DROP_RULE``): nothing is silently dropped. The driver (``evaluation.driver``) calls :func:`score`
for every path: the workflow's jobs and ``creditbench eval``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import nullcontext

import numpy as np

from common.records import DROP_KEYS
from evaluation.benchmarks import Problem, get_benchmark
from evaluation.grading import DATASETS, GRADER_VERSION, Verdict, equivalent, grade, grade_many
from evaluation.metrics import avg_at_k, bootstrap_ci, maj_at_k, mean_g_pass_at_k, mean_pass_at_k


def _same_answer(bench, timeout_s: float):
    """maj@k's equivalence of two extracted answers: the checker's for math sets, string equality otherwise."""
    if bench.kind != "math":
        return None
    rule = bench.grader_rule if bench.grader_rule in DATASETS else None  # reasoning_gym: plain math equivalence
    return lambda a, b: equivalent(a, b, dataset=rule, timeout_s=timeout_s)


def grade_samples(problems: list[Problem], texts: list[list[str]], *, rule: str | None, timeout_s: float,
                  workers: int, progress: str | None = None) -> list[list[Verdict]]:
    """Grade every sample (``texts[i][j]``: sample j of problem i); the pool only when asked for.
    ``progress``: the bar's name (``common.progress``), problem by problem."""
    if workers > 1:
        pairs = [(t, p.answer) for p, group in zip(problems, texts) for t in group]
        flat = grade_many(pairs, dataset=rule, timeout_s=timeout_s, workers=workers)
        k = len(texts[0]) if texts else 0
        return [flat[i * k : (i + 1) * k] for i in range(len(problems))]
    from common.progress import Progress

    out = []
    with Progress(progress, total=len(problems)) if progress else nullcontext() as bar:
        for p, group in zip(problems, texts):
            out.append([grade(text, p.answer, dataset=rule, timeout_s=timeout_s) for text in group])
            if bar:
                bar.update(1, samples=len(group))
    return out


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
    from evaluation.code.score import evaluate_evalplus

    samples = [code_sample(p, t, template) for p, group in zip(problems, texts) for t in group]
    result = evaluate_evalplus(benchmark, samples)
    by_index = {r.index: r for r in result.samples}
    k = len(texts[0]) if texts else 0
    verdicts = []
    for i in range(len(problems)):
        row = []
        for j in range(k):
            r = by_index[i * k + j]
            # a sample whose sandbox died under its checks is counted apart from a wrong program (a sandbox
            # error): its base check crashed, or it passed base and its plus check, the deciding one, crashed
            crashed = r.base_status == "crash" or (r.passed_base and r.plus_status == "crash")
            reason = "correct" if r.passed_plus else "crash" if crashed else "wrong"
            row.append(Verdict(correct=r.passed_plus, extracted=f"base={r.base_status} plus={r.plus_status}",
                               reason=reason, seconds=0.0))
        verdicts.append(row)
    base = float(np.mean([[by_index[i * k + j].passed_base for j in range(k)] for i in range(len(problems))]))
    return verdicts, {"base_pass_at_1": base, "plus_pass_at_1": float(np.mean(
        [[by_index[i * k + j].passed_plus for j in range(k)] for i in range(len(problems))])),
        "evalplus_version": result.evalplus_version, "sandbox": list(result.isolation)}


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


def stderr(per_problem: np.ndarray) -> float:
    """Standard error of the mean over problems (lm-eval's ``*_stderr``: sample sd / sqrt(n))."""
    n = len(per_problem)
    return float(np.std(per_problem, ddof=1) / math.sqrt(n)) if n > 1 else float("nan")


def metrics_block(arr: np.ndarray, summary: dict, records: list[dict], *, k: int, seed: int,
                  loglikelihood: bool) -> dict:
    """The summary's ``metrics`` in lm-eval's naming: each metric with ``_stderr`` and ``_ci95`` (problems
    resampled); multiple choice: ``acc`` and, for cloze, ``acc_norm`` (lm-eval's own per-item verdicts)."""
    if loglikelihood:
        out: dict = {}
        for key in ("acc", "acc_norm"):
            values = [r.get(f"lm_eval_{key}") for r in records]
            if None in values:
                continue
            per = np.asarray(values, dtype=float)
            out.update({key: float(per.mean()), f"{key}_ci95": list(bootstrap_ci(per, seed=seed)),
                        f"{key}_stderr": stderr(per)})
        return out
    out = {key: summary[key] for key in ("avg_at_k", "pass_at_k", "maj_at_k")}
    out.update({"avg_at_k_ci95": summary["ci95"], "avg_at_k_stderr": stderr(arr.mean(axis=1))})
    if k > 1:
        out.update({f"g_pass_at_k_tau{tau}": mean_g_pass_at_k(arr, k, tau) for tau in (0.5, 1.0)})
    out.update({key: summary[key] for key in ("base_pass_at_1", "plus_pass_at_1") if key in summary})
    return out


GENERATION_ERROR = "error"
"""``finish_reason`` of a sample the engine failed to generate (``evaluation.driver.generate_guarded``)."""


def drop_counts(records: Sequence[Mapping], requested: int) -> dict[str, int]:
    """Where a set's samples went (``common.records.DROP_KEYS``, rule ``DROP_RULE``), from its per-sample records
    (``reason``, ``finish_reason``): the one count behind every summary, ``results.json`` and table row.
    ``graded`` counts the records present, so a sample missing from ``records`` shows as requested − graded −
    failed instead of vanishing."""
    reasons = Counter(r.get("reason") for r in records)
    gen, sandbox, timeout = reasons["generation_error"], reasons["crash"], reasons["timeout"]
    out = {"requested": int(requested), "graded": len(records) - gen - sandbox - timeout,
           "failed": gen + sandbox + timeout, "generation_error": gen, "sandbox_error": sandbox,
           "grader_timeout": timeout, "overlong": sum(r.get("finish_reason") == "length" for r in records),
           "no_answer": reasons["no_answer"]}
    return {key: out[key] for key in DROP_KEYS}


def drops_text(drops: Mapping[str, int]) -> str:
    """One line of :func:`drop_counts` for a command's output."""
    return (f"{drops['requested']} requested, {drops['graded']} graded, {drops['failed']} failed "
            f"({drops['generation_error']} generation, {drops['sandbox_error']} sandbox, {drops['grader_timeout']} "
            f"grader timeout), {drops['overlong']} overlong, {drops['no_answer']} without an answer")


def score(benchmark: str, problems: list[Problem], raw: list[dict], *, k: int, template: str, seed: int,
          grader_timeout_s: float, grader_workers: int = 1,
          loglikelihood: bool = False, progress: bool = False) -> tuple[list[dict], dict]:
    """Grade raw samples; returns (per-sample records, summary of the scores). ``loglikelihood``: the
    responses are letters chosen by log-likelihood (lm-eval), compared with the gold letter."""
    bench = get_benchmark(benchmark)
    groups = group_samples(problems, raw, k)
    texts = [[r["response"] for r in group] for group in groups]
    extra: dict = {}
    if loglikelihood:
        verdicts = grade_letters(problems, texts)
    elif bench.kind == "code":
        from common.progress import Progress

        with Progress(f"{benchmark} code scoring (EvalPlus, one sandbox call)", total=len(problems)) \
                if progress else nullcontext() as bar:
            verdicts, extra = grade_code(problems, texts, template, benchmark)
            if bar:
                bar.update(len(problems), samples=sum(map(len, texts)))
    elif bench.grader_rule == "reasoning_gym":  # number: the answer checker; text: the task's verifier, binary
        from evaluation.sets.reasoning_gym import grade_rg

        verdicts = [[grade_rg(t, p.answer, p.meta, timeout_s=grader_timeout_s) for t in group]
                    for p, group in zip(problems, texts)]
    else:
        verdicts = grade_samples(problems, texts, rule=bench.grader_rule, timeout_s=grader_timeout_s,
                                 workers=grader_workers, progress=f"{benchmark} grade" if progress else None)
    # a sample the engine failed to generate is not graded: its (empty) verdict is replaced, never counted right
    verdicts = [[Verdict(False, None, "generation_error", 0.0) if r.get("finish_reason") == GENERATION_ERROR else v
                 for r, v in zip(group, vs)] for group, vs in zip(groups, verdicts)]
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
        "drops": drop_counts(records, len(problems) * k),
        "grader_version": GRADER_VERSION, "template": template,
        "mean_response_tokens": float(np.mean([r.get("tokens", 0) for r in records])) if records else 0.0,
        **extra,
    }
    summary["metrics"] = metrics_block(arr, summary, records, k=k, seed=seed, loglikelihood=loglikelihood)
    return records, summary
