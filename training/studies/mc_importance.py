"""Monte-Carlo token importance for any task (issue 16): the expensive, model-agnostic reference.

importance_t = V(through t) - V(before t), V(prefix) = P(correct | prompt, prefix) under the current
policy, estimated by K sampled continuations of each prefix (VinePPO's Monte-Carlo values, Kazemnejad
et al. 2024 §4; Thought-Anchors-style resampling, Bogdan et al. 2025 §3). The full response's value is
its own reward (exact). Every prefix's K continuations are independent draws, so
se(importance_t) = sqrt(se(V_t+1)^2 + se(V_t)^2) with se(V) = sqrt(p(1-p)/K) (0 at p in {0, 1}: the
binomial plug-in, which is optimistic at small K; the table states K).

Continuations are sampled as the loop samples rollouts (``sample_hf``, the rollout temperature/top_p) and
cut at ``max_new_tokens - len(prefix)`` so that every completed response obeys the rollout length cap;
cutting a longer autoregressive sample is the same distribution as sampling the shorter one.
Opt-in (``fidelity.mc`` in the config): a response of L tokens costs L x K generations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from evaluation.generation.hf import sample_hf

RewardFn = Callable[..., float]


def prefix_batch(prompt: Sequence[int], response: Sequence[int], starts: Sequence[int],
                 pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded [n, P + max j] ids and mask of prompt + response[:j] for each j in ``starts``."""
    rows = [list(prompt) + list(response[:j]) for j in starts]
    width = max(map(len, rows))
    ids = torch.tensor([[pad_id] * (width - len(r)) + r for r in rows], dtype=torch.long)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.long)
    return ids, mask


def binomial_se(p: float, k: int) -> float:
    return math.sqrt(max(p * (1.0 - p), 0.0) / k)


def importance_from_values(values: Sequence[float], ses: Sequence[float]) -> tuple[list[float], list[float]]:
    """importance_t = V[t+1] - V[t] and its standard error, for t = 0..L-1 from V[0..L]."""
    imp = [values[t + 1] - values[t] for t in range(len(values) - 1)]
    se = [math.sqrt(ses[t + 1] ** 2 + ses[t] ** 2) for t in range(len(values) - 1)]
    return imp, se


def mc_values(model, tokenizer, prompt: Sequence[int], response: Sequence[int], gold: str, reward: float, *,
              k: int, temperature: float, top_p: float, max_new_tokens: int, seed: int, reward_fn: RewardFn,
              timeout_s: float, prefixes_per_call: int = 16,
              sampler: Callable[..., torch.Tensor] = sample_hf) -> tuple[list[float], list[float]]:
    """V[j] = P(correct | prompt + response[:j]) for j = 0..L (V[L] = ``reward``) and its standard errors."""
    if k < 1:
        raise ValueError(f"mc_values: k must be >= 1, got {k}")
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    L = len(response)
    values, ses = [0.0] * (L + 1), [0.0] * (L + 1)
    values[L] = float(reward)
    starts = list(range(L))
    for c in range(0, L, prefixes_per_call):
        chunk = starts[c : c + prefixes_per_call]
        ids, mask = prefix_batch(prompt, response, chunk, pad)
        budget = max_new_tokens - chunk[0]  # the longest continuation needed in this chunk
        with torch.no_grad():
            out = sampler(model, tokenizer, ids, mask, n=k, temperature=temperature, top_p=top_p,
                          max_new_tokens=max(budget, 1), generator_seed=seed * 1_000_003 + c)
        for r, j in enumerate(chunk):
            hits = 0.0
            for s in range(k):
                cont = out[r * k + s, : max_new_tokens - j].tolist()
                if eos in cont:
                    cont = cont[: cont.index(eos) + 1]
                text = tokenizer.decode(list(response[:j]) + cont, skip_special_tokens=True)
                hits += reward_fn(text, gold, timeout_s=timeout_s)
            values[j] = hits / k
            ses[j] = binomial_se(values[j], k)
    return values, ses


def mc_importance(model, tokenizer, prompt: Sequence[int], response: Sequence[int], gold: str, reward: float,
                  **kw) -> tuple[list[float], list[float]]:
    """(importance [L], standard error [L]) of each response token; keywords as :func:`mc_values`."""
    return importance_from_values(*mc_values(model, tokenizer, prompt, response, gold, reward, **kw))
