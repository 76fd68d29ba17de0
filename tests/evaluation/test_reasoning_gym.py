"""reasoning-gym as a data family (evaluation.sets.reasoning_gym), through its entry points: the registered files
are what the pinned generator writes; training draws (python -m training.prepare_data) never hold a held-out
question and repeat byte for byte; grading is binary (the verifiers' partial credit never counts as right);
``creditbench eval --sets <rg set>`` grades a registered set; a bad mixture is one line before any work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("reasoning_gym")

from common.io import read_jsonl, sha256_file  # noqa: E402
from evaluation.benchmarks import BENCHMARKS, load_benchmark  # noqa: E402
from evaluation.sets.reasoning_gym import RG_SETS, grade_rg, verifier_score  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ENV = {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600)


def test_registered_files_are_what_the_pinned_generator_writes(tmp_path):
    proc = run("-m", "evaluation.sets.reasoning_gym", "write", "--data-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    for name, s in RG_SETS.items():
        regenerated = tmp_path / s.path
        assert sha256_file(regenerated) == s.sha256 == BENCHMARKS[name].sha256
        assert regenerated.read_bytes() == (REPO / "data" / "benchmarks" / s.path).read_bytes()
        problems = load_benchmark(name)  # sha256 and count verified
        assert len({p.question for p in problems}) == s.count  # no repeats inside a held-out set


def _prepare(tmp_path: Path, train_data: dict, tag: str) -> subprocess.CompletedProcess:
    cfg = {"experiment": "rg", "output_dir": str(tmp_path / "out"), "seeds": [1], "methods": ["dapo"],
           "train_data": train_data}
    path = tmp_path / f"{tag}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return run("-m", "training.prepare_data", "--config", str(path), "--train", str(tmp_path / f"{tag}.jsonl"),
               "--heldout", str(tmp_path / f"{tag}.heldout.jsonl"), "--manifest", str(tmp_path / f"{tag}.json"))


MIX = {"dataset": "reasoning_gym", "template": "plain", "size": 400, "seed": 3,
       "tasks": [{"name": "chain_sum", "weight": 3, "knobs": {"min_terms": 2, "max_terms": 2,
                                                              "min_digits": 1, "max_digits": 1}},
                 {"name": "chain_sum", "weight": 1, "knobs": {"min_terms": 3, "max_terms": 3,
                                                              "min_digits": 1, "max_digits": 1}}]}


def test_training_draws_are_disjoint_from_every_heldout_set_and_repeat(tmp_path):
    a, b = _prepare(tmp_path, MIX, "a"), _prepare(tmp_path, MIX, "b")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    rows = read_jsonl(tmp_path / "a.jsonl")
    heldout = {p.question for name in RG_SETS for p in load_benchmark(name)}
    # 2x1 has 200 distinct problems, 64 of them held out: a draw of 400 would meet them without the exclusion
    assert len(rows) == 400 and not any(r["prompt"].split("Question: ")[1].split("\nAnswer:")[0] in heldout
                                        for r in rows)
    # each row keeps its task and generator metadata: real_credit's exact labels read the chain from them
    assert {r["task"] for r in rows} == {"chain_sum"}
    assert {len(r["entry"]["expression"].split()) for r in rows} == {3, 5}  # 2 and 3 terms
    assert all(r["entry"]["expression"] in r["prompt"] for r in rows)
    manifest = json.loads((tmp_path / "a.json").read_text())
    assert manifest["train_data"]["reasoning_gym"] == "0.1.25"
    assert set(manifest["train_data"]["heldout_excluded"]) == set(RG_SETS)
    other = _prepare(tmp_path, {**MIX, "seed": 4}, "c")
    assert other.returncode == 0 and (tmp_path / "c.jsonl").read_bytes() != (tmp_path / "a.jsonl").read_bytes()


@pytest.mark.parametrize("mix, needle", [
    ({**MIX, "tasks": [{"name": "no_such_task"}]}, "train_data/tasks[0]"),
    ({**MIX, "tasks": [{"name": "chain_sum", "knobs": {"bogus": 1}}]}, "train_data/tasks[0]"),
    ({**MIX, "tasks": [{"name": "spell_backward"}]}, "text answers"),
    ({**MIX, "tasks": None}, "train_data/tasks"),
])
def test_a_bad_mixture_is_one_line_naming_the_key(tmp_path, mix, needle):
    proc = _prepare(tmp_path, mix, "bad")
    assert proc.returncode != 0 and needle in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "bad.jsonl").exists()


CHAIN = {"task": "chain_sum", "knobs": dict(RG_SETS["rg_chain_sum_2x1"].tasks[0][2]), "entry": {}}
SPELL = {"task": "spell_backward", "knobs": {"min_word_len": 3, "max_word_len": 4}, "entry": {}}


@pytest.mark.parametrize("text, gold, meta, right, raw", [
    # number golds: the answer checker; reasoning-gym's raw score on the whole text is partial
    ("6 is the final answer.", "6", CHAIN, True, 1 / 22),  # right; rg's base score: len("6") / len(text)
    ("The answer is \\boxed{6}.", "6", CHAIN, True, None),
    ("\\boxed{16}", "6", CHAIN, False, None),  # the base verifier gives "16" 0.5 against "6"
    ("4 + 2 = 6. So the answer is 6.", "6", CHAIN, True, None),
    # text golds: the task's verifier, right only at exactly 1.0
    ("\\boxed{tma}", "tma", SPELL, True, 1.0),
    ("\\boxed{tm}", "tma", SPELL, False, None),  # spell_backward: 2/3 for a matching prefix
    ("\\boxed{Amt}", "tma", SPELL, False, None),  # the checker's sympy reading calls A*m*t = t*m*a equal
    ("no box here", "tma", SPELL, False, None),
])
def test_grading_is_binary_whatever_the_verifier_scores(text, gold, meta, right, raw):
    assert grade_rg(text, gold, meta, timeout_s=5.0).correct is right
    if raw is not None:
        assert verifier_score(meta["task"], meta["knobs"], text if raw < 1 else text[7:-1], gold, {}) == \
            pytest.approx(raw)


def test_creditbench_eval_grades_a_registered_rg_set(tiny_env, tmp_path):
    from evaluation.grading import extract_answer, grade

    out = tmp_path / "eval"
    proc = run("-m", "training.cli", "eval", "--model", str(tiny_env["model"]), "--sets",
               "rg_chain_sum_2x1,rg_spell_backward_3to4", "--limit", "3", "--template", "base_boxed",
               "--max-new-tokens", "8", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    assert {"rg_chain_sum_2x1", "rg_spell_backward_3to4"} <= set(json.dumps(results).split('"'))
    for name in ("rg_chain_sum_2x1", "rg_spell_backward_3to4"):
        records = read_jsonl(out / f"samples_{name}.jsonl")
        assert len(records) == 3
        problems = {p.id: p for p in load_benchmark(name)}
        for r in records:  # each verdict is grade_rg's on the response (checker or verifier by gold)
            p = problems[r["problem_id"]]
            assert r["correct"] == grade_rg(r["response"], p.answer, p.meta, timeout_s=5.0).correct
            if name == "rg_chain_sum_2x1":
                assert r["correct"] == grade(r["response"], p.answer).correct
            else:
                assert r["extracted"] == extract_answer(r["response"])
