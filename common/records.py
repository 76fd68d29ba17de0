"""The file contracts between stages: names that a producer writes and a consumer reads.

One copy of each, so that the trainer, the grader and the report cannot drift apart:
``PHASES`` are the timed phases of one RL step (``metrics.jsonl``: ``time_<phase>``; the wall-clock table),
``REASONS`` the grader's verdict reasons (``Verdict.reason``; the failures table), and
``SUMMARY_KEYS`` the keys every ``<benchmark>.summary.json`` carries (``evaluation.evaluate``).
"""

from __future__ import annotations

PHASES: tuple[str, ...] = ("rollout", "reward", "old_logp", "credit", "update", "checkpoint")
REASONS: tuple[str, ...] = ("correct", "wrong", "no_answer", "parse_error", "timeout")
FAILURE_REASONS: tuple[str, ...] = tuple(r for r in REASONS if r not in ("correct", "wrong"))
SUMMARY_KEYS: tuple[str, ...] = (
    "benchmark", "n_problems", "k", "n_samples", "avg_at_k", "ci95", "pass_at_k", "maj_at_k", "problem_ids",
    "per_problem_correct", "reasons", "grader_version", "template", "mean_response_tokens",
)
