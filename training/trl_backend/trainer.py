"""Backend ``trl``: the loss shared with the native loop and the ``GRPOTrainer`` subclass (package docstring)."""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import Tensor

from common.records import PHASES
from training import losses
from training.credit import get_token_weight_fn
from training.phases import OldForward, build_credit_batch
from training.presets import Preset
from training.trl_backend.rewards import RewardLog


def needs_old_forward(preset: Preset) -> bool:
    """Whether the credit phase reads pi_old's forward: what the preset's functions declare they read
    (``registry.register(reads=...)``) beyond ``kv`` (CF's keys/values serve only the native loop's
    prefix-cached re-scoring; TRL re-scores via logp_fn)."""
    return bool(preset.reads - {"kv"})


def loss_terms(preset: Preset, logp: Tensor, old_logp: Tensor, advantages: Tensor, weights: Tensor,
               ref_logp: Tensor | None = None, is_ratio: Tensor | None = None,
               mask: Tensor | None = None) -> losses.LossTerms:
    """The native loop's ``losses.per_token_loss`` with the preset's knobs (``mask`` for GSPO's sequence
    ratio): the per-token loss, KL and the clip indicator, [B, R] each."""
    return losses.per_token_loss(logp, old_logp, advantages, weights, **preset.loss_kwargs(),
                                 ref_logp=ref_logp if preset.kl_beta > 0 else None, is_ratio=is_ratio, mask=mask)


def per_token_loss(preset: Preset, logp: Tensor, old_logp: Tensor, advantages: Tensor, weights: Tensor,
                   ref_logp: Tensor | None = None, is_ratio: Tensor | None = None,
                   mask: Tensor | None = None) -> Tensor:
    """:func:`loss_terms`' per-token loss [B, R]."""
    return loss_terms(preset, logp, old_logp, advantages, weights, ref_logp, is_ratio, mask).per_token


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


def make_trainer_class():
    """Build the GRPOTrainer subclass (TRL imported here: importing this module stays cheap)."""
    from trl import GRPOTrainer

    class CreditGRPOTrainer(GRPOTrainer):
        """``trl.GRPOTrainer`` with creditbench's per-token weights and loss (module docstring)."""

        def __init__(self, *args: Any, preset: Preset, reward_log: RewardLog, credit_seed: int,
                     offload_hidden: bool = False, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.preset = preset
            self.weight_fn = get_token_weight_fn(preset.token_weights)
            self.reward_log = reward_log
            self.offload_hidden = offload_hidden
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
                    raise RuntimeError(f"{self.preset.token_weights!r} reads pi_old: declare it in register(reads=...)")
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
            self._generation_seconds = 0.0
            t0 = time.perf_counter()
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
            terms = loss_terms(self.preset, logp, old, inputs["advantages"], weights,
                               ref_logp=inputs.get("ref_per_token_logps"), is_ratio=is_ratio, mask=mask)
            loss = losses.aggregate(terms.per_token, mask, self.preset.aggregation, num_tokens=num_tokens,
                                    num_seqs=num_seqs, max_len=self.max_completion_length)
            with torch.no_grad():
                clipped = terms.clipped.to(mask.dtype)  # the policy loss's own statistic, as the native loop's
                ent_sum = (ent.detach() * mask).sum() if ent_acc is not None else mask.new_zeros(())
                totals = self.accelerator.reduce(torch.stack([(clipped * mask).sum(), mask.sum(), ent_sum]), "sum")
                if ent_acc is not None:
                    ent_acc[:] = [ent_acc[0] + float(totals[2]), ent_acc[1] + float(totals[1])]
                self._metrics["train" if train else "eval"]["clip_ratio/region_mean"].append(
                    float(totals[0] / totals[1].clamp(min=1.0)))
            return loss

    return CreditGRPOTrainer
