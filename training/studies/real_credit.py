"""Credit on real model text (issue 34): DelTA's lambda~ by token class, CF's spans and drops, and each method's
effective credit against Monte-Carlo token importance, on one checkpoint's own rollouts.

``python -m training.studies.real_credit --config C --train TRAIN.jsonl --model-dir M --out-dir D --seed S``
(rule ``real_credit``, ``workflow/rules/fidelity.smk``, when the training data is not the synthetic task).

``fidelity.batches`` rollout batches sampled as the RL loop samples steps 0..n-1 (``training.phases``), then

1. DelTA (arXiv 2605.21467 §3; the reference code's lambda~): lambda~ by real-text token class
   (``real_text.real_token_classes``: digit, operator, answer, text, eos) and side (A > 0 / A < 0), with
   p = pi_old(o_t) and ||v|| = (1 - p) ||h||; 95 % bootstrap intervals over prompt groups
   (``delta_probe.class_table``).
2. CF (arXiv 2602.09331, span detection and counterfactual score): per response the answer marker and the
   spans CF detects, the drops I(s) of the spans it scores (``real_text.real_text_summary``), and the share of
   responses with an answer region with its bootstrap interval over prompt groups.
3. Credit fidelity against Monte-Carlo importance (``mc_importance``: g_t = V(through t) - V(before t),
   V = P(correct | prefix) from ``fidelity.mc.k`` continuations). There is no exact importance on real text,
   so V is the measurable truth. ``fidelity.mc.responses`` responses are probed, the first right and first
   wrong one of each group with reward variance, batch by batch; every preset of :data:`PRESETS` is scored on
   the same rollouts (the same policy: the weighting alone differs), Spearman rho and top-10 % overlap
   (``training.studies.fidelity``), intervals over prompt groups. V at small k is noisy: the table gives k,
   the mean standard error of g and the share of tokens whose |g| exceeds 2 se.
4. Credit fidelity against exact labels, where the task defines them (``real_labels``: reasoning-gym chain_sum;
   the operands, correct partial sums and answer of a right response +1, the first wrong number of a wrong
   one -1, as the synthetic task's ``importance``), on every response of every batch: the synthetic fidelity's
   statistics (``fidelity.summarise``: ρ, decisive share, top-10 % overlap; intervals over prompt groups) per
   preset of :data:`LABEL_PRESETS`, beside the chance level that credit uniform within a response scores
   (``fidelity.chance_levels``; GRPO's and DAPO's uniform rows equal it). Tasks without exact labels are
   counted and named "not defined", never labelled. Phase 3's forward runs once per batch for all presets
   (``preset_credit(old=...)``), so the labels cost the presets' weights alone (``seconds.cpu_labels``).

Writes (atomically) ``delta_lambda_by_class.{md,csv}``, ``cf_real_text.md``, ``credit_fidelity_mc.{md,csv}``,
``mc_records.jsonl``, ``credit_fidelity_labels.{md,csv}``, ``label_records.jsonl`` and last ``summary.json``
(with seconds per part and this run's manifest).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from common.config import Config, load_config
from common.io import read_jsonl, write_json_atomic, write_jsonl_atomic, write_text_atomic
from common.manifest import build_manifest
from common.progress import note
from common.runtime import seed_everything, setup_runtime
from training.credit.cf import token_pieces
from training.phases import grade_rollout, old_forward, sample_prompts, sample_rollout, verifiable_reward
from training.presets import get_preset
from training.studies.analysis import analyse_batch, to_csv
from training.studies.delta_probe import class_table
from training.studies.fidelity import ResponseFidelity, batch_fidelity, chance_levels, summarise
from training.studies.fidelity_run import mc_probe, preset_credit
from training.studies.real_labels import LABELLED_TASKS, task_labels
from training.studies.real_text import real_text_summary, real_token_classes, response_structure

PRESETS: tuple[str, ...] = ("dapo", "delta", "cf", "delta_random", "cf_random")
"""DAPO's uniform weights, the two methods, and the random controls (DelTA's lambda~ range, CF's span choice)."""
LABEL_PRESETS: tuple[str, ...] = ("grpo", *PRESETS)
"""Against exact labels also GRPO: uniform weights under its own aggregation, the second chance-level control."""


def group_share_ci(flags: Sequence[bool], groups: Sequence[Any], *, n_boot: int, seed: int) -> tuple[float, float]:
    """95 % percentile interval of the share of True, prompt groups resampled with all their responses."""
    by: dict[Any, list[bool]] = {}
    for f, g in zip(flags, groups):
        by.setdefault(g, []).append(bool(f))
    sums = np.array([[sum(v), len(v)] for v in by.values()], dtype=float)
    rng = np.random.default_rng(seed)
    draws = [(s := sums[rng.integers(0, len(sums), len(sums))])[:, 0].sum() / s[:, 1].sum() for _ in range(n_boot)]
    return float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def mc_rows(correct: Sequence[float], group_ids: Sequence[int], budget: int) -> list[int]:
    """Up to ``budget`` rows: the first right and the first wrong response of each group with reward variance,
    group by group (so a small sample spans as many prompt groups, the bootstrap's unit, as it can)."""
    out: list[int] = []
    for g in dict.fromkeys(group_ids):
        rows = [i for i, h in enumerate(group_ids) if h == g]
        right, wrong = [i for i in rows if correct[i] > 0], [i for i in rows if correct[i] <= 0]
        if right and wrong:
            out += [right[0], wrong[0]]
    return sorted(out[:budget])


def probe(cfg: Config, model_dir: str, problems: list[dict], seed: int) -> dict[str, Any]:
    """Every per-response quantity of the module docstring on ``fidelity.batches`` batches of one checkpoint."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_dir).to(setup_runtime(cfg.runtime))
    generator = seed_everything(seed)
    presets = {name: get_preset(name, cfg.algorithms.get(name)) for name in LABEL_PRESETS}
    needs = frozenset({"hidden", "kv"}).union(*(p.needs for p in presets.values()))
    eos = token_pieces([tokenizer.eos_token_id], tokenizer)[0]
    out: dict[str, Any] = {"lam": [], "p": [], "v": [], "cls": [], "side": [], "group": [], "structure": [],
                           "spans": [], "scored": set(), "n_responses": 0, "n_correct": 0,
                           "fid": {name: [] for name in PRESETS}, "mc": [],
                           "labels": {name: [] for name in LABEL_PRESETS}, "label_records": [], "tasks": {},
                           "seconds": {"credit": 0.0, "mc": 0.0, "cpu_mc": 0.0, "cpu_labels": 0.0}}
    budget = cfg.fidelity.mc.responses if cfg.fidelity.mc.enabled else 0
    for step in range(cfg.fidelity.batches):
        t0 = time.perf_counter()
        ro = sample_rollout(model, tokenizer, problems, cfg.rl, seed=seed, step=step)
        ro = grade_rollout(ro, tokenizer, timeout_s=cfg.eval.grader_timeout_s)
        old = old_forward(model, ro, cfg.rl.micro_batch_size, needs=needs)  # once for every preset below
        bc = analyse_batch(model, tokenizer, ro, cfg, delta_preset=presets["delta"], cf_preset=presets["cf"],
                           generator=generator, old=old)
        groups = [(step, int(g)) for g in ro.group_ids]
        for i, row in enumerate(response_structure(ro, tokenizer, presets["cf"])):
            out["structure"].append({**row, "group": groups[i], "side": int(np.sign(float(bc.cf_adv[i])))})
        out["spans"] += bc.spans
        out["scored"] |= {(step, r.row) for r in bc.spans}
        out["n_responses"] += len(groups)
        out["n_correct"] += int(ro.correct.sum())
        for i in range(len(groups)):
            keep = (bc.delta_mask[i] > 0).numpy()
            n = int(ro.response_mask[i].sum())
            if float(bc.delta_adv[i]) == 0 or not keep[:n].any():
                continue
            k = keep[:n]
            cls = real_token_classes(token_pieces(ro.response_ids[i, :n].tolist(), tokenizer), eos)
            out["lam"].append(bc.lam[i, :n].numpy()[k]), out["p"].append(bc.p[i, :n].numpy()[k])
            out["v"].append(bc.v_norm[i, :n].numpy()[k]), out["cls"].append([c for c, kk in zip(cls, k) if kk])
            out["side"].append(1 if float(bc.delta_adv[i]) > 0 else -1), out["group"].append(groups[i])
        t1, c1 = time.perf_counter(), time.process_time()
        out["seconds"]["credit"] += t1 - t0
        credit = {name: preset_credit(model, tokenizer, ro, preset, cfg, seed * 1000 + step, old=old)
                  for name, preset in presets.items()}  # one old forward: the weights alone differ
        label_batch(out, ro, tokenizer, sample_prompts(problems, cfg.rl.prompts_per_step, seed, step), credit,
                    groups, seed, cfg.fidelity.top_fraction)
        out["seconds"]["cpu_labels"] += time.process_time() - c1
        t1, c1 = time.perf_counter(), time.process_time()
        rows = mc_rows(ro.correct.tolist(), ro.group_ids.tolist(), budget)
        note(f"real_credit {model_dir}: batch {step + 1}/{cfg.fidelity.batches} ({t1 - t0:.0f} s), "
             f"Monte-Carlo importance of {len(rows)} responses")
        if not rows:
            continue
        budget -= len(rows)
        mc = mc_probe(model, tokenizer, ro, cfg, rows, reward_fn=verifiable_reward)
        for i, (g, se) in mc.items():
            n = int(ro.response_mask[i].sum())
            out["mc"].append({"step": step, "row": i, "correct": bool(ro.correct[i] > 0), "importance": g, "se": se,
                              "tokens": token_pieces(ro.response_ids[i, :n].tolist(), tokenizer)})
        for name in PRESETS:
            adv, mask, c = credit[name]
            out["fid"][name] += batch_fidelity(seed, c[rows], [mc[i][0] for i in rows], mask[rows], adv[rows],
                                               cfg.fidelity.top_fraction, [groups[i] for i in rows])
        out["seconds"]["mc"] += time.perf_counter() - t1
        out["seconds"]["cpu_mc"] += time.process_time() - c1
    return out


def label_batch(out: dict[str, Any], ro: Any, tokenizer: Any, batch_problems: Sequence[dict],
                credit: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]], groups: Sequence[Any],
                seed: int, fraction: float) -> None:
    """Exact labels (``real_labels.task_labels``) of one batch's responses, and every preset's fidelity records
    against them on the responses whose task defines labels."""
    labels: dict[int, list[float]] = {}
    for i, g in enumerate(ro.group_ids.tolist()):
        n, problem = int(ro.response_mask[i].sum()), batch_problems[g]
        pieces = token_pieces(ro.response_ids[i, :n].tolist(), tokenizer)
        lab = task_labels(problem, pieces, bool(ro.correct[i] > 0), not bool(ro.truncated[i]))
        task = problem.get("task", "unknown (train.jsonl without task metadata)")
        out["tasks"][task] = out["tasks"].get(task, 0) + 1
        if lab is not None:
            labels[i] = lab
            out["label_records"].append({"step": ro.step, "row": i, "correct": bool(ro.correct[i] > 0),
                                         "tokens": pieces, "labels": lab})
    rows = sorted(labels)
    for name, (adv, mask, c) in credit.items():
        if rows:
            out["labels"][name] += batch_fidelity(seed, c[rows], [labels[i] for i in rows], mask[rows], adv[rows],
                                                  fraction, [groups[i] for i in rows])


def mc_noise(records: Sequence[dict]) -> dict[str, Any]:
    """Mean standard error of the MC importance and the share of tokens with |g| > 2 se."""
    g = [x for r in records for x in r["importance"]]
    se = [x for r in records for x in r["se"]]
    return {"n_responses": len(records), "n_tokens": len(g), "mean_se": statistics.fmean(se) if se else None,
            "share_resolved": sum(abs(a) > 2 * b for a, b in zip(g, se)) / len(g) if g else None}


def fidelity_table(fid: dict[str, list[ResponseFidelity]], *, n_boot: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    for name, recs in fid.items():
        s = summarise(recs, n_boot=n_boot, seed=seed)
        rows.append({"preset": name, **{k: s[k] for k in ("rho", "rho_lo", "rho_hi", "overlap", "overlap_lo",
                                                            "overlap_hi", "n_responses", "n_rho", "n_groups")}})
    return rows


def label_table(fid: dict[str, list[ResponseFidelity]], *, fraction: float, n_boot: int,
                seed: int) -> list[dict[str, Any]]:
    """One row per preset against the exact labels: the synthetic fidelity's statistics (``fidelity.summarise``)
    beside their chance levels (``fidelity.chance_levels``), labelled tokens counted inside the loss mask."""
    rows = []
    for name, recs in fid.items():
        s, chance = summarise(recs, n_boot=n_boot, seed=seed), chance_levels(recs, fraction)
        rows.append({"preset": name, **{k: s[k] for k in ("rho", "rho_lo", "rho_hi", "decisive_share",
                                                            "decisive_share_lo", "decisive_share_hi", "overlap",
                                                            "overlap_lo", "overlap_hi")},
                     "chance_decisive_share": chance["decisive_share"], "chance_overlap": chance["overlap"],
                     "n_responses": s["n_responses"], "n_rho": s["n_rho"],
                     "n_labelled_tokens": sum(r.n_decisive for r in recs),
                     "n_tokens": sum(r.n_tokens for r in recs), "n_groups": s["n_groups"]})
    return rows


def label_markdown(head: str, labels: dict[str, Any], top_fraction: float) -> str:
    """The exact-label fidelity table with its counts and the tasks whose labels are not defined."""
    pct = lambda x: "–" if x is None else f"{100 * x:.1f}"  # noqa: E731
    q = f"{100 * top_fraction:g} %"
    lines = [f"**{head}: credit fidelity against exact labels**", "",
             f"Labels: {labels['n_labelled']} responses of a task with exact labels ({labels['n_right']} right, "
             f"{labels['n_wrong']} wrong; {labels['n_with_decisive']} with a decisive token), of "
             f"{labels['n_responses']} probed.", "",
             f"| preset | ρ(credit, label) [95% CI] | decisive share % [95% CI] | chance % | top-{q} overlap % "
             "[95% CI] | chance % | responses (ρ defined) | labelled tokens / tokens | groups |",
             "|:--|--:|--:|--:|--:|--:|--:|--:|--:|"]
    lines += [f"| {r['preset']} | {_ci(r, 'rho')} | {_ci(r, 'decisive_share', True)} | "
              f"{pct(r['chance_decisive_share'])} | {_ci(r, 'overlap', True)} | {pct(r['chance_overlap'])} | "
              f"{r['n_responses']} ({r['n_rho']}) | {r['n_labelled_tokens']} / {r['n_tokens']} | {r['n_groups']} |"
              for r in labels["table"]]
    names = list(dict.fromkeys([*labels.get("mix", ()), *labels["tasks"]]))
    tasks = "; ".join(f"{t}: {labels['tasks'].get(t, 0)} responses, "
                      + ("exact labels" if t in LABELLED_TASKS else "**not defined**") for t in names)
    lines += ["", f"Tasks (the training mix and any probed): {tasks}. A task without exact token importance is "
              "left out, not labelled "
              "(training.studies.real_labels). Labels (chain_sum): in a right response the operands, the correct "
              "partial sums and the answer are decisive (+1); in a wrong one the first wrong number (-1); all else "
              "0. Statistics as the synthetic credit fidelity (training.studies.fidelity), on the responses with "
              "A != 0 (a zero advantage carries no credit), over the tokens in the preset's loss mask: ρ per-response "
              "Spearman of the effective credit (−dL/d log π at θ_old) against the label, constant credit counted as "
              "0, a response without a decisive token has no ρ; decisive share: pooled |credit| on labelled tokens; "
              f"overlap: top-{q} tokens by |credit| that are labelled. Chance: what credit uniform within each "
              "response scores (GRPO's and DAPO's rows must equal it). Intervals: 95 % bootstrap over prompt "
              "groups (one checkpoint: conditional on it)."]
    return "\n".join(lines) + "\n"


def _ci(r: dict, key: str, pct: bool = False) -> str:
    if r.get(key) is None:
        return "–"
    f = (lambda x: f"{100 * x:.1f}") if pct else (lambda x: f"{x:+.3f}")
    lo, hi = r.get(f"{key}_lo"), r.get(f"{key}_hi")
    return f"{f(r[key])} [{f(lo)}, {f(hi)}]" if lo is not None else f(r[key])


def render(summary: dict[str, Any]) -> dict[str, str]:
    """Markdown of the three tables."""
    head = (f"{summary['label']}: {summary['n_responses']} responses ({summary['batches']} batches x "
            f"{summary['responses_per_batch']}, seed {summary['seed']}), accuracy {summary['accuracy']:.3f}")
    lam = [f"**{head}: DelTA λ~ by real-text token class**", "",
           "| side | class | tokens | responses | groups | λ~ [95% CI] | p | ‖v‖ |",
           "|:--|:--|--:|--:|--:|--:|--:|--:|"]
    lam += [f"| {r['side']} | {r['class']} | {r['tokens']} | {r['responses']} | {r['groups']} | {r['lambda']:.3f} "
            f"[{r['lambda_lo']:.3f}, {r['lambda_hi']:.3f}] | {r['p']:.3f} | {r['v_norm']:.3f} |"
            for r in summary["delta"]["table"]]
    lam += ["", "λ~: DelTA's self-normalised coefficient (mean 1 over a batch's loss tokens); side: the sign of "
            "DelTA's advantage (DAPO's overlong shaping gives a short wrong response of an all-wrong group A > 0, "
            "as in training); classes: answer = from CF's answer marker (the statement the checker reads) on; "
            "digit / operator / text by the token's first character before it; eos. Intervals: 95 % bootstrap "
            "over prompt groups."]
    cf = summary["cf"]
    d = cf["drop"] or {}
    lo, hi = cf["share_with_marker_ci"]
    share = _ci({"s": cf["share_with_marker"], "s_lo": lo, "s_hi": hi}, "s", True)
    markers = " / ".join(str(v) for v in cf["markers"].values())
    cfl = [f"**{head}: CF on real text**", "", "| quantity | value |", "|:--|--:|",
           f"| responses | {cf['n_responses']} |",
           f"| share with an answer region [95% CI] | {share} % |",
           f"| answer markers (boxed / #### / phrase / closing) | {markers} |",
           f"| spans per response (mean) | {cf['spans_per_response']:.2f} |",
           f"| responses by span count | {', '.join(f'{k}: {v}' for k, v in cf['spans_histogram'].items())} |",
           f"| spans by kind (arithmetic / sentence) | {' / '.join(str(v) for v in cf['spans_by_kind'].values())} |",
           f"| responses scored (A != 0 and a marker) | {cf['n_responses_scored']} |",
           f"| spans scored | {cf['n_spans_scored']} |"]
    if d:
        cfl += [f"| drop I(s): mean ± sd | {d['mean']:.3f} ± {d['sd'] if d['sd'] is None else round(d['sd'], 3)} |",
                "| drop I(s): min / q10 / q25 / median / q75 / q90 / max | " + " / ".join(
                    f"{d[k]:.3f}" for k in ("min", "q10", "q25", "median", "q75", "q90", "max")) + " |",
                f"| share of scored spans with I(s) > 0 | {100 * cf['share_drop_positive']:.1f} % |"]
    n = summary["mc"]
    fid = [f"**{head}: credit fidelity against Monte-Carlo importance**", "",
           f"Ground truth: g_t = V(through t) - V(before t), V from k = {summary['mc_k']} continuations per prefix; "
           f"{n['n_responses']} responses, {n['n_tokens']} tokens; mean se(g) "
           + ("–" if n["mean_se"] is None else f"{n['mean_se']:.3f}") + ", tokens with |g| > 2 se: "
           + ("–" if n["share_resolved"] is None else f"{100 * n['share_resolved']:.1f} %") + ".", "",
           "| preset | ρ(credit, g) [95% CI] | top-10% overlap % [95% CI] | responses (ρ defined) | groups |",
           "|:--|--:|--:|--:|--:|"]
    fid += [f"| {r['preset']} | {_ci(r, 'rho')} | {_ci(r, 'overlap', True)} | {r['n_responses']} ({r['n_rho']}) | "
            f"{r['n_groups']} |" for r in summary["fidelity"]]
    fid += ["", "ρ: per-response Spearman of the effective credit (−dL/d log π at θ_old) against g, constant credit "
            "(DAPO's uniform weights) counted as 0; overlap: top-10 % tokens by |credit| that are top by |g|; "
            "intervals: 95 % bootstrap over prompt groups (one checkpoint: conditional on it)."]
    return {"delta_lambda_by_class.md": "\n".join(lam) + "\n", "cf_real_text.md": "\n".join(cfl) + "\n",
            "credit_fidelity_mc.md": "\n".join(fid) + "\n",
            "credit_fidelity_labels.md": label_markdown(head, summary["labels"], summary["top_fraction"])}


def run(cfg: Config, *, model_dir: str, train_path: str, out_dir: str, seed: int, label: str) -> dict[str, Any]:
    """Probe one checkpoint and write every output of the module docstring."""
    t0, c0 = time.perf_counter(), time.process_time()
    res = probe(cfg, model_dir, read_jsonl(train_path), seed)
    fc, lab = cfg.fidelity, res["label_records"]
    structure = res["structure"]
    cf = real_text_summary(structure, res["spans"], len(res["scored"]))
    cf["share_with_marker_ci"] = group_share_ci([s["marker"] is not None for s in structure],
                                                [s["group"] for s in structure], n_boot=fc.bootstrap,
                                                seed=fc.bootstrap_seed) if structure else (None, None)
    summary = {"label": label, "seed": seed, "batches": fc.batches,
               "responses_per_batch": cfg.rl.prompts_per_step * cfg.rl.group_size,
               "n_responses": res["n_responses"], "accuracy": res["n_correct"] / max(res["n_responses"], 1),
               "delta": {"table": class_table(res["lam"], res["p"], res["v"], res["cls"], res["side"], res["group"],
                                              n_boot=fc.bootstrap, seed=fc.bootstrap_seed)},
               "cf": cf, "mc_k": fc.mc.k, "mc": mc_noise(res["mc"]),
               "fidelity": fidelity_table(res["fid"], n_boot=fc.bootstrap, seed=fc.bootstrap_seed),
               "top_fraction": fc.top_fraction, "labels": {
                   "table": label_table(res["labels"], fraction=fc.top_fraction, n_boot=fc.bootstrap,
                                        seed=fc.bootstrap_seed),
                   "tasks": res["tasks"], "mix": [t["name"] for t in cfg.train_data.tasks or ()],
                   "n_responses": res["n_responses"], "n_labelled": len(lab),
                   "n_right": sum(r["correct"] for r in lab), "n_wrong": sum(not r["correct"] for r in lab),
                   "n_with_decisive": sum(any(r["labels"]) for r in lab)},
               "model_dir": model_dir,
               "seconds": {**{k: round(v, 1) for k, v in res["seconds"].items()},
                           "total": round(time.perf_counter() - t0, 1),
                           "cpu_total": round(time.process_time() - c0, 1)},
               "manifest": build_manifest(cfg, seeds={"probe": seed}, data_files={"train": train_path},
                                          extra={"stage": "real_credit"})}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in render(summary).items():
        write_text_atomic(out / name, text)
    write_text_atomic(out / "delta_lambda_by_class.csv", to_csv(summary["delta"]["table"]))
    write_text_atomic(out / "credit_fidelity_mc.csv", to_csv(summary["fidelity"]))
    write_text_atomic(out / "credit_fidelity_labels.csv", to_csv(summary["labels"]["table"]))
    write_jsonl_atomic(out / "label_records.jsonl", lab + [{"preset": name, **asdict(r)}
                                                           for name, rs in res["labels"].items() for r in rs])
    write_jsonl_atomic(out / "mc_records.jsonl", res["mc"] + [{"preset": name, **asdict(r)}
                                                              for name, rs in res["fid"].items() for r in rs])
    write_json_atomic(out / "summary.json", summary)
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.studies.real_credit",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--train", required=True, help="training prompts JSONL (the RL loop's)")
    parser.add_argument("--model-dir", required=True, action="append", help="checkpoint folder (repeatable)")
    parser.add_argument("--out-dir", required=True, action="append", help="one per --model-dir")
    parser.add_argument("--seed", type=int, default=0, help="the RL seed whose rollout batches are re-sampled")
    args = parser.parse_args(argv)
    if len(args.model_dir) != len(args.out_dir):
        parser.error(f"{len(args.model_dir)} --model-dir but {len(args.out_dir)} --out-dir: give one of each")
    missing = [m for m in args.model_dir if not (Path(m) / "config.json").is_file()]
    if missing:
        parser.error(f"--model-dir {missing[0]}: no checkpoint there (config.json missing)")
    cfg = load_config(args.config)
    torch.set_grad_enabled(False)
    for model_dir, out_dir in zip(args.model_dir, args.out_dir):
        s = run(cfg, model_dir=model_dir, train_path=args.train, out_dir=out_dir, seed=args.seed,
                label=Path(out_dir).name)
        fid = ", ".join(f"{r['preset']} rho {r['rho']}" for r in s["fidelity"])
        fid += "; labels: " + ", ".join(f"{r['preset']} rho {r['rho']}" for r in s["labels"]["table"])
        print(f"{s['label']}: {s['n_responses']} responses, accuracy {s['accuracy']:.3f}, answer region "
              f"{s['cf']['share_with_marker']}, {fid}; {s['seconds']} s, written to {out_dir}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
