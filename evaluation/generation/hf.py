"""HF ``transformers`` generation: ``sample_hf`` (shared with the RL trainer's rollouts) and ``HFBackend``."""

from __future__ import annotations

import time

import torch
from tqdm import tqdm

from evaluation.generation.types import Completion, SamplingParams, cut_at_stop, engine_record


def sample_hf(model, tokenizer, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, *, n: int,
              temperature: float, top_p: float, max_new_tokens: int, generator_seed: int,
              stop_strings: tuple[str, ...] = ()) -> torch.Tensor:
    """Sample ``n`` continuations per left-padded prompt with the KV cache; returns response ids
    [B*n, R] right-padded with the pad token (rows ordered prompt-major: prompt0 x n, prompt1 x n, ...).
    Shared by evaluation and by the RL trainer's rollouts, so both sample the same way. ``stop_strings``
    (transformers' ``StopStringCriteria``) ends a row once its text contains one; the caller cuts the text.
    """
    stops = {"stop_strings": list(stop_strings), "tokenizer": tokenizer} if stop_strings else {}
    torch.manual_seed(generator_seed)  # HF generate samples from the global torch RNG
    greedy = temperature == 0.0
    out = model.generate(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        do_sample=not greedy,
        temperature=None if greedy else temperature,
        top_p=None if greedy else top_p,
        top_k=None if greedy else 0,
        max_new_tokens=max_new_tokens,
        num_return_sequences=n,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        use_cache=True,
        **stops,
    )
    return out[:, prompt_ids.shape[1] :]


def split_response(ids: list[int], eos_id: int, pad_id: int) -> tuple[list[int], str]:
    """Cut a generated row at its first eos; returns (tokens incl. eos, finish_reason)."""
    if eos_id in ids:
        cut = ids.index(eos_id)
        return ids[: cut + 1], "stop"
    while ids and ids[-1] == pad_id and pad_id != eos_id:
        ids = ids[:-1]
    return ids, "length"


class HFBackend:
    """Batched sampling with ``model.generate`` (KV cache). Deterministic for a given seed and batch."""

    def __init__(self, model_dir: str, *, device: str = "cpu", batch_size: int = 32, dtype: str = "float32"):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).to(device)
        self.model.eval()
        self.device = device
        self.batch_size = batch_size
        self.dtype = dtype

    def identity(self) -> dict:
        """``engine_record``: transformers' version, dtype, one device (no tensor parallelism), batch size."""
        import transformers

        return engine_record("hf", transformers.__version__, self.dtype, 1, self.batch_size)

    @torch.no_grad()
    def generate(self, prompts: list[str], params: SamplingParams, offset: int = 0,
                 seeds: list[int] | None = None) -> list[list[Completion]]:
        """``offset``: the position of ``prompts[0]`` in a longer list generated chunk by chunk, so that a
        chunk gets the seed it gets in one call over the whole list. ``seeds``: one per prompt, each prompt
        generated alone (its k rows, no padding), so that its samples depend on no other prompt
        (``creditbench eval``'s per-sample cache)."""
        tok = self.tokenizer
        results: list[list[Completion]] = []
        per_batch = 1 if seeds is not None else max(1, self.batch_size // params.n)
        for start in tqdm(range(0, len(prompts), per_batch), desc="generate", mininterval=10,
                          disable=seeds is not None or len(prompts) <= per_batch):
            chunk = prompts[start : start + per_batch]
            enc = tok(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
            t0 = time.perf_counter()
            # The seed depends on the chunk's position (or the prompt's own seed), not on earlier chunks.
            seed = seeds[start] if seeds is not None else params.seed * 1_000_003 + offset + start
            resp = sample_hf(self.model, tok, enc["input_ids"], enc["attention_mask"], n=params.n,
                             temperature=params.temperature, top_p=params.top_p,
                             max_new_tokens=params.max_new_tokens, generator_seed=seed, stop_strings=params.stop)
            latency = (time.perf_counter() - t0) / max(1, len(chunk) * params.n)
            rows = resp.tolist()
            for i in range(len(chunk)):
                group = []
                for j in range(params.n):
                    ids, finish = split_response(rows[i * params.n + j], tok.eos_token_id, tok.pad_token_id)
                    text = tok.decode([t for t in ids if t != tok.eos_token_id], skip_special_tokens=False)
                    text, hit = cut_at_stop(text, params.stop)
                    group.append(Completion(text=text, token_ids=tuple(ids), finish_reason="stop" if hit else finish,
                                            latency_s=latency))
                results.append(group)
        return results
