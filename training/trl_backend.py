"""Backend ``trl``: the same presets inside TRL's ``GRPOTrainer`` through one small adapter.

TRL brings multi-GPU / multi-node training (accelerate with DeepSpeed ZeRO or FSDP), PEFT LoRA and vLLM rollouts
(colocate or server); creditbench brings the credit assignment. The adapter (:class:`CreditGRPOTrainer`) overrides
three methods of ``trl.GRPOTrainer`` (TRL 1.16, ``trl/trainer/grpo_trainer.py``) and re-implements none of the math:

- ``_get_per_token_logps_and_entropies``: in the pi_old (old-log-prob) forward of a generation batch a hook on
  the backbone captures the LM-head input ``h`` (DelTA; TRL's fused LM head never calls ``lm_head``, so the hook
  reads the backbone's ``last_hidden_state``) and the entropies. TRL runs that forward itself with
  mini_batches > 1 or vLLM's importance-sampling correction; otherwise (on-policy: one optimizer step per
  rollout, ratio exactly 1) the adapter runs it only if the credit phase reads it (:func:`needs_old_forward`:
  ``training.credit.OLD_FORWARD_READS``, e.g. DelTA, Forking tokens, Clip-Cov; not GRPO/DAPO/CF: ~20 % of a
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
- OTB, KTAE and W-REINFORCE (``outcome_advantage`` / ``token_advantage``) and KL-Cov (``token_terms``) are
  native-loop only; GSPO's sequence ratio and Clip-Cov's weights run here through the same loss.
- With vLLM and TRL's importance-sampling correction on (TRL default), the pg term is multiplied by the
  rollout/trainer ratio, as TRL does. DelTA's h is kept for the local generation batch (on the CPU when
  ``offload_hidden``): at 20k-token responses tens of GB per process (``training.plan``).
- Prompts are drawn by TRL's seeded sampler (not ``training.rl.sample_prompts``); no dynamic sampling.

Checkpoints: ``run_dir/checkpoints/step{N}`` are full HF folders (LoRA merged into the base) every
``checkpoint_every`` rollout steps and at the end; a killed job resumes from TRL's ``run_dir/trl/checkpoint-*``.
``metrics.jsonl`` has the native keys (plus ``backend``, ``global_step``, on GPUs ``peak_gpu_mb``). Launch:
``python -m training.rl``; the rule prefixes :func:`training.plan.launch_prefix` (``accelerate launch
--num_processes N``) for more; check the recipe first with ``python -m training.plan``.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch import Tensor

from common.config import Config, ScaleConfig
from common.io import append_jsonl, read_jsonl, replace_dir_atomic
from common.records import PHASES
from evaluation.grading import reward
from training import losses
from training.checkpoint import truncate_metrics
from training.credit import OLD_FORWARD_READS, get_token_weight_fn
from training.phases import REWARD_WORKERS, OldForward, build_credit_batch
from training.presets import Preset
from training.tracking import report_to

LOSS_TYPE = {"token_mean": "dapo", "seq_mean_token_mean": "grpo", "seq_mean_token_sum_norm": "dr_grpo"}
"""TRL ``loss_type`` with the same aggregation (used by TRL for its logging only; the loss is ours)."""


# ---------------------------------------------------------------------------------------- the loss

def needs_old_forward(preset: Preset) -> bool:
    """Whether the credit phase reads pi_old's forward: ``OLD_FORWARD_READS`` of the weights, or ``needs`` beyond
    ``kv`` (CF's keys/values serve only the native loop's prefix-cached re-scoring; TRL re-scores via logp_fn)."""
    return bool(OLD_FORWARD_READS[preset.token_weights]) or bool(set(preset.needs) - {"kv"})


def per_token_loss(preset: Preset, logp: Tensor, old_logp: Tensor, advantages: Tensor, weights: Tensor,
                   ref_logp: Tensor | None = None, is_ratio: Tensor | None = None,
                   mask: Tensor | None = None) -> Tensor:
    """The native loop's per-token loss (``losses.per_token_loss`` with the preset's knobs; ``mask`` for GSPO's
    sequence ratio). Returns [B, R]."""
    per_token, _ = losses.per_token_loss(
        logp, old_logp, advantages, weights, **preset.loss_kwargs(),
        ref_logp=ref_logp if preset.kl_beta > 0 else None, is_ratio=is_ratio, mask=mask)
    return per_token


def preset_loss(preset: Preset, logp: Tensor, old_logp: Tensor, advantages: Tensor, weights: Tensor, mask: Tensor,
                *, num_tokens: float, num_seqs: float, max_len: int, ref_logp: Tensor | None = None,
                is_ratio: Tensor | None = None) -> Tensor:
    """:func:`per_token_loss` reduced by ``losses.aggregate`` with the caller's global normalisers."""
    per_token = per_token_loss(preset, logp, old_logp, advantages, weights, ref_logp, is_ratio, mask)
    return losses.aggregate(per_token, mask, preset.aggregation, num_tokens=num_tokens, num_seqs=num_seqs,
                            max_len=max_len)


def trl_normalisers(*, batch_rows: int, num_items_in_batch: float, num_processes: int,
                    grad_accum: int, steps_per_generation: int) -> tuple[float, float]:
    """(num_tokens, num_seqs) that make ``losses.aggregate`` equal TRL's dapo / grpo / dr_grpo scaling.

    TRL (``_compute_loss``): dapo divides by num_items_in_batch / processes x grad_accum /
    steps_per_generation (the generation batch's tokens spread over its optimizer steps); grpo and
    dr_grpo take the micro-batch mean and divide by grad_accum.
    """
    num_tokens = num_items_in_batch / num_processes * grad_accum / steps_per_generation
    num_seqs = float(batch_rows * grad_accum)
    return num_tokens, num_seqs


# ------------------------------------------------------------------------------------- rewards

@dataclass
class RewardLog:
    """Per-completion outcomes of the current generation batch (local process), read by the metrics."""

    correct: list[float] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    truncated: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def reset(self) -> None:
        self.correct, self.reward, self.lengths, self.truncated, self.seconds = [], [], [], [], 0.0


def make_reward_funcs(preset: Preset, *, max_new_tokens: int, timeout_s: float, log: RewardLog,
                      stop_ids: frozenset[int] = frozenset(),
                      reward_fn: Callable[..., float] | None = None) -> list[Callable[..., list[float]]]:
    """TRL reward functions: correctness (the native checker) and, if the preset shapes, DAPO's overlong penalty.

    ``stop_ids`` (eos, pad): a completion not ending in one is truncated (TRL's test).
    """

    def correct(prompts, completions, completion_ids, answer, **_: Any) -> list[float]:
        t0 = time.perf_counter()
        if reward_fn is None:  # the native checker, the batch through its worker pool, as wide as the native loop's
            out = reward(list(completions), list(answer), timeout_s=timeout_s, workers=REWARD_WORKERS)
        else:
            out = [reward_fn(c, a, timeout_s=timeout_s) for c, a in zip(completions, answer)]
        log.correct.extend(out)
        log.reward.extend(out)
        log.lengths.extend(len(ids) for ids in completion_ids)
        log.truncated.extend(int(not ids or ids[-1] not in stop_ids) for ids in completion_ids)
        log.seconds += time.perf_counter() - t0
        return out

    funcs = [correct]
    if preset.overlong_shaping:  # DAPO §3.4, L_max = max_new_tokens, L_cache = overlong_cache_frac * L_max
        cache = max(1, int(round(preset.overlong_cache_frac * max_new_tokens)))

        def overlong(prompts, completions, completion_ids, **_: Any) -> list[float]:
            lengths = torch.tensor([len(ids) for ids in completion_ids])
            pen = losses.overlong_penalty(lengths, max_len=max_new_tokens, cache_len=cache).tolist()
            n = len(pen)
            log.reward[-n:] = [r + p for r, p in zip(log.reward[-n:], pen)]
            return pen

        funcs.append(overlong)
    return funcs


# ------------------------------------------------------------------------------ TRL arguments

def deepspeed_config(scale: ScaleConfig) -> dict[str, Any] | None:
    """A DeepSpeed config for ``TrainingArguments.deepspeed`` ("auto" values are filled by HF)."""
    if scale.deepspeed is None:
        return None
    stage = {"zero1": 1, "zero2": 2, "zero3": 3}[scale.deepspeed]
    zero: dict[str, Any] = {"stage": stage, "overlap_comm": True, "contiguous_gradients": True}
    if stage == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    return {"zero_optimization": zero, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto",
            "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "train_batch_size": "auto"}


def per_device_batch(cfg: Config) -> int:
    """Completions per GPU per micro-step: scale.per_device_batch, or derived from the rollout batch."""
    s, rl = cfg.scale, cfg.rl
    batch = rl.prompts_per_step * rl.group_size
    denom = s.world_size * s.grad_accum * rl.mini_batches
    pdb = s.per_device_batch or batch // denom
    if pdb * denom != batch:
        raise ValueError(f"batch geometry: per_device_batch {pdb} x GPUs {s.world_size} x grad_accum {s.grad_accum} "
                         f"x mini_batches {rl.mini_batches} != {rl.prompts_per_step} x {rl.group_size}; "
                         "run training.plan")
    return pdb


def grpo_args(cfg: Config, preset: Preset, *, seed: int, output_dir: str) -> dict[str, Any]:
    """``trl.GRPOConfig`` keyword arguments for a recipe and a preset (TRL docs: GRPOConfig)."""
    rl, s = cfg.rl, cfg.scale
    if preset.dynamic_sampling:
        raise ValueError(f"preset {preset.name}: dynamic sampling is not supported by backend trl")
    cpu = s.gpus_per_node == 0
    args: dict[str, Any] = dict(
        output_dir=output_dir, seed=seed, data_seed=seed, logging_steps=1,
        report_to=report_to(cfg.tracking, Path(output_dir).parent)[0],  # tracking (training.tracking)
        # checkpoints are written by CheckpointAndMetrics (HF folder + TRL resume state)
        save_strategy="no", save_total_limit=1,
        learning_rate=rl.lr, weight_decay=rl.weight_decay, max_grad_norm=rl.grad_clip, lr_scheduler_type="constant",
        warmup_steps=0, optim="adamw_torch",
        per_device_train_batch_size=per_device_batch(cfg), gradient_accumulation_steps=s.grad_accum,
        steps_per_generation=s.grad_accum * rl.mini_batches, num_iterations=1, max_steps=rl.steps * rl.mini_batches,
        num_generations=rl.group_size, max_completion_length=rl.max_new_tokens, temperature=rl.temperature,
        top_p=rl.top_p, beta=preset.kl_beta, epsilon=preset.eps_low, epsilon_high=preset.eps_high,
        loss_type=LOSS_TYPE[preset.aggregation], scale_rewards="group" if preset.scale_adv_by_std else "none",
        mask_truncated_completions=preset.mask_truncated, disable_dropout=True, log_completions=False,
        use_cpu=cpu, bf16=s.dtype == "bfloat16" and not cpu, gradient_checkpointing=s.gradient_checkpointing,
        dataloader_num_workers=0, shuffle_dataset=True,
    )
    if s.deepspeed is not None:
        args["deepspeed"] = deepspeed_config(s)
    if s.fsdp:
        args["fsdp"] = "full_shard auto_wrap"
        args["fsdp_config"] = {"activation_checkpointing": s.gradient_checkpointing}
        args["gradient_checkpointing"] = False  # FSDP does it (HF docs: FSDP activation_checkpointing)
    if s.vllm.mode is not None:
        args.update(use_vllm=True, vllm_mode=s.vllm.mode, vllm_tensor_parallel_size=s.vllm.tensor_parallel_size,
                    vllm_gpu_memory_utilization=s.vllm.gpu_memory_utilization,
                    vllm_enable_sleep_mode=s.vllm.sleep_mode,
                    vllm_max_model_length=(s.max_prompt_tokens + rl.max_new_tokens
                                           if s.max_prompt_tokens else None))
    return args


def peft_config(scale: ScaleConfig):
    """``peft.LoraConfig`` from ``scale.lora`` (None: full fine-tuning)."""
    if scale.lora is None:
        return None
    from peft import LoraConfig

    lo = scale.lora
    return LoraConfig(r=lo.r, lora_alpha=lo.alpha, lora_dropout=lo.dropout, target_modules=list(lo.target_modules),
                      task_type="CAUSAL_LM")


# ---------------------------------------------------------------------------------- the adapter

def _make_trainer_class():
    """Build the GRPOTrainer subclass (TRL imported here: importing this module stays cheap)."""
    from trl import GRPOTrainer

    class CreditGRPOTrainer(GRPOTrainer):
        """``trl.GRPOTrainer`` with creditbench's per-token weights and loss (module docstring)."""

        def __init__(self, *args: Any, preset: Preset, reward_log: RewardLog, credit_seed: int,
                     offload_hidden: bool = False, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.preset = preset
            self.weight_fn = get_token_weight_fn(preset.token_weights)
            self.reward_log, self.offload_hidden = reward_log, offload_hidden
            self.credit_generator = torch.Generator().manual_seed(credit_seed)
            self.phase_seconds = {p: 0.0 for p in PHASES}
            self.batch_stats: dict[str, float] = {}
            self._capture: dict[str, Any] | None = None
            self.old_forward = needs_old_forward(preset)  # run pi_old's forward when TRL skips its own
            self.loss_entropy: list[float] | None = None  # [entropy sum, tokens] of the loss forwards, when skipped

        # -- capture h and entropies in the old-log-prob forward ---------------------------------
        def _backbone(self, model):
            base = self.accelerator.unwrap_model(model)
            base = base.get_base_model() if hasattr(base, "get_base_model") else base
            return getattr(base, base.base_model_prefix)

        def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep,
                                               batch_size=None, compute_entropy=False, **kwargs):
            cap = self._capture
            if cap is None or cap.get("done"):
                return super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                    compute_entropy=compute_entropy, **kwargs)
            # DelTA's h for the whole generation batch, written chunk by chunk into one buffer (no cat,
            # so the peak is the buffer itself; on the host when offloaded, in the model's dtype).
            store: dict[str, Any] = {"buf": None, "filled": 0}
            handle = None
            if "hidden" in self.preset.needs:
                def hook(_m, _args, out):
                    h = out.last_hidden_state[:, -logits_to_keep - 1:-1].detach()  # LM-head input per response token
                    if store["buf"] is None:
                        dev = torch.device("cpu") if self.offload_hidden else h.device
                        store["buf"] = torch.empty((input_ids.shape[0], *h.shape[1:]), dtype=h.dtype, device=dev)
                    n = h.shape[0]
                    store["buf"][store["filled"]:store["filled"] + n].copy_(h)
                    store["filled"] += n
                handle = self._backbone(model).register_forward_hook(hook)
            t0 = time.perf_counter()
            try:
                logps, ent, aux = super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size, compute_entropy=True,
                    **kwargs)
            finally:
                if handle is not None:
                    handle.remove()
            cap.update(done=True, logps=logps, entropy=ent, hidden=store["buf"],
                       seconds=time.perf_counter() - t0)
            return logps, (ent if compute_entropy else None), aux

        def _trl_computes_old_logps(self) -> bool:
            """TRL's own condition for its old-log-prob forward (grpo_trainer.py, _generate_and_score_completions)."""
            generate_every = self.args.steps_per_generation * self.num_iterations
            return (self.args.gradient_accumulation_steps % generate_every != 0
                    or (self.use_vllm and self.vllm_importance_sampling_correction))

        # -- credit where TRL has the batch -------------------------------------------------------
        def _generate_and_score_completions(self, inputs):
            if not self.model.training:
                return super()._generate_and_score_completions(inputs)
            t0 = time.perf_counter()
            self.reward_log.reset()
            self._capture = {} if self._trl_computes_old_logps() else None
            try:
                out = super()._generate_and_score_completions(inputs)
            finally:
                cap, self._capture = self._capture, None
            t_super = time.perf_counter() - t0
            prompt_ids, prompt_mask = out["prompt_ids"], out["prompt_mask"]
            completion_ids, completion_mask = out["completion_ids"], out["completion_mask"]
            k = completion_ids.size(1)
            input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
            attention = torch.cat([prompt_mask, completion_mask], dim=1)
            t_own = 0.0
            skipped = not cap and not self.old_forward  # on-policy, nothing reads it: no pi_old forward at all
            self.loss_entropy = [0.0, 0.0] if skipped else None
            if not cap and self.old_forward:  # TRL skipped its old-logp forward: run it once, capturing h, entropies
                cap = {}
                self._capture = cap
                t1 = time.perf_counter()
                try:
                    with torch.no_grad():
                        self._get_per_token_logps_and_entropies(self.model, input_ids, attention, k,
                                                                batch_size=self.args.per_device_train_batch_size)
                finally:
                    self._capture = None
                t_own = time.perf_counter() - t1
            old_logp = out.get("old_per_token_logps")
            if skipped:  # the weight function reads neither (OLD_FORWARD_READS): NaN makes a wrong declaration loud
                old_logp = torch.full(completion_ids.shape, float("nan"), device=completion_ids.device)
                cap = {"entropy": old_logp}
            elif old_logp is None:
                old_logp = cap["logps"]
                out["old_per_token_logps"] = old_logp
            t2 = time.perf_counter()
            loss_mask = completion_mask.float()
            advantages = out["advantages"]
            n_local = completion_ids.size(0)
            offset = self.accelerator.process_index * n_local
            group_ids = (torch.arange(n_local, device=advantages.device) + offset) // self.num_generations
            hidden = cap.get("hidden")
            # DelTA with offloaded h: the weights are computed on the host, next to h (one [B,R,H] tensor)
            dev = torch.device("cpu") if hidden is not None and hidden.device.type == "cpu" else advantages.device

            def logp_fn(p_ids, p_mask, r_ids, r_mask):  # CF's re-scoring under the current policy (TRL forward)
                with torch.no_grad():
                    return self._get_per_token_logps_and_entropies(
                        self.model, torch.cat([p_ids, r_ids], 1), torch.cat([p_mask, r_mask.to(p_mask.dtype)], 1),
                        r_ids.size(1), batch_size=self.args.per_device_train_batch_size)[0]

            old = OldForward(old_logp.to(dev), cap["entropy"].to(dev), hidden, None, None)
            credit = build_credit_batch(
                prompt_ids.to(dev), prompt_mask.to(dev), completion_ids.to(dev), group_ids.to(dev), old,
                self.processing_class, advantages=advantages.to(dev), loss_mask=loss_mask.to(dev), rewards=None,
                generator=self.credit_generator, logp_fn=logp_fn, pad_token_id=self._tokenizer.pad_token_id)
            with torch.no_grad():
                w = self.weight_fn(credit, **self.preset.knobs).to(loss_mask.device, loss_mask.dtype)
                if skipped and not torch.isfinite(w[loss_mask > 0]).all():
                    raise RuntimeError(f"{self.preset.token_weights!r} reads pi_old: declare it in OLD_FORWARD_READS")
                out["token_weights"] = w * loss_mask
            t_credit = time.perf_counter() - t2
            # ---- phase times and batch statistics (this process) -------------------------------
            t_old = cap.get("seconds", 0.0)
            self.phase_seconds["reward"] += self.reward_log.seconds
            self.phase_seconds["old_logp"] += t_old if t_own == 0.0 else t_own
            self.phase_seconds["rollout"] += t_super - self.reward_log.seconds - (t_old if t_own == 0.0 else 0.0)
            self.phase_seconds["credit"] += t_credit
            self._generation_seconds = time.perf_counter() - t0
            w = out["token_weights"]
            valid = loss_mask > 0
            gathered = self.accelerator.gather(torch.tensor(
                [sum(self.reward_log.reward), sum(self.reward_log.correct), float(len(self.reward_log.correct)),
                 float(sum(self.reward_log.lengths)), float(sum(self.reward_log.truncated)),
                 float(loss_mask.sum()), 0.0 if skipped else float((cap["entropy"] * completion_mask).sum()),
                 float(completion_mask.sum()), float(w.sum()), float((w[valid] ** 2).sum()) if valid.any() else 0.0],
                device=self.accelerator.device, dtype=torch.float64)).view(-1, 10).sum(0).tolist()
            r_sum, c_sum, n, gen_tok, n_trunc, train_tok, ent_sum, tok, w_sum, w_sq = gathered
            w_mean = w_sum / max(train_tok, 1.0)
            self.batch_stats = {
                "reward_mean": r_sum / max(n, 1.0), "accuracy": c_sum / max(n, 1.0),
                "tokens_generated": int(gen_tok), "tokens_trained": int(train_tok),
                "response_length": gen_tok / max(n, 1.0), "truncated_frac": n_trunc / max(n, 1.0),
                "entropy": ent_sum / max(tok, 1.0), "weight_mean": w_mean,  # skipped: from the loss (on_step_end)
                "weight_std": max(w_sq / max(train_tok, 1.0) - w_mean ** 2, 0.0) ** 0.5,
            }
            return out

        def training_step(self, model, inputs, num_items_in_batch):
            self._generation_seconds, t0 = 0.0, time.perf_counter()
            loss = super().training_step(model, inputs, num_items_in_batch)
            self.backward_end = time.perf_counter()  # then the Trainer clips and steps the optimizer: on_step_end
            self.phase_seconds["update"] += self.backward_end - t0 - self._generation_seconds
            return loss

        # -- the loss -------------------------------------------------------------------------------
        def _compute_loss(self, model, inputs):
            prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
            completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
            k = completion_ids.size(1)
            ent_acc = self.loss_entropy if self.model.training else None
            logp, ent, _ = self._get_per_token_logps_and_entropies(  # the entropy statistic here when no pi_old forward
                model, torch.cat([prompt_ids, completion_ids], 1), torch.cat([prompt_mask, completion_mask], 1), k,
                compute_entropy=ent_acc is not None)
            mask = completion_mask.to(logp.dtype)
            train = self.model.training
            num_tokens, num_seqs = trl_normalisers(
                batch_rows=completion_ids.size(0),
                num_items_in_batch=float(inputs["num_items_in_batch"]), num_processes=self.accelerator.num_processes,
                grad_accum=self.current_gradient_accumulation_steps if train else 1,
                steps_per_generation=self.args.steps_per_generation if train else 1)
            weights = inputs.get("token_weights", mask)
            is_ratio = inputs.get("importance_sampling_ratio") if self.use_vllm and \
                self.vllm_importance_sampling_correction else None
            old = inputs.get("old_per_token_logps")
            old = logp.detach() if old is None else old
            loss = preset_loss(self.preset, logp, old, inputs["advantages"], weights, mask, num_tokens=num_tokens,
                               num_seqs=num_seqs, max_len=self.max_completion_length,
                               ref_logp=inputs.get("ref_per_token_logps"), is_ratio=is_ratio)
            with torch.no_grad():
                ratio = torch.exp(logp - old)
                clipped = ((ratio < 1 - self.preset.eps_low) | (ratio > 1 + self.preset.eps_high)).to(mask.dtype)
                ent_sum = (ent.detach() * mask).sum() if ent_acc is not None else mask.new_zeros(())
                totals = self.accelerator.reduce(torch.stack([(clipped * mask).sum(), mask.sum(), ent_sum]), "sum")
                if ent_acc is not None:
                    ent_acc[:] = [ent_acc[0] + float(totals[2]), ent_acc[1] + float(totals[1])]
                self._metrics["train" if train else "eval"]["clip_ratio/region_mean"].append(
                    float(totals[0] / totals[1].clamp(min=1.0)))
            return loss

    return CreditGRPOTrainer


# --------------------------------------------------------------------- checkpoints and metrics

def _make_callback_class():
    from transformers import TrainerCallback

    class CheckpointAndMetrics(TrainerCallback):
        """One metrics row per rollout step; HF folders + TRL resume state every checkpoint_every steps."""

        def __init__(self, *, run_dir: Path, mini_batches: int, checkpoint_steps: tuple[int, ...], total_steps: int,
                     base_model: str, wall_offset: float) -> None:
            self.run_dir, self.mini_batches = run_dir, mini_batches
            self.checkpoint_steps, self.total_steps = checkpoint_steps, total_steps
            self.base_model, self.wall_offset = base_model, wall_offset
            self.trainer = None
            self.t_start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            tr = self.trainer
            tr.phase_seconds["update"] += time.perf_counter() - tr.backward_end  # clip, optimizer step (as native)
            if state.global_step % self.mini_batches:
                return control
            done = state.global_step // self.mini_batches
            t0 = time.perf_counter()
            if done in self.checkpoint_steps:
                export_hf_checkpoint(tr, self.run_dir / "checkpoints" / f"step{done}", base_model=self.base_model)
                tr._save_checkpoint(tr.model, trial=None)  # TRL/HF resume state (optimizer, RNG, sampler)
            tr.phase_seconds["checkpoint"] += time.perf_counter() - t0
            if tr.loss_entropy is not None:  # no pi_old forward: entropy of the loss forwards, same parameters
                tr.batch_stats["entropy"] = tr.loss_entropy[0] / max(tr.loss_entropy[1], 1.0)
            if tr.accelerator.is_main_process:
                seconds = dict(tr.phase_seconds)
                seconds["total"] = sum(tr.phase_seconds.values())
                append_jsonl(self.run_dir / "metrics.jsonl", {
                    "step": done - 1, **tr.batch_stats, "time": seconds,
                    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                    "wall_clock": self.wall_offset + time.perf_counter() - self.t_start,
                    "backend": "trl", "global_step": state.global_step, "processes": tr.accelerator.num_processes,
                    **({"peak_gpu_mb": torch.cuda.max_memory_allocated() / 2**20} if torch.cuda.is_available() else {}),
                })
                print(f"[{tr.preset.name}] step {done}/{self.total_steps} acc {tr.batch_stats.get('accuracy', 0):.3f} "
                      f"step {seconds['total']:.2f}s", flush=True)
            tr.phase_seconds = {p: 0.0 for p in PHASES}
            return control

    return CheckpointAndMetrics


def export_hf_checkpoint(trainer, out: Path, *, base_model: str) -> None:
    """A full HF folder (tokenizer included; LoRA merged into the base on the main process), atomically."""
    tmp = out.with_name(out.name + ".tmp")
    trainer.save_model(str(tmp))  # gathers ZeRO-3 / FSDP shards; only the main process writes
    trainer.accelerator.wait_for_everyone()
    if not trainer.accelerator.is_main_process:
        return
    if (tmp / "adapter_config.json").exists():  # PEFT: evaluation loads plain HF folders
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        base = AutoModelForCausalLM.from_pretrained(base_model, dtype="auto")  # the stored dtype
        merged = PeftModel.from_pretrained(base, str(tmp)).merge_and_unload()
        merged_dir = out.with_name(out.name + ".merged")
        merged.save_pretrained(str(merged_dir), safe_serialization=True)
        trainer.processing_class.save_pretrained(str(merged_dir))
        shutil.rmtree(tmp)
        tmp = merged_dir
    replace_dir_atomic(tmp, out)


# ------------------------------------------------------------------------------------- entry point

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

    if preset.outcome_advantage != "group" or preset.token_advantage is not None:
        raise NotImplementedError(f"backend trl: preset {preset.name!r} needs the native loop "
                                  f"(its advantage is {preset.token_advantage or preset.outcome_advantage!r}, "
                                  "TRL's is the group z-score)")
    if preset.token_terms is not None or preset.kl_reference != "ref":
        raise NotImplementedError(f"backend trl: preset {preset.name!r} needs the native loop (per-token loss terms "
                                  f"{preset.token_terms!r} against pi_old are not carried through TRL's batch)")
    from trl import GRPOConfig

    run = Path(run_dir)
    os.environ.update(report_to(cfg.tracking, run)[1])  # the integrations' offline mode and folders
    tokenizer = AutoTokenizer.from_pretrained(sft_dir, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dtype = torch.bfloat16 if cfg.scale.dtype == "bfloat16" and cfg.scale.gpus_per_node else torch.float32
    model = AutoModelForCausalLM.from_pretrained(sft_dir, dtype=dtype)
    log = RewardLog()
    trainer_cls, callback_cls = _make_trainer_class(), _make_callback_class()
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
