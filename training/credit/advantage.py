"""Token-level advantages that replace the sequence advantage A_i in the loss: ``otb``, ``ktae`` and ``gae``.

Every function has the signature ``fn(batch: CreditBatch, **knobs) -> adv[B, R]`` and is registered in
``training.credit.TOKEN_ADVANTAGES``; a preset names one in ``token_advantage`` (knobs in
``advantage_knobs``). Like the token weights they are computed once per rollout batch at theta_old,
under ``torch.no_grad``, and held fixed over the update. Cards: ``training/ALGORITHMS.md``.

- OTB, optimal token baseline (arXiv 2602.07078; verl ``compute_optimal_token_baseline_advantage``
  in ``verl/trainer/ppo/core_algos.py``): A_{i,t} = G_{i,t} - B_t with the per-position group baseline
  B_t = sum_i G_{i,t} W_{i,t} / (sum_i W_{i,t} + eps), W_{i,t} = sum_{j<=t} (1 - 2 pi_{i,j} + sum_v pi_v^2)
  (cumulative squared norm of the logit gradient), G_{i,t} = r_i (outcome reward-to-go).
- KTAE, key-token advantage estimation (Sun et al., NeurIPS 2025; ``xiaolizh1/KTAE``
  ``verl/workers/actor/compute_key_tokens.py`` and ``core_algos.compute_ktae_outcome_advantage_and_keytokens``):
  A_{i,t} = z_i + kt_g(y_{i,t}), kt from a per-group 2x2 table (response contains token v) x (correct).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from training import losses
from training.registry import register

if TYPE_CHECKING:  # pragma: no cover
    from training.credit.batch import CreditBatch


# ------------------------------------------------------------------------------------------- OTB


def otb_advantages_from(
    rewards: Tensor,
    group_ids: Tensor,
    mask: Tensor,
    old_logp: Tensor,
    sum_pi_sq: Tensor,
    *,
    handle_zero_tail: bool,
    eps: float,
) -> Tensor:
    """OTB advantages [B, R] from the outcome reward and the old forward's pi_t and sum_v pi_v^2.

    rewards, group_ids: [B]; mask, old_logp, sum_pi_sq: [B, R]. The outcome reward sits on the last valid
    token, so the reward-to-go G_{i,t} = r_i on every valid position. Per group (singletons: B_t = 0):
    B_t = sum_i G W m / (sum_i W m + eps); ``handle_zero_tail``: the group's unique longest response gets
    B_t = 0 past the second-longest length (verl default True). Returns (G - B) * mask.
    """
    dtype = torch.float64 if old_logp.dtype == torch.float64 else torch.float32
    mask = mask.to(dtype)
    returns = rewards.to(dtype)[:, None] * mask  # [B, R] reward-to-go of an outcome reward
    w = (1.0 - 2.0 * old_logp.to(dtype).exp() + sum_pi_sq.to(dtype)) * mask  # [B, R] ||s_t||^2 proxy
    w_cum = w.cumsum(-1)  # [B, R] W_t
    baseline = torch.zeros_like(returns)  # [B, R]
    for g in torch.unique(group_ids):
        rows = torch.nonzero(group_ids == g).flatten()
        if rows.numel() < 2:
            continue
        m, wc = mask[rows], w_cum[rows]  # [N, R]
        b = (returns[rows] * wc * m).sum(0) / ((wc * m).sum(0) + eps)  # [R]
        baseline[rows] = b
        if handle_zero_tail:
            lengths = m.sum(-1)  # [N]
            top2 = torch.sort(lengths).values[-2:]
            longest = torch.nonzero(lengths == top2[1]).flatten()
            if longest.numel() == 1 and top2[1] > top2[0]:
                baseline[rows[longest[0]], int(top2[0]):] = 0.0
    return (returns - baseline) * mask


@register("token_advantage", reads={"sum_pi_sq"}, backends=("native",), cite="OTB arXiv 2602.07078, verl")
def otb(batch: "CreditBatch", *, handle_zero_tail: bool, eps: float) -> Tensor:
    """OTB token advantages [B, R] of a rollout batch (needs ``rewards`` and ``stats['sum_pi_sq']``)."""
    if batch.rewards is None or "sum_pi_sq" not in batch.stats:
        raise ValueError("otb needs CreditBatch.rewards and .stats['sum_pi_sq'] (needs={'sum_pi_sq'} in the preset)")
    return otb_advantages_from(batch.rewards, batch.group_ids, batch.response_mask, batch.old_logp,
                               batch.stats["sum_pi_sq"], handle_zero_tail=handle_zero_tail, eps=eps)


# ------------------------------------------------------------------------------------------ KTAE


def _log_comb(n: Tensor, k: Tensor) -> Tensor:
    return torch.lgamma(n + 1) - torch.lgamma(k + 1) - torch.lgamma(n - k + 1)


def fisher_two_sided(table: Tensor) -> Tensor:
    """Two-sided Fisher exact p-value of 2x2 tables [V, 4] = (a, b, c, d): the sum of the hypergeometric
    probabilities P(k) <= P(a) over the support of the first cell. -> [V]."""
    a, b, c, d = table.unbind(-1)
    r1, c1, n = a + b, a + c, a + b + c + d
    k_lo, k_hi = torch.clamp(r1 + c1 - n, min=0.0), torch.minimum(r1, c1)
    k = torch.arange(int(k_hi.max().item()) + 1 if k_hi.numel() else 1, dtype=table.dtype)[None]  # [1, K]
    support = (k >= k_lo[:, None]) & (k <= k_hi[:, None])  # [V, K]
    kk = torch.where(support, k, k_lo[:, None])  # keep lgamma arguments valid off the support
    p_k = torch.exp(_log_comb(c1[:, None], kk) + _log_comb((n - c1)[:, None], r1[:, None] - kk)
                    - _log_comb(n[:, None], r1[:, None])) * support
    p_obs = torch.exp(_log_comb(c1, a) + _log_comb(n - c1, r1 - a) - _log_comb(n, r1))  # [V]
    return torch.where((p_k <= p_obs[:, None]) & support, p_k, torch.zeros_like(p_k)).sum(-1)


def _entropy_bits(p: Tensor) -> Tensor:
    return torch.where(p > 0, -p * torch.log2(torch.where(p > 0, p, torch.ones_like(p))), torch.zeros_like(p))


def information_gain(table: Tensor) -> Tensor:
    """IG(correct; contains v) in bits of 2x2 tables [V, 4] (0 for an empty table). -> [V]."""
    a, b, c, d = table.unbind(-1)
    n = a + b + c + d
    safe_n = torch.where(n > 0, n, torch.ones_like(n))
    h_y = _entropy_bits((a + c) / safe_n) + _entropy_bits((b + d) / safe_n)

    def cond(x1: Tensor, x2: Tensor) -> Tensor:
        tot = x1 + x2
        safe = torch.where(tot > 0, tot, torch.ones_like(tot))
        return torch.where(tot > 0, _entropy_bits(x1 / safe) + _entropy_bits(x2 / safe), torch.zeros_like(tot))

    ig = h_y - ((a + b) / safe_n * cond(a, b) + (c + d) / safe_n * cond(c, d))
    return torch.where(n > 0, ig, torch.zeros_like(ig))


def ktae_key_token_scores(
    ids: Tensor,
    mask: Tensor,
    correct: Tensor,
    vocab: int,
    *,
    alpha: float,
    beta_ig: float,
    gamma_tf: float,
    top: float,
    ignore_id: int | None,
    bm25_k1: float = 2.0,
    bm25_b: float = 0.5,
) -> Tensor:
    """KTAE's key-token score kt[v] [vocab] of one prompt group (KTAE ``ComputeKeyTokens.get_key_tokens``).

    ids, mask: [N, R] the group's responses; correct: [N] bool (reward > 0). Per token id v the table is
    (a, b, c, d) = (#correct containing v, #wrong containing v, #correct without, #wrong without), rows
    counted once; ids absent from the group's valid tokens get a zero table. With
    x = h_Cohen(a/(a+c), b/(b+d)) [+ TF_c/TF_w - TF_w/TF_c if gamma_tf, BM25-saturated term frequencies]:
    kt = top * (2 sigma((alpha e^{-2p} 1[p != 1] + beta_ig IG) x / (alpha + beta_ig)) - 1), p = Fisher p.
    All zeros if the group has no correct or no wrong response; kt[ignore_id] = 0.
    """
    dtype = torch.float64
    out = torch.zeros(vocab, dtype=dtype)
    pos, neg = correct.bool(), ~correct.bool()
    if not pos.any() or not neg.any():
        return out
    valid = mask > 0
    contains = torch.zeros(ids.shape[0], vocab, dtype=torch.bool)  # [N, V] response contains v
    contains[torch.arange(ids.shape[0])[:, None].expand_as(ids)[valid], ids[valid]] = True
    n_pos, n_neg = float(pos.sum()), float(neg.sum())
    a, b = contains[pos].sum(0).to(dtype), contains[neg].sum(0).to(dtype)  # [V]
    present = (a + b) > 0
    zero = torch.zeros_like(a)
    table = torch.stack([a, b, torch.where(present, n_pos - a, zero), torch.where(present, n_neg - b, zero)], -1)
    ig = information_gain(table) if beta_ig else zero
    if alpha:
        p = fisher_two_sided(table)
        fisher = torch.where(p != 1.0, torch.exp(-2.0 * p), zero)
    else:
        fisher = zero
    t = table
    x = (torch.asin(torch.sqrt(torch.clamp(t[:, 0] / (t[:, 0] + t[:, 2] + 1e-10), 0, 1)))
         - torch.asin(torch.sqrt(torch.clamp(t[:, 1] / (t[:, 1] + t[:, 3] + 1e-10), 0, 1))))  # Cohen's h
    if gamma_tf:
        tok_pos, tok_neg = ids[pos][valid[pos]], ids[neg][valid[neg]]
        tot_pos, tot_neg = float(tok_pos.numel()), float(tok_neg.numel())
        if tot_pos > 0 and tot_neg > 0:
            avg = (tot_pos + tot_neg) / 2
            k_pos = bm25_k1 * (1 - bm25_b + bm25_b * tot_pos / avg)
            k_neg = bm25_k1 * (1 - bm25_b + bm25_b * tot_neg / avg)
            f_pos = torch.bincount(tok_pos, minlength=vocab).to(dtype) / tot_pos
            f_neg = torch.bincount(tok_neg, minlength=vocab).to(dtype) / tot_neg
            tf_pos = f_pos * (bm25_k1 + 1) / (f_pos + k_pos)
            tf_neg = f_neg * (bm25_k1 + 1) / (f_neg + k_neg)
            x = x + tf_pos / (tf_neg + 1e-5) - tf_neg / (tf_pos + 1e-5)
    kt = (alpha * fisher + beta_ig * ig) * x / (alpha + beta_ig)
    out = (torch.sigmoid(kt) - 0.5) * 2 * top
    if ignore_id is not None and 0 <= ignore_id < vocab:
        out[ignore_id] = 0.0
    return out


@register("token_advantage", backends=("native",), cite="KTAE (xiaolizh1/KTAE)")
def ktae(batch: "CreditBatch", *, alpha: float, beta_ig: float, gamma_tf: float, top: float) -> Tensor:
    """KTAE token advantages [B, R]: A_i (group z-score, the preset's) + kt_g(y_{i,t}) on valid tokens.

    correct = reward > 0 (the reference's split of ``token_level_scores``); kt of the pad id is 0 (the
    reference zeroes Qwen's ``<|endoftext|>``, id 151643, by number).
    """
    if batch.rewards is None:
        raise ValueError("ktae needs CreditBatch.rewards")
    mask = batch.response_mask
    ids = batch.response_ids.cpu()
    vocab = int(ids.max().item()) + 1
    bonus = torch.zeros(mask.shape, dtype=torch.float64)  # [B, R]
    for g in torch.unique(batch.group_ids):
        rows = torch.nonzero(batch.group_ids == g).flatten().cpu()
        if rows.numel() < 2:
            continue
        kt = ktae_key_token_scores(ids[rows], mask[rows].cpu(), batch.rewards[rows].cpu() > 0, vocab,
                                   alpha=alpha, beta_ig=beta_ig, gamma_tf=gamma_tf, top=top,
                                   ignore_id=batch.pad_token_id)
        bonus[rows] = kt[ids[rows]]
    adv = batch.advantages.double().cpu()[:, None] + bonus
    return (adv * (mask.cpu() > 0)).to(device=mask.device, dtype=torch.float32)


# ------------------------------------------------------------------------------------------ GAE (critic)


def token_rewards_of(rewards: Tensor, mask: Tensor) -> Tensor:
    """The outcome reward on each response's last valid token, 0 elsewhere (verl ``token_level_rewards``). [B, R]."""
    out = torch.zeros_like(mask, dtype=torch.float32)
    last = (mask.sum(-1).long() - 1).clamp(min=0)
    rows = torch.arange(mask.shape[0])
    out[rows, last] = rewards.float() * (mask.sum(-1) > 0).float()
    return out


def policy_lambda(mask: Tensor, *, lam_policy: float, lam_alpha: float) -> Tensor:
    """lambda per row [B]: VAPO's length-adaptive 1 - 1/(alpha l) (arXiv 2504.05118 §3.2, eq. 8) if lam_alpha > 0,
    else the constant lam_policy."""
    lengths = mask.sum(-1).float().clamp(min=1.0)
    if lam_alpha > 0:
        return (1.0 - 1.0 / (lam_alpha * lengths)).clamp(min=0.0)
    return torch.full_like(lengths, lam_policy)


@register("token_advantage", reads={"values"}, backends=("native",), cite="GAE of a critic (VAPO arXiv 2504.05118)")
def gae(batch: "CreditBatch", *, gamma: float, lam_policy: float, lam_alpha: float) -> Tensor:
    """The policy's GAE advantages [B, R] from the critic's values at theta_old (``stats["values"]``), whitened over
    the valid tokens (verl ``compute_gae_advantage_return``); the critic's own returns use ``lam_critic``
    (``training.critic``), VAPO's decoupled GAE."""
    if batch.rewards is None or "values" not in batch.stats:
        raise ValueError("gae needs CreditBatch.rewards and .stats['values'] (a preset with a critic)")
    mask = batch.response_mask.float()
    adv, _ = losses.gae(token_rewards_of(batch.rewards, mask), batch.stats["values"].float(), mask, gamma=gamma,
                        lam=policy_lambda(mask, lam_policy=lam_policy, lam_alpha=lam_alpha))
    return losses.masked_whiten(adv, mask) * mask
