"""CF's departures from aligntune behind switches: each switch's default and its reference behaviour
(issue 17 departures 1-3 and 7; issue 27 against a port of the reference's unscorable rows), and the exact
zero-advantage skip."""

from __future__ import annotations

import pytest
import torch
from test_weights import EOS, PAD, SYNTHETIC, StubPolicy, cf_batch, knobs, make_batch, spans_of, tokenizer  # noqa: F401

from training import losses
from training.credit.cf import cf, cf_with_spans, detect_spans, importance_from_drops, reference_detection_end

torch.set_num_threads(1)

BOXED_TAIL = "We add the numbers first. Then we are done now \\boxed{4}"


def test_span_stop_marker_vs_reference(tokenizer):
    """Departure 1: ours scans up to the scoring marker (here the \\boxed{ fallback), so the unterminated
    sentence before it is a span; the reference scans to 'Final Answer' / '####' / padding only, so that
    sentence runs on into the answer and is then dropped for ending past the marker."""
    ours, pieces, texts, _ = spans_of(BOXED_TAIL, tokenizer, span_stop="marker")
    ref, _, ref_texts, _ = spans_of(BOXED_TAIL, tokenizer, span_stop="reference")
    assert texts == ["We add the numbers first.", "Then we are done now"]
    assert ref_texts == ["We add the numbers first."]
    assert ours.answer_start == ref.answer_start and reference_detection_end(pieces) == len(pieces)
    # this tokenizer splits '####' into '##' '##', so the reference scan does not stop there either; a
    # sentence closed before the marker is a span under both rules
    text = "First we take 6 * 7 = 42 here. Then we are done now #### 42"
    assert spans_of(text, tokenizer, span_stop="reference")[2] == ["6 * 7 = 42"]
    text = "First we take 6 * 7 = 42 here. Then we are done now. #### 42"
    assert spans_of(text, tokenizer, span_stop="marker")[2] == spans_of(text, tokenizer, span_stop="reference")[2]
    with pytest.raises(ValueError, match="span_stop"):
        spans_of(text, tokenizer, span_stop="bogus")


def test_fallback_batched_vs_sequential(tokenizer):
    """Departure 2: rows CF cannot score. Batched (ours, the reference's batched path): importance 0.5.
    Sequential (the reference's path for inverted / random): 1.0 on the reasoning region with no spans,
    0 with spans but no answer tokens."""
    texts = [SYNTHETIC, "Nothing to see here, no marker at all.", "Ok. #### 4"]
    batch = cf_batch(tokenizer, texts, [1.0, -1.0, 1.0], StubPolicy(tokenizer))
    n1, n2 = (int(batch.response_mask[b].sum()) for b in (1, 2))
    sp2 = spans_of(texts[2], tokenizer)[0]
    assert sp2.spans == () and sp2.answer_start is not None
    for mode in ("counterfactual", "inverted"):
        batched = cf(batch, **knobs(mode=mode))
        seq = cf(batch, **knobs(mode=mode, fallback="sequential"))
        torch.testing.assert_close(seq[0], batched[0])  # scored rows are the same
        assert torch.allclose(batched[1, : n1 - 1], torch.tensor(2.25))  # 0.5 + 3.5 * 0.5
        assert torch.allclose(seq[1, : n1 - 1], torch.tensor(0.5))  # spans, no answer: importance 0
        assert torch.allclose(batched[2, : sp2.answer_start], torch.tensor(2.25))
        assert torch.allclose(seq[2, : sp2.answer_start], torch.tensor(4.0))  # no spans: importance 1.0
        assert torch.allclose(seq[2, sp2.answer_start : n2 - 1], torch.tensor(1.5))
        assert seq[1, n1 - 1] == 1.0 and seq[2, n2 - 1] == 1.0  # EOS
    with pytest.raises(ValueError, match="fallback"):
        cf(batch, **knobs(fallback="bogus"))


def test_reasoning_end_cap_at_seq_len_minus_one(tokenizer):
    """Departure 3: in the reference the last position of a full-length row is never reasoning
    (min(reasoning_end, seq_len - 1)); it matters for unscorable rows of both fallbacks."""
    ids = tokenizer.encode("Ok. Go. Yes. No. Hi", add_special_tokens=False)
    R = len(ids)  # full length: no EOS, truncated
    resp = torch.tensor([ids, ids[::-1]])
    batch = make_batch(response_mask=torch.ones(2, R), advantages=torch.tensor([1.0, -1.0]), response_ids=resp,
                       prompt_ids=torch.full((2, 3), 5, dtype=torch.long), tokenizer=tokenizer,
                       logp_fn=StubPolicy(tokenizer), pad_token_id=PAD)
    free = cf(batch, **knobs(fallback="sequential"))
    capped = cf(batch, **knobs(fallback="sequential", cap_reasoning_end=True))
    torch.testing.assert_close(capped[:, : R - 1], free[:, : R - 1])
    last = tokenizer.decode([ids[-1]]).strip()
    assert last not in ("=", "-") and free[0, R - 1].item() == pytest.approx(4.0)  # reasoning, importance 1
    assert capped[0, R - 1].item() == pytest.approx(0.5 + 3.5 * 0.2)  # not reasoning: base importance 0.2
    # the batched fallback too: the last token is not reasoning, importance 0 (w 0.5), as the reference's
    # batched path (issue 27 item 1; against the port below)
    batched, batched_capped = cf(batch, **knobs()), cf(batch, **knobs(cap_reasoning_end=True))
    torch.testing.assert_close(batched_capped[:, : R - 1], batched[:, : R - 1])
    assert batched[0, R - 1].item() == pytest.approx(2.25) and batched_capped[0, R - 1].item() == pytest.approx(0.5)


def test_span_drop_per_token_vs_full():
    """Departure 7: aligntune @ 8234976 (paris_team_updates) adds I(s)/|s| to each span token, its main
    branch adds I(s); the min-max normalisation then moves the weights."""
    spans, drops = [(0, 2), (3, 4)], [1.0, -0.3]
    per_token = importance_from_drops(5, spans, drops, span_drop="per_token")
    full = importance_from_drops(5, spans, drops, span_drop="full")
    raw_full = torch.tensor([1.2, 1.2, 0.2, -0.1, 0.2], dtype=torch.float64)
    torch.testing.assert_close(full, 0.5 + 0.5 * (raw_full - raw_full.min()) / (raw_full.max() - raw_full.min()))
    assert (full - per_token).abs().max() > 0.03
    with pytest.raises(ValueError, match="span_drop"):
        importance_from_drops(5, spans, drops, span_drop="bogus")


def test_span_drop_full_changes_cf_weights(tokenizer):
    text = SYNTHETIC.replace("12 - 3 = 9.", "12 - 3 - 0 = 9.")  # spans of unequal length
    batch = cf_batch(tokenizer, [text, text.replace("Sam", "Al")], [1.0, -1.0], StubPolicy(tokenizer))
    assert (cf(batch, **knobs(span_drop="full")) - cf(batch, **knobs())).abs().max() > 0.1


def test_skip_zero_advantage_is_exact_for_the_loss(tokenizer):
    """Rows with A_i = 0 run no counterfactual forward; loss and gradients are unchanged (beta = 0)."""
    texts = [SYNTHETIC, SYNTHETIC.replace("Sam", "Al"), SYNTHETIC.replace("7", "8"), "Some text here. #### 3"]
    adv = [1.0, 0.0, -1.0, 0.0]
    full_stub, skip_stub = StubPolicy(tokenizer), StubPolicy(tokenizer)
    w_full, rec_full = cf_with_spans(cf_batch(tokenizer, texts, adv, full_stub), **knobs(skip_zero_advantage=False))
    batch = cf_batch(tokenizer, texts, adv, skip_stub)
    w_skip, rec_skip = cf_with_spans(batch, **knobs(skip_zero_advantage=True))
    assert skip_stub.rows < full_stub.rows  # fewer counterfactual rows scored
    torch.testing.assert_close(w_skip[[0, 2]], w_full[[0, 2]])
    assert {r.row for r in rec_skip} == {0, 2} and {r.row for r in rec_full} >= {0, 1, 2}
    (loss_full, grad_full), (loss_skip, grad_skip) = (loss_and_grad(w, adv, batch.response_mask)
                                                      for w in (w_full, w_skip))
    torch.testing.assert_close(loss_skip, loss_full, atol=0, rtol=0)
    torch.testing.assert_close(grad_skip, grad_full, atol=0, rtol=0)


def loss_and_grad(w: torch.Tensor, adv: list[float], mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """dapo's token-mean loss (beta = 0) with weights w on fixed random log-probs, and its gradient."""
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(mask.shape, generator=g, dtype=torch.float64)
    ref = -torch.rand(mask.shape, generator=g, dtype=torch.float64)
    logp = (old + 0.3 * torch.randn(mask.shape, generator=torch.Generator().manual_seed(1),
                                    dtype=torch.float64)).requires_grad_(True)
    tok, _, _ = losses.per_token_loss(logp, old, torch.tensor(adv, dtype=torch.float64), w.double(), eps_low=0.2,
                                   eps_high=0.28, dual_clip_c=10.0, kl_beta=0.0, weights_on_kl=True,
                                   kl_clamp=None, ref_logp=ref)
    loss = losses.aggregate(tok, mask, "token_mean", num_tokens=float(mask.sum()), num_seqs=float(len(adv)))
    loss.backward()
    return loss.detach(), logp.grad


# ---------------------------------------------------------------- port of the reference's unscorable rows
# aligntune @ 8234976 for one row (prompt + right-padded completion, TRL's input_ids) that CF cannot score,
# re-written for the tests (float64): the regions of compute_batched_counterfactual_importance (batched) or
# compute_counterfactual_importance (sequential), the scan of detect_calculation_spans with its pad-string
# stop, and compute_soft_weights (conservation off). Span detection inside the scan is ours (detect_spans,
# tested on its own tables above).

FORMAT = {"#", "##", "###", "####", "=", "==", "===", "====", "-", "--", "---"}


def port_reference_importance(prompt: list[int], completion: list[int], tok, *, sequential: bool) -> torch.Tensor:
    ids = prompt + completion
    P, L = len(prompt), len(ids)
    gen = ids[P:]
    pad_start = next((i for i, t in enumerate(gen) if t in {tok.eos_token_id, tok.pad_token_id}), None)
    end = P + pad_start if pad_start else P + len(gen)  # `if padding_start_idx` (0 is falsy)
    clean = gen[:pad_start] if pad_start else gen
    assert not any(m in tok.decode(clean).lower() for m in ("final answer", "####", "\\boxed{")), "port: no marker"
    end = min(end, L - 1)  # the reasoning end cap
    imp = torch.full((L,), 0.2, dtype=torch.float64)
    if sequential and end <= P:
        return imp[P:]
    tokens = [tok.decode([t]) for t in ids]
    pad_string = tok.decode([tok.pad_token_id]) if tok.pad_token_id else None  # pad id 0: no pad stop
    scan = next((i for i in range(P, L) if pad_string and tokens[i] == pad_string), L)
    found = detect_spans(tokens[P:], scan - P, max_spans=10)
    spans = [(s + P, e + P) for s, e, _ in found if e + P <= end]
    if not sequential:  # no answer tokens (L - 1 - end <= 0) or no spans: uniform 0.5 on the reasoning
        assert L - 1 - end <= 0 or not spans, "port: unscorable rows only"
        imp[:] = 0.5
        imp[:P] = 0.0
        imp[end:] = 0.0
    elif not spans:
        imp[P:end] = 1.0
    else:
        assert L - 1 - end <= 0, "port: unscorable rows only"
        imp = torch.zeros(L, dtype=torch.float64)
    return imp[P:]


def port_reference_soft_weights(imp: torch.Tensor, completion: list[int], tok, *, boost=4.0, min_weight=0.5,
                                answer_weight=1.5) -> torch.Tensor:
    imp = imp.clone()
    for i, t in enumerate(completion):
        if imp[i] > 0 and tok.decode([t]).strip() in FORMAT:
            imp[i] *= 0.1
    w = min_weight + (boost - min_weight) * imp
    pad_start = next((i for i, t in enumerate(completion) if t in {tok.eos_token_id, tok.pad_token_id}), None)
    clean = completion[:pad_start] if pad_start else completion
    for marker in ("Final Answer", "final answer", "####"):
        if marker in tok.decode(clean):
            m = tok.encode(marker, add_special_tokens=False)
            at = next((i for i in range(len(completion) - len(m) + 1) if completion[i : i + len(m)] == m), None)
            if at is not None:
                w[at : pad_start if pad_start else len(completion)] = answer_weight
                break
    if pad_start is not None:
        w[pad_start:] = 1.0
    return w


def port_reference_weights(batch, b: int, *, sequential: bool) -> torch.Tensor:
    """The reference's w over row b's valid tokens (TRL's completion mask = ours)."""
    tok = batch.tokenizer
    prompt = batch.prompt_ids[b][batch.prompt_mask[b] > 0].tolist()
    completion = batch.response_ids[b].tolist()
    w = port_reference_soft_weights(port_reference_importance(prompt, completion, tok, sequential=sequential),
                                    completion, tok)
    return w[: int(batch.response_mask[b].sum())]


def rows_batch(tok, rows: list[list[int]], advantages: list[float], R: int):
    """Right-padded rows (with the tokenizer's pad id); each row's mask runs to its first EOS inclusive."""
    ids = torch.full((len(rows), R), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros(len(rows), R)
    for b, row in enumerate(rows):
        ids[b, : len(row)] = torch.tensor(row)
        mask[b, : len(row)] = 1.0
    return make_batch(response_mask=mask, advantages=torch.tensor(advantages), response_ids=ids,
                      prompt_ids=torch.full((len(rows), 3), 5, dtype=torch.long), tokenizer=tok,
                      logp_fn=StubPolicy(tok), pad_token_id=tok.pad_token_id)


# the reference's paths: batched for "counterfactual", sequential for "inverted" (its fallback switch)
REFERENCE_PATHS = [("counterfactual", "batched", False), ("inverted", "sequential", True)]
REFERENCE_SWITCHES = {"span_stop": "reference", "cap_reasoning_end": True}  # + fallback per path


@pytest.mark.parametrize("mode, fallback, sequential", REFERENCE_PATHS)
def test_reasoning_end_cap_reproduces_reference_on_full_length_rows(tokenizer, mode, fallback, sequential):
    """Issue 27 item 1: a full-length completion without an answer marker (truncated at the length limit).
    The reference caps the reasoning end at seq_len - 1 in both of its paths, so the last token is not
    reasoning: batched path importance 0 (w 0.5), sequential path 0.2 (w 1.2). With the reference switches
    (``cap_reasoning_end: true``, ``span_stop: reference``) we reproduce both; without the cap the last token
    stays in the reasoning region (and, in the sequential path, the unterminated last sentence is a span)."""
    full = tokenizer.encode("Ok. Go. Yes. No. Hi. We then count all the pens we have", add_special_tokens=False)
    short = tokenizer.encode("Ok. Go. Yes.", add_special_tokens=False) + [EOS]  # no spans: unscorable there too
    batch = rows_batch(tokenizer, [full, short], [1.0, -1.0], R=len(full))
    capped = cf(batch, **knobs(mode=mode, fallback=fallback, **REFERENCE_SWITCHES))
    for b in range(2):
        want = port_reference_weights(batch, b, sequential=sequential)
        torch.testing.assert_close(capped[b, : len(want)].double(), want, atol=1e-6, rtol=0)
    last = capped[0, -1].item()
    assert last == pytest.approx(0.5 if not sequential else 0.5 + 3.5 * 0.2)
    uncapped = cf(batch, **knobs(mode=mode, fallback=fallback, **{**REFERENCE_SWITCHES, "cap_reasoning_end": False}))
    assert uncapped[0, -1].item() != pytest.approx(last)


@pytest.fixture(scope="module")
def pad_tokenizer(tokenizer):
    """The test tokenizer with its own pad token (id != 0, != EOS), as Qwen2.5-Instruct (pad <|endoftext|>,
    EOS <|im_end|>)."""
    import copy

    tok = copy.deepcopy(tokenizer)
    tok.add_special_tokens({"pad_token": "<xpad>"})
    assert tok.pad_token_id not in (0, EOS) and tok.eos_token_id == EOS
    return tok


@pytest.mark.parametrize("mode, fallback, sequential", REFERENCE_PATHS)
@pytest.mark.parametrize("pad", ["own pad id", "pad id 0"])
def test_span_stop_reference_scans_past_eos_to_the_pad_token(tokenizer, pad_tokenizer, pad, mode, fallback,
                                                             sequential):
    """Issue 27 item 2: a row without a marker ending in an unterminated sentence right before EOS. The
    reference's scan does not stop at EOS but at the pad string (or, when the pad id is 0, a falsy id, at the
    end of the padded row), so that sentence runs on past EOS and is dropped for ending past the reasoning
    end. ``span_stop: reference`` reproduces it; ``marker`` (ours) stops at EOS and keeps it."""
    tok = pad_tokenizer if pad == "own pad id" else tokenizer
    rows = [tok.encode(t, add_special_tokens=False) + [EOS] for t in
            ("Ok. Then we are done now with all of it", "Ok. Go. Yes.")]
    batch = rows_batch(tok, rows, [1.0, -1.0], R=len(rows[0]) + 4)
    ref = cf(batch, **knobs(mode=mode, fallback=fallback, **REFERENCE_SWITCHES))
    for b in range(2):
        want = port_reference_weights(batch, b, sequential=sequential)
        torch.testing.assert_close(ref[b, : len(want)].double(), want, atol=1e-6, rtol=0)
    if sequential:  # no span left: importance 1.0 (w 4.0); ours keeps the sentence: importance 0 (w 0.5)
        assert ref[0, 2].item() == pytest.approx(4.0)
        ours = cf(batch, **knobs(mode=mode, fallback=fallback, **{**REFERENCE_SWITCHES, "span_stop": "marker"}))
        assert ours[0, 2].item() == pytest.approx(0.5)


def test_skip_zero_advantage_keeps_weights_of_a_duplicate_with_nonzero_advantage(tokenizer):
    """Issue 27 item 4: the same (prompt, completion) in two groups of the batch, A = 0 in the first copy and
    A != 0 in the second. The reference scores every row (deduplicated by hash), so the second copy has CF
    weights; skipping must skip a completion only when every copy has A = 0, and loss and gradients stay
    exactly those of scoring every row."""
    texts = [SYNTHETIC, SYNTHETIC.replace("Sam", "Al"), SYNTHETIC.replace("7", "8"), SYNTHETIC]
    adv = [0.0, 1.0, -1.0, 1.0]  # rows 0 and 3 are the same completion of the same prompt
    w_full = cf(cf_batch(tokenizer, texts, adv, StubPolicy(tokenizer)), **knobs(skip_zero_advantage=False))
    batch = cf_batch(tokenizer, texts, adv, StubPolicy(tokenizer))
    w_skip = cf(batch, **knobs(skip_zero_advantage=True))
    assert not torch.allclose(w_full[3], batch.response_mask[3])  # the fixture has real CF weights there
    torch.testing.assert_close(w_skip[1:], w_full[1:])
    (loss_full, grad_full), (loss_skip, grad_skip) = (loss_and_grad(w, adv, batch.response_mask)
                                                      for w in (w_full, w_skip))
    torch.testing.assert_close(loss_skip, loss_full, atol=0, rtol=0)
    torch.testing.assert_close(grad_skip, grad_full, atol=0, rtol=0)
