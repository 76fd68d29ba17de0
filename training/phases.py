"""The phases of one RL step as functions: the native loop (``training.rl``) composes them, and the offline
studies (``training.studies``) and the TRL backend call the same ones, so a study's batch is the loop's batch.

  1. :func:`sample_rollout` (G responses per prompt)    2. :func:`grade_rollout` + :func:`shape_rewards`
  3. :func:`old_forward` / :func:`update_forward`       4. :func:`build_credit_batch` + the preset's functions

Phase 3 computes, in one forward, what the preset declares in ``Preset.needs`` (``presets.NEEDS``): the LM-head
input (``hidden``), the keys/values (``kv``) and any per-position statistic of the old policy's distribution named
in ``training.credit.batch.POSITION_STATS`` (e.g. OTB's ``sum_pi_sq``); a new statistic is one entry there and one
name in a preset's ``needs``, and it reaches the credit functions as ``CreditBatch.stats[name]``.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, replace
from functools import partial
from types import MappingProxyType
from typing import Callable, Collection, Mapping, NamedTuple

import torch

from common.config import RLConfig
from evaluation.generation.hf import sample_hf
from evaluation.grading import grade, reward
from training import losses
from training.credit import TERM_NAMES, CreditBatch, get_token_advantage_fn, get_token_terms_fn
from training.credit.batch import POSITION_STATS
from training.credit.rescoring import SourceCache, cache_layers, chunked, edited_logp, position_ids
from training.presets import Preset
from training.registry import get


def response_mask_from_ids(response_ids: torch.Tensor, eos_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask [B,R] of real response tokens (up to and including the first eos) and truncated flags [B]."""
    is_eos = response_ids == eos_id
    seen_before = torch.cumsum(is_eos.int(), dim=1) - is_eos.int()  # eos tokens strictly before t
    mask = (seen_before == 0).float()
    truncated = ~is_eos.any(dim=1)
    return mask, truncated


def forward_logp(model, prompt_ids, prompt_mask, response_ids, response_mask, *, capture_hidden: bool = False,
                 with_entropy: bool = False, kv_out: list | None = None, stats_out: dict | None = None):
    """Log-probs of response tokens [B,R] (and entropy [B,R], LM-head input [B,R,H] if asked).

    Position ids follow the attention mask, as ``generate`` computes them for left-padded prompts. The LM head
    runs on the last R + 1 positions only (``logits_to_keep``): position p-1+j predicts response token j, the
    prompt's other positions predict nothing scored (SmolLM2: a 49k-row head on ~1/3 of a step's positions,
    forward and backward). Same log-probs bit for bit; the head's weight gradient sums the same terms
    without the prompt positions' zeros (float summation order).
    ``kv_out``: a list to which the keys/values of all P+R positions are appended (``scoring.Layers``;
    None if the model's cache is not a plain full-attention one). ``stats_out``: ``{name: list}``; the
    ``POSITION_STATS[name]`` [B,R] of this forward is appended to each list.
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
                    use_cache=kv_out is not None, logits_to_keep=response_ids.shape[1] + 1)
        logits = out.logits
        if kv_out is not None:
            kv_out.append(cache_layers(out, detach=True))
    finally:
        if handle is not None:
            handle.remove()
    logits = logits[:, :-1].float()  # [B, R, V]: position p-1+j predicts response token j
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, response_ids.unsqueeze(-1)).squeeze(-1)  # [B, R]
    with torch.no_grad():  # statistics of theta_old: no graph, also when the forward is the update's
        entropy = -(logp_all.exp() * logp_all).sum(-1) if with_entropy else None
        for name, parts in (stats_out or {}).items():
            parts.append(POSITION_STATS[name](logp_all))
    hidden = captured["h"][:, :-1] if capture_hidden else None  # [B, R, H]
    return logp, entropy, hidden


def sample_prompts(problems: list[dict], n: int, seed: int, step: int) -> list[dict]:
    """The step's prompts depend only on (seed, step): identical across methods and after a resume."""
    return random.Random(seed * 1_000_003 + step).sample(problems, n)


REWARD_WORKERS = max(1, min(8, (os.cpu_count() or 2) // 2))
"""Sympy worker subprocesses grading one rollout batch (most pairs never leave the fast path)."""


def verifiable_reward(response: str, gold: str, *, timeout_s: float) -> float:
    """1.0 if the answer checker accepts the response, else 0.0 (the checker evaluation uses)."""
    return float(grade(response, gold, timeout_s=timeout_s).correct)


# ---- the phases of one step, as functions (training.rl, training.studies and training.trl_backend call them) ----


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
    advantages = get("outcome_advantage", preset.outcome_advantage).fn(
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
    hidden: torch.Tensor | None  # [B, R, H] LM-head input, if "hidden" in needs
    ref_logp: torch.Tensor | None  # [B, R] under the reference model, if any
    kv: SourceCache | None  # (old_logp, keys/values per micro-batch of rows), if "kv" in needs and the cache is plain
    stats: Mapping[str, torch.Tensor] = MappingProxyType({})  # POSITION_STATS named in needs, [B, R] each


class HeldForward(NamedTuple):
    """The update's forward when phase 3 is folded into it (:func:`update_forward`)."""

    order: torch.Tensor  # [B] the update's row order: its micro-batches are consecutive slices of it
    logps: list[torch.Tensor]  # per micro-batch, log-probs [m, R] with their autograd graphs, in order


def _forward_groups(model, ro: Rollout, groups: list[torch.Tensor], *, grad: bool, needs: Collection[str],
                    ref_model) -> tuple[OldForward, list[torch.Tensor]]:
    """:func:`forward_logp` over groups of rows (micro-batches): the detached outputs in batch order and,
    per group, the log-probs as computed (with their graphs if ``grad``)."""
    capture_hidden, keep_kv = "hidden" in needs, "kv" in needs
    olds, ents, hids, refs, kvs = [], [], [], [], []
    stats: dict[str, list[torch.Tensor]] = {name: [] for name in sorted(needs) if name in POSITION_STATS}
    for rows in groups:
        args = (ro.prompt_ids[rows], ro.prompt_mask[rows], ro.response_ids[rows], ro.response_mask[rows])
        with torch.set_grad_enabled(grad):
            lp, ent, hid = forward_logp(model, *args, capture_hidden=capture_hidden, with_entropy=True,
                                        kv_out=kvs if keep_kv else None, stats_out=stats)
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
                      batch_order(refs), kv, MappingProxyType({k: batch_order(v) for k, v in stats.items()})), olds


def old_forward(model, ro: Rollout, micro_batch_size: int, *, needs: Collection[str] = (),
                ref_model=None) -> OldForward:
    """Phase 3: one no-grad forward at theta_old in micro-batches, computing ``needs`` (``Preset.needs``). With
    "kv" it keeps its keys/values for CF's prefix-cached re-scoring (``scoring.edited_logp(source=...)``), which
    then runs no forward of the unedited batch itself."""
    model.eval()
    groups = [torch.arange(s.start, s.stop) for s in chunked(ro.response_ids.shape[0], micro_batch_size)]
    return _forward_groups(model, ro, groups, grad=False, needs=needs, ref_model=ref_model)[0]


def update_forward(model, ro: Rollout, order: torch.Tensor, micro_batch_size: int, *,
                   needs: Collection[str] = (), ref_model=None) -> tuple[OldForward, HeldForward]:
    """Phase 3 folded into phase 5 (``rl.fold_old_logp``, one mini-batch): the update's micro-batch forwards
    (train mode, with grad) run first, at theta_old, and phase 3's outputs are taken from them, detached
    (old_logp = logp.detach(), entropy, DelTA's h, OTB's sum pi^2, CF's keys/values). The graphs are held
    until the credit phase has the weights: the memory of the whole batch's activations at once (the
    two-forward path holds one micro-batch's). The reference model's forward stays a separate no-grad one."""
    model.train()
    groups = [order[s] for s in chunked(len(order), micro_batch_size)]
    old, logps = _forward_groups(model, ro, groups, grad=True, needs=needs, ref_model=ref_model)
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


def token_terms(preset: Preset, credit: CreditBatch) -> dict[str, torch.Tensor]:
    """The preset's per-token loss terms [B, R] (``Preset.token_terms``: clip bounds, KL coefficient), else {}."""
    if preset.token_terms is None:
        return {}
    with torch.no_grad():
        terms = dict(get_token_terms_fn(preset.token_terms)(credit, **preset.terms_knobs))
    if unknown := sorted(set(terms) - set(TERM_NAMES)):
        raise ValueError(f"token terms {preset.token_terms!r} gave {unknown}; valid: {list(TERM_NAMES)}")
    return terms


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



def with_values(old: OldForward, critic) -> OldForward:
    """Phase 3's outputs plus a learned critic's values V(h) at theta_old as ``stats["values"]`` (PPO-critic's
    GAE reads them); unchanged without a critic."""
    return old if critic is None else old._replace(stats={**old.stats, "values": critic.values(old.hidden)})


def build_credit_batch(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, response_ids: torch.Tensor,
                       group_ids: torch.Tensor, old: OldForward, tokenizer, *, advantages: torch.Tensor,
                       loss_mask: torch.Tensor, rewards: torch.Tensor | None, generator: torch.Generator,
                       logp_fn: Callable[..., torch.Tensor] | None,
                       edit_logp_fn: Callable[..., torch.Tensor] | None = None,
                       pad_token_id: int | None = None) -> CreditBatch:
    """Phase 4's input: the one place a :class:`CreditBatch` is assembled from a batch and its phase-3 outputs
    (the native loop and the studies through :func:`loop_credit_batch`, the TRL backend with TRL's tensors)."""
    return CreditBatch(
        prompt_ids=prompt_ids, prompt_mask=prompt_mask, response_ids=response_ids, response_mask=loss_mask,
        old_logp=old.old_logp, entropy=old.entropy, advantages=advantages, group_ids=group_ids, hidden=old.hidden,
        pad_token_id=tokenizer.pad_token_id if pad_token_id is None else pad_token_id, tokenizer=tokenizer,
        logp_fn=logp_fn, generator=generator, edit_logp_fn=edit_logp_fn, rewards=rewards, stats=old.stats)


def loop_credit_batch(model, ro: Rollout, old: OldForward, tokenizer, micro_batch_size: int, *,
                      advantages: torch.Tensor, loss_mask: torch.Tensor, rewards: torch.Tensor | None,
                      generator: torch.Generator, logp_fn: Callable[..., torch.Tensor] | None = None) -> CreditBatch:
    """:func:`build_credit_batch` of a native rollout, with the native re-scoring functions (CF): whole-sequence
    re-scoring under ``model`` and the prefix-cached one on top of phase 3's keys/values."""
    logp_fn = logp_fn or make_logp_fn(model, micro_batch_size)
    return build_credit_batch(ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.group_ids, old, tokenizer,
                              advantages=advantages, loss_mask=loss_mask, rewards=rewards, generator=generator,
                              logp_fn=logp_fn, edit_logp_fn=make_edit_logp_fn(model, ro, micro_batch_size,
                                                                              full_logp_fn=logp_fn, source=old.kv))


def update_policy(model, opt, preset: Preset, rl: RLConfig, ro: Rollout, *, old_logp: torch.Tensor,
                  advantages: torch.Tensor, weights: torch.Tensor, terms: Mapping[str, torch.Tensor],
                  kl_ref: torch.Tensor | None, loss_mask: torch.Tensor, order: torch.Tensor,
                  held: HeldForward | None) -> dict[str, float]:
    """Phase 5: ``rl.mini_batches`` optimizer steps over the batch in ``order``, each accumulated over
    micro-batches with the step's global token / sequence counts (so micro-batching never changes the loss);
    the folded forward's held graphs (``held``) stand in for the micro-batch forwards. Returns the step's
    loss, clip fraction and KL (the clip statistic is the policy loss's own, ``losses.per_token_loss``)."""
    stats = {"loss": 0.0, "clip_frac": 0.0, "kl": 0.0}
    total = max(float(loss_mask.sum()), 1.0)
    mini_rows = -(-len(order) // rl.mini_batches)  # verl's ppo_mini_batch_size (the last one may be smaller)
    mini_slices = list(chunked(len(order), mini_rows))
    for mb in mini_slices:
        idx_mb = order[mb]
        num_seqs = float((loss_mask[idx_mb].sum(-1) > 0).sum())
        opt.zero_grad(set_to_none=True)
        for s in chunked(len(idx_mb), rl.micro_batch_size):
            i = idx_mb[s]
            num_tokens = losses.token_mean_normaliser(
                preset.token_mean_normaliser, batch_tokens=float(loss_mask.sum()),
                mini_batch_tokens=float(loss_mask[idx_mb].sum()), micro_batch_tokens=float(loss_mask[i].sum()),
                mini_batches=len(mini_slices), mini_batch_rows=mini_rows, micro_batch_rows=len(i))
            logp = held.logps.pop(0) if held is not None else forward_logp(
                model, ro.prompt_ids[i], ro.prompt_mask[i], ro.response_ids[i], ro.response_mask[i])[0]
            out = losses.per_token_loss(logp, old_logp[i], advantages[i], weights[i],
                                        **{**preset.loss_kwargs(), **{k: v[i] for k, v in terms.items()}},
                                        ref_logp=None if kl_ref is None else kl_ref[i], mask=loss_mask[i])
            loss = losses.aggregate(out.per_token, loss_mask[i], preset.aggregation, num_tokens=num_tokens,
                                    num_seqs=num_seqs, max_len=rl.max_new_tokens)
            loss.backward()
            m = loss_mask[i]
            stats["loss"] += float(loss.detach())
            stats["clip_frac"] += float((out.clipped.float() * m).sum()) / total
            stats["kl"] += float((out.kl.detach() * m).sum()) / total
        if rl.grad_clip > 0:
            stats["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), rl.grad_clip))
        opt.step()
    return stats
