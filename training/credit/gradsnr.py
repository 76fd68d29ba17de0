"""Per-step policy-gradient signal-to-noise ratio from the LM head (issue 16): does a method reduce noise?

The first mini-batch's gradient of the LM head W [V, H] is, in closed form (softmax head, no bias),
grad_W = -sum_{i,t} c_{i,t} (e_{o_t} - p_t) h_t^T, with c the effective credit
(:func:`effective_credit`: advantage x weight x aggregation normaliser), p the
head's softmax and h its input (captured by the phase-3 forward, as DelTA's proxy reads it; DelTA §3
builds its token weights from the same per-token head gradients). Prompt groups are the independent
draws (the advantages of one group are centred together), so with G_g the sum over group g's tokens
and n groups:

    snr = ||mean_g G_g||^2 / (tr Cov(G_g) / n)

the squared norm of the mean gradient over the variance of its estimate (McCandlish et al. 2018,
"An empirical model of large-batch training", the "simple noise scale" B_simple = tr Σ / |G|^2 is n/snr).
snr ~ 1 is pure noise (E||mean||^2 = |mu|^2 + tr Σ / n); snr >> 1 is a reliable direction. The head is
one layer of the model: a cheap proxy for the full gradient, not the full gradient.
"""

from __future__ import annotations

from typing import Any

import torch

from training import losses


def effective_credit(preset: Any, advantages: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor,
                     max_len: int) -> torch.Tensor:
    """c [B, R] = -dL/d logp at logp = old_logp (``training.studies.fidelity``), through ``training.losses``."""
    mask = mask.float()
    logp = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)
    with torch.enable_grad():
        per_token = losses.per_token_loss(  # kl_beta 0: the credit of the pg term
            logp, logp.detach(), advantages.double(), weights.double(),
            **{**preset.loss_kwargs(), "kl_beta": 0.0, "kl_clamp": None}, mask=mask.double()).per_token
        loss = losses.aggregate(per_token, mask.double(), preset.aggregation, num_tokens=float(mask.sum()),
                                num_seqs=float((mask.sum(-1) > 0).sum()), max_len=max_len)
        (grad,) = torch.autograd.grad(loss, logp)
    return (-grad * mask).float()


def head_group_gradients(hidden: torch.Tensor, head_weight: torch.Tensor, response_ids: torch.Tensor,
                         credit: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """G [n_groups, V, H]: sum over each group's tokens of c_t (e_{o_t} - p_t) h_t^T (descent sign dropped)."""
    h = hidden.float()  # [B, R, H]
    W = head_weight.detach().float()  # [V, H]
    p = torch.softmax(h @ W.T, dim=-1)  # [B, R, V]
    d = -p
    d.scatter_add_(-1, response_ids.unsqueeze(-1), torch.ones_like(response_ids, dtype=d.dtype).unsqueeze(-1))
    d = d * credit.float().unsqueeze(-1)  # [B, R, V]
    per_response = torch.einsum("brv,brh->bvh", d, h)  # [B, V, H]
    groups, inverse = torch.unique(group_ids, return_inverse=True)
    out = torch.zeros(len(groups), *W.shape, dtype=per_response.dtype)
    return out.index_add_(0, inverse, per_response)


def snr_of(grads: torch.Tensor) -> dict[str, float | None]:
    """snr (module docstring), the head gradient's norm and the noise trace of n per-group gradients; snr is
    None (JSON null) when undefined: one group, or no noise (every group's gradient equal, e.g. all 0)."""
    n = grads.shape[0]
    flat = grads.reshape(n, -1).double()
    mean = flat.mean(0)
    signal = float(mean.pow(2).sum())
    noise = float((flat - mean).pow(2).sum() / (n - 1)) / n if n > 1 else 0.0
    return {"grad_snr_head": signal / noise if noise > 0 else None,
            "grad_norm_head": float(flat.sum(0).norm()), "grad_noise_head": noise}


def step_gradient_snr(preset, hidden: torch.Tensor, head_weight: torch.Tensor, response_ids: torch.Tensor,
                      advantages: torch.Tensor, weights: torch.Tensor, loss_mask: torch.Tensor,
                      group_ids: torch.Tensor, max_len: int) -> dict[str, float | None]:
    """The metrics.jsonl fields of one RL step (called by ``training.rl`` after phase 4); ``advantages`` is the
    loss's own: [B], or [B, R] for token-level advantages (OTB, KTAE)."""
    with torch.no_grad():
        credit = effective_credit(preset, advantages, weights, loss_mask, max_len)
        return snr_of(head_group_gradients(hidden, head_weight, response_ids, credit, group_ids))
