"""The native RLVR trainer: one readable loop, every algorithm a preset (``training.presets``).

Per step (one rollout batch; each phase a function of ``training.phases``):
  1. rollout    sample G responses for each of ``prompts_per_step`` prompts (KV cache, temperature T)
  2. reward     binary verifiable reward from the answer checker (``evaluation.grading.grade``, the same
                function evaluation uses) + DAPO overlong shaping if the preset says so
  3. old_logp   one no-grad forward at theta_old: log-probs, entropies and (if the preset needs it) the
                LM-head input h, captured by a forward pre-hook on the same forward (DelTA needs no
                extra pass); the reference policy's log-probs if the preset has a KL term
  4. credit     advantages (``losses.group_advantages``) and token weights (the preset's function)
  5. update     ``mini_batches`` optimizer steps over the batch, each accumulated over micro-batches
                with global token / sequence counts, so micro-batching never changes the loss
  6. checkpoint HF folder + resume state, atomically, every ``checkpoint_every`` steps and at the end

Folded old-log-prob forward (``rl.fold_old_logp``, default on; :func:`folds_old_logp`): with one mini-batch
the only update runs at theta_old, so phase 3's separate forward is redundant. The update's micro-batch
forwards (with grad) run in phase 3 instead and its outputs are taken from them, detached; phase 5 then
computes the losses on the held graphs and backpropagates. Same losses and gradients up to float summation
order (``tests/training/test_fold.py``), the ratio is exactly 1, the RNG stream is the same (phase 5 still
draws its permutation; the folded forward used it, peeked before the credit phase). The price is memory: all
micro-batch graphs are held until the token weights exist. Phase times then read: ``old_logp`` = the update's
forward (and the reference model's), ``update`` = losses, backward and optimizer step.

Departures from the papers' full-scale recipes (written down, not hidden):
  - one epoch over each rollout batch (on-policy: ratio = 1 at the first mini-batch), as DelTA/DAPO;
  - dynamic sampling drops zero-variance groups without re-sampling to refill the batch (the loop
    keeps the same rollout budget per step for every method); it is off in every shipped preset;
  - the reference policy for the KL term is the SFT checkpoint.
A killed run resumes from its last checkpoint (weights, optimizer, RNG, step) with identical results: the
resume checkpoints live in ``<run>/resume/``, outside the rule's outputs that Snakemake removes for a killed
job, and are published into ``checkpoints/step<N>``; a state written under another config is discarded.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from common.config import Config, load_config, resume_digest
from common.io import append_jsonl, read_jsonl
from common.manifest import write_manifest
from common.records import PHASES
from common.runtime import seed_everything, setup_runtime
from evaluation.generation.hf import sample_hf
from training.checkpoint import (
    open_run,
    publish_checkpoint,
    restore_rng_state,
    rng_state,
    save_hf_atomic,
    trainable_parameters,
)
from training.credit import get_token_weight_fn
from training.credit.gradsnr import step_gradient_snr
from training.critic import critic_state, critic_update, make_critic
from training.launch import check_allocation
from training.phases import (
    folds_old_logp,
    grade_rollout,
    loop_credit_batch,
    make_logp_fn,
    old_forward,
    peek_randperm,
    sample_rollout,
    shape_rewards,
    token_advantages,
    token_terms,
    update_forward,
    update_policy,
    verifiable_reward,
    with_values,
)
from training.presets import Preset, get_preset
from training.tracking import make_tracker, weights_text


class PhaseTimer:
    """Wall-clock seconds per named phase of one step."""

    def __init__(self) -> None:
        self.seconds = {p: 0.0 for p in PHASES}

    @contextmanager
    def __call__(self, phase: str):
        t0 = time.perf_counter()
        yield
        self.seconds[phase] += time.perf_counter() - t0


def train(cfg: Config, preset: Preset, *, seed: int, sft_dir: str, train_path: str, run_dir: str,
          reward_fn: Callable[..., float] = verifiable_reward,
          sampler: Callable[..., torch.Tensor] = sample_hf) -> None:
    device, rl, run = setup_runtime(cfg.runtime), cfg.rl, Path(run_dir)
    resume_root, digest = run / "resume", resume_digest(cfg.raw, preset.name)
    run.mkdir(parents=True, exist_ok=True)
    generator = seed_everything(seed)
    tokenizer = AutoTokenizer.from_pretrained(sft_dir, padding_side="left")
    problems = read_jsonl(train_path)
    weight_fn = get_token_weight_fn(preset.token_weights)
    resume, state, wall_offset = open_run(run, digest, f"{preset.name} seed {seed}")
    model = AutoModelForCausalLM.from_pretrained(resume or sft_dir).to(device)
    opt = torch.optim.AdamW(trainable_parameters(model, rl.train_top_layers), lr=rl.lr, weight_decay=rl.weight_decay)
    if state is not None:
        opt.load_state_dict(state["optimizer"])
        restore_rng_state(state["rng"], generator)
    critic = make_critic(preset, model.config.hidden_size, lr=rl.lr, state=state)  # PPO-critic's value head
    ref_model = (AutoModelForCausalLM.from_pretrained(sft_dir).to(device).eval().requires_grad_(False)
                 if preset.needs_ref_model else None)
    logp_fn = make_logp_fn(model, rl.micro_batch_size)  # CF's counterfactual re-scoring, current policy
    tracker = make_tracker(cfg.tracking, run, name=f"{preset.name}-seed{seed}", config=cfg.raw)
    t_start = time.perf_counter()
    for step in range(state["step"] if state else 0, rl.steps):
        timer = PhaseTimer()
        # ---- 1. rollout -------------------------------------------------------------------------
        with timer("rollout"):
            ro = sample_rollout(model, tokenizer, problems, rl, seed=seed, step=step, sampler=sampler)
        # ---- 2. reward ----------------------------------------------------------------------------
        with timer("reward"):
            ro = grade_rollout(ro, tokenizer, timeout_s=cfg.eval.grader_timeout_s, reward_fn=reward_fn)
            rewards, advantages, loss_mask = shape_rewards(preset, ro, rl.max_new_tokens)
        # ---- 3. old log-probs (+ what the preset needs: h, keys/values, statistics) from one forward --
        with timer("old_logp"):  # folded: the update's forward with grad (module docstring)
            needs = {*preset.needs, *(["hidden"] if cfg.fidelity.grad_snr else [])}  # gradsnr reads h
            if folds_old_logp(rl, preset, model):
                order = peek_randperm(ro.response_ids.shape[0], generator)
                old, held = update_forward(model, ro, order, rl.micro_batch_size, needs=needs, ref_model=ref_model)
            else:
                old, held = old_forward(model, ro, rl.micro_batch_size, needs=needs, ref_model=ref_model), None
        # ---- 4. credit: token weights at theta_old, fixed for the whole update --------------------
        with timer("credit"):
            old = with_values(old, critic)  # V at theta_old (PPO-critic), else unchanged
            credit = loop_credit_batch(model, ro, old, tokenizer, rl.micro_batch_size, advantages=advantages,
                                       loss_mask=loss_mask, rewards=rewards, generator=generator, logp_fn=logp_fn)
            with torch.no_grad():
                weights = weight_fn(credit, **preset.knobs) * loss_mask  # [B, R]
                loss_adv = token_advantages(preset, credit)  # [B] or, for OTB / KTAE, [B, R]
            terms = token_terms(preset, credit)  # per-token clip bounds / KL coefficient (KL-Cov), or {}
            kl_ref = old.old_logp if preset.kl_reference == "old" else old.ref_logp
            old = old._replace(kv=None)  # free the kept keys/values before the update
            diag = step_gradient_snr(preset, old.hidden, model.get_output_embeddings().weight, ro.response_ids,
                                     loss_adv, weights, loss_mask, ro.group_ids, rl.max_new_tokens) \
                if cfg.fidelity.grad_snr else {}
            del credit
        # ---- 5. update ------------------------------------------------------------------------------
        with timer("update"):
            model.train()
            order = torch.randperm(ro.response_ids.shape[0], generator=generator)  # drawn in both paths: same RNG
            stats = update_policy(model, opt, preset, rl, ro, old_logp=old.old_logp, advantages=loss_adv,
                                  weights=weights, terms=terms, kl_ref=kl_ref, loss_mask=loss_mask,
                                  order=held.order if held is not None else order, held=held)
            stats.update(critic_update(critic, old.hidden, old.stats.get("values"), rewards, loss_mask))
        # ---- 6. checkpoint + metrics --------------------------------------------------------------
        done = step + 1
        with timer("checkpoint"):
            if done in rl.checkpoint_steps:
                save_hf_atomic(model, tokenizer, resume_root / f"step{done}", extra_state={
                    "step": done, "optimizer": opt.state_dict(), "rng": rng_state(generator), "config": digest,
                    **critic_state(critic)})
                publish_checkpoint(resume_root / f"step{done}", run / "checkpoints" / f"step{done}")
                if rl.log_token_weights:
                    rows = dump_token_weights(run / "token_weights.jsonl", tokenizer, done, ro.response_ids,
                                              loss_mask, weights, advantages, ro.correct, rl.log_token_weights)
                    tracker.text("token_weights", weights_text(rows), done)
        row = metrics_row(step, ro, old.entropy, rewards, weights, loss_mask, timer.seconds,
                          wall_offset + time.perf_counter() - t_start, {**stats, **diag})
        for path in (resume_root / "metrics.jsonl", run / "metrics.jsonl"):
            append_jsonl(path, row)
        tracker.log(row, step)
        if step % 10 == 0 or done == rl.steps:
            print(f"[{preset.name} seed {seed}] step {done}/{rl.steps} acc {row['accuracy']:.3f} "
                  f"step {row['time']['total']:.2f}s", flush=True)
    tracker.close()
    shutil.rmtree(resume_root, ignore_errors=True)  # done: a forced rerun (new code) starts from step 0


def metrics_row(step: int, ro, entropy: torch.Tensor, rewards: torch.Tensor, weights: torch.Tensor,
                loss_mask: torch.Tensor, seconds: dict[str, float], wall_clock: float, extra: dict) -> dict:
    """One ``metrics.jsonl`` row of the native loop."""
    response_mask = ro.response_mask
    return {
        "step": step, "reward_mean": float(rewards.mean()), "accuracy": float(ro.correct.mean()),
        "response_length": float(response_mask.sum(-1).mean()), "truncated_frac": float(ro.truncated.float().mean()),
        "entropy": float((entropy * response_mask).sum() / response_mask.sum()),
        "weight_mean": float(weights.sum() / loss_mask.sum().clamp(min=1)),
        "weight_std": float(weights[loss_mask > 0].std()) if loss_mask.sum() > 1 else 0.0,
        "time": {**seconds, "total": sum(seconds.values())}, "tokens_generated": int(response_mask.sum()),
        "tokens_trained": int(loss_mask.sum()),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "wall_clock": wall_clock, **extra,
    }


def dump_token_weights(path, tokenizer, step, response_ids, mask, weights, advantages, correct, n) -> list[dict]:
    """A few samples' per-token weights (for the DelTA lambda / CF weight heat-maps); returns the rows."""
    order = torch.argsort(advantages, descending=True)
    picks = torch.cat([order[: (n + 1) // 2], order[-(n // 2):]]) if n > 1 else order[:1]
    rows: list[dict] = []
    for i in picks.tolist():
        length = int(mask[i].sum())
        if length == 0:
            continue
        ids = response_ids[i, :length].tolist()
        rows.append({"step": step, "tokens": [tokenizer.decode([t]) for t in ids],
                     "weights": [round(float(w), 5) for w in weights[i, :length]],
                     "advantage": float(advantages[i]), "correct": bool(correct[i])})
        append_jsonl(path, rows[-1])
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="native RLVR trainer (one loop, presets)")
    parser.add_argument("--config", required=True)
    parser.add_argument("--method", required=True, help="preset name (training.presets.PRESETS)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--sft", required=True, help="starting HF model folder (shared SFT checkpoint)")
    parser.add_argument("--train", required=True, help="training prompts JSONL (prompt, answer)")
    parser.add_argument("--run-dir", required=True)
    args = parser.parse_args(argv)
    cfg = load_config(args.config)
    problem = check_allocation(cfg)  # under SLURM: the GPUs, tasks and world size the plan assumed
    if problem:
        sys.exit(problem)
    preset = get_preset(args.method, cfg.algorithms.get(args.method))
    run = Path(args.run_dir)
    run.mkdir(parents=True, exist_ok=True)
    seed = args.seed + preset.seed_offset  # the run's label stays args.seed (an A/A twin trains on other seeds)
    if int(os.environ.get("RANK", "0")) == 0:  # under `accelerate launch` every rank runs main
        write_manifest(run / "manifest.json", cfg, seeds={"rl": seed, "rl_label": args.seed, "sft": cfg.sft.seed,
                                                          "task": cfg.task.seed},
                       data_files={"train": args.train},
                       extra={"stage": "rl", "method": args.method, "preset": repr(preset), "backend": cfg.backend})
    if cfg.backend == "trl":  # the same presets inside TRL's GRPOTrainer (accelerate/DeepSpeed/vLLM)
        from training.trl_backend import train_trl

        train_trl(cfg, preset, seed=seed, sft_dir=args.sft, train_path=args.train, run_dir=args.run_dir)
    else:
        train(cfg, preset, seed=seed, sft_dir=args.sft, train_path=args.train, run_dir=args.run_dir)


if __name__ == "__main__":
    main()
