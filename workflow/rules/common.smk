# Config validation (one line naming the key and what to do, then exit), wildcard constraints and named
# helpers (no lambdas in rules). Nothing is written while the DAG is parsed: the resolved config is
# content-addressed and written by onstart, after Snakemake holds its lock and never in a dry run.
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir)))
from common.config import ConfigError, config_from_dict, resolved_config_path, rule_digest  # noqa: E402
from common.config import write_resolved_config  # noqa: E402
from evaluation.suites import MAIN_SUITE, plan_sets, tables_dir  # noqa: E402
from evaluation.suites import checkpoints as suite_checkpoints  # noqa: E402 (Snakemake owns `checkpoints`)
from training.launch import launch_prefix, slurm_resources  # noqa: E402
from training.presets import check_methods  # noqa: E402
from training.tracking import check_available  # noqa: E402

try:
    CFG = config_from_dict(config)  # validates, fills the schema defaults, checks cross-key constraints
    check_methods(CFG.raw)  # preset names and knobs (training.presets)
    check_available(CFG.tracking)  # the tracking backend's writer is installed (training.tracking)
    # Evaluation suites (config eval.suites): each suite's sets are fixed here, and every data file the DAG
    # uses and every suite's sampling knobs are verified now, not after training.
    SUITE_SETS = plan_sets(CFG, config)
except ConfigError as err:
    sys.exit(f"creditbench config error: {err}")
OUT = CFG.output_dir
# The python entry points read this file: the validated config with defaults filled *and* Snakemake's
# --config overrides applied (they would be lost if the rules passed the original YAML).
CONFIG_FILE = resolved_config_path(CFG.raw)


def event_driven_local_scheduling(wf) -> None:
    """Local runs schedule on job events only. Snakemake's job rate limiter (--max-jobs-per-timespan, default
    100/1s, for cluster submission) re-arms a 1 s re-scheduling timer on every pass while jobs wait, so the
    timers pile up (one more per finished job) and each pass re-evaluates every waiting job: in the default DAG
    Snakemake's own process spent more CPU than the 37 curve scorings (results/MEASUREMENTS.md, session 14).
    Local execution has nothing to rate-limit (a finishing job wakes the scheduler), so it is off there; the
    executors (SLURM) keep it. Scheduling only: no output depends on it."""
    scheduler = getattr(wf, "scheduler", None)
    if wf.local_exec and getattr(scheduler, "job_rate_limiter", None) is not None:
        scheduler.job_rate_limiter = None


onstart:
    write_resolved_config(CFG.raw)
    event_driven_local_scheduling(workflow)


def config_digest(rule: str) -> str:
    """The hash of the config keys that shape ``rule`` (common.config.RULE_SECTIONS), as a param."""
    return rule_digest(CFG.raw, rule)


def rl_config_digest(wildcards) -> str:
    return rule_digest(CFG.raw, "rl", method=wildcards.method)


# Jobs run with the interpreter that runs Snakemake (the project's venv), not whatever `python` is on PATH.
# runtime.portable_kernels (the CI DAG) adds the CPU-independent kernels (common.config.RuntimeConfig.env).
PY = f"{CFG.runtime.env} {sys.executable}"
# torchrun (CPU processes, scale.cpu_processes) and accelerate (GPUs) through this interpreter, not whatever
# is on PATH (a SLURM job's PATH is the submitting shell's, without the venv unless it was activated).
_launch = launch_prefix(CFG).replace("torchrun", f"{sys.executable} -m torch.distributed.run", 1)
_launch = _launch.replace("accelerate launch", f"{sys.executable} -m accelerate.commands.launch", 1)
RL_LAUNCH = f"{CFG.runtime.env} {sys.executable if _launch == 'python' else _launch}"
# On a few cores the DAG ends when its longest jobs do: rl and the credit studies (which wait for rl) start before
# the many short evaluation jobs that can fill the other cores around them, so no long job is left to run alone
# at the end. Scheduling only: no output depends on the order.
LONG_FIRST = 1
RL_THREADS = CFG.scale.cpu_processes  # CPU processes of one rl job (backend trl; 1 otherwise)
DATA_MODULE = "training.data" if CFG.synthetic_task else "training.prepare_data"


wildcard_constraints:
    method="[a-z0-9_]+",
    seed=r"\d+",
    step=r"\d+",
    benchmark="[a-z0-9_]+",


def eval_dir(suite: str, method: str, seed, step) -> str:
    return f"{OUT}/eval/{suite}/{method}/seed{seed}/step{step}"


def suite_targets(suite: str, seeds: dict[str, int] | None = None) -> list[str]:
    """The summaries of one suite (evaluation.suites.checkpoints; ``seeds``: seeds: auto's method -> seeds)."""
    return [f"{eval_dir(suite, m, s, n)}/{b}.summary.json" for m, s, n in suite_checkpoints(CFG, suite, seeds)
            for b in SUITE_SETS[suite]]


def eval_targets(seeds: dict[str, int] | None = None) -> list[str]:
    """The main suite's summaries (OUT/tables, seeds: auto's looks)."""
    return suite_targets(MAIN_SUITE, seeds) if MAIN_SUITE in SUITE_SETS else []


# seeds: auto (common.config.SeedsAuto): the checkpoint seed_plan (report.smk) runs after each look and says
# which methods get the next batch of seeds (evaluation.report.plan); these input functions follow it.
LOOKS = CFG.seeds_auto.looks if CFG.seeds_auto else ()


def planned_seeds(look: int) -> dict[str, int]:
    """method -> seeds to have after the plan of ``look`` (0: the first look's; needs that checkpoint's output)."""
    if look == 0:
        return dict.fromkeys(CFG.methods, LOOKS[0])
    with open(checkpoints.seed_plan.get(look=look).output[0]) as f:
        return json.load(f)["seeds"]


def final_seeds() -> dict[str, int]:
    """method -> seeds after the last plan that added any (every earlier look's plan is then complete)."""
    seeds = planned_seeds(0)
    for look in range(1, len(LOOKS)):
        nxt = planned_seeds(look)
        if nxt == seeds:
            break
        seeds = nxt
    return seeds


def look_evals(wildcards) -> list[str]:
    """Input of seed_plan after look j: the evaluations of every method's seeds planned for look j."""
    return eval_targets(planned_seeds(int(wildcards.look) - 1))


def report_summaries(wildcards) -> list[str]:
    return eval_targets(final_seeds()) if LOOKS else eval_targets()


def report_metrics(wildcards) -> list[str]:
    seeds = final_seeds() if LOOKS else dict.fromkeys(CFG.methods, len(CFG.seeds))
    fixed = None if LOOKS else CFG.seeds
    return [f"{OUT}/runs/{m}/seed{s}/metrics.jsonl" for m in CFG.methods
            for s in (fixed or range(1, seeds[m] + 1))]


def analysis_runs() -> list[tuple[str, str, int]]:
    """(name, model folder, seed) of each credit analysis (training.studies.analysis), when Config.credit_analysis:
    the shared SFT checkpoint and the final checkpoint of the first seed of delta and cf if configured;
    also on real text with the CPU-size real model (model.convert_gguf)."""
    if not CFG.credit_analysis:
        return []
    seed, step = CFG.seeds[0], CFG.rl.steps
    runs = [("sft", f"{OUT}/models/sft", seed)]
    for method in ("delta", "cf"):
        if method in CFG.methods:
            model = f"{OUT}/runs/{method}/seed{seed}/checkpoints/step{step}"
            runs.append((f"{method}_seed{seed}_step{step}", model, seed))
    return runs


def analysis_targets() -> list[str]:
    return [f"{OUT}/analysis/{name}/summary.json" for name, _, _ in analysis_runs()]


def all_outputs() -> list[str]:
    tables = [f"{OUT}/tables/main.md", f"{OUT}/tables/wallclock.md", f"{OUT}/figures"]
    return eval_targets() + tables + analysis_targets() + suite_outputs() + fidelity_outputs()  # fidelity.smk


def model_for_eval(wildcards) -> str:
    """The folder evaluated for (method, seed, step): the SFT model at step 0, else an RL checkpoint."""
    if wildcards.method == "sft":
        return f"{OUT}/models/sft"
    return f"{OUT}/runs/{wildcards.method}/seed{wildcards.seed}/checkpoints/step{wildcards.step}"


def suite_args(suite: str) -> str:
    """The sets of ``suite`` and, when it evaluates the generated held-out set, that file and its manifest."""
    data = f" --data {OUT}/data/heldout.jsonl --data-manifest {OUT}/data/manifest.json"
    return f"--suite {suite} --sets {' '.join(SUITE_SETS[suite])}" + (data if "synthetic" in SUITE_SETS[suite] else "")


def suite_files(suite: str, suffix: str) -> list[str]:
    """One ``<set>.<suffix>`` per set of ``suite`` at a checkpoint, its wildcards left in."""
    return [f"{eval_dir(suite, '{method}', '{seed}', '{step}')}/{b}.{suffix}" for b in SUITE_SETS[suite]]


OTHER_SUITES = [s for s in SUITE_SETS if s != MAIN_SUITE]  # each with its own OUT/<suite>_tables (report.smk)


def suite_outputs() -> list[str]:
    return [f"{OUT}/{tables_dir(s)}" for s in OTHER_SUITES if suite_checkpoints(CFG, s)]
