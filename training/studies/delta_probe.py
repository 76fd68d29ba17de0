"""Where DelTA's lambda goes on the synthetic task, by token class and side (issue 26).

``python -m training.studies.delta_probe --config C --train TRAIN.jsonl --model DIR --seed S [--batches N]``

Per checkpoint, through the trainer's functions (``training.rl``) as ``training.studies.fidelity_run`` probes
it: ``N`` rollout batches (``sample_rollout``, ``grade_rollout``), DelTA's reward shaping, the phase-3
forward with the LM-head input h, then

- lambda~ by the fast path (``delta.delta_lambda``) and by the literal formulas (``delta.delta_reference``,
  algorithms.md §1.4 steps 1-6, the reference code's computation) on the same batch, and their max |diff|;
- per side (A > 0 right, A < 0 wrong) and token class (``training.credit.importance`` classes, EOS its own):
  mean lambda~, mean p = pi_old(o_t) and mean ||v|| = (1 - p) ||h|| (v, DelTA's gradient proxy), with
  95 % bootstrap intervals over responses of the lambda~ means;
- the per-response Spearman rho of DelTA's effective credit against the exact importance (the credit-fidelity
  pipeline, ``training.studies.fidelity``), by side and over all, with 95 % bootstrap intervals over responses.

The proxy v is the sampled token's row of d log pi / d W_lm: its direction is h, which depends on the prefix
only, not on which token was sampled. A right result and a slip written after the same prefix share h and
differ only in 1 - p: the right side's decisive tokens and the wrong side's slips point the same way.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from common.config import load_config
from common.io import read_jsonl
from common.runtime import setup_runtime
from training.credit.delta import delta_lambda, delta_reference
from training.credit.gradsnr import effective_credit
from training.phases import grade_rollout, old_forward, sample_prompts, sample_rollout, shape_rewards
from training.presets import get_preset
from training.studies.fidelity import batch_fidelity
from training.studies.fidelity_run import exact_importance

EOS = "eos"
SIDES = {"right (A>0)": 1, "wrong (A<0)": -1}


def class_table(lam: Sequence[np.ndarray], prob: Sequence[np.ndarray], vnorm: Sequence[np.ndarray],
                classes: Sequence[Sequence[str]], side: Sequence[int], *, n_boot: int = 1000,
                seed: int = 0) -> list[dict]:
    """Rows (side, class, tokens, responses, lambda mean [lo, hi], p mean, ||v|| mean) over responses.

    Inputs are per response (valid tokens); the interval resamples responses (tokens of one response are
    not independent)."""
    rng = np.random.default_rng(seed)
    rows = []
    for side_name, sign in SIDES.items():
        resp = [i for i in range(len(lam)) if side[i] == sign]
        for cls in sorted({c for i in resp for c in classes[i]}):
            per = [(lam[i][m], prob[i][m], vnorm[i][m]) for i in resp
                   if (m := np.array([c == cls for c in classes[i]])).any()]
            sums = np.array([[x[0].sum(), len(x[0])] for x in per])  # [n, 2]
            draws = [sums[j, 0].sum() / sums[j, 1].sum()
                     for j in (rng.integers(0, len(per), len(per)) for _ in range(n_boot))]
            rows.append({"side": side_name, "class": cls, "tokens": int(sums[:, 1].sum()), "responses": len(per),
                         "lambda": float(sums[:, 0].sum() / sums[:, 1].sum()),
                         "lambda_lo": float(np.percentile(draws, 2.5)), "lambda_hi": float(np.percentile(draws, 97.5)),
                         "p": float(np.concatenate([x[1] for x in per]).mean()),
                         "v_norm": float(np.concatenate([x[2] for x in per]).mean())})
    return rows


def probe(cfg, model_dir: str, problems: list[dict], seed: int, batches: int) -> dict:
    """lambda~ by class and side, the reference's max |diff| and rho by side on ``batches`` probe batches."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_dir).to(setup_runtime(cfg.runtime))
    preset = get_preset("delta", cfg.algorithms.get("delta"))
    lam_all, p_all, v_all, cls_all, side_all, rho = [], [], [], [], [], {s: [] for s in SIDES.values()}
    max_diff = 0.0
    for step in range(batches):
        ro = sample_rollout(model, tokenizer, problems, cfg.rl, seed=seed, step=step)
        ro = grade_rollout(ro, tokenizer, timeout_s=cfg.eval.grader_timeout_s)
        _, adv, mask = shape_rewards(preset, ro, cfg.rl.max_new_tokens)
        old = old_forward(model, ro, cfg.rl.micro_batch_size, needs=("hidden",))
        lam = delta_lambda(old.hidden, old.old_logp, mask, adv, **preset.knobs)  # [B, R]
        ref = delta_reference(old.hidden.double(), old.old_logp.double(), mask.double(), adv.double(),
                              **{k: v for k, v in preset.knobs.items() if k != "stats"})
        max_diff = max(max_diff, float((lam.double() - ref).abs().max()))
        questions = [sample_prompts(problems, cfg.rl.prompts_per_step, seed, step)[int(g)]["question"]
                     for g in ro.group_ids]
        classes, imps = exact_importance(ro, tokenizer, questions)
        credit = effective_credit(preset, adv, lam * mask, mask, cfg.rl.max_new_tokens)
        for i, rec in zip([i for i in range(len(imps)) if float(adv[i]) != 0 and mask[i].any()],
                          batch_fidelity(seed, credit, imps, mask, adv)):
            if rec.rho is not None:
                rho[1 if float(adv[i]) > 0 else -1].append(rec.rho)
        vnorm = (1 - old.old_logp.exp()) * old.hidden.float().norm(dim=-1)  # [B, R]
        for i in range(len(imps)):
            keep = (mask[i] > 0).numpy()
            if float(adv[i]) == 0 or not keep.any():
                continue
            n = len(classes[i])
            ids = ro.response_ids[i, :n].tolist()
            cls = [EOS if t == tokenizer.eos_token_id else c for t, c in zip(ids, classes[i])]
            lam_all.append(lam[i, :n].numpy()[keep[:n]]), p_all.append(old.old_logp[i, :n].exp().numpy()[keep[:n]])
            v_all.append(vnorm[i, :n].numpy()[keep[:n]]), cls_all.append([c for c, k in zip(cls, keep[:n]) if k])
            side_all.append(1 if float(adv[i]) > 0 else -1)
    return {"rows": class_table(lam_all, p_all, v_all, cls_all, side_all), "max_diff": max_diff,
            "rho": {name: rho[s] for name, s in SIDES.items()}}


def mean_ci(values: Sequence[float], n_boot: int = 1000, seed: int = 0) -> str:
    """'mean [lo, hi]' with a 95 % percentile bootstrap over the values (responses)."""
    if not values:
        return "n/a"
    v = np.asarray(values)
    draws = np.random.default_rng(seed).choice(v, size=(n_boot, len(v))).mean(1)
    return f"{v.mean():+.3f} [{np.percentile(draws, 2.5):+.3f}, {np.percentile(draws, 97.5):+.3f}]"


def render(result: dict, label: str) -> str:
    """Markdown: the class table and rho by side."""
    lines = [f"### {label}", "", f"fast vs literal (reference) lambda~: max |diff| {result['max_diff']:.2e}", "",
             "| side | class | tokens | responses | lambda~ [95% CI] | p | ‖v‖ |", "|:--|:--|--:|--:|--:|--:|--:|"]
    for r in result["rows"]:
        lines.append(f"| {r['side']} | {r['class']} | {r['tokens']} | {r['responses']} | {r['lambda']:.3f} "
                     f"[{r['lambda_lo']:.3f}, {r['lambda_hi']:.3f}] | {r['p']:.3f} | {r['v_norm']:.3f} |")
    lines.append("")
    every = [v for vals in result["rho"].values() for v in vals]
    for side, vals in [*result["rho"].items(), ("all", every)]:
        lines.append(f"rho {side}: {mean_ci(vals)} over {len(vals)} responses")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.studies.delta_probe",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--train", required=True, help="training prompts JSONL (the RL loop's)")
    parser.add_argument("--model", required=True, action="append", help="checkpoint folder (repeatable)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batches", type=int, default=2)
    args = parser.parse_args(argv)
    cfg = load_config(args.config)
    problems = read_jsonl(args.train)
    torch.set_grad_enabled(False)
    for model_dir in args.model:
        print(render(probe(cfg, model_dir, problems, args.seed, args.batches), model_dir), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
