"""Archer (arXiv 2507.15778) against a port of the numerics of ``wizard-III/ArcherCodeR``: the per-response
entropy quantile of ``dp_actor.update_policy``, the dual clip of ``core_algos.compute_policy_loss`` with
``use_token_entropy_separate`` and the two KL terms, each a token mean over its own tokens (``agg_loss``)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from training import losses
from training.credit import CreditBatch
from training.credit.entropy import archer, high_entropy_tokens
from training.phases import token_terms
from training.presets import PRESETS


def port_archer(old_log_prob, log_prob, ref_log_prob, entropy, advantages, mask, *, q, low, high, clip_c,
                kl_coef, high_kl_scale):
    """ArcherCodeR's actor loss for one micro-batch (token-mean): pg with entropy-separated clip + dual clip,
    plus kl_coef * token-mean(kl over low-entropy tokens) + high_kl_scale * token-mean(kl over high-entropy)."""
    masked_entropy = torch.where(mask.bool(), entropy.detach(), torch.nan)
    q80 = torch.nanquantile(masked_entropy, q=q, dim=-1, keepdim=True)
    low_mask = (masked_entropy <= q80) & mask.bool()  # ArcherCodeR's "high_entropy_mask": the low-entropy tokens
    high_mask = (masked_entropy > q80) & mask.bool()
    neg_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(neg_kl)
    pg1 = -advantages * ratio
    clipped = torch.where(low_mask, torch.clamp(ratio, 1 - low[0], 1 + low[1]),
                          torch.clamp(ratio, 1 - high[0], 1 + high[1]))
    pg2 = -advantages * clipped
    clip1 = torch.maximum(pg1, pg2)
    clip2 = torch.min(-advantages * clip_c, clip1)
    pg = torch.where(advantages < 0, clip2, clip1)

    def masked_mean(x, m):
        return (x * m).sum() / (m.sum() + 1e-8)

    d = torch.clamp(ref_log_prob - log_prob, min=-20, max=20)
    kld = torch.clamp(torch.exp(d) - d - 1, min=-10, max=10)
    return (masked_mean(pg, mask) + kl_coef * masked_mean(kld, low_mask.double())
            + high_kl_scale * masked_mean(kld, high_mask.double()))


def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    B, R = 4, 9
    logp = (-torch.rand(B, R, generator=g) * 3).double()
    old = logp + torch.randn(B, R, generator=g).double() * 0.4  # ratios between the two bands and beyond
    ref = logp + torch.randn(B, R, generator=g).double() * 0.5
    entropy = torch.rand(B, R, generator=g) * 2
    mask = (torch.arange(R)[None] < torch.tensor([9, 6, 8, 3])[:, None]).double()
    adv = torch.tensor([1.2, -0.8, 0.4, -1.5], dtype=torch.float64)
    batch = CreditBatch(prompt_ids=torch.ones(B, 2, dtype=torch.long), prompt_mask=torch.ones(B, 2),
                        response_ids=torch.ones(B, R, dtype=torch.long), response_mask=mask, old_logp=old,
                        entropy=entropy, advantages=adv, group_ids=torch.arange(B) // 2, hidden=None, pad_token_id=0,
                        tokenizer=None, logp_fn=None, generator=g)
    return logp, old, ref, entropy, adv, mask, batch


@pytest.mark.parametrize("high_kl_scale", [0.0, 0.3])
def test_archer_matches_archercoder(high_kl_scale):
    logp, old, ref, entropy, adv, mask, batch = _batch()
    preset = PRESETS["archer"].with_overrides({"terms_knobs": {"high_kl_scale": high_kl_scale, "kl_coef": 0.05}})
    terms = token_terms(preset, batch)
    ours_in = logp.clone().requires_grad_(True)
    out = losses.per_token_loss(ours_in, old, adv, mask, **{**preset.loss_kwargs(), **terms}, ref_logp=ref, mask=mask)
    ours = losses.aggregate(out.per_token, mask, preset.aggregation, num_tokens=float(mask.sum()), num_seqs=4.0)
    ref_in = logp.clone().requires_grad_(True)
    k = preset.terms_knobs
    want = port_archer(old, ref_in, ref, entropy, adv[:, None].expand_as(old), mask, q=k["entropy_quantile"],
                       low=(k["low_eps_low"], k["low_eps_high"]), high=(k["high_eps_low"], k["high_eps_high"]),
                       clip_c=preset.dual_clip_c, kl_coef=k["kl_coef"], high_kl_scale=high_kl_scale)
    torch.testing.assert_close(ours, want, rtol=1e-7, atol=1e-9)
    (g_ours,), (g_ref,) = torch.autograd.grad(ours, ours_in), torch.autograd.grad(want, ref_in)
    torch.testing.assert_close(g_ours, g_ref, rtol=1e-7, atol=1e-9)


def test_the_top_fifth_of_each_response_gets_the_loose_clip():
    _, _, _, entropy, _, mask, batch = _batch()
    high = high_entropy_tokens(entropy, mask, 0.8)
    assert high.sum(-1).tolist() == [2, 1, 2, 1]  # above the interpolated .8 quantile of n = 9, 6, 8, 3 tokens
    assert not (high & (mask == 0)).any()
    terms = archer(batch, **PRESETS["archer"].terms_knobs)
    low = (mask > 0) & ~high
    assert terms["eps_high"][high].tolist() == pytest.approx([0.5] * int(high.sum()))
    assert terms["eps_low"][low].tolist() == pytest.approx([0.2] * int(low.sum()))
    assert terms["kl_beta"][high].tolist() == [0.0] * int(high.sum())
    n, n_low = float(mask.sum()), int(low.sum())
    assert terms["kl_beta"][low].tolist() == pytest.approx([0.001 * n / n_low] * n_low)


def test_archer_is_dapo_with_archers_recipe_and_one_terms_function():
    archer_p, dapo = PRESETS["archer"], PRESETS["dapo"]
    diff = {f.name for f in dataclasses.fields(archer_p) if getattr(archer_p, f.name) != getattr(dapo, f.name)}
    assert diff == {"name", "token_terms", "terms_knobs", "eps_high", "kl_beta", "kl_clamp", "overlong_shaping"}
    assert archer_p.kl_beta == archer_p.terms_knobs["kl_coef"]  # the reference model loads; the terms set the KL
