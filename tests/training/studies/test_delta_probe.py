"""``training.studies.delta_probe`` (issue 26): intervals over prompt groups, pooled checkpoints, the CLI."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from test_fidelity import known_sampler  # same folder (pytest puts it on sys.path)

from common.config import config_from_dict
from common.io import read_jsonl
from training.studies import delta_probe as dp


def test_class_table_interval_resamples_prompt_groups_not_responses() -> None:
    """Two prompts, four right responses each, one lambda per prompt: the responses of a prompt are one unit.
    Resampling the 2 groups reaches both extremes (each alone with probability 1/4); resampling the 8
    responses as if independent gives a far narrower interval."""
    lam = [np.full(3, 1.0)] * 4 + [np.full(3, 2.0)] * 4
    ones = [np.ones(3)] * 8
    classes = [["result"] * 3] * 8
    side = [1] * 8
    by_group = dp.class_table(lam, ones, ones, classes, side, clusters=["a"] * 4 + ["b"] * 4)
    by_response = dp.class_table(lam, ones, ones, classes, side)
    assert [(r["class"], r["tokens"], r["responses"], r["lambda"]) for r in by_group] == [("result", 24, 8, 1.5)]
    assert by_group[0]["groups"] == 2 and by_response[0]["groups"] == 8
    assert (by_group[0]["lambda_lo"], by_group[0]["lambda_hi"]) == (1.0, 2.0)
    assert by_response[0]["lambda_lo"] > 1.1 and by_response[0]["lambda_hi"] < 1.9


def test_class_table_weights_tokens_and_splits_sides_and_classes() -> None:
    lam = [np.array([1.0, 3.0, 3.0]), np.array([0.5, 0.5])]
    p = [np.array([0.9, 0.5, 0.5]), np.array([0.2, 0.4])]
    rows = dp.class_table(lam, p, p, [["answer", "result", "result"], ["slip", "slip"]], [1, -1], clusters=[0, 1])
    got = {(r["side"], r["class"]): (r["tokens"], r["lambda"], r["p"]) for r in rows}
    assert got == {("right (A>0)", "answer"): (1, 1.0, 0.9), ("right (A>0)", "result"): (2, 3.0, 0.5),
                   ("wrong (A<0)", "slip"): (2, 0.5, pytest.approx(0.3))}


def test_probe_pools_checkpoints_with_groups_and_matches_the_reference(tiny_env) -> None:
    """Known rollouts (per group: right, slipped, right, slipped): every response has A != 0, so the pooled
    result has 2 checkpoints x 1 batch x 2 prompts x 4 responses, its prompt groups are (checkpoint, step,
    group), the fidelity bootstrap's seeds are the checkpoints, and the fast lambda~ equals the literal
    reference formulas on the same batch."""
    cfg = config_from_dict(dict(tiny_env["cfg"].raw, rl={**tiny_env["cfg"].raw["rl"], "max_new_tokens": 96}))
    problems = read_jsonl(tiny_env["train"])
    parts = [dp.probe(cfg, str(tiny_env["model"]), problems, seed=1, batches=1, index=i,
                      sampler=known_sampler(problems)) for i in range(2)]
    pooled = dp.pool(parts)
    assert len(pooled["lam"]) == len(pooled["records"]) == 16 and pooled["side"].count(1) == 8
    assert sorted(set(pooled["group"])) == [(i, 0, g) for i in (0, 1) for g in (0, 1)]
    assert pooled["max_diff"] < 1e-5
    table = dp.summary(pooled, n_boot=50)
    fid = table["fidelity"]
    assert fid["all"]["n_groups"] == 4 and fid["all"]["seeds"] == [0, 1] and fid["right (A>0)"]["n_responses"] == 8
    classes = {(r["side"], r["class"]) for r in table["rows"]}
    assert {("right (A>0)", "result"), ("wrong (A<0)", "slip"), ("right (A>0)", "eos")} <= classes
    assert all(r["lambda_lo"] <= r["lambda"] <= r["lambda_hi"] for r in table["rows"])
    md = dp.render(table, "pooled")
    assert "| right (A>0) | result |" in md and "| all |" in md


def test_cli_pools_two_checkpoints(tiny_env) -> None:
    cmd = [sys.executable, "-m", "training.studies.delta_probe", "--config", str(tiny_env["config"]),
           "--train", str(tiny_env["train"]), "--model", str(tiny_env["model"]), "--model", str(tiny_env["model"]),
           "--batches", "1", "--pool", "--bootstrap", "20"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("### ") == 1 and f"{tiny_env['model']} + {tiny_env['model']}" in out.stdout
    assert "max |diff|" in out.stdout and "| side | rho [95% CI] |" in out.stdout


def test_cli_refuses_a_missing_checkpoint_before_probing(tiny_env, tmp_path) -> None:
    """The first --model exists, the second does not: one clear line naming it, before any probe runs."""
    gone = tmp_path / "seed1" / "checkpoints" / "step30"
    cmd = [sys.executable, "-m", "training.studies.delta_probe", "--config", str(tiny_env["config"]),
           "--train", str(tiny_env["train"]), "--model", str(tiny_env["model"]), "--model", str(gone), "--pool"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and out.stdout == ""
    assert f"--model {gone}: no checkpoint there" in out.stderr.strip().splitlines()[-1]
