"""``answer_start``: where the checker's extracted answer is stated (CF's answer region on real text).

Case table: response -> the text from the returned offset on.  Property over every case row of
``cases/*.tsv`` (933 responses, real SmolLM2 generations included): the checker extracts the same answer
from the response cut at that offset, and finds no answer exactly when the offset is None."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from evaluation.grading import answer_start, extract_answer

ROWS = [dict(row, where=f"{path.name}:{i}") for path in sorted(Path(__file__).with_name("cases").glob("*.tsv"))
        for i, row in enumerate(csv.DictReader(path.open(encoding="utf-8"), delimiter="\t", quoting=csv.QUOTE_NONE), 2)]

CASES = [  # (response, dataset, text from the offset on, or None)
    ("So 3 + 4 = 7.\n#### 7", "gsm8k", "#### 7"),
    ("We add them: 3 + 4 = 7. The answer is 7.", None, "answer is 7."),
    ("**Final Answer:** 12 apples", None, "Final Answer:** 12 apples"),
    ("First $x=2$. So \\boxed{2} and \\boxed{3}.", None, "\\boxed{2} and \\boxed{3}."),
    ("<think>the answer is 9</think>It is \\boxed{4}.", None, "\\boxed{4}."),
    ("She has 5 apples. She buys 3 more. So she has 8 apples now.", None, "So she has 8 apples now."),
    ("Adding up:\n\\[ 2 + 3 = 5 \\]", None, "\\[ 2 + 3 = 5 \\]"),
    ("The total is 5 and then 7.", None, None),
    ("<think>still thinking, the answer is 3", None, None),
    ("The answer is 6.\nUser: the answer is 9", None, "answer is 6.\nUser: the answer is 9"),
]


@pytest.mark.parametrize("response,dataset,expected", CASES)
def test_answer_start_cases(response: str, dataset: str | None, expected: str | None) -> None:
    pos = answer_start(response, dataset)
    assert (None if pos is None else response[pos:]) == expected


def test_answer_start_states_the_extracted_answer_on_every_case_row() -> None:
    found = 0
    for row in ROWS:
        response, dataset = row["response"].replace("⏎", "\n"), row["dataset"] or None
        answer, pos = extract_answer(response, dataset), answer_start(response, dataset)
        assert (answer is None) == (pos is None), row["where"]
        if answer is not None:
            found += 1
            assert extract_answer(response[pos:], dataset) == answer, (row["where"], response[pos:])
    assert found >= 900
