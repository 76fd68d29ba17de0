"""Credit-assignment analyses of one checkpoint: where DelTA's λ~ and CF's span importance go (issue 5).

``python -m training.studies.analysis --config C --model-dir M --train TRAIN.jsonl --out-dir DIR --seed S``
(the workflow's rule ``credit_analysis`` writes ``OUT/analysis/{sft,<method>_seed<s>_step<n>}``).

Offline, from one model folder, through the trainer's own functions (``training.rl``):

1. Rollout. ``--batches`` rollout batches (default 1) sampled as the RL loop samples step ``b``:
   prompts ``sample_prompts(problems, rl.prompts_per_step, seed, b)``, ``rl.group_size`` samples each at
   ``rl.temperature`` / ``rl.top_p`` with generator seed ``seed * 7919 + b`` (``sample_hf``), rewards from
   ``verifiable_reward``, then each preset's reward shaping, loss mask and ``losses.group_advantages``.
   On the SFT checkpoint with ``--seed`` = the first RL seed, batch 0 *is* the first rollout batch of every
   RL run of that seed (its accuracy equals step 0's training accuracy in ``metrics.jsonl``).
2. DelTA (arXiv 2605.21467 §3). λ~ = ``delta_lambda`` on the LM-head inputs h of one no-grad forward
   (``forward_logp(..., capture_hidden=True)``, chunked by ``rl.micro_batch_size`` as the loop), with the
   ``delta`` preset's knobs. Mean, sd and count of λ~ per token class and side (A > 0, A < 0). The side is
   the sign of the preset's advantage: with DAPO's overlong shaping a short wrong response in an all-wrong
   group can have A > 0, as in training.
3. CF (arXiv 2602.09331, aligntune code; training/ALGORITHMS.md, CF card). ``cf_with_spans`` with the ``cf``
   preset's knobs and a ``logp_fn`` under the same model (as ``training.rl`` defines it). Per span kind
   (``arithmetic`` = the paper's "calculation", ``sentence``): share of critical spans, share of
   distractors, their ratio.

Token classes (the synthetic task, ``training.data``: ``" Let's think step by step. 7 + 5 = 12. 12 - 3 =
9. \\boxed{9}"``), assigned on the concatenated per-token decodes (``training.credit.cf.token_pieces``):

- ``answer``: from the first ``\\boxed{`` to the end of the response (the boxed value, ``}`` and the EOS).
- ``calculation``: before the answer, every match of ``a op b (op c)* = r`` with its closing period;
  split into ``calc_result`` (the digits of r) and ``calc_operands`` (operands, operators, ``=``, ``.``).
- ``scaffolding``: before the answer, ``Let's think step by step.`` and restatements ``<Name> has <n>
  <objects>.`` (text shared by right and wrong solutions).
- ``other``: everything else (stray text, a response with no structure).

A token takes the class of its first non-whitespace character (a whitespace-only token: of its first
character, so spaces inside a calculation or the scaffold belong to it, spaces between them are ``other``).

*Critical span.* The CF paper's definition (its "11x more often critical" statistic) was not available
(the paper's threshold: not found). Ours: a span s is **critical** iff I(s) >= ln 2 (``--critical-threshold``),
i.e. masking it at least halves the probability of the answer tokens, P(ans | x \\ s) <= P(ans | x) / 2.
A **distractor** is I(s) < 0 (the paper's: masking it raises the answer's
probability). The table also gives the loosest reading, I(s) > 0 ("supportive").

Outputs in ``--out-dir`` (every write atomic): ``delta_lambda_by_class.{md,csv}``,
``cf_spans_by_kind.{md,csv}``, ``tokens.jsonl`` (per response: tokens, classes, λ~, CF w, spans),
figures ``heatmap_delta``, ``heatmap_cf`` (one correct and one wrong response of one group) and
``credit_by_class`` (PNG + PDF), and last ``summary.json`` (headline numbers, counts, seed, model sha256,
source manifest, this run's manifest).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from common.config import Config, load_config
from common.io import (
    read_jsonl,
    sha256_file,
    write_json_atomic,
    write_jsonl_atomic,
    write_text_atomic,
)
from common.manifest import build_manifest
from common.runtime import seed_everything, setup_runtime
from evaluation.generation.hf import sample_hf
from training.credit.cf import CFSpanRecord, cf_with_spans, token_pieces
from training.credit.delta import delta_lambda
from training.data import NAMES, OBJECTS, RESTATEMENT_RE, SCAFFOLD
from training.phases import (
    Rollout,
    grade_rollout,
    loop_credit_batch,
    old_forward,
    sample_rollout,
    shape_rewards,
    verifiable_reward,
)
from training.presets import Preset, get_preset
from training.studies.analysis_figures import bar_figure, heatmaps
from training.studies.real_text import SPAN_KINDS, real_text_summary, response_structure

SCAFFOLDING, CALCULATION, ANSWER, OTHER = "scaffolding", "calculation", "answer", "other"
CALC_OPERANDS, CALC_RESULT = "calc_operands", "calc_result"  # the two parts of a calculation
CLASSES: tuple[str, ...] = (SCAFFOLDING, CALCULATION, ANSWER, OTHER)
TABLE_CLASSES: tuple[str, ...] = (SCAFFOLDING, CALCULATION, CALC_OPERANDS, CALC_RESULT, ANSWER, OTHER, "all")
SIDES: tuple[str, ...] = ("A>0", "A<0", "A=0", "all")
CRITICAL_THRESHOLD = math.log(2.0)  # I(s) >= ln 2: masking s at least halves P(answer)

ANSWER_MARKER = "\\boxed{"
CALC_RE = re.compile(r"\d+(?:\s*(?:[-+×*/÷]|\\times|\\div)\s*\d+)+\s*=\s*(?P<result>\d+)(?:\s*\.)?")
SCAFFOLD_RE = re.compile(
    re.escape(SCAFFOLD) + rf"|\b(?:{'|'.join(NAMES)}) has \d+ (?:{'|'.join(OBJECTS)})\.|" + RESTATEMENT_RE
)  # the scaffold, a restated start value, task.scaffold_repeats restatements

Sampler = Callable[..., torch.Tensor]  # the signature of evaluation.generation.hf.sample_hf
RewardFn = Callable[..., float]  # the signature of training.rl.verifiable_reward


# --------------------------------------------------------------------------------------------------
# Token classes (pure)
# --------------------------------------------------------------------------------------------------


def char_labels(text: str) -> list[str]:
    """Fine label of every character: scaffolding, calc_operands, calc_result, answer or other."""
    labels = [OTHER] * len(text)
    cut = text.find(ANSWER_MARKER)
    reasoning = text if cut < 0 else text[:cut]
    for m in SCAFFOLD_RE.finditer(reasoning):
        labels[m.start() : m.end()] = [SCAFFOLDING] * (m.end() - m.start())
    for m in CALC_RE.finditer(reasoning):
        labels[m.start() : m.end()] = [CALC_OPERANDS] * (m.end() - m.start())
        labels[m.start("result") : m.end("result")] = [CALC_RESULT] * (m.end("result") - m.start("result"))
    if cut >= 0:
        labels[cut:] = [ANSWER] * (len(text) - cut)
    return labels


def token_labels(pieces: Sequence[str]) -> list[str]:
    """Fine label per token: the label of its first non-whitespace character (of its first character if
    it is all whitespace, so a space inside a calculation belongs to it); an empty piece is other."""
    chars = char_labels("".join(pieces))
    out, pos = [], 0
    for piece in pieces:
        first = next((k for k, ch in enumerate(piece) if not ch.isspace()), 0)
        out.append(chars[pos + first] if piece else OTHER)
        pos += len(piece)
    return out


def coarse_class(label: str) -> str:
    """calc_operands / calc_result -> calculation; the other labels are already classes."""
    return CALCULATION if label in (CALC_OPERANDS, CALC_RESULT) else label


def side_of(advantage: float) -> str:
    return "A>0" if advantage > 0 else ("A<0" if advantage < 0 else "A=0")


def _in_class(label: str, cls: str) -> bool:
    return cls == "all" or label == cls or coarse_class(label) == cls


def _in_side(side: str, wanted: str) -> bool:
    return wanted == "all" or side == wanted


# --------------------------------------------------------------------------------------------------
# Statistics (pure)
# --------------------------------------------------------------------------------------------------


def describe(values: Sequence[float]) -> dict[str, Any]:
    """n, mean and sample sd (ddof 1); None where undefined (n = 0, or n < 2 for sd)."""
    n = len(values)
    return {
        "n": n,
        "mean": float(statistics.fmean(values)) if n else None,
        "sd": float(statistics.stdev(values)) if n > 1 else None,
    }


def lambda_table(
    labels: Sequence[str], sides: Sequence[str], values: Sequence[float]
) -> list[dict[str, Any]]:
    """λ~ by token class x side: a row per (class, side) of TABLE_CLASSES x SIDES (tokens, not responses)."""
    if not len(labels) == len(sides) == len(values):
        raise ValueError(f"lambda_table: {len(labels)} labels, {len(sides)} sides, {len(values)} values")
    rows = []
    for cls in TABLE_CLASSES:
        for side in SIDES:
            sel = [v for lab, s, v in zip(labels, sides, values) if _in_class(lab, cls) and _in_side(s, side)]
            rows.append({"class": cls, "side": side, **describe(sel)})
    return rows


def cf_span_table(
    records: Sequence[CFSpanRecord], threshold: float = CRITICAL_THRESHOLD
) -> list[dict[str, Any]]:
    """Per span kind (+ "all"): spans, critical (I >= threshold), supportive (I > 0), distractors (I < 0),
    their shares, mean and median I. Shares are None when the kind has no span."""
    kinds = list(SPAN_KINDS) + sorted({r.kind for r in records} - set(SPAN_KINDS)) + ["all"]
    rows = []
    for kind in kinds:
        drops = [r.drop for r in records if kind == "all" or r.kind == kind]
        n = len(drops)
        counts = {
            "critical": sum(d >= threshold for d in drops),
            "supportive": sum(d > 0 for d in drops),
            "distractor": sum(d < 0 for d in drops),
        }
        row: dict[str, Any] = {"kind": kind, "n_spans": n}
        for name, c in counts.items():
            row[f"n_{name}"] = c
            row[f"share_{name}"] = c / n if n else None
        row["mean_drop"] = float(statistics.fmean(drops)) if n else None
        row["median_drop"] = float(statistics.median(drops)) if n else None
        rows.append(row)
    return rows


def cf_headline(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Critical share per kind, the ratio calculation / sentence (None if undefined), distractor share."""
    by = {r["kind"]: r for r in rows}
    arith, sent = by.get("arithmetic", {}).get("share_critical"), by.get("sentence", {}).get("share_critical")
    ratio = arith / sent if arith is not None and sent else None
    return {
        "share_critical": {k: by[k]["share_critical"] for k in by},
        "n_critical": {k: by[k]["n_critical"] for k in by},
        "n_spans": {k: by[k]["n_spans"] for k in by},
        "ratio_critical_calculation_to_sentence": ratio,
        "share_distractor": by["all"]["share_distractor"],
        "n_distractor": by["all"]["n_distractor"],
    }


RATIO_N_BOOT = 2000  # bootstrap resamples of the headline ratio


def ratio_bootstrap(
    spans_by_response: Sequence[Sequence[tuple[str, float]]], threshold: float = CRITICAL_THRESHOLD, *,
    n_boot: int = RATIO_N_BOOT, alpha: float = 0.05, seed: int = 0,
) -> dict[str, Any]:
    """Percentile bootstrap CI of the critical-share ratio calculation / sentence over responses.

    ``spans_by_response``: per scored response, its spans' (kind, I). Responses are resampled with
    replacement (spans of one response stay together). A resample whose ratio is 0/0 or lacks a kind is
    ``n_undefined`` and left out; x/0 with x > 0 is +inf (``n_infinite``). An upper bound at +inf is written
    ``ci_hi = None`` with ``ci_hi_unbounded = True``, so ``summary.json`` stays strict JSON (RFC 8259 has no inf).
    """
    counts = np.array([[sum(k == kind and d >= threshold for k, d in spans) for kind in SPAN_KINDS[:2]]
                       + [sum(k == kind for k, _ in spans) for kind in SPAN_KINDS[:2]]
                       for spans in spans_by_response], dtype=float).reshape(-1, 4)
    n = len(counts)
    out: dict[str, Any] = {"n_responses": n, "n_boot": n_boot, "alpha": alpha, "ci_lo": None, "ci_hi": None,
                           "n_undefined": n_boot, "n_infinite": 0, "ci_hi_unbounded": False}
    if n == 0:
        return out
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    a_crit, s_crit, a_n, s_n = (counts[:, j][idx].sum(axis=1) for j in range(4))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (a_crit / a_n) / (s_crit / s_n)
    ok = ~np.isnan(ratio)
    out["n_undefined"], out["n_infinite"] = int((~ok).sum()), int(np.isinf(ratio).sum())
    if ok.any():
        lo, hi = np.quantile(ratio[ok], [alpha / 2, 1 - alpha / 2], method="inverted_cdf")
        unbounded = bool(np.isinf(hi))
        out["ci_lo"], out["ci_hi"], out["ci_hi_unbounded"] = float(lo), None if unbounded else float(hi), unbounded
    return out


def ci_text(ci: Mapping[str, Any]) -> str:
    """``[lo, hi] (95 % bootstrap CI over n responses, B resamples)``; the left-out resamples are counted."""
    def num(x: float | None) -> str:
        return "–" if x is None else f"{x:.2f}"

    hi = "∞" if ci.get("ci_hi_unbounded") else num(ci["ci_hi"])
    extra = f"; {ci['n_undefined']} undefined (0/0) left out" if ci["n_undefined"] else ""
    extra += f"; {ci['n_infinite']} with no critical sentence span (∞)" if ci["n_infinite"] else ""
    return (f"[{num(ci['ci_lo'])}, {hi}] ({100 * (1 - ci['alpha']):.0f} % bootstrap CI over "
            f"n = {ci['n_responses']} responses, {ci['n_boot']} resamples{extra})")


def pick_samples(correct: Sequence[bool], group_ids: Sequence[int]) -> list[int]:
    """Rows shown in the heat-maps: the first correct and first wrong response of the first group that has
    both; else the first correct and/or first wrong response of the batch."""
    for g in dict.fromkeys(group_ids):
        rows = [i for i, gi in enumerate(group_ids) if gi == g]
        good = [i for i in rows if correct[i]]
        bad = [i for i in rows if not correct[i]]
        if good and bad:
            return [good[0], bad[0]]
    good = [i for i, c in enumerate(correct) if c]
    bad = [i for i, c in enumerate(correct) if not c]
    return good[:1] + bad[:1]


# --------------------------------------------------------------------------------------------------
# Rollout and credit (the RL loop's functions, training.rl)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchCredit:
    """One analysed rollout batch: per-preset advantages and masks, λ~, CF weights and span records."""

    rollout: Rollout
    delta_adv: torch.Tensor  # [B]
    delta_mask: torch.Tensor  # [B, R]
    lam: torch.Tensor  # [B, R] DelTA λ~ (0 off the mask)
    p: torch.Tensor  # [B, R] pi_old(o_t)
    v_norm: torch.Tensor  # [B, R] ||v|| = (1 - p) ||h||, DelTA's gradient proxy (delta_probe)
    cf_adv: torch.Tensor  # [B]
    cf_mask: torch.Tensor  # [B, R]
    cf_w: torch.Tensor  # [B, R] CF w (0 off the mask)
    spans: tuple[CFSpanRecord, ...]


def analyse_batch(model: Any, tokenizer: Any, ro: Rollout, cfg: Config, *, delta_preset: Preset,
                  cf_preset: Preset, generator: torch.Generator, old: Any = None) -> BatchCredit:
    """DelTA λ~ and CF weights + span records of one rollout batch (the loop's phases 3-4); ``old``: phase 3's
    forward with hidden states and keys/values when the caller has it."""
    micro = cfg.rl.micro_batch_size
    old = old if old is not None else old_forward(model, ro, micro, needs=frozenset({"hidden", "kv"}))
    old_logp, hidden = old.old_logp, old.hidden
    _, d_adv, d_mask = shape_rewards(delta_preset, ro, cfg.rl.max_new_tokens)
    with torch.no_grad():
        lam = delta_lambda(hidden, old_logp, d_mask, d_adv, **delta_preset.knobs) * d_mask
    _, c_adv, c_mask = shape_rewards(cf_preset, ro, cfg.rl.max_new_tokens)
    batch = loop_credit_batch(model, ro, old._replace(hidden=None), tokenizer, micro, advantages=c_adv,
                              loss_mask=c_mask, rewards=None, generator=generator)
    with torch.no_grad():
        w, records = cf_with_spans(batch, **cf_preset.knobs)
    p = old_logp.exp()
    return BatchCredit(rollout=ro, delta_adv=d_adv, delta_mask=d_mask, lam=lam, p=p,
                       v_norm=(1 - p) * hidden.float().norm(dim=-1), cf_adv=c_adv, cf_mask=c_mask,
                       cf_w=w * c_mask, spans=tuple(records))


# --------------------------------------------------------------------------------------------------
# Per-response rows, tables, figures
# --------------------------------------------------------------------------------------------------


def response_rows(bc: BatchCredit, tokenizer: Any) -> list[dict[str, Any]]:
    """One JSON-able row per response: tokens (valid positions), fine labels, λ~, CF w, spans."""
    ro = bc.rollout
    rows = []
    for i in range(ro.response_ids.shape[0]):
        n = int(ro.response_mask[i].sum())
        pieces = token_pieces(ro.response_ids[i, :n].tolist(), tokenizer)
        spans = [{"start": r.start, "end": r.end, "kind": r.kind, "drop": round(r.drop, 6)}
                 for r in bc.spans if r.row == i]
        rows.append({
            "step": ro.step, "row": i, "group": int(ro.group_ids[i]), "gold": ro.golds[i],
            "correct": bool(ro.correct[i] > 0), "advantage_delta": round(float(bc.delta_adv[i]), 6),
            "advantage_cf": round(float(bc.cf_adv[i]), 6), "tokens": pieces, "labels": token_labels(pieces),
            "in_delta_loss": [bool(m > 0) for m in bc.delta_mask[i, :n]],
            "in_cf_loss": [bool(m > 0) for m in bc.cf_mask[i, :n]],
            "lambda": [round(float(v), 6) for v in bc.lam[i, :n]],
            "cf_w": [round(float(v), 6) for v in bc.cf_w[i, :n]], "cf_spans": spans,
        })
    return rows


def lambda_inputs(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str], list[float]]:
    """(labels, sides, λ~) over the tokens inside DelTA's loss mask of every response row."""
    labels, sides, values = [], [], []
    for r in rows:
        side = side_of(r["advantage_delta"])
        for lab, keep, lam in zip(r["labels"], r["in_delta_loss"], r["lambda"]):
            if keep:
                labels.append(lab), sides.append(side), values.append(lam)
    return labels, sides, values


def _fmt(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _csv_cell(v: Any) -> Any:
    return "" if v is None else round(v, 6) if isinstance(v, float) else v


def to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """CSV text; floats at 6 decimals, None empty."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: _csv_cell(v) for k, v in r.items()})
    return buf.getvalue()


def lambda_markdown(rows: Sequence[Mapping[str, Any]], title: str) -> str:
    """Wide Markdown: one line per class, mean ± sd (n) of λ~ for A > 0, A < 0 and all A != 0 tokens."""
    cell = {(r["class"], r["side"]): r for r in rows}
    lines = [f"**{title}**", "", "| token class | λ~ A>0: mean ± sd | n | λ~ A<0: mean ± sd | n |",
             "|:---|---:|---:|---:|---:|"]
    for cls in TABLE_CLASSES:
        parts = []
        for side in ("A>0", "A<0"):
            c = cell[(cls, side)]
            parts += [f"{_fmt(c['mean'])} ± {_fmt(c['sd'])}", str(c["n"])]
        name = f"&nbsp;&nbsp;{cls}" if cls in (CALC_OPERANDS, CALC_RESULT) else cls
        lines.append(f"| {name} | " + " | ".join(parts) + " |")
    lines += ["", ("λ~ = DelTA's self-normalised coefficient (mean 1 over the batch's loss tokens, A = 0 "
                   "rows included); tokens of responses with A = 0 are in the CSV (side A=0).")]
    return "\n".join(lines) + "\n"


def critical_definition(threshold: float) -> str:
    """The written definition of critical / distractor spans at ``threshold``."""
    is_ln2 = math.isclose(threshold, CRITICAL_THRESHOLD)
    why = " = ln 2: masking s at least halves P(answer)" if is_ln2 else ""
    return f"critical: I(s) >= {threshold:.4f}{why}; distractor: I(s) < 0"


def cf_markdown(
    rows: Sequence[Mapping[str, Any]], headline: Mapping[str, Any], threshold: float, title: str
) -> str:
    """One line per span kind: counts and shares of critical, supportive (I > 0) and distractor spans."""
    lines = [
        f"**{title}**",
        "",
        "| span kind | spans | critical | critical (%) | I>0 (%) | distractors I<0 (%) | mean I | median I |",
        "|:---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cells = [r["kind"], str(r["n_spans"]), str(r["n_critical"]), _pct(r["share_critical"]),
                 _pct(r["share_supportive"]), _pct(r["share_distractor"]), _fmt(r["mean_drop"]),
                 _fmt(r["median_drop"])]
        lines.append("| " + " | ".join(cells) + " |")
    ratio = headline["ratio_critical_calculation_to_sentence"]
    ci = headline.get("ratio_ci")
    lines += ["", (f"{critical_definition(threshold)}. Ratio of critical shares, calculation (arithmetic) / "
                   f"sentence: {_fmt(ratio, 2)}" + (f" {ci_text(ci)}" if ci else "") + ".")]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# Provenance and the whole analysis
# --------------------------------------------------------------------------------------------------


def model_provenance(model_dir: Path) -> dict[str, Any]:
    """sha256 of the weights and, if found next to a run's checkpoint, that run's manifest id and method."""
    out: dict[str, Any] = {"model_dir": str(model_dir)}
    weights = sorted(model_dir.glob("*.safetensors"))
    out["weights_sha256"] = {p.name: sha256_file(p) for p in weights}
    for cand in (model_dir / "manifest.json", model_dir.parent.parent / "manifest.json"):
        if cand.is_file():
            m = json.loads(cand.read_text())
            keys = ("manifest_id", "method", "seeds", "git_commit", "config_hash")
            out["source_manifest"] = {"path": str(cand), **{k: m.get(k) for k in keys}}
            break
    return out


def run_analysis(
    cfg: Config,
    *,
    model_dir: str | Path,
    train_path: str | Path,
    out_dir: str | Path,
    seed: int,
    batches: int = 1,
    critical_threshold: float = CRITICAL_THRESHOLD,
    label: str | None = None,
    reward_fn: RewardFn = verifiable_reward,
    sampler: Sampler = sample_hf,
) -> dict[str, Any]:
    """Write every output of the module docstring into ``out_dir``; returns the summary."""
    if batches < 1:
        raise ValueError(f"batches must be >= 1, got {batches}")
    t0 = time.perf_counter()
    model_dir, out = Path(model_dir), Path(out_dir)
    label = label or out.name
    device = setup_runtime(cfg.runtime)
    generator = seed_everything(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_dir).to(device)
    problems = read_jsonl(train_path)
    delta_preset = get_preset("delta", cfg.algorithms.get("delta"))
    cf_preset = get_preset("cf", cfg.algorithms.get("cf"))

    rows: list[dict[str, Any]] = []
    spans: list[CFSpanRecord] = []
    picks: list[tuple[int, int]] = []
    scored: set[tuple[int, int]] = set()  # (step, row) of completions CF scored
    by_response: dict[tuple[int, int], list[tuple[str, float]]] = {}  # their spans' (kind, I)
    structure: list[dict[str, Any]] = []  # per response: answer marker and spans CF detects
    for step in range(batches):
        ro = sample_rollout(model, tokenizer, problems, cfg.rl, seed=seed, step=step, sampler=sampler)
        ro = grade_rollout(ro, tokenizer, timeout_s=cfg.eval.grader_timeout_s, reward_fn=reward_fn)
        bc = analyse_batch(model, tokenizer, ro, cfg, delta_preset=delta_preset, cf_preset=cf_preset,
                           generator=generator)
        rows += response_rows(bc, tokenizer)
        structure += response_structure(ro, tokenizer, cf_preset)
        spans += bc.spans
        scored |= {(step, r.row) for r in bc.spans}
        for r in bc.spans:
            by_response.setdefault((step, r.row), []).append((r.kind, r.drop))
        if not picks:
            picks = [(step, i) for i in pick_samples([bool(c) for c in ro.correct], ro.group_ids.tolist())]
    t_credit = time.perf_counter() - t0

    lam_rows = lambda_table(*lambda_inputs(rows))
    cf_rows = cf_span_table(spans, critical_threshold)
    headline_cf = {**cf_headline(cf_rows),
                   "ratio_ci": ratio_bootstrap(list(by_response.values()), critical_threshold, seed=seed)}
    lam_cell = {(r["class"], r["side"]): r for r in lam_rows}
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl_atomic(out / "tokens.jsonl", rows)
    write_text_atomic(out / "delta_lambda_by_class.csv", to_csv(lam_rows))
    write_text_atomic(out / "delta_lambda_by_class.md",
                      lambda_markdown(lam_rows, f"{label}: DelTA λ~ by token class"))
    write_text_atomic(out / "cf_spans_by_kind.csv", to_csv(cf_rows))
    cf_title = f"{label}: CF span importance by kind"
    write_text_atomic(out / "cf_spans_by_kind.md",
                      cf_markdown(cf_rows, headline_cf, critical_threshold, cf_title))
    figures = heatmaps(rows, picks, out, label) + bar_figure(lam_rows, cf_rows, out, label)
    n_correct = sum(r["correct"] for r in rows)
    summary = {
        "label": label,
        "seed": seed,
        "batches": batches,
        "rollout_steps": list(range(batches)),
        "n_responses": len(rows),
        "n_correct": n_correct,
        "accuracy": n_correct / len(rows) if rows else None,
        "n_tokens": sum(len(r["tokens"]) for r in rows),
        "delta": {
            "preset": delta_preset.name, "knobs": dict(delta_preset.knobs),
            "lambda_mean": {cls: {side: lam_cell[(cls, side)]["mean"] for side in ("A>0", "A<0")}
                            for cls in TABLE_CLASSES},
            "n_tokens": {cls: {side: lam_cell[(cls, side)]["n"] for side in SIDES} for cls in TABLE_CLASSES},
            "table": lam_rows,
        },
        "cf": {
            "preset": cf_preset.name, "knobs": dict(cf_preset.knobs),
            "critical_definition": critical_definition(critical_threshold),
            "critical_threshold": critical_threshold,
            "n_completions_scored": len(scored),
            "real_text": real_text_summary(structure, spans, len(scored)),
            **headline_cf,
            "table": cf_rows,
        },
        "heatmap_samples": [{"step": s, "row": i} for s, i in picks],
        "files": sorted({p.name for p in figures} | {"tokens.jsonl", "delta_lambda_by_class.csv",
                         "delta_lambda_by_class.md", "cf_spans_by_kind.csv", "cf_spans_by_kind.md"}),
        "model": model_provenance(model_dir),
        "seconds": {"credit": round(t_credit, 3), "total": round(time.perf_counter() - t0, 3)},
        "manifest": build_manifest(cfg, seeds={"analysis": seed}, data_files={"train": str(train_path)},
                                   extra={"stage": "credit_analysis"}),
    }
    write_json_atomic(out / "summary.json", summary)
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.studies.analysis",
                                     description=__doc__.split("\n\n")[0],
                                     epilog="--model-dir, --out-dir and --seed may be repeated (paired in "
                                            "order) to analyse several checkpoints in one process.")
    parser.add_argument("--config", required=True)
    parser.add_argument("--model-dir", required=True, action="append",
                        help="HF model folder (SFT or an RL checkpoint)")
    parser.add_argument("--train", required=True, help="training prompts JSONL (the RL loop's)")
    parser.add_argument("--out-dir", required=True, action="append")
    parser.add_argument("--seed", type=int, required=True, action="append",
                        help="the RL seed whose rollout batches are re-sampled")
    parser.add_argument("--batches", type=int, default=1, help="rollout batches (steps 0..N-1), default 1")
    parser.add_argument("--critical-threshold", type=float, default=CRITICAL_THRESHOLD,
                        help="I(s) at or above which a CF span is critical (default ln 2)")
    args = parser.parse_args(argv)
    if not len(args.model_dir) == len(args.out_dir) == len(args.seed):
        parser.error(f"{len(args.model_dir)} --model-dir, {len(args.out_dir)} --out-dir and {len(args.seed)} "
                     "--seed: give one of each per analysis")
    cfg = load_config(args.config)
    for model_dir, out_dir, seed in zip(args.model_dir, args.out_dir, args.seed):
        summary = run_analysis(cfg, model_dir=model_dir, train_path=args.train, out_dir=out_dir, seed=seed,
                               batches=args.batches, critical_threshold=args.critical_threshold)
        cf = summary["cf"]
        print(f"{summary['label']}: {summary['n_responses']} responses, accuracy {summary['accuracy']}, "
              f"{cf['n_spans']['all']} CF spans, critical {cf['share_critical']}, ratio calculation/sentence "
              f"{cf['ratio_critical_calculation_to_sentence']} {ci_text(cf['ratio_ci'])}, "
              f"distractors {cf['share_distractor']}, {summary['seconds']['total']} s, written to {out_dir}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
