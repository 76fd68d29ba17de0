"""The synthetic task: deterministic, disjoint splits, solutions whose arithmetic is right."""

import re

from common.config import config_from_dict
from training.data import RESTATEMENT_RE, SCAFFOLD, make_splits, restatement

BASE = {"experiment": "t", "output_dir": "x", "seeds": [1], "methods": ["dapo"],
        "task": {"n_train": 200, "n_heldout": 50, "seed": 7}}


def test_same_seed_same_problems_other_seed_other_problems():
    a = make_splits(config_from_dict(BASE).task)
    b = make_splits(config_from_dict(BASE).task)
    c = make_splits(config_from_dict({**BASE, "task": {**BASE["task"], "seed": 8}}).task)
    assert a == b
    assert a != c


def test_train_and_heldout_do_not_share_questions():
    train, heldout = make_splits(config_from_dict(BASE).task)
    assert len(train) == 200 and len(heldout) == 50
    train_keys = {tuple(re.findall(r"\d+|gets|gives", p.question)) for p in train}
    held_keys = {tuple(re.findall(r"\d+|gets|gives", p.question)) for p in heldout}
    assert not train_keys & held_keys


def test_without_slips_every_calculation_span_is_correct_and_answer_is_boxed():
    train, _ = make_splits(config_from_dict({**BASE, "task": {**BASE["task"], "slip_prob": 0.0}}).task)
    for p in train:
        spans = re.findall(r"(\d+) ([+-]) (\d+) = (\d+)\.", p.solution)
        assert spans, p.solution
        for a, op, b, c in spans:
            assert (int(a) + int(b) if op == "+" else int(a) - int(b)) == int(c)
        assert p.solution.endswith(f"\\boxed{{{p.answer}}}")
        assert spans[-1][3] == p.answer
        assert "Let's think step by step." in p.solution  # shared scaffolding


def test_slipped_solutions_have_exactly_one_wrong_span_and_a_consistent_chain():
    train, _ = make_splits(config_from_dict({**BASE, "task": {**BASE["task"], "slip_prob": 0.5}}).task)
    slipped = 0
    for p in train:
        spans = re.findall(r"(-?\d+) ([+-]) (\d+) = (-?\d+)\.", p.solution)
        wrong = [(a, op, b, c) for a, op, b, c in spans
                 if (int(a) + int(b) if op == "+" else int(a) - int(b)) != int(c)]
        assert len(wrong) <= 1, p.solution
        for (_, _, _, c), (a2, _, _, _) in zip(spans, spans[1:]):
            assert c == a2, p.solution  # the chain carries the written value forward
        boxed = re.search(r"\\boxed\{(-?\d+)\}", p.solution).group(1)
        assert boxed == spans[-1][3]
        assert (boxed == p.answer) == (not wrong)  # the gold is always the true answer
        slipped += bool(wrong)
    assert 0.4 < slipped / len(train) < 0.6


def test_long_scaffolding_adds_restatements_and_keeps_the_arithmetic():
    """task.scaffold_repeats: the same problems and calculations, r digit-free restatements after the
    scaffold; r = 0 is the default task byte for byte."""
    plain, _ = make_splits(config_from_dict(BASE).task)
    zero = make_splits(config_from_dict({**BASE, "task": {**BASE["task"], "scaffold_repeats": 0}}).task)[0]
    longer, _ = make_splits(config_from_dict({**BASE, "task": {**BASE["task"], "scaffold_repeats": 5}}).task)
    assert zero == plain
    for p, q in zip(plain, longer, strict=True):
        name, _, start, obj = p.question.split()[:4]
        extra = restatement(name, obj.rstrip("."), 5)
        assert (p.question, p.answer) == (q.question, q.answer)
        assert q.solution == p.solution.replace(f"{SCAFFOLD} ", f"{SCAFFOLD} {extra}", 1)
        assert len(re.findall(RESTATEMENT_RE, extra)) == 5 and not re.search(r"\d|[+=-]", extra)
