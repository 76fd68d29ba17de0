"""CF's departures from aligntune behind switches: each switch's default and its reference behaviour
(issue 17 departures 1-3 and 7), and the exact zero-advantage skip."""

from __future__ import annotations

import pytest
import torch
from test_weights import EOS, PAD, SYNTHETIC, StubPolicy, cf_batch, knobs, make_batch, spans_of, tokenizer  # noqa: F401

from training import losses
from training.credit.cf import cf, cf_with_spans, importance_from_drops, reference_detection_end

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
    (min(reasoning_end, seq_len - 1)); it matters for unscorable rows of the sequential path."""
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
    # the batched fallback and every scored row are unaffected by the cap
    torch.testing.assert_close(cf(batch, **knobs(cap_reasoning_end=True)), cf(batch, **knobs()))


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
    mask = batch.response_mask
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(mask.shape, generator=g, dtype=torch.float64)
    ref = -torch.rand(mask.shape, generator=g, dtype=torch.float64)
    grads = []
    for w in (w_full, w_skip):
        logp = (old + 0.3 * torch.randn(mask.shape, generator=torch.Generator().manual_seed(1),
                                        dtype=torch.float64)).requires_grad_(True)
        tok, _ = losses.per_token_loss(logp, old, torch.tensor(adv, dtype=torch.float64), w.double(), eps_low=0.2,
                                       eps_high=0.28, dual_clip_c=10.0, kl_beta=0.0, weights_on_kl=True,
                                       kl_clamp=None, ref_logp=ref)
        loss = losses.aggregate(tok, mask, "token_mean", num_tokens=float(mask.sum()), num_seqs=4.0)
        loss.backward()
        grads.append((loss.detach(), logp.grad))
    torch.testing.assert_close(grads[0][0], grads[1][0], atol=0, rtol=0)
    torch.testing.assert_close(grads[0][1], grads[1][1], atol=0, rtol=0)
