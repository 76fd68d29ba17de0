"""Real model text (issues 24, 34): what CF's span detection finds (answer markers, spans, drops), and the token
classes DelTA's lambda~ is tabled by when the training data is not the synthetic task.

On the synthetic task every worked solution ends in ``\\boxed{}`` and has calculation spans; a real small
model's text may have neither, and then CF has nothing to score (its weights fall back to the uniform
prior). The answer marker is where the answer checker states the answer it reads (CF's ``answer_marker``
knob), so it is one of :data:`MARKER_KINDS`. ``training.studies.analysis`` adds :func:`real_text_summary`
to ``summary.json`` (``cf.real_text``).

Real-text token classes (:func:`real_token_classes`): ``answer`` is every token from CF's answer marker on
(the statement the answer checker reads, ``cf.checker_answer_token``); before it a token is ``digit``,
``operator`` (``+ - * / × ÷ = ^`` and LaTeX ``\\times`` ...) or ``text`` (words, punctuation, whitespace) by its
first non-whitespace character; the EOS token is ``eos``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from training.credit.cf import CFSpanRecord, cf_spans, checker_answer_token, token_pieces
from training.phases import Rollout
from training.presets import Preset

SPAN_KINDS: tuple[str, ...] = ("arithmetic", "sentence")  # training.credit.cf.detect_spans kinds
MARKER_KINDS: tuple[str, ...] = ("boxed", "####", "answer phrase", "closing statement")
DIGIT, OPERATOR, ANSWER, TEXT, EOS = "digit", "operator", "answer", "text", "eos"
REAL_CLASSES: tuple[str, ...] = (DIGIT, OPERATOR, ANSWER, TEXT, EOS)
OPERATORS = ("+", "-", "−", "*", "/", "×", "÷", "=", "^", "\\times", "\\div", "\\cdot")
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def real_token_classes(pieces: Sequence[str], eos_piece: str | None = None) -> list[str]:
    """Class of each token (module docstring); ``pieces`` are one response's per-token decodes, EOS included."""
    end = pieces.index(eos_piece) if eos_piece in pieces else len(pieces)
    answer = checker_answer_token(list(pieces[:end]))
    out = []
    for t, piece in enumerate(pieces):
        head = piece.strip()
        if t >= end:
            out.append(EOS if piece == eos_piece else TEXT)
        elif answer is not None and t >= answer:
            out.append(ANSWER)
        elif head[:1].isdigit():
            out.append(DIGIT)
        elif head.startswith(OPERATORS):
            out.append(OPERATOR)
        else:
            out.append(TEXT)
    return out


def marker_kind(statement: str) -> str:
    """Which kind of answer statement starts ``statement`` (the text from CF's answer marker on)."""
    head = statement.lstrip().lower()
    if head.startswith(("\\boxed", "\\fbox")):
        return "boxed"
    if head.startswith("####"):
        return "####"
    if head.startswith(("answer", "final answer", "final")):
        return "answer phrase"
    return "closing statement"


def describe(values: Sequence[float]) -> dict[str, Any]:
    """n, mean, sample sd, median, min, max and the QUANTILES (q10 ... q90) of the drops."""
    qs = statistics.quantiles(values, n=20, method="inclusive") if len(values) > 1 else list(values) * 19
    return {"n": len(values), "mean": statistics.fmean(values),
            "sd": statistics.stdev(values) if len(values) > 1 else None,
            "median": statistics.median(values), "min": min(values), "max": max(values),
            **{f"q{round(100 * q)}": qs[round(20 * q) - 1] for q in QUANTILES}}


def response_structure(ro: Rollout, tokenizer: Any, cf_preset: Preset) -> list[dict[str, Any]]:
    """Per response, what CF's span detection finds (``cf.cf_spans`` with the preset's knobs): the answer
    marker (its :func:`marker_kind`, or None when there is none or no answer token follows it: nothing to score)
    and the number and kinds of counterfactual spans. On real model text this says whether CF has anything to
    score (issue 24), independent of the advantages."""
    stops = [tokenizer.eos_token_id, tokenizer.pad_token_id]
    knobs, cache, out = cf_preset.knobs, {}, []
    for i in range(ro.response_ids.shape[0]):
        sp = cf_spans(ro.response_ids[i].tolist(), tokenizer, stop_ids=stops, max_spans=knobs["max_spans"],
                      span_stop=knobs["span_stop"], reasoning_cap=None, pieces_cache=cache,
                      answer_marker=knobs["answer_marker"])
        pieces = token_pieces(ro.response_ids[i, :sp.clean_end].tolist(), tokenizer, cache)
        scorable = sp.answer_start is not None and sp.answer_start + 1 < sp.clean_end
        marker = marker_kind("".join(pieces[sp.answer_start:])) if scorable else None
        out.append({"marker": marker, "n_spans": len(sp.spans), "kinds": list(sp.kinds)})
    return out


def real_text_summary(structure: Sequence[Mapping[str, Any]], records: Sequence[CFSpanRecord],
                      n_scored: int) -> dict[str, Any]:
    """Spans per response, share with a scorable answer marker (by marker), and the counterfactual drops
    I(s) of the spans CF scored (only responses with a non-zero advantage are scored)."""
    n = len(structure)
    drops = [r.drop for r in records]
    markers = {m: sum(s["marker"] == m for s in structure) for m in MARKER_KINDS}
    return {
        "n_responses": n,
        "share_with_marker": sum(s["marker"] is not None for s in structure) / n if n else None,
        "markers": markers,
        "spans_per_response": statistics.fmean(s["n_spans"] for s in structure) if n else None,
        "share_with_spans": sum(s["n_spans"] > 0 for s in structure) / n if n else None,
        "spans_by_kind": {k: sum(s["kinds"].count(k) for s in structure) for k in SPAN_KINDS},
        "spans_histogram": {str(c): sum(s["n_spans"] == c for s in structure)
                            for c in sorted({s["n_spans"] for s in structure})},
        "n_responses_scored": n_scored,
        "n_spans_scored": len(drops),
        "drop": describe(drops) if drops else None,
        "drop_by_kind": {k: describe(d) if (d := [r.drop for r in records if r.kind == k]) else None
                         for k in SPAN_KINDS},
        "share_drop_positive": sum(d > 0 for d in drops) / len(drops) if drops else None,
    }
