"""The native RLVR trainer: one readable loop, every algorithm a preset (``training.presets``).

Per step (one rollout batch):
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
import random
import resource
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Callable, NamedTuple

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from common.config import Config, RLConfig, load_config, resume_digest
from common.io import append_jsonl, read_jsonl, write_jsonl_atomic
from common.manifest import write_manifest
from common.records import PHASES
from common.runtime import seed_everything, setup_runtime
from evaluation.generation.hf import sample_hf
from evaluation.grading import grade, reward
from training import losses
from training.checkpoint import (
    publish_checkpoint,
    restore_rng_state,
    rng_state,
    save_hf_atomic,
    step_dirs,
    truncate_metrics,
)
from training.credit import CreditBatch, get_token_advantage_fn, get_token_weight_fn
from training.credit.gradsnr import step_gradient_snr
from training.credit.rescoring import SourceCache, cache_layers, chunked, edited_logp, position_ids
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


def response_mask_from_ids(response_ids: torch.Tensor, eos_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask [B,R] of real response tokens (up to and including the first eos) and truncated flags [B]."""
    is_eos = response_ids == eos_id
    seen_before = torch.cumsum(is_eos.int(), dim=1) - is_eos.int()  # eos tokens strictly before t
    mask = (seen_before == 0).float()
    truncated = ~is_eos.any(dim=1)
    return mask, truncated


def forward_logp(model, prompt_ids, prompt_mask, response_ids, response_mask, *, capture_hidden: bool = False,
                 with_entropy: bool = False, kv_out: list | None = None, sum_pi_sq_out: list | None = None):
    """Log-probs of response tokens [B,R] (and entropy [B,R], LM-head input [B,R,H] if asked).

    Position ids follow the attention mask, as ``generate`` computes them for left-padded prompts.
    ``kv_out``: a list to which the keys/values of all P+R positions are appended (``scoring.Layers``;
    None if the model's cache is not a plain full-attention one). ``sum_pi_sq_out``: a list to which
    sum_v pi_v^2 [B,R] at each response position is appended (OTB's path-variance proxy).
    """
    input_ids = torch.cat([prompt_ids, response_ids], dim=1)  # [B, P+R]
    attention = torch.cat([prompt_mask, response_mask.long()], dim=1)
    captured = {}
    handle = None
    if capture_hidden:
        head = model.get_output_embeddings()
        handle = head.register_forward_pre_hook(lambda _m, args: captured.__setitem__("h", args[0].detach()))
    try:
        out = model(input_ids=input_ids, attention_mask=attention, position_ids=position_ids(attention),
                    use_cache=kv_out is not None)
        logits = out.logits
        if kv_out is not None:
            kv_out.append(cache_layers(out, detach=True))
    finally:
        if handle is not None:
            handle.remove()
    p = prompt_ids.shape[1]
    logits = logits[:, p - 1 : -1].float()  # [B, R, V]: position p-1+j predicts response token j
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, response_ids.unsqueeze(-1)).squeeze(-1)  # [B, R]
    with torch.no_grad():  # statistics of theta_old: no graph, also when the forward is the update's
        entropy = -(logp_all.exp() * logp_all).sum(-1) if with_entropy else None
        if sum_pi_sq_out is not None:
            sum_pi_sq_out.append(logp_all.mul(2.0).exp().sum(-1))  # [B, R] sum_v pi_v^2
    hidden = captured["h"][:, p - 1 : -1] if capture_hidden else None  # [B, R, H]
    return logp, entropy, hidden


def sample_prompts(problems: list[dict], n: int, seed: int, step: int) -> list[dict]:
    """The step's prompts depend only on (seed, step): identical across methods and after a resume."""
    return random.Random(seed * 1_000_003 + step).sample(problems, n)


REWARD_WORKERS = max(1, min(8, (os.cpu_count() or 2) // 2))
"""Sympy worker subprocesses grading one rollout batch (most pairs never leave the fast path)."""


def verifiable_reward(response: str, gold: str, *, timeout_s: float) -> float:
    """1.0 if the answer checker accepts the response, else 0.0 (the checker evaluation uses)."""
    return float(grade(response, gold, timeout_s=timeout_s).correct)


# ---- the phases of one step, as functions (the loop below, and training.credit.analysis, call them) ----


@dataclass(frozen=True)
class Rollout:
    """One rollout batch at ``step`` (phase 1); ``correct`` is set by :func:`grade_rollout` (phase 2)."""

    step: int
    prompt_ids: torch.Tensor  # [B, P] left padded
    prompt_mask: torch.Tensor  # [B, P]
    response_ids: torch.Tensor  # [B, R] right padded
    response_mask: torch.Tensor  # [B, R] float, up to and including the first EOS
    truncated: torch.Tensor  # [B] bool
    group_ids: torch.Tensor  # [B] prompt group of each response
    golds: tuple[str, ...]  # [B] gold answer of each response's prompt
    correct: torch.Tensor | None = None  # [B] float 0/1 from the reward function


def sample_rollout(model, tokenizer, problems: list[dict], rl: RLConfig, *, seed: int, step: int,
                   sampler: Callable[..., torch.Tensor] = sample_hf) -> Rollout:
    """Phase 1: ``rl.group_size`` samples for each of the step's prompts (they depend on (seed, step) only)."""
    batch_problems = sample_prompts(problems, rl.prompts_per_step, seed, step)
    enc = tokenizer([p["prompt"] for p in batch_problems], return_tensors="pt", padding=True,
                    add_special_tokens=False)
    model.eval()
    with torch.no_grad():
        response_ids = sampler(model, tokenizer, enc["input_ids"], enc["attention_mask"], n=rl.group_size,
                               temperature=rl.temperature, top_p=rl.top_p, max_new_tokens=rl.max_new_tokens,
                               generator_seed=seed * 7919 + step)
    group_ids = torch.arange(len(batch_problems)).repeat_interleave(rl.group_size)  # [B]
    response_mask, truncated = response_mask_from_ids(response_ids, tokenizer.eos_token_id)
    return Rollout(step=step, prompt_ids=enc["input_ids"].repeat_interleave(rl.group_size, dim=0),
                   prompt_mask=enc["attention_mask"].repeat_interleave(rl.group_size, dim=0),
                   response_ids=response_ids, response_mask=response_mask, truncated=truncated,
                   group_ids=group_ids, golds=tuple(batch_problems[int(g)]["answer"] for g in group_ids))


def grade_rollout(ro: Rollout, tokenizer, *, timeout_s: float,
                  reward_fn: Callable[..., float] = verifiable_reward) -> Rollout:
    """Phase 2a: the verifiable reward of every response (the answer checker on its decoded text).

    The default reward grades the batch through a pool of sympy workers (``evaluation.grading.reward``).
    """
    texts = tokenizer.batch_decode(
        [ids[: int(m.sum())] for ids, m in zip(ro.response_ids, ro.response_mask)], skip_special_tokens=True)
    if reward_fn is verifiable_reward:
        scores = reward(texts, list(ro.golds), timeout_s=timeout_s, workers=REWARD_WORKERS)
    else:
        scores = [reward_fn(t, g, timeout_s=timeout_s) for t, g in zip(texts, ro.golds)]
    correct = torch.tensor(scores)
    return replace(ro, correct=correct)


def shape_rewards(preset: Preset, ro: Rollout, max_new_tokens: int) -> tuple[torch.Tensor, ...]:
    """Phase 2b: (rewards [B], advantages [B], loss mask [B, R]) of ``preset`` on a graded rollout."""
    assert ro.correct is not None, "grade_rollout first"
    rewards = ro.correct.clone()
    if preset.overlong_shaping:  # DAPO §3.4, L_max = max_new_tokens
        cache = max(1, int(round(preset.overlong_cache_frac * max_new_tokens)))
        rewards = rewards + losses.overlong_penalty(ro.response_mask.sum(-1), max_len=max_new_tokens,
                                                    cache_len=cache)
    advantages = losses.OUTCOME_ADVANTAGES[preset.outcome_advantage](
        rewards, ro.group_ids, scale_by_std=preset.scale_adv_by_std, **preset.outcome_knobs)
    loss_mask = ro.response_mask.clone()
    if preset.mask_truncated:  # overlong filtering: truncated completions carry no loss
        loss_mask[ro.truncated] = 0.0
    if preset.dynamic_sampling:  # DAPO §3.2 filter (no refill; see module docstring)
        for g in torch.unique(ro.group_ids):
            idx = ro.group_ids == g
            if rewards[idx].std() == 0:
                loss_mask[idx] = 0.0
    return rewards, advantages, loss_mask


class OldForward(NamedTuple):
    """Phase 3's outputs at theta_old (detached)."""

    old_logp: torch.Tensor  # [B, R]
    entropy: torch.Tensor  # [B, R]
    hidden: torch.Tensor | None  # [B, R, H] LM-head input, if capture_hidden
    ref_logp: torch.Tensor | None  # [B, R] under the reference model, if any
    kv: SourceCache | None  # (old_logp, keys/values per micro-batch of rows), if keep_kv and the cache is plain
    sum_pi_sq: torch.Tensor | None = None  # [B, R] sum_v pi_old(v)^2, if sum_pi_sq


class HeldForward(NamedTuple):
    """The update's forward when phase 3 is folded into it (:func:`update_forward`)."""

    order: torch.Tensor  # [B] the update's row order: its micro-batches are consecutive slices of it
    logps: list[torch.Tensor]  # per micro-batch, log-probs [m, R] with their autograd graphs, in order


def _forward_groups(model, ro: Rollout, groups: list[torch.Tensor], *, grad: bool, capture_hidden: bool,
                    ref_model, keep_kv: bool, sum_pi_sq: bool) -> tuple[OldForward, list[torch.Tensor]]:
    """:func:`forward_logp` over groups of rows (micro-batches): the detached outputs in batch order and,
    per group, the log-probs as computed (with their graphs if ``grad``)."""
    olds, ents, hids, refs, kvs, sq = [], [], [], [], [], []
    for rows in groups:
        args = (ro.prompt_ids[rows], ro.prompt_mask[rows], ro.response_ids[rows], ro.response_mask[rows])
        with torch.set_grad_enabled(grad):
            lp, ent, hid = forward_logp(model, *args, capture_hidden=capture_hidden, with_entropy=True,
                                        kv_out=kvs if keep_kv else None, sum_pi_sq_out=sq if sum_pi_sq else None)
        olds.append(lp), ents.append(ent), hids.append(hid)
        if ref_model is not None:
            with torch.no_grad():
                refs.append(forward_logp(ref_model, *args)[0])
    where = torch.cat(groups)

    def batch_order(parts: list[torch.Tensor]) -> torch.Tensor | None:
        if not parts:
            return None
        stacked = torch.cat([t.detach() for t in parts])
        out = torch.empty_like(stacked)
        out[where] = stacked
        return out

    old_logp = batch_order(olds)
    kv = (old_logp, list(zip(groups, kvs))) if keep_kv and all(k is not None for k in kvs) else None
    return OldForward(old_logp, batch_order(ents), batch_order(hids) if capture_hidden else None,
                      batch_order(refs), kv, batch_order(sq)), olds


def old_forward(model, ro: Rollout, micro_batch_size: int, *, capture_hidden: bool, ref_model=None,
                keep_kv: bool = False, sum_pi_sq: bool = False) -> OldForward:
    """Phase 3: one no-grad forward at theta_old in micro-batches. ``keep_kv`` keeps its keys/values for
    CF's prefix-cached re-scoring (``scoring.edited_logp(source=...)``), which then runs no forward of
    the unedited batch itself."""
    model.eval()
    groups = [torch.arange(s.start, s.stop) for s in chunked(ro.response_ids.shape[0], micro_batch_size)]
    return _forward_groups(model, ro, groups, grad=False, capture_hidden=capture_hidden, ref_model=ref_model,
                           keep_kv=keep_kv, sum_pi_sq=sum_pi_sq)[0]


def update_forward(model, ro: Rollout, order: torch.Tensor, micro_batch_size: int, *, capture_hidden: bool,
                   ref_model=None, keep_kv: bool = False, sum_pi_sq: bool = False) -> tuple[OldForward, HeldForward]:
    """Phase 3 folded into phase 5 (``rl.fold_old_logp``, one mini-batch): the update's micro-batch forwards
    (train mode, with grad) run first, at theta_old, and phase 3's outputs are taken from them, detached
    (old_logp = logp.detach(), entropy, DelTA's h, OTB's sum pi^2, CF's keys/values). The graphs are held
    until the credit phase has the weights: the memory of the whole batch's activations at once (the
    two-forward path holds one micro-batch's). The reference model's forward stays a separate no-grad one."""
    model.train()
    groups = [order[s] for s in chunked(len(order), micro_batch_size)]
    old, logps = _forward_groups(model, ro, groups, grad=True, capture_hidden=capture_hidden, ref_model=ref_model,
                                 keep_kv=keep_kv, sum_pi_sq=sum_pi_sq)
    return old, HeldForward(order, logps)


def has_dropout(model) -> bool:
    """True if the model's train- and eval-mode forwards can differ (a dropout module or config rate > 0)."""
    config = getattr(model, "config", None)
    items = config.to_dict().items() if config is not None else ()
    rates = [v for k, v in items if "dropout" in k and isinstance(v, (int, float))]
    return any(r > 0 for r in rates) or any(
        isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules())


def folds_old_logp(rl: RLConfig, preset: Preset, model) -> bool:
    """Whether phase 3 is the update's own forward (:func:`update_forward`): ``rl.fold_old_logp`` with one
    mini-batch (the only update runs at theta_old, so its forward is phase 3's), a loss that does not
    depend on the micro-batch partition (not verl's per-micro-batch normaliser: the folded forward fixes
    the partition before the credit phase draws from the generator) and no dropout (phase 3 runs in eval
    mode, the update in train mode)."""
    return (rl.fold_old_logp and rl.mini_batches == 1 and preset.token_mean_normaliser != "micro_batch"
            and not has_dropout(model))


def peek_randperm(n: int, generator: torch.Generator) -> torch.Tensor:
    """``torch.randperm(n, generator=generator)`` without advancing ``generator``: the update's order as
    phase 5 draws it, unless the credit phase draws from the generator first (random-weight controls)."""
    twin = torch.Generator(device=generator.device)
    twin.set_state(generator.get_state())
    return torch.randperm(n, generator=twin)


def token_advantages(preset: Preset, credit: CreditBatch) -> torch.Tensor:
    """The advantage the loss uses: the preset's token-level advantage [B, R] (OTB, KTAE), else A_i [B]."""
    if preset.token_advantage is None:
        return credit.advantages
    with torch.no_grad():
        return get_token_advantage_fn(preset.token_advantage)(credit, **preset.advantage_knobs)


def make_logp_fn(model, micro_batch_size: int) -> Callable[..., torch.Tensor]:
    """CF's whole-sequence re-scoring under the current policy (``training.credit.batch.LogProbFn``)."""

    def logp_fn(p_ids, p_mask, r_ids, r_mask):
        with torch.no_grad():
            outs = [forward_logp(model, p_ids[s], p_mask[s], r_ids[s], r_mask[s])[0]
                    for s in chunked(p_ids.shape[0], micro_batch_size)]
        return torch.cat(outs)

    return logp_fn


def make_edit_logp_fn(model, ro: Rollout, micro_batch_size: int, *,
                      full_logp_fn: Callable[..., torch.Tensor],
                      source: SourceCache | None) -> Callable[..., torch.Tensor]:
    """CF's prefix-cached re-scoring of edited rows of ``ro`` (``training.credit.batch.EditLogProbFn``), on top of
    the phase-3 forward's keys/values when ``source`` holds them."""
    return partial(edited_logp, model, ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask,
                   micro_batch_size=micro_batch_size, full_logp_fn=full_logp_fn, source=source)


def resume_checkpoint(resume_root: Path, metrics: Path) -> Path | None:
    """The latest ``step<N>`` of ``resume_root`` whose metrics rows 0..N-1 were all logged (a kill between
    the checkpoint and its row falls back one checkpoint), or None."""
    rows = read_jsonl(metrics, drop_torn_tail=True) if metrics.exists() else []
    logged = {r["step"] for r in rows}
    return next((p for n, p in reversed(step_dirs(resume_root)) if set(range(n)) <= logged), None)


def train(cfg: Config, preset: Preset, *, seed: int, sft_dir: str, train_path: str, run_dir: str,
          reward_fn: Callable[..., float] = verifiable_reward,
          sampler: Callable[..., torch.Tensor] = sample_hf) -> None:
    device = setup_runtime(cfg.runtime)
    rl = cfg.rl
    run = Path(run_dir)
    ckpt_root = run / "checkpoints"  # the rule's outputs, published from resume_root
    resume_root = run / "resume"  # not an output: survives Snakemake's removal of a killed job's outputs
    metrics_path = run / "metrics.jsonl"
    resume_metrics = resume_root / "metrics.jsonl"  # the same rows, kept beside the resume checkpoints
    weights_path = run / "token_weights.jsonl"
    digest = resume_digest(cfg.raw, preset.name)
    run.mkdir(parents=True, exist_ok=True)
    generator = seed_everything(seed)
    tokenizer = AutoTokenizer.from_pretrained(sft_dir, padding_side="left")
    problems = read_jsonl(train_path)
    weight_fn = get_token_weight_fn(preset.token_weights)

    resume = resume_checkpoint(resume_root, resume_metrics)
    state = torch.load(resume / "state.pt", weights_only=False) if resume is not None else None
    if state is not None and state.get("config") != digest:
        print(f"discarding the resume state in {resume_root}: written under another config")
        shutil.rmtree(resume_root)
        resume = state = None
    model = AutoModelForCausalLM.from_pretrained(resume or sft_dir).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=rl.lr, weight_decay=rl.weight_decay)
    start_step, wall_offset = 0, 0.0
    if state is not None:
        opt.load_state_dict(state["optimizer"])
        restore_rng_state(state["rng"], generator)
        start_step = state["step"]
        rows = truncate_metrics(resume_metrics, start_step)
        write_jsonl_atomic(metrics_path, rows)
        wall_offset = rows[-1]["wall_clock"] if rows else 0.0
        for n, step_dir in step_dirs(resume_root):  # outputs Snakemake removed with the killed job
            if n <= start_step:
                publish_checkpoint(step_dir, ckpt_root / step_dir.name)
        print(f"resuming {preset.name} seed {seed} from step {start_step} ({resume})")
    else:
        for p in (metrics_path, weights_path, resume_metrics):
            p.unlink(missing_ok=True)
    resume_root.mkdir(parents=True, exist_ok=True)
    ref_model = None
    if preset.kl_beta > 0:
        ref_model = AutoModelForCausalLM.from_pretrained(sft_dir).to(device).eval()
        ref_model.requires_grad_(False)

    logp_fn = make_logp_fn(model, rl.micro_batch_size)  # CF's counterfactual re-scoring, current policy
    tracker = make_tracker(cfg.tracking, run, name=f"{preset.name}-seed{seed}", config=cfg.raw)

    t_start = time.perf_counter()
    for step in range(start_step, rl.steps):
        timer = PhaseTimer()
        # ---- 1. rollout -------------------------------------------------------------------------
        with timer("rollout"):
            ro = sample_rollout(model, tokenizer, problems, rl, seed=seed, step=step, sampler=sampler)
            prompt_ids, prompt_mask, response_ids = ro.prompt_ids, ro.prompt_mask, ro.response_ids
            response_mask, truncated, group_ids = ro.response_mask, ro.truncated, ro.group_ids
        # ---- 2. reward ----------------------------------------------------------------------------
        with timer("reward"):
            ro = grade_rollout(ro, tokenizer, timeout_s=cfg.eval.grader_timeout_s, reward_fn=reward_fn)
            correct, lengths = ro.correct, response_mask.sum(-1)
            rewards, advantages, loss_mask = shape_rewards(preset, ro, rl.max_new_tokens)
        # ---- 3. old log-probs (+ hidden states for DelTA) from one forward -------------------------
        with timer("old_logp"):  # folded: the update's forward with grad (module docstring)
            needs = dict(capture_hidden=preset.needs_hidden or cfg.fidelity.grad_snr,  # gradsnr reads h
                         ref_model=ref_model, keep_kv=preset.needs_kv, sum_pi_sq=preset.needs_sum_pi_sq)
            if folds_old_logp(rl, preset, model):
                order = peek_randperm(response_ids.shape[0], generator)
                old, held = update_forward(model, ro, order, rl.micro_batch_size, **needs)
            else:
                old, held = old_forward(model, ro, rl.micro_batch_size, **needs), None
            old_logp, entropy, hidden, ref_logp = old.old_logp, old.entropy, old.hidden, old.ref_logp
        # ---- 4. credit: token weights at theta_old, fixed for the whole update --------------------
        with timer("credit"):
            credit = CreditBatch(
                prompt_ids=prompt_ids, prompt_mask=prompt_mask, response_ids=response_ids,
                response_mask=loss_mask, old_logp=old_logp, entropy=entropy, advantages=advantages,
                group_ids=group_ids, hidden=hidden, pad_token_id=tokenizer.pad_token_id, tokenizer=tokenizer,
                logp_fn=logp_fn, generator=generator, rewards=rewards, sum_pi_sq=old.sum_pi_sq,
                edit_logp_fn=make_edit_logp_fn(model, ro, rl.micro_batch_size, full_logp_fn=logp_fn,
                                               source=old.kv),
            )
            with torch.no_grad():
                weights = weight_fn(credit, **preset.knobs) * loss_mask  # [B, R]
                loss_adv = token_advantages(preset, credit)  # [B] or, for OTB / KTAE, [B, R]
            del old, credit  # free the kept keys/values before the update
            diag = step_gradient_snr(preset, hidden, model.get_output_embeddings().weight, response_ids, loss_adv,
                                     weights, loss_mask, group_ids, rl.max_new_tokens) if cfg.fidelity.grad_snr else {}
        # ---- 5. update ------------------------------------------------------------------------------
        with timer("update"):
            model.train()
            order = torch.randperm(response_ids.shape[0], generator=generator)  # drawn in both paths: same RNG
            if held is not None:  # folded: the micro-batches the forward already ran, in its (peeked) order
                order = held.order
            stats = {"loss": 0.0, "clip_frac": 0.0, "kl": 0.0}
            mini_rows = -(-len(order) // rl.mini_batches)  # verl's ppo_mini_batch_size (last one may be smaller)
            mini_slices = list(chunked(len(order), mini_rows))
            for mb in mini_slices:
                idx_mb = order[mb]
                micro_slices = list(chunked(len(idx_mb), rl.micro_batch_size))
                num_seqs = float((loss_mask[idx_mb].sum(-1) > 0).sum())
                opt.zero_grad(set_to_none=True)
                for s in micro_slices:
                    i = idx_mb[s]
                    num_tokens = losses.token_mean_normaliser(
                        preset.token_mean_normaliser, batch_tokens=float(loss_mask.sum()),
                        mini_batch_tokens=float(loss_mask[idx_mb].sum()), micro_batch_tokens=float(loss_mask[i].sum()),
                        mini_batches=len(mini_slices), mini_batch_rows=mini_rows, micro_batch_rows=len(i))
                    logp = held.logps.pop(0) if held is not None else forward_logp(
                        model, prompt_ids[i], prompt_mask[i], response_ids[i], response_mask[i])[0]
                    per_token, kl = losses.per_token_loss(
                        logp, old_logp[i], loss_adv[i], weights[i], **preset.loss_kwargs(),
                        ref_logp=None if ref_logp is None else ref_logp[i])
                    loss = losses.aggregate(per_token, loss_mask[i], preset.aggregation, num_tokens=num_tokens,
                                            num_seqs=num_seqs, max_len=rl.max_new_tokens)
                    loss.backward()
                    with torch.no_grad():
                        m = loss_mask[i]
                        ratio = torch.exp(logp - old_logp[i])
                        clipped = ((ratio < 1 - preset.eps_low) | (ratio > 1 + preset.eps_high)).float()
                        stats["loss"] += float(loss)
                        stats["clip_frac"] += float((clipped * m).sum()) / max(float(loss_mask.sum()), 1.0)
                        stats["kl"] += float((kl * m).sum()) / max(float(loss_mask.sum()), 1.0)
                if rl.grad_clip > 0:
                    stats["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), rl.grad_clip))
                opt.step()
        # ---- 6. checkpoint + metrics --------------------------------------------------------------
        done = step + 1
        with timer("checkpoint"):
            if done in rl.checkpoint_steps:
                state = {"step": done, "optimizer": opt.state_dict(), "rng": rng_state(generator), "config": digest}
                save_hf_atomic(model, tokenizer, resume_root / f"step{done}", extra_state=state)
                publish_checkpoint(resume_root / f"step{done}", ckpt_root / f"step{done}")
                if rl.log_token_weights:
                    rows = dump_token_weights(weights_path, tokenizer, done, response_ids, loss_mask, weights,
                                              advantages, correct, rl.log_token_weights)
                    tracker.text("token_weights", weights_text(rows), done)
        seconds = dict(timer.seconds)
        seconds["total"] = sum(timer.seconds.values())
        row = {
            "step": step, "reward_mean": float(rewards.mean()), "accuracy": float(correct.mean()),
            "response_length": float(lengths.mean()), "truncated_frac": float(truncated.float().mean()),
            "entropy": float((entropy * response_mask).sum() / response_mask.sum()),
            "weight_mean": float(weights.sum() / loss_mask.sum().clamp(min=1)),
            "weight_std": float(weights[loss_mask > 0].std()) if loss_mask.sum() > 1 else 0.0,
            "time": seconds, "tokens_generated": int(response_mask.sum()), "tokens_trained": int(loss_mask.sum()),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "wall_clock": wall_offset + time.perf_counter() - t_start, **stats, **diag,
        }
        for path in (resume_metrics, metrics_path):
            append_jsonl(path, row)
        tracker.log(row, step)
        if step % 10 == 0 or done == rl.steps:
            print(f"[{preset.name} seed {seed}] step {done}/{rl.steps} acc {float(correct.mean()):.3f} "
                  f"step {seconds['total']:.2f}s", flush=True)
    tracker.close()
    shutil.rmtree(resume_root, ignore_errors=True)  # done: a forced rerun (new code) starts from step 0


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
