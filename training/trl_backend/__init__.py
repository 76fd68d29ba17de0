"""Backend ``trl``: the same presets inside TRL's ``GRPOTrainer`` through one small adapter (modules
``arguments``, ``rewards``, ``trainer``, ``callbacks``; this one builds and runs the trainer).

TRL brings multi-GPU / multi-node training (accelerate with DeepSpeed ZeRO or FSDP), PEFT LoRA and vLLM rollouts
(colocate or server); creditbench brings the credit assignment. The adapter (:class:`CreditGRPOTrainer`) overrides
three methods of ``trl.GRPOTrainer`` (TRL 1.16, ``trl/trainer/grpo_trainer.py``) and re-implements none of the math:

- ``_get_per_token_logps_and_entropies``: in the pi_old (old-log-prob) forward of a generation batch a hook on
  the backbone captures the LM-head input ``h`` (DelTA; TRL's fused LM head never calls ``lm_head``, so the hook
  reads the backbone's ``last_hidden_state``) and the entropies. TRL runs that forward itself with
  mini_batches > 1 or vLLM's importance-sampling correction; otherwise (on-policy: one optimizer step per
  rollout, ratio exactly 1) the adapter runs it only if the credit phase reads it (:func:`needs_old_forward`:
  the functions' declared ``reads``, e.g. DelTA, Forking tokens, Clip-Cov; not GRPO/DAPO/CF: ~20 % of a
  tiny-model TRL step). Skipped, the loss's old log-prob is ``logp.detach()`` (as TRL's) and the entropy
  statistic comes from the loss forward (same parameters).
- ``_generate_and_score_completions``: after TRL's rollout and rewards, builds the native ``CreditBatch``,
  calls the preset's token-weight function (CF re-scores through the same TRL forward) and stores
  ``token_weights`` (and ``old_per_token_logps``) in the batch TRL shuffles and splits.
- ``_compute_loss``: the native :func:`per_token_loss` (clip-higher, dual clip, k3 KL, the weight on pg or on
  pg + beta KL) and ``losses.aggregate`` with TRL's global normalisers.

Rewards wrap the native ones (``evaluation.grading.reward``; ``losses.overlong_penalty`` for overlong shaping,
summed by TRL with weight 1). Advantages are TRL's group z-score (``scale_rewards`` "group"; "none": Dr.GRPO).

Differences from the native loop (documented, none changes a loss on identical inputs):
- TRL's group std adds 1e-4 (native 1e-6); TRL divides logits by the sampling temperature before
  the log-softmax (native scores at T=1): identical at T=1 (the DelTA recipes), not at CF's T=0.6.
- ``token_mean``'s normaliser is TRL's: generation-batch tokens / (processes x mini-batches) (TRL issue 5619 /
  PR 6024; native default: each mini-batch's count; ``token_mean_normaliser="step_mean"`` reproduces TRL's,
  ALGORITHMS.md S2); equal with ``mini_batches == 1``.
- Presets whose registered functions do not declare ``backends=("native", "trl")`` (token-level advantages,
  per-token terms, W-REINFORCE) or that need dynamic sampling, a critic or a KL to pi_old are native-loop only,
  refused at DAG time (``presets.refusal``); GSPO's sequence ratio and Clip-Cov's weights run here through the
  same loss, which also gives the clip statistic both backends log.
- With vLLM and TRL's importance-sampling correction on (TRL default), the pg term is multiplied by the
  rollout/trainer ratio, as TRL does. DelTA's h is kept for the local generation batch (on the CPU when
  ``offload_hidden``): at 20k-token responses tens of GB per process (``training.plan``).
- Prompts are drawn by TRL's seeded sampler (not ``training.rl.sample_prompts``); no dynamic sampling.

Checkpoints: ``run_dir/checkpoints/step{N}`` are full HF folders (LoRA merged into the base) every
``checkpoint_every`` rollout steps and at the end; a killed job resumes from TRL's ``run_dir/trl/checkpoint-*``.
``metrics.jsonl`` has the native keys (plus ``backend``, ``global_step``, on GPUs ``peak_gpu_mb``). Launch:
``python -m training.rl``; the rule prefixes :func:`training.launch.launch_prefix` (``accelerate launch
--num_processes N``) for more; check the recipe first with ``python -m training.plan``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import torch

from common.config import Config
from common.io import read_jsonl
from training.checkpoint import truncate_metrics
from training.presets import Preset, refusal
from training.tracking import report_to
from training.trl_backend.arguments import LOSS_TYPE, deepspeed_config, grpo_args, peft_config, per_device_batch
from training.trl_backend.callbacks import export_hf_checkpoint, make_callback_class
from training.trl_backend.rewards import RewardLog, make_reward_funcs
from training.trl_backend.trainer import (
    loss_terms,
    make_trainer_class,
    needs_old_forward,
    per_token_loss,
    preset_loss,
    trl_normalisers,
)

__all__ = ["LOSS_TYPE", "RewardLog", "build_trainer", "deepspeed_config", "export_hf_checkpoint", "grpo_args",
           "load_train_dataset", "loss_terms", "make_reward_funcs", "needs_old_forward", "peft_config",
           "per_device_batch", "per_token_loss", "preset_loss", "train_trl", "trl_normalisers"]


def load_train_dataset(train_path: str, *, tokenizer=None, max_prompt_tokens: int | None = None):
    """The DAG's training JSONL (id, prompt, answer) as a ``datasets.Dataset`` (prompt, answer).

    With ``max_prompt_tokens`` longer prompts are dropped, as verl's ``data.filter_overlong_prompts``
    (TRL 1.16 has no prompt truncation).
    """
    from datasets import Dataset

    rows = read_jsonl(train_path)
    if max_prompt_tokens is not None:
        lengths = [len(ids) for ids in tokenizer([r["prompt"] for r in rows], add_special_tokens=False)["input_ids"]]
        kept = [r for r, n in zip(rows, lengths) if n <= max_prompt_tokens]
        if len(kept) < len(rows):
            print(f"dropped {len(rows) - len(kept)} of {len(rows)} prompts longer than {max_prompt_tokens} tokens")
        rows = kept
    return Dataset.from_list([{"prompt": r["prompt"], "answer": str(r["answer"])} for r in rows])


def build_trainer(cfg: Config, preset: Preset, *, seed: int, sft_dir: str, train_path: str, run_dir: str,
                  reward_fn: Callable[..., float] | None = None, wall_offset: float = 0.0):
    """The adapter trainer for one (recipe, preset, seed), ready to ``train()`` (tests call its methods)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if why := refusal(preset, "trl"):  # refused at DAG time already (presets.check_methods); direct callers here
        raise NotImplementedError(why)
    from trl import GRPOConfig

    run = Path(run_dir)
    os.environ.update(report_to(cfg.tracking, run)[1])  # the integrations' offline mode and folders
    tokenizer = AutoTokenizer.from_pretrained(sft_dir, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dtype = torch.bfloat16 if cfg.scale.dtype == "bfloat16" and cfg.scale.gpus_per_node else torch.float32
    model = AutoModelForCausalLM.from_pretrained(sft_dir, dtype=dtype)
    log = RewardLog()
    trainer_cls, callback_cls = make_trainer_class(), make_callback_class()
    callback = callback_cls(run_dir=run, mini_batches=cfg.rl.mini_batches, checkpoint_steps=cfg.rl.checkpoint_steps,
                            total_steps=cfg.rl.steps, base_model=sft_dir, wall_offset=wall_offset)
    trainer = trainer_cls(
        model=model, args=GRPOConfig(**grpo_args(cfg, preset, seed=seed, output_dir=str(run / "trl"))),
        reward_funcs=make_reward_funcs(preset, max_new_tokens=cfg.rl.max_new_tokens,
                                       timeout_s=cfg.eval.grader_timeout_s, log=log, reward_fn=reward_fn,
                                       stop_ids=frozenset({tokenizer.eos_token_id, tokenizer.pad_token_id})),
        train_dataset=load_train_dataset(train_path, tokenizer=tokenizer,
                                         max_prompt_tokens=cfg.scale.max_prompt_tokens),
        processing_class=tokenizer, peft_config=peft_config(cfg.scale),
        callbacks=[callback], preset=preset, reward_log=log, credit_seed=seed,
        offload_hidden="hidden" in preset.needs and cfg.scale.gpus_per_node > 0,
    )
    callback.trainer = trainer
    return trainer


def train_trl(cfg: Config, preset: Preset, *, seed: int, sft_dir: str, train_path: str, run_dir: str,
              reward_fn: Callable[..., float] | None = None) -> None:
    """Train ``preset`` with TRL's GRPOTrainer; same outputs as ``training.rl.train`` (module docstring).

    A run folder with TRL resume state (``run_dir/trl/checkpoint-*``) is resumed; metrics rows after
    the resumed step are dropped, as in the native loop.
    """
    from transformers.trainer_utils import get_last_checkpoint

    from common.runtime import seed_everything, setup_runtime

    setup_runtime(cfg.runtime)
    seed_everything(seed)
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    state_dir = run / "trl"
    metrics_path = run / "metrics.jsonl"
    resume = get_last_checkpoint(str(state_dir)) if state_dir.is_dir() else None
    wall_offset = 0.0
    if resume is None:
        metrics_path.unlink(missing_ok=True)
    else:
        step = json.loads((Path(resume) / "trainer_state.json").read_text())["global_step"] // cfg.rl.mini_batches
        rows = truncate_metrics(metrics_path, step)
        wall_offset = rows[-1]["wall_clock"] if rows else 0.0
        print(f"resuming {preset.name} seed {seed} from {resume} (rollout step {step})")
    trainer = build_trainer(cfg, preset, seed=seed, sft_dir=sft_dir, train_path=train_path, run_dir=run_dir,
                            reward_fn=reward_fn, wall_offset=wall_offset)
    trainer.train(resume_from_checkpoint=resume)
