"""CLI round trip for ``python -m evaluation.grading`` and the audit entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.checks import audit as audit_mod
from evaluation.grading import REASONS
from evaluation.grading import __main__ as grade_cli

ROOT = Path(__file__).resolve().parents[3]

ROWS = [
    {"id": "a", "prediction": "So $\\boxed{\\frac{1}{2}}$.", "answer": "0.5", "meta": {"k": [1, 2]}},
    {"id": "b", "prediction": "The answer is 7", "answer": "8", "sample": 3},
    {"id": "c", "prediction": "I give up", "answer": "8"},
    {"id": "d", "prediction": "#### 1,234", "answer": "Work...\n#### 1234", "unicode": "π ≈ 3.14"},
    {"id": "e", "prediction": "$\\boxed{[1,2)}$", "answer": "[1,2]"},
]


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def test_round_trip_keeps_extra_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inp, out = tmp_path / "pairs.jsonl", tmp_path / "sub" / "verdicts.jsonl"
    _write(inp, ROWS)
    argv = ["--input", str(inp), "--output", str(out), "--dataset", "gsm8k", "--timeout", "10"]
    assert grade_cli.main(argv) == 0
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in got] == ["a", "b", "c", "d", "e"]
    for src, dst in zip(ROWS, got):
        assert {k: dst[k] for k in src} == src  # every input field kept unchanged
        assert set(dst) - set(src) == {"correct", "extracted", "reason"}
        assert isinstance(dst["correct"], bool)
    assert [(r["correct"], r["reason"]) for r in got] == [
        (True, "correct"), (False, "wrong"), (False, "no_answer"), (True, "correct"), (False, "wrong")
    ]
    assert got[2]["extracted"] is None and got[3]["extracted"] == "1,234"
    assert "graded" in capsys.readouterr().out
    assert [p.name for p in out.parent.iterdir()] == ["verdicts.jsonl"]  # no temp file left behind


def test_counts_printed_per_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inp, out = tmp_path / "p.jsonl", tmp_path / "v.jsonl"
    _write(inp, ROWS)
    grade_cli.main(["--input", str(inp), "--output", str(out)])
    lines = {ln.split()[0]: int(ln.split()[1]) for ln in capsys.readouterr().out.splitlines()[1:]}
    assert lines.pop("correct") == 2 and lines.pop("wrong") == 2 and lines.pop("no_answer") == 1
    assert lines and set(lines) <= set(REASONS) and not any(lines.values())  # the other reasons, printed as 0


def test_missing_field_is_an_error_and_leaves_no_output(tmp_path: Path) -> None:
    inp, out = tmp_path / "p.jsonl", tmp_path / "v.jsonl"
    _write(inp, [{"prediction": "\\boxed{1}"}])
    with pytest.raises(SystemExit):
        grade_cli.main(["--input", str(inp), "--output", str(out)])
    assert not out.exists()


def test_module_entry_point(tmp_path: Path) -> None:
    inp, out = tmp_path / "p.jsonl", tmp_path / "v.jsonl"
    _write(inp, ROWS[:2])
    proc = subprocess.run(
        [sys.executable, "-m", "evaluation.grading", "--input", str(inp), "--output", str(out),
         "--workers", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(x)["correct"] for x in out.read_text().splitlines()] == [True, False]


def test_audit_counts_disagreements() -> None:
    records = [
        {"prediction": "$\\boxed{x \\le 3}$", "answer": "(-\\infty,3]"},  # Math-Verify rejects by design
        {"prediction": "$\\boxed{2516_6}$", "answer": "2516_8"},  # Math-Verify accepts a wrong base
        {"response": "$\\boxed{3}$", "answer": "3"},
        {"prediction": "nothing", "answer": "3"},
    ]
    res = audit_mod.audit(records, timeout_s=10.0)
    assert res["n"] == 4
    assert res["counts"]["both_correct"] == 1 and res["counts"]["both_wrong"] == 1
    assert res["counts"]["ours_only"] == 1 and res["counts"]["math_verify_only"] == 1
    assert res["examples"]["ours_only"][0]["gold"] == "(-\\infty,3]"
    assert res["examples"]["math_verify_only"][0]["extracted"] == "2516_6"
    md = audit_mod.to_markdown(res)
    assert "| ours accepts, Math-Verify rejects | 1 |" in md


@pytest.mark.parametrize(("lines", "message"), [
    (['{"prediction": "\\\\boxed{1}", "answer": null}'], ":1: field 'answer' must be a string or a number, got null"),
    (['{"prediction": "x", "answer": "1"}', '{"prediction": "x", "answer": '], ":2: invalid JSON"),
    (['[1, 2]'], ":1: expected a JSON object, got list"),
    (['{"answer": "1"}'], ":1: missing field 'prediction'"),
    (['{"prediction": ["x"], "answer": "1"}'], ":1: field 'prediction' must be a string or a number, got list"),
])
def test_bad_input_is_one_line_naming_file_line_and_field(tmp_path: Path, lines: list[str], message: str) -> None:
    inp, out = tmp_path / "p.jsonl", tmp_path / "v.jsonl"
    inp.write_text("\n".join(lines) + "\n")
    proc = subprocess.run([sys.executable, "-m", "evaluation.grading", "--input", str(inp), "--output", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and not out.exists()
    assert proc.stderr.strip() == f"{inp}{message}" or proc.stderr.strip().startswith(f"{inp}{message}")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize("timeout", ["0", "-1", "inf", "nan"])
def test_non_positive_timeout_is_rejected(tmp_path: Path, timeout: str) -> None:
    inp, out = tmp_path / "p.jsonl", tmp_path / "v.jsonl"
    _write(inp, ROWS[:1])
    with pytest.raises(SystemExit):
        grade_cli.main(["--input", str(inp), "--output", str(out), "--timeout", timeout])
    assert not out.exists()
