"""Where DelTA's lambda goes on the synthetic task, by token class and side (issue 26).

``python -m training.studies.delta_probe --config C --train TRAIN.jsonl --model DIR [--model DIR2 ...] --seed S
[--batches N] [--pool]``

Per checkpoint, through the trainer's functions (``training.rl``) as ``training.studies.fidelity_run`` probes
it: ``N`` rollout batches (``sample_rollout``, ``grade_rollout``), DelTA's reward shaping, the phase-3
forward with the LM-head input h, then

- lambda~ by the fast path (``delta.delta_lambda``) and by the literal formulas (``delta.delta_reference``,
  algorithms.md §1.4 steps 1-6, the reference code's computation) on the same batch, and their max |diff|;
- per side (A > 0 right, A < 0 wrong) and token class (``training.credit.importance`` classes, EOS its own):
  mean lambda~, mean p = pi_old(o_t) and mean ||v|| = (1 - p) ||h|| (v, DelTA's gradient proxy), with
  95 % bootstrap intervals of the lambda~ means over prompt groups (every drawn group with all its responses,
  as the credit-fidelity table; the responses of one prompt share its advantage baseline);
- the per-response Spearman rho of DelTA's effective credit against the exact importance, the top-10 % overlap
  and the decisive tokens' share (the credit-fidelity pipeline, ``training.studies.fidelity``), by side and
  over all, with its bootstrap (checkpoints, then prompt groups).

Each ``--model`` is probed on its own; ``--pool`` pools them into one table (e.g. the trained seeds of a
method): the checkpoints are the fidelity bootstrap's seeds, and the lambda~ interval resamples the pooled
prompt groups (conditional on the checkpoints).

The proxy v is the sampled token's row of d log pi / d W_lm: its direction is h, which depends on the prefix
only, not on which token was sampled. A right result and a slip written after the same prefix share h and
differ only in 1 - p: the right side's decisive tokens and the wrong side's slips point the same way.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from common.config import load_config
from common.io import read_jsonl
from common.runtime import setup_runtime
from evaluation.generation.hf import sample_hf
from training.credit.delta import delta_lambda, delta_reference
from training.credit.gradsnr import effective_credit
from training.phases import grade_rollout, old_forward, sample_prompts, sample_rollout, shape_rewards
from training.presets import get_preset
from training.studies.fidelity import batch_fidelity, summarise
from training.studies.fidelity_run import exact_importance

EOS = "eos"
SIDES = {"right (A>0)": 1, "wrong (A<0)": -1}


def class_table(lam: Sequence[np.ndarray], prob: Sequence[np.ndarray], vnorm: Sequence[np.ndarray],
                classes: Sequence[Sequence[str]], side: Sequence[int], clusters: Sequence[Hashable] | None = None,
                *, n_boot: int = 1000, seed: int = 0) -> list[dict]:
    """Rows (side, class, tokens, responses, groups, lambda mean [lo, hi], p mean, ||v|| mean).

    Inputs are per response (valid tokens); the interval resamples ``clusters`` (a response's prompt group;
    None: each response its own), every drawn cluster with all its responses of that side and class (tokens
    of one response, and responses of one prompt, are not independent)."""
    rng = np.random.default_rng(seed)
    clusters = list(range(len(lam))) if clusters is None else list(clusters)
    rows = []
    for side_name, sign in SIDES.items():
        resp = [i for i in range(len(lam)) if side[i] == sign]
        for cls in sorted({c for i in resp for c in classes[i]}):
            per = [(lam[i][m], prob[i][m], vnorm[i][m], clusters[i]) for i in resp
                   if (m := np.array([c == cls for c in classes[i]])).any()]
            by_cluster: dict[Hashable, list[float]] = {}
            for x in per:  # per cluster: [lambda sum, tokens]
                acc = by_cluster.setdefault(x[3], [0.0, 0])
                acc[0], acc[1] = acc[0] + float(x[0].sum()), acc[1] + len(x[0])
            sums = np.array(list(by_cluster.values()))  # [n clusters, 2]
            draws = [sums[j, 0].sum() / sums[j, 1].sum()
                     for j in (rng.integers(0, len(sums), len(sums)) for _ in range(n_boot))]
            rows.append({"side": side_name, "class": cls, "tokens": int(sums[:, 1].sum()), "responses": len(per),
                         "groups": len(sums),
                         "lambda": float(sums[:, 0].sum() / sums[:, 1].sum()),
                         "lambda_lo": float(np.percentile(draws, 2.5)), "lambda_hi": float(np.percentile(draws, 97.5)),
                         "p": float(np.concatenate([x[1] for x in per]).mean()),
                         "v_norm": float(np.concatenate([x[2] for x in per]).mean())})
    return rows


def probe(cfg, model_dir: str, problems: list[dict], seed: int, batches: int, index: int = 0,
          sampler: Callable[..., torch.Tensor] = sample_hf) -> dict:
    """Per-response lambda~, p, ||v||, classes, side and prompt group, the fidelity records, and the
    reference's max |diff| on ``batches`` probe batches of one checkpoint (``index``: its place in a pool;
    ``sampler``: the rollout's generator, ``sample_rollout``'s)."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_dir).to(setup_runtime(cfg.runtime))
    preset = get_preset("delta", cfg.algorithms.get("delta"))
    out: dict = {"lam": [], "p": [], "v": [], "cls": [], "side": [], "group": [], "records": [], "max_diff": 0.0}
    for step in range(batches):
        ro = sample_rollout(model, tokenizer, problems, cfg.rl, seed=seed, step=step, sampler=sampler)
        ro = grade_rollout(ro, tokenizer, timeout_s=cfg.eval.grader_timeout_s)
        _, adv, mask = shape_rewards(preset, ro, cfg.rl.max_new_tokens)
        old = old_forward(model, ro, cfg.rl.micro_batch_size, needs=("hidden",))
        lam = delta_lambda(old.hidden, old.old_logp, mask, adv, **preset.knobs)  # [B, R]
        ref = delta_reference(old.hidden.double(), old.old_logp.double(), mask.double(), adv.double(),
                              **{k: v for k, v in preset.knobs.items() if k != "stats"})
        out["max_diff"] = max(out["max_diff"], float((lam.double() - ref).abs().max()))
        questions = [sample_prompts(problems, cfg.rl.prompts_per_step, seed, step)[int(g)]["question"]
                     for g in ro.group_ids]
        classes, imps = exact_importance(ro, tokenizer, questions)
        credit = effective_credit(preset, adv, lam * mask, mask, cfg.rl.max_new_tokens)
        groups = [(index, step, int(g)) for g in ro.group_ids]
        out["records"] += batch_fidelity(index, credit, imps, mask, adv, groups=groups)
        vnorm = (1 - old.old_logp.exp()) * old.hidden.float().norm(dim=-1)  # [B, R]
        for i in range(len(imps)):
            keep = (mask[i] > 0).numpy()
            if float(adv[i]) == 0 or not keep.any():
                continue
            n = len(classes[i])
            ids = ro.response_ids[i, :n].tolist()
            cls = [EOS if t == tokenizer.eos_token_id else c for t, c in zip(ids, classes[i])]
            k = keep[:n]
            out["lam"].append(lam[i, :n].numpy()[k]), out["p"].append(old.old_logp[i, :n].exp().numpy()[k])
            out["v"].append(vnorm[i, :n].numpy()[k]), out["cls"].append([c for c, kk in zip(cls, k) if kk])
            out["side"].append(1 if float(adv[i]) > 0 else -1), out["group"].append(groups[i])
    return out


def pool(parts: Sequence[dict]) -> dict:
    """One probe result from several checkpoints' (lists concatenated, the largest max |diff|)."""
    out = {k: [x for part in parts for x in part[k]] for k in ("lam", "p", "v", "cls", "side", "group", "records")}
    out["max_diff"] = max(part["max_diff"] for part in parts)
    return out


def summary(result: dict, n_boot: int = 1000) -> dict:
    """The class table and the fidelity rows (by side and over all) of a probe result."""
    recs = result["records"]
    sides = {"right (A>0)": [r for r, s in zip(recs, result["side"]) if s > 0],
             "wrong (A<0)": [r for r, s in zip(recs, result["side"]) if s < 0], "all": recs}
    return {"rows": class_table(result["lam"], result["p"], result["v"], result["cls"], result["side"],
                                result["group"], n_boot=n_boot),
            "fidelity": {name: summarise(rs, n_boot=n_boot, seed=0) for name, rs in sides.items()},
            "max_diff": result["max_diff"]}


def _ci(row: dict, key: str, pct: bool = False) -> str:
    if row[key] is None:
        return "n/a"
    f = (lambda x: f"{100 * x:.1f}") if pct else (lambda x: f"{x:+.3f}")
    return f"{f(row[key])} [{f(row[key + '_lo'])}, {f(row[key + '_hi'])}]"


def render(table: dict, label: str) -> str:
    """Markdown: the class table and the fidelity rows by side."""
    lines = [f"### {label}", "", f"fast vs literal (reference) lambda~: max |diff| {table['max_diff']:.2e}", "",
             "| side | class | tokens | responses | groups | lambda~ [95% CI] | p | ‖v‖ |",
             "|:--|:--|--:|--:|--:|--:|--:|--:|"]
    for r in table["rows"]:
        lines.append(f"| {r['side']} | {r['class']} | {r['tokens']} | {r['responses']} | {r['groups']} | "
                     f"{r['lambda']:.3f} [{r['lambda_lo']:.3f}, {r['lambda_hi']:.3f}] | {r['p']:.3f} | "
                     f"{r['v_norm']:.3f} |")
    lines += ["", "| side | rho [95% CI] | top-10% overlap % | decisive token share % | responses (rho defined) "
              "| groups |", "|:--|--:|--:|--:|--:|--:|"]
    for side, f in table["fidelity"].items():
        lines.append(f"| {side} | {_ci(f, 'rho')} | {_ci(f, 'overlap', True)} | "
                     f"{_ci(f, 'decisive_token_share', True)} | {f['n_responses']} ({f['n_rho']}) | {f['n_groups']} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.studies.delta_probe",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--train", required=True, help="training prompts JSONL (the RL loop's)")
    parser.add_argument("--model", required=True, action="append", help="checkpoint folder (repeatable)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--pool", action="store_true", help="one table over all --model checkpoints")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples")
    args = parser.parse_args(argv)
    missing = [m for m in args.model if not (Path(m) / "config.json").is_file()]
    if missing:  # before any probe runs: a pool must not fail on its last checkpoint after minutes of work
        parser.error(f"--model {missing[0]}: no checkpoint there (config.json missing); train it first "
                     "(snakemake ... runs/delta/seed<S>/metrics.jsonl) or fix the path")
    cfg = load_config(args.config)
    problems = read_jsonl(args.train)
    torch.set_grad_enabled(False)
    parts = []
    for index, model_dir in enumerate(args.model):
        parts.append(probe(cfg, model_dir, problems, args.seed, args.batches, index))
        if not args.pool:
            print(render(summary(parts[-1], args.bootstrap), model_dir), flush=True)
    if args.pool:
        print(render(summary(pool(parts), args.bootstrap), " + ".join(args.model)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
