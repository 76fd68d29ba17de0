"""The ``creditbench`` command: the console script resolves, every subcommand's help fits a screen, and
``creditbench eval`` on the tiny model writes a results JSON and per-sample files."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from evaluation.benchmarks import BENCHMARKS
from training import cli

REPO = Path(__file__).resolve().parents[2]
SCREEN_LINES = 40


SCRIPT = Path(sys.executable).with_name("creditbench")  # the installed console script, where pip put one


def creditbench(*args: str, timeout: float = 600, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """The installed ``creditbench`` script (else ``python -m training.cli``, the same ``main``) in a fresh
    process; PYTHONPATH puts this checkout first, so an install from another clone runs this code."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_WAIT_POLICY": "PASSIVE"}
    cmd = [str(SCRIPT)] if SCRIPT.is_file() else [sys.executable, "-m", "training.cli"]
    return subprocess.run([*cmd, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_console_script_points_at_main():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, attr = scripts["creditbench"].partition(":")
    assert getattr(importlib.import_module(module), attr) is cli.main


def test_help_lists_every_command_and_each_help_fits_a_screen():
    top = creditbench("--help")
    assert top.returncode == 0 and all(f"  {name} " in top.stdout for name in cli.COMMANDS)
    for name in cli.COMMANDS:
        res = creditbench(name, "--help")
        assert res.returncode == 0, (name, res.stderr[-2000:])
        assert 0 < len(res.stdout.splitlines()) <= SCREEN_LINES, name
    assert creditbench("nonsense").returncode == 2


def test_benchmarks_list_has_a_header_and_only_the_sets_eval_takes():
    res = creditbench("benchmarks", "list")
    lines = res.stdout.splitlines()
    assert res.returncode == 0 and lines[0].split()[:4] == ["set", "kind", "split", "problems"]
    assert [line.split()[0] for line in lines[1:-1]] == [n for n, b in BENCHMARKS.items() if not b.generated]
    assert "synthetic" not in res.stdout and lines[-1].startswith("suites: ")


BAD_PATHS = {  # arguments -> words of the one line (exit 2, no traceback)
    ("report", "--results", "/nonexistent/run"): ["--results /nonexistent/run", "no eval/"],
    ("plan", "/nonexistent/recipe.yaml"): ["/nonexistent/recipe.yaml", "No such file"],
    ("benchmarks", "verify", "gsm8"): ["unknown set 'gsm8'", "did you mean 'gsm8k'?"],
    ("regress", "/nonexistent/a", "/nonexistent/b"): ["/nonexistent/a", "no tables"],
    ("compare", "/nonexistent/a", "/nonexistent/b"): ["/nonexistent/a", "no results.json"],
    ("eval", "--model", "/nonexistent", "--sets", "math5000"): ["did you mean 'math500'?"],
}


@pytest.mark.parametrize("argv", list(BAD_PATHS), ids=[" ".join(a[:2]) for a in BAD_PATHS])
def test_bad_paths_and_names_are_one_line(argv):
    res = creditbench(*argv)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert all(w in lines[0] for w in BAD_PATHS[argv]), lines[0]


def test_calibrate_help_works():
    res = subprocess.run([sys.executable, "-m", "evaluation.report.calibrate", "--help"], cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "(80 %)" in res.stdout, res.stderr[-2000:]


def test_run_uses_the_snakefile_of_the_current_folder(tmp_path):
    """`creditbench run` in a folder with its own Snakefile runs that workflow, not the installed checkout's."""
    (tmp_path / "Snakefile").write_text('rule all:\n    output: "done.txt"\n    shell: "echo here > {output}"\n')
    res = creditbench("run", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (tmp_path / "done.txt").read_text() == "here\n"


def test_eval_writes_results_and_samples_of_the_tiny_model(tiny_env, tmp_path):
    """The acceptance command as written (default options) on the tiny model."""
    pytest.importorskip("lm_eval")
    out = tmp_path / "eval"
    res = creditbench("eval", "--model", str(tiny_env["model"]), "--sets", "gsm8k,arc_challenge", "--limit", "5",
                      "--out", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert set(results["results"]) == {"gsm8k", "arc_challenge"}
    assert results["grader_version"] and results["versions"]["transformers"] and results["git"]["commit"]
    assert results["config"]["limit"] == 5 and results["config"]["mcq_protocol"] == "cloze"
    for name in ("gsm8k", "arc_challenge"):
        assert results["data"][name]["sha256"] == BENCHMARKS[name].sha256
        assert results["data"][name]["n_total"] == BENCHMARKS[name].count
        records = [json.loads(x) for x in (out / f"samples_{name}.jsonl").read_text().splitlines()]
        assert [r["problem_id"] for r in records] == results["data"][name]["problem_ids"]
        assert len(records) == 5 and all("extracted" in r and "correct" in r for r in records)
    gsm, arc = results["results"]["gsm8k"]["metrics"], results["results"]["arc_challenge"]["metrics"]
    lo, hi = gsm["avg_at_k_ci95"]
    assert lo <= gsm["avg_at_k"] <= hi
    assert results["results"]["arc_challenge"]["protocol"] == "cloze" and "acc_norm" in arc
    assert arc["acc"] == results["results"]["arc_challenge"]["lm_eval_acc"]
    assert "arc_challenge" in res.stdout and "acc_norm" in res.stdout


def test_eval_refuses_unknown_sets(tmp_path):
    res = creditbench("eval", "--model", str(tmp_path), "--sets", "gsm8k,nope")
    assert res.returncode == 2 and "unknown sets ['nope']" in res.stderr
