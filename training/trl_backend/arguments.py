"""Backend ``trl``: ``trl.GRPOConfig`` keyword arguments, DeepSpeed and PEFT configs of a recipe and a preset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from common.config import Config, ScaleConfig
from training.presets import Preset, refusal
from training.tracking import report_to

LOSS_TYPE = {"token_mean": "dapo", "seq_mean_token_mean": "grpo", "seq_mean_token_sum_norm": "dr_grpo"}
"""TRL ``loss_type`` with the same aggregation (used by TRL for its logging only; the loss is ours)."""


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
    if why := refusal(preset, "trl"):  # the DAG-time check (presets.check_methods), for direct callers
        raise NotImplementedError(why)
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
