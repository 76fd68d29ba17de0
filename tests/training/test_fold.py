"""``rl.fold_old_logp``: with one mini-batch the old-log-prob forward is the update's own forward. Through the
real ``train``: the same losses, parameter gradients, weights and metrics as the two-forward path, with one
forward of the policy per micro-batch instead of two; with two mini-batches the two-forward path runs."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from test_rl import _cfg, digit_reward

from training import phases as phases_module
from training import rl as rl_module
from training.phases import folds_old_logp, peek_randperm
from training.presets import get_preset
from training.rl import train


def _run(tiny_env, run_dir, monkeypatch, name, **rl):
    """Train 2 steps; returns (gradients at each optimizer step, policy forwards, metrics rows, final weights)."""
    grads, forwards = [], []

    class RecordingAdamW(torch.optim.AdamW):
        def step(self, closure=None):
            grads.append([p.grad.clone() for g in self.param_groups for p in g["params"]])
            return super().step(closure)

    real_forward = phases_module.forward_logp

    def counting_forward(model, *args, **kwargs):
        forwards.append(torch.is_grad_enabled())
        return real_forward(model, *args, **kwargs)

    monkeypatch.setattr(rl_module.torch.optim, "AdamW", RecordingAdamW)
    monkeypatch.setattr(phases_module, "forward_logp", counting_forward)  # phases 3 and 5 (phases.update_policy)
    cfg = _cfg(tiny_env, steps=2, checkpoint_every=2, **rl)
    train(cfg, get_preset(name), seed=3, sft_dir=str(tiny_env["model"]), train_path=str(tiny_env["train"]),
          run_dir=str(run_dir), reward_fn=digit_reward)
    monkeypatch.undo()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return grads, forwards, rows, load_file(str(run_dir / "checkpoints" / "step2" / "model.safetensors"))


@pytest.mark.parametrize("name", ["dapo", "delta", "cf", "otb", "grpo"])
def test_folded_forward_equals_two_forwards(tiny_env, tmp_path, monkeypatch, name):
    g_fold, f_fold, m_fold, w_fold = _run(tiny_env, tmp_path / "fold", monkeypatch, name, fold_old_logp=True)
    g_two, f_two, m_two, w_two = _run(tiny_env, tmp_path / "two", monkeypatch, name, fold_old_logp=False)
    micro = 2  # 8 completions, micro_batch_size 4
    # the policy's forwards (the KL preset's reference forwards are no-grad in both paths)
    assert f_fold.count(True) == f_two.count(True) == 2 * micro
    assert f_two.count(False) - f_fold.count(False) == 2 * micro  # the separate phase-3 forwards, gone
    assert len(g_fold) == len(g_two) == 2
    assert any(float(a.abs().sum()) > 0 for a in g_fold[0])  # a batch with non-zero advantages
    for step_fold, step_two in zip(g_fold, g_two):
        for a, b in zip(step_fold, step_two):
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-8), (name, float((a - b).abs().max()))
    for k in w_two:
        assert torch.allclose(w_fold[k], w_two[k], rtol=1e-6, atol=1e-8), k
    for a, b in zip(m_fold, m_two):
        assert a["tokens_generated"] == b["tokens_generated"] and a["accuracy"] == b["accuracy"]
        for key in ("loss", "entropy", "weight_mean", "kl"):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-8), (name, key)
        assert a["clip_frac"] == 0.0  # folded: the ratio is exactly 1


def test_two_mini_batches_run_two_forwards(tiny_env, tmp_path, monkeypatch):
    cfg = _cfg(tiny_env, mini_batches=2)
    model = torch.nn.Linear(1, 1)
    model.config = type("C", (), {"to_dict": lambda self: {"attention_dropout": 0.0}})()
    assert folds_old_logp(_cfg(tiny_env).rl, get_preset("dapo"), model)
    assert not folds_old_logp(cfg.rl, get_preset("dapo"), model)
    assert not folds_old_logp(_cfg(tiny_env, fold_old_logp=False).rl, get_preset("dapo"), model)
    verl = get_preset("dapo").with_overrides({"token_mean_normaliser": "micro_batch"})
    assert not folds_old_logp(_cfg(tiny_env).rl, verl, model)
    assert not folds_old_logp(_cfg(tiny_env).rl, get_preset("dapo"), torch.nn.Sequential(torch.nn.Dropout(0.1)))
    _, forwards, _, _ = _run(tiny_env, tmp_path, monkeypatch, "cf", mini_batches=2)
    assert forwards.count(False) >= 2 * 2  # phase 3 (+ CF's scorer if a model cache is not shared)
    assert forwards.count(True) == 2 * 2  # two mini-batches of 4 = one micro-batch each, per step


def test_peek_randperm_does_not_advance_the_generator():
    g = torch.Generator().manual_seed(7)
    peeked = peek_randperm(10, g)
    assert torch.equal(peeked, torch.randperm(10, generator=g))


def test_forward_logp_scores_only_response_positions_with_the_full_forwards_values(tiny_env):
    """``forward_logp`` runs the LM head on the last R + 1 positions only: its log-probs, entropies and LM-head
    inputs equal, bit for bit, those of the whole sequence's logits (the model's own forward) at positions
    p-1 .. p+R-2, and the parameter gradients agree up to float summation order."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from common.io import read_jsonl
    from training.credit.rescoring import position_ids
    from training.phases import forward_logp, sample_rollout

    model = AutoModelForCausalLM.from_pretrained(tiny_env["model"])
    tok = AutoTokenizer.from_pretrained(tiny_env["model"], padding_side="left")
    ro = sample_rollout(model, tok, read_jsonl(tiny_env["train"]), _cfg(tiny_env, steps=1).rl, seed=0, step=0)
    p_ids, p_mask, r_ids, r_mask = ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask
    model.train()
    rows = []
    handle = model.get_output_embeddings().register_forward_pre_hook(lambda _m, a: rows.append(a[0].shape[1]))
    logp, ent, hid = forward_logp(model, p_ids, p_mask, r_ids, r_mask, capture_hidden=True, with_entropy=True)
    handle.remove()
    assert rows == [r_ids.shape[1] + 1] and p_ids.shape[1] > 1  # the head saw R + 1 positions, not P + R
    (logp * r_mask).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)

    ids, att = torch.cat([p_ids, r_ids], 1), torch.cat([p_mask, r_mask.long()], 1)
    heads = []
    handle = model.get_output_embeddings().register_forward_pre_hook(lambda _m, a: heads.append(a[0].detach()))
    out = model(input_ids=ids, attention_mask=att, position_ids=position_ids(att))
    handle.remove()
    p = p_ids.shape[1]
    full = torch.log_softmax(out.logits[:, p - 1 : -1], -1)
    want = full.gather(-1, r_ids.unsqueeze(-1)).squeeze(-1)
    assert torch.equal(logp, want)
    assert torch.equal(ent, -(full.exp() * full).sum(-1).detach())
    assert torch.equal(hid, heads[0][:, p - 1 : -1])
    (want * r_mask).sum().backward()
    for g, p_ in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p_.grad, rtol=1e-5, atol=1e-6)
