"""Credit fidelity of every trained preset and control (issue 16), from the checkpoints the DAG writes.

``python -m training.studies.fidelity_run --config C --train TRAIN.jsonl --out-dir DIR
--row LABEL PRESET MODEL_DIR SEED [--row ...] [--metrics LABEL METRICS.jsonl ...]``

Per checkpoint, through the trainer's own functions (``training.rl``): ``fidelity.batches`` probe rollout
batches sampled as the loop samples steps 0..n-1 (``sample_rollout``, ``grade_rollout``); per preset its
reward shaping and loss mask (``shape_rewards``), the phase-3 forward (``old_forward``), its token weights
from the ``training.credit`` registry on a ``CreditBatch`` built as the loop builds it, and the effective
credit from ``training.losses`` (``training.studies.fidelity.effective_credit``). Rows with the same LABEL
(one per seed) are pooled; intervals resample seeds, then responses.

Ground truth: exact token importance of the synthetic task (``training.studies.importance``); with
``fidelity.mc.enabled`` also Monte-Carlo importance (``training.studies.mc_importance``) of the first
``fidelity.mc.responses`` responses with a non-zero advantage of each checkpoint.

Writes (atomically) ``credit_fidelity.{md,csv}``, ``credit_fidelity.{png,pdf}``, ``records.jsonl`` (one
line per response and row) and, with ``--metrics``, ``gradient_snr.{md,csv}``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from common.config import Config, load_config
from common.io import read_jsonl, write_jsonl_atomic
from common.runtime import setup_runtime
from evaluation.generation.hf import sample_hf
from training.credit import get_token_weight_fn
from training.credit.cf import token_pieces
from training.credit.gradsnr import effective_credit
from training.critic import checkpoint_critic
from training.phases import (
    OldForward,
    Rollout,
    grade_rollout,
    loop_credit_batch,
    old_forward,
    sample_prompts,
    sample_rollout,
    shape_rewards,
    token_advantages,
    verifiable_reward,
    with_values,
)
from training.presets import Preset, get_preset
from training.studies.fidelity import ResponseFidelity, batch_fidelity, spearman
from training.studies.fidelity_report import fidelity_rows, snr_rows, write_fidelity, write_snr
from training.studies.importance import synthetic_importance
from training.studies.mc_importance import mc_importance

RewardFn = Callable[..., float]


def preset_credit(model: Any, tokenizer: Any, ro: Rollout, preset: Preset, cfg: Config,
                  generator_seed: int, critic: Any = None,
                  old: OldForward | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(advantages [B], loss mask [B, R], effective credit [B, R]) of ``preset`` on ``ro``: phases 2b-4, with the
    loss's own advantage (token-level for OTB / KTAE, ``training.rl.token_advantages``). ``old``: phase 3's
    forward of ``ro`` computed once for several presets (holding every one's needs); None: its own."""
    micro, max_len = cfg.rl.micro_batch_size, cfg.rl.max_new_tokens
    rewards, adv, mask = shape_rewards(preset, ro, max_len)
    old = old if old is not None else old_forward(model, ro, micro, needs=preset.needs)
    old = with_values(old, critic)  # PPO-critic's V
    batch = loop_credit_batch(model, ro, old, tokenizer, micro, advantages=adv, loss_mask=mask, rewards=rewards,
                              generator=torch.Generator().manual_seed(generator_seed))  # random controls
    with torch.no_grad():
        weights = get_token_weight_fn(preset.token_weights)(batch, **preset.knobs) * mask
        loss_adv = token_advantages(preset, batch)
    return adv, mask, effective_credit(preset, loss_adv, weights, mask, max_len)


def exact_importance(ro: Rollout, tokenizer: Any,
                     questions: Sequence[str]) -> tuple[list[list[str]], list[list[float]]]:
    """Token classes and exact importance of every response (valid tokens) of a synthetic rollout."""
    classes, imps = [], []
    for i in range(ro.response_ids.shape[0]):
        n = int(ro.response_mask[i].sum())
        pieces = token_pieces(ro.response_ids[i, :n].tolist(), tokenizer)
        c, g = synthetic_importance(questions[i], pieces, bool(ro.correct[i] > 0))
        classes.append(c), imps.append(g)
    return classes, imps


def mc_probe(model: Any, tokenizer: Any, ro: Rollout, cfg: Config, rows: Sequence[int], *,
             reward_fn: RewardFn) -> dict[int, tuple[list[float], list[float]]]:
    """Monte-Carlo importance and its standard error of the chosen response rows."""
    mc, out = cfg.fidelity.mc, {}
    for i in rows:
        n = int(ro.response_mask[i].sum())
        prompt = ro.prompt_ids[i][ro.prompt_mask[i] > 0].tolist()
        out[i] = mc_importance(model, tokenizer, prompt, ro.response_ids[i, :n].tolist(), ro.golds[i],
                               float(ro.correct[i]), k=mc.k, temperature=cfg.rl.temperature, top_p=cfg.rl.top_p,
                               max_new_tokens=cfg.rl.max_new_tokens, seed=mc.seed * 7919 + ro.step * 131 + i,
                               reward_fn=reward_fn, timeout_s=cfg.eval.grader_timeout_s)
    return out


def probe_checkpoint(cfg: Config, model_dir: str, presets: Sequence[Preset], seed: int, problems: list[dict], *,
                     reward_fn: RewardFn = verifiable_reward, sampler: Callable[..., torch.Tensor] = sample_hf
                     ) -> tuple[dict[str, list[ResponseFidelity]], dict[str, list[ResponseFidelity]], list[dict]]:
    """Records per preset against exact (and Monte-Carlo) importance on one checkpoint's probe batches."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_dir).to(setup_runtime(cfg.runtime))
    fid, exact, mc, extra = cfg.fidelity, {p.name: [] for p in presets}, {p.name: [] for p in presets}, []
    mc_left = fid.mc.responses if fid.mc.enabled else 0
    critics = {p.name: checkpoint_critic(p, model, model_dir) for p in presets}
    for step in range(fid.batches):
        ro = sample_rollout(model, tokenizer, problems, cfg.rl, seed=seed, step=step, sampler=sampler)
        ro = grade_rollout(ro, tokenizer, timeout_s=cfg.eval.grader_timeout_s, reward_fn=reward_fn)
        batch_problems = sample_prompts(problems, cfg.rl.prompts_per_step, seed, step)
        questions = [batch_problems[int(g)]["question"] for g in ro.group_ids]
        classes, imps = exact_importance(ro, tokenizer, questions)
        informative = [i for i in range(len(imps)) if ro.correct[ro.group_ids == ro.group_ids[i]].std() > 0]
        mc_rows = informative[:mc_left]
        mc_left -= len(mc_rows)
        mc_imp = mc_probe(model, tokenizer, ro, cfg, mc_rows, reward_fn=reward_fn) if mc_rows else {}
        for i, (g_mc, se) in mc_imp.items():
            extra.append({"step": step, "row": i, "correct": bool(ro.correct[i] > 0), "mc_importance": g_mc,
                          "mc_se": se, "exact_importance": imps[i], "classes": classes[i],
                          "rho_mc_exact": spearman(g_mc, imps[i])})
        for p in presets:
            adv, mask, credit = preset_credit(model, tokenizer, ro, p, cfg, seed * 1000 + step, critics[p.name])
            groups = [(step, int(g)) for g in ro.group_ids]  # the prompt group: the bootstrap's unit
            exact[p.name] += batch_fidelity(seed, credit, imps, mask, adv, fid.top_fraction, groups)
            if mc_imp:
                sub = sorted(mc_imp)
                mc[p.name] += batch_fidelity(seed, credit[sub], [mc_imp[i][0] for i in sub], mask[sub], adv[sub],
                                             fid.top_fraction, [groups[i] for i in sub])
    return exact, mc, extra


def run(cfg: Config, rows: Sequence[tuple[str, str, str, int]], *, train_path: str | Path, out_dir: str | Path,
        metrics: Sequence[tuple[str, str]] = (), reward_fn: RewardFn = verifiable_reward,
        sampler: Callable[..., torch.Tensor] = sample_hf) -> list[dict[str, Any]]:
    """Probe every (label, preset, model, seed) row, pool labels over seeds, write every output."""
    problems = read_jsonl(train_path)
    by_ckpt: dict[tuple[str, int], list[tuple[str, Preset]]] = {}
    for label, preset, model_dir, seed in rows:
        by_ckpt.setdefault((model_dir, int(seed)), []).append(
            (label, get_preset(preset, cfg.algorithms.get(preset))))
    exact: dict[str, list[ResponseFidelity]] = {}
    mc: dict[str, list[ResponseFidelity]] = {}
    records: list[dict[str, Any]] = []
    for (model_dir, seed), entries in by_ckpt.items():
        e, m, extra = probe_checkpoint(cfg, model_dir, [p for _, p in entries], seed, problems,
                                       reward_fn=reward_fn, sampler=sampler)
        for label, p in entries:
            exact.setdefault(label, []).extend(e[p.name])
            mc.setdefault(label, []).extend(m[p.name])
            records += [{"label": label, "preset": p.name, "model": model_dir, "truth": "exact", **asdict(r)}
                        for r in e[p.name]]
        records += [{"model": model_dir, "seed": seed, "truth": "mc", **x} for x in extra]
    labels = list(dict.fromkeys(label for label, *_ in rows))
    meta = {label: next((p, md) for lab, p, md, _ in rows if lab == label) for label in labels}
    table = fidelity_rows(labels, meta, exact, mc, n_boot=cfg.fidelity.bootstrap, seed=cfg.fidelity.bootstrap_seed)
    out = Path(out_dir)
    write_jsonl_atomic(out / "records.jsonl", records)
    write_fidelity(table, out, cfg)
    if metrics:
        write_snr(snr_rows([(label, read_jsonl(path)) for label, path in metrics]), out)
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.studies.fidelity_run",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--train", required=True, help="training prompts JSONL (the RL loop's)")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--row", nargs=4, action="append", required=True,
                        metavar=("LABEL", "PRESET", "MODEL_DIR", "SEED"))
    parser.add_argument("--metrics", nargs=2, action="append", default=[], metavar=("LABEL", "METRICS_JSONL"),
                        help="a run's metrics.jsonl for the gradient signal-to-noise table")
    args = parser.parse_args(argv)
    cfg = load_config(args.config)
    table = run(cfg, [(a, b, c, int(d)) for a, b, c, d in args.row], train_path=args.train,
                out_dir=args.out_dir, metrics=[tuple(m) for m in args.metrics])
    for r in table:
        print(f"{r['label']}: rho {r['rho']}, decisive share {r['decisive_share']}, overlap {r['overlap']} "
              f"({r['n_responses']} responses)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
