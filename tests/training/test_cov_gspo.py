"""Clip-Cov, KL-Cov, GSPO and GSPO-token equal the authors' public numerics on fixtures.

The reference functions below are ports of the numerics of verl ``core_algos.compute_policy_loss_clip_cov``,
``compute_policy_loss_kl_cov`` and ``compute_policy_loss_gspo`` and of TRL 1.16 ``GRPOTrainer._compute_loss``
(``importance_sampling_level="sequence"``, ``loss_type="grpo"``); ours is the preset through
``training.credit`` (weights / per-token terms at theta_old) and ``training.losses`` (loss and aggregation).
"""

from __future__ import annotations

import pytest
import torch

from training import losses
from training.credit import TOKEN_TERMS, TOKEN_WEIGHTS, CreditBatch
from training.credit.covariance import token_covariance
from training.presets import PRESETS, get_preset


def _masked_mean(x, mask):
    return (x * mask).sum() / mask.sum()


def port_verl_clip_cov(old_log_prob, log_prob, advantages, mask, *, eps_low, eps_high, clip_ratio, lb, ub):
    """verl compute_policy_loss_clip_cov (token-mean), global RNG for the random pick as verl."""
    ratio = torch.exp(log_prob - old_log_prob)
    pg1 = -advantages * ratio
    pg2 = -advantages * torch.clamp(ratio, 1 - eps_low, 1 + eps_high)
    clip_by_origin = (pg2 > pg1) & (mask > 0)
    cov = (advantages - _masked_mean(advantages, mask)) * (log_prob - _masked_mean(log_prob.detach(), mask))
    cov[mask == 0] = -torch.inf
    cov[clip_by_origin] = -torch.inf
    clip_num = max(int(clip_ratio * mask.sum().item()), 1)
    idx = torch.nonzero((cov < ub) & (cov > lb) & (mask > 0))
    idx = idx[torch.randperm(len(idx))[: min(clip_num, len(idx))]] if len(idx) else idx
    corr = torch.ones_like(advantages)
    corr[idx[:, 0], idx[:, 1]] = 0
    pg = torch.maximum(pg1, pg2) * corr
    return (pg * mask).sum() / mask.sum(), corr


def port_verl_kl_cov(old_log_prob, log_prob, advantages, mask, *, kl_cov_ratio, ppo_kl_coef):
    """verl compute_policy_loss_kl_cov (token-mean): unclipped -A r, + coef |log r| on the top-cov tokens."""
    neg_kl = log_prob - old_log_prob
    ratio = torch.exp(neg_kl)
    pg = -advantages * ratio
    pg_kl = -advantages * ratio + ppo_kl_coef * neg_kl.abs()
    valid = mask > 0
    flat_idx = torch.nonzero(valid.reshape(-1), as_tuple=True)[0]
    adv_v, lp_v = advantages[valid].detach().reshape(-1), log_prob[valid].detach().reshape(-1)
    cov = (adv_v - adv_v.mean()) * (lp_v - lp_v.mean())
    top = flat_idx[torch.topk(cov, max(1, int(len(cov) * kl_cov_ratio)), largest=True).indices]
    rows, cols = top // advantages.shape[1], top % advantages.shape[1]
    pg = pg.clone()
    pg[rows, cols] = pg_kl[rows, cols]
    return (pg * mask).sum() / mask.sum(), set(zip(rows.tolist(), cols.tolist()))


def port_trl_gspo(old_logp, logp, advantages, mask, *, eps_low, eps_high):
    """TRL GRPOTrainer._compute_loss, importance_sampling_level="sequence", loss_type="grpo", beta 0."""
    log_w = ((logp - old_logp) * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    coef_1 = torch.exp(log_w.unsqueeze(-1))
    coef_2 = torch.clamp(coef_1, 1 - eps_low, 1 + eps_high)
    per_token = -torch.min(coef_1 * advantages.unsqueeze(1), coef_2 * advantages.unsqueeze(1))
    return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()


def port_verl_gspo(old_log_prob, log_prob, advantages, mask, *, eps_low, eps_high):
    """verl compute_policy_loss_gspo (seq-mean-token-mean): the GSPO-token ratio s_i,t."""
    seq = ((log_prob - old_log_prob) * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    log_r = torch.clamp(log_prob - log_prob.detach() + seq.detach().unsqueeze(-1), max=10.0)
    r = torch.exp(log_r)
    pg = torch.maximum(-advantages * r, -advantages * torch.clamp(r, 1 - eps_low, 1 + eps_high))
    return ((pg * mask).sum(-1) / mask.sum(-1)).mean()


def fixture(seed=0, B=8, R=9):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, R + 1, (B,), generator=g)
    mask = (torch.arange(R) < lengths[:, None]).float()
    old = -torch.rand(B, R, generator=g) * 6.0  # log-probs spread over [-6, 0]: covariances of order 1-5
    adv = torch.tensor([1.5, -1.5, 1.2, -0.8, 0.9, -1.1, 1.4, -1.6])[:B]
    return old, adv, mask


def batch_of(old, adv, mask, generator):
    B, R = old.shape
    return CreditBatch(prompt_ids=torch.ones(B, 2, dtype=torch.long), prompt_mask=torch.ones(B, 2),
                       response_ids=torch.ones(B, R, dtype=torch.long), response_mask=mask, old_logp=old,
                       entropy=torch.zeros(B, R), advantages=adv, group_ids=torch.arange(B) // 4, hidden=None,
                       pad_token_id=0, tokenizer=None, logp_fn=None, generator=generator)


def ours(preset, old, logp, adv, mask, weights, terms=None, ref=None):
    kw = {**preset.loss_kwargs(), **(terms or {})}
    per_token, _, _ = losses.per_token_loss(logp, old, adv, weights, **kw, ref_logp=ref, mask=mask)
    return losses.aggregate(per_token, mask, preset.aggregation, num_tokens=float(mask.sum()),
                            num_seqs=float((mask.sum(-1) > 0).sum()), max_len=mask.shape[1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clip_cov_matches_verl_at_theta_old(seed):
    """Loss and gradient of the preset equal verl's at ratio 1 (the first mini-batch of our on-policy loop)."""
    old, adv, mask = fixture(seed)
    preset = PRESETS["clip_cov"].with_overrides({"knobs": {"clip_ratio": 0.1}})  # several tokens at this size
    w = TOKEN_WEIGHTS["clip_cov"](batch_of(old, adv, mask, torch.Generator().manual_seed(7)), **preset.knobs)
    torch.manual_seed(7)  # verl draws from the global generator
    logp_ref = old.clone().requires_grad_(True)
    want, corr = port_verl_clip_cov(old, logp_ref, adv[:, None].expand_as(old).clone(), mask,
                                    eps_low=preset.eps_low, eps_high=preset.eps_high, clip_ratio=0.1,
                                    lb=preset.knobs["cov_lb"], ub=preset.knobs["cov_ub"])
    assert int((corr == 0).sum()) == max(int(0.1 * mask.sum()), 1)  # the fixture selects tokens
    torch.testing.assert_close(w, corr * mask)
    logp = old.clone().requires_grad_(True)
    got = ours(preset, old, logp, adv, mask, w)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got, logp)[0], torch.autograd.grad(want, logp_ref)[0])


def test_clip_cov_weights_only_tokens_inside_the_covariance_band():
    old, adv, mask = fixture(3)
    cov = token_covariance(adv, old, mask)
    w = TOKEN_WEIGHTS["clip_cov"](batch_of(old, adv, mask, torch.Generator().manual_seed(0)),
                                  clip_ratio=0.5, cov_lb=1.0, cov_ub=5.0)
    zeroed = (w == 0) & (mask > 0)
    assert zeroed.any() and bool(((cov[zeroed] > 1.0) & (cov[zeroed] < 5.0)).all())
    assert torch.equal(w[mask == 0], torch.zeros_like(w[mask == 0]))


@pytest.mark.parametrize("seed", [0, 1])
def test_kl_cov_matches_verl_off_policy(seed):
    """Away from ratio 1 (a later mini-batch): KL-Cov's unclipped surrogate plus coef |log r| on the top-cov
    tokens, equal to verl's loss and gradient when the selection at theta_old is verl's at theta."""
    old, adv, mask = fixture(seed)
    preset = PRESETS["kl_cov"].with_overrides({"terms_knobs": {"kl_cov_ratio": 0.1, "ppo_kl_coef": 1.0}})
    terms = TOKEN_TERMS["kl_cov"](batch_of(old, adv, mask, torch.Generator()), **preset.terms_knobs)
    delta = 1e-3 * torch.randn(old.shape, generator=torch.Generator().manual_seed(seed))
    logp_ref = (old + delta).requires_grad_(True)
    want, picked = port_verl_kl_cov(old, logp_ref, adv[:, None].expand_as(old), mask, kl_cov_ratio=0.1,
                                    ppo_kl_coef=1.0)
    assert picked == set(map(tuple, torch.nonzero(terms["kl_beta"]).tolist()))  # same tokens selected
    logp = (old + delta).requires_grad_(True)
    got = ours(preset, old, logp, adv, mask, mask, terms, ref=old)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got, logp)[0], torch.autograd.grad(want, logp_ref)[0])
    assert preset.eps_low == preset.eps_high == float("inf") and not preset.needs_ref_model


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gspo_matches_trl_sequence_level(seed):
    old, adv, mask = fixture(seed)
    preset = get_preset("gspo")
    delta = 2e-3 * torch.randn(old.shape, generator=torch.Generator().manual_seed(seed))  # some s_i clip
    logp_ref, logp = (old + delta).requires_grad_(True), (old + delta).requires_grad_(True)
    want = port_trl_gspo(old, logp_ref, adv, mask, eps_low=preset.eps_low, eps_high=preset.eps_high)
    got = ours(preset, old, logp, adv, mask, mask)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got, logp)[0], torch.autograd.grad(want, logp_ref)[0])
    seq = torch.exp(((delta * mask).sum(-1) / mask.sum(-1)))
    assert bool(((seq > 1 + preset.eps_high) | (seq < 1 - preset.eps_low)).any())  # the clip is exercised


@pytest.mark.parametrize("seed", [0, 1])
def test_gspo_token_matches_verl_and_has_gspo_gradient(seed):
    old, adv, mask = fixture(seed)
    preset = get_preset("gspo_token")
    delta = 2e-3 * torch.randn(old.shape, generator=torch.Generator().manual_seed(seed))
    a, b, c = ((old + delta).requires_grad_(True) for _ in range(3))
    want = port_verl_gspo(old, a, adv[:, None].expand_as(old), mask, eps_low=preset.eps_low,
                          eps_high=preset.eps_high)
    got = ours(preset, old, b, adv, mask, mask)
    torch.testing.assert_close(got, want)
    g_token = torch.autograd.grad(got, b)[0]
    torch.testing.assert_close(g_token, torch.autograd.grad(want, a)[0])
    # GSPO-token with a sequence advantage has GSPO's gradient (paper eq. 14): same as the sequence level
    g_seq = torch.autograd.grad(ours(get_preset("gspo"), old, c, adv, mask, mask), c)[0]
    torch.testing.assert_close(g_token, g_seq)


def test_per_token_clip_bounds_and_kl_coefficient_are_per_token():
    """The per-token surface: a bound or coefficient tensor acts on its token only."""
    old, adv, mask = fixture(4)
    logp = old + 0.5  # ratio e^0.5: clipped everywhere at eps 0.2
    base = dict(dual_clip_c=None, weights_on_kl=False, kl_clamp=None)
    eps = torch.full_like(old, 0.2)
    eps[0, 0] = 10.0  # token (0, 0) not clipped
    loss, _, _ = losses.per_token_loss(logp, old, adv, mask, eps_low=0.2, eps_high=eps, kl_beta=0.0, **base)
    clipped, _, _ = losses.per_token_loss(logp, old, adv, mask, eps_low=0.2, eps_high=0.2, kl_beta=0.0, **base)
    assert torch.equal(loss[1:], clipped[1:]) and torch.equal(loss[0, 1:], clipped[0, 1:])
    assert float(loss[0, 0]) == pytest.approx(float(-adv[0] * torch.exp(torch.tensor(0.5)))) and adv[0] > 0
    beta = torch.zeros_like(old)
    beta[2, 1] = 3.0
    with_kl, kl, _ = losses.per_token_loss(logp, old, adv, mask, eps_low=0.2, eps_high=0.2, kl_beta=beta,
                                        ref_logp=old, kl_estimator="abs", **base)
    diff = with_kl - clipped
    assert float(diff[2, 1]) == pytest.approx(3.0 * 0.5) and float(diff.abs().sum()) == pytest.approx(1.5)


def test_clip_cov_is_dapo_plus_one_token_weight_function():
    """The plug-in claim: Clip-Cov differs from the ``dapo`` row only by its credit function and its knobs (and
    KL-Cov by its per-token terms function and the loss switches it names); no loop, batch or loss edits."""
    from dataclasses import fields

    from training.presets import Preset

    def diff(name):
        return {f.name for f in fields(Preset) if getattr(PRESETS[name], f.name) != getattr(PRESETS["dapo"], f.name)}

    assert diff("clip_cov") == {"name", "token_weights", "knobs"}
    assert diff("kl_cov") == {"name", "token_terms", "terms_knobs", "kl_estimator", "kl_reference", "eps_low",
                              "eps_high", "dual_clip_c"}
