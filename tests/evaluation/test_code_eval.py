"""MBPP+ and HumanEval+ through EvalPlus's tests: canonical solutions pass, wrong ones fail, the expected
outputs are private and verified. Hostile programs: test_code_eval_hostile.py."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

pytest.importorskip("evalplus")

from evaluation.benchmarks import DEFAULT_DATA_DIR, BenchmarkIntegrityError
from evaluation.code.score import SandboxConfig, evaluate_evalplus, evaluate_mbpp_plus

DATASET = DEFAULT_DATA_DIR / "mbpp_plus" / "MbppPlus.jsonl.gz"
TASK = "Mbpp/455"  # check_monthnumb_number(monthnum2): 3 base inputs, 13 plus inputs
RIGHT = "monthnum2 in (1, 3, 5, 7, 8, 10, 12)"
CFG = SandboxConfig(parallel=2, run_timeout_s=120)


@pytest.fixture(scope="module")
def canonical() -> dict[str, dict]:
    with gzip.open(DATASET, "rt") as fh:
        rows = [json.loads(line) for line in fh]
    return {r["task_id"]: r for r in rows}


def test_canonical_passes_and_wrong_fails(canonical: dict[str, dict], tmp_path: Path) -> None:
    """Right, wrong and harness-killing programs in one batch (hostile ones: test_code_eval_hostile.py)."""
    killer = ("import ctypes, os\nctypes.CDLL(None).kill(os.getppid(), 9)\nctypes.CDLL(None).kill(1, 9)\n"
              f"def check_monthnumb_number(monthnum2):\n    return {RIGHT}\n")
    samples = [{"task_id": TASK, "solution": canonical[TASK]["prompt"] + canonical[TASK]["canonical_solution"]},
               {"task_id": "Mbpp/762", "completion": canonical["Mbpp/762"]["canonical_solution"]},
               {"task_id": "Mbpp/762", "completion": "def check_monthnumber_number(m):\n    return False\n"},
               {"task_id": TASK, "solution": killer}]
    res = evaluate_mbpp_plus(samples, dataset_path=DATASET, cache_dir=tmp_path / "gt", config=CFG)
    assert [(s.base_status, s.plus_status) for s in res.samples] == [
        ("pass", "pass"), ("pass", "pass"), ("fail", "fail"), ("pass", "pass")]  # the harness cannot be killed
    assert res.pass_at_1_plus == 0.75 and res.n_runs == CFG.parallel  # no sandbox had to be replaced
    assert res.limits in ("cgroup2", "rlimits+rss-watch")


def test_harness_interpreter_lies_inside_the_sandbox_root(tmp_path: Path) -> None:
    """The sandbox's root binds only the resolved venv/interpreter folders, so the harness must be started
    through a resolved path: a venv reached through a symlink (a worktree's ``.venv -> ../main/.venv``) once
    failed with 'setpriv: failed to execute .../.venv/bin/python'."""
    import os
    import sys

    from evaluation.code.sandbox import worker_paths
    from evaluation.code.score import sandbox_interpreter

    exe = sandbox_interpreter()
    assert os.path.basename(exe) == os.path.basename(sys.executable)  # still finds the venv's pyvenv.cfg
    assert os.path.realpath(exe) == os.path.realpath(sys.executable)
    assert any(exe.startswith(p.rstrip("/") + "/") for p in worker_paths(Path(__file__).parents[2]))


def test_dataset_checksum_enforced(tmp_path: Path) -> None:
    bad = tmp_path / "MbppPlus.jsonl.gz"
    bad.write_bytes(DATASET.read_bytes() + b"\0")
    with pytest.raises(BenchmarkIntegrityError, match="sha256"):
        evaluate_mbpp_plus([{"task_id": TASK, "completion": "x"}], dataset_path=bad)


def test_unknown_task_rejected() -> None:
    with pytest.raises(ValueError, match="unknown task_id"):
        evaluate_mbpp_plus([{"task_id": "Mbpp/99999", "completion": "x"}], dataset_path=DATASET)


def test_humaneval_plus_ground_truth_passes_and_trivial_code_fails(tmp_path: Path) -> None:
    """HumanEval+ through the same sandbox, on two tasks (expected outputs computed for those only)."""
    path = DEFAULT_DATA_DIR / "humaneval_plus" / "HumanEvalPlus.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        rows = [json.loads(line) for _, line in zip(range(2), fh)]
    samples = [{"task_id": r["task_id"], "completion": r["canonical_solution"]} for r in rows]
    samples += [{"task_id": r["task_id"], "solution": f"def {r['entry_point']}(*args):\n    return None\n"}
                for r in rows]
    res = evaluate_evalplus("humaneval_plus", samples, cache_dir=tmp_path / "gt", config=CFG)
    assert [s.passed_plus for s in res.samples] == [True, True, False, False]
    assert res.pass_at_1_plus == 0.5 and len(list((tmp_path / "gt" / "humaneval").glob("*.pkl"))) == 2


def test_expected_outputs_are_private_and_recomputed_when_tampered(canonical: dict[str, dict], tmp_path: Path) -> None:
    """The cache holds ground truth the sandbox must not see (0600 in a 0700 dir) and is verified on load: a
    poisoned file (here: every expected output flipped, so that a wrong program would pass) is recomputed."""
    import pickle

    wrong = {"task_id": "Mbpp/762", "completion": "def check_monthnumber_number(m):\n    return m != 6\n"}
    right = {"task_id": "Mbpp/762", "completion": canonical["Mbpp/762"]["canonical_solution"]}
    first = evaluate_mbpp_plus([right, wrong], dataset_path=DATASET, cache_dir=tmp_path / "gt", config=CFG)
    (cached,) = (tmp_path / "gt" / "mbpp").glob("*.pkl")
    assert oct(cached.stat().st_mode & 0o777) == "0o600" and oct(cached.parent.stat().st_mode & 0o777) == "0o700"
    oracle = pickle.loads(cached.read_bytes())
    oracle["base"] = [not x for x in oracle["base"]]
    oracle["plus"] = [not x for x in oracle["plus"]]
    cached.write_bytes(pickle.dumps(oracle))
    second = evaluate_mbpp_plus([right, wrong], dataset_path=DATASET, cache_dir=tmp_path / "gt", config=CFG)
    assert [s.passed_plus for s in first.samples] == [s.passed_plus for s in second.samples] == [True, False]
    assert pickle.loads(cached.read_bytes())["base"] != oracle["base"]  # recomputed and rewritten


def test_grade_code_counts_right_and_wrong(canonical: dict[str, dict]) -> None:
    from evaluation.benchmarks import Problem
    from evaluation.scoring import grade_code

    killer = "import ctypes, os\nctypes.CDLL(None).kill(os.getppid(), 9)\n"
    problems = [Problem(id="Mbpp/762", question="", answer="")]
    texts = [[canonical["Mbpp/762"]["canonical_solution"], "def check_monthnumber_number(m):\n    return False\n",
              killer]]
    verdicts, summary = grade_code(problems, texts, "base")
    assert [v.reason for v in verdicts[0]] == ["correct", "wrong", "wrong"]  # the killer reaches no one
    assert summary["plus_pass_at_1"] == pytest.approx(1 / 3)


# Canonical solutions and small perturbations of them, each with the verdict EvalPlus 0.3.1's own
# check_correctness gave it (run on this machine): the comparison's edge cases, where EvalPlus's ``==`` is looser
# or stricter than a plain type check (1 == True, 4.0 == 4, set-equality tasks, float tolerance, numpy scalars).
# (task, replaced text, replacement or None for the canonical solution, EvalPlus's (base, plus))
AGREEMENT = [
    ("Mbpp/455", None, None, ("pass", "pass")),
    ("Mbpp/455", "return monthnum2 in [1, 3, 5, 7, 8, 10, 12]",
     "return int(monthnum2 in [1, 3, 5, 7, 8, 10, 12])", ("pass", "pass")),  # 1 == True
    ("Mbpp/455", "return monthnum2 in [1, 3, 5, 7, 8, 10, 12]",
     "return str(monthnum2 in [1, 3, 5, 7, 8, 10, 12])", ("fail", "fail")),
    ("Mbpp/17", "return 4*a", "return float(4*a)", ("pass", "pass")),  # 4.0 == 4
    ("Mbpp/17", "return 4*a", "return 4*a+1", ("fail", "fail")),
    ("Mbpp/17", "return 4*a", "import numpy as np\n  return np.int64(4*a)", ("pass", "fail")),  # truncates floats
    ("Mbpp/2", "return tuple(", "return list(", ("pass", "pass")),  # a set-equality task
    ("Mbpp/4", "return largest_nums", "return tuple(largest_nums)", ("fail", "fail")),  # (1,) != [1]
    ("Mbpp/82", "(r**3)", "(r**3) * (1 + 1e-9)", ("pass", "pass")),  # inside atol / rtol
    ("Mbpp/82", "(r**3)", "(r**3) * (1 + 1e-3)", ("fail", "fail")),
    ("Mbpp/14", "/ 2)", "// 2)", ("pass", "fail")),
    ("Mbpp/3", "if n % i == 0:", "if n % i != 0:", ("fail", "fail")),
    ("Mbpp/737", None, None, ("pass", "pass")),  # returns a re.Match: judged on `out is not None`
    ("Mbpp/737", "return re.search(regex, string)", "return bool(re.search(regex, string))", ("pass", "pass")),
    ("Mbpp/737", "return re.search(regex, string)", "return re.search('^[aeiou]', string)", ("fail", "fail")),
]


def test_verdicts_equal_evalplus_on_canonical_and_perturbed(canonical: dict[str, dict], tmp_path: Path) -> None:
    samples = []
    for task, old, new, _ in AGREEMENT:
        code = canonical[task]["canonical_solution"]
        if old is not None:
            assert code.count(old) == 1, (task, old)
            code = code.replace(old, new)
        samples.append({"task_id": task, "solution": canonical[task]["prompt"] + code})
    res = evaluate_mbpp_plus(samples, dataset_path=DATASET, cache_dir=tmp_path / "gt", config=CFG)
    assert [(s.base_status, s.plus_status) for s in res.samples] == [case[3] for case in AGREEMENT]
