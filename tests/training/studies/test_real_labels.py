"""Exact labels on real text (issue 34, training.studies.real_labels): a case table of SmolLM2-135M-Instruct-like
chain_sum responses (several are verbatim from the real_cpu reference run's mc_records.jsonl), tokenised as its
tokenizer does (one token per digit, a leading space on words and operators)."""

from __future__ import annotations

import pytest

from training.studies.real_labels import chain_importance, parse_chain, task_labels

EOS = "<|im_end|>"


def tok(text: str) -> list[str]:
    """SmolLM2-like pieces: one per digit, words and operators with their leading space, EOS its own piece."""
    import re

    body = text.removesuffix(EOS)
    pieces = re.findall(r"\d| ?[A-Za-z']+| ?[^\sA-Za-z\d]| (?=\d)", body)
    assert "".join(pieces) == body, pieces
    return pieces + ([EOS] if text.endswith(EOS) else [])


def labelled(expr: str, text: str, correct: bool) -> list[tuple[str, float]]:
    """The decisive pieces; a response without EOS was cut at the length cap."""
    pieces = tok(text)
    return [(p, v) for p, v in zip(pieces, chain_importance(expr, pieces, correct, text.endswith(EOS))) if v]


@pytest.mark.parametrize("expr, text, correct, expected", [
    # right: operands and answer, the EOS and the list marker "1." unlabelled (verbatim from the reference run)
    ("4 + 2", "1. 4 + 2 = 6." + EOS, True, [("4", 1), ("2", 1), ("6", 1)]),
    ("6 + 9", "6 + 9 = 15" + EOS, True, [("6", 1), ("9", 1), ("1", 1), ("5", 1)]),
    # right, the bare answer
    ("9 + 9", "18" + EOS, True, [("1", 1), ("8", 1)]),
    # wrong: the wrong result after "=" (verbatim), even when it equals an operand ("6 + 9 = 9")
    ("9 + 9", "9 + 9 = 10" + EOS, False, [("1", -1), ("0", -1)]),
    ("6 + 9", "6 + 9 = 9" + EOS, False, [("9", -1)]),
    # wrong: the stated answer is the last number, an operand repeated there is a slip (verbatim "6 (6)")
    ("6 + 6", "6 (6)" + EOS, False, [("6", -1)]),
    # wrong, prose: the first wrong number only (7), not the later operand 3 (verbatim, cut off: no EOS)
    ("6 - 3", "To solve this, we find the difference between 6 and 3, which is 7, and then subtract 3", False,
     [("7", -1)]),
    # wrong with no number, and wrong with only right numbers, cut off before its answer: nothing decisive
    ("4 + 5", "I cannot solve this problem." + EOS, False, []),
    ("4 + 5", "4 + 5 =", False, []),
    ("4 + 5", "4 + 5" + EOS, False, [("5", -1)]),  # ended: its last number is the answer it states
    # right with no number (the checker cannot have accepted it, but the labeller must not invent): nothing
    ("4 + 5", "Nine." + EOS, True, []),
    # negative numbers: "6 - 8" is an operation, "= -2" a negative result, its sign token labelled with it
    ("6 - 8", "6 - 8 = -2" + EOS, True, [("6", 1), ("8", 1), (" -", 1), ("2", 1)]),
    ("6 - 8", "6 - 8 = 2" + EOS, False, [("2", -1)]),
    ("6 - 8", "The answer is -2." + EOS, True, [(" -", 1), ("2", 1)]),
    # repeated operands: every occurrence of a right number is decisive in a right response
    ("3 + 3", "3 + 3 = 6. So 3 + 3 is 6." + EOS, True, [("3", 1), ("3", 1), ("6", 1), ("3", 1), ("3", 1),
                                                         ("6", 1)]),
    # three terms: the correct partial sum is decisive; a wrong partial sum is the first wrong number
    ("1 - 6 + 9", "1 - 6 = -5, -5 + 9 = 4" + EOS, True, [("1", 1), ("6", 1), (" -", 1), ("5", 1), (" -", 1),
                                                         ("5", 1), ("9", 1), ("4", 1)]),
    ("1 - 6 + 9", "1 - 6 = 5, 5 + 9 = 14" + EOS, False, [("5", -1)]),
    # "Step 2" is not a number of the computation
    ("2 + 5", "Step 2: 2 + 5 = 8" + EOS, False, [("8", -1)]),
])
def test_chain_importance_case_table(expr, text, correct, expected):
    assert labelled(expr, text, correct) == [(p, float(v)) for p, v in expected]


def test_labels_cover_every_token_and_sit_on_the_generated_pieces():
    pieces = ["6", " +", " ", "9", " =", " ", "1", "5", EOS]
    assert chain_importance("6 + 9", pieces, True) == [1, 0, 0, 1, 0, 0, 1, 1, 0]
    assert chain_importance("6 + 9", pieces, False) == [0.0] * 9  # 15 is right: a wrong verdict has no slip


def test_parse_chain_and_tasks_without_labels():
    c = parse_chain("1 - 6 + 9")
    assert c.gold == 4 and c.partials == {-5, 4} and {1, 6, -6, 9} <= c.operands
    assert parse_chain("7").gold == 7
    with pytest.raises(ValueError, match="not a chain"):
        parse_chain("3 * 4")
    assert task_labels({"task": "spell_backward", "entry": {}}, ["olleh"], True) is None
    assert task_labels({"task": "chain_sum", "entry": {"expression": "2 + 2"}}, ["4"], True) == [1.0]
