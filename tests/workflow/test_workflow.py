"""The CI-size DAG through real Snakemake: it runs end to end, is deterministic (two runs give
byte-identical result tables), and its tables match the committed reference within tolerance."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
CI_CONFIG = REPO / "config" / "experiments" / "ci.yaml"
REFERENCE = REPO / "results" / "reference" / "ci"
DETERMINISTIC_TABLES = ("main.csv", "learning.csv", "failures.csv", "significance.csv")

pytestmark = pytest.mark.slow


def run_dag(out_dir: Path) -> None:
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", str(CI_CONFIG),
           "--config", f"output_dir={out_dir}", "--rerun-incomplete", "--quiet", "rules"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("dag")
    a, b = root / "a", root / "b"
    run_dag(a)
    run_dag(b)
    return a, b


def test_dag_writes_tables_figures_and_manifests(two_runs):
    out, _ = two_runs
    for name in ("main", "wallclock", "learning", "significance", "failures"):
        for ext in ("md", "csv", "tex"):
            assert (out / "tables" / f"{name}.{ext}").is_file(), f"{name}.{ext}"
    assert list((out / "figures").glob("*.png")), "no figures"
    manifest = (out / "runs" / "dapo" / "seed1" / "manifest.json").read_text()
    for key in ("git_commit", "packages", "torch_threads", "hardware", "config_hash", "data_sha256", "seeds"):
        assert f'"{key}"' in manifest


def test_same_config_same_machine_same_tables(two_runs):
    """Identical results; only wall-clock columns (``time_*``, ``mem_*``) may differ between runs."""
    a, b = two_runs
    for name in DETERMINISTIC_TABLES:
        ta, tb = pd.read_csv(a / "tables" / name), pd.read_csv(b / "tables" / name)
        timing = [c for c in ta.columns if c.startswith(("time_", "mem_"))]
        assert name != "main.csv" or not timing, "the main table carries no timing"
        if not timing:
            assert (a / "tables" / name).read_bytes() == (b / "tables" / name).read_bytes(), name
        pd.testing.assert_frame_equal(ta.drop(columns=timing), tb.drop(columns=timing), check_exact=True)


def test_tables_match_the_committed_reference(two_runs):
    out, _ = two_runs
    proc = subprocess.run([sys.executable, "-m", "evaluation.regress", str(out / "tables"), str(REFERENCE)],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_reference_cell_edited_by_hand_fails_regression(two_runs, tmp_path):
    out, _ = two_runs
    ref = tmp_path / "ref"
    shutil.copytree(REFERENCE, ref)
    main = pd.read_csv(ref / "main.csv")
    numeric = [c for c in main.columns if pd.api.types.is_float_dtype(main[c]) and not c.startswith("time_")]
    col = numeric[0]
    main.loc[0, col] = main.loc[0, col] + 50.0  # far beyond any tolerance
    main.to_csv(ref / "main.csv", index=False)
    proc = subprocess.run([sys.executable, "-m", "evaluation.regress", str(out / "tables"), str(ref)],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 1
    assert col in proc.stdout and "reference=" in proc.stdout


def test_snakemake_config_overrides_reach_the_python_jobs(two_runs):
    """`--config output_dir=...` (and any other override) is what the jobs read, not the original YAML."""
    out, _ = two_runs
    resolved = (out / "config.resolved.yaml").read_text()
    assert f"output_dir: {out}" in resolved
    assert "group_size: 4" in resolved  # the CI file's value, with schema defaults filled around it
