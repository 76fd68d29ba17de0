"""Config loading and validation at DAG time, through `snakemake -n` (nothing trains): YAML's `1e-4` and
nested `--config` overrides are read as numbers; a config that would fail, or silently write empty
columns, only after training fails before the DAG is built, with one line naming the key or file and
what to do; CREDITBENCH_GPQA_DIR is honoured; every used data file's sha256 is checked; the ablation
experiment plans issue 37's four new rows through training, evaluation, the report and credit fidelity."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.benchmarks import DEFAULT_GPQA_DIR, get_benchmark

REPO = Path(__file__).resolve().parents[2]
CI_CONFIG = REPO / "config" / "experiments" / "ci.yaml"
ERROR = "creditbench config error: "


def dry_run(tmp_path: Path, extra: str | None = None, *args: str, env: dict | None = None):
    files = [str(CI_CONFIG)]
    if extra is not None:
        (tmp_path / "extra.yaml").write_text(extra)
        files.append(str(tmp_path / "extra.yaml"))
    cmd = [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", *files,
           "--config", f"output_dir={tmp_path / 'out'}", *args]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})
    assert not (tmp_path / "out").exists(), "a dry run wrote files"
    return proc, proc.stdout + proc.stderr


def jobs(text: str) -> dict[str, int]:
    stats = text[text.index("Job stats:"):]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M)}


def one_error_line(proc, text: str) -> str:
    """The failure is exit 1 and exactly one short line naming the key; no schema dump, no traceback."""
    assert proc.returncode != 0, text[-2000:]
    lines = [x for x in text.splitlines() if x.startswith(ERROR)]
    assert len(lines) == 1 and len(lines[0]) < 400, text[-3000:]
    assert "Traceback" not in text and "$schema" not in text and len(text) < 2000, text[-3000:]
    return lines[0][len(ERROR):]


def test_yaml_1e_4_and_nested_config_overrides_are_numbers(tmp_path):
    proc, text = dry_run(tmp_path, "rl: {lr: 1e-4}\nsft: {lr: 5e-3}\n")
    assert proc.returncode == 0, text[-3000:]
    proc, text = dry_run(tmp_path, None, "rl={lr: 1e-4, steps: 6}", "seeds=[1, 2]")
    assert proc.returncode == 0, text[-3000:]
    # 5 methods x 2 seeds, 6 steps: 3 checkpoints each, and the SFT start once
    assert jobs(text)["rl"] == 10 and jobs(text)["eval_generate_curve"] == jobs(text)["eval_score_curve"] == 1 + 30


@pytest.mark.parametrize(("extra", "key"), [
    ("report: {baseline: ppo}\n", "report/baseline"),
    ("eval: {suites: {curve: {sets: [synthetic, no_such_set]}}}\n", "eval/suites/curve/sets/1"),
    ("eval: {benchmarks: [synthetic]}\n", "eval/benchmarks"),  # an old config: one line saying what to write
    ("real_eval: {limit: 5}\n", "real_eval"),
    ("model: {hidden_size: 66, num_heads: 4, num_kv_heads: 2}\n", "model/hidden_size"),  # 66 % 4
    ("model: {hidden_size: 60, num_heads: 4, num_kv_heads: 2}\n", "model/hidden_size"),  # head dim 15
    ("model: {num_heads: 4, num_kv_heads: 3}\n", "model/num_kv_heads"),
    ("task: {min_ops: 3, max_ops: 2}\n", "task/min_ops"),
    ("rl: {lr: fast}\n", "rl/lr"),
    ("rl: {learning_rate: 1e-4}\n", "rl"),
    ("seeds: [1, 1]\n", "seeds"),  # the same seed twice would be counted as two runs
    ("tracking: {backend: comet}\n", "tracking/backend"),
])
def test_bad_config_fails_at_dag_time_in_one_line(tmp_path, extra, key):
    line = one_error_line(*dry_run(tmp_path, extra))
    assert line.startswith(f"config key '{key}'"), line


def test_a_tracking_backend_without_its_writer_fails_at_dag_time(tmp_path):
    import importlib.util

    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed")
    line = one_error_line(*dry_run(tmp_path, "tracking: {backend: wandb}\n"))
    assert line.startswith("config key 'tracking/backend': wandb needs the wandb package; pip install"), line


def test_gpqa_dir_env_var_is_honoured_and_a_requested_missing_set_fails(tmp_path):
    empty = tmp_path / "no_gpqa"
    empty.mkdir()
    line = one_error_line(*dry_run(tmp_path, "eval: {suites: {real: {sets: [gpqa_diamond]}}}\n",
                                   env={"CREDITBENCH_GPQA_DIR": str(empty)}))
    assert line.startswith("config key 'eval/suites/real/sets'") and str(empty) in line
    assert "CREDITBENCH_GPQA_DIR" in line


@pytest.mark.skipif(not (DEFAULT_GPQA_DIR / "gpqa_diamond.csv").is_file(), reason="GPQA-Diamond not on this machine")
def test_gpqa_found_through_the_env_var_is_planned(tmp_path):
    moved = tmp_path / "gpqa"
    shutil.copytree(DEFAULT_GPQA_DIR, moved)
    proc, text = dry_run(tmp_path, "eval: {suites: {real: {sets: [gpqa_diamond], checkpoints: [sft]}}}\n",
                         env={"CREDITBENCH_GPQA_DIR": str(moved)})
    assert proc.returncode == 0, text[-3000:]
    assert jobs(text)["eval_generate_real"] == 1


def test_a_corrupted_data_file_fails_at_dag_time(tmp_path):
    bench = tmp_path / "benchmarks"
    shutil.copytree(REPO / "data" / "benchmarks", bench)
    target = bench / get_benchmark("gsm8k").path
    target.write_bytes(target.read_bytes().replace(b"a", b"b", 1))
    extra = f"data: {{benchmarks_dir: {bench}}}\neval: {{suites: {{real: {{sets: [gsm8k]}}}}}}\n"
    line = one_error_line(*dry_run(tmp_path, extra))
    assert line.startswith("config key 'eval/suites/real/sets'") and str(target) in line and "sha256" in line


def test_trl_backend_refuses_an_unsupported_preset_at_dag_time(tmp_path):
    """A (preset, backend) pair the backend cannot run (``presets.refusal``, from the registry's declarations)
    fails ``snakemake -n`` in one line naming the preset and what the backend lacks; a supported set plans."""
    proc, text = dry_run(tmp_path, "backend: trl\nmethods: [dapo, otb]\n")
    line = one_error_line(proc, text)
    assert line.startswith("config key 'methods': backend 'trl' cannot run preset 'otb'"), line
    assert "token_advantage 'otb'" in line, line
    line = one_error_line(*dry_run(tmp_path, "backend: trl\nmethods: [dapo, tempo]\n"))  # issue 37's TEMPO row
    assert line.startswith("config key 'methods': backend 'trl' cannot run preset 'tempo' "
                           "(token_advantage 'tempo')"), line
    proc, text = dry_run(tmp_path, "backend: trl\nmethods: [dapo, gspo]\n")
    assert proc.returncode == 0, text[-3000:]


NEW_ROWS = ("cispo", "archer", "entropy_adv", "tempo")  # issue 37's four rows, each added through the registry


def _rule_blocks(text: str, rule: str) -> list[str]:
    """The dry run's job blocks of ``rule`` (from its ``rule NAME:`` line to the next blank line)."""
    return [m[1] for m in re.finditer(rf"^(?:local)?rule {rule}:\n(.*?)(?:\n\n|\Z)", text, re.M | re.S)]


def test_the_ablation_experiment_plans_the_four_new_rows(tmp_path):
    """`snakemake -n --configfile config/experiments/ablations.yaml` (the README's ablation command, dry): every
    preset trains once, and CISPO, Archer, entropy advantage and TEMPO each train, are evaluated at every
    checkpoint, reach the report and are credit-fidelity rows."""
    from common.config import load_config
    from training.presets import PRESETS

    config = REPO / "config" / "experiments" / "ablations.yaml"
    rl_cfg = load_config(config).rl
    cmd = [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", str(config), "--config",
           f"output_dir={tmp_path / 'out'}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    assert not (tmp_path / "out").exists(), "a dry run wrote files"
    assert jobs(text)["rl"] == len(PRESETS)
    out = tmp_path / "out"
    rl = "\n".join(_rule_blocks(text, "rl"))
    evals = "\n".join(_rule_blocks(text, "eval_generate_curve"))
    (fidelity,), (report,) = _rule_blocks(text, "credit_fidelity"), _rule_blocks(text, "report")
    for method in NEW_ROWS:
        assert f"{out}/runs/{method}/seed1/metrics.jsonl" in rl, method
        assert len(rl_cfg.checkpoint_steps) >= 2
        for step in rl_cfg.checkpoint_steps:  # every kept checkpoint of the default budget
            assert f"{out}/runs/{method}/seed1/checkpoints/step{step}" in evals, (method, step)
            assert f"{out}/eval/curve/{method}/seed1/step{step}/synthetic.summary.json" in report, (method, step)
        assert f"{out}/runs/{method}/seed1/checkpoints/step{rl_cfg.steps}" in fidelity, method
