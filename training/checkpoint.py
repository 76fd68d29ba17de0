"""Checkpoints: HF-format model folders and resumable trainer state, both written atomically.

A checkpoint folder is fully written under a temporary name, then moved into place, so a killed run
leaves either the previous checkpoint or the new one. The resume state (optimizer, RNG, step) sits in
``state.pt`` inside the same folder as the weights, so both always belong to the same step.

The RL trainer writes its checkpoints under ``<run>/resume/`` (no rule output: Snakemake never removes
it) and publishes each one into the rule's ``checkpoints/step<N>`` output (:func:`publish_checkpoint`),
so a job killed and rerun with ``--rerun-incomplete`` resumes from its last checkpoint.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from common.io import read_jsonl, replace_dir_atomic, write_text_atomic


def save_hf_atomic(model, tokenizer, out_dir: str | Path, extra_state: dict[str, Any] | None = None) -> None:
    """``save_pretrained`` model + tokenizer into ``out_dir`` atomically (plus ``state.pt`` if given)."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.tmp"))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if extra_state is not None:
            torch.save(extra_state, tmp / "state.pt")
        replace_dir_atomic(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def rng_state(generator: torch.Generator) -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "generator": generator.get_state(),
    }


def restore_rng_state(state: dict[str, Any], generator: torch.Generator) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    generator.set_state(state["generator"])


def step_dirs(root: str | Path) -> list[tuple[int, Path]]:
    """``(N, root/step<N>)`` for every checkpoint folder of ``root`` holding a resume state, by step."""
    return sorted((int(p.name[4:]), p) for p in Path(root).glob("step*")
                  if p.name[4:].isdigit() and (p / "state.pt").exists())


def truncate_metrics(metrics_path: str | Path, step: int) -> list[dict]:
    """Keep only the rows of steps before ``step`` (the ones the resumed checkpoint has seen), so a resumed
    run's metrics equal an uninterrupted run's; a torn last line from the kill is dropped. Returns the kept rows."""
    path = Path(metrics_path)
    rows = [r for r in read_jsonl(path, drop_torn_tail=True) if r["step"] < step] if path.exists() else []
    write_text_atomic(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return rows


def publish_checkpoint(src: str | Path, dst: str | Path) -> None:
    """Make ``dst`` (a rule's ``directory()`` output) a copy of the resume checkpoint ``src``, atomically.

    Files are hard links (a copy where the file system refuses): the weights are stored once, and when
    Snakemake removes the outputs of a killed job the resume checkpoint outside them keeps its files."""
    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dst.parent, prefix=f".{dst.name}.tmp"))
    try:
        for f in src.rglob("*"):
            target = tmp / f.relative_to(src)
            if f.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(f, target)
            except OSError:
                shutil.copy2(f, target)
        replace_dir_atomic(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def trainable_parameters(model, top_layers: int | None) -> list:
    """The parameters RL updates: all of them (``rl.train_top_layers`` null, the papers' setting), else only
    the top ``top_layers`` decoder blocks and the final norm; the embeddings (tied LM head included) and the
    lower blocks are frozen (``requires_grad`` False), so the backward pass and its stored activations stop
    at the first trained block. A CPU-budget departure (training/ALGORITHMS.md), not part of any method."""
    if top_layers is None:
        return list(model.parameters())
    layers = model.model.layers
    if not 1 <= top_layers <= len(layers):
        raise ValueError(f"config key 'rl/train_top_layers': {top_layers} not in 1..{len(layers)} (the model's blocks)")
    model.requires_grad_(False)
    for block in list(layers)[len(layers) - top_layers:]:
        block.requires_grad_(True)
    model.model.norm.requires_grad_(True)
    return [p for p in model.parameters() if p.requires_grad]
