"""The CI-size DAG through real Snakemake (subprocesses, never the functions): it runs end to end, is
deterministic (two runs give byte-identical result tables), its tables match the committed reference,
a config change replans exactly the jobs it shapes, a second invocation with another config cannot
change what a running one reads, and a run killed mid-``rl`` resumes from its last checkpoint."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from evaluation.checks.regress import machine_differences, machine_fingerprint

REPO = Path(__file__).resolve().parents[2]
CI_CONFIG = REPO / "config" / "experiments" / "ci.yaml"
REFERENCE = REPO / "results" / "reference" / "ci"
DETERMINISTIC_TABLES = ("main.csv", "learning.csv", "failures.csv", "significance.csv")
SNAKEMAKE = [sys.executable, "-m", "snakemake"]

pytestmark = pytest.mark.slow


def dag_cmd(out_dir: Path, *configfiles: Path, cores: int = 2) -> list[str]:
    return [*SNAKEMAKE, "--cores", str(cores), "--configfile", str(CI_CONFIG), *map(str, configfiles),
            "--config", f"output_dir={out_dir}", "--rerun-incomplete", "--quiet", "rules"]


def run_dag(out_dir: Path) -> None:
    proc = subprocess.run(dag_cmd(out_dir), cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]


def dry_run(out_dir: Path, *configfiles: Path) -> dict[str, int]:
    """Jobs a dry run plans (rule -> count); {} when there is nothing to be done."""
    proc = subprocess.run([*SNAKEMAKE, "-n", *dag_cmd(out_dir, *configfiles, cores=1)[3:]], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    if "Job stats:" not in text:
        return {}
    stats = text[text.index("Job stats:"):]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M) if m[1] != "total"}


def tables_equal(a: Path, b: Path) -> None:
    """Identical results; only wall-clock columns (``time_*``, ``mem_*``) may differ between runs."""
    for name in DETERMINISTIC_TABLES:
        ta, tb = pd.read_csv(a / "tables" / name), pd.read_csv(b / "tables" / name)
        timing = [c for c in ta.columns if c.startswith(("time_", "mem_"))]
        assert name != "main.csv" or not timing, "the main table carries no timing"
        if not timing:
            assert (a / "tables" / name).read_bytes() == (b / "tables" / name).read_bytes(), name
        pd.testing.assert_frame_equal(ta.drop(columns=timing), tb.drop(columns=timing), check_exact=True)


def write_yaml(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def wait_for(predicate, proc: subprocess.Popen, what: str, timeout: float = 1500) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"the DAG ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("dag")


@pytest.fixture(scope="module")
def undisturbed(ci_local_run):
    return ci_local_run  # conftest.py: one local run per session, also compared with the SLURM run


@pytest.fixture(scope="module")
def disturbed(root, undisturbed):
    """One CI DAG run (b) that two things happen to, so the suite runs the DAG twice, not three times:
    while its sft job runs, a second invocation with another config (rl.lr 100x: every RL method would end
    at 0 %) plans (dry) and tries to run in the same folder; then, between an rl job's first and last
    checkpoint, SIGKILL to its process group, `--unlock` and `--rerun-incomplete` (the README's recipe)."""
    out = root / "b"
    other = write_yaml(root / "lr_100x.yaml", "rl: {lr: 0.5}\n")
    proc = subprocess.Popen(dag_cmd(out), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    wait_for(lambda: (out / "logs" / "sft.log").is_file(), proc, "the sft job")
    dry = subprocess.run([*SNAKEMAKE, "-n", *dag_cmd(out, other, cores=1)[3:]], cwd=REPO, capture_output=True,
                         text=True, timeout=600)
    second = subprocess.run(dag_cmd(out, other, cores=1), cwd=REPO, capture_output=True, text=True, timeout=600)
    configs = sorted(p.name for p in (out / "configs").glob("*.yaml"))
    killed: list[str] = []

    def mid_rl() -> bool:
        """An rl job has checkpoint step2 and its metrics rows but not yet step4 (CI: 4 steps)."""
        for run in sorted((out / "runs").glob("*/seed1")):
            metrics = run / "metrics.jsonl"
            rows = metrics.read_text().count("\n") if metrics.is_file() else 0
            if (run / "checkpoints" / "step2").is_dir() and rows >= 2 and not (run / "checkpoints" / "step4").exists():
                killed.append(run.parent.name)
                return True
        return False

    wait_for(mid_rl, proc, "an rl job past its first checkpoint")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    subprocess.run([*SNAKEMAKE, "--unlock", *dag_cmd(out)[3:]], cwd=REPO, check=True, capture_output=True)
    run_dag(out)
    return {"out": out, "dry": dry, "second": second, "configs": configs, "killed": killed[0]}


def test_dag_writes_tables_figures_and_manifests(undisturbed):
    out = undisturbed
    for name in ("main", "wallclock", "learning", "significance", "failures"):
        for ext in ("md", "csv", "tex"):
            assert (out / "tables" / f"{name}.{ext}").is_file(), f"{name}.{ext}"
    assert list((out / "figures").glob("*.png")), "no figures"
    manifest = (out / "runs" / "dapo" / "seed1" / "manifest.json").read_text()
    for key in ("git_commit", "packages", "torch_threads", "hardware", "config_hash", "data_sha256", "seeds"):
        assert f'"{key}"' in manifest


def test_the_ab_twin_is_dapo_on_other_seeds_under_the_same_seed_id(undisturbed):
    """dapo_twin trains with seed id 1 + 1000 (its manifest says so) and so differs from dapo's run, while the
    report pairs it with dapo's seed 1 like any method."""
    twin = json.loads((undisturbed / "runs" / "dapo_twin" / "seed1" / "manifest.json").read_text())
    dapo = json.loads((undisturbed / "runs" / "dapo" / "seed1" / "manifest.json").read_text())
    assert (twin["seeds"]["rl"], twin["seeds"]["rl_label"], dapo["seeds"]["rl"]) == (1001, 1, 1)
    rewards = [[json.loads(r)["reward_mean"] for r in (undisturbed / "runs" / m / "seed1" / "metrics.jsonl")
                .read_text().splitlines()] for m in ("dapo", "dapo_twin")]
    assert rewards[0] != rewards[1]  # other prompts and rollouts
    sig = pd.read_csv(undisturbed / "tables" / "significance.csv")
    assert "dapo_twin" in set(sig["method"])


def unreadable(root: Path) -> list[str]:
    """Files under ``root`` without the read bits the umask grants (mkstemp's 0600 under umask 0022)."""
    from common.io import umask_mode

    want = umask_mode() & 0o444
    return [f"{p.relative_to(root)} {oct(p.stat().st_mode & 0o777)}" for p in root.rglob("*")
            if p.is_file() and not p.is_symlink() and p.stat().st_mode & want != want]


def test_every_output_is_as_readable_as_the_umask_asks(undisturbed):
    """Tables, figures, summaries, samples, metrics and checkpoints: a colleague reads them (0644 under 0022)."""
    bad = unreadable(undisturbed)
    assert not bad, f"{len(bad)} files: {bad[:10]}"


def test_snakemake_config_overrides_reach_the_python_jobs(undisturbed):
    """`--config output_dir=...` (and any other override) is what the jobs read, not the original YAML."""
    (resolved,) = (undisturbed / "configs").glob("*.yaml")
    text = resolved.read_text()
    assert f"output_dir: {undisturbed}" in text
    assert "group_size: 4" in text  # the CI file's value, with schema defaults filled around it


# ---------------------------------------------------------------------------- config changes replan


def test_same_config_plans_nothing(undisturbed):
    assert dry_run(undisturbed) == {}


def test_rl_lr_change_replans_rl_evaluate_report_only(undisturbed, tmp_path):
    before = sorted((p, p.stat().st_mtime_ns) for p in undisturbed.rglob("*"))
    jobs = dry_run(undisturbed, write_yaml(tmp_path / "lr.yaml", "rl: {lr: 2.0e-4}\n"))
    assert jobs == {"rl": 5, "eval_generate_curve": 10, "eval_score_curve": 10, "credit_analysis": 1,
                    "credit_fidelity": 1, "report": 1, "all": 1}, jobs
    assert sorted((p, p.stat().st_mtime_ns) for p in undisturbed.rglob("*")) == before, "a dry run wrote files"


def test_grad_snr_toggle_replans_the_rl_jobs_that_read_it(undisturbed, tmp_path):
    """``training.rl`` reads ``fidelity.grad_snr`` (its metrics rows): toggling it reruns rl and what follows
    (issue 23: RULE_SECTIONS omitted it, so it reran only the fidelity table; ``tests/test_drift.py``)."""
    jobs = dry_run(undisturbed, write_yaml(tmp_path / "snr.yaml", "fidelity: {grad_snr: false}\n"))
    assert jobs == {"rl": 5, "eval_generate_curve": 10, "eval_score_curve": 10, "credit_analysis": 1,
                    "credit_fidelity": 1, "report": 1, "all": 1}, jobs


def test_eval_k_change_replans_evaluation_and_report_only(undisturbed, tmp_path):
    jobs = dry_run(undisturbed, write_yaml(tmp_path / "k.yaml", "eval: {suites: {curve: {k: 3}}}\n"))
    assert jobs == {"eval_generate_curve": 11, "eval_score_curve": 11, "report": 1, "all": 1}, jobs


# ------------------------------------------------------------------- a second invocation, a kill


def test_a_second_invocation_cannot_change_what_a_running_one_reads(undisturbed, disturbed):
    """Run b had a second invocation with another config (dry and real) in its folder while it ran."""
    dry, second = disturbed["dry"], disturbed["second"]
    assert dry.returncode == 0 and second.returncode != 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert "LockException" in second.stdout + second.stderr or "locked" in second.stdout + second.stderr
    assert len(disturbed["configs"]) == 1, f"only the running invocation wrote its config: {disturbed['configs']}"
    tables_equal(undisturbed, disturbed["out"])


def test_killed_run_resumes_from_its_last_checkpoint(undisturbed, disturbed):
    out, method = disturbed["out"], disturbed["killed"]
    log = (out / "logs" / "rl" / f"{method}_seed1.log").read_text()
    match = re.search(rf"resuming {method} seed \d+ from step (\d+)", log)  # the A/A twin logs its seed + 1000
    assert match and int(match[1]) > 0, log[-2000:]
    tables_equal(undisturbed, out)
    rows = [json.loads(x) for x in (out / "runs" / method / "seed1" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(4))


# ------------------------------------------------ the committed reference (last: after both DAG runs)
# The reference is exact only on the machine that recorded it (machine.json): CPUs round differently even
# with runtime.portable_kernels (an AMD EPYC and an Intel Xeon differ in 135 of 639 cells), and the tiny
# DAG's sampled tokens follow. Elsewhere the recorded commit's own DAG, run here, is the reference: a
# 2-point change is then caught on any CPU.


def recording_commit() -> str:
    return json.loads((REFERENCE / "machine.json").read_text())["commit"]


@pytest.fixture(scope="module")
def rebuilt(root):
    """The CI DAG of the commit that recorded the reference, run on this machine (a git worktree)."""
    commit = recording_commit()
    if subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO).returncode != 0:
        pytest.skip(f"commit {commit[:12]} (results/reference/ci/machine.json) is not in this clone's history "
                    "(shallow clone?): fetch it to rebuild the reference here")
    tree, out = root / "reference_tree", root / "reference_run"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=REPO, check=True,
                   capture_output=True)
    try:
        cmd = dag_cmd(out)
        cmd[cmd.index(str(CI_CONFIG))] = str(tree / CI_CONFIG.relative_to(REPO))
        proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=1800)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True)
    return out / "tables"


@pytest.fixture(scope="module")
def reference_here(request) -> Path:
    """The committed reference on its recording machine, else the rebuilt tables (same tolerances)."""
    if not machine_differs():
        return REFERENCE
    rebuilt = request.getfixturevalue("rebuilt")
    ref = rebuilt.parent / "reference_here"
    shutil.copytree(rebuilt, ref)
    shutil.copy(REFERENCE / "tolerances.yaml", ref)
    return ref


def machine_differs() -> bool:
    return bool(machine_differences(REFERENCE, machine_fingerprint()))


def test_the_recorded_commit_rebuilds_the_committed_reference(rebuilt):
    """machine.json's commit is the code that wrote the reference: on the recording machine its DAG gives
    the committed tables cell for cell (elsewhere it is the reference, see ``reference_here``)."""
    if machine_differs():
        pytest.skip("not the recording machine: the rebuilt tables are this machine's reference")
    proc = regress(rebuilt, REFERENCE)
    assert proc.returncode == 0 and "regress: OK" in proc.stdout, proc.stdout + proc.stderr


def test_tables_match_the_reference(undisturbed, reference_here):
    proc = regress(undisturbed / "tables", reference_here)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def regress(tables: Path, reference: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluation.checks.regress", str(tables), str(reference)], cwd=REPO,
                          capture_output=True, text=True)


def test_a_two_point_change_of_a_main_accuracy_cell_fails_regression(undisturbed, reference_here, tmp_path):
    tables = tmp_path / "tables"
    shutil.copytree(undisturbed / "tables", tables)
    assert regress(tables, reference_here).returncode == 0
    main = pd.read_csv(tables / "main.csv")
    row = int(main.index[main["method"] == "delta"][0])
    main.loc[row, "synthetic"] += 2.0  # one cell, two points (the table's resolution is 100 / 48 = 2.08)
    main.to_csv(tables / "main.csv", index=False)
    proc = regress(tables, reference_here)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "main" in proc.stdout and "synthetic" in proc.stdout and "reference=" in proc.stdout
