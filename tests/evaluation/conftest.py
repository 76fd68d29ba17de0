"""A small, fully deterministic results tree (the workflow's output contract) for report/regress tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

BENCHES = {"bench_a": 30, "bench_b": 33}  # name -> problems (unregistered names: kind "math")
# registered benchmarks of the other kinds, written with ``kinds=True``; accuracy = bench_a's fraction
EXTRA_BENCHES = {"gsm8k": 20, "mbpp_plus": 10, "humaneval_plus": 8, "arc_challenge": 12}
K = 4
SEEDS = (0, 1)
STEPS = (0, 10, 20)
# (method, seed, step) -> correct samples per benchmark (out of 120 and 132)
CORRECT = {
    ("sft", 0, 0): {"bench_a": 30, "bench_b": 33},
    ("sft", 1, 0): {"bench_a": 36, "bench_b": 30},
    ("dapo", 0, 10): {"bench_a": 48, "bench_b": 50},
    ("dapo", 1, 10): {"bench_a": 45, "bench_b": 55},
    ("dapo", 0, 20): {"bench_a": 60, "bench_b": 66},
    ("dapo", 1, 20): {"bench_a": 54, "bench_b": 72},
    ("delta", 0, 10): {"bench_a": 66, "bench_b": 70},
    ("delta", 1, 10): {"bench_a": 60, "bench_b": 75},
    ("delta", 0, 20): {"bench_a": 96, "bench_b": 99},
    ("delta", 1, 20): {"bench_a": 90, "bench_b": 102},
}
for _seed in SEEDS:  # RL runs start from the shared checkpoint
    for _m in ("dapo", "delta"):
        CORRECT[(_m, _seed, 0)] = CORRECT[("sft", _seed, 0)]
PHASE_TIME = {"rollout": 2.0, "reward": 0.1, "old_logp": 0.5, "credit": 0.0, "update": 1.0, "checkpoint": 0.0}


def correct_matrix(problems: int, n_correct: int, key: tuple[int, ...]) -> np.ndarray:
    """[P, K] 0/1 with exactly n_correct ones at seeded positions."""
    flat = np.zeros(problems * K, dtype=int)
    flat[np.random.default_rng(list(key)).permutation(problems * K)[:n_correct]] = 1
    return flat.reshape(problems, K)


def _write(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1, sort_keys=True), encoding="utf-8")


def make_results(root: Path, *, identical: bool = False, kinds: bool = False) -> Path:
    """Write OUT = root; with ``identical`` delta's evaluations are copies of dapo's (same samples).

    ``kinds`` adds GSM8K, MBPP+ (with base/plus pass@1), HumanEval+ (without) and ARC-Challenge.
    """
    methods = ("sft", "dapo", "delta")
    benches = {**BENCHES, **(EXTRA_BENCHES if kinds else {})}
    for (method, seed, step), counts in sorted(CORRECT.items()):
        source = "dapo" if identical and method == "delta" else method
        counts = CORRECT[(source, seed, step)]
        for b_index, (bench, problems) in enumerate(benches.items()):
            fraction = counts["bench_a"] / (BENCHES["bench_a"] * K)
            n_correct = counts[bench] if bench in counts else round(fraction * problems * K)
            matrix = correct_matrix(
                problems, n_correct, (methods.index(source) if step else 0, seed, step, b_index)
            )
            wrong = problems * K - n_correct
            no_answer = wrong // 10
            parse_error = 1 if method == "delta" else 0
            timeout = seed
            summary = {
                "benchmark": bench, "method": method, "seed": seed, "step": step,
                "model_dir": f"ckpt/{method}/seed{seed}/step{step}", "n_problems": problems, "k": K,
                "n_samples": problems * K, "avg_at_k": n_correct / (problems * K), "ci95": [0.0, 1.0],
                "pass_at_k": float(matrix.max(axis=1).mean()), "maj_at_k": float((matrix.mean(axis=1) > 0.5).mean()),
                "problem_ids": [f"{bench}-{i:03d}" for i in range(problems)],
                "per_problem_correct": matrix.tolist(),
                "reasons": {"correct": n_correct, "wrong": wrong - no_answer - parse_error - timeout,
                            "no_answer": no_answer, "parse_error": parse_error, "timeout": timeout},
                "grader_version": "math-v3", "data_sha256": f"{b_index + 1:x}" * 64,
                "template": "lm_eval_mcq_cloze_0shot" if bench == "arc_challenge" else "qwen-boxed",
                "sampling": {"n": K, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 256, "seed": seed},
                "manifest_id": f"m-{method}-{seed}",
            }  # fmt: skip
            if bench == "mbpp_plus":
                summary["base_pass_at_1"] = min(1.0, summary["avg_at_k"] + 0.05)
                summary["plus_pass_at_1"] = summary["avg_at_k"]
            _write(root / "eval" / method / f"seed{seed}" / f"step{step}" / f"{bench}.summary.json", summary)
    for method in ("dapo", "delta"):
        for seed in SEEDS:
            run = root / "runs" / method / f"seed{seed}"
            run.mkdir(parents=True, exist_ok=True)
            lines, clock = [], 0.0
            for step in range(1, STEPS[-1] + 1):
                time = dict(PHASE_TIME)
                time["rollout"] += 0.25 * seed
                time["credit"] = 0.5 if method == "delta" else 0.0
                time["checkpoint"] = 0.25 if step % 10 == 0 else 0.0
                time["total"] = sum(time.values())
                clock += time["total"]
                lines.append(json.dumps({
                    "step": step, "reward_mean": 0.01 * step,
                    "accuracy": 0.2 + 0.01 * step + (0.1 if method == "delta" else 0),
                    "time": time, "tokens_generated": 1000, "tokens_trained": 900,
                    "peak_rss_mb": 1000.0 + step + (100 if method == "delta" else 0), "wall_clock": clock,
                    "lr": 1e-6,
                }, sort_keys=True))  # fmt: skip
            (run / "metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
            _write(run / "manifest.json", {
                "manifest_id": f"m-{method}-{seed}", "git_commit": "0123456789abcdef0123456789abcdef01234567",
                "git_dirty": False, "packages": {"torch": "2.13.0", "numpy": "2.4.6"}, "torch_threads": 1,
                "hardware": "cpu", "config_hash": "cafe", "data_sha256": {"train": "ab" * 32}, "seeds": [seed],
            })  # fmt: skip
            if method == "delta" and seed == 0:
                rows = [
                    {"step": 10, "tokens": ["The", " answer", " is", " \\boxed{", "4", "}", "\n"],
                     "weights": [0.5, 0.9, 1.0, 1.4, 2.0, 1.1, 0.7], "advantage": 1.0, "correct": True},
                    {"step": 20, "tokens": ["2", "+", "2", "=", "5"], "weights": [1.0, 0.8, 1.0, 0.9, 0.2],
                     "advantage": -1.0, "correct": False},
                ]  # fmt: skip
                (run / "token_weights.jsonl").write_text(
                    "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
                )
            if method == "dapo" and seed == 0:  # uniform credit: no heat-map
                row = {"step": 20, "tokens": ["4"], "weights": [1.0], "advantage": 1.0, "correct": True}
                (run / "token_weights.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    return root


# (response, gold, our verdict, Math-Verify's verdict): 4 both accept, 3 both reject, 2 only ours, 1 only MV
AUDIT_CASES = (
    ("The answer is \\boxed{4}.", "4", True, True),
    ("\\boxed{5}", "4", False, False),
    ("\\boxed{\\frac{1}{2}}", "0.5", True, True),
    ("\\boxed{four}", "4", True, False),
    ("\\boxed{1e3}", "1000", True, False),
    ("so x = 4", "4", False, True),
    ("\\boxed{2^{10}}", "1024", True, True),
    ("\\boxed{0.333}", "\\frac13", False, False),
    ("\\boxed{(1,2)}", "(1,2)", True, True),
    ("\\boxed{4}\\boxed{5}", "4", False, False),
)


def write_samples(root: Path, method: str, seed: int, step: int, bench: str) -> Path:
    """The 10 ``AUDIT_CASES`` as ``{bench}.samples.jsonl`` next to that summary (the evaluator's format)."""
    path = root / "eval" / method / f"seed{seed}" / f"step{step}" / f"{bench}.samples.jsonl"
    lines = []
    for i, (response, gold, ours, _) in enumerate(AUDIT_CASES):
        lines.append(json.dumps({
            "benchmark": bench, "problem_id": f"{bench}-{i:03d}", "sample": 0, "prompt": "Q?", "response": response,
            "answer": gold, "extracted": None, "correct": ours, "reason": "correct" if ours else "wrong",
            "tokens": 5, "finish_reason": "stop", "latency_s": 0.1,
        }, sort_keys=True))  # fmt: skip
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def fake_results(tmp_path: Path) -> Callable[..., Path]:
    """Factory: ``fake_results(name="out", identical=False)`` writes a results tree under tmp_path."""

    def factory(name: str = "out", identical: bool = False, kinds: bool = False) -> Path:
        return make_results(tmp_path / name, identical=identical, kinds=kinds)

    return factory
