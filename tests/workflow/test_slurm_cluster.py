"""The SLURM path run for real (issue 36): a one-node cluster on this machine (``slurm_cluster``), the
workflow through ``--profile workflow/profiles/slurm`` and snakemake-executor-plugin-slurm.

- the CI-size DAG, every job through sbatch, one rl job ``scancel``-ed mid-run and the DAG rerun with
  the profile's ``--rerun-incomplete``: tables identical to the local run's (itself regressed against
  results/reference/ci in test_workflow.py);
- ``rule launch_check`` on the fake GPUs: the job sees the GPUs, tasks and world size the plan expects,
  and fails in one line when it does not;
- the sbatch lines the plugin writes for the paper recipes' rl jobs (and a 2-node variant), refused by
  the cluster (too big for it) after SLURM parsed them: GPUs per node, tasks, CPUs, memory and time as
  ``training.launch`` / ``training.plan`` say.

The cluster's overlay on the real profile (``overlay``): small per-job CPUs, memory and time (the node
has 2 CPUs), status by ``squeue`` (no accounting database) polled every second, logs kept in the test's
folder. Command-line values replace the profile's; the profile itself is what users run.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from slurm_cluster import start_cluster, unavailable
from test_workflow import CI_CONFIG, REPO, SNAKEMAKE, tables_equal

from common.config import load_config
from training.launch import expected_allocation, parse_time_limit
from training.plan import HOST_MEM_GB

pytest.importorskip("snakemake_executor_plugin_slurm", reason="pip install snakemake-executor-plugin-slurm")
pytestmark = pytest.mark.slow
PROFILE = REPO / "workflow" / "profiles" / "slurm"
PROFILE_YAML = yaml.safe_load((PROFILE / "config.yaml").read_text())
PAPER_RECIPES = ("delta_qwen3_8b", "delta_qwen3_14b", "cf_qwen25_3b_gsm8k", "cf_qwen3_1p7b_gsm8k")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = unavailable()
    if why:
        pytest.skip(why)
    with start_cluster(tmp_path_factory.mktemp("slurm")) as c:
        yield c


def overlay(logdir: Path, *, small: bool = True) -> list[str]:
    """The test cluster's command-line overlay on the real profile (``small``: jobs sized for the node)."""
    args = ["--slurm-init-seconds-before-status-checks", "1", "--slurm-status-command", "squeue",
            "--slurm-no-account", "--slurm-logdir", str(logdir), "--slurm-keep-successful-logs"]
    if small:
        sizes = {"cpus_per_task": 1, "mem_mb": 1000, "runtime": 30}
        rules = [f"{rule}:{k}={sizes[k]}" for rule, res in PROFILE_YAML["set-resources"].items() for k in res]
        args += ["--default-resources", "slurm_partition=gpu", *(f"{k}={v}" for k, v in sizes.items()), "gpu=0",
                 "--set-resources", *rules]
    return args


def smk(out: Path, configfile: Path, *extra: str, targets: tuple[str, ...] = (), overrides: tuple[str, ...] = (),
        small: bool = True) -> list[str]:
    return [*SNAKEMAKE, *targets, "--profile", str(PROFILE), "--configfile", str(configfile),
            "--config", f"output_dir={out}", *overrides, *overlay(out.parent / f"{out.name}_slurm_logs", small=small),
            *extra]


def run(cmd: list[str], cluster, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, env=cluster.env, capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------ the CI-size DAG through sbatch, scancel, resume


def rule_counts(text: str) -> dict[str, int]:
    stats = text[text.index("Job stats:"):]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M) if m[1] != "total"}


@pytest.fixture(scope="module")
def slurm_dag(cluster, tmp_path_factory):
    """The CI DAG through the profile; once an rl job is past its first checkpoint its SLURM job is
    cancelled; the DAG (keep-going) ends failed; the same command then finishes it."""
    out = tmp_path_factory.mktemp("slurm_dag") / "out"
    cmd = smk(out, CI_CONFIG)
    first_log = out.parent / "first.log"  # a file, not a pipe: nobody reads while the DAG runs
    first = subprocess.Popen(cmd, cwd=REPO, env=cluster.env, stdout=first_log.open("w"), stderr=subprocess.STDOUT)
    cancelled = None
    try:
        deadline = time.monotonic() + 1200
        while cancelled is None and first.poll() is None and time.monotonic() < deadline:
            for run_dir in sorted((out / "runs").glob("*/seed1")):
                ckpt = run_dir / "checkpoints"
                if (ckpt / "step2").is_dir() and not (ckpt / "step4").exists():
                    tag = f"rule_rl_wildcards_{run_dir.parent.name}_1"
                    job = [j for j in cluster.jobs() if j["comment"] == tag and j["state"] == "RUNNING"]
                    if job:
                        cluster.run("scancel", job[0]["id"])
                        cancelled = (run_dir.parent.name, job[0]["id"])
                        break
            time.sleep(0.05)
        first.wait(timeout=1200)
    finally:  # a failed wait leaves no Snakemake submitting to a cluster that is going away
        if first.poll() is None:
            first.kill()
            first.wait()
    second = run(cmd, cluster)
    return {"out": out, "first_rc": first.returncode, "first": first_log.read_text(), "second": second,
            "cancelled": cancelled, "jobs": cluster.jobs()}


@pytest.mark.timeout(2400)  # two DAG runs (local, SLURM) and a rerun in its setup
def test_slurm_cluster_ci_dag_through_sbatch_resumes_a_cancelled_job(slurm_dag, ci_local_run):
    d = slurm_dag
    assert d["cancelled"], "no rl job was caught between its checkpoints 2 and 4:\n" + d["first"][-3000:]
    method, job_id = d["cancelled"]
    assert d["first_rc"] != 0 and f"SLURM-job '{job_id}' failed" in d["first"], d["first"][-3000:]
    second = d["second"]
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    log = (d["out"] / "logs" / "rl" / f"{method}_seed1.log").read_text()
    assert re.search(rf"resuming {method} seed \d+ from step [1-9]", log), log[-2000:]
    # every job went through sbatch: one SLURM job per planned Snakemake job (`all` has nothing to run), the
    # cancelled rl twice; the rerun is that rl job and what needs it (never run by the first invocation)
    planned, rerun = rule_counts(d["first"]), rule_counts(second.stdout + second.stderr)
    submitted: dict[str, int] = {}
    for j in d["jobs"]:
        rule = re.match(r"rule_(\w+?)(_wildcards_.*)?$", j["comment"])[1]
        submitted[rule] = submitted.get(rule, 0) + 1
    want = {r: n + (r == "rl") for r, n in planned.items() if r != "all"}
    assert submitted == want, (submitted, planned, rerun)
    assert rerun["rl"] == 1 and rerun.get("eval_generate_curve", 0) >= 1 and set(rerun) <= set(planned), rerun
    states = [j["state"] for j in d["jobs"]]
    assert states.count("CANCELLED") == 1 and states.count("COMPLETED") == len(states) - 1, d["jobs"]
    tables_equal(ci_local_run, d["out"])


# ------------------------------------------------------------------------- a GPU job on the fake GRES


def launch_check(cluster, out: Path, *extra: str) -> subprocess.CompletedProcess:
    """``rule launch_check`` of delta_qwen3_8b scaled to the node's 2 GPUs (the rl job's resources and
    launcher: accelerate over 2 processes inside the jobstep's one-task srun)."""
    cfg = REPO / "config" / "experiments" / "delta_qwen3_8b.yaml"
    return run(smk(out, cfg, *extra, targets=("launch_check",), overrides=("scale={gpus_per_node: 2}",)), cluster)


def test_slurm_cluster_gpu_job_sees_the_plans_gpus_tasks_and_world_size(cluster, tmp_path):
    proc = launch_check(cluster, tmp_path / "ok")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = (tmp_path / "ok" / "logs" / "launch_check.log").read_text()
    seen = '{"gpus_per_node": 2, "nodes": 1, "step_tasks": 1, "world_size": 2}'
    assert log.count(f": OK {seen}") == 2 and "rank 0" in log and "rank 1" in log, log
    summary = yaml.safe_load((tmp_path / "ok" / "launch_check.json").read_text())
    assert summary["expected"] == summary["observed"]
    (job,) = [j for j in cluster.jobs() if j["id"] == summary["slurm_job_id"]]
    assert job["state"] == "COMPLETED" and cluster.job_field(job["id"], "TresPerJob") == "gres:gpu:2", job


def test_slurm_cluster_gpu_job_short_of_gpus_fails_in_one_line(cluster, tmp_path):
    """One GPU granted where the plan expects 2: the job stops before any work, naming the difference. Each rank
    checks on its own; the first to exit makes torchrun SIGTERM the other, which may not have printed yet."""
    proc = launch_check(cluster, tmp_path / "short", "--set-resources", "launch_check:gpu=1",
                        "launch_check:cpus_per_task=1", "launch_check:mem_mb=1000")
    assert proc.returncode != 0
    log = (tmp_path / "short" / "logs" / "launch_check.log").read_text()
    lines = [x for x in log.splitlines() if x.startswith("launch check: SLURM job")]
    assert 1 <= len(lines) <= 2 and len(set(lines)) == 1, log
    assert "GPUs visible (CUDA_VISIBLE_DEVICES='0') 1 != 2" in lines[0] and lines[0].count("!=") == 1, lines[0]
    assert not (tmp_path / "short" / "launch_check.json").exists()


# ------------------------------------------------------------- the paper recipes' sbatch lines vs the plan


def sbatch_options(call: str) -> dict[str, str]:
    """``--opt=value`` / ``--opt value`` / ``-t value`` of an sbatch call, up to ``--wrap``."""
    words = shlex.split(call.split(" --wrap=", 1)[0])[1:]
    opts, i = {}, 0
    while i < len(words):
        w = words[i]
        if "=" in w:
            k, v = w.split("=", 1)
        elif i + 1 < len(words) and not words[i + 1].startswith("-"):
            k, v, i = w, words[i + 1], i + 1
        else:
            k, v = w, ""
        opts[k.lstrip("-")] = v
        i += 1
    return opts


VARIANTS = {name: (name, ()) for name in PAPER_RECIPES} | {"delta_qwen3_8b_2nodes": ("delta_qwen3_8b",
                                                                                     ("scale={nodes: 2}",))}


@pytest.fixture(scope="module")
def refused_rl_jobs(cluster, tmp_path_factory):
    """Each variant's first rl job submitted through the real profile (its sizes, no overlay): SLURM parses
    the sbatch line and refuses it (8 GPUs, 32 CPUs, 512 GB on a 2-GPU, 2-CPU node); the plugin reports it."""
    root = tmp_path_factory.mktemp("recipes")
    procs = {}
    for variant, (recipe, overrides) in VARIANTS.items():
        out = root / variant
        cfg = load_config(REPO / "config" / "experiments" / f"{recipe}.yaml")
        (out / "models" / "sft").mkdir(parents=True)
        (out / "data").mkdir()
        (out / "data" / "train.jsonl").touch()
        target = f"{out}/runs/{cfg.methods[0]}/seed{cfg.seeds[0]}/metrics.jsonl"
        cmd = smk(out, REPO / "config" / "experiments" / f"{recipe}.yaml", "--allowed-rules", "rl",
                  targets=(target,), overrides=overrides, small=False)
        log = root / f"{variant}.log"
        procs[variant] = (out, log, subprocess.Popen(cmd, cwd=REPO, env=cluster.env, stdout=log.open("w"),
                                                     stderr=subprocess.STDOUT))
    results = {}
    for variant, (out, log, proc) in procs.items():
        proc.wait(timeout=600)
        text = log.read_text()
        (config,) = (out / "configs").glob("*.yaml")  # what the jobs read (overrides applied)
        results[variant] = (text, load_config(config))
    return results


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_slurm_cluster_paper_recipe_sbatch_line_is_the_plans(refused_rl_jobs, variant):
    text, cfg = refused_rl_jobs[variant]
    m = re.search(r"SLURM sbatch failed\. The error message was '(.*?)'\.\n\s+sbatch call:\n\s+(sbatch .*)", text)
    assert m, text[-4000:]
    assert "submission failed" in m[1], m[1]  # SLURM read the line and refused it (node too small)
    opts = sbatch_options(m[2])
    want = expected_allocation(cfg)
    s = cfg.scale
    assert opts["nodes"] == str(want.nodes) == str(s.nodes)
    if want.nodes == 1:  # --gpus counts per job: per node only on one node
        assert opts["gpus"] == str(want.gpus_per_node) and "gres" not in opts
    else:
        assert opts["gres"] == f"gpu:{want.gpus_per_node}" and "gpus" not in opts
    assert want.gpus_per_node * want.nodes >= s.world_size == want.world_size
    assert "ntasks-per-gpu" not in opts, "one launcher per GPU would start world_size x world_size processes"
    assert int(opts.get("ntasks", 1)) == want.step_tasks == want.nodes  # one launcher per node
    rl = PROFILE_YAML["set-resources"]["rl"]
    assert opts["cpus-per-task"] == str(rl["cpus_per_task"])
    assert opts["mem"] == str(rl["mem_mb"])
    assert int(opts["mem"]) == HOST_MEM_GB * 1000  # the host RAM the plan checks DelTA's store against
    assert opts["t"] == str(round(parse_time_limit(s.time_limit) * 60))
    assert opts["p"] == (s.partition or PROFILE_YAML["default-resources"]["slurm_partition"])
    if want.nodes > 1:  # the jobstep must not wrap the rule in a one-task srun: the rule starts one task per node
        assert re.search(r"resources: .*\bmpi=srun\b", text), text[-3000:]
        assert "srun --ntasks-per-node=1 " in text and "--num_machines 2" in text

