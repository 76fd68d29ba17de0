"""The evaluation path: the synthetic set end to end on a tiny model, and code-sample formatting."""

import json

from common.records import SUMMARY_KEYS
from evaluation import evaluate as ev
from evaluation import scoring
from evaluation.benchmarks import Problem


def test_code_sample_base_completion_vs_chat_fenced_solution():
    p = Problem(id="Mbpp/2", question="def f(x):\n", answer="")
    assert scoring.code_sample(p, "    return x\n", "base_code") == {"task_id": "Mbpp/2",
                                                                   "completion": "    return x\n"}
    chat = "Here:\n```python\ndef f(x):\n    return 1\n```\nthen\n```python\ndef f(x):\n    return x\n```"
    assert scoring.code_sample(p, chat, "chat_code") == {"task_id": "Mbpp/2", "solution": "def f(x):\n    return x\n"}
    assert scoring.code_sample(p, "def f(x): return x", "chat_code")["solution"] == "def f(x): return x"
    typed = Problem(id="HumanEval/0", question="from typing import List\n\n\ndef f(x: List[int]):\n", answer="")
    assert scoring.code_sample(typed, "def f(x): return x", "chat_code")["solution"] == \
        "from typing import List\ndef f(x): return x"
    assert scoring.code_sample(typed, "from typing import List\ndef f(x): return x", "chat_code")["solution"] == \
        "from typing import List\ndef f(x): return x"


def test_synthetic_evaluation_writes_traceable_samples_and_summary(tiny_env, tmp_path):
    common = ["--config", str(tiny_env["config"]), "--suite", "curve", "--sets", "synthetic", "--data",
              str(tiny_env["heldout"]), "--data-manifest", str(tiny_env["manifest"]), "--out-dir", str(tmp_path)]
    assert ev.main(["generate", *common, "--model-dir", str(tiny_env["model"]), "--method", "sft", "--seed", "1",
                    "--step", "0"]) == 0
    assert ev.main(["score", *common]) == 0
    summary = json.loads((tmp_path / "synthetic.summary.json").read_text())
    samples = [json.loads(line) for line in (tmp_path / "synthetic.samples.jsonl").read_text().splitlines()]
    assert set(SUMMARY_KEYS) <= set(summary)  # the contract the report reads
    assert summary["n_problems"] == 20 and summary["k"] == 2 and len(samples) == 40
    assert summary["template"] == "qa" and summary["data_sha256"]
    assert len(summary["per_problem_correct"]) == 20
    assert sum(map(sum, summary["per_problem_correct"])) == sum(s["correct"] for s in samples)
    assert summary["avg_at_k"] == sum(s["correct"] for s in samples) / 40
    assert {"problem_id", "response", "extracted", "reason", "tokens", "latency_s"} <= set(samples[0])
    assert samples[0]["prompt"].startswith("Question: ")
