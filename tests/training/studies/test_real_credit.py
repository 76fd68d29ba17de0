"""Credit on real text (issue 34, training.studies.real_credit): the real-text token classes as a case table, and
the module's command on SmolLM2-135M-Instruct with reasoning-gym chain_sum prompts made by the data rule's own
command (one probe batch, Monte-Carlo importance of two responses at k 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from training.studies.real_text import real_token_classes

REPO = Path(__file__).resolve().parents[3]
EOS = "<|im_end|>"


@pytest.mark.parametrize("pieces, expected", [
    # no answer statement the checker reads: digits, operators (= included) and text before any answer region
    (["Let", "'s", " add", ":", " 4", " +", " 6", " =", "?"], ["text"] * 4 + ["digit", "operator", "digit",
                                                                            "operator", "text"]),
    # the "answer is" statement and everything after it is the answer; EOS its own class
    (["4", " +", " 6", ".", " The", " answer", " is", " ", "1", "0", ".", EOS],
     ["digit", "operator", "digit", "text", "text"] + ["answer"] * 6 + ["eos"]),
    # a box: from \boxed on
    (["So", " ", "1", "2", " \\", "boxed", "{", "1", "2", "}", EOS],
     ["text", "text", "digit", "digit"] + ["answer"] * 6 + ["eos"]),
    # LaTeX operators and a minus sign
    (["Compute", " 3", " \\times", " 2", " -", " 1", " then", " stop", "ping"],
     ["text", "digit", "operator", "digit", "operator", "digit", "text", "text", "text"]),
])
def test_real_token_classes_case_table(pieces: list[str], expected: list[str]) -> None:
    got = real_token_classes(pieces, EOS)
    if "answer" not in expected:  # the checker may read a closing statement: only the prefix before it is fixed
        cut = got.index("answer") if "answer" in got else len(got)
        assert got[:cut] == expected[:cut]
    else:
        assert got == expected, list(zip(pieces, got))


def _cmd(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the GGUF conversion and a 16-response probe on SmolLM2: minutes on 2 shared cores
def test_real_credit_command_on_smollm2_reasoning_gym(smollm2, tmp_path):
    pytest.importorskip("reasoning_gym")
    raw = yaml.safe_load((REPO / "config" / "experiments" / "real_cpu.yaml").read_text())
    raw.update(output_dir=str(tmp_path / "out"), model={"source": str(smollm2)},
               train_data={**raw["train_data"], "size": 16},
               rl={**raw["rl"], "prompts_per_step": 4, "group_size": 4, "max_new_tokens": 16},
               fidelity={"enabled": True, "grad_snr": False, "batches": 1, "bootstrap": 50,
                         "mc": {"enabled": True, "k": 2, "responses": 2}})
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    data = tmp_path / "data"
    proc = _cmd("-m", "training.prepare_data", "--config", str(cfg), "--train", str(data / "train.jsonl"),
                "--heldout", str(data / "heldout.jsonl"), "--manifest", str(data / "manifest.json"), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = tmp_path / "real_text" / "sft"
    args = ["-m", "training.studies.real_credit", "--config", str(cfg), "--train", str(data / "train.jsonl"),
            "--model-dir", str(smollm2), "--seed", "0"]
    bad = _cmd(*args, cwd=REPO)  # no --out-dir: one line naming it, nothing written
    assert bad.returncode == 2 and "--out-dir" in bad.stderr and "Traceback" not in bad.stderr
    proc = _cmd(*args, "--out-dir", str(out), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["n_responses"] == 16 and s["responses_per_batch"] == 16
    classes = {r["class"] for r in s["delta"]["table"]}
    assert classes <= {"digit", "operator", "answer", "text", "eos"} and {"digit", "text"} & classes
    for r in s["delta"]["table"]:
        assert r["lambda_lo"] <= r["lambda"] <= r["lambda_hi"] and r["groups"] <= 4
    cf = s["cf"]
    assert cf["n_responses"] == 16 and 0 <= cf["share_with_marker"] <= 1
    lo, hi = cf["share_with_marker_ci"]
    assert lo <= cf["share_with_marker"] <= hi
    assert sum(cf["spans_histogram"].values()) == 16
    assert [r["preset"] for r in s["fidelity"]] == ["dapo", "delta", "cf", "delta_random", "cf_random"]
    mc = [json.loads(line) for line in (out / "mc_records.jsonl").open()]
    probed = [r for r in mc if "importance" in r]
    assert len(probed) <= 2 and s["mc"]["n_responses"] == len(probed) and s["mc_k"] == 2
    for r in probed:
        assert len(r["importance"]) == len(r["se"]) == len(r["tokens"])
        # the increments telescope: V(full) - V(empty prefix) = reward - V[0], with V[0] in [0, 1]
        assert -1 <= sum(r["importance"]) <= 1
    dapo = s["fidelity"][0]
    if dapo["n_rho"]:
        assert dapo["rho"] == 0.0  # uniform credit has no ranking: rho 0 by definition
    lab = s["labels"]  # exact labels: every response is chain_sum, so all 16 are labelled
    assert lab["n_labelled"] == 16 == lab["n_right"] + lab["n_wrong"] and lab["tasks"] == {"chain_sum": 16}
    assert [r["preset"] for r in lab["table"]] == ["grpo", "dapo", "delta", "cf", "delta_random", "cf_random"]
    for r in lab["table"][:2]:  # the uniform controls sit exactly at chance
        assert r["rho"] in (None, 0.0) and r["overlap"] == pytest.approx(r["chance_overlap"])
        assert r["decisive_share"] == pytest.approx(r["chance_decisive_share"])
    records = [json.loads(line) for line in (out / "label_records.jsonl").open()]
    assert sum("labels" in r for r in records) == 16
    assert all(len(r["labels"]) == len(r["tokens"]) for r in records if "labels" in r)
    for name in ("delta_lambda_by_class.md", "cf_real_text.md", "credit_fidelity_mc.md", "credit_fidelity_labels.md"):
        assert (out / name).read_text().startswith("**sft: 16 responses")
