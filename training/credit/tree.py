"""Prefix-tree credit: ``tempo``, TEMPO (Tran, Yao & Yu 2025, arXiv 2509.18314, "Exploiting Tree Structure for Credit
Assignment in RL Training of LLMs"; authors' code ``fatebreaker/tempo`` @ 0a1c273,
``verl/trainer/ppo/core_algos.py::compute_tempo_outcome_advantage``).

A prompt's sampled responses, read as token sequences, form a prefix tree (the paper's Prefix-to-Tree, P2T): a
node is a prefix, and its value V(s) is the mean normalised outcome of the group's responses that pass through
it, a critic-free Monte-Carlo estimate read off samples GRPO already has. TEMPO adds to GRPO's sequence
advantage the temporal difference of each token, V(s_{t+1}) - V(s_t). Where a node has one child (every
response through s_t continues with the same token) the difference is zero, so TEMPO is GRPO except at the
branching tokens, where the responses' outcomes part ways. Card: ``training/ALGORITHMS.md`` (TEMPO).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from training.registry import register

if TYPE_CHECKING:  # pragma: no cover
    from training.credit.batch import CreditBatch


def tempo_advantages_from(adv: Tensor, ids: Tensor, mask: Tensor, group_ids: Tensor) -> Tensor:
    """A_{i,t} = A_i + V(y_{i,<=t}) - V(y_{i,<t}), [B, R], 0 off the mask.

    adv: [B] the group-normalised outcome A_i (GRPO's z-score, Dr.GRPO's centred reward); ids, mask: [B, R] the
    responses, right padded. V(s) = mean of A_k over the group's responses k whose valid tokens start with s
    (V(root) = the group's mean A). The authors' code writes the same number as (r_i - mean_g r + mean_{s_{t+1}} r
    - mean_{s_t} r) / (std_g r + eps); A is affine in r within a group, so the two are equal. Responses are
    compared on valid tokens only: a finished response leaves every deeper node (departure 2 of the card). A
    singleton group keeps A_i.
    """
    valid = mask > 0
    a_all = adv.double()
    out = a_all[:, None].expand(mask.shape).clone()
    for g in torch.unique(group_ids):
        rows = torch.nonzero(group_ids == g).flatten()
        if rows.numel() < 2:
            continue
        x, v, a = ids[rows], valid[rows], a_all[rows]
        agree = (x[:, None] == x[None]) & v[:, None] & v[None]  # [N, N, R] k and l hold the same valid token t
        after = agree.long().cumprod(-1).to(a.dtype)  # [N, N, R] l passes through k's node y_{k,<=t}
        before = torch.cat([torch.ones_like(after[..., :1]), after[..., :-1]], -1)  # ... through y_{k,<t}
        v_after = (after * a[None, :, None]).sum(1) / after.sum(1).clamp(min=1.0)  # [N, R] V(s_{t+1})
        v_before = (before * a[None, :, None]).sum(1) / before.sum(1).clamp(min=1.0)  # [N, R] V(s_t)
        out[rows] = a[:, None] + v_after - v_before
    return (out * valid).to(torch.float32)


@register("token_advantage", backends=("native",),
          cite="TEMPO arXiv 2509.18314, fatebreaker/tempo compute_tempo_outcome_advantage")
def tempo(batch: "CreditBatch") -> Tensor:
    """TEMPO token advantages [B, R]: the preset's A_i plus the prefix-tree TD step of every token (zero off the
    branching tokens), over each prompt group's responses (``batch.response_ids`` on ``batch.response_mask``)."""
    adv = batch.advantages
    if adv.dim() != 1:
        raise ValueError(f"tempo needs the sequence advantage A_i [B], got shape {tuple(adv.shape)}")
    out = tempo_advantages_from(adv.cpu(), batch.response_ids.cpu(), batch.response_mask.cpu(), batch.group_ids.cpu())
    return out.to(batch.response_mask.device)
