"""real_cpu (issue 24) in the DAG: a dry run lists the four methods, credit analysis on real text and the
before/after evaluation; the trl_cpu2 overlay launches rule rl as two gloo processes under torchrun."""

from __future__ import annotations

import pytest
from test_real_eval_dag import EXPERIMENTS, REPO, job_counts, resolved, snakemake

from common.config import ConfigError, config_from_dict
from training.launch import launch_prefix

OVERLAY = REPO / "config" / "overlays" / "trl_cpu2.yaml"


def test_real_cpu_dry_run_has_every_method_credit_analysis_and_real_eval(tmp_path):
    text = snakemake(tmp_path, "-n", "-p", "--configfile", str(EXPERIMENTS / "real_cpu.yaml"))
    jobs = job_counts(text)
    assert jobs["rl"] == 4 and jobs["credit_analysis"] == 1 and jobs["real_generate"] == 5  # SFT + 4 finals
    assert "-m training.prepare_data" in text and "accelerate" not in text
    raw = resolved(tmp_path, EXPERIMENTS / "real_cpu.yaml")
    assert raw["train_data"]["dataset"] == "gsm8k_train" and raw["real_eval"]["subset_seed"] == 0


def test_trl_cpu2_overlay_launches_two_gloo_processes_from_the_rule(tmp_path):
    text = snakemake(tmp_path, "-n", "-p", "--configfile", str(EXPERIMENTS / "real_cpu.yaml"), str(OVERLAY))
    rl = [line for line in text.splitlines() if "-m training.rl" in line]
    assert len(rl) == 4 and all("-m torch.distributed.run --standalone --nproc_per_node 2" in line for line in rl)
    cfg = config_from_dict(resolved(tmp_path, EXPERIMENTS / "real_cpu.yaml", OVERLAY))
    assert cfg.backend == "trl" and cfg.scale.world_size == 2
    assert launch_prefix(cfg) == "torchrun --standalone --nproc_per_node 2"


def test_cpu_processes_need_backend_trl_on_cpu(tmp_path):
    raw = resolved(tmp_path, EXPERIMENTS / "real_cpu.yaml")
    with pytest.raises(ConfigError, match="scale/cpu_processes"):
        config_from_dict({**raw, "scale": {**raw["scale"], "cpu_processes": 2}})  # backend native
    with pytest.raises(ConfigError, match="scale/cpu_processes"):
        config_from_dict({**raw, "backend": "trl", "scale": {**raw["scale"], "cpu_processes": 2, "gpus_per_node": 1}})
