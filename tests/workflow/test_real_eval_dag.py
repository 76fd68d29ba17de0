"""The evaluation suites (config eval.suites) in the DAG: dry runs list the real suite's jobs for the default
config, none for CI, the overlay switches to the full sets; one tiny run goes through the split rules."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from common.config import config_from_dict, deep_merge
from evaluation.benchmarks import BENCHMARKS, load_benchmark
from evaluation.driver import select

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "config" / "experiments"


def snakemake(out: Path, *args: str, timeout: int = 120) -> str:
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--config", f"output_dir={out}", *args]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def resolved(out: Path, *configfiles: Path) -> dict:
    """The config the jobs would read: config/config.yaml, then each --configfile, then --config (a dry
    run writes nothing, so the content-addressed OUT/configs/<hash>.yaml is not there to read)."""
    raw: dict = {}
    for path in (REPO / "config" / "config.yaml", *configfiles):
        raw = deep_merge(raw, yaml.safe_load(Path(path).read_text()))
    return config_from_dict({**raw, "output_dir": str(out)}).raw


def job_counts(text: str) -> dict[str, int]:
    stats = text[text.index("Job stats:"):]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M)}


def test_default_dry_run_lists_sft_and_seed1_finals_on_every_set(tmp_path):
    jobs = job_counts(snakemake(tmp_path, "-n"))
    assert (jobs["eval_generate_real"], jobs["eval_score_real"], jobs["suite_report_real"]) == (7, 7, 1)  # SFT + 6
    # the curve suite: the SFT start once, 6 methods x 3 seeds x 2 checkpoints
    assert jobs["eval_generate_curve"] == jobs["eval_score_curve"] == 1 + 6 * 3 * 2
    assert resolved(tmp_path)["eval"]["suites"]["real"]["limit"] == 2
    assert not tmp_path.exists() or not any(tmp_path.iterdir()), "a dry run wrote files"


def test_ci_dry_run_has_no_real_suite_jobs(tmp_path):
    jobs = job_counts(snakemake(tmp_path, "-n", "--configfile", str(EXPERIMENTS / "ci.yaml")))
    assert not {"eval_generate_real", "eval_score_real", "suite_report_real"} & set(jobs)


def test_full_sets_overlay_and_gguf_rule_of_real_smoke(tmp_path):
    overlay = REPO / "config" / "overlays" / "benchmarks_full.yaml"
    text = snakemake(tmp_path, "-n", "--configfile", str(EXPERIMENTS / "real_smoke.yaml"), str(overlay))
    raw = resolved(tmp_path, EXPERIMENTS / "real_smoke.yaml", overlay)
    assert raw["eval"]["suites"]["real"]["limit"] is None and raw["experiment"] == "real_smoke"
    jobs = job_counts(text)
    assert jobs["convert_gguf"] == 1 and (jobs["eval_generate_real"], jobs["eval_score_real"]) == (2, 2)
    assert text.index("rule convert_gguf") < text.index("rule build_model")


TINY = {
    "experiment": "real_eval_test", "seeds": [1], "methods": ["dapo"],
    "task": {"n_train": 200, "n_heldout": 8},
    "model": {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64,
              "vocab_size": 256},
    "sft": {"steps": 0},
    "rl": {"steps": 1, "prompts_per_step": 2, "group_size": 2, "micro_batch_size": 4, "max_new_tokens": 8,
           "checkpoint_every": 1},
    "eval": {"suites": {"curve": {"k": 1, "max_new_tokens": 8},
                        "real": {"sets": ["gsm8k", "arc_challenge"], "limit": 3, "k": 2, "temperature": 1.0,
                                 "max_new_tokens": 8, "batch_size": 4}}},
}
CLI_SAME = ["--sets", "gsm8k,arc_challenge", "--limit", "3", "--subset-seed", "0", "--seed", "1", "--k", "2",
            "--temperature", "1.0", "--max-new-tokens", "8", "--batch-size", "4"]
"""``creditbench eval``'s arguments for TINY's real suite on the SFT checkpoint (sampled with seed 1)."""
TIMING = ("latency_s", "grade_seconds")
SAME_SUMMARY = ("benchmark", "n_problems", "k", "n_samples", "avg_at_k", "ci95", "pass_at_k", "maj_at_k",
                "problem_ids", "per_problem_correct", "reasons", "grader_version", "template", "metrics", "sampling",
                "limit", "subset_seed", "n_total", "data_sha256", "mean_response_tokens", "warnings", "lm_eval_acc",
                "lm_eval_acc_norm")


@pytest.mark.slow
def test_tiny_model_through_generate_score_and_report(tmp_path):
    """The split rules on a math and a multiple-choice set; then ``creditbench eval`` on the SFT checkpoint with the
    same set, subset and sampling writes the same per-sample records and summaries (one driver)."""
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "out"
    snakemake(out, "--configfile", str(config), "--", str(out / "real_tables"), timeout=900)
    for name in ("gsm8k", "arc_challenge"):
        ids = [p.id for p in select(load_benchmark(name), 3, 0)]  # the one subset rule, the suite's subset_seed
        assert ids != [p.id for p in load_benchmark(name)[:3]]
        for ckpt in ("sft/seed1/step0", "dapo/seed1/step1"):
            d = out / "eval" / "real" / ckpt
            raw = [json.loads(x) for x in (d / f"{name}.raw.jsonl").read_text().splitlines()]
            summary = json.loads((d / f"{name}.summary.json").read_text())
            assert list(dict.fromkeys(r["problem_id"] for r in raw)) == ids == summary["problem_ids"]
            assert (summary["n_problems"], summary["limit"], summary["subset_seed"]) == (3, 3, 0)
            assert summary["data_sha256"] == BENCHMARKS[name].sha256
    gsm8k = json.loads((out / "eval" / "real" / "sft/seed1/step0/gsm8k.summary.json").read_text())
    assert (gsm8k["k"], gsm8k["template"], gsm8k["sampling"]["max_new_tokens"]) == (2, "base_boxed", 8)
    table = (out / "real_tables" / "gsm8k.md").read_text()
    assert "DAPO" in table and "SFT (start)" in table
    assert not (out / "eval" / "curve" / "sft" / "seed1" / "step0" / "gsm8k.summary.json").exists()

    cli = tmp_path / "cli"
    proc = subprocess.run([sys.executable, "-m", "training.cli", "eval", "--model", str(out / "models" / "sft"),
                           *CLI_SAME, "--out", str(cli)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((cli / "results.json").read_text())
    for name in ("gsm8k", "arc_challenge"):
        workflow = out / "eval" / "real" / "sft" / "seed1" / "step0"
        ours = [{k: v for k, v in json.loads(x).items() if k not in TIMING}
                for x in (cli / f"samples_{name}.jsonl").read_text().splitlines()]
        theirs = [{k: v for k, v in json.loads(x).items() if k not in TIMING}
                  for x in (workflow / f"{name}.samples.jsonl").read_text().splitlines()]
        assert ours == theirs and len(ours) == (6 if name == "gsm8k" else 3), name
        a = json.loads((cli / results["summaries"][name]).read_text())
        b = json.loads((workflow / f"{name}.summary.json").read_text())
        assert {k: a.get(k) for k in SAME_SUMMARY} == {k: b.get(k) for k in SAME_SUMMARY}, name
        assert results["results"][name]["metrics"] == b["metrics"]
        if name == "gsm8k":
            assert len({r["response"] for r in ours}) > 1  # sampled, not one greedy answer
