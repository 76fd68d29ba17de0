"""``seeds: auto`` through real Snakemake (config/experiments/seeds_auto.yaml scaled down): the checkpoint
``seed_plan`` reads the verdicts after the first look and adds seeds only while a comparison is undecided.

First run, margin 1000 pp: every comparison is equivalent at the first look (2 seeds), nothing is added. Then the
same folder with margin 0.01 pp (a config change: the plan reruns, its params changed): the comparison is now
undecided, so a seed is added (max_seeds 3), only what is missing runs, and the tables' verdict
column and seed counts match the plan. A third invocation has nothing to do."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
AUTO = REPO / "config" / "experiments" / "seeds_auto.yaml"
SMALL = ("seeds_auto: {start: 2, step: 1, max_seeds: 3}\nsft: {steps: 30}\nrl: {steps: 2, checkpoint_every: 2}\n"
         "eval: {suites: {curve: {k: 2, max_new_tokens: 24}}}\ntask: {n_heldout: 16}\n")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


def snakemake(out: Path, small: Path, margin: float, *, dry: bool = False) -> str:
    cmd = [sys.executable, "-m", "snakemake", *(["-n"] if dry else []), "--cores", "2", "--configfile", str(AUTO),
           str(small), "--config", f"output_dir={out}", f"report={{baseline: dapo, equivalence_margin: {margin}}}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc.stdout + proc.stderr


def seeds_run(out: Path) -> dict[str, list[int]]:
    return {m: sorted(int(p.name[4:]) for p in (out / "runs" / m).glob("seed*")) for m in ("dapo", "grpo")}


@pytest.mark.skip(reason="issue 35 open: at this scale 2 RL steps leave every arm's samples identical (common random "
                         "numbers), so the SE is 0 and a 0.01 pp margin already reads 'equivalent' at look 1; the "
                         "scaled-down run needs arms that differ (more RL steps) before this test can say anything")
def test_seeds_are_added_until_decided_or_the_cap(tmp_path: Path) -> None:
    out = tmp_path / "auto"
    small = tmp_path / "small.yaml"
    small.write_text(SMALL)
    snakemake(out, small, 1000.0)
    assert seeds_run(out) == {"dapo": [1, 2], "grpo": [1, 2]}
    plan = json.loads((out / "seeds" / "look1.json").read_text())
    assert plan["seeds"] == {"dapo": 2, "grpo": 2} and plan["verdicts"]["grpo"]["verdict"] == "equivalent"
    sig = pd.read_csv(out / "tables" / "significance.csv")
    avg = sig[sig["scope"] == "Avg"].set_index("method")
    assert avg.at["grpo", "verdict"] == "equivalent" and "at look 1 (2 seeds)" in avg.at["grpo", "stop_reason"]

    log = snakemake(out, small, 0.01)
    assert re.search(r"^sft\s+\d+$", log, re.M) is None  # the shared stages are not redone
    plan = json.loads((out / "seeds" / "look1.json").read_text())
    assert plan["seeds"] == {"dapo": 3, "grpo": 3} and plan["verdicts"]["grpo"]["verdict"] == "undecided"
    assert seeds_run(out) == {"dapo": [1, 2, 3], "grpo": [1, 2, 3]}
    sig = pd.read_csv(out / "tables" / "significance.csv")
    avg = sig[sig["scope"] == "Avg"].set_index("method")
    assert set(sig["verdict"]) <= {"better", "worse", "equivalent", "undecided"}
    assert avg.at["grpo", "verdict"] == "undecided" and "max_seeds reached (3 seeds)" == avg.at["grpo", "stop_reason"]
    main = pd.read_csv(out / "tables" / "main.csv").set_index("method")
    assert main.at["grpo", "verdict"] == "undecided" and main.at["grpo", "seeds"] == 3
    assert "Job stats" not in snakemake(out, small, 0.01, dry=True)  # nothing left to do
