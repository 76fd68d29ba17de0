"""vLLM generation backend with the same interface and sampling semantics as ``evaluation.generation.hf.HFBackend``.

Importing this module never needs vLLM; constructing :class:`VLLMBackend` without it raises
``BackendUnavailable`` with the install hint. vLLM pulls its own CUDA torch and may change the
transformers version, so it lives in the optional ``gpu`` extra.

Seeds: request ``i`` of a call gets its own seed ``params.seed * 1_000_003 + i``, so a prompt's samples do
not depend on which other prompts share the batch (vLLM's per-request generators).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from evaluation.generation.types import BackendUnavailable, Completion, SamplingParams, engine_record

log = logging.getLogger(__name__)

INSTALL_HINT = "vLLM is not installed; install the GPU extra on a CUDA machine: pip install 'creditbench[gpu]'"


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise BackendUnavailable(INSTALL_HINT) from exc
    return vllm


def request_params(params: SamplingParams, n_prompts: int, sampling_cls: Any, offset: int = 0,
                   seeds: Sequence[int] | None = None) -> list[Any]:
    """One vLLM ``SamplingParams`` per prompt, with a per-request seed (``offset``, ``seeds``: see ``generate``)."""
    return [sampling_cls(n=params.n, temperature=params.temperature,
                         top_p=1.0 if params.temperature == 0.0 else params.top_p, top_k=-1,
                         max_tokens=params.max_new_tokens,
                         seed=seeds[i] if seeds is not None else params.seed * 1_000_003 + offset + i,
                         stop=list(params.stop))
            for i in range(n_prompts)]


def to_completions(outputs: Sequence[Any], latency_s: float) -> list[list[Completion]]:
    """Convert vLLM ``RequestOutput`` objects (one per prompt, ``.outputs`` per sample) to Completions."""
    return [[Completion(text=o.text, token_ids=tuple(o.token_ids), finish_reason=str(o.finish_reason or "length"),
                        latency_s=latency_s) for o in req.outputs] for req in outputs]


class VLLMBackend:
    """Offline batched sampling with ``vllm.LLM`` on a local HF model folder."""

    batches_seeded_prompts = True
    """Prompts with their own seeds may share a call (per-request generators): ``evaluation.driver`` batches them."""

    def __init__(self, model_dir: str, *, seed: int, tensor_parallel_size: int = 1, dtype: str = "auto",
                 gpu_memory_utilization: float = 0.85, batch_size: int | None = None) -> None:
        vllm = _import_vllm()
        self._vllm = vllm
        self.model_dir = model_dir
        self.seed = seed
        self.tensor_parallel_size = tensor_parallel_size
        self.batch_size = batch_size  # the sampling knob; vLLM schedules its own batches (max_num_seqs)
        log.info("loading %s with vLLM %s (tp=%d, dtype=%s)", model_dir, getattr(vllm, "__version__", "?"),
                 tensor_parallel_size, dtype)
        self.llm = vllm.LLM(model=model_dir, seed=seed, tensor_parallel_size=tensor_parallel_size, dtype=dtype,
                            gpu_memory_utilization=gpu_memory_utilization)

    def identity(self) -> dict:
        """``engine_record``: vLLM's version, the dtype it resolved ("auto" -> the model's), tensor parallelism."""
        dtype = getattr(getattr(getattr(self.llm, "llm_engine", None), "model_config", None), "dtype", None)
        return engine_record("vllm", str(getattr(self._vllm, "__version__", "?")),
                             str(dtype).removeprefix("torch.") if dtype is not None else "auto",
                             self.tensor_parallel_size, self.batch_size)

    def generate(self, prompts: list[str], params: SamplingParams, offset: int = 0,
                 seeds: Sequence[int] | None = None) -> list[list[Completion]]:
        """``offset``: the position of ``prompts[0]`` in a longer list generated chunk by chunk; ``seeds``:
        one per prompt (vLLM seeds each request apart, so a batch needs no splitting)."""
        if not prompts:
            return []
        sp = request_params(params, len(prompts), self._vllm.SamplingParams, offset, seeds)
        t0 = time.perf_counter()
        outputs = self.llm.generate(prompts, sp, use_tqdm=False)
        latency = (time.perf_counter() - t0) / max(1, len(prompts) * params.n)
        return to_completions(outputs, latency)
