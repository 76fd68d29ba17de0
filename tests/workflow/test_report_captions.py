"""The snakemake --report texts: the landing page describes the experiment and points at the main table;
captions take their numbers from the config, not from prose."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import jinja2
import yaml

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "workflow" / "report"


def _render(name: str, **snakemake: object) -> str:
    return jinja2.Template((REPORT / name).read_text()).render(snakemake=SimpleNamespace(**snakemake))


def test_report_opens_with_the_experiment_and_the_main_table():
    assert re.search(r'^report: "workflow/report/workflow.rst"', (REPO / "Snakefile").read_text(), re.M)
    config = yaml.safe_load((REPO / "config" / "experiments" / "ci.yaml").read_text())
    text = _render("workflow.rst", config=config)
    assert text.lstrip().startswith("**Experiment ci.**")
    assert "grpo, dapo, dapo_twin, delta, cf is trained for 4 RL steps" in text and "seeds 1," in text
    assert "k = 2 samples" in text and "main.html_" in text


def test_audit_caption_says_the_configured_sample_cap():
    text = _render("tables.rst", wildcards=SimpleNamespace(name="audit"), params=SimpleNamespace(audit=200))
    assert "at most 200 samples per file" in text and "2,000" not in text


def test_config_comments_point_at_files_that_exist():
    for path in sorted((REPO / "config").rglob("*.yaml")):
        comments = "\n".join(line.split("#", 1)[1] for line in path.read_text().splitlines() if "#" in line)
        assert not re.search(r"issue[- ]\d+ note", comments), path  # notes of a tracker are not in the repo
        dirs = "config|workflow|evaluation|training|common|results|tests"
        for ref in re.findall(rf"\b((?:{dirs})/[\w./-]+\.\w+)", comments):
            assert (REPO / ref).exists(), (path, ref)


def test_report_names_seeds_on_demand():
    config = yaml.safe_load((REPO / "config" / "experiments" / "seeds_auto.yaml").read_text())
    text = " ".join(_render("workflow.rst", config=config).split())
    assert "seeds added on demand (seeds: auto, looks up to 4 seeds" in text and "a, u, t, o" not in text
