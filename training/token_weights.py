"""Token-weight functions: the credit-assignment stage between advantage and surrogate.

Every function has the signature ``fn(batch: CreditBatch, **knobs) -> w[B, R]`` and is registered in
``TOKEN_WEIGHTS``. The loop calls the preset's function once per rollout batch, at theta_old, under
``torch.no_grad``; the weights are held fixed across mini-batches and epochs (DelTA §3, CF §3).
A preset says whether ``w`` multiplies the policy-gradient term only (equivalently: per-token
advantage w*A, as DelTA's ``weighted_adv``) or the whole per-token loss including the KL term (CF's
``per_token_loss * w``).

Tensor layout (see ``training.losses``): ``R`` response positions, right padded, ``response_mask``
marks real response tokens. ``hidden[:, j]`` is the input of the LM head at the position that
predicts response token ``j`` (the DelTA gradient proxy's ``h``).

| name              | function                                    | paper / card (training/ALGORITHMS.md) |
|-------------------|---------------------------------------------|---------------------------------------|
| uniform           | ``uniform``                                 | GRPO / DAPO                           |
| delta             | ``training.credit_delta.delta``             | DelTA arXiv 2605.21467 §3, App. H     |
| delta_within_side | ``training.credit_delta.delta_within_side`` | DelTA Table 2 ablation                |
| cf                | ``training.credit_cf.cf`` (mode knob)       | CF arXiv 2602.09331, aligntune code   |
| forking_tokens    | ``forking_tokens``                          | 80/20, arXiv 2506.01939               |
| random_weights    | ``random_weights``                          | control                               |
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping

import torch
from torch import Tensor

from training.credit_cf import cf
from training.credit_delta import delta, delta_within_side

# (prompt_ids [B,P], prompt_mask [B,P], response_ids [B,R], response_mask [B,R]) -> logp [B,R], no grad,
# under the current policy; used by counterfactual methods that re-score edited responses.
LogProbFn = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]
# (rows [n] batch rows, edited response ids [n,R], first_edit [n]) -> logp [n,R], no grad, current policy:
# the same numbers as LogProbFn on the edited rows, computed from each row's unedited prefix cache
# (training.scoring.edited_logp). Optional; CF falls back to LogProbFn without it.
EditLogProbFn = Callable[[Tensor, Tensor, Tensor], Tensor]


@dataclass(frozen=True)
class CreditBatch:
    """Everything a token-weight function may read, computed once per rollout batch by the loop."""

    prompt_ids: Tensor  # [B, P] left padded
    prompt_mask: Tensor  # [B, P] 1 on real prompt tokens
    response_ids: Tensor  # [B, R] right padded
    response_mask: Tensor  # [B, R] float, 1 on real response tokens
    old_logp: Tensor  # [B, R] log pi_old(response_j | ...)
    entropy: Tensor  # [B, R] entropy of pi_old at each response position
    advantages: Tensor  # [B] sequence advantage
    group_ids: Tensor  # [B] prompt group of each response
    hidden: Tensor | None  # [B, R, H] LM-head input (only if the preset asks for it)
    pad_token_id: int
    tokenizer: Any  # a transformers tokenizer (decode / offsets for span detection)
    logp_fn: LogProbFn | None  # re-score edited responses under the current policy
    generator: torch.Generator  # seeded RNG for random ablations
    edit_logp_fn: EditLogProbFn | None = None  # prefix-cached re-scoring of edited rows (faster logp_fn)


def uniform(batch: CreditBatch) -> Tensor:
    """w = 1 on every response token: plain GRPO / DAPO."""
    return batch.response_mask.clone()


def forking_tokens(batch: CreditBatch, *, top_quantile: float = 0.2) -> Tensor:
    """80/20 "forking tokens" (Wang et al. 2025, arXiv 2506.01939 §4): w = 1[H_t >= q_{1-rho}], rho = 0.2.

    Keeps the k = ceil(top_quantile * N) highest theta_old entropies among the N valid response tokens of
    the rollout batch (ties at the threshold kept); TRL's ``get_high_entropy_mask`` thresholds at
    ``torch.quantile`` instead, which differs by at most the interpolation at the boundary and fails
    above 2^24 tokens. With ``token_mean`` the normaliser still counts every valid token (TRL
    multiplies the per-token loss by the mask before aggregation), so the step is ~rho times smaller
    than DAPO's; the paper's verl code (not read) may renormalise over the kept tokens instead.
    """
    if not 0.0 < top_quantile <= 1.0:
        raise ValueError(f"forking_tokens: top_quantile must be in (0, 1], got {top_quantile}")
    mask = batch.response_mask > 0  # [B, R]
    ent = batch.entropy.float()  # [B, R]
    if not mask.any():
        return batch.response_mask.clone()
    valid = ent[mask]  # [N]
    k = max(1, math.ceil(top_quantile * valid.numel() - 1e-9))  # 1e-9: 0.2 * 15 = 3.0000000000000004
    threshold = torch.kthvalue(valid, valid.numel() - k + 1).values  # [] k-th largest
    return ((ent >= threshold) & mask).to(batch.response_mask.dtype)  # [B, R]


def random_weights(
    batch: CreditBatch, *, low: float = 0.8, high: float = 1.2, normalise: bool = True
) -> Tensor:
    """Control row: w ~ U(low, high) i.i.d. per valid token, then (optionally) w * N / sum w (mean 1).

    With the DelTA defaults this has DelTA's range and normalisation but no signal (the "random"
    control of algorithms.md §4); ``batch.generator`` makes it reproducible.
    """
    mask = batch.response_mask.float()  # [B, R]
    u = torch.rand(mask.shape, generator=batch.generator).to(mask.device)  # [B, R], CPU generator
    w = (low + (high - low) * u) * mask  # [B, R]
    if normalise and mask.sum() > 0:
        w = w * (mask.sum() / w.sum())
    return w.to(batch.response_mask.dtype)


TokenWeightFn = Callable[..., Tensor]
TOKEN_WEIGHTS: Mapping[str, TokenWeightFn] = MappingProxyType({
    "uniform": uniform,
    "delta": delta,
    "delta_within_side": delta_within_side,
    "cf": cf,
    "forking_tokens": forking_tokens,
    "random_weights": random_weights,
})


def get_token_weight_fn(name: str) -> TokenWeightFn:
    """Look up a token-weight function by name; the error lists the valid ones."""
    try:
        return TOKEN_WEIGHTS[name]
    except KeyError:
        raise KeyError(f"unknown token-weight function {name!r}; valid: {sorted(TOKEN_WEIGHTS)}") from None
