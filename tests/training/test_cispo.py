"""CISPO (MiniMax-M1, arXiv 2506.13585 §3.1) against a port of the numerics of verl's
``core_algos.compute_policy_loss_cispo`` (loss, gradient and clip fraction); TRL's own ``loss_type="cispo"``
code is run through the adapter in ``test_trl_backend.py::test_cispo_equals_trls_own_cispo_loss``."""

from __future__ import annotations

import pytest
import torch

from training import losses
from training.presets import PRESETS, get_preset


def port_verl_cispo(old_log_prob, log_prob, advantages, mask, *, clip_low, clip_high):
    """verl compute_policy_loss_cispo, token-mean: r_hat = clip(r, 1 - lo, 1 + hi), sg(r_hat), -r_hat A log pi."""
    ratio = torch.exp(log_prob - old_log_prob)
    r_hat = torch.clamp(ratio, 1 - clip_low, 1 + clip_high).detach()
    pg_losses = -r_hat * advantages * log_prob * mask
    loss = (pg_losses * mask).sum() / mask.sum()
    clipped = (ratio < 1 - clip_low) | (ratio > 1 + clip_high)
    return loss, float((clipped.float() * mask).sum() / mask.sum())


def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    logp = (-torch.rand(4, 7, generator=g) * 3).double()
    old = logp + torch.randn(4, 7, generator=g).double() * 0.6  # ratios from ~0.2 to ~5
    old[0, :2] = logp[0, :2] - 2.0  # r = e^2 > 5: clipped at the preset's eps_max too
    mask = (torch.arange(7)[None] < torch.tensor([7, 4, 6, 2])[:, None]).double()
    adv = torch.tensor([1.5, -0.7, 0.3, -2.0], dtype=torch.float64)
    return logp, old, adv, mask


@pytest.mark.parametrize(("eps_low", "eps_high"), [(0.2, 0.28), (1.0, 4.0)])
def test_cispo_matches_verl(eps_low, eps_high):
    logp, old, adv, mask = _batch()
    ours_in = logp.clone().requires_grad_(True)
    preset = get_preset("cispo", {"eps_low": eps_low, "eps_high": eps_high})
    out = losses.per_token_loss(ours_in, old, adv, mask, **preset.loss_kwargs(), mask=mask)
    ours = losses.aggregate(out.per_token, mask, preset.aggregation, num_tokens=float(mask.sum()), num_seqs=4.0)
    ref_in = logp.clone().requires_grad_(True)
    want, want_clip = port_verl_cispo(old, ref_in, adv[:, None].expand_as(old), mask, clip_low=eps_low,
                                      clip_high=eps_high)
    torch.testing.assert_close(ours, want, rtol=0, atol=1e-12)
    (g_ours,), (g_ref,) = torch.autograd.grad(ours, ours_in), torch.autograd.grad(want, ref_in)
    torch.testing.assert_close(g_ours, g_ref, rtol=0, atol=1e-12)
    assert float((out.clipped.double() * mask).sum() / mask.sum()) == pytest.approx(want_clip)
    assert 0 < want_clip < 1  # the fixture has tokens on both sides of the band


def test_cispo_keeps_the_gradient_of_tokens_ppo_clips_away():
    """r = e^2 > 1 + eps with A > 0: PPO's clipped surrogate has zero gradient there, CISPO's is -A (1 + eps) / N."""
    logp = torch.zeros(1, 2, dtype=torch.float64, requires_grad=True)
    old = torch.tensor([[-2.0, 0.0]], dtype=torch.float64)  # r = e^2 > 1 + 4
    adv, mask = torch.tensor([1.0], dtype=torch.float64), torch.ones(1, 2, dtype=torch.float64)
    grads = {}
    for name in ("dapo", "cispo"):
        out = losses.per_token_loss(logp, old, adv, mask, **PRESETS[name].loss_kwargs(), mask=mask)
        (grads[name],) = torch.autograd.grad(out.per_token.sum() / 2, logp)
    assert grads["dapo"][0, 0] == 0.0 and grads["cispo"][0, 0] == pytest.approx(-(1 + 4.0) / 2)
    assert grads["dapo"][0, 1] == grads["cispo"][0, 1] == pytest.approx(-0.5)  # r = 1: the same gradient


def test_cispo_is_dapo_with_one_policy_loss():
    """The row is DAPO with the CISPO policy loss, no lower bound (eps_low 1), eps_max 5 and no dual clip."""
    import dataclasses

    cispo, dapo = PRESETS["cispo"], PRESETS["dapo"]
    diff = {f.name for f in dataclasses.fields(cispo) if getattr(cispo, f.name) != getattr(dapo, f.name)}
    assert diff == {"name", "policy_loss", "eps_low", "eps_high", "dual_clip_c"}
    with pytest.raises(ValueError, match="dual_clip_c"):
        logp = torch.zeros(1, 1)
        losses.per_token_loss(logp, logp, torch.ones(1), logp + 1, **{**cispo.loss_kwargs(), "dual_clip_c": 3.0})
