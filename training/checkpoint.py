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

from common.io import read_jsonl, replace_dir_atomic, write_jsonl_atomic, write_text_atomic


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


def resume_checkpoint(resume_root: Path, metrics: Path) -> Path | None:
    """The latest ``step<N>`` of ``resume_root`` whose metrics rows 0..N-1 were all logged (a kill between
    the checkpoint and its row falls back one checkpoint), or None."""
    rows = read_jsonl(metrics, drop_torn_tail=True) if metrics.exists() else []
    logged = {r["step"] for r in rows}
    return next((p for n, p in reversed(step_dirs(resume_root)) if set(range(n)) <= logged), None)


def open_run(run: Path, digest: str, label: str) -> tuple[Path | None, dict[str, Any] | None, float]:
    """The native loop's resume (``training.rl``): ``(checkpoint folder, its state, wall-clock offset)`` of a
    killed run of the same config, or ``(None, None, 0.0)`` for a fresh start. Resume checkpoints live in
    ``run/resume/`` (outside the rule's outputs, which Snakemake removes for a killed job) with a copy of the
    metrics; resuming truncates the metrics to the resumed step and re-publishes ``checkpoints/step<N>``; a
    state written under another config (``digest``) is discarded."""
    resume_root, metrics = run / "resume", run / "metrics.jsonl"
    resume_metrics = resume_root / "metrics.jsonl"
    resume = resume_checkpoint(resume_root, resume_metrics)
    state = torch.load(resume / "state.pt", weights_only=False) if resume is not None else None
    if state is not None and state.get("config") != digest:
        print(f"discarding the resume state in {resume_root}: written under another config")
        shutil.rmtree(resume_root)
        resume = state = None
    wall_offset = 0.0
    if state is not None:
        rows = truncate_metrics(resume_metrics, state["step"])
        write_jsonl_atomic(metrics, rows)
        wall_offset = rows[-1]["wall_clock"] if rows else 0.0
        for n, step_dir in step_dirs(resume_root):  # outputs Snakemake removed with the killed job
            if n <= state["step"]:
                publish_checkpoint(step_dir, run / "checkpoints" / step_dir.name)
        print(f"resuming {label} from step {state['step']} ({resume})")
    else:
        for p in (metrics, run / "token_weights.jsonl", resume_metrics):
            p.unlink(missing_ok=True)
    resume_root.mkdir(parents=True, exist_ok=True)
    return resume, state, wall_offset


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
