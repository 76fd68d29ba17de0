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
    row = {"task": "chain_sum", "entry": {"expression": "2 + 2"}, "answer": "4", "id": "rg-train-3"}
    assert task_labels(row, ["4"], True) == [1.0]
    with pytest.raises(ValueError, match="rg-train-3.*remake train.jsonl"):
        task_labels({**row, "answer": "5"}, ["4"], True)


def _records(credit_of, n_resp: int = 40, seed: int = 0):
    """Fidelity records of responses with random lengths and chain_sum-like binary labels (a right response:
    several +1 tokens; a wrong one: one -1 span or none), credit from ``credit_of(labels, advantage)``."""
    import numpy as np
    import torch

    from training.studies.fidelity import batch_fidelity

    rng = np.random.default_rng(seed)
    labels, credit, adv = [], [], []
    for i in range(n_resp):
        n, right = int(rng.integers(3, 30)), bool(i % 2)
        g = np.zeros(n)
        g[rng.choice(n, size=int(rng.integers(1, n)) if right else int(rng.integers(0, 3)), replace=False)] = \
            1.0 if right else -1.0
        a = (1.0 if right else -1.0) * float(rng.uniform(0.2, 2.0))
        labels.append(g.tolist()), adv.append(a), credit.append(credit_of(g, a, n))
    width = max(len(g) for g in labels)
    c = torch.zeros(len(labels), width)
    mask = torch.zeros(len(labels), width)
    for i, row in enumerate(credit):
        c[i, : len(row)], mask[i, : len(row)] = torch.tensor(row), 1.0
    return batch_fidelity(0, c, labels, mask, torch.tensor(adv), 0.1, [i // 4 for i in range(len(labels))])


def test_uniform_credit_scores_exactly_the_chance_level_and_label_credit_scores_one():
    """The table's control: credit uniform within a response (GRPO's 1/|o_i|, DAPO's 1/T, times A_i) scores
    the chance level of fidelity.chance_levels on every statistic; credit equal to the labels scores 1."""
    import numpy as np

    from training.studies.fidelity import chance_levels, statistics_of

    uniform = _records(lambda g, a, n: [a / n] * n)
    stats, chance = statistics_of(uniform), chance_levels(uniform, 0.1)
    assert stats["rho"] == 0.0
    assert stats["overlap"] == pytest.approx(chance["overlap"], abs=1e-12)
    assert stats["decisive_share"] == pytest.approx(chance["decisive_share"], abs=1e-12)
    assert 0 < chance["overlap"] < 1 and 0 < chance["decisive_share"] < 1
    # a method that puts its credit on the labelled tokens beats chance: rho 1, overlap 1, share 1
    exact = _records(lambda g, a, n: (a * np.abs(g)).tolist())
    s = statistics_of(exact)
    assert s["rho"] == pytest.approx(1.0) and s["overlap"] == pytest.approx(1.0) and s["decisive_share"] == 1.0
    # ... and a chance level that ignored the per-response mass would be wrong for GRPO's 1/|o_i| credit
    pooled = sum(r.n_decisive for r in uniform) / sum(r.n_tokens for r in uniform)
    assert abs(pooled - stats["decisive_share"]) > 1e-3


def test_label_table_names_tasks_without_labels_not_defined():
    """A mix task that defines no labels is named "not defined" with its response count, even when unprobed."""
    from training.studies.real_credit import label_markdown

    labels = {"n_labelled": 3, "n_right": 1, "n_wrong": 2, "n_with_decisive": 2, "n_responses": 5, "table": [],
              "tasks": {"chain_sum": 3, "spell_backward": 2}, "mix": ["chain_sum", "spell_backward", "count_bits"]}
    text = label_markdown("sft: 5 responses", labels, 0.1)
    assert "chain_sum: 3 responses, exact labels" in text
    assert "spell_backward: 2 responses, **not defined**" in text and "count_bits: 0 responses, **not defined**" in text
