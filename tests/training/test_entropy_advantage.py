"""Entropy advantage (Cheng et al., arXiv 2506.14758): A_t + min(alpha * sg(H_t), |A_t| / kappa). The authors
released no code; the reference is the formula and its one-line form in verl-style actors (``advantages +
torch.min(alpha * entropy.detach(), advantages.abs() / kappa)``), ported below, checked through the loss."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from training import losses
from training.credit import CreditBatch
from training.phases import token_advantages
from training.presets import PRESETS, get_preset


def port_one_line(advantages, entropy, *, alpha, kappa):
    """The method's one line, as verl-style actors write it on [B, R] advantages."""
    return advantages + torch.min(alpha * entropy.detach(), advantages.abs() / kappa)


def _batch(adv, entropy, mask):
    B, R = entropy.shape
    return CreditBatch(prompt_ids=torch.ones(B, 2, dtype=torch.long), prompt_mask=torch.ones(B, 2),
                       response_ids=torch.ones(B, R, dtype=torch.long), response_mask=mask, old_logp=torch.zeros(B, R),
                       entropy=entropy, advantages=adv, group_ids=torch.arange(B) // 2, hidden=None, pad_token_id=0,
                       tokenizer=None, logp_fn=None, generator=torch.Generator())


def test_entropy_advantage_by_hand():
    """alpha .4, kappa 2: A = 1, H = (0.5, 3) -> 1 + (0.2, 0.5); A = -1 -> -1 + (0.2, 0.5): the bonus is capped at
    |A| / 2, so a negative advantage stays negative; A = 0 gets no bonus."""
    adv = torch.tensor([1.0, -1.0, 0.0])
    entropy = torch.tensor([[0.5, 3.0], [0.5, 3.0], [2.0, 2.0]])
    got = token_advantages(PRESETS["entropy_adv"], _batch(adv, entropy, torch.ones(3, 2)))
    torch.testing.assert_close(got, torch.tensor([[1.2, 1.5], [-0.8, -0.5], [0.0, 0.0]]))


@pytest.mark.parametrize(("alpha", "kappa"), [(0.4, 2.0), (0.1, 1.5)])
def test_entropy_advantage_matches_the_one_line_form_and_its_gradient(alpha, kappa):
    g = torch.Generator().manual_seed(0)
    B, R = 6, 8
    mask = (torch.arange(R)[None] < torch.tensor([8, 5, 7, 2, 8, 6])[:, None]).float()
    adv = torch.randn(B, generator=g) * 1.5
    entropy = torch.rand(B, R, generator=g) * 4
    preset = get_preset("entropy_adv", {"advantage_knobs": {"alpha": alpha, "kappa": kappa}})
    ours = token_advantages(preset, _batch(adv, entropy, mask))
    want = port_one_line(adv[:, None].expand(B, R), entropy, alpha=alpha, kappa=kappa) * mask
    torch.testing.assert_close(ours, want)
    assert (torch.sign(ours) == torch.sign(adv)[:, None] * mask).all()  # kappa > 1: no sign flips
    # through the loss at theta_old: -dL/dlogp_t = (A_t + psi_t) / N, the shaped advantage is the credit
    logp = torch.zeros(B, R, requires_grad=True)
    out = losses.per_token_loss(logp, logp.detach(), ours, mask, **preset.loss_kwargs(), mask=mask)
    loss = losses.aggregate(out.per_token, mask, preset.aggregation, num_tokens=float(mask.sum()), num_seqs=B)
    (grad,) = torch.autograd.grad(loss, logp)
    torch.testing.assert_close(-grad, want / mask.sum())


def test_entropy_advantage_is_dapo_with_one_token_advantage():
    ea, dapo = PRESETS["entropy_adv"], PRESETS["dapo"]
    diff = {f.name for f in dataclasses.fields(ea) if getattr(ea, f.name) != getattr(dapo, f.name)}
    assert diff == {"name", "token_advantage", "advantage_knobs"}
    with pytest.raises(ValueError, match="kappa"):
        token_advantages(get_preset("entropy_adv", {"advantage_knobs": {"kappa": 1.0}}),
                         _batch(torch.ones(1), torch.ones(1, 1), torch.ones(1, 1)))
