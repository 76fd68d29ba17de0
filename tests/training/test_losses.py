"""Pure loss functions: hand-computed cases and micro-batch invariance."""

from __future__ import annotations

import math

import pytest
import torch

from training.losses import (
    AGGREGATION_MODES,
    TOKEN_MEAN_NORMALISERS,
    aggregate,
    entropy_from_logits,
    group_advantages,
    kl_k3,
    overlong_penalty,
    per_token_loss,
    ppo_clip_surrogate,
    token_mean_normaliser,
    w_reinforce_advantages,
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
    for clamp in (None, 10.0):
        kl = kl_k3(logp, ref, clamp=clamp)
        torch.testing.assert_close(kl, torch.tensor([[0.5 + math.log(2.0) - 1.0, 0.0]]))
        assert kl[0, 0].item() == pytest.approx(0.193147, abs=1e-6)
    assert kl_k3(torch.zeros(1, 1), torch.full((1, 1), 30.0), clamp=10.0).item() == 10.0  # clamped as verl


def test_kl_k3_clamp_switch_trl_vs_verl():
    """Unclamped (TRL / DeepSeekMath, default) vs verl's ``low_var_kl`` (clamp 10): equal below the clamp;
    past ref - logp ~ 2.6 the clamped k3 has zero gradient, TRL's does not (issue 17, departure 5)."""
    logp = torch.tensor([[-3.0, -1.0]], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([[0.0, -1.2]], dtype=torch.float64)  # ref - logp = 3 (past the clamp), -0.2
    trl = torch.exp(ref - logp) - (ref - logp) - 1  # TRL _compute_loss per_token_kl, no clamp
    ours = kl_k3(logp, ref, clamp=None)
    torch.testing.assert_close(ours, trl)
    verl = kl_k3(logp, ref, clamp=10.0)
    assert verl[0, 0].item() == 10.0 and ours[0, 0].item() == pytest.approx(math.exp(3) - 4)
    assert verl[0, 1].item() == pytest.approx(ours[0, 1].item())
    (g_verl,) = torch.autograd.grad(verl.sum(), logp)
    (g_trl,) = torch.autograd.grad(ours.sum(), logp)
    assert g_verl[0, 0].item() == 0.0 and g_trl[0, 0].item() == pytest.approx(1 - math.exp(3))
    assert g_verl[0, 1].item() == pytest.approx(g_trl[0, 1].item())


def test_token_mean_normalisers_native_verl_trl():
    """Three ``token_mean`` normalisers on 2 mini-batches x 2 micro-batches of uneven lengths, each against
    a port of the code it reproduces (issue 17, departures 4 and 6)."""
    g = torch.Generator().manual_seed(3)
    loss = torch.randn(8, 5, generator=g, dtype=torch.float64)
    lengths = torch.tensor([5, 1, 2, 4, 3, 5, 1, 1])
    mask = (torch.arange(5)[None] < lengths[:, None]).double()
    minis, micros = [slice(0, 4), slice(4, 8)], 2
    total = float(mask.sum())

    def ours(mode):
        out = []
        for mb in minis:
            rows = list(range(mb.start, mb.stop))
            step = 0.0
            for k in range(micros):
                i = rows[k * 2:(k + 1) * 2]
                n = token_mean_normaliser(mode, batch_tokens=total, mini_batch_tokens=float(mask[mb].sum()),
                                          micro_batch_tokens=float(mask[i].sum()), mini_batches=len(minis),
                                          mini_batch_rows=4, micro_batch_rows=len(i))
                step += aggregate(loss[i], mask[i], "token_mean", num_tokens=n, num_seqs=2).item()
            out.append(step)
        return out

    # native: the exact token mean of each optimizer step
    want_native = [float((loss[mb] * mask[mb]).sum() / mask[mb].sum()) for mb in minis]
    # verl / verl-DelTA update_policy: masked_mean per micro-batch / gradient_accumulation
    want_verl = [sum(float((loss[i] * mask[i]).sum() / mask[i].sum()) / micros
                     for i in (slice(mb.start, mb.start + 2), slice(mb.start + 2, mb.stop))) for mb in minis]
    # TRL 1.16 dapo: sum / (num_items_in_batch * grad_accum / steps_per_generation), per micro-batch, summed
    steps_per_generation = len(minis) * micros
    want_trl = [sum(float((loss[i] * mask[i]).sum() / (total * micros / steps_per_generation))
                    for i in (slice(mb.start, mb.start + 2), slice(mb.start + 2, mb.stop))) for mb in minis]
    assert ours("mini_batch") == pytest.approx(want_native, rel=1e-12)
    assert ours("micro_batch") == pytest.approx(want_verl, rel=1e-12)
    assert ours("step_mean") == pytest.approx(want_trl, rel=1e-12)
    assert want_native != pytest.approx(want_verl) and want_native != pytest.approx(want_trl)  # the fixture tells
    one = dict(batch_tokens=7.0, mini_batch_tokens=7.0, micro_batch_tokens=7.0, mini_batches=1,
               mini_batch_rows=3, micro_batch_rows=3)
    assert {token_mean_normaliser(m, **one) for m in TOKEN_MEAN_NORMALISERS} == {7.0}
    with pytest.raises(ValueError, match="valid"):
        token_mean_normaliser("bogus", **one)  # type: ignore[arg-type]


def test_token_mean_micro_batch_matches_verl_dynamic_bsz_for_unequal_micro_batches():
    """``micro_batch`` on micro-batches of 2 / 5 / 9 rows (one mini-batch of 16) against a port of
    verl-DelTA ``update_policy`` with ``use_dynamic_bsz=True`` (``run_DelTA.sh``): each micro-batch's
    ``masked_mean`` times its rows / ``ppo_mini_batch_size``, summed over the micro-batches (issue 27 item 3)."""
    g = torch.Generator().manual_seed(5)
    loss = torch.randn(16, 7, generator=g, dtype=torch.float64)
    lengths = torch.randint(1, 8, (16,), generator=g)
    mask = (torch.arange(7)[None] < lengths[:, None]).double()
    micros = [slice(0, 2), slice(2, 7), slice(7, 16)]
    want = sum(float((loss[i] * mask[i]).sum() / mask[i].sum()) * (i.stop - i.start) / 16 for i in micros)
    got = 0.0
    for i in micros:
        n = token_mean_normaliser("micro_batch", batch_tokens=float(mask.sum()), mini_batch_tokens=float(mask.sum()),
                                  micro_batch_tokens=float(mask[i].sum()), mini_batches=1, mini_batch_rows=16,
                                  micro_batch_rows=i.stop - i.start)
        got += aggregate(loss[i], mask[i], "token_mean", num_tokens=n, num_seqs=float(i.stop - i.start)).item()
    assert got == pytest.approx(want, rel=1e-12)
    # 1 / (number of micro-batches) per micro-batch (the switch before issue 27) is another loss here
    thirds = sum(float((loss[i] * mask[i]).sum() / mask[i].sum()) / 3 for i in micros)
    assert abs(thirds - want) > 1e-3


def test_w_reinforce_matches_rlvr_decomposed():
    """Port of ``compute_psr_nsr_outcome_advantage(advantage="weighted")`` (outcome reward on the last token,
    gamma 1): returns r, correct (score 1) x lambda, incorrect (0 / -1) minus 1."""
    scores = torch.tensor([1.0, 0.0, -1.0, 1.0, 0.5], dtype=torch.float64)
    lam = 0.1
    R = 4
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.float64)
    token_rewards = torch.zeros(5, R, dtype=torch.float64)
    token_rewards[torch.arange(5), mask.sum(-1).long() - 1] = scores
    returns = torch.zeros_like(token_rewards)
    running = torch.zeros(5, dtype=torch.float64)
    for t in reversed(range(R)):
        running = token_rewards[:, t] + running
        returns[:, t] = running
        running = running * mask[:, t]
    adv = returns.clone()
    adv[scores == 1] *= lam
    adv[(scores == 0) | (scores == -1)] -= 1
    want = (adv * mask)[:, 0]
    got = w_reinforce_advantages(scores, torch.zeros(5, dtype=torch.long), scale_by_std=True, positive_weight=lam)
    torch.testing.assert_close(got.double(), want)
    assert got.tolist() == pytest.approx([0.1, -1.0, -2.0, 0.1, 0.5])


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
        tok, _, _ = per_token_loss(logp, old_logp[rows], adv[rows], w[rows], eps_low=0.2, eps_high=0.28,
                                dual_clip_c=3.0, kl_beta=0.04, weights_on_kl=weights_on_kl, kl_clamp=None,
                                ref_logp=ref_logp[rows])
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
    tok, kl, _ = per_token_loss(logp, old, torch.tensor([2.0]), torch.tensor([[0.5]]), eps_low=0.2, eps_high=0.28,
                             dual_clip_c=None, kl_beta=0.1, weights_on_kl=weights_on_kl, kl_clamp=None, ref_logp=ref)
    pg = -2.0 * math.exp(0.1)
    k3 = math.exp(-0.5) + 0.5 - 1.0
    want = 0.5 * (pg + 0.1 * k3) if weights_on_kl else 0.5 * pg + 0.1 * k3
    assert kl.item() == pytest.approx(k3, abs=1e-6) and tok.item() == pytest.approx(want, abs=1e-6)
    no_ref, kl0, _ = per_token_loss(logp, old, torch.tensor([2.0]), torch.tensor([[0.5]]), eps_low=0.2, eps_high=0.28,
                                 dual_clip_c=None, kl_beta=0.1, weights_on_kl=weights_on_kl, kl_clamp=None)
    assert kl0.item() == 0.0 and no_ref.item() == pytest.approx(0.5 * pg, abs=1e-6)
