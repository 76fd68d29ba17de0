"""How a training job is placed and started: the scheduler resources of each rule, the launcher command of
``rl``, and the start-up check that the job got what the plan assumes.

    python -m training.launch --config CFG [--out check.json]   # the check alone (rule launch_check)

The plan (``training.plan``) sizes memory and time for ``scale.nodes`` x ``scale.gpus_per_node`` training
processes. On SLURM (snakemake-executor-plugin-slurm 2.8, jobstep 0.6) that layout is:

- one node: ``sbatch --nodes=1 --gpus=G`` with one task; the jobstep plugin runs the rule under
  ``srun -n1 --gpus=G``, and ``accelerate launch --multi_gpu`` starts the G processes inside that one task.
  No ``tasks`` resource: the plugin turns ``tasks`` into ``--ntasks-per-gpu`` (one launcher per GPU, each
  starting G processes; its issues #342, #373, #459).
- N nodes: ``sbatch --nodes=N --ntasks=N --gres=gpu:G`` (``--gres`` counts per node, ``--gpus`` per job),
  resource ``mpi`` so the jobstep does not wrap the rule in a one-task ``srun``, ``tasks_per_gpu: 0`` so
  the plugin adds no ``--ntasks-per-gpu``; the rule's own ``srun --ntasks-per-node=1`` starts one
  accelerate per node, which meet through c10d rendezvous on the first node.

``check_allocation`` runs first in every training process (``training.rl``) and in ``rule launch_check``:
under SLURM it compares the GPUs the process sees, the tasks of its job step, the nodes and the
``WORLD_SIZE`` its launcher set with the above, and stops with one line naming the difference.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

from common.config import Config, ConfigError, load_config
from common.io import write_json_atomic


def parse_time_limit(limit: str | None) -> float | None:
    """Slurm ``[D-]HH:MM:SS`` in hours (None stays None)."""
    if limit is None:
        return None
    days, _, hms = limit.rpartition("-")
    h, m, sec = (int(x) for x in hms.split(":"))
    return (int(days) if days else 0) * 24 + h + m / 60 + sec / 3600


def rl_gpus_per_node(cfg: Config) -> int:
    """GPUs on each node of an rl job: the training GPUs, plus a vLLM server's tensor-parallel GPUs."""
    s = cfg.scale
    return s.gpus_per_node + (s.vllm.tensor_parallel_size if s.vllm.mode == "server" else 0) if s.gpus_per_node else 0


def slurm_resources(cfg: Config, rule: str) -> dict[str, int | str]:
    """Snakemake ``resources`` of a rule from ``scale`` (read by snakemake-executor-plugin-slurm).

    rl (and launch_check): the layout of the module docstring, ``runtime`` (minutes) from
    scale.time_limit (launch_check: 10); eval_generate: the vLLM tensor-parallel GPUs when eval.backend is
    vllm, else 1 (eval_score: CPU); sft: one GPU when it trains. ``slurm_partition`` / ``slurm_account`` when set. CPU
    configs get ``gpu=0`` only.
    """
    s = cfg.scale
    res: dict[str, int | str] = {"gpu": 0}
    if not s.gpus_per_node:
        return res
    if rule in ("rl", "launch_check"):
        per_node = rl_gpus_per_node(cfg)
        if s.nodes == 1:
            res.update(gpu=per_node, nodes=1)
        else:
            res.update(gres=f"gpu:{per_node}", nodes=s.nodes, tasks=s.nodes, tasks_per_gpu=0, mpi="srun")
        limit = parse_time_limit(s.time_limit)
        if rule == "launch_check":
            res["runtime"] = 10
        elif limit is not None:
            res["runtime"] = int(round(limit * 60))
    elif rule == "eval_generate":
        res["gpu"] = s.vllm.tensor_parallel_size if cfg.eval.backend == "vllm" else 1
    elif rule == "sft":
        res["gpu"] = 1 if cfg.sft.steps > 0 else 0
    if (res["gpu"] or "gres" in res) and s.partition:
        res["slurm_partition"] = s.partition
    if s.account:
        res["slurm_account"] = s.account
    return res


def launch_prefix(cfg: Config) -> str:
    """The command that runs ``-m training.rl``: python, or ``accelerate launch --multi_gpu`` over the job's
    GPUs (explicit: without it accelerate starts one process when it cannot see CUDA, measured here), or
    on a CPU machine ``torchrun`` over ``scale.cpu_processes`` gloo processes (``accelerate launch --cpu
    --num_processes N`` runs a single process unless MPI is configured, measured in issue 24).

    DeepSpeed / FSDP / LoRA / vLLM come from ``scale`` through ``GRPOConfig`` (training.trl_backend), so
    accelerate needs only the process layout. Multi-node: one ``srun`` task per node, rendezvous on the
    job's first node (the ``$(...)`` is expanded by the job's shell before srun starts the tasks).
    """
    s = cfg.scale
    if cfg.backend != "trl" or s.world_size <= 1:
        return "python"
    if not s.gpus_per_node:  # CPU processes over gloo; `accelerate launch --cpu` starts one process without MPI
        return f"torchrun --standalone --nproc_per_node {s.world_size}"
    mp = "bf16" if s.dtype == "bfloat16" else "no"
    base = (f"accelerate launch --multi_gpu --num_processes {s.world_size} --num_machines {s.nodes} "
            f"--mixed_precision {mp}")
    if s.nodes == 1:
        return base
    return (f"srun --ntasks-per-node=1 {base} --rdzv_backend c10d --main_process_port 29500 "
            "--main_process_ip $(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)")


@dataclass(frozen=True)
class Allocation:
    """What one training process of an rl job sees: GPUs on its node, tasks and nodes of its job step
    (one launcher per node), and the processes of the whole run."""

    gpus_per_node: int
    nodes: int
    step_tasks: int
    world_size: int


def expected_allocation(cfg: Config) -> Allocation:
    s = cfg.scale
    nodes = s.nodes if s.gpus_per_node else 1
    return Allocation(rl_gpus_per_node(cfg), nodes, nodes, s.world_size)


def observed_allocation(env: Mapping[str, str]) -> Allocation:
    """From the environment SLURM (``srun``) and the launcher (accelerate / torchrun) set."""
    cvd = env.get("CUDA_VISIBLE_DEVICES", "")
    gpus = len([d for d in cvd.split(",") if d.strip()]) if cvd not in ("", "NoDevFiles") else 0
    return Allocation(gpus, int(env.get("SLURM_STEP_NUM_NODES") or env.get("SLURM_NNODES") or 1),
                      int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or 1),
                      int(env.get("WORLD_SIZE", 1)))


def check_allocation(cfg: Config, env: Mapping[str, str] | None = None) -> str | None:
    """None when this process's allocation is the plan's, else one line naming each difference. Only under
    SLURM (``SLURM_JOB_ID``): a local run's GPUs are whatever the machine has."""
    env = os.environ if env is None else env
    if "SLURM_JOB_ID" not in env:
        return None
    want, got = expected_allocation(cfg), observed_allocation(env)
    what = {"gpus_per_node": f"GPUs visible (CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES', '')!r})",
            "nodes": "nodes in the job step", "step_tasks": "tasks in the job step (launchers)",
            "world_size": "training processes (WORLD_SIZE)"}
    diffs = [f"{what[k]} {getattr(got, k)} != {getattr(want, k)}" for k in what if getattr(got, k) != getattr(want, k)]
    if not diffs:
        return None
    return (f"launch check: SLURM job {env['SLURM_JOB_ID']} is not the plan's layout for scale "
            f"(nodes {cfg.scale.nodes}, gpus_per_node {cfg.scale.gpus_per_node}): {'; '.join(diffs)}; see "
            f"training/launch.py for the resources the rl rule must request")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--out", help="JSON of the expected and observed allocation (written by rank 0)")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(f"launch check: {exc}", file=sys.stderr)
        return 2
    problem = check_allocation(cfg)
    rank = int(os.environ.get("RANK", 0))
    seen = asdict(observed_allocation(os.environ))
    print(f"launch check rank {rank}: {'FAILED' if problem else 'OK'} {json.dumps(seen)}", flush=True)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    if args.out and rank == 0:
        write_json_atomic(args.out, {"expected": asdict(expected_allocation(cfg)), "observed": seen,
                                     "slurm_job_id": os.environ.get("SLURM_JOB_ID")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
