"""training.launch.check_allocation: what a training process sees under SLURM against the plan's layout
(case table; the real jobs are in tests/workflow/test_slurm_cluster.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.config import config_from_dict, load_config
from training.launch import check_allocation, expected_allocation, launch_prefix, slurm_resources

RECIPES = Path(__file__).resolve().parents[2] / "config" / "experiments"


def recipe(name: str, **scale):
    raw = dict(load_config(RECIPES / f"{name}.yaml").raw)
    raw["scale"] = {**raw["scale"], **scale}
    return config_from_dict(raw)


def slurm_env(gpus: str, tasks: int = 1, nodes: int = 1, world: int | None = None) -> dict[str, str]:
    env = {"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": gpus, "SLURM_STEP_NUM_TASKS": str(tasks),
           "SLURM_STEP_NUM_NODES": str(nodes)}
    return env | ({"WORLD_SIZE": str(world)} if world else {})


# recipe overrides, environment, the differences named (None: the plan's layout)
CASES = [
    ({}, slurm_env("0,1,2,3,4,5,6,7", world=8), None),
    ({}, slurm_env("0,1,2,3", world=8), ["GPUs visible (CUDA_VISIBLE_DEVICES='0,1,2,3') 4 != 8"]),
    ({}, slurm_env("0,1,2,3,4,5,6,7", tasks=8, world=8), ["tasks in the job step (launchers) 8 != 1"]),
    ({}, slurm_env("0,1,2,3,4,5,6,7", world=1), ["training processes (WORLD_SIZE) 1 != 8"]),
    ({"nodes": 2}, slurm_env("0,1,2,3,4,5,6,7", tasks=2, nodes=2, world=16), None),
    ({"nodes": 2}, slurm_env("0,1,2,3,4,5,6,7", tasks=1, nodes=1, world=8),
     ["nodes in the job step 1 != 2", "tasks in the job step (launchers) 1 != 2", "(WORLD_SIZE) 8 != 16"]),
]


@pytest.mark.parametrize("scale, env, named", CASES)
def test_check_allocation_names_each_difference_in_one_line(scale, env, named):
    problem = check_allocation(recipe("delta_qwen3_8b", **scale), env)
    if named is None:
        assert problem is None
    else:
        assert problem and "\n" not in problem and problem.startswith("launch check: SLURM job 7")
        assert all(n in problem for n in named), problem
        assert problem.count("!=") == len(named), problem


def test_outside_slurm_nothing_is_checked_and_one_gpu_runs_python():
    assert check_allocation(recipe("delta_qwen3_8b"), {"CUDA_VISIBLE_DEVICES": "0"}) is None
    cf = recipe("cf_qwen3_1p7b_gsm8k")
    assert launch_prefix(cf) == "python" and expected_allocation(cf).world_size == 1
    assert check_allocation(cf, slurm_env("0")) is None


def test_multi_node_rl_requests_gpus_per_node_one_task_per_node_and_no_jobstep_srun():
    two = recipe("delta_qwen3_8b", nodes=2)
    assert slurm_resources(two, "rl") == {"gpu": 0, "gres": "gpu:8", "nodes": 2, "tasks": 2, "tasks_per_gpu": 0,
                                          "mpi": "srun", "runtime": 7 * 24 * 60}
    prefix = launch_prefix(two)
    assert prefix.startswith("srun --ntasks-per-node=1 accelerate launch --multi_gpu --num_processes 16 "
                             "--num_machines 2 ")
    assert "--main_process_ip $(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)" in prefix
    assert slurm_resources(two, "launch_check")["runtime"] == 10
