"""Backend trl in two CPU processes (gloo): one optimizer step on a fixed batch gives the loss and the
gradients of one process, for DAPO, DelTA (``stats`` global; ``local`` differs by design) and CF.

Each run is a fresh process group through the real trainer (``build_trainer`` + ``trainer.train()``, one
step, DDP averaging the gradients); only TRL's rollout is replaced by a fixed generation batch of the
synthetic task's worked solutions (so CF finds spans and re-scores them), split by rank as TRL splits it.
The logged loss of a step is the mean of the processes' losses (TRL/HF ``_nested_gather(...).mean()``):
per process ``token_mean`` divides by the *global* token count / processes (``trl_normalisers``), so the
mean equals the one-process loss and DDP's gradient mean equals the one-process gradient. Gradient clipping
is off so the comparison sees the raw gradient (clipping rescales both sides alike).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile

import pytest
import torch

from common.config import config_from_dict
from common.io import read_jsonl

B, G = 8, 4  # rollout batch (2 prompts x 4 completions), one optimizer step


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fixed_batch(tokenizer, train_path) -> dict[str, torch.Tensor]:
    """The whole generation batch: 2 prompts x 4 responses (right and wrong worked solutions), fixed advantages."""
    rows = read_jsonl(train_path)[:2]
    prompts = [tokenizer(r["prompt"], add_special_tokens=False)["input_ids"] for r in rows for _ in range(G)]
    texts = []
    for r in rows:
        sol = r["solution"]
        texts += [sol, sol.replace("\\boxed{", "\\boxed{1"), sol.split(". ")[0] + ". 3 + 4 = 8. \\boxed{8}", sol]
    comps = [tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for t in texts]
    comps[3] = comps[3][:-4]  # one truncated response (no EOS)
    p_len, c_len, pad = max(map(len, prompts)), max(map(len, comps)), tokenizer.pad_token_id
    prompt_ids = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts])
    prompt_mask = torch.tensor([[0] * (p_len - len(p)) + [1] * len(p) for p in prompts])
    completion_ids = torch.tensor([c + [pad] * (c_len - len(c)) for c in comps])
    completion_mask = torch.tensor([[1] * len(c) + [0] * (c_len - len(c)) for c in comps])
    advantages = torch.tensor([1.2, -0.8, -0.9, 0.5, 0.7, -1.1, 0.3, 0.1])
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
            "completion_mask": completion_mask, "advantages": advantages}


def _one_step(cfg, preset, paths: dict, local: dict, world: int, name: str) -> dict:
    """One trainer.train() step of ``preset`` on this process's shard; (mean loss, DDP-averaged grads)."""
    from transformers import TrainerCallback

    from training.trl_backend import build_trainer

    trainer = build_trainer(cfg, preset, seed=1, sft_dir=paths["model"], train_path=paths["train"],
                            run_dir=os.path.join(paths["out"], f"{name}_w{world}"), reward_fn=lambda *a, **k: 0.0)
    losses: list[float] = []
    compute = trainer._compute_loss

    def recording(model, inputs):
        loss = compute(model, inputs)
        losses.append(float(loss))
        return loss

    trainer._compute_loss = recording
    grads: dict[str, torch.Tensor] = {}

    class Grab(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **kw):
            grads.update({n: p.grad.detach().clone() for n, p in trainer.model.named_parameters()
                          if p.grad is not None})

    trainer.add_callback(Grab())
    trainer.train()
    loss = torch.tensor(sum(losses))
    if world > 1:
        torch.distributed.all_reduce(loss)
    return {"grads": grads, "loss": float(loss) / world}


def _worker(rank: int, world: int, port: int, raw: dict, cases: list, paths: dict) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world), ACCELERATE_USE_CPU="true")
    torch.set_num_threads(1)
    import trl
    from transformers import AutoTokenizer

    from training.presets import get_preset

    tok = AutoTokenizer.from_pretrained(paths["model"])
    full = fixed_batch(tok, paths["train"])
    local = {k: v[rank * B // world:(rank + 1) * B // world] for k, v in full.items()}
    local["num_items_in_batch"] = full["completion_mask"].sum()  # TRL gathers it over the processes

    def fixed_generation(self, inputs):  # TRL's rollout, replaced: this process's shard of the fixed batch
        return {k: v.clone() for k, v in local.items()}

    trl.GRPOTrainer._generate_and_score_completions = fixed_generation
    results = {}
    for name, preset_name, knobs in cases:
        cfg = config_from_dict({**raw, "methods": [preset_name], "report": {**raw["report"], "baseline": preset_name}})
        preset = get_preset(preset_name, {"knobs": knobs} if knobs else None)
        results[name] = _one_step(cfg, preset, paths, local, world, name)
    if rank == 0:
        torch.save(results, os.path.join(paths["out"], f"result{world}.pt"))


def run_steps(tiny_env, cases: list, world: int, out: str) -> dict:
    """Every case's one-step result with ``world`` gloo processes (one spawn: imports once)."""
    import torch.multiprocessing as mp

    raw = dict(tiny_env["cfg"].raw)
    raw["backend"] = "trl"
    raw["rl"] = {**raw["rl"], "steps": 1, "prompts_per_step": B // G, "group_size": G, "grad_clip": 0.0,
                 "checkpoint_every": 1}
    raw["scale"] = {**raw["scale"], "cpu_processes": world}
    paths = {"model": str(tiny_env["model"]), "train": str(tiny_env["train"]), "out": out}
    mp.spawn(_worker, args=(world, _free_port(), raw, cases, paths), nprocs=world, join=True)
    return torch.load(os.path.join(out, f"result{world}.pt"))


def _gloo_available() -> str | None:
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        return "torch.distributed with gloo is not available in this torch build"
    return None


CASES = [("dapo", "dapo", {}), ("delta_global", "delta", {"stats": "global"}),
         ("delta_local", "delta", {"stats": "local"}), ("cf", "cf", {})]
EQUAL = {"dapo": True, "delta_global": True, "delta_local": False, "cf": True}


@pytest.fixture(scope="module")
def steps(tiny_env):
    reason = _gloo_available()
    if reason is not None:
        pytest.skip(reason)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            return run_steps(tiny_env, CASES, 1, tmp), run_steps(tiny_env, CASES, 2, tmp)
        except Exception as exc:  # noqa: BLE001 -- only a process group that cannot start is a skip
            if "gloo" in str(exc).lower() or "rendezvous" in str(exc).lower():
                pytest.skip(f"gloo process group cannot start here: {exc}")
            raise


@pytest.mark.parametrize("name", list(EQUAL))
def test_one_step_same_loss_and_gradients_with_one_and_two_processes(steps, name):
    one, two = steps[0][name], steps[1][name]
    assert one["grads"].keys() == two["grads"].keys() and one["grads"]
    g1 = torch.cat([g.flatten() for g in one["grads"].values()])
    g2 = torch.cat([two["grads"][k].flatten() for k in one["grads"]])
    assert g1.abs().max() > 0
    if EQUAL[name]:
        assert two["loss"] == pytest.approx(one["loss"], rel=1e-5, abs=1e-7), json.dumps([one["loss"], two["loss"]])
        torch.testing.assert_close(g2, g1, rtol=1e-4, atol=1e-7)
    else:  # DelTA stats local: each process's λ from its own shard (ALGORITHMS.md); the step must differ
        assert (g2 - g1).abs().max() > 1e-4 * g1.abs().max()
