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
from training.presets import PRESETS, distinct, get_preset, supported
from training.trl_backend import build_trainer, per_token_loss, preset_loss, train_trl, trl_normalisers

TRL_PRESETS = distinct(supported("trl"), loss_shape=True)  # derived: every loss shape TRL runs, once


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
    per_token, _, _ = losses.per_token_loss(logp, old_logp, advantages, w, **preset.loss_kwargs(), ref_logp=ref_logp,
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


def _adapter_batch(tiny_env, tmp_path, name):
    """(preset, cfg, the adapter trainer in train mode, its model, :func:`_batch`, the native forward's logp)."""
    torch.manual_seed(0)
    preset = get_preset(name)
    cfg = _cfg(tiny_env, steps=1)
    trainer = build_trainer(cfg, preset, seed=1, sft_dir=str(tiny_env["model"]), train_path=str(tiny_env["train"]),
                            run_dir=str(tmp_path), reward_fn=digit_reward)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    batch = _batch(cfg.model.vocab_size)
    with torch.no_grad():
        logp, _, _ = forward_logp(trainer.model, *batch[1:5])  # the native forward
    return preset, cfg, trainer, trainer.model, batch, logp


@pytest.mark.parametrize("name", TRL_PRESETS)
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


@pytest.mark.parametrize("name", TRL_PRESETS)
def test_adapter_loss_equals_native_loss_on_identical_inputs(tiny_env, tmp_path, name):
    preset, cfg, trainer, model, (g, p_ids, p_mask, c_ids, c_mask, adv), logp = _adapter_batch(tiny_env, tmp_path, name)
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


@pytest.mark.parametrize("name", [n for n in PRESETS if n not in supported("trl")])
def test_native_only_presets_are_refused_with_the_reason(tiny_env, tmp_path, name):
    """What TRL's batch does not carry (token advantages, per-token terms against pi_old, a critic) is refused,
    naming it (the same ``presets.refusal`` refuses the pair at DAG time, ``test_config_dag.py``)."""
    with pytest.raises(NotImplementedError, match=f"cannot run preset '{name}'"):
        build_trainer(_cfg(tiny_env), get_preset(name), seed=1, sft_dir=str(tiny_env["model"]),
                      train_path=str(tiny_env["train"]), run_dir=str(tmp_path))


def test_old_forward_reads_are_declared_for_every_weight_and_the_empty_ones_read_nothing():
    """``OLD_FORWARD_READS`` decides whether TRL runs the pi_old forward: an empty entry must really not read
    old_logp / entropy / hidden (NaN there leaves the weights unchanged); CF is checked through the trainer below."""
    from training.credit import OLD_FORWARD_READS, TOKEN_WEIGHTS, CreditBatch

    assert set(OLD_FORWARD_READS) == set(TOKEN_WEIGHTS)
    g = torch.Generator().manual_seed(0)
    mask = (torch.arange(7)[None] < torch.tensor([7, 3, 5, 1])[:, None]).float()
    real = dict(old_logp=-torch.rand(4, 7, generator=g), entropy=torch.rand(4, 7, generator=g),
                hidden=torch.randn(4, 7, 8, generator=g))
    nan = {k: torch.full_like(v, float("nan")) for k, v in real.items()}
    for name in ("uniform", "random_weights"):
        assert not OLD_FORWARD_READS[name]
        w = [TOKEN_WEIGHTS[name](CreditBatch(
            prompt_ids=torch.ones(4, 3, dtype=torch.long), prompt_mask=torch.ones(4, 3), response_ids=torch.ones(
                4, 7, dtype=torch.long), response_mask=mask, advantages=torch.tensor([1.0, -1.0, 0.5, -0.5]),
            group_ids=torch.tensor([0, 0, 1, 1]), pad_token_id=0, tokenizer=None, logp_fn=None,
            generator=torch.Generator().manual_seed(3), **fields)) for fields in (real, nan)]
        assert torch.equal(w[0], w[1]), name
    for name in ("delta", "forking_tokens", "clip_cov"):  # these read it: NaN must reach the weights
        assert OLD_FORWARD_READS[name]


def _fixed_step(tiny_env, tmp_path, monkeypatch, name, old_forward=None):
    """One ``trainer.train()`` step of ``name`` on the fixed batch of ``test_trl_two_processes`` (TRL's rollout
    replaced, so TRL skips its own pi_old forward); counts the model's no-grad forwards."""
    import trl
    from test_trl_two_processes import B, G, fixed_batch
    from transformers import AutoTokenizer, TrainerCallback

    batch = fixed_batch(AutoTokenizer.from_pretrained(tiny_env["model"]), tiny_env["train"])
    batch["num_items_in_batch"] = batch["completion_mask"].sum()
    monkeypatch.setattr(trl.GRPOTrainer, "_generate_and_score_completions",
                        lambda self, inputs: {k: v.clone() for k, v in batch.items()})
    cfg = _cfg(tiny_env, steps=1, prompts_per_step=B // G, group_size=G, grad_clip=0.0, checkpoint_every=1)
    run = tmp_path / f"{name}_{old_forward}"
    trainer = build_trainer(cfg, get_preset(name), seed=1, sft_dir=str(tiny_env["model"]),
                            train_path=str(tiny_env["train"]), run_dir=str(run), reward_fn=lambda *a, **k: 0.0)
    if old_forward is not None:
        trainer.old_forward = old_forward
    forwards: list[bool] = []
    trainer.model.register_forward_hook(lambda m, a, o: forwards.append(torch.is_grad_enabled()))
    res: dict = {"losses": [], "grads": {}}
    compute, generate = trainer._compute_loss, trainer._generate_and_score_completions

    def recording(model, inputs):
        loss = compute(model, inputs)
        res["losses"].append(float(loss))
        return loss

    def generating(inputs):
        out = generate(inputs)
        res["weights"] = out["token_weights"].clone()
        return out

    class Grab(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **kw):
            res["grads"] = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters()
                            if p.grad is not None}

    trainer._compute_loss, trainer._generate_and_score_completions = recording, generating
    trainer.add_callback(Grab())
    trainer.train()
    res["no_grad_forwards"] = forwards.count(False)
    res["metrics"] = _rows(run)[0]
    res["old_forward"] = trainer.old_forward
    return res


@pytest.mark.parametrize("name", ["dapo", "cf"])
def test_no_pi_old_forward_for_presets_that_read_none_and_the_step_is_unchanged(tiny_env, tmp_path, monkeypatch,
                                                                                 name):
    """On-policy (one optimizer step per rollout) the loss's old log-prob is logp.detach() either way: the
    skipped forward changes no loss, gradient or weight; the entropy statistic comes from the loss forward."""
    skip = _fixed_step(tiny_env, tmp_path, monkeypatch, name)
    run = _fixed_step(tiny_env, tmp_path, monkeypatch, name, old_forward=True)
    assert skip["old_forward"] is False
    assert skip["no_grad_forwards"] < run["no_grad_forwards"]  # the pi_old forward (1 chunk or more) is gone
    if name == "dapo":
        assert skip["no_grad_forwards"] == 0
    assert skip["losses"] == pytest.approx(run["losses"], rel=1e-6, abs=1e-8)
    g1 = torch.cat([g.flatten() for g in run["grads"].values()])
    g2 = torch.cat([skip["grads"][k].flatten() for k in run["grads"]])
    assert g1.abs().max() > 0
    torch.testing.assert_close(g2, g1, rtol=1e-5, atol=1e-8)
    torch.testing.assert_close(skip["weights"], run["weights"], rtol=0, atol=0)
    assert skip["metrics"]["entropy"] == pytest.approx(run["metrics"]["entropy"], rel=1e-5)
    assert skip["metrics"]["entropy"] > 0 and skip["metrics"]["time"]["old_logp"] == 0.0


def test_delta_still_runs_the_pi_old_forward(tiny_env, tmp_path, monkeypatch):
    res = _fixed_step(tiny_env, tmp_path, monkeypatch, "delta")
    assert res["old_forward"] is True and res["no_grad_forwards"] >= 1  # DelTA reads h and old_logp
    assert res["metrics"]["time"]["old_logp"] > 0 and res["metrics"]["entropy"] > 0


def test_the_step_time_counts_the_optimizer_step_as_the_native_update_does(tiny_env, tmp_path, monkeypatch):
    """The Trainer clips and steps the optimizer outside ``training_step``; the metrics row's ``update`` phase
    (and ``total``) still holds it, as the native loop's does: a 0.5 s optimizer step shows in ``update``."""
    import time

    real_step = torch.optim.AdamW.step

    def slow_step(self, *args, **kwargs):
        time.sleep(0.5)
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", slow_step)
    train_trl(_cfg(tiny_env, steps=1), get_preset("dapo"), seed=3, sft_dir=str(tiny_env["model"]),
              train_path=str(tiny_env["train"]), run_dir=str(tmp_path), reward_fn=digit_reward)
    seconds = _rows(tmp_path)[0]["time"]
    assert seconds["update"] >= 0.5 and seconds["checkpoint"] < seconds["total"] - 0.5


@pytest.mark.parametrize("recipe", ["delta_qwen3_8b", "delta_qwen3_14b", "cf_qwen25_3b_gsm8k", "cf_qwen3_1p7b_gsm8k",
                                    "gpu_check"])
def test_recipe_arguments_are_fields_of_the_installed_grpoconfig(recipe, tmp_path):
    """The GPU recipes (vLLM colocate/server, DeepSpeed, bf16) have never met a GPU here: at least every keyword
    they pass is a field of the installed ``trl.GRPOConfig`` and ``GRPOConfig`` accepts their values (batch sizes
    divisible by the group, loss type, vLLM mode) with only the CPU-impossible parts (bf16, DeepSpeed) left out,
    so a renamed option or an inconsistent size fails here, not on the cluster."""
    from dataclasses import fields

    from trl import GRPOConfig

    from common.config import load_config
    from training import gpu_check
    from training.trl_backend import grpo_args

    if recipe == "gpu_check":
        cfg = gpu_check.gpu_config(str(tmp_path / "model"), str(tmp_path / "out"), steps=3)
    else:
        cfg = load_config(f"config/experiments/{recipe}.yaml")
    known = {f.name for f in fields(GRPOConfig)}
    for method in cfg.methods:
        preset = get_preset(method)
        if method not in supported("trl"):
            continue  # refused by backend trl with its reason (test_native_only_presets_are_refused...)
        args = grpo_args(cfg, preset, seed=0, output_dir=str(tmp_path / method))
        assert set(args) <= known, (recipe, method, sorted(set(args) - known))
        assert args.get("use_vllm") == (cfg.scale.vllm.mode is not None)
        args = {k: v for k, v in args.items() if k != "deepspeed"}
        made = GRPOConfig(**{**args, "bf16": False, "use_cpu": True})
        assert made.num_generations == cfg.rl.group_size and made.vllm_mode == (cfg.scale.vllm.mode or made.vllm_mode)
    assert cfg.backend == "trl"


def test_clip_statistic_is_the_losss_own_in_both_backends_for_gspo(tiny_env, tmp_path):
    """The clip fraction comes from ``losses.per_token_loss`` in both backends: the same batch through the TRL
    adapter's ``_compute_loss`` and the native ``phases.update_policy`` gives the same value for GSPO, whose
    clip acts on the sequence ratio (rows 0-2: per-token noise of mean 0, token ratios far outside 1 +- 4e-4
    but sequence ratio 1, not clipped; rows 3-5: a shift, clipped). Before the registry the TRL backend
    counted token ratios and logged the noisy rows as clipped."""
    from training.phases import Rollout, update_policy

    preset, cfg, trainer, model, (g, p_ids, p_mask, c_ids, c_mask, adv), logp = _adapter_batch(tiny_env, tmp_path,
                                                                                                "gspo")
    mask = c_mask.float()
    noise = torch.randn(logp.shape, generator=g) * 0.05 * mask
    noise = (noise - (noise.sum(-1, keepdim=True) / mask.sum(-1, keepdim=True)) * mask)  # mean 0 on each row
    noise[3:] = 0.01 * mask[3:]  # a shift: sequence ratio e^-0.01, clipped
    old = logp - noise
    inputs = {"prompt_ids": p_ids, "prompt_mask": p_mask, "completion_ids": c_ids, "completion_mask": c_mask,
              "advantages": adv, "num_items_in_batch": mask.sum(), "old_per_token_logps": old,
              "token_weights": mask}
    trainer._compute_loss(model, inputs)
    trl_clip = trainer._metrics["train"]["clip_ratio/region_mean"][-1]
    ro = Rollout(step=0, prompt_ids=p_ids, prompt_mask=p_mask, response_ids=c_ids, response_mask=mask,
                 truncated=torch.zeros(len(c_ids), dtype=torch.bool), group_ids=torch.arange(len(c_ids)) // 3,
                 golds=("1",) * len(c_ids))
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    native = update_policy(model, opt, preset, cfg.rl, ro, old_logp=old, advantages=adv, weights=mask, terms={},
                           kl_ref=None, loss_mask=mask, order=torch.arange(len(c_ids)), held=None)
    want = float(mask[3:].sum() / mask.sum())
    token_level = float((((logp - old).exp() - 1).abs() > 3e-4).float().mul(mask).sum() / mask.sum())
    assert native["clip_frac"] == pytest.approx(want, abs=1e-6) and trl_clip == pytest.approx(want, abs=1e-6)
    assert token_level > want + 0.2  # what the TRL backend logged before: the test tells the two apart


def test_cispo_equals_trls_own_cispo_loss(tiny_env, tmp_path):
    """The adapter's CISPO loss and gradients equal TRL 1.16's own ``loss_type="cispo"`` code (the base class's
    ``_compute_loss``, ``epsilon_high`` = 1 + eps_high) on the same inputs, at ratios far from 1."""
    from trl import GRPOTrainer

    preset, cfg, trainer, model, (g, p_ids, p_mask, c_ids, c_mask, adv), logp = _adapter_batch(tiny_env, tmp_path,
                                                                                                "cispo")
    old = logp + 0.8 * torch.randn(logp.shape, generator=g)  # ratios e^(+-2): clipped above 5 and kept below
    inputs = {"prompt_ids": p_ids, "prompt_mask": p_mask, "completion_ids": c_ids, "completion_mask": c_mask,
              "advantages": adv, "num_items_in_batch": c_mask.sum(), "old_per_token_logps": old,
              "token_weights": c_mask.float()}
    got = trainer._compute_loss(model, inputs)
    trainer.loss_type, trainer.epsilon_high = "cispo", 1 + preset.eps_high
    want = GRPOTrainer._compute_loss(trainer, model, {k: v for k, v in inputs.items() if k != "token_weights"})
    assert trainer._metrics["train"]["cispo_clip_ratio"][-1] > 0  # some tokens are clipped
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    grads = []
    for loss in (got, want):
        model.zero_grad(set_to_none=True)
        loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-7)
