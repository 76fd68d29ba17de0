"""Supervised warm start on the synthetic task's worked solutions (loss on solution tokens only).

One checkpoint shared by every RL method, so differences between methods come from RL alone.
The budget is set in optimizer steps (not seconds) so that it is the same on every machine.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch
from tqdm import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer

from common.config import load_config
from common.io import read_jsonl
from common.manifest import write_manifest
from common.runtime import seed_everything, setup_runtime
from training.checkpoint import save_hf_atomic


def encode_examples(tokenizer, rows: list[dict]) -> list[tuple[list[int], int]]:
    """(token ids of prompt + solution + eos, number of prompt tokens) per row."""
    out = []
    for r in rows:
        prompt = tokenizer(r["prompt"], add_special_tokens=False)["input_ids"]
        solution = tokenizer(r["solution"], add_special_tokens=False)["input_ids"]
        out.append((prompt + solution + [tokenizer.eos_token_id], len(prompt)))
    return out


def collate(examples: list[tuple[list[int], int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded input ids, attention mask and labels (-100 on prompt and padding)."""
    width = max(len(ids) for ids, _ in examples)
    input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(examples), width), dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    for i, (ids, n_prompt) in enumerate(examples):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        attention[i, : len(ids)] = 1
        labels[i, n_prompt : len(ids)] = torch.tensor(ids[n_prompt:])
    return input_ids, attention, labels


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--model", required=True, help="initial HF model folder")
    parser.add_argument("--train", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--metrics", required=True, help="JSONL of loss per step")
    args = parser.parse_args(argv)
    cfg = load_config(args.config)
    device = setup_runtime(cfg.runtime)
    seed_everything(cfg.sft.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model).to(device)
    # steps 0 (the real recipes: RL from the given model) copies the model; real prompts have no solutions
    examples = encode_examples(tokenizer, read_jsonl(args.train)) if cfg.sft.steps else []
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.sft.lr, weight_decay=cfg.sft.weight_decay)
    steps, warm = cfg.sft.steps, cfg.sft.warmup_steps
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(warm, 1)) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / max(steps, 1)))
    )
    gen = torch.Generator().manual_seed(cfg.sft.seed)
    order = torch.randperm(len(examples), generator=gen).tolist()
    cursor, log = 0, []
    model.train()
    t0 = time.perf_counter()
    for step in tqdm(range(steps), desc="sft", mininterval=5):
        if cursor + cfg.sft.batch_size > len(order):
            order, cursor = torch.randperm(len(examples), generator=gen).tolist(), 0
        batch = [examples[i] for i in order[cursor : cursor + cfg.sft.batch_size]]
        cursor += cfg.sft.batch_size
        input_ids, attention, labels = (t.to(device) for t in collate(batch, tokenizer.pad_token_id))
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        log.append({"step": step, "loss": float(loss), "lr": sched.get_last_lr()[0]})
    seconds = time.perf_counter() - t0
    save_hf_atomic(model, tokenizer, args.out)
    with open(args.metrics, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in log)
    write_manifest(args.out + "/manifest.json", cfg, seeds={"sft": cfg.sft.seed},
                   data_files={"train": args.train}, extra={"stage": "sft", "seconds": seconds})
    print(f"sft: {steps} steps in {seconds:.1f}s, final loss {log[-1]['loss'] if log else float('nan'):.4f}")


if __name__ == "__main__":
    main()
