"""``seeds: auto`` through real Snakemake (config/experiments/seeds_auto.yaml with looks at 2 and 3 seeds): the
checkpoint ``seed_plan`` reads the verdicts after the first look and adds seeds only while a comparison is
undecided.

The arms are DAPO and its A/A twin (``dapo_twin``: DAPO trained on other seeds under the same seed ids): true Δ
0, but the per-seed paired differences are not 0, so the method test has a variance. (GRPO vs DAPO at this
scale, 4 RL steps, score alike on every problem at some seeds, as the CI reference's 1-seed rows do: the method
test is then undefined and nothing is decided, tests/evaluation/test_sequential.py.) First run, margin 1000 pp:
the twin is equivalent at the first look (2 seeds), nothing is added. Then the same folder with margin 0.01 pp
(a config change: the plan reruns, its params changed): the twin is undecided, so a seed is added to both arms
(max_seeds 3), only the missing jobs run, and the tables' verdict column, seed counts and stop reasons match
the plan. A third invocation has nothing to do."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evaluation.report.load import load_results
from evaluation.report.stats import final_records, paired_blocks

REPO = Path(__file__).resolve().parents[2]
AUTO = REPO / "config" / "experiments" / "seeds_auto.yaml"
SMALL = "seeds_auto: {start: 2, step: 1, max_seeds: 3}\nmethods: [dapo, dapo_twin]\n"
ARM = "dapo_twin"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def snakemake(out: Path, small: Path, margin: float, *, dry: bool = False) -> str:
    cmd = [sys.executable, "-m", "snakemake", *(["-n"] if dry else []), "--cores", "2", "--configfile", str(AUTO),
           str(small), "--config", f"output_dir={out}", f"report={{baseline: dapo, equivalence_margin: {margin}}}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc.stdout + proc.stderr


def seeds_run(out: Path) -> dict[str, list[int]]:
    return {m: sorted(int(p.name[4:]) for p in (out / "runs" / m).glob("seed*")) for m in ("dapo", ARM)}


def stamps(out: Path) -> dict[Path, int]:
    """mtime of every file of the shared SFT model and of seeds 1-2 (runs and evaluations)."""
    files = [*(out / "models" / "sft").rglob("*"), *out.glob("runs/*/seed[12]/**/*"),
             *out.glob("eval/curve/*/seed[12]/**/*")]
    return {p: p.stat().st_mtime_ns for p in files if p.is_file()}


def avg_row(out: Path, table: str) -> pd.Series:
    data = pd.read_csv(out / "tables" / f"{table}.csv")
    if table == "significance":
        assert set(data["verdict"]) <= {"better", "worse", "equivalent", "undecided"}
        data = data[data["scope"] == "Avg"]
    return data.set_index("method").loc[ARM]


def test_seeds_are_added_until_decided_or_the_cap(tmp_path: Path) -> None:
    out = tmp_path / "auto"
    small = tmp_path / "small.yaml"
    small.write_text(SMALL)
    snakemake(out, small, 1000.0)
    assert seeds_run(out) == {"dapo": [1, 2], ARM: [1, 2]}
    final = final_records(load_results(out, "eval/curve"))
    for seed in (1, 2):  # the arms differ at every seed: the verdicts below are about data, not a zero SE
        diffs = np.concatenate(list(paired_blocks(final, ARM, "dapo", [seed], ["synthetic"]).values()))
        assert np.abs(diffs).sum() > 0, f"{ARM} and dapo score alike on every problem at seed {seed}"
    plan = json.loads((out / "seeds" / "look1.json").read_text())
    assert plan["seeds"] == {"dapo": 2, ARM: 2} and plan["verdicts"][ARM]["verdict"] == "equivalent"
    sig = avg_row(out, "significance")
    assert sig["verdict"] == "equivalent" and sig["stop_reason"] == "equivalent within ±1000 pp at look 1 (2 seeds)"
    assert sig["seeds"] == 2 and sig["df"] >= 1 and sig["delta_ci_lo"] < sig["delta_ci_hi"]
    main = avg_row(out, "main")
    assert main["verdict"] == "equivalent" and main["seeds"] == 2

    before = stamps(out)
    snakemake(out, small, 0.01)
    assert {p: t for p, t in stamps(out).items() if p in before} == before  # only the added seed's jobs ran
    plan = json.loads((out / "seeds" / "look1.json").read_text())
    twin = plan["verdicts"][ARM]
    assert twin["verdict"] == "undecided" and twin["reason"] == "waiting for seeds (next look at 3)", twin
    assert plan["seeds"] == {"dapo": 3, ARM: 3}
    assert seeds_run(out) == {"dapo": [1, 2, 3], ARM: [1, 2, 3]}
    sig, main = avg_row(out, "significance"), avg_row(out, "main")
    assert sig["seeds"] == 3 and main["seeds"] == 3 and main["verdict"] == sig["verdict"]
    # at the cap (look 2): undecided there, or a better / worse that crossed look 2's boundary
    if sig["verdict"] == "undecided":
        assert sig["stop_reason"] == "max_seeds reached (3 seeds)"
    else:
        assert sig["verdict"] in ("better", "worse") and sig["stop_reason"].endswith("at look 2 (3 seeds)")
    md = (out / "tables" / "main.md").read_text()  # the report says each method's seeds and why it stopped
    assert f"DAPO twin (A/A): 3 seeds, {sig['stop_reason']}" in md and "| verdict (±0.01 pp) |" in md
    assert "Job stats" not in snakemake(out, small, 0.01, dry=True)  # nothing left to do
