"""The embedded synthetic task: short multi-step arithmetic word problems with worked solutions.

Each solution mixes *scaffolding* shared by right and wrong answers (``Let's think step by step.``; a
restatement of the question was dropped to keep solutions short) with *calculation spans*
(``7 + 5 = 12.``) and ends in ``\\boxed{}``,
so the credit-assignment methods have something to discriminate: DelTA should down-weight the shared
scaffolding, CF should find the calculation spans whose masking changes the answer.

*Slips.* A fraction ``task.slip_prob`` of the SFT solutions carry one calculation slip: one span's
result is off by 1 or 2 and the rest of the chain continues from the wrong value (the boxed answer is
then wrong too). The warm-started policy therefore hesitates exactly at calculation tokens, while the
scaffolding is certain: the regime RLVR works in on real models (sharpening what the policy already
knows), reached here in minutes instead of GPU-days. Rewards and evaluation always use the true answer.

*Long scaffolding* (``task.scaffold_repeats`` = r > 0): r restatement sentences (``RESTATEMENTS`` in turn,
with the problem's name and object, no digits) follow the scaffold, so most response tokens are shared
scaffolding and the decisive ones stay the same few: the regime where credit assignment should matter
(issue 16). r = 0 writes the default task byte for byte (no extra random draws).

    Question: Sam has 7 pens. Sam gets 5 more and then gives away 3. How many pens does Sam have?
    Answer: Let's think step by step. 7 + 5 = 12. 12 - 3 = 9. \\boxed{9}

Deterministic: everything is drawn from ``random.Random(seed)``; train and held-out problems are
disjoint by (operands, operations). ``python -m training.data`` writes JSONL + a manifest with sha256.
"""

from __future__ import annotations

import argparse
import random
import re
from dataclasses import dataclass

from common.config import TaskConfig, load_config
from common.io import sha256_file, write_json_atomic, write_jsonl_atomic

NAMES = ("Sam", "Ann", "Tom", "Mia", "Ben", "Eva", "Leo", "Zoe", "Max", "Ivy")
OBJECTS = ("pens", "apples", "coins", "books", "cards", "shells", "stamps", "beads")
PROMPT_TEMPLATE = "Question: {question}\nAnswer:"
SCAFFOLD = "Let's think step by step."
RESTATEMENTS = (
    "We need the number of {obj} that {name} has at the end.",
    "{name} changes the number of {obj} one step at a time.",
    "We follow each change in the order of the question.",
    "Then we write the final number of {obj} in a box.",
)
RESTATEMENT_RE = "|".join(re.escape(t).replace(r"\{obj\}", r"\w+").replace(r"\{name\}", r"\w+")
                          for t in RESTATEMENTS)
"""Any restatement sentence (``training.studies.importance`` classes it as scaffolding)."""


def restatement(name: str, obj: str, repeats: int) -> str:
    """``repeats`` restatement sentences, each followed by a space ('' for 0)."""
    return "".join(RESTATEMENTS[i % len(RESTATEMENTS)].format(name=name, obj=obj) + " " for i in range(repeats))


@dataclass(frozen=True)
class Problem:
    id: str
    question: str
    prompt: str
    solution: str
    answer: str


def make_problem(rng: random.Random, cfg: TaskConfig, idx: int) -> tuple[tuple, Problem]:
    """Draw one problem. Returns (dedup key, problem); every intermediate value stays in [0, max_value]."""
    name, obj = rng.choice(NAMES), rng.choice(OBJECTS)
    n_ops = rng.randint(cfg.min_ops, cfg.max_ops)
    value = rng.randint(1, cfg.max_operand)
    clauses, spans, key = [], [], [value]
    slip_at = rng.randrange(n_ops) if rng.random() < cfg.slip_prob else -1
    written = value  # the value the (possibly slipped) worked solution carries forward
    for i in range(n_ops):
        can_sub = value >= 1
        op = "-" if can_sub and rng.random() < 0.5 else "+"
        if op == "+":
            operand = rng.randint(1, min(cfg.max_operand, max(1, cfg.max_value - value)))
            result = value + operand
            clauses.append(f"gets {operand} more")
        else:
            operand = rng.randint(1, min(cfg.max_operand, value))
            result = value - operand
            clauses.append(f"gives away {operand}")
        shown = (written + operand if op == "+" else written - operand)
        if i == slip_at:
            shown = max(0, shown + rng.choice((-2, -1, 1, 2)))
            shown = shown if shown != (written + operand if op == "+" else written - operand) else shown + 1
        spans.append(f"{written} {op} {operand} = {shown}.")
        key += [op, operand]
        value, written = result, shown
    action = " and then ".join(clauses)
    question = f"{name} has {key[0]} {obj}. {name} {action}. How many {obj} does {name} have?"
    scaffold = f" {SCAFFOLD} " + restatement(name, obj, cfg.scaffold_repeats)
    solution = scaffold + " ".join(spans) + f" \\boxed{{{written}}}"
    problem = Problem(
        id=f"syn-{idx:05d}",
        question=question,
        prompt=PROMPT_TEMPLATE.format(question=question),
        solution=solution,
        answer=str(value),
    )
    return tuple(key), problem


def make_splits(cfg: TaskConfig) -> tuple[list[Problem], list[Problem]]:
    """Train and held-out splits, disjoint by the arithmetic (names/objects may repeat)."""
    rng = random.Random(cfg.seed)
    seen: set[tuple] = set()
    problems: list[Problem] = []
    attempts = 0
    while len(problems) < cfg.n_train + cfg.n_heldout:
        attempts += 1
        if attempts > 100 * (cfg.n_train + cfg.n_heldout):
            raise ValueError("task config admits too few distinct problems; raise max_operand or max_ops")
        key, problem = make_problem(rng, cfg, len(problems))
        if key in seen:
            continue
        seen.add(key)
        problems.append(problem)
    return problems[: cfg.n_train], problems[cfg.n_train :]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--train", required=True, help="output train JSONL")
    parser.add_argument("--heldout", required=True, help="output held-out JSONL")
    parser.add_argument("--manifest", required=True, help="output manifest JSON (sha256, counts, config)")
    args = parser.parse_args(argv)
    cfg = load_config(args.config).task
    train, heldout = make_splits(cfg)
    write_jsonl_atomic(args.train, [p.__dict__ for p in train])
    write_jsonl_atomic(args.heldout, [p.__dict__ for p in heldout])
    write_json_atomic(
        args.manifest,
        {
            "task": cfg.__dict__,
            "files": {
                "train": {"path": args.train, "count": len(train), "sha256": sha256_file(args.train)},
                "heldout": {"path": args.heldout, "count": len(heldout), "sha256": sha256_file(args.heldout)},
            },
        },
    )
    print(f"wrote {len(train)} train / {len(heldout)} held-out problems")


if __name__ == "__main__":
    main()
