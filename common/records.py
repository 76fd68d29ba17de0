"""The file contracts between stages: names that a producer writes and a consumer reads.

One copy of each, so that the trainer, the grader and the report cannot drift apart:
``PHASES`` are the timed phases of one RL step (``metrics.jsonl``: ``time_<phase>``; the wall-clock table),
``REASONS`` the verdict reasons (the answer checker's ``Verdict.reason`` and the code scorer's ``crash``; the
failures table), and ``SUMMARY_KEYS`` the keys every ``<benchmark>.summary.json`` carries (written by
``evaluation.scoring``, required by ``evaluation.report.load``). ``tests/test_drift.py`` keeps them single.
"""

from __future__ import annotations

PHASES: tuple[str, ...] = ("rollout", "reward", "old_logp", "credit", "update", "checkpoint")
REASONS: tuple[str, ...] = ("correct", "wrong", "no_answer", "parse_error", "timeout", "crash")
CODE_ONLY_REASONS: tuple[str, ...] = ("crash",)
"""Reasons only code scoring gives (the program crashed, ``evaluation.scoring``); a table shows them when seen."""
FAILURE_REASONS: tuple[str, ...] = tuple(r for r in REASONS if r not in ("correct", "wrong"))
SUMMARY_KEYS: tuple[str, ...] = (
    "benchmark", "method", "seed", "step", "n_problems", "k", "n_samples", "avg_at_k", "problem_ids",
    "per_problem_correct", "reasons", "grader_version", "data_sha256",
)
