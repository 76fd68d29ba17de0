"""Token weights that need no model: ``uniform`` (GRPO/DAPO), ``forking_tokens`` (80/20) and the random control
``random_weights``."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from training.credit.batch import CreditBatch
from training.registry import register


@register("token_weights", cite="GRPO / DAPO")
def uniform(batch: CreditBatch) -> Tensor:
    """w = 1 on every response token: plain GRPO / DAPO."""
    return batch.response_mask.clone()


@register("token_weights", reads={"entropy"}, cite="80/20 forking tokens, arXiv 2506.01939")
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


@register("token_weights", cite="control: DelTA's range, no signal")
def random_weights(
    batch: CreditBatch, *, low: float = 0.8, high: float = 1.2, normalise: bool = True
) -> Tensor:
    """Control row: w ~ U(low, high) i.i.d. per valid token, then (optionally) w * N / sum w (mean 1).

    With the DelTA defaults this has DelTA's range and normalisation but no signal (the "random"
    control of ``training/ALGORITHMS.md``); ``batch.generator`` makes it reproducible.
    """
    mask = batch.response_mask.float()  # [B, R]
    u = torch.rand(mask.shape, generator=batch.generator).to(mask.device)  # [B, R], CPU generator
    w = (low + (high - low) * u) * mask  # [B, R]
    if normalise and mask.sum() > 0:
        w = w * (mask.sum() / w.sum())
    return w.to(batch.response_mask.dtype)
