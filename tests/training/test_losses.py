"""Pure loss functions: hand-computed cases and micro-batch invariance."""

from __future__ import annotations

import math

import pytest
import torch

from training.losses import (
    AGGREGATION_MODES,
    aggregate,
    entropy_from_logits,
    group_advantages,
    kl_k3,
    overlong_penalty,
    per_token_loss,
    ppo_clip_surrogate,
)

torch.set_num_threads(1)


def test_group_advantages_hand_computed():
    # group 0 = rows 0,2,4,6 rewards (1,0,0,1): mean 0.5, unbiased std sqrt(1/3) -> +-0.5*sqrt(3) = +-0.866025
    # group 1 = rows 1,3,5,7 all equal -> 0; group 2 = a single row -> A = r (mean 0, std 1, as verl)
    rewards = torch.tensor([1.0, 2.0, 0.0, 2.0, 0.0, 2.0, 1.0, 2.0, 0.7])
    group_ids = torch.tensor([0, 1, 0, 1, 0, 1, 0, 1, 2])
    adv = group_advantages(rewards, group_ids, scale_by_std=True)
    a = 0.5 / (math.sqrt(1 / 3) + 1e-6)
    expected = torch.tensor([a, 0.0, -a, 0.0, -a, 0.0, a, 0.0, 0.7 / (1 + 1e-6)])
    torch.testing.assert_close(adv, expected)
    assert adv[0].item() == pytest.approx(0.866025, abs=1e-5)
    dr = group_advantages(rewards, group_ids, scale_by_std=False)  # Dr.GRPO: centred only
    torch.testing.assert_close(dr, torch.tensor([0.5, 0.0, -0.5, 0.0, -0.5, 0.0, 0.5, 0.0, 0.7]))


def test_overlong_penalty_hand_computed():
    # L_max 20, L_cache 4: 0 up to 16, linear to -1 at 20, -1 beyond (clamped)
    lengths = torch.tensor([10, 16, 17, 18, 20, 25])
    pen = overlong_penalty(lengths, max_len=20, cache_len=4)
    torch.testing.assert_close(pen, torch.tensor([0.0, 0.0, -0.25, -0.5, -1.0, -1.0]))


def test_ppo_clip_and_dual_clip_hand_computed():
    ratios = torch.tensor([[1.5, 1.5, 0.5, 0.5, 5.0, 2.0, 5.0]])
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0, -1.0, -1.0, 1.0]])
    old = torch.zeros_like(ratios)
    logp = ratios.log()
    # -min(rA, clip(r, 0.8, 1.28) A):
    #   r=1.5,A=+1 -> -1.28 | r=1.5,A=-1 -> 1.5 | r=0.5,A=+1 -> -0.5 | r=0.5,A=-1 -> 0.8
    #   r=5,A=-1 -> 5 | r=2,A=-1 -> 2 | r=5,A=+1 -> -1.28
    loss = ppo_clip_surrogate(logp, old, adv, eps_low=0.2, eps_high=0.28)
    torch.testing.assert_close(loss, torch.tensor([[-1.28, 1.5, -0.5, 0.8, 5.0, 2.0, -1.28]]))
    # dual clip c=3 caps negative-advantage losses at -A*c = 3; positive-advantage tokens untouched
    loss_dc = ppo_clip_surrogate(logp, old, adv, eps_low=0.2, eps_high=0.28, dual_clip_c=3.0)
    torch.testing.assert_close(loss_dc, torch.tensor([[-1.28, 1.5, -0.5, 0.8, 3.0, 2.0, -1.28]]))
    # symmetric clip 0.2
    sym = ppo_clip_surrogate(logp, old, adv, eps_low=0.2, eps_high=0.2)
    assert sym[0, 0].item() == pytest.approx(-1.2)


def test_ppo_clip_gradient_zero_when_clipped():
    logp = torch.tensor([[math.log(1.5), math.log(1.1)]], requires_grad=True)
    loss = ppo_clip_surrogate(logp, torch.zeros(1, 2), torch.ones(1, 2), eps_low=0.2, eps_high=0.28)
    loss.sum().backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, -1.1]]))  # d(-r)/dlogp = -r when unclipped


def test_kl_k3_hand_computed():
    # pi = 0.5, pi_ref = 0.25: ref/pi - log(ref/pi) - 1 = 0.5 + log 2 - 1 = 0.193147
    logp = torch.log(torch.tensor([[0.5, 0.3]]))
    ref = torch.log(torch.tensor([[0.25, 0.3]]))
    kl = kl_k3(logp, ref)
    torch.testing.assert_close(kl, torch.tensor([[0.5 + math.log(2.0) - 1.0, 0.0]]))
    assert kl[0, 0].item() == pytest.approx(0.193147, abs=1e-6)
    assert kl_k3(torch.zeros(1, 1), torch.full((1, 1), 30.0)).item() == 10.0  # clamped as verl


def test_aggregate_hand_computed_2x3():
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    # token_mean: (1 + 2 + 4) / 3
    assert aggregate(loss, mask, "token_mean", num_tokens=3, num_seqs=2).item() == pytest.approx(7 / 3)
    # seq_mean_token_mean: ((1 + 2) / 2 + 4 / 1) / 2
    assert aggregate(loss, mask, "seq_mean_token_mean", num_tokens=3, num_seqs=2).item() == pytest.approx(2.75)
    # seq_mean_token_sum_norm: (1 + 2 + 4) / (3 * 2)
    assert aggregate(loss, mask, "seq_mean_token_sum_norm", num_tokens=3, num_seqs=2, max_len=3).item() == (
        pytest.approx(7 / 6)
    )
    with pytest.raises(ValueError, match="max_len"):
        aggregate(loss, mask, "seq_mean_token_sum_norm", num_tokens=3, num_seqs=2)
    with pytest.raises(ValueError, match="valid"):
        aggregate(loss, mask, "bogus", num_tokens=3, num_seqs=2)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", AGGREGATION_MODES)
@pytest.mark.parametrize("weights_on_kl", [False, True])
def test_micro_batch_invariance_8x1_equals_1x8(mode, weights_on_kl):
    """Loss and gradients of batch 8 x accumulation 1 == batch 1 x accumulation 8 (global normalisers)."""
    g = torch.Generator().manual_seed(0)
    B, R, V = 8, 6, 5
    torch.manual_seed(0)
    logits = torch.randn(B, R, V, generator=g, dtype=torch.float64)
    ids = torch.randint(0, V, (B, R), generator=g)
    lengths = torch.tensor([6, 1, 3, 5, 2, 6, 4, 3])
    mask = (torch.arange(R)[None] < lengths[:, None]).double()
    old_logp = torch.log_softmax(logits + 0.3 * torch.randn(B, R, V, generator=g, dtype=torch.float64), -1)
    old_logp = old_logp.gather(-1, ids[..., None]).squeeze(-1)
    ref_logp = old_logp - 0.1
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    w = 0.5 + torch.rand(B, R, generator=g, dtype=torch.float64)
    num_tokens, num_seqs = mask.sum().item(), float(B)

    def step(rows: slice, param: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(param[rows], -1).gather(-1, ids[rows][..., None]).squeeze(-1)
        tok, _ = per_token_loss(logp, old_logp[rows], adv[rows], w[rows], eps_low=0.2, eps_high=0.28,
                                dual_clip_c=3.0, kl_beta=0.04, weights_on_kl=weights_on_kl, ref_logp=ref_logp[rows])
        return aggregate(tok, mask[rows], mode, num_tokens=num_tokens, num_seqs=num_seqs, max_len=R)

    full_param = logits.clone().requires_grad_(True)
    full = step(slice(0, B), full_param)
    full.backward()
    micro_param = logits.clone().requires_grad_(True)
    total = torch.zeros((), dtype=torch.float64)
    for i in range(B):
        part = step(slice(i, i + 1), micro_param)
        part.backward()  # gradient accumulation
        total = total + part.detach()
    torch.testing.assert_close(total, full.detach())
    torch.testing.assert_close(micro_param.grad, full_param.grad)
    assert full_param.grad.abs().sum() > 0


def test_entropy_from_logits():
    assert entropy_from_logits(torch.zeros(2, 7)).tolist() == pytest.approx([math.log(7)] * 2)
    assert entropy_from_logits(torch.tensor([[100.0, 0.0, 0.0]])).item() == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("weights_on_kl", [False, True])
def test_per_token_loss_by_hand(weights_on_kl):
    """One token, numbers worked by hand: ratio e^0.1, A = 2, clip .2/.28 -> pg = -2 * min(e^0.1, 1.28);
    k3 with ref - logp = -0.5: e^-0.5 + 0.5 - 1; w = 0.5, beta = 0.1."""
    logp, old, ref = torch.tensor([[-1.0]]), torch.tensor([[-1.1]]), torch.tensor([[-1.5]])
    tok, kl = per_token_loss(logp, old, torch.tensor([2.0]), torch.tensor([[0.5]]), eps_low=0.2, eps_high=0.28,
                             dual_clip_c=None, kl_beta=0.1, weights_on_kl=weights_on_kl, ref_logp=ref)
    pg = -2.0 * math.exp(0.1)
    k3 = math.exp(-0.5) + 0.5 - 1.0
    want = 0.5 * (pg + 0.1 * k3) if weights_on_kl else 0.5 * pg + 0.1 * k3
    assert kl.item() == pytest.approx(k3, abs=1e-6) and tok.item() == pytest.approx(want, abs=1e-6)
    no_ref, kl0 = per_token_loss(logp, old, torch.tensor([2.0]), torch.tensor([[0.5]]), eps_low=0.2, eps_high=0.28,
                                 dual_clip_c=None, kl_beta=0.1, weights_on_kl=weights_on_kl)
    assert kl0.item() == 0.0 and no_ref.item() == pytest.approx(0.5 * pg, abs=1e-6)
