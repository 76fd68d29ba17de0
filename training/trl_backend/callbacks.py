"""Backend ``trl``: the callback writing one metrics row per rollout step and the HF checkpoints."""

from __future__ import annotations

import resource
import shutil
import time
from pathlib import Path

import torch

from common.io import append_jsonl, replace_dir_atomic
from common.records import PHASES


def make_callback_class():
    """Build the callback class (transformers imported here)."""
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
