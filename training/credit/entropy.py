"""Entropy-aware credit: per-token loss terms and advantages that read the policy's token entropy at theta_old
(``CreditBatch.entropy``, computed by every phase-3 forward).

- :func:`archer` (Wang et al. 2025, arXiv 2507.15778, "Stabilizing Knowledge, Promoting Reasoning: Dual-Token
  Constraints for RLVR"; code ``wizard-III/ArcherCodeR``, ``dp_actor.update_policy`` and
  ``core_algos.compute_policy_loss``): each response's tokens above its entropy quantile get a looser clip and a
  weaker KL, the rest a tighter clip and the full KL.
- :func:`entropy_advantage` (Cheng et al. 2025, arXiv 2506.14758, "Reasoning with Exploration: An Entropy
  Perspective", the entropy-based advantage): A_t + min(alpha * sg(H_t), |A_t| / kappa), a bonus on uncertain
  tokens that never flips the sign of A_t (kappa > 1) and leaves the gradient's direction to the advantage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from training.registry import register

if TYPE_CHECKING:  # pragma: no cover
    from training.credit.batch import CreditBatch


def high_entropy_tokens(entropy: Tensor, mask: Tensor, quantile: float) -> Tensor:
    """[B, R] bool: valid tokens whose entropy is above their response's ``quantile`` (``torch.nanquantile`` over
    the valid tokens, linear interpolation, as ArcherCodeR's ``q80``); a response's other valid tokens are False."""
    valid = mask > 0
    masked = torch.where(valid, entropy.float(), torch.nan)
    q = torch.nanquantile(masked, q=quantile, dim=-1, keepdim=True)  # [B, 1], NaN for an empty row
    return (masked > q) & valid


@register("token_terms", reads={"entropy"}, backends=("native",), cite="Archer arXiv 2507.15778, ArcherCodeR")
def archer(batch: "CreditBatch", *, entropy_quantile: float, low_eps_low: float, low_eps_high: float,
           high_eps_low: float, high_eps_high: float, kl_coef: float, high_kl_scale: float) -> dict[str, Tensor]:
    """Archer's dual-token constraints as per-token loss terms (``losses.per_token_loss``):

    - clip: tokens above their response's ``entropy_quantile`` (0.8) get [1 - high_eps_low, 1 + high_eps_high]
      (0.5 / 0.5), the others [1 - low_eps_low, 1 + low_eps_high] (0.2 / 0.2) (``compute_policy_loss`` with
      ``use_token_entropy_separate``);
    - KL: ArcherCodeR adds ``kl_coef * agg(kl, low) + high_kl_scale * agg(kl, high)``, each a token mean over its
      own tokens; as one token-mean loss over all N tokens that is a per-token coefficient
      kl_coef * N / N_low on low-entropy tokens and high_kl_scale * N / N_high on high-entropy ones (0 by default).

    N, N_low, N_high count the rollout batch's valid tokens (ArcherCodeR: each micro-batch's; equal with one
    micro-batch per mini-batch; training/ALGORITHMS.md, Archer departures). Returns
    ``{"eps_low", "eps_high", "kl_beta"}``, [B, R] each.
    """
    mask = batch.response_mask
    high = high_entropy_tokens(batch.entropy, mask, entropy_quantile)
    low = (mask > 0) & ~high
    n, n_low, n_high = mask.sum(), low.sum().clamp(min=1), high.sum().clamp(min=1)
    full = torch.ones_like(mask, dtype=torch.float32)
    return {"eps_low": torch.where(high, high_eps_low, low_eps_low) * full,
            "eps_high": torch.where(high, high_eps_high, low_eps_high) * full,
            "kl_beta": torch.where(high, high_kl_scale * n / n_high, kl_coef * n / n_low) * full}


@register("token_advantage", reads={"entropy"}, backends=("native",), cite="Cheng et al. arXiv 2506.14758")
def entropy_advantage(batch: "CreditBatch", *, alpha: float, kappa: float) -> Tensor:
    """A_t + psi_t, psi_t = min(alpha * H_t, |A_t| / kappa) with H_t the detached entropy of pi_old at response
    position t (Cheng et al.: "entropy-based advantage shaping", clipped so that it cannot dominate A_t nor
    reverse its sign). A_t is the sequence advantage A_i broadcast over its tokens (GRPO's). [B, R], 0 off the mask.
    """
    if kappa <= 1.0:
        raise ValueError(f"entropy_advantage: kappa must be > 1 (psi <= |A| / kappa keeps the sign), got {kappa}")
    mask = batch.response_mask
    adv = batch.advantages.unsqueeze(-1).expand_as(mask) if batch.advantages.dim() == 1 else batch.advantages
    psi = torch.minimum(alpha * batch.entropy.detach().to(adv.dtype), adv.abs() / kappa)
    return (adv + psi) * mask
