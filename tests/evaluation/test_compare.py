"""``creditbench compare`` through the command on two run folders with known per-problem results: one table per
shared set and an Avg over all of them (GSM8K included), paired differences equal to the known ones, model words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def _run(root: Path, model: str, per_set: dict[str, list[list[int]]]) -> Path:
    """A ``creditbench eval`` output folder as compare reads it: results.json naming each set's summary."""
    summaries = {}
    for name, rows in per_set.items():
        rel = f"eval/{model}/seed0/step0/{name}.summary.json"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps({"benchmark": name, "problem_ids": [f"{name}-{i}" for i in range(len(rows))],
                                            "per_problem_correct": rows}))
        summaries[name] = rel
    (root / "results.json").write_text(json.dumps({"model": {"resolved": f"/models/{model}"}, "summaries": summaries}))
    return root


def compare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "training.cli", "compare", *args], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)


def test_compare_tables_per_set_and_avg_with_paired_differences(tmp_path):
    rng = np.random.default_rng(0)
    base = {"gsm8k": rng.integers(0, 2, (40, 2)), "math500": rng.integers(0, 2, (30, 2))}
    better = {name: np.where(rng.random(rows.shape) < 0.5, 1, rows) for name, rows in base.items()}
    a = _run(tmp_path / "a", "base-model", {n: r.tolist() for n, r in base.items()})
    b = _run(tmp_path / "b", "tuned-model", {**{n: r.tolist() for n, r in better.items()}, "aime24": [[1]]})
    res = compare(str(a), str(b), "--n-boot", "400", "--n-perm", "400", "--out", str(tmp_path / "cmp"))
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout
    assert "### gsm8k" in out and "### math500" in out and "### Avg" in out and "aime24" not in out
    for scope, names in (("gsm8k", ["gsm8k"]), ("Avg", ["gsm8k", "math500"])):
        section = out.split(f"### {scope}", 1)[1].split("###", 1)[0]
        diff = np.concatenate([(better[n] - base[n]).mean(axis=1) for n in names])
        row = next(line for line in section.splitlines() if line.startswith("| tuned-model"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2] == str(diff.size)  # GSM8K counts in Avg: 70 problems there
        delta = float(cells[3].split()[0])
        lo, hi = (float(x) for x in cells[3].split("[")[1].rstrip("]").split(","))
        assert delta == round(100 * diff.mean(), 1) and lo <= delta <= hi and lo > 0
        assert float(cells[6]) < 0.05  # p (Holm): a clear gain
    assert "Δ vs base-model" in out and "DAPO" not in out and "SFT" not in out
    assert (tmp_path / "cmp" / "compare.md").read_text().strip() == out.strip()


def test_compare_needs_runs_that_share_a_set(tmp_path):
    a = _run(tmp_path / "a", "m1", {"gsm8k": [[1], [0]]})
    b = _run(tmp_path / "b", "m2", {"math500": [[1], [0]]})
    res = compare(str(a), str(b))
    assert res.returncode == 2 and "share no set" in res.stderr and len(res.stderr.strip().splitlines()) == 1
