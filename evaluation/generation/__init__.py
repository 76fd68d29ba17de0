"""Generation backends behind one interface: HF ``transformers`` (default; CPU or GPU, batched, KV
cache; ``hf``) and vLLM (``vllm``; used when installed). Same sampling parameters and seeds for both.

    backend = make_backend("hf", model_dir, seed=0)
    completions = backend.generate(prompts, SamplingParams(n=4, temperature=1.0, top_p=1.0,
                                                           max_new_tokens=64, seed=0))

Importing this package does not import torch: the backends are loaded by ``make_backend``.
"""

from __future__ import annotations

from evaluation.generation.types import Backend, BackendUnavailable, Completion, SamplingParams, engine_record

__all__ = ["Backend", "BackendUnavailable", "Completion", "SamplingParams", "engine_record", "make_backend"]


def make_backend(name: str, model_dir: str, *, seed: int, device: str = "cpu", batch_size: int = 32) -> Backend:
    """``hf`` or ``vllm``; vLLM raises ``BackendUnavailable`` with a clear message where not installed."""
    if name == "hf":
        from evaluation.generation.hf import HFBackend

        return HFBackend(model_dir, device=device, batch_size=batch_size)
    if name == "vllm":
        from evaluation.generation.vllm import VLLMBackend

        return VLLMBackend(model_dir, seed=seed, batch_size=batch_size)
    raise ValueError(f"unknown generation backend {name!r}; valid: ['hf', 'vllm']")
