"""Re-scoring edited responses with the unedited prefix's KV cache (CF's counterfactual forwards).

CF (arXiv 2602.09331; aligntune ``compute_batched_counterfactual_importance``) re-scores every completion
once per span with that span replaced by the pad token. Positions before the span are identical in the
edited and the original sequence, so their keys and values are too: this module runs the original
completions once with ``use_cache=True`` and runs each edited row only from its first edited position
on, on top of the original's cache cropped there. Exact up to floating-point summation order (tested
against full forwards in ``tests/training/test_scoring.py``); the reference recomputes whole sequences.

Three levels of shared prefixes, each run once: the distinct prompts (a group's G samples share one),
the distinct source completions on top of their prompt's cache, and the edited rows on top of their
source's cache from the first edited position on. In the RL loop the first two come for free: the
old-log-prob forward (phase 3, ``old_forward(keep_kv=True)``) runs the same model on the same batch and
keeps its keys/values (``source=``), so only the edited suffixes are computed. Cost per edited row:
``R - start`` query tokens instead of ``P + R``. Edited rows are bucketed by first edited position (a bucket
is micro-batched), so no row recomputes positions before its own edit; a bucket is split by response length
(:func:`length_groups`) where the right padding a long row forces on short ones costs more than a forward.
Only models whose cache is a plain ``DynamicCache`` of full-attention layers take this path; others (sliding
windows, custom caches) are scored by full forwards (``full_logp_fn``) with the same result.
"""

from __future__ import annotations

import inspect
from collections import Counter
from functools import partial
from typing import Callable

import torch
from torch import Tensor

# (prompt_ids [n,P], prompt_mask [n,P], response_ids [n,R], response_mask [n,R]) -> logp [n,R]
FullLogProbFn = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]

WORK: Counter[str] = Counter()
"""What the re-scoring forwards computed, summed over calls (instrumentation; ``training.bench`` resets and
reads it): ``forwards``, ``query_tokens`` (input positions run through the layers, right padding included)
and ``logit_tokens`` (positions run through the LM head)."""


def position_ids(attention: Tensor) -> Tensor:
    """Position ids that follow the attention mask (left-padded prompts), as ``generate`` computes them."""
    return (attention.cumsum(-1) - 1).clamp(min=0)


def chunked(n: int, size: int):
    """Slices of ``range(n)`` of at most ``size`` (micro-batches)."""
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


SPLIT_OVERHEAD_TOKENS = 128
"""The cost of one more forward in query tokens (CPU, tiny model: ~65 ms per forward, ~0.45 ms per token);
:func:`length_groups` splits a bucket when that saves more padded positions. Speed only: any value gives the
same numbers up to summation order."""


def length_groups(lengths: list[int], start: int, overhead: int = SPLIT_OVERHEAD_TOKENS) -> list[slice]:
    """Split rows sorted by ascending length into consecutive groups, each run as one forward of
    ``(its longest length - start)`` query positions per row: the partition minimising padded query tokens
    plus ``overhead`` per group (dynamic programming over the boundaries where the length changes)."""
    return _best_partition(lengths, lambda a, b: (b - a) * max(lengths[b - 1] - start, 0), overhead)


def _best_partition(keys: list[int], cost: Callable[[int, int], int], overhead: int) -> list[slice]:
    """Consecutive groups of rows sorted by ``keys``, cut only where the key changes, minimising the sum of
    ``cost(first row, end row)`` plus ``overhead`` per group (dynamic programming over those boundaries)."""
    n = len(keys)
    if n == 0:
        return []
    bounds = [0] + [i for i in range(1, n) if keys[i] != keys[i - 1]] + [n]
    best = {0: (0, -1)}  # boundary index -> (cost, previous boundary index)
    for j in range(1, len(bounds)):
        best[j] = min((best[i][0] + cost(bounds[i], bounds[j]) + overhead, i) for i in range(j))
    out, j = [], len(bounds) - 1
    while j > 0:
        i = best[j][1]
        out.append(slice(bounds[i], bounds[j]))
        j = i
    return out[::-1]


def _token_logp(logits: Tensor, targets: Tensor) -> Tensor:
    """log softmax(logits)[targets]: [n, L, V], [n, L] -> [n, L] (fp32)."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def _cache_kwarg(model: torch.nn.Module) -> str:
    """``cache`` (transformers >= 5.24) or ``past_key_values`` (older), whichever forward takes."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _dynamic_cache():
    """transformers' ``DynamicCache`` and ``DynamicLayer``, imported on use: the workflow's DAG parse imports the
    presets (and so this module) but never runs a model, and transformers is ~0.5 CPU-s of its start-up."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    return DynamicCache, DynamicLayer


def _plain_cache(cache: object) -> bool:
    dynamic_cache, dynamic_layer = _dynamic_cache()
    return isinstance(cache, dynamic_cache) and all(type(layer) is dynamic_layer for layer in cache.layers)


Layers = list[tuple[Tensor, Tensor]]  # per decoder layer: keys, values [n, kv_heads, T, head_dim]
# the unedited batch's log-probs [B, R] and, per micro-batch (its batch rows [m], in order), the keys/values of
# all P + R positions: what the loop's old-log-prob forward computed (training.rl.old_forward / update_forward)
SourceCache = tuple[Tensor, list[tuple[Tensor, Layers]]]


def cache_layers(output: object, *, detach: bool = False) -> Layers | None:
    """Keys/values of a forward's output (``use_cache=True``), or None if not a plain full-attention cache.
    ``detach``: cut them from the forward's graph (taken from the update's forward, ``rl.update_forward``)."""
    cache = getattr(output, "cache", None)  # transformers >= 5.24 ("past_key_values" warns there)
    if cache is None:
        cache = getattr(output, "past_key_values", None)
    if not _plain_cache(cache):
        return None
    if detach:
        return [(layer.keys.detach(), layer.values.detach()) for layer in cache.layers]
    return [(layer.keys, layer.values) for layer in cache.layers]


def _run(model: torch.nn.Module, ids: Tensor, attention: Tensor, start: int, past: Layers | None,
         *, want_cache: bool, keep_last: int = 0) -> tuple[Tensor, Layers | None]:
    """Forward input positions [start, T-1) of ``ids`` [n, T] over ``past`` (positions [0, start)).

    Returns the logits [n, T-1-start, V] (position t predicts token t+1; only the last ``keep_last``
    positions if > 0, through the model's ``logits_to_keep``) and, if asked, the keys/values of positions
    [0, T-1)."""
    kwargs = {}
    if past is not None and start > 0:
        kwargs[_cache_kwarg(model)] = _dynamic_cache()[0](ddp_cache_data=past)
    if keep_last > 0:
        kwargs["logits_to_keep"] = keep_last
    res = model(input_ids=ids[:, start:-1], attention_mask=attention[:, :-1],
                position_ids=position_ids(attention)[:, start:-1], use_cache=want_cache, **kwargs)
    queries = ids[:, start:-1].numel()
    WORK.update(forwards=1, query_tokens=queries, logit_tokens=ids.shape[0] * keep_last if keep_last else queries)
    if not want_cache:
        return res.logits, None
    layers = cache_layers(res)
    if layers is None:
        raise NotImplementedError("the model's cache is not a plain DynamicCache of full-attention layers")
    return res.logits, layers


def _gather(store: dict[int, tuple[int, Layers]], keys: list[int], upto: int) -> Layers:
    """Stack the cached keys/values of positions [0, upto) of rows ``keys`` (row -> (index, layers))."""
    picks = [store[k] for k in keys]
    first = picks[0][1]
    if all(kv is first for _, kv in picks):  # one source chunk (the usual case): one index_select per tensor
        idx = torch.tensor([j for j, _ in picks], device=first[0][0].device)
        return [(k[:, :, :upto].index_select(0, idx), v[:, :, :upto].index_select(0, idx)) for k, v in first]
    return [(torch.stack([kv[layer][0][j, :, :upto] for j, kv in picks]),
             torch.stack([kv[layer][1][j, :, :upto] for j, kv in picks])) for layer in range(len(first))]


@torch.no_grad()
def edited_logp(
    model: torch.nn.Module,
    prompt_ids: Tensor,
    prompt_mask: Tensor,
    response_ids: Tensor,
    response_mask: Tensor,
    rows: Tensor,
    edited_ids: Tensor,
    first_edit: Tensor,
    *,
    micro_batch_size: int = 128,
    full_logp_fn: FullLogProbFn | None = None,
    source: SourceCache | None = None,
    score_from: Tensor | None = None,
    split_overhead: int = SPLIT_OVERHEAD_TOKENS,
    share_stems: bool = True,
    stale_from: Tensor | None = None,
) -> Tensor:
    """Log-probs [n, R] of edited responses under ``model``, reusing the prompt's and the source's caches.

    Positions past the last valid token of a row's micro-batch are not computed (0): right padding.

    prompt_*: [B, P] left padded; response_*: [B, R] right padded (the unedited batch); rows: [n] source
    row of each edited response; edited_ids: [n, R]; first_edit: [n] first response position where
    edited_ids[i] differs from response_ids[rows[i]] (R: unedited). The attention mask of an edited row
    is its source's. ``full_logp_fn`` (the loop's plain scorer) is used when the model's cache cannot be
    cropped and shared. ``source``: the unedited batch's log-probs and keys/values from the loop's
    old-log-prob forward (same model, same parameters); steps 1-2 below are then skipped.
    ``score_from``: [n] first response position whose log-prob the caller reads (CF: the answer tokens);
    the LM head and log-softmax then run only from there (positions in [first_edit, score_from) stay 0),
    the transformer layers still run from the first edit. Same numbers at the read positions.
    ``split_overhead``: :func:`length_groups`, :func:`cut_groups` (speed only). ``share_stems``: rows that
    agree after their edit share those positions' computation (:func:`shared_stems`; with ``score_from``).
    ``stale_from``: [n] response position w per row (with ``score_from``; approximate, CF's bounded suffix
    window): the keys/values of positions [w, score_from - 1) are the source's instead of recomputed over the
    edit (:func:`_score_windowed`); rows with w >= score_from - 1 are exact.
    """
    n, R = edited_ids.shape
    out = torch.zeros(n, R, dtype=torch.float32, device=edited_ids.device)  # [n, R]
    if n == 0:
        return out
    attention = torch.cat([prompt_mask, response_mask.long()], dim=1)  # [B, P+R]
    n_valid = response_mask.sum(-1).long()  # [B] right padded
    sources = torch.unique(rows).tolist()
    if source is not None:
        logp_all, chunks = source
        src_logp = {b: logp_all[b].float() for b in sources}
        src_kv = {b: (j, kv) for group, kv in chunks for j, b in enumerate(group.tolist())}
    else:
        try:
            src_logp, src_kv = _source_passes(model, prompt_ids, prompt_mask, response_ids, attention, n_valid,
                                              sources, micro_batch_size)
        except NotImplementedError:
            if full_logp_fn is None:
                raise ValueError("edited_logp: the model's cache cannot be cropped and shared; "
                                 "pass full_logp_fn") from None
            return full_logp_fn(prompt_ids[rows], prompt_mask[rows], edited_ids, response_mask[rows])
    # 3. edited rows from their first edited position c: queries from P + c - 1 (unchanged, it predicts
    # position c) on top of the source's keys/values of [0, P + c - 1)
    P = prompt_ids.shape[1]
    for i in range(n):
        c = int(first_edit[i])
        out[i, :c] = src_logp[int(rows[i])][:c]
    ids = torch.cat([prompt_ids[rows], edited_ids], dim=1)  # [n, P+R]
    lengths = n_valid[rows].tolist()
    cuts = first_edit.tolist()
    reads = None if score_from is None else score_from.tolist()
    todo = [i for i in range(n) if cuts[i] < min(R, lengths[i])]
    if stale_from is not None and reads is not None:
        stale = stale_from.tolist()
        windowed = [i for i in todo if cuts[i] <= stale[i] < reads[i] - 1]
        _score_windowed(model, ids, attention[rows], lengths, reads, stale, cuts, out, windowed,
                        {i: src_kv[int(rows[i])] for i in windowed}, P=P, micro_batch_size=micro_batch_size,
                        overhead=split_overhead)
        todo = [i for i in todo if i not in set(windowed)]
    follow = shared_stems(ids, attention[rows], P, cuts, lengths, reads, todo) if share_stems else {}
    run = partial(_score_edits, model, ids, attention[rows], lengths, reads, out, P=P,
                  micro_batch_size=micro_batch_size, overhead=split_overhead)
    kept = run([i for i in todo if i not in follow], cuts, {i: src_kv[int(rows[i])] for i in todo},
               keep={lead for lead, _ in follow.values()})
    # 4. rows that share a stem with a lead row: from the stem's end on, over the lead's keys/values
    run(list(follow), {i: c for i, (_, c) in follow.items()}, {i: kept[lead] for i, (lead, _) in follow.items()})
    return out


def shared_stems(ids: Tensor, attention: Tensor, P: int, cuts: list[int], lengths: list[int],
                 reads: list[int] | None, rows: list[int]) -> dict[int, tuple[int, int]]:
    """Edited rows whose tokens after their first edit begin like another's: ``{follower: (lead, cut)}``.

    Rows with the same first edit c, prompt and tokens before c (CF: a group's samples that agree up to a
    span and mask it) compute identical keys/values for as long as their tokens agree. The first such row
    (the lead) runs in full; a follower then runs only from the end of its common prefix with the lead,
    ``cut``, on the lead's keys/values (the logits it reads, from ``reads[i]`` on, stay its own: cut <=
    reads[i]). Only with ``reads`` (else the follower's positions [c, cut) would be read)."""
    if reads is None:
        return {}
    classes: dict[tuple, int] = {}
    follow: dict[int, tuple[int, int]] = {}
    for i in rows:
        c = cuts[i]
        key = (c, tuple(ids[i, : P + c].tolist()), tuple(attention[i, :P].tolist()))
        lead = classes.setdefault(key, i)
        if lead == i:
            continue
        stop = min(lengths[i], lengths[lead], reads[i])
        same = (ids[i, P + c : P + stop] == ids[lead, P + c : P + stop]).long().cumprod(0)
        cut = c + int(same.sum())
        if cut > c:
            follow[i] = (lead, cut)
    return follow


def cut_groups(cuts: list[int], overhead: int = SPLIT_OVERHEAD_TOKENS) -> list[slice]:
    """Split rows sorted by ascending cut (first position to compute) into consecutive groups, each run
    from its smallest cut (a row with a later cut recomputes its unchanged positions in between, the same
    keys/values): the partition minimising recomputed positions plus ``overhead`` per group."""
    return _best_partition(cuts, lambda a, b: sum(cuts[k] - cuts[a] for k in range(a, b)), overhead)


def _score_edits(model: torch.nn.Module, ids: Tensor, attention: Tensor, lengths: list[int],
                 reads: list[int] | None, out: Tensor, members: list[int], cuts: dict[int, int] | list[int],
                 past_of: dict[int, tuple[int, Layers]], *, P: int, micro_batch_size: int, overhead: int,
                 keep: set[int] = frozenset()) -> dict[int, tuple[int, Layers]]:
    """Log-probs of edited rows ``members`` (rows of ``ids`` [n, P+R], valid lengths ``lengths``) from
    response position ``cuts[i]`` on, over ``past_of[i]`` (keys/values of at least [0, P + cut - 1)), into
    ``out`` from ``reads[i]`` on; returns the keys/values of the rows in ``keep``. Rows are grouped by cut
    (:func:`cut_groups`), then by length (:func:`length_groups`), then micro-batched."""
    kept: dict[int, tuple[int, Layers]] = {}
    members = sorted(members, key=lambda i: cuts[i])
    for cg in cut_groups([cuts[i] for i in members], overhead):
        c = cuts[members[cg.start]]  # the group's first position; later cuts recompute [c, cut) unchanged
        group = sorted(members[cg], key=lambda i: lengths[i])
        for lg in length_groups([lengths[i] for i in group], c, overhead):
            for sl in chunked(lg.stop - lg.start, micro_batch_size):
                sel = group[lg][sl]
                L = max(lengths[i] for i in sel)  # positions past every row's last valid token stay 0
                idx = torch.tensor(sel)
                want = any(i in keep for i in sel)
                s0 = c if reads is None else min(max(min(reads[i] for i in sel), c), L - 1)  # first read
                logits, kv = _run(model, ids[idx, : P + L], attention[idx, : P + L], P + c - 1,
                                  _gather(past_of, sel, P + c - 1), want_cache=want, keep_last=L - s0 if s0 > c else 0)
                out[idx, s0:L] = _token_logp(logits, ids[idx, P + s0 : P + L])  # [m, L - s0]
                if want:
                    kept.update({i: (j, kv) for j, i in enumerate(sel) if i in keep})
    return kept


def _score_windowed(model: torch.nn.Module, ids: Tensor, attention: Tensor, lengths: list[int], reads: list[int],
                    stale: list[int], cuts: list[int], out: Tensor, members: list[int],
                    past_of: dict[int, tuple[int, Layers]], *, P: int, micro_batch_size: int, overhead: int) -> None:
    """Approximate log-probs of edited rows ``members`` from ``reads[i]`` on (CF's bounded suffix window):
    the keys/values of response positions [cuts[i], stale[i]) are recomputed over the edit (stage 1, from
    the first edit, as :func:`_score_edits`), those of [stale[i], reads[i] - 1) are the unedited source's
    (``past_of``), and positions [reads[i] - 1, lengths[i] - 1) run as queries over that spliced cache
    (stage 2). Rows of a stage-2 micro-batch have caches of different lengths: each is stored from 0 and
    the gap up to the longest is masked out (explicit position ids keep every row's own positions)."""
    members = sorted(members, key=lambda i: cuts[i])
    for cg in cut_groups([cuts[i] for i in members], overhead):
        c = cuts[members[cg.start]]
        for sl in chunked(cg.stop - cg.start, micro_batch_size):
            sel = members[cg][sl]
            idx = torch.tensor(sel)
            top = max(stale[i] for i in sel)  # stage 1: keys/values of [0, P + top)
            _, new = _run(model, ids[idx, : P + top + 1], attention[idx, : P + top + 1], P + c - 1,
                          _gather(past_of, sel, P + c - 1), want_cache=True, keep_last=1)
            width = max(P + reads[i] - 1 for i in sel)  # stage 2: spliced caches, gap masked
            Q = max(lengths[i] - reads[i] for i in sel)
            mask = torch.zeros(len(sel), width + Q, dtype=attention.dtype)
            q_ids = torch.zeros(len(sel), Q, dtype=ids.dtype)
            q_pos = torch.zeros(len(sel), Q, dtype=torch.long)
            layers = []
            for layer, (k_new, v_new) in enumerate(new):
                k = k_new.new_zeros(len(sel), k_new.shape[1], width, k_new.shape[3])
                v = torch.zeros_like(k)
                for j, i in enumerate(sel):
                    w, r = P + stale[i], P + reads[i] - 1
                    s_j, s_kv = past_of[i]
                    k[j, :, :w], v[j, :, :w] = k_new[j, :, :w], v_new[j, :, :w]
                    k[j, :, w:r], v[j, :, w:r] = s_kv[layer][0][s_j, :, w:r], s_kv[layer][1][s_j, :, w:r]
                layers.append((k, v))
            for j, i in enumerate(sel):
                r, q = P + reads[i] - 1, lengths[i] - reads[i]
                mask[j, :r] = attention[i, :r]
                mask[j, width : width + q] = 1
                q_ids[j, :q] = ids[i, r : r + q]
                q_pos[j, :q] = position_ids(attention[i : i + 1, : r + q])[0, r:]
            res = model(input_ids=q_ids, attention_mask=mask, position_ids=q_pos, use_cache=False,
                        **{_cache_kwarg(model): _dynamic_cache()[0](ddp_cache_data=layers)})
            WORK.update(forwards=1, query_tokens=q_ids.numel(), logit_tokens=q_ids.numel())
            for j, i in enumerate(sel):
                r, q = reads[i], lengths[i] - reads[i]
                out[i, r : r + q] = _token_logp(res.logits[j : j + 1, :q], ids[i : i + 1, P + r : P + r + q])[0]


def _source_passes(model: torch.nn.Module, prompt_ids: Tensor, prompt_mask: Tensor, response_ids: Tensor,
                   attention: Tensor, n_valid: Tensor, sources: list[int], micro_batch_size: int,
                   ) -> tuple[dict[int, Tensor], dict[int, tuple[int, Layers]]]:
    """Steps 1-2 of :func:`edited_logp`: log-probs [R] and keys/values of every source row."""
    P, R = prompt_ids.shape[1], response_ids.shape[1]
    full = torch.cat([prompt_ids, response_ids], dim=1)  # [B, P+R]
    # 1. distinct prompts: keys/values of prompt positions [0, P-1)
    prompt_of: dict[int, int] = {}  # source row -> representative row of its prompt
    seen: dict[tuple, int] = {}
    for b in sources:
        key = (tuple(prompt_ids[b].tolist()), tuple(prompt_mask[b].tolist()))
        prompt_of[b] = seen.setdefault(key, b)
    reps = list(seen.values())
    prompt_kv: dict[int, tuple[int, Layers]] = {}
    if P > 1:
        for sl in chunked(len(reps), micro_batch_size):
            idx = torch.tensor(reps[sl])
            _, kv = _run(model, full[idx, :P], attention[idx, :P], 0, None, want_cache=True)
            prompt_kv.update({b: (j, kv) for j, b in enumerate(reps[sl])})
    # 2. distinct source completions over their prompt: log-probs and keys/values of [0, P+L-1)
    src_logp: dict[int, Tensor] = {}
    src_kv: dict[int, tuple[int, Layers]] = {}
    for sl in chunked(len(sources), micro_batch_size):
        idx = torch.tensor(sources[sl])
        L = max(1, int(n_valid[idx].max()))  # right padding past the longest row is never scored
        past = _gather(prompt_kv, [prompt_of[b] for b in sources[sl]], P - 1) if P > 1 else None
        logits, kv = _run(model, full[idx, : P + L], attention[idx, : P + L], P - 1, past, want_cache=True)
        logp = torch.zeros(len(idx), R, dtype=torch.float32, device=response_ids.device)  # [s, R]
        logp[:, :L] = _token_logp(logits, response_ids[idx, :L])
        for j, b in enumerate(sources[sl]):
            src_logp[b], src_kv[b] = logp[j], (j, kv)
    return src_logp, src_kv
