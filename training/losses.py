"""Pure loss functions for RLVR policy-gradient training (verl ``core_algos.py`` style).

Four stages, composed by the named presets in :mod:`training.presets`; the loop never branches on
an algorithm name:

    advantage(rewards[B], group_ids[B])            -> adv[B]          (``group``: GRPO / Dr.GRPO; ``w_reinforce``)
    token weights (training.credit)                 -> w[B, R]         (uniform, DelTA, CF, ...)
    surrogate(logp, old_logp, adv_t, eps...)        -> loss[B, R]      (``ppo_clip``: PPO clip, clip-higher, dual
                                                                        clip; ``cispo``)
    per_token_loss(..., w, kl_beta, weights_on_kl)  -> (loss, kl, clipped)[B, R]  (surrogate x weights + KL)
    aggregate(loss, mask, mode, num_tokens, ...)    -> scalar          (named by formula)

Shapes: ``B`` sequences in the (micro-)batch, ``R`` response positions. Every per-token tensor is
aligned to response tokens: ``logp[:, j] = log pi(response_j | prompt, response_<j)``.
All losses are *minimised* (they are negated objectives).

Global normalisers (``num_tokens``, ``num_seqs``) are passed in by the caller, which counts them over
the whole optimizer step; summing micro-batch losses then equals the full-batch loss exactly.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch
from torch import Tensor

from training.registry import get, register

AggregationMode = Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"]
AGGREGATION_MODES: tuple[str, ...] = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")


@register("outcome_advantage", "group", cite="GRPO (DeepSeekMath eq. 3); Dr.GRPO without std")
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


RatioLevel = Literal["token", "sequence", "sequence_token"]
RATIO_LEVELS: tuple[str, ...] = ("token", "sequence", "sequence_token")


def log_importance_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor | None, level: RatioLevel) -> Tensor:
    """log r [B, R] (or [B, 1]) of the surrogate at ``level`` (GSPO, arXiv 2507.18071 §4):

    - ``token``: log pi(y_t) - log pi_old(y_t)  (PPO / GRPO);
    - ``sequence``: log s_i = mean_t (log pi - log pi_old) over the response's valid tokens, [B, 1]; TRL
      ``GRPOTrainer`` ``importance_sampling_level="sequence"`` (GSPO eq. 7);
    - ``sequence_token``: log s_i,t = log pi(y_t) - sg[log pi(y_t)] + sg[log s_i], clamped at 10 as verl
      ``compute_policy_loss_gspo`` (GSPO-token eq. 13: the value of s_i, a per-token gradient).
    """
    log_ratio = logp - old_logp
    if level == "token":
        return log_ratio
    if mask is None:
        raise ValueError(f"ratio level {level!r} needs the response mask")
    mask = mask.to(log_ratio.dtype)
    seq = (log_ratio * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1.0)  # [B, 1]
    if level == "sequence":
        return seq
    if level == "sequence_token":
        return torch.clamp(logp - logp.detach() + seq.detach(), max=10.0)
    raise ValueError(f"unknown ratio level {level!r}; valid: {RATIO_LEVELS}")


def clip_ratio(ratio: Tensor, eps_low: float | Tensor, eps_high: float | Tensor) -> Tensor:
    """clip(r, 1 - eps_low, 1 + eps_high); the bounds may be per-token tensors [B, R] (``token_terms``)."""
    if isinstance(eps_low, Tensor) or isinstance(eps_high, Tensor):  # per-token bounds
        lo, hi = 1.0 - torch.as_tensor(eps_low, dtype=ratio.dtype), 1.0 + torch.as_tensor(eps_high, dtype=ratio.dtype)
        return torch.minimum(torch.maximum(ratio, lo), hi)
    return torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)


def ppo_clip_surrogate(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    *,
    eps_low: float | Tensor,
    eps_high: float | Tensor,
    dual_clip_c: float | None = None,
    ratio_level: RatioLevel = "token",
    mask: Tensor | None = None,
) -> Tensor:
    """Per-token clipped surrogate loss  -min(r A, clip(r, 1-eps_low, 1+eps_high) A).

    Clip-higher (eps_high > eps_low) is DAPO §3.1. ``dual_clip_c`` caps the loss of negative-advantage
    tokens at -A*c (Ye et al. 2020; verl ``clip_ratio_c``, 10.0 in the DelTA script). The bounds may be
    per-token tensors [B, R] (a preset's ``token_terms``); ``eps = inf`` is no clip (KL-Cov's surrogate).
    ``ratio_level``: the importance ratio r (:func:`log_importance_ratio`; the sequence levels need ``mask``).
    logp, old_logp: [B, R]; advantages: [B, R] (per-token) -> loss [B, R].
    """
    ratio = torch.exp(log_importance_ratio(logp, old_logp, mask, ratio_level))
    pg1 = -advantages * ratio
    pg2 = -advantages * clip_ratio(ratio, eps_low, eps_high)
    loss = torch.maximum(pg1, pg2)
    if dual_clip_c is not None:
        capped = torch.minimum(loss, -advantages * dual_clip_c)
        loss = torch.where(advantages < 0, capped, loss)
    return loss


def kl_k3(logp: Tensor, ref_logp: Tensor, *, clamp: float | None) -> Tensor:
    """k3 estimator of KL[pi || pi_ref] per token: exp(ref - logp) - (ref - logp) - 1 (DeepSeekMath eq. 4).

    ``clamp=None``: unclamped, as DeepSeekMath, TRL ``GRPOTrainer`` and aligntune. ``clamp=c``: verl's
    ``low_var_kl`` (ref - logp clamped to [-20, 20], the k3 value to [-c, c]; verl c = 10), whose
    gradient is zero once the value passes c (ref - logp > ~2.6 at c = 10). [B, R] -> [B, R].
    """
    delta = ref_logp - logp
    if clamp is None:
        return torch.exp(delta) - delta - 1.0
    delta = torch.clamp(delta, -20.0, 20.0)
    return torch.clamp(torch.exp(delta) - delta - 1.0, -clamp, clamp)


def kl_abs(logp: Tensor, ref_logp: Tensor, *, clamp: float | None = None) -> Tensor:
    """|log pi - log pi_ref| per token (verl ``kl_penalty="abs"``; KL-Cov's penalty with pi_ref = pi_old,
    arXiv 2505.22617 §4). ``clamp`` is unused (the signature of :func:`kl_k3`). [B, R] -> [B, R]."""
    del clamp
    return (logp - ref_logp).abs()


KLEstimator = Literal["k3", "abs"]
KL_ESTIMATORS = {"k3": kl_k3, "abs": kl_abs}
"""Per-token KL penalties by name: ``fn(logp, ref_logp, *, clamp) -> [B, R]``."""


@register("policy_loss", "ppo_clip", cite="PPO / GRPO / DAPO clip-higher, dual clip; GSPO ratio levels")
def ppo_clip(logp: Tensor, old_logp: Tensor, advantages: Tensor, *, eps_low: float | Tensor, eps_high: float | Tensor,
             dual_clip_c: float | None, ratio_level: RatioLevel, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """:func:`ppo_clip_surrogate` and its clip statistic: the tokens whose ratio (at ``ratio_level``, GSPO's
    sequence ratio broadcast over its tokens) lies outside [1 - eps_low, 1 + eps_high]. [B, R] each."""
    loss = ppo_clip_surrogate(logp, old_logp, advantages, eps_low=eps_low, eps_high=eps_high, dual_clip_c=dual_clip_c,
                              ratio_level=ratio_level, mask=mask)
    with torch.no_grad():
        ratio = torch.exp(log_importance_ratio(logp, old_logp, mask, ratio_level)).expand_as(logp)
        clipped = (ratio < 1 - eps_low) | (ratio > 1 + eps_high)
    return loss, clipped


@register("policy_loss", "cispo", cite="CISPO, MiniMax-M1 arXiv 2506.13585 eq. 4-5; verl, TRL loss_type='cispo'")
def cispo(logp: Tensor, old_logp: Tensor, advantages: Tensor, *, eps_low: float | Tensor, eps_high: float | Tensor,
          dual_clip_c: float | None, ratio_level: RatioLevel, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """CISPO (MiniMax-M1, arXiv 2506.13585 §3.1 eq. 4-5): clip the importance weight, stop its gradient, keep
    every token's gradient: loss = -sg(clip(r, 1 - eps_low, 1 + eps_high)) * A * log pi, so a token outside the
    band still moves with weight 1 -/+ eps instead of 0 (PPO's clip drops it). verl ``compute_policy_loss_cispo``
    exactly; TRL ``loss_type="cispo"`` (upper bound only, ``epsilon_high`` = 1 + eps_high) with eps_low >= 1.
    The clip statistic is verl's (r outside the band). No dual clip (the weight is bounded already).
    [B, R] each; ``ratio_level`` as :func:`ppo_clip` (TRL's sequence-level IS)."""
    if dual_clip_c is not None:
        raise ValueError("cispo: the clipped weight is bounded; dual_clip_c must be None")
    ratio = torch.exp(log_importance_ratio(logp, old_logp, mask, ratio_level)).expand_as(logp)
    weight = clip_ratio(ratio, eps_low, eps_high).detach()
    clipped = ((ratio < 1 - eps_low) | (ratio > 1 + eps_high)).detach()
    return -weight * advantages * logp, clipped


class LossTerms(NamedTuple):
    """:func:`per_token_loss`'s outputs, [B, R] each: the loss, the KL penalty, the clip indicator (bool)."""

    per_token: Tensor
    kl: Tensor
    clipped: Tensor


def per_token_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    weights: Tensor,
    *,
    eps_low: float | Tensor,
    eps_high: float | Tensor,
    dual_clip_c: float | None,
    kl_beta: float | Tensor,
    weights_on_kl: bool,
    kl_clamp: float | None,
    ref_logp: Tensor | None = None,
    is_ratio: Tensor | None = None,
    ratio_level: RatioLevel = "token",
    mask: Tensor | None = None,
    kl_estimator: KLEstimator = "k3",
    policy_loss: str = "ppo_clip",
) -> LossTerms:
    """The one composition of surrogate, token weights and KL: ``(per_token, kl, clipped)``, [B, R] each.

    ``policy_loss`` names the surrogate (``registry.methods("policy_loss")``; PPO's clip by default), which
    also gives the clip statistic, so both backends log the same one. ``weights_on_kl`` says whether ``w``
    multiplies the whole per-token loss (CF's ``per_token_loss * w``) or the policy-gradient term only
    (DelTA's ``weighted_adv = lambda * A``): ``w * (pg + beta * kl)`` or ``w * pg + beta * kl``.
    advantages [B] or [B, R]; ``kl`` is zero without ``ref_logp`` (``kl_clamp``: see :func:`kl_k3`);
    ``is_ratio`` (TRL's vLLM importance-sampling correction, [B, R] or [B, 1]) multiplies pg. Per-token
    surface: ``eps_low`` / ``eps_high`` / ``kl_beta`` may be [B, R] tensors, ``ratio_level`` selects GSPO's
    sequence ratio (needs ``mask``), ``kl_estimator`` the penalty (``KL_ESTIMATORS``; KL-Cov's
    |log pi - log pi_ref| with ``ref_logp`` = old log-probs).
    """
    adv_t = advantages.unsqueeze(-1).expand_as(logp) if advantages.dim() == 1 else advantages.expand_as(logp)
    pg, clipped = get("policy_loss", policy_loss).fn(logp, old_logp, adv_t, eps_low=eps_low, eps_high=eps_high,
                                                     dual_clip_c=dual_clip_c, ratio_level=ratio_level, mask=mask)
    if is_ratio is not None:
        pg = pg * is_ratio
    kl = KL_ESTIMATORS[kl_estimator](logp, ref_logp, clamp=kl_clamp) if ref_logp is not None else torch.zeros_like(pg)
    per_token = weights * (pg + kl_beta * kl) if weights_on_kl else weights * pg + kl_beta * kl
    return LossTerms(per_token, kl, clipped)


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


TokenMeanNormaliser = Literal["mini_batch", "micro_batch", "step_mean"]
TOKEN_MEAN_NORMALISERS: tuple[str, ...] = ("mini_batch", "micro_batch", "step_mean")


def token_mean_normaliser(
    mode: TokenMeanNormaliser,
    *,
    batch_tokens: float,
    mini_batch_tokens: float,
    micro_batch_tokens: float,
    mini_batches: int,
    mini_batch_rows: int,
    micro_batch_rows: int,
) -> float:
    """``num_tokens`` of :func:`aggregate` (``token_mean``) for one micro-batch of one mini-batch.

    - ``mini_batch``: the mini-batch's exact valid-token count; micro-batching never changes the loss
      (creditbench's native default: the unbiased token mean of each optimizer step).
    - ``micro_batch``: the micro-batch's own count x mini_batch_rows / micro_batch_rows: verl's (and
      verl-DelTA's ``update_policy``) per-micro-batch ``masked_mean`` times its rows / the configured
      mini-batch rows (``use_dynamic_bsz``, as ``run_DelTA.sh``; = 1 / gradient-accumulation steps when the
      micro-batches are equal, verl's other path); the result depends on how rows fall into micro-batches.
    - ``step_mean``: the rollout batch's tokens / mini_batches, TRL 1.16 ``_compute_loss`` for
      ``loss_type="dapo"`` (``num_items_in_batch`` x grad_accum / steps_per_generation): every optimizer
      step is divided by the mean tokens per step, not by its own count.

    All three agree when there is one mini-batch of one micro-batch.
    """
    if mode == "mini_batch":
        return mini_batch_tokens
    if mode == "micro_batch":
        return micro_batch_tokens * mini_batch_rows / micro_batch_rows
    if mode == "step_mean":
        return batch_tokens / max(mini_batches, 1)
    raise ValueError(f"unknown token-mean normaliser {mode!r}; valid: {TOKEN_MEAN_NORMALISERS}")


@register("outcome_advantage", "w_reinforce", backends=("native",), cite="W-REINFORCE arXiv 2506.01347")
def w_reinforce_advantages(
    scores: Tensor, group_ids: Tensor, *, scale_by_std: bool, positive_weight: float
) -> Tensor:
    """W-REINFORCE (Zhu et al. 2025, arXiv 2506.01347 "The Surprising Effectiveness of Negative
    Reinforcement"; ``TianHongZXY/RLVR-Decomposed`` ``compute_psr_nsr_outcome_advantage``, "weighted"):

        A_i = lambda * r_i  if r_i = 1 (correct),   r_i - 1  if r_i in {0, -1} (incorrect),   r_i otherwise

    i.e. +lambda on correct and -1 on incorrect responses with a 0/1 reward: REINFORCE with no baseline,
    positive samples down-weighted by lambda (0.1 in the paper). ``group_ids`` and ``scale_by_std`` are
    unused (no group baseline); they keep the signature of :func:`group_advantages`.
    scores: [B] -> [B].
    """
    del group_ids, scale_by_std
    scores = scores.float()
    correct, incorrect = scores == 1, (scores == 0) | (scores == -1)
    return torch.where(correct, positive_weight * scores, torch.where(incorrect, scores - 1.0, scores))




def entropy_from_logits(logits: Tensor) -> Tensor:
    """Per-position entropy of softmax(logits). [..., V] -> [...]."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def gae(token_rewards: Tensor, values: Tensor, mask: Tensor, *, gamma: float,
        lam: float | Tensor) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016), verl ``compute_gae_advantage_return`` numerics
    without its whitening: ``(advantages [B, R], returns = advantages + values)``, 0 off the mask.

    delta_t = r_t + gamma V_{t+1} - V_t; A_t = delta_t + gamma lam A_{t+1}, where t+1 is the next *valid*
    position (masked positions carry V and A through, as verl). ``lam``: a float or one per row [B] (VAPO's
    length-adaptive lambda). token_rewards, values, mask: [B, R].
    """
    mask = mask.to(values.dtype)
    lam = torch.as_tensor(lam, dtype=values.dtype)
    next_value = torch.zeros_like(values[:, 0])
    last = torch.zeros_like(values[:, 0])
    out = torch.zeros_like(values)
    for t in reversed(range(values.shape[1])):
        delta = token_rewards[:, t] + gamma * next_value - values[:, t]
        step = delta + gamma * lam * last
        next_value = values[:, t] * mask[:, t] + (1 - mask[:, t]) * next_value
        last = step * mask[:, t] + (1 - mask[:, t]) * last
        out[:, t] = last
    return out * mask, (out + values) * mask


def masked_whiten(x: Tensor, mask: Tensor, eps: float = 1e-8) -> Tensor:
    """(x - mean) / sqrt(var + eps) over the valid tokens, unbiased var (verl ``masked_whiten``). [B, R]."""
    mask = mask.to(x.dtype)
    n = mask.sum()
    mean = (x * mask).sum() / n
    var = ((x - mean) ** 2 * mask).sum() / n * (n / (n - 1))
    return (x - mean) * torch.rsqrt(var + eps)


def value_loss(vpreds: Tensor, returns: Tensor, values: Tensor, *, clip: float) -> Tensor:
    """PPO's clipped value loss per token, 0.5 max((V - R)^2, (clip(V, V_old +- c) - R)^2) (verl / TRL
    ``compute_value_loss``; aggregate it with :func:`aggregate`). [B, R] -> [B, R]."""
    clipped = values + torch.clamp(vpreds - values, -clip, clip)
    return 0.5 * torch.maximum((vpreds - returns) ** 2, (clipped - returns) ** 2)
