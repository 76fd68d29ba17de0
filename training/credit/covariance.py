"""Clip-Cov (``clip_cov``) and KL-Cov (``kl_cov``) (Cui et al. 2025, "The Entropy Mechanism of Reinforcement
Learning for Reasoning Language Models", arXiv 2505.22617 §4; verl ``core_algos.compute_policy_loss_clip_cov`` /
``_kl_cov``, adapted from PRIME-RL/Entropy-Mechanism-of-RL).

Both rank tokens by the centred covariance of advantage and log-probability over the batch's valid tokens,

    cov_t = (A_t - mean A) (log pi(y_t) - mean log pi),

the term whose sum drives the entropy change of a softmax policy under policy gradient (§3, Lemma/Theorem 1);
high-covariance tokens collapse entropy. Clip-Cov detaches the gradient of a random ``clip_ratio`` share of the
tokens with ``lb < cov < ub`` (a token weight 0); KL-Cov puts ``ppo_kl_coef * |log pi - log pi_old|`` on the top
``kl_cov_ratio`` share by cov (a per-token KL coefficient, ``TOKEN_TERMS``). Both are computed here once per
rollout batch at theta_old, where log pi = log pi_old (ratio 1): training/ALGORITHMS.md, Clip-Cov / KL-Cov cards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from training.registry import register

if TYPE_CHECKING:
    from training.credit.batch import CreditBatch


def token_covariance(advantages: Tensor, logp: Tensor, mask: Tensor) -> Tensor:
    """cov_t [B, R] (module docstring) with means over valid tokens; ``advantages`` [B] or [B, R]."""
    adv = advantages.unsqueeze(-1).expand_as(logp) if advantages.dim() == 1 else advantages
    mask = mask.to(logp.dtype)
    n = mask.sum().clamp(min=1.0)
    return (adv - (adv * mask).sum() / n) * (logp - (logp * mask).sum() / n)


@register("token_weights", reads={"old_logp"}, cite="Clip-Cov arXiv 2505.22617 §4, verl")
def clip_cov(batch: "CreditBatch", *, clip_ratio: float, cov_lb: float, cov_ub: float) -> Tensor:
    """Clip-Cov token weights [B, R]: 0 on max(1, int(clip_ratio * N)) tokens drawn at random (``batch.generator``)
    among the valid tokens with ``cov_lb < cov_t < cov_ub``, 1 elsewhere on the mask (verl defaults 2e-4, 1, 5).
    At ratio 1 no token is PPO-clipped, so verl's exclusion of clipped tokens selects none."""
    if not clip_ratio > 0:
        raise ValueError(f"clip_cov: clip_ratio must be > 0, got {clip_ratio}")
    mask = batch.response_mask
    cov = token_covariance(batch.advantages.float(), batch.old_logp.float(), mask)
    eligible = torch.nonzero((cov < cov_ub) & (cov > cov_lb) & (mask > 0))  # [n, 2]
    clip_num = max(int(clip_ratio * float(mask.sum())), 1)
    chosen = eligible[torch.randperm(len(eligible), generator=batch.generator)[:clip_num]]
    w = mask.clone()
    w[chosen[:, 0], chosen[:, 1]] = 0.0
    return w


@register("token_terms", reads={"old_logp"}, backends=("native",), cite="KL-Cov arXiv 2505.22617 §4, verl")
def kl_cov(batch: "CreditBatch", *, kl_cov_ratio: float, ppo_kl_coef: float) -> dict[str, Tensor]:
    """KL-Cov's per-token KL coefficient {"kl_beta": [B, R]}: ``ppo_kl_coef`` on the top max(1, int(kl_cov_ratio *
    N)) valid tokens by cov_t, 0 elsewhere (verl defaults 2e-4, 1.0); the preset applies it to
    |log pi - log pi_old| (``kl_estimator="abs"``, ``kl_reference="old"``)."""
    if not kl_cov_ratio > 0:
        raise ValueError(f"kl_cov: kl_cov_ratio must be > 0, got {kl_cov_ratio}")
    mask = batch.response_mask > 0
    coef = torch.zeros_like(batch.old_logp, dtype=torch.float32)
    n = int(mask.sum())
    if n:
        cov = token_covariance(batch.advantages.float(), batch.old_logp.float(), mask)[mask]  # [N], row-major
        top = torch.topk(cov, max(1, int(n * kl_cov_ratio)), largest=True).indices
        rows, cols = torch.nonzero(mask, as_tuple=True)
        coef[rows[top], cols[top]] = ppo_kl_coef
    return {"kl_beta": coef}
