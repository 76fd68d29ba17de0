"""Local runs schedule on job events, without Snakemake's job rate limiter (common.smk,
``event_driven_local_scheduling``): its re-scheduling timers piled up and re-evaluated every waiting job
(results/MEASUREMENTS.md, session 14). Through a real `snakemake` run of one job (make_data of the CI config)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
UNLIMITED = str(sys.maxsize)


def test_a_local_run_selects_jobs_without_the_rate_limiter(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--verbose", "--configfile",
           str(REPO / "config" / "experiments" / "ci.yaml"), "--config", f"output_dir={out}", "--",
           str(out / "data" / "train.jsonl")]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    assert (out / "data" / "train.jsonl").is_file()
    # With the limiter, each selection caps the job count at the free slots of the timespan (100 of 100/1s).
    counts = re.findall(r"Resources after job selection: \{.*'_job_count': (\d+)", text)
    assert counts and set(counts) == {UNLIMITED}, counts
