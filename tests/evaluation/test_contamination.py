"""Contamination check: normalised exact match reproduces the shared README's DAPO overlap counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.benchmarks import load_benchmark
from evaluation.contamination import DEFAULT_SHARED_DIR, _load_shared, check, main, ngrams, normalise


def _items(name: str) -> list[tuple[str, str]]:
    return [(p.id, p.question) for p in load_benchmark(name)]


def test_normalise_and_ngrams() -> None:
    assert normalise("  Find  $x$.\n\tNow ") == "find $x$. now"
    assert len(ngrams("a b c d", 3)) == 2 and not ngrams("a b", 3)


def test_toy_overlap() -> None:
    (o,) = check({"tr": [("t1", "What is  1+1?"), ("t2", "Other")]},
                 {"te": [("e1", "what is 1+1?"), ("e2", "new")]}, ngram_n=2)
    assert (o.exact, o.exact_test_ids, o.train_ids, o.ngram) == (1, ("e1",), ("t1",), 1)


def test_dapo_overlap_matches_documented_counts() -> None:
    tests = {n: _items(n) for n in ("math500", "amc22_23", "amc23", "olympiadbench", "aime24", "aime25",
                                    "minerva_math", "gsm8k")}
    extra, _ = _load_shared(DEFAULT_SHARED_DIR)
    tests.update(extra)
    got = {o.test: o.exact for o in check({"dapo": _items("dapo_math_17k")}, tests, ngram_n=None)}
    assert got == {**got, "math500": 4, "amc22_23": 11, "amc23": 5, "olympiadbench": 1, "aime24": 0,
                   "aime25": 0, "minerva_math": 0, "gsm8k": 0}
    if "math_test_full" in extra:
        assert got["math_test_full"] == 972
    else:
        pytest.skip(f"MATH test (5000) not found under {DEFAULT_SHARED_DIR}")


def test_cli_writes_id_lists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--ngram", "0", "--out", str(tmp_path), "--shared-dir", str(tmp_path / "none")]) == 0
    bad = (tmp_path / "dapo_math_17k.contaminated_ids.txt").read_text().split()
    clean = (tmp_path / "dapo_math_17k.clean_ids.txt").read_text().split()
    assert len(bad) + len(clean) == 17917 and len(bad) > 0
    assert (tmp_path / "report.json").is_file()
    assert "math500" in capsys.readouterr().out
