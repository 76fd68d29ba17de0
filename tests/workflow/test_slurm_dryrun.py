"""Each paper recipe plans through the SLURM profile (`snakemake --profile workflow/profiles/slurm -n`):
the executor plugin resolves, the rl jobs carry the recipe's GPUs and launcher, nothing runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("snakemake_executor_plugin_slurm", reason="pip install snakemake-executor-plugin-slurm")
pytestmark = pytest.mark.slow

# recipe -> (rl jobs, GPUs per rl job, launcher prefix of the rl shell command)
RECIPES = {
    "delta_qwen3_8b": (2, 8, "-m accelerate.commands.launch --multi_gpu --num_processes 8"),
    "delta_qwen3_14b": (2, 8, "-m accelerate.commands.launch --multi_gpu --num_processes 8"),
    "cf_qwen25_3b_gsm8k": (2, 1, sys.executable),
    "cf_qwen3_1p7b_gsm8k": (2, 1, sys.executable),
}


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_paper_recipe_dry_runs_through_the_slurm_profile(name, tmp_path):
    n_rl, gpus, launcher = RECIPES[name]
    cmd = [sys.executable, "-m", "snakemake", "--profile", "workflow/profiles/slurm", "-n",
           "--configfile", f"config/experiments/{name}.yaml", "--config", f"output_dir={tmp_path / 'out'}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert re.search(rf"^rl\s+{n_rl}$", out, re.M), out[-3000:]
    rl_blocks = [b for b in out.split("rule rl:")[1:]]
    assert len(rl_blocks) == n_rl
    for block in rl_blocks:
        assert re.search(rf"resources:.*\bgpu={gpus}\b", block), block[:2000]
        assert f"{launcher}" in block and "-m training.rl" in block
    assert not list((tmp_path / "out").glob("runs/*")), "a dry run must not start jobs"
