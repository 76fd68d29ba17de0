"""Held-out agreement with human labels on issue 25's miss kinds, through the CLI (``python -m evaluation.grading``).

``heldout/issue25_{math,gsm8k}.jsonl``: 91 (response, gold) pairs labelled by hand (``label``), committed
before the rules for these kinds (57 agreed then); ``heldout/issue25_blind_*.jsonl``: 43 more, written after
them and graded once before two more rules (41 agreed then, 26 with grader v3); ``heldout/s9_blind_a_*.jsonl``:
193 pairs written by someone who read only this package's docstring (never its code, cases or verdicts),
committed (a5d455c) before their one grading with grader v4: 192 agreed (99.5 %); the miss, a five-digit decimal
comma (``0,35625``), was fixed after; ``heldout/s9_blind_b_*.jsonl``: 206 more by the same author, committed (7a93265)
before their one grading (grader v4 and that fix): 204 agreed (99.0 %); the two misses (``\\mathrm{(A)}``, a
"so" clause) were fixed after (grader v5); ``heldout/s11_blind_c_*.jsonl``: 189 pairs by another author on
issue 38's kinds, written blind to the code, committed (e30ca7c) before their one grading with grader v6
(aea236d): 183 agreed (96.8 %); the six misses were fixed after as general rules (``cases/issue38.tsv``,
``blind_c`` rows); ``heldout/s12_blind_d_*.jsonl``: 271 pairs by a third author, written blind, committed (eb0ed8e)
before their one grading with grader v7: 263 agreed (97.0 %); the eight misses were fixed after as general rules
(grader v8, ``cases/issue38_s12.tsv``, ``blind_d`` rows); ``heldout/s12_blind_e_*.jsonl``: 259 pairs by another
author, written blind, committed (0912079) before their one grading with grader v8: 247 agreed (95.4 %); the misses
were fixed after as general rules (grader v9, ``blind_e`` rows); ``heldout/s12_blind_f_*.jsonl``: 210 pairs by a
fourth author, weighted to ordinary endings (about 70 %), written blind, committed (b31f01e) before their one
grading with grader v9: 209 agreed (99.5 %); its miss (f-049, a value in dollars after a stating verb and before
its noun, closing a sentence with two math spans) and set E's e-199 (a value questioned, then stated again) were fixed
after as general rules (grader v10, ``cases/issue38_s13.tsv``); ``heldout/s13_blind_g_*.jsonl``: 212 pairs by a fifth
author, about 60 % ordinary endings, written blind, committed (bf155b1) before their one grading with grader v10:
197 agreed (92.9 %); its misses were fixed after as general rules where one is safe (grader v11,
``cases/issue38_g.tsv``), and g-138 is left (the percent convention, as a-052); ``heldout/s14_blind_h_*.jsonl``: 259
pairs by a sixth author, written blind, committed (33ddf96) before its one grading with grader v12 (254 agreed,
98.1 %; five misses, no leniency), fixed after as general rules (grader v13, ``cases/issue38_s14_h.tsv``).  All are
separate from the case tables.
GSM8K rows are graded with ``--dataset gsm8k``, as that dataset's golds are.  Each set's remaining misses are named
below: a new miss fails the test, and so does a fixed one until it is taken off the list.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HELDOUT = Path(__file__).with_name("heldout")
REPO = Path(__file__).resolve().parents[3]


def _grade(name: str, dataset: str | None, tmp_path: Path) -> list[dict]:
    out = tmp_path / f"{name}.out.jsonl"
    cmd = [sys.executable, "-m", "evaluation.grading", "--input", str(HELDOUT / name), "--output", str(out)]
    subprocess.run(cmd + (["--dataset", dataset] if dataset else []), cwd=REPO, check=True, capture_output=True)
    return [json.loads(line) for line in out.read_text().splitlines()]


# ids of the pairs the current grader disagrees with; a-052 and g-138: the percent convention ("$25\\%$" for a count
# of 25, "$\\boxed{0.25\\%}$" for a probability of 1/4, both labelled wrong; the grader reads a percent on the
# prediction as the bare gold it names)
KNOWN_MISSES = {"s9_blind_a": {"a-052"}, "s13_blind_g": {"g-138"}}


@pytest.mark.parametrize("prefix", ["issue25", "issue25_blind", "s9_blind_a", "s9_blind_b", "s11_blind_c",
                                    "s12_blind_d", "s12_blind_e", "s12_blind_f", "s13_blind_g",
                                    "s14_blind_h"])
def test_heldout_agreement_is_at_least_98_percent(tmp_path: Path, prefix: str) -> None:
    rows = _grade(f"{prefix}_math.jsonl", None, tmp_path) + _grade(f"{prefix}_gsm8k.jsonl", "gsm8k", tmp_path)
    assert len(rows) >= 40 and {r["label"] for r in rows} == {True, False}
    misses = [(r["kind"], r["answer"], r["prediction"][-80:], r["reason"]) for r in rows if r["correct"] != r["label"]]
    assert 1 - len(misses) / len(rows) >= 0.98, misses
    missed = {r.get("id", r["prediction"][-60:]) for r in rows if r["correct"] != r["label"]}
    assert missed == KNOWN_MISSES.get(prefix, set()), misses
