"""The synthetic task: deterministic, disjoint splits, solutions whose arithmetic is right."""

import re

from training.config import config_from_dict
from training.data import make_splits

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


def test_every_calculation_span_is_correct_and_answer_is_boxed():
    train, _ = make_splits(config_from_dict(BASE).task)
    for p in train:
        spans = re.findall(r"(\d+) ([+-]) (\d+) = (\d+)\.", p.solution)
        assert spans, p.solution
        for a, op, b, c in spans:
            assert (int(a) + int(b) if op == "+" else int(a) - int(b)) == int(c)
        assert p.solution.endswith(f"\\boxed{{{p.answer}}}")
        assert spans[-1][3] == p.answer
        assert "Let's think step by step." in p.solution  # shared scaffolding
