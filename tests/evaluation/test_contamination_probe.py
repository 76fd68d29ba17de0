"""``creditbench contamination --model DIR --sets ...`` (the completion probe, arXiv 2507.10532 §3) through the
command, on the tiny model and on SmolLM2-135M-Instruct, two sets, a few problems each; and its scores on
case tables (a recited rest is exact, a shuffled control differs from the original)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation import contamination as cm

REPO = Path(__file__).resolve().parents[2]
SETS = "math500,gsm8k"


def creditbench(*args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1",
           "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "training.cli", "contamination", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize(("continuation", "exact", "near"), [
    ("is the value of x?", True, True),
    ("  is  THE value of x? And more words", True, True),  # normalised, cut to the rest's length
    ("is the value of y?", False, True),
    ("no idea at all here", False, False),
    ("", False, False),
])
def test_reconstruction_case_table(continuation, exact, near):
    got = cm.reconstruction(continuation, "is the value of x?", near=0.8)
    assert (got["exact"], got["near"]) == (exact, near)


def test_prefix_split_and_shuffled_control():
    assert cm.split_prefix("a b c d e f g h i j", 0.6) == ("a b c d e f", "g h i j")
    assert cm.split_prefix("one two", 0.99) == ("one", "two")  # a word on each side
    text = "First fact. Second fact! Third one? Last."
    shuffled = cm.shuffle_sentences(text, 0)
    assert shuffled != text and sorted(shuffled.split()) == sorted(text.split())
    assert cm.shuffle_sentences("one sentence only here", 0) == "only here one sentence"  # halves swapped
    assert cm.rouge_l("a b c".split(), "a b c".split()) == 1.0
    assert cm.edit_similarity("abc", "abd") == pytest.approx(2 / 3)


def _run(model: Path, out: Path, *extra: str) -> dict:
    res = creditbench("--model", str(model), "--sets", SETS, "--limit", "3", "--max-new-tokens", "48",
                      "--train", "dapo_math_17k", "--out", str(out), *extra)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((out / "probe.json").read_text())
    assert sorted(report["sets"]) == sorted(SETS.split(",")) and report["protocol"]["fraction"] == 0.6
    for name, entry in report["sets"].items():
        assert entry["model"]["n"] == entry["shuffled"]["n"] == 3, name
        assert "dapo_math_17k" in entry["overlap"]  # beside the n-gram overlap with the training set
        rows = [json.loads(x) for x in (out / f"probe_{name}.model.jsonl").read_text().splitlines()]
        assert len(rows) == 3 and all(r["prefix"] and r["rest"] for r in rows)
        assert name in res.stdout
    return report


def test_probe_through_the_command_on_the_tiny_model(tiny_env, tmp_path):
    report = _run(tiny_env["model"], tmp_path / "tiny")
    for entry in report["sets"].values():  # the tiny model never saw these problems
        assert entry["model"]["exact_pct"] == 0.0 and entry["model"]["rouge_l"] < 0.5
    assert report["engine"]["engine"] == "hf"


def test_probe_through_the_command_on_smollm2_with_the_tiny_control(smollm2, tiny_env, tmp_path):
    report = _run(smollm2, tmp_path / "smol", "--control-model", str(tiny_env["model"]))
    for name, entry in report["sets"].items():
        assert {"model", "shuffled", "control_model"} <= set(entry), name
        assert entry["control_model"]["exact_pct"] == 0.0
        assert 0 <= entry["model"]["rouge_l"] <= 1 and entry["model"]["failed"] == 0
    assert report["control_engine"]["engine"] == "hf" and report["models"]["control_model"] == str(tiny_env["model"])
