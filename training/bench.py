"""Speed benchmark of the presets: the same training steps, from the same model and prompts, per preset.

Prints one line per preset, ``step_ratio_vs_dapo <preset> <ratio>`` (median step time over steps,
relative to ``dapo`` measured in the same run), then the per-phase medians (rollout, reward,
old log-probs, credit, update). Presets are run round-robin, one step at a time each, so that a
change in machine load hits every preset alike.

    python -m training.bench                      # default: tiny model, a few minutes on 2 CPU cores
    python -m training.bench --model results/default/models/sft
    python -m training.bench --hidden 512 --layers 8 --prompts 32 --group 8 --device cuda

Without ``--model`` the model is built and warm-started by a short SFT (``--sft-steps``) on the synthetic
task first: an untrained model's rollouts run to the length limit and are dominated by noise, which
made every ratio meaningless (measured: all presets at 0.4-0.5x of the first preset run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import yaml

from training import data, model, sft
from common.config import load_config
from training.presets import PRESETS, get_preset
from training.rl import train


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="dapo,grpo,delta,cf,forking_tokens")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", help="existing HF model folder (e.g. an SFT checkpoint) instead of a fresh one")
    parser.add_argument("--sft-steps", type=int, default=200, help="warm start of the fresh model (no --model)")
    args = parser.parse_args(argv)
    names = [n for n in args.presets.split(",") if n in PRESETS]
    missing = [n for n in args.presets.split(",") if n not in PRESETS]
    if missing:
        print(f"skipping unknown presets {missing}; valid: {sorted(PRESETS)}")
    if "dapo" not in names:
        names.insert(0, "dapo")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        raw = {"experiment": "bench", "output_dir": str(root), "seeds": [0], "methods": names,
               "task": {"n_train": 500, "n_heldout": 10},
               "model": {"hidden_size": args.hidden, "num_layers": args.layers},
               "sft": {"steps": args.sft_steps},
               "rl": {"steps": 1, "prompts_per_step": args.prompts, "group_size": args.group,
                      "micro_batch_size": args.prompts * args.group, "max_new_tokens": args.max_new_tokens,
                      "checkpoint_every": 10_000, "log_token_weights": 0},
               "runtime": {"device": args.device}}
        cfg_path = root / "config.yaml"
        cfg_path.write_text(yaml.safe_dump(raw))
        train_path = root / "train.jsonl"
        data.main(["--config", str(cfg_path), "--train", str(train_path), "--heldout", str(root / "h.jsonl"),
                   "--manifest", str(root / "m.json")])
        model_dir = args.model or str(root / "sft")
        if not args.model:
            model.main(["--config", str(cfg_path), "--train", str(train_path), "--out", str(root / "init")])
            sft.main(["--config", str(cfg_path), "--model", str(root / "init"), "--train", str(train_path),
                      "--out", model_dir, "--metrics", str(root / "sft.jsonl")])
        times: dict[str, list[dict]] = {n: [] for n in names}
        for step in range(args.steps):
            for name in names:
                # one fresh step per preset from the same model and the same prompts (seed, step)
                cfg = load_config(cfg_path, {"rl": {"steps": 1}})
                run = root / "runs" / f"{name}-{step}"
                train(cfg, get_preset(name), seed=step, sft_dir=model_dir, train_path=str(train_path),
                      run_dir=str(run))
                row = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
                times[name].append(row["time"])
    base = statistics.median(t["total"] for t in times["dapo"])
    for name in names:
        ratio = statistics.median(t["total"] for t in times[name]) / base
        print(f"step_ratio_vs_dapo {name} {ratio:.3f}")
    print(f"{'preset':<16}" + "".join(f"{p:>10}" for p in ("rollout", "reward", "old_logp", "credit", "update", "total")))
    for name in names:
        med = {p: statistics.median(t[p] for t in times[name]) for p in times[name][0]}
        print(f"{name:<16}" + "".join(f"{med[p]:>10.3f}" for p in ("rollout", "reward", "old_logp", "credit",
                                                                    "update", "total")))


if __name__ == "__main__":
    main()
