"""Backend trl: on identical inputs the adapter's loss equals the native loop's composition of
``training.losses`` for grpo, dr_grpo, dapo, delta, cf and cf_paper; DelTA's h captured in TRL's forward
equals the native capture; two TRL steps on CPU write the native outputs (full fine-tuning and LoRA)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from common.config import config_from_dict
from training import losses
from training.phases import forward_logp
from training.presets import get_preset
from training.trl_backend import build_trainer, per_token_loss, preset_loss, train_trl, trl_normalisers

PRESETS = ["grpo", "dr_grpo", "dapo", "delta", "cf", "cf_paper", "gspo", "gspo_token", "clip_cov"]


def digit_reward(response: str, gold: str, *, timeout_s: float) -> float:
    """A reward an untrained model earns sometimes, so advantages are non-zero in two steps."""
    return float(sum(ch.isdigit() for ch in response) % 2 == 0)


def _cfg(tiny_env, scale=None, **rl):
    raw = dict(tiny_env["cfg"].raw)
    raw["rl"] = {**raw["rl"], **rl}
    raw["backend"] = "trl"
    if scale:
        raw["scale"] = {**raw["scale"], **scale}
    return config_from_dict(raw)


def native_loss(preset, logp, old_logp, advantages, w, ref_logp, mask, *, num_tokens, num_seqs, max_len):
    """``training/rl.py`` step 5: the loop's call of ``losses.per_token_loss`` and ``losses.aggregate``."""
    per_token, _ = losses.per_token_loss(logp, old_logp, advantages, w, **preset.loss_kwargs(), ref_logp=ref_logp,
                                         mask=mask)
    return per_token, losses.aggregate(per_token, mask, preset.aggregation, num_tokens=num_tokens,
                                       num_seqs=num_seqs, max_len=max_len)


def _batch(vocab: int, *, b=6, p=5, r=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    prompt_ids = torch.randint(3, vocab, (b, p), generator=g)
    completion_ids = torch.randint(3, vocab, (b, r), generator=g)
    lengths = torch.tensor([r, r - 1, 3, r, 5, 1])[:b]
    completion_mask = (torch.arange(r)[None] < lengths[:, None]).long()
    advantages = torch.randn(b, generator=g) * 2.0
    advantages[0] = -3.0  # negative advantage with a large ratio below: dual clip active for dapo-based presets
    return g, prompt_ids, torch.ones_like(prompt_ids), completion_ids, completion_mask, advantages


@pytest.mark.parametrize("name", PRESETS)
def test_pure_loss_equals_native_composition(name):
    preset = get_preset(name)
    g = torch.Generator().manual_seed(1)
    logp = -torch.rand(4, 6, generator=g) * 3
    old = logp + torch.randn(4, 6, generator=g) * 0.5
    old[0, :2] = logp[0, :2] - 3.0  # ratio e^3 > 10
    ref = logp + torch.randn(4, 6, generator=g) * 0.3
    adv = torch.tensor([-2.0, 1.0, 0.5, -0.3])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0]]).float()
    w = (0.5 + torch.rand(4, 6, generator=g)) * mask
    ref_in = ref if preset.kl_beta > 0 else None
    want_tok, want = native_loss(preset, logp, old, adv, w, ref_in, mask, num_tokens=11.0, num_seqs=4.0, max_len=6)
    assert torch.allclose(per_token_loss(preset, logp, old, adv, w, ref_in, mask=mask), want_tok, atol=0, rtol=0)
    got = preset_loss(preset, logp, old, adv, w, mask, num_tokens=11.0, num_seqs=4.0, max_len=6, ref_logp=ref_in)
    assert torch.equal(got, want)


@pytest.mark.parametrize("name", PRESETS)
def test_adapter_loss_equals_native_loss_on_identical_inputs(tiny_env, tmp_path, name):
    torch.manual_seed(0)
    preset = get_preset(name)
    cfg = _cfg(tiny_env, steps=1)
    trainer = build_trainer(cfg, preset, seed=1, sft_dir=str(tiny_env["model"]), train_path=str(tiny_env["train"]),
                            run_dir=str(tmp_path), reward_fn=digit_reward)
    model = trainer.model
    model.train()
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    g, p_ids, p_mask, c_ids, c_mask, adv = _batch(cfg.model.vocab_size)
    with torch.no_grad():
        logp, _, _ = forward_logp(model, p_ids, p_mask, c_ids, c_mask)  # the native forward
    old = logp + 0.3 * torch.randn(logp.shape, generator=g)
    old[0] = logp[0] - 3.0
    ref = logp + 0.2 * torch.randn(logp.shape, generator=g)
    mask = c_mask.float()
    w = (0.5 + torch.rand(logp.shape, generator=g)) * mask
    n_items = mask.sum()
    inputs = {"prompt_ids": p_ids, "prompt_mask": p_mask, "completion_ids": c_ids, "completion_mask": c_mask,
              "advantages": adv, "num_items_in_batch": n_items, "old_per_token_logps": old, "token_weights": w}
    if preset.kl_beta > 0:
        inputs["ref_per_token_logps"] = ref
    got = trainer._compute_loss(model, inputs)
    num_tokens, num_seqs = trl_normalisers(
        batch_rows=c_ids.size(0), num_items_in_batch=float(n_items), num_processes=1,
        grad_accum=trainer.args.gradient_accumulation_steps, steps_per_generation=trainer.args.steps_per_generation)
    assert num_tokens == float(n_items) and num_seqs == c_ids.size(0)  # one process, one mini-batch
    logp_native, _, _ = forward_logp(model, p_ids, p_mask, c_ids, c_mask)
    _, want = native_loss(preset, logp_native, old, adv, w, ref if preset.kl_beta > 0 else None, mask,
                          num_tokens=num_tokens, num_seqs=num_seqs, max_len=cfg.rl.max_new_tokens)
    assert torch.allclose(got, want, atol=1e-6, rtol=1e-5), (name, float(got), float(want))
    # the gradients agree too
    grads = []
    for loss in (got, want):
        model.zero_grad(set_to_none=True)
        loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    assert torch.allclose(grads[0], grads[1], atol=1e-6, rtol=1e-4)


def test_delta_hidden_and_entropy_captured_from_trl_forward_equal_native(tiny_env, tmp_path):
    cfg = _cfg(tiny_env, steps=1)
    trainer = build_trainer(cfg, get_preset("delta"), seed=1, sft_dir=str(tiny_env["model"]),
                            train_path=str(tiny_env["train"]), run_dir=str(tmp_path), reward_fn=digit_reward)
    model = trainer.model.eval()
    _, p_ids, p_mask, c_ids, c_mask, _ = _batch(cfg.model.vocab_size)
    trainer._capture = {}
    with torch.no_grad():
        logp, _, _ = trainer._get_per_token_logps_and_entropies(
            model, torch.cat([p_ids, c_ids], 1), torch.cat([p_mask, c_mask], 1), c_ids.size(1), batch_size=4)
        cap, trainer._capture = trainer._capture, None
        n_logp, n_ent, n_hid = forward_logp(model, p_ids, p_mask, c_ids, c_mask, capture_hidden=True,
                                            with_entropy=True)
    m = c_mask.bool()
    assert torch.allclose(logp[m], n_logp[m], atol=1e-5)
    assert torch.allclose(cap["entropy"][m], n_ent[m], atol=1e-5)
    assert cap["hidden"].shape == n_hid.shape and torch.allclose(cap["hidden"][m], n_hid[m], atol=1e-5)


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_two_trl_steps_on_cpu_write_checkpoints_and_metrics(tiny_env, tmp_path):
    cfg = _cfg(tiny_env, steps=2, checkpoint_every=1)
    train_trl(cfg, get_preset("delta"), seed=3, sft_dir=str(tiny_env["model"]), train_path=str(tiny_env["train"]),
              run_dir=str(tmp_path), reward_fn=digit_reward)
    rows = _rows(tmp_path)
    assert [r["step"] for r in rows] == [0, 1]
    for r in rows:
        assert set(r) >= {"step", "reward_mean", "accuracy", "time", "tokens_generated", "tokens_trained",
                          "peak_rss_mb", "wall_clock", "response_length", "truncated_frac", "entropy",
                          "weight_mean", "weight_std"}
        assert set(r["time"]) == {"rollout", "reward", "old_logp", "credit", "update", "checkpoint", "total"}
        assert r["processes"] == 1 and r["backend"] == "trl"
    before, after = load_file(str(tiny_env["model"] / "model.safetensors")), \
        load_file(str(tmp_path / "checkpoints" / "step2" / "model.safetensors"))
    assert (tmp_path / "checkpoints" / "step1" / "tokenizer.json").exists()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) > len(before) // 2  # the update moved the model


def test_two_trl_steps_with_lora_write_merged_hf_checkpoints(tiny_env, tmp_path):
    from transformers import AutoModelForCausalLM

    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    cfg = _cfg(tiny_env, scale={"lora": lora}, steps=2, checkpoint_every=2, lr=1e-2)
    train_trl(cfg, get_preset("cf"), seed=3, sft_dir=str(tiny_env["model"]), train_path=str(tiny_env["train"]),
              run_dir=str(tmp_path), reward_fn=digit_reward)
    ckpt = tmp_path / "checkpoints" / "step2"
    assert not (ckpt / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(ckpt)  # a plain HF folder, as evaluation loads it
    before = load_file(str(tiny_env["model"] / "model.safetensors"))
    after = {k: v for k, v in merged.state_dict().items()}
    q = [k for k in before if "q_proj" in k]
    k_only = [k for k in before if "k_proj" in k]
    assert any(not torch.equal(before[k], after[k]) for k in q)  # adapters merged into q_proj
    assert all(torch.equal(before[k], after[k]) for k in k_only)  # k_proj had no adapter
    assert [r["step"] for r in _rows(tmp_path)] == [0, 1]


def test_a_stopped_trl_run_resumes_from_its_last_checkpoint(tiny_env, tmp_path, capsys):
    common = dict(seed=5, sft_dir=str(tiny_env["model"]), train_path=str(tiny_env["train"]), run_dir=str(tmp_path),
                  reward_fn=digit_reward)
    train_trl(_cfg(tiny_env, steps=2, checkpoint_every=2), get_preset("dapo"), **common)  # "stopped" after step 2
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 2, "torn": tr')  # a half-written line from the killed process is dropped
    train_trl(_cfg(tiny_env, steps=4, checkpoint_every=2), get_preset("dapo"), **common)
    assert "resuming dapo seed 5" in capsys.readouterr().out
    assert [r["step"] for r in _rows(tmp_path)] == [0, 1, 2, 3]
    assert (tmp_path / "checkpoints" / "step4" / "model.safetensors").exists()
    assert [p.name for p in (tmp_path / "trl").glob("checkpoint-*")] == ["checkpoint-4"]


@pytest.mark.parametrize("name", ["kl_cov", "otb", "ppo_critic"])
def test_native_only_presets_are_refused_with_the_reason(tiny_env, tmp_path, name):
    """KL-Cov's per-token KL against pi_old (and OTB's token advantage) are not carried through TRL's batch."""
    with pytest.raises(NotImplementedError, match="needs the native loop"):
        build_trainer(_cfg(tiny_env), get_preset(name), seed=1, sft_dir=str(tiny_env["model"]),
                      train_path=str(tiny_env["train"]), run_dir=str(tmp_path))
