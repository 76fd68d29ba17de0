"""Prefix-cached re-scoring equals full forwards (training.credit.rescoring, used by CF)."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

from training.credit.rescoring import cut_groups, edited_logp, length_groups
from training.phases import forward_logp
from training.presets import PRESETS


def tiny(arch: str) -> torch.nn.Module:
    torch.manual_seed(0)
    kw = dict(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64)
    if arch == "qwen3":
        return Qwen3ForCausalLM(Qwen3Config(head_dim=8, **kw)).eval()
    return LlamaForCausalLM(LlamaConfig(**kw)).eval()


def batch(B: int = 5, P: int = 6, R: int = 9):
    g = torch.Generator().manual_seed(1)
    prompt_ids = torch.randint(3, 50, (B, P), generator=g)
    prompt_mask = torch.ones(B, P, dtype=torch.long)
    for b, pad in enumerate([0, 2, 1, 0, 3]):  # left padding
        prompt_mask[b, :pad] = 0
        prompt_ids[b, :pad] = 0
    response_ids = torch.randint(3, 50, (B, R), generator=g)
    response_mask = torch.ones(B, R)
    for b, n in enumerate([9, 7, 9, 4, 8]):  # right padding
        response_mask[b, n:] = 0
        response_ids[b, n:] = 0
    return prompt_ids, prompt_mask, response_ids, response_mask


def masked(r_ids: torch.Tensor, spec: list[tuple[int, ...]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(source rows, edited responses, first edited positions) of ``spec`` rows (source, start, end, ...):
    tokens [start, end) set to the pad id 0, as CF masks."""
    rows = torch.tensor([r[0] for r in spec])
    edited = r_ids[rows].clone()
    for i, (_, s, e, *_) in enumerate(spec):
        edited[i, s:e] = 0
    return rows, edited, torch.tensor([r[1] for r in spec])


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
@pytest.mark.parametrize("micro", [1, 3, 128])
@pytest.mark.parametrize("split", [0, 10**9])  # every length its own forward / one forward per bucket
def test_prefix_cached_edits_equal_full_forwards(arch, micro, split):
    model = tiny(arch)
    p_ids, p_mask, r_ids, r_mask = batch()
    # rows: unedited (start R), edits at the first position, mid-response, last token; repeated sources
    spec = [(0, 9, 9), (0, 0, 3), (0, 4, 6), (1, 2, 5), (1, 6, 7), (2, 8, 9), (3, 1, 3), (4, 0, 8), (4, 5, 6)]
    rows, edited, first = masked(r_ids, spec)
    got = edited_logp(model, p_ids, p_mask, r_ids, r_mask, rows, edited, first, micro_batch_size=micro,
                      split_overhead=split)
    want = forward_logp(model, p_ids[rows], p_mask[rows], edited, r_mask[rows])[0]
    valid = r_mask[rows] > 0
    torch.testing.assert_close(got[valid], want[valid], atol=2e-5, rtol=0)
    # the edits matter: an edited row differs from its source after the edit
    src = forward_logp(model, p_ids, p_mask, r_ids, r_mask)[0]
    assert (got[1, 3:] - src[0, 3:]).abs().max() > 1e-3


@pytest.mark.parametrize("micro", [2, 128])
def test_the_old_forwards_keys_and_values_replace_the_source_passes(micro):
    """``source=`` (the loop's phase-3 forward, keep_kv) gives the same log-probs with no forward of its own
    over the unedited batch: only the edited suffixes run."""
    from training.phases import Rollout, old_forward

    model = tiny("qwen3")
    p_ids, p_mask, r_ids, r_mask = batch()
    spec = [(0, 9, 9), (0, 0, 3), (0, 4, 6), (1, 2, 5), (2, 8, 9), (3, 1, 3), (4, 0, 8), (4, 5, 6)]
    rows, edited, first = masked(r_ids, spec)
    ro = Rollout(step=0, prompt_ids=p_ids, prompt_mask=p_mask, response_ids=r_ids, response_mask=r_mask,
                 truncated=torch.zeros(5, dtype=torch.bool), group_ids=torch.zeros(5, dtype=torch.long),
                 golds=("",) * 5)
    old = old_forward(model, ro, micro, needs=frozenset({"kv"}))
    assert old.kv is not None and len(old.kv[1]) == -(-5 // micro)
    assert old_forward(model, ro, micro).kv is None  # kept only when asked
    def run(**kw) -> tuple[torch.Tensor, int]:
        calls: list[int] = []
        hook = model.register_forward_pre_hook(lambda *_: calls.append(1))
        try:
            out = edited_logp(model, p_ids, p_mask, r_ids, r_mask, rows, edited, first, micro_batch_size=micro,
                              **kw)
        finally:
            hook.remove()
        return out, len(calls)

    got, n_with = run(source=old.kv)
    plain, n_without = run()
    want = forward_logp(model, p_ids[rows], p_mask[rows], edited, r_mask[rows])[0]
    valid = r_mask[rows] > 0
    torch.testing.assert_close(got[valid], want[valid], atol=2e-5, rtol=0)
    torch.testing.assert_close(got[valid], plain[valid], atol=2e-5, rtol=0)
    # without source: one pass over the 5 distinct prompts and one over the 5 sources, per micro-batch
    assert n_with == n_without - 2 * -(-5 // micro) and n_with > 0


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
@pytest.mark.parametrize("micro", [1, 128])
def test_score_from_computes_logits_only_where_read(arch, micro):
    """``score_from`` (CF: the answer tokens) runs the LM head only from there: same log-probs at the read
    positions as the full computation (and as whole-sequence forwards), fewer logits."""
    model = tiny(arch)
    p_ids, p_mask, r_ids, r_mask = batch()
    spec = [(0, 0, 3, 6), (0, 4, 6, 7), (1, 2, 5, 5), (3, 1, 3, 2), (4, 0, 8, 8), (4, 5, 6, 7), (2, 8, 9, 9)]
    rows, edited, first = masked(r_ids, spec)
    score_from = torch.tensor([f for *_, f in spec])
    shapes: list[int] = []
    head = model.get_output_embeddings().register_forward_hook(lambda _m, _a, out: shapes.append(out.shape[1]))
    try:
        full = edited_logp(model, p_ids, p_mask, r_ids, r_mask, rows, edited, first, micro_batch_size=micro)
        n_full = sum(shapes)
        shapes.clear()
        fast = edited_logp(model, p_ids, p_mask, r_ids, r_mask, rows, edited, first, micro_batch_size=micro,
                           score_from=score_from)
    finally:
        head.remove()
    read = (torch.arange(r_ids.shape[1])[None] >= score_from[:, None]) & (r_mask[rows] > 0)
    torch.testing.assert_close(fast[read], full[read], atol=1e-6, rtol=0)
    want = forward_logp(model, p_ids[rows], p_mask[rows], edited, r_mask[rows])[0]
    torch.testing.assert_close(fast[read], want[read], atol=2e-5, rtol=0)
    assert sum(shapes) < n_full


def test_length_groups_split_where_padding_costs_more_than_a_forward():
    lengths = [25] * 38 + [27] * 30 + [44] * 2  # one long row would pad 68 short ones to 44
    assert length_groups(lengths, 7, overhead=128) == [slice(0, 68), slice(68, 70)]
    assert length_groups(lengths, 7, overhead=0) == [slice(0, 38), slice(38, 68), slice(68, 70)]
    assert length_groups(lengths, 7, overhead=10**9) == [slice(0, 70)]
    assert length_groups([5, 5], 9) == [slice(0, 2)] and length_groups([], 0) == []


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
@pytest.mark.parametrize("micro", [2, 128])
def test_shared_stems_equal_full_forwards_with_fewer_query_tokens(arch, micro):
    """A group's samples that agree up to and past a masked span share that stem: a follower runs only from
    where it leaves its lead, on the lead's keys/values. Same log-probs at the read positions."""
    model = tiny(arch)
    p_ids, p_mask, r_ids, r_mask = batch(R=9)
    p_ids[1:3], p_mask[1:3] = p_ids[0], p_mask[0]  # rows 0-2: one prompt (a group), 4-5 tokens in common
    r_ids[1, :5], r_ids[2, :4] = r_ids[0, :5], r_ids[0, :4]
    r_mask[1:3] = 1.0
    spec = [(0, 1, 3, 6), (1, 1, 3, 7), (2, 1, 3, 5), (0, 4, 6, 7), (1, 4, 6, 8), (3, 0, 2, 3), (4, 0, 3, 7)]
    rows, edited, first = masked(r_ids, spec)
    score_from = torch.tensor([f for *_, f in spec])
    tokens: list[int] = []
    hook = model.register_forward_pre_hook(lambda _m, _a, kw: tokens.append(kw["input_ids"].numel()),
                                           with_kwargs=True)

    def run(share: bool) -> tuple[torch.Tensor, int]:
        tokens.clear()
        got = edited_logp(model, p_ids, p_mask, r_ids, r_mask, rows, edited, first, micro_batch_size=micro,
                          score_from=score_from, share_stems=share, split_overhead=0)
        return got, sum(tokens)

    try:
        shared, n_shared = run(True)
        alone, n_alone = run(False)
    finally:
        hook.remove()
    read = (torch.arange(r_ids.shape[1])[None] >= score_from[:, None]) & (r_mask[rows] > 0)
    torch.testing.assert_close(shared[read], alone[read], atol=1e-6, rtol=0)
    want = forward_logp(model, p_ids[rows], p_mask[rows], edited, r_mask[rows])[0]
    torch.testing.assert_close(shared[read], want[read], atol=2e-5, rtol=0)
    assert n_shared < n_alone


def test_cut_groups_merge_cuts_where_a_forward_costs_more_than_recomputing():
    cuts = [0] * 30 + [1] * 2 + [14] * 20
    assert cut_groups(cuts, overhead=128) == [slice(0, 32), slice(32, 52)]  # 2 rows recompute 1 position
    assert cut_groups(cuts, overhead=0) == [slice(0, 30), slice(30, 32), slice(32, 52)]
    assert cut_groups(cuts, overhead=10**9) == [slice(0, 52)]
    assert cut_groups([]) == []


def test_no_rows_returns_empty():
    model = tiny("qwen3")
    p_ids, p_mask, r_ids, r_mask = batch()
    out = edited_logp(model, p_ids, p_mask, r_ids, r_mask, torch.zeros(0, dtype=torch.long),
                      r_ids[:0], torch.zeros(0, dtype=torch.long))
    assert out.shape == (0, r_ids.shape[1])


def test_cf_weights_and_drops_equal_with_and_without_the_prefix_cache(tiny_env):
    """CF through edit_logp_fn (prefix caches) == CF through logp_fn (whole sequences), real tokenizer."""
    from functools import partial

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from common.io import read_jsonl
    from training.credit.batch import CreditBatch
    from training.credit.cf import cf_with_spans

    tok = AutoTokenizer.from_pretrained(tiny_env["model"], padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(tiny_env["model"]).eval()
    probs = read_jsonl(tiny_env["train"])[:3]
    enc = tok([p["prompt"] for p in probs], return_tensors="pt", padding=True, add_special_tokens=False)
    sols = [p["solution"] for p in probs] + [p["solution"].replace(p["answer"] + "}", "0}") for p in probs]
    resp = tok(sols, return_tensors="pt", padding="longest", add_special_tokens=False, padding_side="right")
    eos = torch.full((len(sols), 1), tok.eos_token_id)
    r_ids = torch.cat([resp["input_ids"], eos], 1)
    r_mask = torch.cat([resp["attention_mask"], torch.ones(len(sols), 1, dtype=torch.long)], 1).float()
    lengths = resp["attention_mask"].sum(-1)
    for b, n in enumerate(lengths.tolist()):  # EOS right after each solution, pads after
        r_ids[b, n], r_ids[b, n + 1:] = tok.eos_token_id, tok.pad_token_id
        r_mask[b, n + 1:] = 0
    src = torch.tensor([0, 1, 2, 0, 1, 2])
    p_ids, p_mask = enc["input_ids"][src], enc["attention_mask"][src]

    def logp_fn(a, b, c, d):
        return forward_logp(model, a, b, c, d)[0]

    common = dict(prompt_ids=p_ids, prompt_mask=p_mask, response_ids=r_ids, response_mask=r_mask,
                  old_logp=torch.zeros_like(r_mask), entropy=torch.zeros_like(r_mask),
                  advantages=torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0, -1.0]), group_ids=src, hidden=None,
                  pad_token_id=tok.pad_token_id, tokenizer=tok, generator=torch.Generator().manual_seed(0))
    plain = cf_with_spans(CreditBatch(logp_fn=logp_fn, **common), **PRESETS["cf"].knobs)
    cached = cf_with_spans(CreditBatch(logp_fn=None, edit_logp_fn=partial(
        edited_logp, model, p_ids, p_mask, r_ids, r_mask, full_logp_fn=logp_fn), **common), **PRESETS["cf"].knobs)
    assert len(plain[1]) >= 6 and [r.kind for r in plain[1]] == [r.kind for r in cached[1]]
    assert {r.kind for r in plain[1]} == {"arithmetic", "sentence"}
    for a, b in zip(plain[1], cached[1]):
        assert (a.row, a.start, a.end) == (b.row, b.start, b.end)
        assert abs(a.drop - b.drop) < 1e-4
    torch.testing.assert_close(cached[0], plain[0], atol=1e-4, rtol=0)


# (source, span start, span end, stale from, first read): CF's bounded suffix window, rows of several lengths
WINDOWED = [(0, 1, 3, 4, 7), (1, 0, 2, 2, 5), (2, 2, 4, 5, 8), (4, 0, 2, 3, 6), (0, 2, 3, 3, 8)]


def windowed(model, r_ids, spec, edit: bool = True):
    p_ids, p_mask, _, r_mask = batch()
    rows, edited, first = masked(r_ids, spec)
    if not edit:
        edited = r_ids[rows].clone()
    got = edited_logp(model, p_ids, p_mask, r_ids, r_mask, rows, edited, first,
                      score_from=torch.tensor([r[4] for r in spec]), stale_from=torch.tensor([r[3] for r in spec]))
    return rows, edited, got


def test_windowed_edits_without_a_change_reproduce_the_source():
    """No token changed: spliced caches (recomputed window + the source's keys/values beyond, gaps masked
    between rows of different lengths) must give the source's log-probs at every read position."""
    model = tiny("qwen3")
    p_ids, p_mask, r_ids, r_mask = batch()
    rows, _, got = windowed(model, r_ids, WINDOWED, edit=False)
    src = forward_logp(model, p_ids, p_mask, r_ids, r_mask)[0][rows]
    for i, (b, *_, r) in enumerate(WINDOWED):
        n = int(r_mask[b].sum())
        torch.testing.assert_close(got[i, r:n], src[i, r:n], atol=2e-5, rtol=0)


def test_windowed_edits_equal_a_per_row_splice():
    """The batched window path against a literal one-row computation: the edited row's keys/values up to the
    window end, the source's after it, then the read positions as queries on top."""
    from transformers.cache_utils import DynamicCache

    from training.credit.rescoring import _cache_kwarg, cache_layers, position_ids

    model = tiny("qwen3")
    p_ids, p_mask, r_ids, r_mask = batch()
    rows, edited, got = windowed(model, r_ids, WINDOWED)
    P = p_ids.shape[1]
    for i, (b, s, e, w, r) in enumerate(WINDOWED):
        n = int(r_mask[b].sum())
        att = torch.cat([p_mask[b], r_mask[b].long()])[None, : P + n]
        pos = position_ids(att)
        full_src = torch.cat([p_ids[b], r_ids[b]])[None, : P + n]
        full_edit = torch.cat([p_ids[b], edited[i]])[None, : P + n]
        with torch.no_grad():
            kv_src = cache_layers(model(input_ids=full_src, attention_mask=att, position_ids=pos, use_cache=True))
            kv_new = cache_layers(model(input_ids=full_edit[:, : P + w], attention_mask=att[:, : P + w],
                                        position_ids=pos[:, : P + w], use_cache=True))
            cut = P + r - 1
            layers = [(torch.cat([kn[:, :, : P + w], ks[:, :, P + w : cut]], 2),
                       torch.cat([vn[:, :, : P + w], vs[:, :, P + w : cut]], 2))
                      for (kn, vn), (ks, vs) in zip(kv_new, kv_src)]
            logits = model(input_ids=full_edit[:, cut : P + n - 1], attention_mask=att[:, : P + n - 1],
                           position_ids=pos[:, cut : P + n - 1], use_cache=False,
                           **{_cache_kwarg(model): DynamicCache(ddp_cache_data=layers)}).logits
        want = torch.log_softmax(logits.float(), -1).gather(-1, full_edit[:, cut + 1 : P + n, None])[0, :, 0]
        torch.testing.assert_close(got[i, r:n], want, atol=2e-5, rtol=0)
    exact = forward_logp(model, p_ids[rows], p_mask[rows], edited, r_mask[rows])[0]
    assert (got[0, 7:9] - exact[0, 7:9]).abs().max() > 1e-4  # the window approximates: stale keys/values count
