"""Our MBPP+ verdicts equal EvalPlus 0.3.1's on real model completions (evaluation.code.agreement).

``code_agreement_cases.tsv``: 640 real SmolLM2-135M-Instruct completions of 160 MBPP+ tasks (chat_code
and base_code prompts; results/MEASUREMENTS.md, session 6: issue 14), each with the verdicts that
``evalplus.evaluate`` gave when the table was written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("evalplus")

from evaluation.code.agreement import agreement, main, read_table, same
from evaluation.code.score import SandboxConfig, evaluate_mbpp_plus

CASES = Path(__file__).with_name("code_agreement_cases.tsv")


def test_agreement_counts_pass_and_plus_as_pass_at_1_does() -> None:
    ours = [("pass", "pass"), ("pass", "fail"), ("fail", "fail"), ("timeout", "timeout"), ("fail", "pass")]
    theirs = [("pass", "pass"), ("pass", "pass"), ("fail", "timeout"), ("fail", "fail"), ("fail", "fail")]
    # row 2: plus differs; rows 3-4: fail and timeout are both failures; row 5: plus needs base too
    assert agreement(ours, theirs) == {"base": 5, "plus": 4, "exact": 1, "n": 5}


def test_our_verdicts_equal_evalplus_recorded_ones(tmp_path: Path) -> None:
    """Every row of the case table, scored in one call: ours must equal EvalPlus's recorded verdict
    (pass vs. not pass; base, and plus = base and plus tests)."""
    rows = read_table(CASES)
    theirs = [(r["evalplus_base"], r["evalplus_plus"]) for r in rows]
    assert len(rows) >= 300 and sum(t[0] == "pass" for t in theirs) >= 20
    res = evaluate_mbpp_plus([r["sample"] for r in rows], cache_dir=tmp_path / "gt",
                             config=SandboxConfig(parallel=2, run_timeout_s=600))
    ours = [(s.base_status, s.plus_status) for s in res.samples]
    wrong = [(r["task_id"], o, t) for r, o, t in zip(rows, ours, theirs) if not all(same(o, t))]
    assert not wrong


def test_cli_compares_with_evalplus_itself(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI end to end, EvalPlus run for real, on a few rows (passes and failures) of the case table."""
    rows = read_table(CASES)
    few = [r for r in rows if r["evalplus_plus"] == "pass"][:2] + [r for r in rows if r["evalplus_base"] == "pass"
                                                                    and r["evalplus_plus"] != "pass"][:1]
    few += [r for r in rows if r["evalplus_base"] != "pass"][:2]
    samples = tmp_path / "s.jsonl"
    samples.write_text("".join(json.dumps(r["sample"]) + "\n" for r in few))
    rc = main([str(samples), "--tsv", str(tmp_path / "v.tsv"), "--evalplus-cache", str(tmp_path / "ep")])
    out = capsys.readouterr().out
    assert rc == 0 and f"agreement base {len(few)}/{len(few)} plus {len(few)}/{len(few)}" in out, out
    back = read_table(tmp_path / "v.tsv")
    assert [r["sample"] for r in back] == [r["sample"] for r in few]
    assert [(r["evalplus_base"], r["evalplus_plus"]) for r in back] == [(r["evalplus_base"], r["evalplus_plus"])
                                                                       for r in few]
