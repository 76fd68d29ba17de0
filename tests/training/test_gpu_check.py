"""``python -m training.gpu_check``: without CUDA (or vLLM) it exits 0 with one line naming what it skipped;
the GPU-size recipe it would train is a valid config (backend trl, vLLM colocate, one GPU) that plans; ``--cpu``
runs the whole script (generation, TRL steps of every preset, the summary) on the tiny model."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch

from training import gpu_check
from training.plan import make_plan


@pytest.mark.skipif(torch.cuda.is_available() and gpu_check.skip_reason() is None,
                    reason="CUDA and vLLM are present: the check would run for real (minutes)")
def test_without_cuda_or_vllm_the_command_exits_0_with_one_line(tmp_path):
    out = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, "-m", "training.gpu_check", "--out", str(out)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_check: skipped")
    assert "dapo, delta, cf" in lines[0] and gpu_check.skip_reason() in lines[0]
    assert not out.exists()


def test_the_gpu_recipe_is_a_valid_config_that_fits_one_80gb_gpu(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text('{"num_hidden_layers": 30, "hidden_size": 576, "intermediate_size": 1536, '
                                       '"num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152, '
                                       '"tie_word_embeddings": true, "max_position_embeddings": 8192}')
    cfg = gpu_check.gpu_config(str(model), str(tmp_path / "out"), steps=3)
    assert cfg.backend == "trl" and cfg.scale.vllm.mode == "colocate" and cfg.scale.world_size == 1
    assert tuple(cfg.methods) == gpu_check.PRESETS and cfg.rl.steps == 3
    plan = make_plan(cfg, gpu_mem_gb=80.0, gpu_type="H100")
    assert not plan.problems, plan.problems


def test_cpu_rehearsal_runs_every_step_of_the_script_and_writes_the_summary(tiny_env, tmp_path):
    from transformers import AutoTokenizer

    model = tmp_path / "tiny_chat"
    shutil.copytree(tiny_env["model"], model)
    tok = AutoTokenizer.from_pretrained(model)  # chat_boxed needs a chat template; the tiny tokenizer has none
    tok.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
                         "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    tok.save_pretrained(model)
    out = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, "-m", "training.gpu_check", "--cpu", "--model", str(model), "--steps", "1",
                           "--prompts", "2", "--max-new-tokens", "8", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(out.read_text())
    assert summary["mode"] == "cpu rehearsal" and summary["gpu"] is None and summary["versions"]["trl"]
    gen = summary["generation"]
    assert gen["n"] == 2 and set(gen["accuracy"]) == {"hf"} and gen["verdict_agreement"] is None
    assert gen["vllm"].startswith("skipped")
    assert set(summary["training"]) == set(gpu_check.PRESETS)
    for name, run in summary["training"].items():
        assert len(run["step_seconds"]) == 1 and run["step_seconds"][0] > 0, name
        assert run["peak_rss_mb"] > 0 and run["peak_gpu_mb"] == 0.0, name
