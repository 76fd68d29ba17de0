"""PPO with a learned critic (preset ``ppo_critic``, VAPO's settings): GAE, whitening and the clipped value loss
equal ports of verl's ``compute_gae_advantage_return`` / ``masked_whiten`` / ``compute_value_loss``; the decoupled
lambdas; the value head learns through the real loop and survives a resume state."""

from __future__ import annotations

import copy

import pytest
import torch
from test_rl import _cfg, digit_reward

from training import losses
from training.credit import TOKEN_ADVANTAGES, CreditBatch
from training.credit.advantage import policy_lambda, token_rewards_of
from training.critic import Critic
from training.presets import PRESETS, get_preset
from training.rl import train


def port_verl_gae(token_level_rewards, values, response_mask, gamma, lam):
    """verl compute_gae_advantage_return, before its whitening."""
    nextvalues, lastgaelam, reversed_ = 0, 0, []
    for t in reversed(range(token_level_rewards.shape[-1])):
        delta = token_level_rewards[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam_ = delta + gamma * lam * lastgaelam
        nextvalues = values[:, t] * response_mask[:, t] + (1 - response_mask[:, t]) * nextvalues
        lastgaelam = lastgaelam_ * response_mask[:, t] + (1 - response_mask[:, t]) * lastgaelam
        reversed_.append(lastgaelam)
    adv = torch.stack(reversed_[::-1], dim=1)
    return adv, adv + values


def port_verl_whiten(values, mask):
    mean = (values * mask).sum() / mask.sum()
    var = ((values - mean) ** 2 * mask).sum() / mask.sum()
    var = var * (mask.sum() / (mask.sum() - 1))
    return (values - mean) * torch.rsqrt(var + 1e-8)


def port_verl_value_loss(vpreds, returns, values, mask, cliprange_value):
    vclipped = torch.max(torch.min(vpreds, values + cliprange_value), values - cliprange_value)
    per_token = torch.max((vpreds - returns) ** 2, (vclipped - returns) ** 2)
    return 0.5 * (per_token * mask).sum() / mask.sum()


def fixture(seed=0, B=6, R=8):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([8, 3, 5, 1, 7, 6])[:B]
    mask = (torch.arange(R) < lengths[:, None]).float()
    values = torch.randn(B, R, generator=g) * mask
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0, -0.3, 1.0])[:B]
    return mask, values, rewards


@pytest.mark.parametrize("gamma,lam", [(1.0, 0.95), (0.99, 1.0), (1.0, 0.0)])
def test_gae_matches_verl(gamma, lam):
    mask, values, rewards = fixture()
    tr = token_rewards_of(rewards, mask)
    want_adv, want_ret = port_verl_gae(tr, values, mask, gamma, lam)
    adv, ret = losses.gae(tr, values, mask, gamma=gamma, lam=lam)
    torch.testing.assert_close(adv, want_adv * mask)
    torch.testing.assert_close(ret, want_ret * mask)
    torch.testing.assert_close(losses.masked_whiten(adv, mask) * mask, port_verl_whiten(want_adv, mask) * mask)


def test_per_row_lambda_is_verl_row_by_row_and_vapo_length_adaptive():
    mask, values, rewards = fixture(1)
    lam = policy_lambda(mask, lam_policy=0.95, lam_alpha=0.05)
    torch.testing.assert_close(lam, (1 - 1 / (0.05 * mask.sum(-1))).clamp(min=0))  # VAPO eq. 8, >= 0 (departure)
    lam = policy_lambda(mask, lam_policy=0.95, lam_alpha=0.5)
    tr = token_rewards_of(rewards, mask)
    adv, _ = losses.gae(tr, values, mask, gamma=1.0, lam=lam)
    for i in range(mask.shape[0]):
        want, _ = port_verl_gae(tr[i:i + 1], values[i:i + 1], mask[i:i + 1], 1.0, float(lam[i]))
        torch.testing.assert_close(adv[i:i + 1], want * mask[i:i + 1])


def test_critic_returns_at_lambda_one_are_the_outcome_reward():
    """gamma = lambda = 1 (VAPO's critic): every valid token's return is the response's reward, whatever V is."""
    mask, values, rewards = fixture(2)
    _, ret = losses.gae(token_rewards_of(rewards, mask), values, mask, gamma=1.0, lam=1.0)
    torch.testing.assert_close(ret, rewards[:, None] * mask)


def test_value_loss_matches_verl():
    mask, values, rewards = fixture(3)
    vpreds = values + torch.randn(values.shape, generator=torch.Generator().manual_seed(9))
    returns = rewards[:, None].expand_as(values)
    got = losses.aggregate(losses.value_loss(vpreds, returns, values, clip=0.5), mask, "token_mean",
                           num_tokens=float(mask.sum()), num_seqs=6.0)
    torch.testing.assert_close(got, port_verl_value_loss(vpreds, returns, values, mask, 0.5))


def test_gae_token_advantage_reads_the_critics_values():
    mask, values, rewards = fixture(4)
    B, R = mask.shape
    batch = CreditBatch(prompt_ids=torch.ones(B, 2, dtype=torch.long), prompt_mask=torch.ones(B, 2),
                        response_ids=torch.ones(B, R, dtype=torch.long), response_mask=mask, old_logp=torch.zeros(B, R),
                        entropy=torch.zeros(B, R), advantages=torch.zeros(B), group_ids=torch.arange(B), hidden=None,
                        pad_token_id=0, tokenizer=None, logp_fn=None, generator=torch.Generator(), rewards=rewards,
                        stats={"values": values})
    knobs = {**PRESETS["ppo_critic"].advantage_knobs, "lam_alpha": 0.5}  # lambda 1 - 2/l: distinct at these lengths
    got = TOKEN_ADVANTAGES["gae"](batch, **knobs)
    adv, _ = port_verl_gae(token_rewards_of(rewards, mask), values, mask, knobs["gamma"], 0.0)  # placeholder lam
    lam = policy_lambda(mask, lam_policy=knobs["lam_policy"], lam_alpha=knobs["lam_alpha"])
    want = torch.stack([port_verl_gae(token_rewards_of(rewards, mask)[i:i + 1], values[i:i + 1], mask[i:i + 1],
                                      knobs["gamma"], float(lam[i]))[0][0] for i in range(B)])
    torch.testing.assert_close(got, port_verl_whiten(want, mask) * mask)
    assert not torch.allclose(adv, want)  # the length-adaptive lambda matters on this fixture
    with pytest.raises(ValueError, match="values"):
        TOKEN_ADVANTAGES["gae"](CreditBatch(**{**batch.__dict__, "stats": {}}), **knobs)


def test_critic_step_reduces_its_value_loss():
    torch.manual_seed(0)
    mask, _, rewards = fixture(5)
    hidden = torch.randn(*mask.shape, 4)
    critic = Critic(4, {**PRESETS["ppo_critic"].critic, "value_clip": 100.0}, lr=0.05)
    first = critic.update(hidden, critic.values(hidden), rewards, mask)["value_loss"]
    for _ in range(100):
        last = critic.update(hidden, critic.values(hidden), rewards, mask)["value_loss"]
    assert last < 0.5 * first


def test_ppo_critic_trains_and_keeps_its_critic_in_the_resume_state(tiny_env, tmp_path):
    cfg = _cfg(tiny_env, steps=2, checkpoint_every=1)
    run = tmp_path / "run"
    (run / "resume").mkdir(parents=True)
    seen = {}
    import training.rl as rl_module

    real = rl_module.save_hf_atomic

    def spy(model, tokenizer, path, *, extra_state):
        seen[path.name] = copy.deepcopy(extra_state)
        return real(model, tokenizer, path, extra_state=extra_state)

    mp = pytest.MonkeyPatch()
    mp.setattr(rl_module, "save_hf_atomic", spy)
    try:
        train(cfg, get_preset("ppo_critic"), seed=3, sft_dir=str(tiny_env["model"]), train_path=str(tiny_env["train"]),
              run_dir=str(run), reward_fn=digit_reward)
    finally:
        mp.undo()
    heads = [seen[f"step{n}"]["critic"]["head"]["weight"] for n in (1, 2)]
    assert not torch.equal(heads[0], heads[1]) and heads[1].abs().sum() > 0  # the head learns step by step
    rows = [__import__("json").loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert all("value_loss" in r and "return_mean" in r for r in rows)
    # the fidelity study reads the trained head from the published checkpoint (and a zero head from the SFT one)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.critic import checkpoint_critic
    from training.phases import grade_rollout, sample_rollout
    from training.studies.fidelity_run import preset_credit

    ckpt = run / "checkpoints" / "step2"
    model, tok = AutoModelForCausalLM.from_pretrained(ckpt), AutoTokenizer.from_pretrained(ckpt, padding_side="left")
    critic = checkpoint_critic(get_preset("ppo_critic"), model, ckpt)
    assert torch.equal(critic.head.weight, heads[1])
    assert checkpoint_critic(get_preset("ppo_critic"), model, tiny_env["model"]).head.weight.abs().sum() == 0
    problems = [__import__("json").loads(line) for line in open(tiny_env["train"])]
    ro = grade_rollout(sample_rollout(model, tok, problems, cfg.rl, seed=1, step=0), tok, timeout_s=5.0,
                       reward_fn=digit_reward)
    _, mask, credit = preset_credit(model, tok, ro, get_preset("ppo_critic"), cfg, 0, critic)
    assert torch.isfinite(credit).all() and bool((credit * mask).abs().sum() > 0)
