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

    python -m training.bench                                   # default: tiny model, a few minutes on 2 CPU cores
    python -m training.bench --max-new-tokens 256 --force-length   # completions forced to 256 tokens (no EOS stop)
    python -m training.bench --group-sizes 4,8,16               # group-size sweep
    python -m training.bench --trl                              # + step_ratio_trl_vs_native (TRL GRPOTrainer, dapo)
    python -m training.bench --model results/default/models/sft --device cuda --hidden 512 --layers 8

Without ``--model`` the model is built and warm-started by a short SFT (``--sft-steps``) on the synthetic
task first: an untrained model's rollouts run to the length limit and are dominated by noise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

import torch
import yaml

from common.config import load_config
from evaluation.generation.hf import sample_hf
from training import data, model, sft
from training.presets import PRESETS, Preset, get_preset
from training.rl import grade_rollout, sample_rollout, train

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


def bench_preset(name: str) -> Preset:
    """A preset by name; ``dapo_control`` is ``dapo`` renamed (identical work)."""
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


def warm_grader(cfg, model_dir: str, train_path: str, seed: int, sampler) -> None:
    """Sample and grade the round's rollout once (untimed): every preset then grades it warm."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from common.io import read_jsonl

    tok = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    policy = AutoModelForCausalLM.from_pretrained(model_dir).to(cfg.runtime.device)
    ro = sample_rollout(policy, tok, read_jsonl(train_path), cfg.rl, seed=seed, step=0, sampler=sampler)
    grade_rollout(ro, tok, timeout_s=cfg.eval.grader_timeout_s)


def run_rounds(names: list[str], cfg_path: Path, root: Path, model_dir: str, train_path: str, rounds: int,
               sampler, tag: str) -> dict[str, list[dict]]:
    """``rounds`` rounds of one fresh step per preset; returns the phase times per preset per round."""
    times: dict[str, list[dict]] = {n: [] for n in names}
    for k in range(rounds):
        cfg = load_config(cfg_path, {"rl": {"steps": 1}})
        warm_grader(cfg, model_dir, train_path, seed=k, sampler=sampler)
        for name in rotated(names, k):
            run = root / "runs" / f"{tag}-{name}-{k}"
            train(cfg, bench_preset(name), seed=k, sft_dir=model_dir, train_path=train_path, run_dir=str(run),
                  sampler=sampler)
            times[name].append(json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["time"])
    return times


def report(names: list[str], times: dict[str, list[dict]], suffix: str = "") -> None:
    for name in names:
        print(ratio_line(f"step_ratio_vs_dapo {name}", paired_ratios(times, name)) + suffix)
    print(f"{'preset':<16}" + "".join(f"{p:>10}" for p in PHASE_COLUMNS))
    for name in names:
        med = {p: statistics.median(t[p] for t in times[name]) for p in PHASE_COLUMNS}
        print(f"{name:<16}" + "".join(f"{med[p]:>10.3f}" for p in PHASE_COLUMNS))


def trl_vs_native(cfg_path: Path, root: Path, model_dir: str, train_path: str, rounds: int) -> list[float]:
    """Per-round ratios of a TRL ``GRPOTrainer`` step (the adapter, ``loss_type="dapo"``) to the native
    DAPO step, same model, prompts per step, group size and completion length (the TRL step's own phase
    times, as the native ones)."""
    from training.trl_backend import train_trl

    ratios = []
    for k in range(rounds):
        native_cfg = load_config(cfg_path, {"rl": {"steps": 1}})
        trl_cfg = load_config(cfg_path, {"rl": {"steps": 1}, "backend": "trl"})
        out = {}
        for backend, cfg in (("native", native_cfg), ("trl", trl_cfg))[:: 1 if k % 2 == 0 else -1]:
            run = root / "runs" / f"trl-{backend}-{k}"
            runner = train if backend == "native" else train_trl
            runner(cfg, get_preset("dapo"), seed=k, sft_dir=model_dir, train_path=train_path, run_dir=str(run))
            out[backend] = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["time"]["total"]
        ratios.append(out["trl"] / out["native"])
    return ratios


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default=f"dapo,{CONTROL},grpo,delta,cf,forking_tokens,otb,ktae,w_reinforce,"
                                              "clip_cov,kl_cov,gspo,gspo_token,ppo_critic")
    parser.add_argument("--steps", type=int, default=6, help="rounds (one step of every preset each)")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--group-sizes", default="", help="comma-separated group sizes to sweep (overrides --group)")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--force-length", action="store_true", help="no stop at EOS: every completion is full length")
    parser.add_argument("--trl", action="store_true", help="also print step_ratio_trl_vs_native")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", help="existing HF model folder (e.g. an SFT checkpoint) instead of a fresh one")
    parser.add_argument("--sft-steps", type=int, default=200, help="warm start of the fresh model (no --model)")
    args = parser.parse_args(argv)
    requested = [n for n in args.presets.split(",") if n]
    names = [n for n in requested if n in PRESETS or n == CONTROL]
    if missing := [n for n in requested if n not in names]:
        print(f"skipping unknown presets {missing}; valid: {sorted(PRESETS)} and {CONTROL}")
    if "dapo" not in names:
        names.insert(0, "dapo")
    groups = [int(g) for g in args.group_sizes.split(",") if g] or [args.group]
    sampler = forced_length_sampler if args.force_length else sample_hf
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir = args.model or str(root / "sft")
        train_path = root / "train.jsonl"
        for gi, group in enumerate(groups):
            raw = {"experiment": "bench", "output_dir": str(root), "seeds": [0], "methods": ["dapo"],
                   "task": {"n_train": 500, "n_heldout": 10},
                   "model": {"hidden_size": args.hidden, "num_layers": args.layers},
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
            times = run_rounds(names, cfg_path, root, model_dir, str(train_path), args.steps, sampler, f"g{group}")
            suffix = (f" group {group} max_new_tokens {args.max_new_tokens}"
                      f"{' force_length' if args.force_length else ''}")
            report(names, times, suffix if len(groups) > 1 or args.force_length else "")
            if args.trl and args.force_length:
                print("step_ratio_trl_vs_native skipped: TRL samples with its own generate (no --force-length)")
            elif args.trl and gi == 0:
                print(ratio_line("step_ratio_trl_vs_native",
                                 trl_vs_native(cfg_path, root, model_dir, str(train_path), max(2, args.steps // 2))))


if __name__ == "__main__":
    main()
