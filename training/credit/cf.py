"""``cf``: counterfactual importance weighting (Khandoga, Yuan, Sankarapu; arXiv 2602.09331).

The paper's method section was not available; this follows the authors' code, Lexsi-Labs/aligntune @ 8234976,
``src/aligntune/backends/trl/rl/counterfact_grpo/custom_trainer.py`` (``detect_calculation_spans``,
``compute_batched_counterfactual_importance``, ``compute_soft_weights``, ``CounterfactualGRPOTrainer``),
(training/ALGORITHMS.md, CF card). Per completion:

1. Regions. Answer marker = the reference's first of "final answer" (case-insensitive), "####", fallback
   ``\\boxed{`` (``answer_marker="markers"``); with ``"checker"`` (default) the earlier of that and the token
   where the answer checker states the answer the reward grades (``evaluation.grading.answer_start``: the box,
   the "answer is" phrase, ``####`` or the closing sentence), so every response the checker can score has a
   marker; reasoning region = response tokens before the marker's first token.
2. Spans (:func:`detect_spans`): arithmetic ``number (op number)+ = number`` (at most max_spans//2), sentence
   spans (>= 5 tokens, ends at ``.``/``!``/``?``, a ``\\n\\n`` token or two ``\\n`` tokens), both dropping
   LaTeX-heavy text (> 30 % backslashes); sentences overlapping an arithmetic span are dropped; spans
   longer than 50 tokens are dropped; at most max_spans in all.
3. I(s) = S(x) - S(x with s replaced by the pad token), S = sum of log pi(answer tokens), under the current
   policy (``batch.logp_fn``; the weights are computed at theta_old, once per rollout batch).
4. raw_t = 0.2 + sum_{s ∋ t} I(s)/|s|; min-max over the reasoning region to imp in [0.5, 1]
   (all equal: 0.5);
   formatting tokens (``# ## ### #### = == === ==== - -- ---``) imp *= 0.1;
   w = w_min + (boost - w_min) imp; answer region w = answer_weight; tokens from the first EOS/pad on
   w = 1; optional gradient conservation (w * n / sum w over the row's non-padding tokens).
5. If the advantage std is < 1e-6, CF is skipped and w is uniform.

The weight multiplies the whole per-token loss (clipped surrogate + beta KL), as the TRL code's
``per_token_loss * token_weights``: presets set ``weights_on_kl=True``.

Departures from the reference code (why in brackets):
- The answer region that gets ``answer_weight`` is the same marker region as for scoring, including the
  ``\\boxed{`` fallback. The reference's weight step only matches "Final Answer"/"final answer"/"####",
  so on completions that end in ``\\boxed{9}`` (our synthetic task) its answer tokens fall to w_min, below
  every reasoning token [one region definition; the brief asks for answer_weight on the answer].
- S sums log-probs of the valid response tokens strictly after the marker's first token, up to the end of
  the response (EOS included when it is a response token). The reference sums to the padded length, so
  predictions of pad tokens after EOS enter S in its batched path [pad predictions are noise].
  If that region is empty (e.g. the completion stops at the marker) or there is no marker, the row uses
  the reference's batched fallback: importance 0.5 on the reasoning region, 0 after it.
- Arithmetic operators are ``+ - × * / ÷`` and the LaTeX words ``\\times``, ``\\div``. The reference's
  character class ``[+\\-×*/÷\\\\times\\\\div]`` admits single letters (t, i, m, e, s, d, v) and a bare
  backslash instead, and so never matches ``3 \\times 4 = 12`` [evident intent].
- Two consecutive ``\\n`` tokens end a sentence. The reference tests ``tokens[i].strip() == '\\n'``,
  which is never true [evident intent; rarely matters since ``\\n\\n`` is usually one token].
- Token texts are per-token decodes and the marker search runs on their concatenation, so character
  offsets always line up (the reference searched the jointly decoded text but mapped with per-token
  lengths).
- ``inverted`` mirrors imp inside the reasoning region, imp' = lo + hi - imp, so the weight range is
  unchanged and only the order reverses. The reference mirrored over the whole completion including the
  zeroed post-reasoning tokens, which also shifted reasoning weights down to [w_min, (w_min+boost)/2].
- ``random`` draws imp ~ U(0, 1) for every completion token from ``batch.generator`` (reference:
  ``np.random``), then the same damping / answer / padding / conservation steps.
- The skip test uses the std of the advantages of the whole rollout batch (reference: of the TRL
  micro-batch, whose size is a runtime knob here).
- S(x) of the unmasked completion: with ``edit_logp_fn`` in the native loop it is the phase-3
  forward's ``old_logp`` (same parameters: weights are computed at theta_old) and a masked variant is
  run only from its span's first token on, over that forward's keys/values (the reference re-runs
  prompt + completion for every span, S(x) in the same batched call). Same numbers up to float
  summation order (~1e-6 in log-probs; ``tests/training/test_scoring.py``). With ``logp_fn`` only, S(x)
  is recomputed in the same call as the masked variants, as the reference.
- ``suffix_window`` W (approximate, opt-in; default None = exact): a masked span [s, e) recomputes the
  keys/values of positions [s, e + W) only and the answer tokens attend to the unmasked completion's beyond
  (``rescoring.edited_logp(stale_from=...)``); exact once e + W reaches the answer. Exact CF's cost floor is
  sum over spans of (L - s) query tokens (ALGORITHMS.md CF departure 17 has the fidelity loss).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Sequence

import torch
from torch import Tensor

from evaluation.grading import answer_start as checker_answer_start
from training.registry import register

if TYPE_CHECKING:  # pragma: no cover
    from training.credit.batch import CreditBatch

CFMode = Literal["counterfactual", "inverted", "random"]
CF_MODES: tuple[str, ...] = ("counterfactual", "inverted", "random")
SpanStop = Literal["marker", "reference"]
SPAN_STOPS: tuple[str, ...] = ("marker", "reference")
AnswerMarker = Literal["checker", "markers"]
ANSWER_MARKER_RULES: tuple[str, ...] = ("checker", "markers")
Fallback = Literal["batched", "sequential"]
FALLBACKS: tuple[str, ...] = ("batched", "sequential")
SpanDrop = Literal["per_token", "full"]
SPAN_DROPS: tuple[str, ...] = ("per_token", "full")
REFERENCE_STOP_FIRST = frozenset({"Final", "final"})  # detect_calculation_spans: 'Final' + 'Answer' or '####'
REFERENCE_STOP_SECOND = frozenset({"Answer", "answer", "answer:"})

ANSWER_MARKERS: tuple[str, ...] = ("final answer", "####", "\\boxed{")  # searched in this order
FORMAT_TOKENS = frozenset({"#", "##", "###", "####", "=", "==", "===", "====", "-", "--", "---"})
FORMAT_DAMPING = 0.1
BASE_IMPORTANCE = 0.2
SENTENCE_END = frozenset({".", "!", "?"})
LATEX_BACKSLASH_MAX = 0.3
ADV_STD_SKIP = 1e-6

_NUM = r"\d+(?:\.\d+)?"
_OP = r"(?:[+\-×*/÷]|\\times|\\div)"
ARITHMETIC_RE = re.compile(rf"{_NUM}(?:\s*{_OP}\s*{_NUM})+\s*=\s*{_NUM}")


@dataclass(frozen=True)
class CFSpans:
    """Regions and spans of one completion; indices are response positions, ``end`` exclusive."""

    clean_end: int
    """First EOS/pad position (or the response length): tokens from here on are "padding" (w = 1)."""
    answer_start: int | None
    """Position of the token holding the answer marker's first character; None if there is no marker."""
    spans: tuple[tuple[int, int], ...]
    """Counterfactual spans, sorted, non-overlapping, all inside the reasoning region."""
    kinds: tuple[str, ...]
    """"arithmetic" or "sentence", one per span."""
    reasoning_cap: int | None = None
    """Upper bound of the reasoning end (the reference's ``min(reasoning_end, seq_len - 1)``), or None."""

    @property
    def reasoning_end(self) -> int:
        end = self.clean_end if self.answer_start is None else self.answer_start
        return end if self.reasoning_cap is None else min(end, self.reasoning_cap)


def _latex_heavy(text: str) -> bool:
    return len(text) > 0 and text.count("\\") / len(text) > LATEX_BACKSLASH_MAX


def find_answer_start(pieces: Sequence[str]) -> int | None:
    """Token index of the first answer marker ("final answer" ci, then "####", then "\\boxed{")."""
    text = "".join(pieces)
    lowered = text.lower()
    for marker in ANSWER_MARKERS:
        pos = lowered.find(marker)
        if pos >= 0:
            return _token_at(pieces, pos)
    return None


def checker_answer_token(pieces: Sequence[str]) -> int | None:
    """Token index of the earlier of :func:`find_answer_start` and where the answer checker states the answer
    it extracts from ``"".join(pieces)`` (the reward's reading, dataset None as the reward); None when neither."""
    text = "".join(pieces)
    pos = checker_answer_start(text)
    marker = find_answer_start(pieces)
    checker = None if pos is None or pos >= len(text) else _token_at(pieces, pos)
    return min((t for t in (marker, checker) if t is not None), default=None)


def _token_at(pieces: Sequence[str], char_pos: int) -> int:
    """Index of the token containing character ``char_pos`` of ``"".join(pieces)``."""
    cur = 0
    for i, piece in enumerate(pieces):
        if cur <= char_pos < cur + len(piece):
            return i
        cur += len(piece)
    raise IndexError(char_pos)


def detect_arithmetic_spans(pieces: Sequence[str], end: int, max_spans: int) -> list[tuple[int, int]]:
    """Token spans of ``number (op number)+ = number`` in pieces[:end]; LaTeX-heavy ones dropped."""
    text = "".join(pieces[:end])
    spans: list[tuple[int, int]] = []
    for match in ARITHMETIC_RE.finditer(text):
        s, e = _token_at(pieces, match.start()), _token_at(pieces, match.end() - 1) + 1
        if _latex_heavy("".join(pieces[s:e])):
            continue
        spans.append((s, e))
        if len(spans) >= max_spans:
            break
    return spans


def detect_sentence_spans(
    pieces: Sequence[str], end: int, max_spans: int, min_length: int = 5
) -> list[tuple[int, int]]:
    """Sentence spans in pieces[:end]: boundary tokens are . ! ? (stripped), any token with a blank line,
    or a ``\\n`` token followed by another; >= min_length tokens; a final unterminated sentence is kept."""
    spans: list[tuple[int, int]] = []
    start = 0
    for i in range(end):
        piece = pieces[i]
        boundary = (
            piece.strip() in SENTENCE_END
            or "\n\n" in piece
            or (piece == "\n" and i + 1 < end and pieces[i + 1] == "\n")
        )
        if not boundary:
            continue
        stop = i + 1
        if stop - start >= min_length and not _latex_heavy("".join(pieces[start:stop])):
            spans.append((start, stop))
        start = stop
        if len(spans) >= max_spans:
            break
    if start < end and end - start >= min_length and not _latex_heavy("".join(pieces[start:end])):
        spans.append((start, end))  # reference keeps it even after the max_spans break
    return spans


def detect_spans(
    pieces: Sequence[str],
    reasoning_end: int,
    *,
    max_spans: int = 10,
    min_length: int = 5,
    max_length: int = 50,
) -> list[tuple[int, int, str]]:
    """Hybrid spans: arithmetic (priority, <= max_spans//2) + non-overlapping sentences, sorted,
    each <= max_length tokens, <= max_spans in all. Returns (start, end, kind) over pieces[:reasoning_end]."""
    arith = detect_arithmetic_spans(pieces, reasoning_end, max_spans // 2)
    sent = detect_sentence_spans(pieces, reasoning_end, max_spans, min_length)
    merged = [(s, e, "arithmetic") for s, e in arith]
    for s, e in sent:
        if all(e <= a or s >= b for a, b in arith):
            merged.append((s, e, "sentence"))
    merged.sort(key=lambda x: x[0])
    out = [x for x in merged if x[1] - x[0] <= max_length]
    return out[:max_spans]


def token_pieces(ids: Sequence[int], tokenizer: Any, cache: dict[int, str] | None = None) -> list[str]:
    """Per-token decoded text (one decode per token, as the reference's ``tokenizer.decode([t])``).

    ``cache`` (token id -> text) is filled and reused across calls: each distinct id is decoded once."""
    ids = [int(i) for i in ids]
    if cache is None:
        return list(tokenizer.batch_decode([[i] for i in ids]))
    new = sorted(set(ids) - cache.keys())
    if new:
        cache.update(zip(new, tokenizer.batch_decode([[i] for i in new])))
    return [cache[i] for i in ids]


def reference_scan_length(padded: Sequence[int], tokenizer: Any, pad_id: int | None,
                          pieces_cache: dict[int, str] | None = None) -> int:
    """How far the reference's ``detect_calculation_spans`` may scan the padded response before its markers:
    to the first token whose text is the pad token's, not to EOS (so with pad != EOS it runs on past EOS);
    with no pad id, or pad id 0 (its ``if tokenizer.pad_token_id`` is false), to the end of the padded row."""
    if not pad_id:
        return len(padded)
    pad_text = token_pieces([pad_id], tokenizer, pieces_cache)[0]
    texts = token_pieces(padded, tokenizer, pieces_cache)
    return next((i for i, t in enumerate(texts) if t == pad_text), len(padded))


def reference_detection_end(pieces: Sequence[str]) -> int:
    """Where the reference's ``detect_calculation_spans`` stops scanning ``pieces`` (cut at its pad stop,
    :func:`reference_scan_length`): the first token that strips to 'Final'/'final' followed by one that
    strips to 'Answer'/'answer'/'answer:', or to '####'; else the end."""
    for i, piece in enumerate(pieces):
        tok = piece.strip()
        if tok in REFERENCE_STOP_FIRST and i + 1 < len(pieces) and pieces[i + 1].strip() in REFERENCE_STOP_SECOND:
            return i
        if tok == "####":
            return i
    return len(pieces)


def cf_spans(
    ids: Sequence[int],
    tokenizer: Any,
    *,
    stop_ids: Sequence[int],
    max_spans: int,
    span_stop: SpanStop,
    reasoning_cap: int | None,
    min_length: int = 5,
    max_length: int = 50,
    pieces_cache: dict[int, str] | None = None,
    padded: Sequence[int] | None = None,
    pad_id: int | None = None,
    answer_marker: AnswerMarker = "checker",
) -> CFSpans:
    """Regions and counterfactual spans of one completion (response token ids, no padding needed).

    ``stop_ids`` (EOS, pad) end the clean completion; the answer marker is searched before it.
    ``span_stop="marker"``: spans are detected in the reasoning region only (ours); ``"reference"``: the
    scan runs over ``padded`` (the right-padded response row; default ``ids``) up to the pad token
    (:func:`reference_scan_length`, past EOS when pad != EOS) and then :func:`reference_detection_end` (past a
    ``\\boxed{`` marker), and spans ending after the reasoning end are dropped, as the reference (caps count
    the dropped spans too). ``reasoning_cap``: the reasoning end is at most this (reference: seq_len - 1).
    ``pieces_cache``: see :func:`token_pieces`. min/max_length are the reference's constants (5, 50).
    ``answer_marker``: "checker" (:func:`checker_answer_token`) or "markers" (:func:`find_answer_start`).
    """
    if span_stop not in SPAN_STOPS:
        raise ValueError(f"cf: unknown span_stop {span_stop!r}; valid: {SPAN_STOPS}")
    if answer_marker not in ANSWER_MARKER_RULES:
        raise ValueError(f"cf: unknown answer_marker {answer_marker!r}; valid: {ANSWER_MARKER_RULES}")
    ids = [int(i) for i in ids]
    stops = set(int(s) for s in stop_ids if s is not None)
    clean_end = next((j for j, t in enumerate(ids) if t in stops), len(ids))
    pieces = token_pieces(ids[:clean_end], tokenizer, pieces_cache)
    answer_start = checker_answer_token(pieces) if answer_marker == "checker" else find_answer_start(pieces)
    regions = CFSpans(clean_end=clean_end, answer_start=answer_start, spans=(), kinds=(), reasoning_cap=reasoning_cap)
    reasoning_end = regions.reasoning_end
    if span_stop == "reference":
        row = ids if padded is None else [int(i) for i in padded]
        pieces = token_pieces(row[: reference_scan_length(row, tokenizer, pad_id, pieces_cache)], tokenizer,
                              pieces_cache)
        scan_end = reference_detection_end(pieces)
    else:
        scan_end = reasoning_end
    found = detect_spans(pieces, scan_end, max_spans=max_spans, min_length=min_length, max_length=max_length)
    found = [x for x in found if x[1] <= reasoning_end]
    return replace(regions, spans=tuple((s, e) for s, e, _ in found), kinds=tuple(k for _, _, k in found))


def importance_from_drops(
    reasoning_end: int, spans: Sequence[tuple[int, int]], drops: Sequence[float], *, span_drop: SpanDrop
) -> Tensor:
    """imp over the reasoning region [reasoning_end]: raw = 0.2 + I(s)/|s| on spans ("per_token", aligntune
    @ 8234976, ``paris_team_updates``) or 0.2 + I(s) ("full", aligntune ``main``), min-max to [0.5, 1].

    CF code: ``compute_batched_counterfactual_importance`` step 6.
    """
    if span_drop not in SPAN_DROPS:
        raise ValueError(f"cf: unknown span_drop {span_drop!r}; valid: {SPAN_DROPS}")
    raw = torch.full((reasoning_end,), BASE_IMPORTANCE, dtype=torch.float64)  # [L_r]
    for (s, e), drop in zip(spans, drops):
        raw[s:e] += drop / (e - s) if span_drop == "per_token" else drop
    if reasoning_end == 0:
        return raw
    lo, hi = raw.min(), raw.max()
    if hi > lo:
        return 0.5 + 0.5 * (raw - lo) / (hi - lo)
    return torch.full_like(raw, 0.5)


def soft_weights(
    importance: Tensor,
    pieces: Sequence[str],
    answer_start: int | None,
    n_valid: int,
    *,
    boost: float,
    min_weight: float,
    answer_weight: float,
    conserve: bool,
) -> Tensor:
    """w = w_min + (boost - w_min) imp on the clean completion (formatting imp *= 0.1), answer region =
    answer_weight, tokens from the first EOS/pad up to n_valid = 1; conserve -> clean-token mean 1.

    importance: [L_clean] with L_clean = len(pieces); returns [n_valid].
    """
    clean_end = len(pieces)
    imp = importance.clone().to(torch.float64)  # [L_clean]
    fmt = torch.tensor([piece.strip() in FORMAT_TOKENS for piece in pieces], dtype=torch.bool)  # [L_clean]
    imp = torch.where(fmt & (imp > 0), imp * FORMAT_DAMPING, imp)
    w = torch.ones(n_valid, dtype=torch.float64)  # [n_valid]; padding stays 1
    w[:clean_end] = min_weight + (boost - min_weight) * imp
    if answer_start is not None:
        w[answer_start:clean_end] = answer_weight
    if conserve and clean_end > 0:
        total = w[:clean_end].sum()
        if total > 0:
            w[:clean_end] *= clean_end / total
    return w


def _score_rows(
    batch: "CreditBatch",
    rows: list[tuple[int, Tensor, int, int]],
    max_rows_per_call: int | None,
    stale_from: list[int] | None = None,
) -> list[Tensor]:
    """Log-probs [R] of (source row, edited response ids, first edited position, first scored position)
    under the current policy, in as few calls as possible: ``batch.edit_logp_fn`` (prefix KV cache reused,
    logits only from the first scored position) when the loop provides it, else ``batch.logp_fn`` on whole
    sequences. Only positions >= the first scored position are read. ``stale_from`` (one per row): CF's
    bounded suffix window (``rescoring.edited_logp``; approximate, only with ``edit_logp_fn``)."""
    out: list[Tensor] = []
    step = len(rows) if not max_rows_per_call else max_rows_per_call
    for k in range(0, len(rows), max(step, 1)):
        chunk = rows[k : k + step]
        src = torch.tensor([r[0] for r in chunk], dtype=torch.long, device=batch.prompt_ids.device)
        resp = torch.stack([r[1] for r in chunk]).to(batch.response_ids.device)  # [n, R]
        with torch.no_grad():
            if batch.edit_logp_fn is not None:
                first = torch.tensor([r[2] for r in chunk], dtype=torch.long, device=src.device)
                scored = torch.tensor([r[3] for r in chunk], dtype=torch.long, device=src.device)
                window = {} if stale_from is None else {
                    "stale_from": torch.tensor(stale_from[k : k + step], dtype=torch.long, device=src.device)}
                logp = batch.edit_logp_fn(src, resp, first, score_from=scored, **window)  # [n, R]
            else:
                assert batch.logp_fn is not None
                logp = batch.logp_fn(
                    batch.prompt_ids[src], batch.prompt_mask[src], resp, batch.response_mask[src]
                )  # [n, R]
        out.extend(logp.detach().cpu().unbind(0))
    return out


@dataclass(frozen=True)
class CFSpanRecord:
    """One scored span, for the analyses (share of critical spans by kind, distractors I < 0)."""

    row: int
    """First batch row holding this completion (duplicates are scored once)."""
    start: int
    end: int
    kind: str
    drop: float
    """I(s) = S(x) - S(x with s masked); > 0: the span supports the answer, < 0: distractor."""


@register("token_weights", reads={"kv"}, cite="CF arXiv 2602.09331, aligntune code")
def cf(batch: "CreditBatch", **knobs: Any) -> Tensor:
    """CF token weights [B, R] (arXiv 2602.09331; aligntune ``CounterfactualGRPOTrainer``).

    I(s) = S(x) - S(x without s); w = w_min + (boost - w_min) imp(I), answer = answer_weight (see module
    docstring for every step and departure). Knobs: those of :func:`cf_with_spans` (values: the presets).
    """
    return cf_with_spans(batch, **knobs)[0]


def _sequential_fallback(sp: CFSpans, scored: bool) -> Tensor:
    """The reference's sequential path (``compute_counterfactual_importance``, used for inverted / random)
    for a row CF cannot score: importance 0.2 everywhere if the reasoning region is empty, 1.0 on it (0.2
    elsewhere) with no spans, 0 with spans but no answer tokens. [clean_end] float64."""
    imp = torch.full((sp.clean_end,), BASE_IMPORTANCE, dtype=torch.float64)
    if sp.reasoning_end <= 0:
        return imp
    if not sp.spans:
        imp[: sp.reasoning_end] = 1.0
        return imp
    assert not scored
    return torch.zeros(sp.clean_end, dtype=torch.float64)


def cf_with_spans(
    batch: "CreditBatch",
    *,
    boost: float,
    min_weight: float,
    answer_weight: float,
    max_spans: int,
    conserve: bool,
    mode: CFMode,
    span_stop: SpanStop,
    fallback: Fallback,
    cap_reasoning_end: bool,
    span_drop: SpanDrop,
    skip_zero_advantage: bool,
    max_rows_per_call: int | None = None,
    suffix_window: int | None = None,
    answer_marker: AnswerMarker = "checker",
) -> tuple[Tensor, list[CFSpanRecord]]:
    """:func:`cf` plus one :class:`CFSpanRecord` per scored span (empty when skipped or ``mode="random"``).

    ``mode``: "counterfactual", "inverted" (reversed signal ablation) or "random" (imp ~ U(0,1) control).
    ``span_stop`` (:func:`cf_spans`), ``fallback`` ("batched": importance 0.5 on the reasoning region of rows
    CF cannot score, the reference's batched path; "sequential": :func:`_sequential_fallback`),
    ``cap_reasoning_end`` (reasoning end <= R - 1, the reference's seq_len - 1 cap, in both fallbacks),
    ``span_drop`` (:func:`importance_from_drops`) select the reference's behaviours
    (``training/ALGORITHMS.md``, CF departures). ``skip_zero_advantage``: completions with A_i = 0 in every
    copy run no counterfactual forward and get w = 1 (exact for the loss when w multiplies the
    policy-gradient term only, or beta = 0: their surrogate is 0 for every w). ``max_rows_per_call`` caps
    the rows of one ``logp_fn`` call (None: all counterfactual rows of the batch in one call).
    ``suffix_window`` W (approximate; None: exact CF): a masked span [s, e) changes the keys/values of
    positions [s, e + W) only; the answer tokens attend to the unedited ones beyond (CF departure 17).
    ``answer_marker``: where the answer region starts (:func:`cf_spans`; module docstring step 1).
    """
    records: list[CFSpanRecord] = []
    if mode not in CF_MODES:
        raise ValueError(f"cf: unknown mode {mode!r}; valid: {CF_MODES}")
    if fallback not in FALLBACKS:
        raise ValueError(f"cf: unknown fallback {fallback!r}; valid: {FALLBACKS}")
    mask = batch.response_mask  # [B, R]
    B, R = mask.shape
    adv = batch.advantages.float()
    if B < 2 or adv.std().item() < ADV_STD_SKIP:
        return mask.clone(), records  # CF skipped: uniform (reference: all advantages equal)
    if batch.tokenizer is None:
        raise ValueError("cf needs CreditBatch.tokenizer")
    if mode != "random" and batch.logp_fn is None and batch.edit_logp_fn is None:
        raise ValueError("cf needs CreditBatch.logp_fn (or edit_logp_fn) to re-score masked completions")

    eos = getattr(batch.tokenizer, "eos_token_id", None)
    stop_ids = [i for i in (batch.pad_token_id, eos) if i is not None]
    n_valid = mask.sum(-1).long().tolist()  # right padded
    ids = batch.response_ids.cpu()

    # 1-2. regions and spans per unique completion (dedupe on prompt + response, as the reference's hash)
    key_of: list[tuple] = []
    info: dict[tuple, tuple[int, CFSpans, list[str]]] = {}
    pieces: dict[int, str] = {}  # token id -> decoded text, decoded once per batch
    for b in range(B):
        prompt = tuple(batch.prompt_ids[b][batch.prompt_mask[b] > 0].tolist())
        resp = tuple(ids[b, : n_valid[b]].tolist())
        key = (prompt, resp)
        key_of.append(key)
        if key not in info:
            sp = cf_spans(resp, batch.tokenizer, stop_ids=stop_ids, max_spans=max_spans, span_stop=span_stop,
                          reasoning_cap=R - 1 if cap_reasoning_end else None, pieces_cache=pieces,
                          padded=ids[b].tolist() if span_stop == "reference" else None,
                          pad_id=batch.pad_token_id, answer_marker=answer_marker)
            info[key] = (b, sp, token_pieces(resp[: sp.clean_end], batch.tokenizer, pieces))

    # 3. counterfactual scores: for each unique row, the unmasked completion and one row per span
    def score_positions(b: int, sp: CFSpans) -> slice | None:
        if sp.answer_start is None or sp.answer_start + 1 >= n_valid[b]:
            return None
        return slice(sp.answer_start + 1, n_valid[b])

    rows: list[tuple[int, Tensor, int, int]] = []  # (source row, response ids, first edit, first scored)
    plan: dict[tuple, tuple[int, int]] = {}  # key -> (first row index, number of rows)
    # skip a completion only if every copy has A = 0 (the same prompt may sit in two groups of the batch)
    scored_keys = {key_of[b] for b in range(B) if float(adv[b]) != 0.0}
    skipped = set(info) - scored_keys if skip_zero_advantage else set()
    stale: list[int] = []  # per row: first position whose keys/values stay unedited (suffix_window)
    if mode != "random":
        for key, (b, sp, _) in info.items():
            if not sp.spans or score_positions(b, sp) is None or key in skipped:
                continue
            plan[key] = (len(rows), 1 + len(sp.spans))
            first_scored = score_positions(b, sp).start
            rows.append((b, ids[b].clone(), R, first_scored))  # unedited
            stale.append(R)
            for s, e in sp.spans:
                edited = ids[b].clone()
                edited[s:e] = batch.pad_token_id
                rows.append((b, edited, s, first_scored))
                stale.append(R if suffix_window is None else e + suffix_window)
    logps = _score_rows(batch, rows, max_rows_per_call, None if suffix_window is None else stale) if rows else []

    # 4. importance -> weights
    weights: dict[tuple, Tensor] = {}
    for key, (b, sp, pieces) in info.items():
        if mode == "random":
            imp = torch.rand(sp.clean_end, generator=batch.generator, dtype=torch.float64)
        elif key in skipped:  # A_i = 0: no weighted term of the loss reads this row's weights
            weights[key] = torch.ones(n_valid[b], dtype=torch.float64)
            continue
        elif key in plan:
            first, n = plan[key]
            pos = score_positions(b, sp)
            scores = [logps[first + k][pos].double().sum().item() for k in range(n)]
            drops = [scores[0] - s for s in scores[1:]]  # I(s) = S(x) - S(x \ s)
            records.extend(
                CFSpanRecord(row=b, start=s, end=e, kind=k, drop=d)
                for (s, e), k, d in zip(sp.spans, sp.kinds, drops)
            )
            imp = torch.zeros(sp.clean_end, dtype=torch.float64)
            reasoning = importance_from_drops(sp.reasoning_end, sp.spans, drops, span_drop=span_drop)  # [L_r]
            if mode == "inverted":
                reasoning = reasoning.min() + reasoning.max() - reasoning
            imp[: sp.reasoning_end] = reasoning
        elif fallback == "sequential":  # no spans / no answer tokens: reference sequential path
            imp = _sequential_fallback(sp, scored=False)
        else:  # no spans / no answer tokens: reference batched fallback, 0.5 on the reasoning region, 0 after
            imp = torch.zeros(sp.clean_end, dtype=torch.float64)
            imp[: sp.reasoning_end] = 0.5
        weights[key] = soft_weights(
            imp, pieces, sp.answer_start, n_valid[b],
            boost=boost, min_weight=min_weight, answer_weight=answer_weight, conserve=conserve,
        )

    w = torch.zeros(B, R, dtype=torch.float64)
    for b in range(B):
        w[b, : n_valid[b]] = weights[key_of[b]]
    return w.to(device=mask.device, dtype=mask.dtype) * (mask > 0), records
