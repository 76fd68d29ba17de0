"""Speed benchmark of the presets: the same training steps, from the same model and prompts, per preset.

Every round runs one fresh training step of every preset from the same SFT model and the same prompts
(seed = round), so all presets sample the same rollout in a round. Fairness:

- the preset order rotates every round (no preset is always first);
- the round's rollout is sampled and graded once, untimed, before the round, so every preset grades
  against a warm grader cache (``evaluation.grading`` memoises answer normalisation);
- ``dapo_control`` is ``dapo`` under another name (identical work): its ratio is the noise floor.

Prints, per preset, ``step_ratio_vs_dapo <preset> <ratio> spread <p25>-<p75> min-max <lo>-<hi> n <rounds>``:
the median over rounds of (preset step time / dapo step time of the same round), then the per-phase
medians. The machine's load changes within a run; ratios measured in the same round are what counts.

Workloads. By default the completions are the SFT model's own (~20 tokens of reasoning). ``--force-length``
suppresses EOS: the model still answers within ~20 tokens and then writes *padding after the answer* up to
``--max-new-tokens``, which CF never re-scores (spans and answer sit at the start), so it does not measure CF
at that length. ``--reasoning-tokens L`` does: every completion is L tokens of real reasoning (the task's own
worked solutions: other problems' chains, then the prompt's own), then ``\boxed{}`` and EOS; half of each
group boxes the gold answer, half gold + 1 (rewards 1/0, so every group has advantages ±1). The rollout phase
still samples L + 16 tokens per completion with the policy (EOS suppressed), so generation is timed at that
length; the sampled text is then replaced by the constructed one. For CF the bench also prints
``cf_credit_floor_ratio`` = credit-phase seconds / (the query tokens CF must re-score ÷ the tokens per second
of a no-grad forward of the same batch), the query tokens the re-scoring forwards actually ran
(``rescoring.WORK``) and the reference's (1 + n_spans) × sequence length; ``cf_w<W>`` (CF with a bounded suffix
window, approximate) prints the same lines against exact CF's floor, and ``--cf-windows`` its fidelity.

    python -m training.bench                                   # default: tiny model, a few minutes on 2 CPU cores
    python -m training.bench --presets dapo,dapo_control,delta,cf --reasoning-tokens 256   # CF at 256 tokens
    python -m training.bench --presets dapo,cf,cf_w16 --reasoning-tokens 256 --cf-windows 0,16,64  # approximate CF
    python -m training.bench --max-new-tokens 256 --force-length   # padding after the answer up to 256 tokens
    python -m training.bench --group-sizes 4,8,16               # group-size sweep
    python -m training.bench --trl                              # + step_ratio_trl_vs_native (TRL GRPOTrainer, dapo)
    python -m training.bench --steps 0 --trl --trl-rounds 4 --model <SmolLM2 dir>   # only the TRL comparison
    python -m training.bench --model results/default/models/sft --device cuda --hidden 512 --layers 8

Without ``--model`` the model is built and warm-started by a short SFT (``--sft-steps``) on the synthetic
task first: an untrained model's rollouts run to the length limit and are dominated by noise.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
import yaml

from common.config import load_config
from common.io import read_jsonl, write_jsonl_atomic
from evaluation.generation.hf import sample_hf
from evaluation.grading import reward
from training import data, model, sft
from training.credit import rescoring
from training.credit.cf import cf_spans
from training.phases import (
    REWARD_WORKERS,
    forward_logp,
    grade_rollout,
    sample_prompts,
    sample_rollout,
    shape_rewards,
)
from training.presets import PRESETS, Preset, distinct, get_preset
from training.rl import train

CONTROL = "dapo_control"
PHASE_COLUMNS = ("rollout", "reward", "old_logp", "credit", "update", "total")


def forced_length_sampler(model_, tokenizer, prompt_ids, prompt_mask, **kw) -> torch.Tensor:
    """``sample_hf`` with EOS suppressed until ``max_new_tokens``: every completion has the full length."""
    config = model_.generation_config
    saved = config.min_new_tokens
    config.min_new_tokens = kw["max_new_tokens"]
    try:
        return sample_hf(model_, tokenizer, prompt_ids, prompt_mask, **kw)
    finally:
        config.min_new_tokens = saved


ANSWER_BUDGET = 16
"""Tokens sampled per completion beyond ``--reasoning-tokens`` (the boxed answer and EOS)."""


def reasoning_ids(tokenizer, problem: dict, pool: list[dict], length: int, rng: random.Random) -> list[int]:
    """``length`` token ids of synthetic-task reasoning: worked chains of problems drawn from ``pool``, then
    ``problem``'s own (its solution before ``\\boxed{``), cut at the front to exactly ``length`` tokens."""
    own = problem["solution"].split(" \\boxed{")[0]
    parts = [own]
    while True:
        ids = tokenizer.encode("".join(parts), add_special_tokens=False)
        if len(ids) >= length:
            return ids[-length:]
        parts.insert(0, rng.choice(pool)["solution"].split(" \\boxed{")[0])


def reasoning_sampler(problems: list[dict], length: int):
    """A sampler (``sample_rollout``'s) whose completions are ``length`` tokens of reasoning + a boxed answer:
    gold for even group members, gold + 1 for odd ones, then EOS. It first samples the same number of tokens
    with the policy (EOS suppressed), so the rollout phase costs what generating them costs."""
    by_prompt = {p["prompt"]: p for p in problems}

    def sample(model_, tokenizer, prompt_ids, prompt_mask, **kw) -> torch.Tensor:
        drawn = forced_length_sampler(model_, tokenizer, prompt_ids, prompt_mask, **kw)  # [B*n, R], timed
        rng = random.Random(kw["generator_seed"])
        rows = []
        for text in tokenizer.batch_decode(prompt_ids, skip_special_tokens=True):
            if text not in by_prompt:
                raise ValueError(f"bench: prompt {text[:40]!r}... is not in the training prompts")
            problem = by_prompt[text]
            for j in range(kw["n"]):
                answer = problem["answer"] if j % 2 == 0 else str(int(problem["answer"]) + 1)
                rows.append(reasoning_ids(tokenizer, problem, problems, length, rng)
                            + tokenizer.encode(f" \\boxed{{{answer}}}", add_special_tokens=False)
                            + [tokenizer.eos_token_id])
        width = max(drawn.shape[1], max(map(len, rows)))
        out = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
        for i, ids in enumerate(rows):
            out[i, : len(ids)] = torch.tensor(ids)
        return out

    return sample


WINDOW_PREFIX = "cf_w"
"""``cf_w<W>``: CF with ``suffix_window=W`` (approximate, CF departure 17)."""


def bench_preset(name: str) -> Preset:
    """A preset by name; ``dapo_control`` is ``dapo`` renamed (identical work), ``cf_w<W>`` CF with a bounded
    suffix window of W tokens."""
    if name.startswith(WINDOW_PREFIX) and name[len(WINDOW_PREFIX):].isdigit():
        cf = get_preset("cf")
        return replace(cf, name=name, knobs={**cf.knobs, "suffix_window": int(name[len(WINDOW_PREFIX):])})
    return replace(get_preset("dapo"), name=CONTROL) if name == CONTROL else get_preset(name)


def rotated(names: list[str], k: int) -> list[str]:
    """The preset order of round ``k``: ``names`` rotated by k."""
    k %= len(names)
    return names[k:] + names[:k]


def paired_ratios(times: dict[str, list[dict]], name: str, base: str = "dapo") -> list[float]:
    """Per-round ratios of ``name``'s step time to ``base``'s in the same round."""
    return [t["total"] / b["total"] for t, b in zip(times[name], times[base])]


def ratio_line(label: str, ratios: list[float]) -> str:
    q = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else [ratios[0]] * 3
    return (f"{label} {statistics.median(ratios):.3f} spread {q[0]:.3f}-{q[2]:.3f} "
            f"min-max {min(ratios):.3f}-{max(ratios):.3f} n {len(ratios)}")


def warm_grader(cfg, model_dir: str, train_path: str, seed: int, sampler):
    """Sample and grade the round's rollout once (untimed): every preset then grades it warm. Returns CF's
    work on it (:func:`cf_work`) and a function timing a no-grad forward of it (:func:`forward_speed`)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    policy = AutoModelForCausalLM.from_pretrained(model_dir).to(cfg.runtime.device)
    ro = sample_rollout(policy, tok, read_jsonl(train_path), cfg.rl, seed=seed, step=0, sampler=sampler)
    ro = grade_rollout(ro, tok, timeout_s=cfg.eval.grader_timeout_s)
    return cf_work(tok, ro, cfg.rl.max_new_tokens), lambda: forward_speed(policy, ro)


def forward_speed(policy, ro, reps: int = 2) -> float:
    """Tokens per second of the trainer's no-grad forward (``rl.forward_logp``) of the whole batch:
    B x (P + R) / the median of ``reps`` runs."""
    seconds = []
    with torch.no_grad():
        for _ in range(reps):
            t0 = time.perf_counter()
            forward_logp(policy, ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask)
            seconds.append(time.perf_counter() - t0)
    return (ro.prompt_ids.numel() + ro.response_ids.numel()) / statistics.median(seconds)


def cf_work(tokenizer, ro, max_new_tokens: int) -> dict:
    """CF's re-scoring work on a graded rollout.

    ``needed``: query tokens CF must run, sum over distinct completions it scores (A != 0, spans, answer
    tokens) of sum over spans of (valid length - span start): every position from a span on depends on it.
    ``reference``: (1 + n_spans) x (prompt + valid length) per such completion (aligntune re-runs whole
    sequences)."""
    preset = get_preset("cf")
    knobs = preset.knobs
    _, adv, mask = shape_rewards(preset, ro, max_new_tokens)
    eos = tokenizer.eos_token_id
    n_valid = mask.sum(-1).long().tolist()
    seen, needed, reference, spans = set(), 0, 0, []
    for b in range(len(n_valid)):
        resp = tuple(ro.response_ids[b, : n_valid[b]].tolist())
        key = (tuple(ro.prompt_ids[b][ro.prompt_mask[b] > 0].tolist()), resp)
        if key in seen:
            continue
        seen.add(key)
        sp = cf_spans(resp, tokenizer, stop_ids=[tokenizer.pad_token_id, eos], max_spans=knobs["max_spans"],
                      span_stop=knobs["span_stop"], reasoning_cap=None, answer_marker=knobs["answer_marker"])
        spans.append(len(sp.spans))
        scored = sp.answer_start is not None and sp.answer_start + 1 < n_valid[b]
        if not sp.spans or not scored or (knobs["skip_zero_advantage"] and float(adv[b]) == 0.0):
            continue
        needed += sum(n_valid[b] - s for s, _ in sp.spans)
        reference += (1 + len(sp.spans)) * (int(ro.prompt_mask[b].sum()) + n_valid[b])
    return {"needed": needed, "reference": reference,
            "spans_per_completion": statistics.mean(spans) if spans else 0.0,
            "reasoning_end": statistics.mean(n_valid)}


def window_fidelity(policy, tokenizer, ro, rl, windows: list[int]) -> list[str]:
    """CF with ``suffix_window`` W against exact CF on one graded rollout (theta = ``policy``), credit phase
    only: per W the credit seconds of both, the mean per-completion Spearman rho of the span drops I(s) and
    of the token weights, and the mean / max |weight difference| over valid tokens."""
    from training.credit.cf import cf_with_spans
    from training.phases import loop_credit_batch, old_forward
    from training.studies.fidelity import spearman

    preset = get_preset("cf")
    _, adv, mask = shape_rewards(preset, ro, rl.max_new_tokens)

    def run(window):
        old = old_forward(policy, ro, rl.micro_batch_size, needs=preset.needs)
        batch = loop_credit_batch(policy, ro, old, tokenizer, rl.micro_batch_size, advantages=adv, loss_mask=mask,
                                  rewards=None, generator=torch.Generator().manual_seed(0))
        t0 = time.perf_counter()
        with torch.no_grad():
            w, records = cf_with_spans(batch, **{**preset.knobs, "suffix_window": window})
        return time.perf_counter() - t0, w, records

    t_exact, w_exact, rec_exact = run(None)
    lines = []
    for window in windows:
        t, w, rec = run(window)
        rows = sorted({r.row for r in rec_exact})
        drops = [spearman([r.drop for r in rec if r.row == b], [r.drop for r in rec_exact if r.row == b])
                 for b in rows]
        weights = [spearman(w[b][mask[b] > 0].tolist(), w_exact[b][mask[b] > 0].tolist()) for b in rows]
        diff = (w - w_exact).abs()[mask > 0]
        lines.append(f"{WINDOW_PREFIX}{window}_fidelity credit_s {t:.3f} exact_credit_s {t_exact:.3f} "
                     f"drop_spearman {statistics.mean(x for x in drops if x is not None):.3f} "
                     f"weight_spearman {statistics.mean(x for x in weights if x is not None):.3f} "
                     f"weight_abs_diff mean {float(diff.mean()):.4f} max {float(diff.max()):.4f} "
                     f"completions {len(rows)}")
    return lines


def window_fidelity_round0(cfg_path: Path, model_dir: str, train_path: str, sampler, windows: list[int]) -> list[str]:
    """:func:`window_fidelity` on round 0's rollout under the starting model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cfg = load_config(cfg_path, {"rl": {"steps": 1}})
    tok = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    policy = AutoModelForCausalLM.from_pretrained(model_dir).to(cfg.runtime.device).eval()
    ro = sample_rollout(policy, tok, read_jsonl(train_path), cfg.rl, seed=0, step=0, sampler=sampler)
    ro = grade_rollout(ro, tok, timeout_s=cfg.eval.grader_timeout_s)
    return window_fidelity(policy, tok, ro, cfg.rl, windows)


def run_rounds(names: list[str], cfg_path: Path, root: Path, model_dir: str, train_path: str, rounds: int,
               sampler, tag: str) -> dict[str, list[dict]]:
    """``rounds`` rounds of one fresh step per preset; returns the phase times per preset per round."""
    times: dict[str, list[dict]] = {n: [] for n in names}
    for k in range(rounds):
        cfg = load_config(cfg_path, {"rl": {"steps": 1}})
        work, speed = warm_grader(cfg, model_dir, train_path, seed=k, sampler=sampler)
        for name in rotated(names, k):
            run = root / "runs" / f"{tag}-{name}-{k}"
            rescoring.WORK.clear()
            before = speed() if name.startswith("cf") else 0.0  # the floor's speed, next to the step (load drifts)
            train(cfg, bench_preset(name), seed=k, sft_dir=model_dir, train_path=train_path, run_dir=str(run),
                  sampler=sampler)
            tokens_per_s = (before + speed()) / 2 if name.startswith("cf") else 0.0
            times[name].append(json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["time"])
            times[name][-1].update({f"work_{key}": v for key, v in {**work, **rescoring.WORK}.items()},
                                   work_tokens_per_s=tokens_per_s)
    return times


def cf_lines(times: list[dict], dapo: list[dict], name: str = "cf") -> list[str]:
    """CF's credit phase against its floor (:func:`cf_work`) and the query tokens it ran, per round; and
    ``cf_step_floor_vs_dapo`` = 1 + floor / DAPO's step of the round: the step ratio an exact CF would reach
    if its credit phase cost only the floor and every other phase DAPO's."""
    floor = [t["work_needed"] / t["work_tokens_per_s"] for t in times]
    if not any(f > 0 for f in floor):
        return [f"{name}_credit_floor_ratio n/a (no completion to re-score)"]
    lines = [ratio_line(f"{name}_credit_floor_ratio", [t["credit"] / f for t, f in zip(times, floor) if f > 0]),
             ratio_line(f"{name}_step_floor_vs_dapo", [1 + f / d["total"] for f, d in zip(floor, dapo)])]
    med = {key: statistics.median(t.get(f"work_{key}", 0) for t in times)
           for key in ("needed", "query_tokens", "logit_tokens", "forwards", "reference", "spans_per_completion",
                       "reasoning_end", "tokens_per_s")}
    lines.append(f"{name}_query_tokens needed {med['needed']:.0f} ran {med['query_tokens']:.0f} "
                 f"logits {med['logit_tokens']:.0f} forwards {med['forwards']:.0f} "
                 f"reference (1+n_spans)x(P+L) {med['reference']:.0f} (medians per step)")
    lines.append(f"{name}_workload spans_per_completion {med['spans_per_completion']:.1f} "
                 f"mean_completion_tokens {med['reasoning_end']:.1f} no_grad_forward_tokens_per_s "
                 f"{med['tokens_per_s']:.0f} floor_s {statistics.median(floor):.3f} "
                 f"credit_s {statistics.median(t['credit'] for t in times):.3f}")
    return lines


def report(names: list[str], times: dict[str, list[dict]], suffix: str = "") -> None:
    for name in names:
        print(ratio_line(f"step_ratio_vs_dapo {name}", paired_ratios(times, name)) + suffix)
    print(f"{'preset':<16}" + "".join(f"{p:>10}" for p in PHASE_COLUMNS))
    for name in names:
        med = {p: statistics.median(t[p] for t in times[name]) for p in PHASE_COLUMNS}
        print(f"{name:<16}" + "".join(f"{med[p]:>10.3f}" for p in PHASE_COLUMNS))
    for name in (n for n in names if n.startswith("cf")):
        print("\n".join(cf_lines(times[name], times["dapo"], name)))


def trl_vs_native(cfg_path: Path, root: Path, model_dir: str, train_path: str,
                  rounds: int) -> tuple[list[float], dict[str, list[dict]]]:
    """Per-round ratios of a TRL ``GRPOTrainer`` step (the adapter, ``loss_type="dapo"``) to the native
    DAPO step, and both sides' metrics rows per round. Same work on both sides: the same model, group
    size and completion length; the same prompts (each round both train on a file of exactly the native
    step's ``prompts_per_step`` prompts, so TRL's sampler draws the same set); no per-step diagnostic that
    TRL does not compute (``fidelity.grad_snr`` off); the grader's workers started before the rounds; TRL's
    step timed with its optimizer step (``trl_backend``: the Trainer steps the optimizer outside
    ``training_step``). The sampled tokens still differ (each side's own RNG): :func:`trl_lines` prints the
    tokens each generated and trained."""
    from training.trl_backend import train_trl

    ratios, rows = [], {"native": [], "trl": []}
    problems = read_jsonl(train_path)
    overrides = {"rl": {"steps": 1}, "fidelity": {"grad_snr": False}}
    warm = problems[:8]  # start the grader's workers untimed: else the first step to grade pays it (~1 min at load 25)
    reward([f"\\boxed{{{p['answer']}}}" for p in warm], [p["answer"] for p in warm],
           timeout_s=load_config(cfg_path, overrides).eval.grader_timeout_s, workers=REWARD_WORKERS)
    for k in range(rounds):
        native_cfg = load_config(cfg_path, overrides)
        trl_cfg = load_config(cfg_path, {**overrides, "backend": "trl"})
        prompts = root / f"trl-prompts-{k}.jsonl"
        write_jsonl_atomic(prompts, sample_prompts(problems, native_cfg.rl.prompts_per_step, seed=k, step=0))
        out = {}
        for backend, cfg in (("native", native_cfg), ("trl", trl_cfg))[:: 1 if k % 2 == 0 else -1]:
            run = root / "runs" / f"trl-{backend}-{k}"
            runner = train if backend == "native" else train_trl
            runner(cfg, get_preset("dapo"), seed=k, sft_dir=model_dir, train_path=str(prompts), run_dir=str(run))
            out[backend] = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
            rows[backend].append(out[backend])
        ratios.append(out["trl"]["time"]["total"] / out["native"]["time"]["total"])
    return ratios, rows


def per_token_ratios(rows: dict[str, list[dict]], tokens: str, phase: str = "total") -> list[float]:
    """Per round, TRL's seconds of ``phase`` per token of ``tokens`` (generated or trained) over native's:
    the step ratio with each side's own work divided out (each side samples with its own RNG, so their
    responses differ in length). Rounds where a side has no such token are left out."""
    return [(t["time"][phase] / t[tokens]) / (n["time"][phase] / n[tokens])
            for n, t in zip(rows["native"], rows["trl"]) if n[tokens] > 0 and t[tokens] > 0 and n["time"][phase] > 0]


def trl_lines(rows: dict[str, list[dict]]) -> list[str]:
    """Both backends' median phase seconds and work per step (tokens generated and trained, mean response
    length): the step ratio compares equal work only where these agree, so the per-token ratios follow
    (``trained_token_ratio_trl_vs_native``: whole step per trained token; ``generated_token_ratio``: the
    rollout phase per generated token); > 1 means native is faster."""
    lines = []
    for label, tokens, phase in (("trained_token_ratio_trl_vs_native", "tokens_trained", "total"),
                                 ("generated_token_ratio_trl_vs_native", "tokens_generated", "rollout")):
        ratios = per_token_ratios(rows, tokens, phase)
        lines.append(ratio_line(label, ratios) if ratios else f"{label} n/a (no {tokens.split('_')[1]} token)")
    lines.append(f"{'backend':<16}" + "".join(f"{p:>10}" for p in (*PHASE_COLUMNS[:-1], "checkpoint", "total")))
    for backend, rs in rows.items():
        med = {p: statistics.median(r["time"][p] for r in rs) for p in (*PHASE_COLUMNS[:-1], "checkpoint", "total")}
        lines.append(f"{backend:<16}" + "".join(f"{v:>10.3f}" for v in med.values()))
    for backend, rs in rows.items():
        work = {key: "/".join(f"{r[key]:g}" for r in rs) for key in ("tokens_generated", "tokens_trained",
                                                                      "response_length")}
        lines.append(f"trl_vs_native_work {backend} " + " ".join(f"{k} {v}" for k, v in work.items()) + " (per round)")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default=",".join(["dapo", CONTROL, *distinct()]),
                        help="comma-separated presets (default: every method once, presets.distinct)")
    parser.add_argument("--steps", type=int, default=6, help="rounds (one step of every preset each; 0: none)")
    parser.add_argument("--trl-rounds", type=int, help="--trl's rounds (one step of each backend; default: "
                                                       "max(2, steps // 2))")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--group-sizes", default="", help="comma-separated group sizes to sweep (overrides --group)")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--force-length", action="store_true",
                        help="no stop at EOS: every completion is full length (padding after the answer)")
    parser.add_argument("--reasoning-tokens", type=int, default=0,
                        help="L > 0: completions of L tokens of real reasoning + boxed answer (CF at length L)")
    parser.add_argument("--cf-windows", default="",
                        help="comma-separated W: CF with suffix_window W vs exact CF on round 0's rollout (fidelity)")
    parser.add_argument("--trl", action="store_true", help="also print step_ratio_trl_vs_native")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", help="existing HF model folder (e.g. an SFT checkpoint) instead of a fresh one")
    parser.add_argument("--sft-steps", type=int, default=200, help="warm start of the fresh model (no --model)")
    args = parser.parse_args(argv)
    requested = [n for n in args.presets.split(",") if n]
    names = [n for n in requested if n in PRESETS or n == CONTROL
             or (n.startswith(WINDOW_PREFIX) and n[len(WINDOW_PREFIX):].isdigit())]
    if missing := [n for n in requested if n not in names]:
        print(f"skipping unknown presets {missing}; valid: {sorted(PRESETS)}, {CONTROL} and {WINDOW_PREFIX}<W>")
    if "dapo" not in names:
        names.insert(0, "dapo")
    groups = [int(g) for g in args.group_sizes.split(",") if g] or [args.group]
    sampler = forced_length_sampler if args.force_length else sample_hf
    if args.reasoning_tokens > 0:
        args.max_new_tokens = args.reasoning_tokens + ANSWER_BUDGET
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir = args.model or str(root / "sft")
        train_path = root / "train.jsonl"
        for gi, group in enumerate(groups):
            raw = {"experiment": "bench", "output_dir": str(root), "seeds": [0], "methods": ["dapo"],
                   "task": {"n_train": 500, "n_heldout": 10},
                   "model": {"hidden_size": args.hidden, "num_layers": args.layers,
                             "max_position": max(256, 2 * args.max_new_tokens)},
                   "sft": {"steps": args.sft_steps},
                   "rl": {"steps": 1, "prompts_per_step": args.prompts, "group_size": group,
                          "micro_batch_size": args.prompts * group, "max_new_tokens": args.max_new_tokens,
                          "checkpoint_every": 10_000, "log_token_weights": 0},
                   "runtime": {"device": args.device}}
            cfg_path = root / f"config-g{group}.yaml"
            cfg_path.write_text(yaml.safe_dump(raw))
            if gi == 0:
                data.main(["--config", str(cfg_path), "--train", str(train_path), "--heldout",
                           str(root / "h.jsonl"), "--manifest", str(root / "m.json")])
                if not args.model:
                    model.main(["--config", str(cfg_path), "--train", str(train_path), "--out", str(root / "init")])
                    sft.main(["--config", str(cfg_path), "--model", str(root / "init"), "--train", str(train_path),
                              "--out", model_dir, "--metrics", str(root / "sft.jsonl")])
                if args.reasoning_tokens > 0:
                    sampler = reasoning_sampler(read_jsonl(train_path), args.reasoning_tokens)
            if args.steps > 0:  # --steps 0: no preset rounds (only --trl's or --cf-windows' lines)
                times = run_rounds(names, cfg_path, root, model_dir, str(train_path), args.steps, sampler, f"g{group}")
                suffix = (f" group {group} max_new_tokens {args.max_new_tokens}"
                          f"{' force_length' if args.force_length else ''}"
                          f"{f' reasoning_tokens {args.reasoning_tokens}' if args.reasoning_tokens else ''}")
                report(names, times, suffix if len(groups) > 1 or args.force_length or args.reasoning_tokens else "")
            if args.cf_windows and gi == 0:
                print("\n".join(window_fidelity_round0(cfg_path, model_dir, str(train_path), sampler,
                                                        [int(w) for w in args.cf_windows.split(",") if w])))
            if args.trl and (args.force_length or args.reasoning_tokens):
                print("step_ratio_trl_vs_native skipped: TRL samples with its own generate "
                      "(no --force-length / --reasoning-tokens)")
            elif args.trl and gi == 0:
                ratios, rows = trl_vs_native(cfg_path, root, model_dir, str(train_path),
                                             args.trl_rounds or max(2, args.steps // 2))
                print(ratio_line("step_ratio_trl_vs_native", ratios))
                print("\n".join(trl_lines(rows)))


if __name__ == "__main__":
    main()
