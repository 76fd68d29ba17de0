"""Pure loss functions for RLVR policy-gradient training (verl ``core_algos.py`` style).

Four stages, composed by the named presets in :mod:`training.presets`; the loop never branches on
an algorithm name:

    advantage(rewards[B], group_ids[B])            -> adv[B]          (GRPO / Dr.GRPO)
    token weights (training.credit)                 -> w[B, R]         (uniform, DelTA, CF, ...)
    surrogate(logp, old_logp, adv_t, eps...)        -> loss[B, R]      (PPO clip, clip-higher, dual clip)
    per_token_loss(..., w, kl_beta, weights_on_kl)  -> loss[B, R]      (surrogate x weights + KL k3)
    aggregate(loss, mask, mode, num_tokens, ...)    -> scalar          (named by formula)

Shapes: ``B`` sequences in the (micro-)batch, ``R`` response positions. Every per-token tensor is
aligned to response tokens: ``logp[:, j] = log pi(response_j | prompt, response_<j)``.
All losses are *minimised* (they are negated objectives).

Global normalisers (``num_tokens``, ``num_seqs``) are passed in by the caller, which counts them over
the whole optimizer step; summing micro-batch losses then equals the full-batch loss exactly.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

AggregationMode = Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"]
AGGREGATION_MODES: tuple[str, ...] = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")


def group_advantages(rewards: Tensor, group_ids: Tensor, *, scale_by_std: bool, eps: float = 1e-6) -> Tensor:
    """Outcome advantage A_i = (r_i - mean_g r) / (std_g r + eps)   [GRPO, DeepSeekMath eq. 3].

    ``scale_by_std=False`` gives Dr.GRPO's A_i = r_i - mean_g r (arXiv 2503.20783 §3.2).
    std is the unbiased (Bessel) std, as in verl ``compute_grpo_outcome_advantage``; a group of one
    gets mean 0 and std 1 (again as verl).
    rewards: [B] float, group_ids: [B] int  ->  [B] float.
    """
    rewards = rewards.float()
    adv = torch.empty_like(rewards)
    for g in torch.unique(group_ids):
        idx = group_ids == g
        r = rewards[idx]
        if r.numel() == 1:
            mean, std = torch.zeros(()), torch.ones(())
        else:
            mean, std = r.mean(), r.std(unbiased=True)
        adv[idx] = (r - mean) / (std + eps) if scale_by_std else r - mean
    return adv


def overlong_penalty(lengths: Tensor, *, max_len: int, cache_len: int, factor: float = 1.0) -> Tensor:
    """DAPO soft overlong punishment (arXiv 2503.14476 §3.4), added to the correctness reward.

    0 if L <= max_len - cache_len; ((max_len - cache_len) - L) / cache_len inside the cache; -1 beyond
    (clamped, as verl's ``DAPORewardManager``: min(-(L - (max_len - cache_len)) / cache_len * factor, 0)).
    lengths: [B] int -> [B] float.
    """
    expected = max_len - cache_len
    pen = -(lengths.float() - expected) / cache_len * factor
    return torch.clamp(pen, min=-factor, max=0.0)


def ppo_clip_surrogate(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    *,
    eps_low: float,
    eps_high: float,
    dual_clip_c: float | None = None,
) -> Tensor:
    """Per-token clipped surrogate loss  -min(r A, clip(r, 1-eps_low, 1+eps_high) A).

    Clip-higher (eps_high > eps_low) is DAPO §3.1. ``dual_clip_c`` caps the loss of negative-advantage
    tokens at -A*c (Ye et al. 2020; verl ``clip_ratio_c``, 10.0 in the DelTA script).
    logp, old_logp: [B, R]; advantages: [B, R] (per-token) -> loss [B, R].
    """
    ratio = torch.exp(logp - old_logp)
    pg1 = -advantages * ratio
    pg2 = -advantages * torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    loss = torch.maximum(pg1, pg2)
    if dual_clip_c is not None:
        capped = torch.minimum(loss, -advantages * dual_clip_c)
        loss = torch.where(advantages < 0, capped, loss)
    return loss


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3 estimator of KL[pi || pi_ref] per token: exp(ref - logp) - (ref - logp) - 1 (DeepSeekMath eq. 4).

    Clamped to [-10, 10] like verl's ``low_var_kl``. [B, R] -> [B, R].
    """
    delta = torch.clamp(ref_logp - logp, -20.0, 20.0)
    return torch.clamp(torch.exp(delta) - delta - 1.0, -10.0, 10.0)


def per_token_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    weights: Tensor,
    *,
    eps_low: float,
    eps_high: float,
    dual_clip_c: float | None,
    kl_beta: float,
    weights_on_kl: bool,
    ref_logp: Tensor | None = None,
    is_ratio: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The one composition of surrogate, token weights and KL: ``(per_token [B, R], kl [B, R])``.

    ``weights_on_kl`` says whether ``w`` multiplies the whole per-token loss (CF's ``per_token_loss * w``)
    or the policy-gradient term only (DelTA's ``weighted_adv = lambda * A``):
    ``w * (pg + beta * kl)`` or ``w * pg + beta * kl``. advantages [B] or [B, R]; ``kl`` is zero without
    ``ref_logp``; ``is_ratio`` (TRL's vLLM importance-sampling correction, [B, R] or [B, 1]) multiplies pg.
    """
    adv_t = advantages.unsqueeze(-1).expand_as(logp) if advantages.dim() == 1 else advantages.expand_as(logp)
    pg = ppo_clip_surrogate(logp, old_logp, adv_t, eps_low=eps_low, eps_high=eps_high, dual_clip_c=dual_clip_c)
    if is_ratio is not None:
        pg = pg * is_ratio
    kl = kl_k3(logp, ref_logp) if ref_logp is not None else torch.zeros_like(pg)
    per_token = weights * (pg + kl_beta * kl) if weights_on_kl else weights * pg + kl_beta * kl
    return per_token, kl


def aggregate(
    loss: Tensor,
    mask: Tensor,
    mode: AggregationMode,
    *,
    num_tokens: float,
    num_seqs: float,
    max_len: int | None = None,
) -> Tensor:
    """Reduce a per-token loss to a scalar; the normalisers are global (whole optimizer step).

    - ``token_mean``:  sum_{i,t} l_{i,t} / num_tokens                          (DAPO §3.3, verl token-mean)
    - ``seq_mean_token_mean``: sum_i (sum_t l_{i,t} / |o_i|) / num_seqs       (GRPO eq. 3)
    - ``seq_mean_token_sum_norm``: sum_{i,t} l_{i,t} / (max_len * num_seqs)    (Dr.GRPO §3.2)

    loss, mask: [B, R]; returns a 0-dim tensor. With a micro-batch of the step and the step's global
    ``num_tokens`` / ``num_seqs``, micro-batch results sum to the full-batch value.
    """
    mask = mask.to(loss.dtype)
    if mode == "token_mean":
        return (loss * mask).sum() / max(num_tokens, 1.0)
    if mode == "seq_mean_token_mean":
        per_seq = (loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        return per_seq.sum() / max(num_seqs, 1.0)
    if mode == "seq_mean_token_sum_norm":
        if max_len is None:
            raise ValueError("seq_mean_token_sum_norm needs max_len (the max response length)")
        return (loss * mask).sum() / (max_len * max(num_seqs, 1.0))
    raise ValueError(f"unknown aggregation mode {mode!r}; valid: {AGGREGATION_MODES}")


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Per-position entropy of softmax(logits). [..., V] -> [...]."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)
