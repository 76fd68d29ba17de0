"""Token-weight functions: DelTA (fast == reference, hand example, claims), CF, forking tokens, controls."""

from __future__ import annotations

import csv
import os
import tempfile
from pathlib import Path

import pytest
import torch

from evaluation.grading import extract_answer
from training.credit import TOKEN_WEIGHTS, CreditBatch, get_token_weight_fn
from training.credit.delta import delta_lambda as _delta_lambda
from training.credit.delta import delta_reference as _delta_reference
from training.presets import PRESETS

DELTA_KNOBS = PRESETS["delta"].knobs  # the paper's values (run_DelTA.sh); a test overrides one at a time


def delta_lambda(*args, **kw):
    return _delta_lambda(*args, **{**DELTA_KNOBS, **kw})


def delta_reference(*args, **kw):
    return _delta_reference(*args, **{k: v for k, v in {**DELTA_KNOBS, **kw}.items() if k != "stats"})

torch.set_num_threads(1)


def make_batch(
    *,
    response_mask: torch.Tensor,
    advantages: torch.Tensor,
    hidden: torch.Tensor | None = None,
    old_logp: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    response_ids: torch.Tensor | None = None,
    prompt_ids: torch.Tensor | None = None,
    tokenizer=None,
    logp_fn=None,
    pad_token_id: int = 0,
    seed: int = 0,
) -> CreditBatch:
    B, R = response_mask.shape
    prompt_ids = torch.ones(B, 2, dtype=torch.long) if prompt_ids is None else prompt_ids
    return CreditBatch(
        prompt_ids=prompt_ids,
        prompt_mask=torch.ones_like(prompt_ids),
        response_ids=torch.ones(B, R, dtype=torch.long) if response_ids is None else response_ids,
        response_mask=response_mask.float(),
        old_logp=torch.full((B, R), -1.0) if old_logp is None else old_logp,
        entropy=torch.zeros(B, R) if entropy is None else entropy,
        advantages=advantages.float(),
        group_ids=torch.arange(B) // 4,
        hidden=hidden,
        pad_token_id=pad_token_id,
        tokenizer=tokenizer,
        logp_fn=logp_fn,
        generator=torch.Generator().manual_seed(seed),
    )


def random_delta_inputs(seed: int, dtype=torch.float64, B: int = 12, R: int = 9, H: int = 16):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(B, R, H, generator=g, dtype=dtype)
    old_logp = -torch.rand(B, R, generator=g, dtype=dtype) * 3.0  # p in (0.05, 1]
    lengths = torch.randint(2, R + 1, (B,), generator=g)
    mask = (torch.arange(R)[None, :] < lengths[:, None]).to(dtype)  # right padded
    rewards = (torch.rand(B, generator=g) > 0.5).to(dtype)
    rewards[:4] = 1.0  # group 0: all correct -> A = 0 rows
    adv = torch.zeros(B, dtype=dtype)
    for grp in range(B // 4):
        r = rewards[4 * grp : 4 * grp + 4]
        adv[4 * grp : 4 * grp + 4] = (r - r.mean()) / (r.std() + 1e-6)
    adv[4:8] = torch.tensor([1.5, -0.5, -0.5, -0.5], dtype=dtype)  # both sides always present
    return hidden, old_logp, mask, adv


# ----------------------------------------------------------------------------- DelTA


@pytest.mark.parametrize("K", [0, 1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_delta_fast_matches_reference_float64(K, seed):
    hidden, old_logp, mask, adv = random_delta_inputs(seed)
    ref = delta_reference(hidden, old_logp, mask, adv, K=K)
    fast = delta_lambda(hidden, old_logp, mask, adv, K=K).double()
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=0)


def test_delta_fast_matches_reference_float32():
    hidden, old_logp, mask, adv = random_delta_inputs(3, dtype=torch.float32)
    ref = delta_reference(hidden.double(), old_logp.double(), mask.double(), adv.double(), K=1)
    fast = delta_lambda(hidden, old_logp, mask, adv, K=1)
    assert fast.dtype == torch.float32
    torch.testing.assert_close(fast.double(), ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("within_side", [False, True])
@pytest.mark.parametrize("K", [0, 2])
def test_delta_streamed_row_chunks_match_one_chunk(K, within_side):
    """Streaming (row chunks of h, one row per chunk here) changes only the summation order."""
    hidden, old_logp, mask, adv = random_delta_inputs(4, dtype=torch.float32)
    whole = delta_lambda(hidden, old_logp, mask, adv, K=K, within_side=within_side)
    row_bytes = hidden.shape[1] * hidden.shape[2] * 4
    streamed = delta_lambda(hidden, old_logp, mask, adv, K=K, within_side=within_side, chunk_bytes=row_bytes)
    torch.testing.assert_close(streamed, whole, atol=1e-6, rtol=0)


def test_delta_bf16_hidden_is_streamed_in_fp32():
    """A bf16 store (TRL offload) gives the fp32 result of the same bf16 values, chunk by chunk."""
    hidden, old_logp, mask, adv = random_delta_inputs(2, dtype=torch.float32)
    h16 = hidden.to(torch.bfloat16)
    row_bytes = hidden.shape[1] * hidden.shape[2] * 4
    streamed = delta_lambda(h16, old_logp, mask, adv, K=1, chunk_bytes=2 * row_bytes)
    assert streamed.dtype == torch.float32
    torch.testing.assert_close(streamed, delta_lambda(h16.float(), old_logp, mask, adv, K=1), atol=1e-6, rtol=0)


def test_delta_reference_is_not_trivially_uniform():
    """Guard for the equivalence test: the weights actually vary."""
    hidden, old_logp, mask, adv = random_delta_inputs(0)
    lam = delta_reference(hidden, old_logp, mask, adv)
    valid = lam[mask > 0]
    assert valid.max() - valid.min() > 0.1


def hand_example():
    """2 responses x 3 tokens, H = 1, p = 0 (v = h). Positive v = (0, 2, 4), negative v = (0, -2, -4)."""
    hidden = torch.tensor([[0.0, 2.0, 4.0], [0.0, -2.0, -4.0]], dtype=torch.float64)[..., None]
    old_logp = torch.full((2, 3), -1e4, dtype=torch.float64)  # p = exp(-1e4) = 0
    mask = torch.ones(2, 3, dtype=torch.float64)
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    return hidden, old_logp, mask, adv


def test_delta_hand_computed_K0():
    # mu+ = 2, mu- = -2; positive margin (v+2)^2 - (v-2)^2 = 8v = (0, 16, 32); negative side mirrors it.
    # gamma = pop. std of (0, 16, 32) = sqrt(512/3) = 13.0639; lambda = 0.8 + 0.4 sigma(m / gamma)
    # = (1.0, 1.10916, 1.16822); N / sum lambda = 6 / 6.55477 -> lambda~ = (0.91537, 1.01529, 1.06934).
    lam = delta_lambda(*hand_example(), K=0).double()
    expected = torch.tensor([0.9153685, 1.0152892, 1.0693423], dtype=torch.float64)
    torch.testing.assert_close(lam, expected.expand(2, 3), atol=1e-6, rtol=0)
    torch.testing.assert_close(delta_reference(*hand_example(), K=0), expected.expand(2, 3), atol=1e-6, rtol=0)


def test_delta_hand_computed_K1_gamma_lag():
    # Round 1: alpha = sigma(m / gamma) = (0.5, 0.77291, 0.92056); mu+ = sum alpha v / sum alpha = 2.383441.
    # Final margins 4 * 2.383441 * v; gamma is still 13.0639 (the std of the round's *initial* margins).
    # lambda = (1.0, 1.12459, 1.17950) -> lambda~ = (0.907963, 1.021082, 1.070954).
    lam = delta_lambda(*hand_example(), K=1).double()
    expected = torch.tensor([0.9079631, 1.0210824, 1.0709545], dtype=torch.float64)
    torch.testing.assert_close(lam, expected.expand(2, 3), atol=1e-6, rtol=0)


def separable_example(seed: int = 0):
    """Direction e0 separates the sides; e1.. carry a background shared by both sides.

    Every response has 6 tokens: tokens 0-3 are the same background vectors in all responses ("shared"),
    tokens 4-5 are +/- s e0 (+ noise) for positive / negative responses ("separating").
    """
    g = torch.Generator().manual_seed(seed)
    H, B = 8, 8
    background = torch.randn(4, H, generator=g, dtype=torch.float64)
    background[:, 0] = 0.0
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0, 0.5, -0.5, 0.0, 0.0], dtype=torch.float64)
    hidden = torch.zeros(B, 6, H, dtype=torch.float64)
    hidden[:, :4] = background
    for i in range(B):
        sign = 1.0 if adv[i] > 0 else -1.0
        hidden[i, 4:, 0] = sign * 3.0
        hidden[i, 4:, 1:] = 0.1 * torch.randn(2, H - 1, generator=g, dtype=torch.float64)
    old_logp = torch.full((B, 6), -1e4, dtype=torch.float64)
    mask = torch.ones(B, 6, dtype=torch.float64)
    mask[1, 3] = 0.0  # one padded background token: the shared set stays shared by both sides on average
    return hidden, old_logp, mask, adv


@pytest.mark.parametrize("K", [0, 1, 2])
def test_delta_claims_shared_tokens_low_separating_tokens_high(K):
    hidden, old_logp, mask, adv = separable_example()
    lam = delta_lambda(hidden, old_logp, mask, adv, K=K).double()
    valid = mask > 0
    nonzero = (adv != 0)[:, None] & valid
    # mean 1 over valid tokens (including the A = 0 rows)
    assert lam[valid].mean().item() == pytest.approx(1.0, abs=1e-9)
    assert (lam[~valid] == 0).all()
    # A = 0 rows sit at lambda_min * scale; every lambda / scale is in [0.8, 1.2]
    scale = lam[6, 0] / 0.8
    assert torch.allclose(lam[6:][valid[6:]], scale * 0.8)
    assert (lam[nonzero] / scale >= 0.8 - 1e-9).all() and (lam[nonzero] / scale <= 1.2 + 1e-9).all()
    shared = lam[:6, :4][valid[:6, :4]] / scale
    separating = lam[:6, 4:] / scale
    assert separating.min() > shared.max()
    assert separating.min() > 1.15  # close to lambda_max
    assert (shared - 1.0).abs().max() < 0.1  # near the middle of [0.8, 1.2]


def test_delta_padding_is_ignored():
    hidden, old_logp, mask, adv = random_delta_inputs(5)
    lam = delta_lambda(hidden, old_logp, mask, adv)
    hidden2 = hidden.clone()
    old2 = old_logp.clone()
    pad = mask == 0
    hidden2[pad] = 1e3
    old2[pad] = -50.0
    lam2 = delta_lambda(hidden2, old2, mask, adv)
    torch.testing.assert_close(lam, lam2)
    assert (lam[pad] == 0).all()


def test_delta_all_zero_advantage_gives_uniform():
    hidden, old_logp, mask, _ = random_delta_inputs(6)
    lam = delta_lambda(hidden, old_logp, mask, torch.zeros(hidden.shape[0], dtype=hidden.dtype))
    torch.testing.assert_close(lam, mask)


def test_delta_knob_validation():
    hidden, old_logp, mask, adv = random_delta_inputs(0)
    with pytest.raises(ValueError):
        delta_lambda(hidden, old_logp, mask, adv, K=-1)
    with pytest.raises(ValueError):
        delta_lambda(hidden, old_logp, mask, adv, lambda_min=1.3, lambda_max=1.2)
    with pytest.raises(ValueError):
        delta_lambda(hidden, old_logp, mask, adv, stats="bogus")


def test_delta_registry_and_missing_hidden():
    hidden, old_logp, mask, adv = random_delta_inputs(0, dtype=torch.float32)
    batch = make_batch(response_mask=mask, advantages=adv, hidden=hidden, old_logp=old_logp)
    w = get_token_weight_fn("delta")(batch, K=1, lambda_min=0.8, lambda_max=1.2, stats="local")
    torch.testing.assert_close(w, delta_lambda(hidden, old_logp, mask, adv))
    with pytest.raises(ValueError, match="hidden"):
        TOKEN_WEIGHTS["delta"](make_batch(response_mask=mask, advantages=adv), **DELTA_KNOBS)
    with pytest.raises(KeyError, match="valid"):
        get_token_weight_fn("deltaa")


def test_delta_within_side_differs_and_is_normalised():
    hidden, old_logp, mask, adv = separable_example()
    batch = make_batch(response_mask=mask, advantages=adv, hidden=hidden, old_logp=old_logp)
    w_delta = TOKEN_WEIGHTS["delta"](batch, **DELTA_KNOBS)
    w_within = TOKEN_WEIGHTS["delta_within_side"](batch, **DELTA_KNOBS)
    valid = mask > 0
    assert w_within[valid].mean().item() == pytest.approx(1.0, abs=1e-9)
    assert (w_within - w_delta).abs().max() > 0.05
    scale = w_within[6, 0] / 0.8
    assert (w_within[valid] / scale >= 0.8 - 1e-9).all() and (w_within[valid] / scale <= 1.2 + 1e-9).all()
    # Without the contrast, the separating tokens are no longer all above the shared background.
    shared = w_within[:6, :4][valid[:6, :4]]
    separating = w_within[:6, 4:]
    assert not separating.min() > shared.max()


def _delta_global_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    hidden, old_logp, mask, adv = random_delta_inputs(7, dtype=torch.float64)
    shard = slice(rank * 6, (rank + 1) * 6)
    for stats in ("global", "local"):
        lam = delta_lambda(hidden[shard], old_logp[shard], mask[shard], adv[shard], K=2, stats=stats)
        torch.save(lam, os.path.join(out_dir, f"{stats}_{rank}.pt"))
    torch.distributed.destroy_process_group()


def test_delta_global_stats_equal_full_batch_across_two_ranks():
    """stats='global' on 2 gloo ranks (6 rows each) == the unsharded batch; 'local' differs (reference)."""
    import torch.multiprocessing as mp

    hidden, old_logp, mask, adv = random_delta_inputs(7, dtype=torch.float64)
    full = delta_lambda(hidden, old_logp, mask, adv, K=2)
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "init")
        mp.spawn(_delta_global_worker, args=(2, init_file, tmp), nprocs=2, join=True)
        glob = torch.cat([torch.load(os.path.join(tmp, f"global_{r}.pt")) for r in range(2)])
        local = torch.cat([torch.load(os.path.join(tmp, f"local_{r}.pt")) for r in range(2)])
    torch.testing.assert_close(glob, full, atol=1e-9, rtol=0)
    assert (local - full).abs().max() > 1e-3


# ----------------------------------------------------------------------------- CF: span detection

from training.credit.cf import (  # noqa: E402
    CFSpans,
    cf,
    cf_spans,
    cf_with_spans,
    detect_spans,
    importance_from_drops,
    token_pieces,
)


def knobs(**kw):
    """The ``cf`` preset's knobs (the only place CF's defaults live), with overrides."""
    return {**PRESETS["cf"].knobs, **kw}


SPAN_KW = {"max_spans": 10, "span_stop": "marker", "reasoning_cap": None, "answer_marker": "markers"}  # reference rule

SYNTHETIC = "Let's think step by step. Sam has 7 + 5 = 12 pens. 12 - 3 = 9. \\boxed{9}"
PAD, EOS = 0, 1


@pytest.fixture(scope="module")
def tokenizer():
    """Small byte-level BPE trained here, digits split individually (as Qwen's tokenizer)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    corpus = [
        SYNTHETIC,
        "Question: Sam has 7 pens and buys 5 more, then gives away 3. How many pens does Sam have?",
        "We add the numbers first. The final answer is 42. #### 42",
        "Final Answer: 3 \\times 4 = 12\n\nSo we get it! Is that right? Yes it is right.",
    ] * 10
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<pad>", "<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    assert (hf.pad_token_id, hf.eos_token_id) == (PAD, EOS)
    return hf


def spans_of(text: str, tokenizer, **kw) -> tuple[CFSpans, list[str], list[str], str | None]:
    ids = tokenizer.encode(text, add_special_tokens=False)
    sp = cf_spans(ids + [EOS, PAD], tokenizer, stop_ids=(PAD, EOS), **{**SPAN_KW, **kw})
    pieces = token_pieces(ids, tokenizer)
    texts = ["".join(pieces[s:e]).strip() for s, e in sp.spans]
    answer = None if sp.answer_start is None else "".join(pieces[sp.answer_start :]).strip()
    return sp, pieces, texts, answer


def test_cf_spans_synthetic_completion_boxed_fallback(tokenizer):
    sp, pieces, texts, answer = spans_of(SYNTHETIC, tokenizer)
    assert texts == ["Let's think step by step.", "7 + 5 = 12", "12 - 3 = 9"]
    assert sp.kinds == ("sentence", "arithmetic", "arithmetic")
    assert answer == "\\boxed{9}"  # no "final answer" marker: the \boxed{ fallback defines the region
    assert sp.clean_end == len(pieces)  # stops at EOS
    assert sp.reasoning_end == sp.answer_start and all(e <= sp.answer_start for _, e in sp.spans)


@pytest.mark.parametrize(
    "text, expected_spans, expected_answer",
    [
        # "final answer" is case-insensitive and wins over a later \boxed{
        ("We add 2 + 2 = 4 to the pile. FINAL ANSWER: \\boxed{4}", ["2 + 2 = 4"], "FINAL ANSWER: \\boxed{4}"),
        # "####" marker; the sentence overlapping the arithmetic span is dropped, the other one kept
        ("First we take 6 * 7 = 42 here. Then we are done now. #### 42",
         ["6 * 7 = 42", "Then we are done now."], "#### 42"),
        # chains, LaTeX \times, decimals
        ("So 1 + 2 + 3 = 6 and 3 \\times 4 = 12 and 1.5 / 3 = 0.5 ok", ["1 + 2 + 3 = 6", "3 \\times 4 = 12",
                                                                        "1.5 / 3 = 0.5"], None),
        # sentences shorter than 5 tokens are dropped; an unterminated last sentence is kept
        ("Ok. So we keep going with the count", ["So we keep going with the count"], None),
        # LaTeX-heavy sentence (> 30 % backslashes) dropped
        ("\\a\\b\\c\\d\\e\\f\\g\\h. Then we are done now.", ["Then we are done now."], None),
        # a blank line ends a sentence
        ("We add the numbers first\n\nThen we are done now", ["We add the numbers first", "Then we are done now"],
         None),
        # no operator: "12 = 12" is not arithmetic
        ("Here 12 = 12 holds", ["Here 12 = 12 holds"], None),
    ],
)
def test_cf_spans_table(tokenizer, text, expected_spans, expected_answer):
    _, _, texts, answer = spans_of(text, tokenizer)
    assert texts == expected_spans
    assert answer == expected_answer


def test_cf_spans_caps(tokenizer):
    # 7 arithmetic sentences: arithmetic capped at max_spans // 2 = 5, overlapping sentences dropped,
    # the two sentences without arithmetic overlap kept
    text = " ".join(f"Then {i} + 1 = {i + 1}." for i in range(1, 8))
    sp, _, texts, _ = spans_of(text, tokenizer, max_spans=10)
    assert sp.kinds.count("arithmetic") == 5
    assert texts[:5] == [f"{i} + 1 = {i + 1}" for i in range(1, 6)]
    assert texts[5:] == ["Then 6 + 1 = 7.", "Then 7 + 1 = 8."]
    sp, _, _, _ = spans_of(text, tokenizer, max_spans=4)
    assert len(sp.spans) == 4 and sp.kinds.count("arithmetic") == 2
    # sentences over max_length tokens are dropped
    long_sentence = "We " + "go on and " * 20 + "stop."
    _, _, texts, _ = spans_of(long_sentence + " Then we are done now.", tokenizer)
    assert texts == ["Then we are done now."]


def test_cf_detect_spans_on_hand_pieces():
    pieces = ["So", " we", " get", " 7", " ×", " 7", " =", " 49", ".", " Done", " and", " dusted", " now", "."]
    assert detect_spans(pieces, len(pieces)) == [(3, 8, "arithmetic"), (9, 14, "sentence")]
    assert detect_spans(pieces, 9) == [(3, 8, "arithmetic")]  # spans stay inside the reasoning region


def test_cf_importance_from_drops():
    # base 0.2; span (0,2) gains 1.0 / 2, span (3,4) loses 0.3 -> min-max to [0.5, 1]
    imp = importance_from_drops(5, [(0, 2), (3, 4)], [1.0, -0.3], span_drop="per_token")
    raw = torch.tensor([0.7, 0.7, 0.2, -0.1, 0.2], dtype=torch.float64)
    torch.testing.assert_close(imp, 0.5 + 0.5 * (raw - raw.min()) / (raw.max() - raw.min()))
    torch.testing.assert_close(importance_from_drops(3, [], [], span_drop="per_token"),
                               torch.full((3,), 0.5, dtype=torch.float64))


# ----------------------------------------------------------------------------- CF: weights (stub policy)


class StubPolicy:
    """Answer log-prob depends on the presence of two digits: masking "7" lowers it (critical span),
    masking "3" raises it (distractor); anything else is irrelevant. Counts calls and rows."""

    def __init__(self, tokenizer):
        self.seven = tokenizer.convert_tokens_to_ids("7")
        self.three = tokenizer.convert_tokens_to_ids("3")
        self.calls, self.rows = 0, 0

    def __call__(self, prompt_ids, prompt_mask, response_ids, response_mask):
        self.calls += 1
        self.rows += response_ids.shape[0]
        has7 = (response_ids == self.seven).any(-1, keepdim=True).float()  # [N, 1]
        has3 = (response_ids == self.three).any(-1, keepdim=True).float()  # [N, 1]
        return (-0.5 - 2.0 * (1 - has7) + 1.0 * (1 - has3)).expand(response_ids.shape).clone()


def cf_batch(tokenizer, texts, advantages, logp_fn, R: int = 64, seed: int = 0) -> CreditBatch:
    ids = torch.full((len(texts), R), PAD, dtype=torch.long)
    mask = torch.zeros(len(texts), R)
    for b, text in enumerate(texts):
        t = tokenizer.encode(text, add_special_tokens=False) + [EOS]
        ids[b, : len(t)] = torch.tensor(t)
        mask[b, : len(t)] = 1.0
    return make_batch(
        response_mask=mask, advantages=torch.tensor(advantages), response_ids=ids,
        prompt_ids=torch.full((len(texts), 3), 5, dtype=torch.long), tokenizer=tokenizer, logp_fn=logp_fn,
        pad_token_id=PAD, seed=seed,
    )


def synthetic_token_classes(tokenizer):
    """Positions of the synthetic completion by class, from its own spans."""
    sp, pieces, texts, _ = spans_of(SYNTHETIC, tokenizer)
    crit = range(*sp.spans[1])  # "7 + 5 = 12"
    distract = range(*sp.spans[2])  # "12 - 3 = 9"
    fmt = {j for j, p in enumerate(pieces) if p.strip() in ("=", "-")}
    return sp, pieces, crit, distract, fmt


def test_cf_weights_hand_computed_with_stub(tokenizer):
    stub = StubPolicy(tokenizer)
    batch = cf_batch(tokenizer, [SYNTHETIC, "Nothing to see here, no marker at all.", SYNTHETIC],
                     [1.0, -1.0, 1.0], stub)
    w = cf(batch, **knobs(boost=4.0, min_weight=0.5, answer_weight=1.5, conserve=False))
    sp, pieces, crit, distract, fmt = synthetic_token_classes(tokenizer)
    n = len(pieces)
    # one logp_fn call; identical completions scored once: 1 unmasked + 3 spans; row 1 has no marker
    assert stub.calls == 1 and stub.rows == 4
    # raw: crit +2*n_ans/9 per token, distractor -1*n_ans/9, rest 0.2 -> imp 1.0 / 0.5 / 0.5 + 1/6
    expected = torch.full((n + 1,), 0.5 + 3.5 * (0.5 + 1 / 6), dtype=torch.float64)
    for j in crit:
        expected[j] = 0.5 + 3.5 * (0.1 if j in fmt else 1.0)
    for j in distract:
        expected[j] = 0.5 + 3.5 * (0.05 if j in fmt else 0.5)
    expected[sp.answer_start : n] = 1.5  # \boxed{9} answer region
    expected[n] = 1.0  # EOS: "padding" weight
    torch.testing.assert_close(w[0, : n + 1].double(), expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(w[2], w[0])
    assert (w[:, n + 1 :] == 0).all()  # beyond the response mask
    # span records for the analyses; chunked calls give the same weights
    w2, records = cf_with_spans(batch, **knobs(max_rows_per_call=2))
    torch.testing.assert_close(w2, w)
    assert [(r.row, r.kind) for r in records] == [(0, "sentence"), (0, "arithmetic"), (0, "arithmetic")]
    n_ans = n + 1 - (sp.answer_start + 1)  # boxed{9} + EOS
    assert [r.drop for r in records] == pytest.approx([0.0, 2.0 * n_ans, -1.0 * n_ans])
    assert stub.calls == 1 + 2
    # no marker -> fallback importance 0.5 everywhere: 2.25, EOS 1.0
    n1 = int(batch.response_mask[1].sum())
    assert torch.allclose(w[1, : n1 - 1], torch.tensor(2.25)) and w[1, n1 - 1] == 1.0


def test_cf_inverted_reverses_order_and_conserve_normalises(tokenizer):
    sp, pieces, crit, distract, fmt = synthetic_token_classes(tokenizer)
    batch = cf_batch(tokenizer, [SYNTHETIC, SYNTHETIC.replace("Sam", "Al")], [1.0, -1.0], StubPolicy(tokenizer))
    normal = cf(batch, **knobs())[0]
    inverted = cf(batch, **knobs(mode="inverted"))[0]
    crit_tok = [j for j in crit if j not in fmt]
    dist_tok = [j for j in distract if j not in fmt]
    other = [j for j in range(sp.reasoning_end) if j not in crit and j not in distract and j not in fmt]
    assert normal[crit_tok].min() > normal[other].max() > normal[dist_tok].max()
    assert inverted[crit_tok].max() < inverted[other].min() < inverted[dist_tok].min()
    # same range, mirrored: the critical span takes the distractor's weight and vice versa
    low, high = torch.tensor(2.25), torch.tensor(4.0)
    assert torch.allclose(inverted[crit_tok], low) and torch.allclose(normal[dist_tok], low)
    assert torch.allclose(inverted[dist_tok], high) and torch.allclose(normal[crit_tok], high)
    conserved = cf(batch, **knobs(conserve=True))[0]
    n = len(pieces)
    assert conserved[:n].mean().item() == pytest.approx(1.0, abs=1e-6)
    torch.testing.assert_close(conserved[:n] / conserved[0], normal[:n] / normal[0])


def test_cf_skipped_when_advantages_equal_and_random_mode(tokenizer):
    stub = StubPolicy(tokenizer)
    batch = cf_batch(tokenizer, [SYNTHETIC, SYNTHETIC], [0.5, 0.5], stub)
    torch.testing.assert_close(cf(batch, **knobs()), batch.response_mask)
    assert stub.calls == 0
    batch = cf_batch(tokenizer, [SYNTHETIC, "Some other text here. #### 3"], [1.0, -1.0], None, seed=3)
    w1 = cf(batch, **knobs(mode="random"))
    w2 = cf(cf_batch(tokenizer, [SYNTHETIC, "Some other text here. #### 3"], [1.0, -1.0], None, seed=3),
            **knobs(mode="random"))
    torch.testing.assert_close(w1, w2)  # seeded by batch.generator
    sp, pieces, *_ = synthetic_token_classes(tokenizer)
    reasoning = w1[0, : sp.reasoning_end]
    assert (reasoning >= 0.5 * 0.5).all() and (reasoning <= 4.0).all() and reasoning.std() > 0.3
    assert torch.allclose(w1[0, sp.answer_start : len(pieces)], torch.tensor(1.5))
    with pytest.raises(ValueError, match="mode"):
        cf(batch, **knobs(mode="bogus"))


# ----------------------------------------------------------------------------- CF: tiny real model


@pytest.fixture(scope="module")
def tiny_policy(tokenizer):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=128,
        pad_token_id=PAD, eos_token_id=EOS, bos_token_id=EOS, tie_word_embeddings=False,
    )
    model = Qwen3ForCausalLM(config).eval().double()  # fp64: batched == unbatched scores to ~1e-12

    def logp_fn(prompt_ids, prompt_mask, response_ids, response_mask):
        ids = torch.cat([prompt_ids, response_ids], 1)  # [N, P+R]
        att = torch.cat([prompt_mask.long(), response_mask.long()], 1)  # [N, P+R]
        logits = model(input_ids=ids, attention_mask=att).logits[:, prompt_ids.shape[1] - 1 : -1]  # [N, R, V]
        return torch.log_softmax(logits, -1).gather(-1, response_ids[..., None]).squeeze(-1)  # [N, R]

    return model, logp_fn


def test_cf_weights_follow_counterfactual_drops_on_real_model(tokenizer, tiny_policy):
    model, logp_fn = tiny_policy
    texts = [SYNTHETIC, "Let's think step by step. Al has 8 + 4 = 12 cups. 12 - 5 = 7. \\boxed{7}"]
    batch = cf_batch(tokenizer, texts, [1.0, -1.0], logp_fn, R=60)
    w = cf(batch, **knobs())
    w_inv = cf(batch, **knobs(mode="inverted"))
    for b, text in enumerate(texts):
        ids = tokenizer.encode(text, add_special_tokens=False) + [EOS]
        sp, pieces, _, _ = spans_of(text, tokenizer)
        assert len(sp.spans) == 3 and sp.answer_start is not None

        def answer_score(resp):  # S = sum log p(answer tokens), one unpadded row
            full = torch.tensor([[5, 5, 5] + resp])
            with torch.no_grad():
                lp = torch.log_softmax(model(input_ids=full).logits[0, 2:-1], -1)
            tok_lp = lp.gather(-1, torch.tensor(resp)[:, None]).squeeze(-1)
            return tok_lp[sp.answer_start + 1 :].sum().item()

        base = answer_score(ids)
        drops = []
        for s, e in sp.spans:
            masked = list(ids)
            masked[s:e] = [PAD] * (e - s)
            drops.append(base - answer_score(masked))
        # the weights are the closed-form mapping of the independently computed drops
        imp = importance_from_drops(sp.reasoning_end, sp.spans, drops, span_drop="per_token")
        for j, p in enumerate(pieces[: sp.reasoning_end]):
            if p.strip() in ("=", "-"):
                imp[j] *= 0.1
        torch.testing.assert_close(w[b, : sp.reasoning_end].double(), 0.5 + 3.5 * imp, atol=1e-5, rtol=0)
        # the span whose masking lowers the answer log-prob most gets the highest weight; inverted reverses
        span_w = [w[b, s:e].max().item() for s, e in sp.spans]
        span_w_inv = [w_inv[b, s:e].max().item() for s, e in sp.spans]
        order = sorted(range(3), key=lambda k: drops[k])
        assert order == sorted(range(3), key=lambda k: span_w[k])
        assert order == sorted(range(3), key=lambda k: -span_w_inv[k])
        assert max(drops) - min(drops) > 1e-3  # the model is not indifferent to the spans


# ----------------------------------------------------------------------------- forking tokens, controls


def test_forking_tokens_top_20_percent_of_valid_tokens():
    entropy = torch.tensor([[0.1, 0.9, 0.3, 0.4, 9.0], [0.8, 0.2, 0.5, 0.6, 0.7]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0]])  # 9 valid; padded 9.0 ignored
    batch = make_batch(response_mask=mask, advantages=torch.tensor([1.0, -1.0]), entropy=entropy)
    w = TOKEN_WEIGHTS["forking_tokens"](batch, top_quantile=0.2)
    # k = ceil(0.2 * 9) = 2 highest of the 9 valid entropies: 0.9 and 0.8
    expected = torch.tensor([[0.0, 1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0]])
    torch.testing.assert_close(w, expected)
    torch.testing.assert_close(TOKEN_WEIGHTS["forking_tokens"](batch, top_quantile=1.0), mask)
    ent15 = torch.arange(15.0)[None]  # 0.2 * 15 = 3.0000000000000004 must keep exactly 3 tokens
    b15 = make_batch(response_mask=torch.ones(1, 15), advantages=torch.tensor([1.0]), entropy=ent15)
    assert TOKEN_WEIGHTS["forking_tokens"](b15).sum().item() == 3


def test_random_weights_control():
    _, _, mask, adv = random_delta_inputs(0, dtype=torch.float32)
    w = TOKEN_WEIGHTS["random_weights"](make_batch(response_mask=mask, advantages=adv, seed=4))
    w2 = TOKEN_WEIGHTS["random_weights"](make_batch(response_mask=mask, advantages=adv, seed=4))
    torch.testing.assert_close(w, w2)
    valid = mask > 0
    assert w[valid].mean().item() == pytest.approx(1.0, abs=1e-5)
    assert (w[~valid] == 0).all() and w[valid].max() / w[valid].min() <= 1.2 / 0.8 + 1e-6
    assert w[valid].std() > 0.05


REAL_SMOLLM2 = Path(__file__).resolve().parents[2] / "evaluation" / "grading" / "cases" / "real_smollm2.tsv"


def test_cf_answer_marker_on_real_smollm2_text(tokenizer):
    """Issue 24: real SmolLM2-135M-Instruct generations (the grader's case table) seldom carry the reference's
    markers ("final answer", "####", ``\\boxed{``); with ``answer_marker="checker"`` every response the answer
    checker can score has an answer region, and the checker reads the same answer from that region alone."""
    with REAL_SMOLLM2.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    gradable = with_markers = 0
    for row in rows:
        text = row["response"].replace("⏎", "\n")
        sp, pieces, _, _ = spans_of(text, tokenizer, answer_marker="checker")
        ref = spans_of(text, tokenizer, answer_marker="markers")[0]
        joined = "".join(pieces)
        answer = extract_answer(joined)
        with_markers += ref.answer_start is not None
        assert (sp.answer_start is None) == (answer is None and ref.answer_start is None), text[-200:]
        if answer is not None:
            gradable += 1
            assert sp.answer_start + 1 < sp.clean_end and sp.reasoning_end == sp.answer_start
            assert extract_answer("".join(pieces[sp.answer_start:])) == answer, text[-200:]
            assert ref.answer_start is None or sp.answer_start <= ref.answer_start
    assert len(rows) >= 50 and gradable >= 0.7 * len(rows) and with_markers <= 0.5 * gradable, (gradable, with_markers)
