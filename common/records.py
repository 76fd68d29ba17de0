"""The file contracts between stages: names that a producer writes and a consumer reads.

One copy of each, so that the trainer, the grader and the report cannot drift apart:
``PHASES`` are the timed phases of one RL step (``metrics.jsonl``: ``time_<phase>``; the wall-clock table),
``REASONS`` the verdict reasons (the answer checker's ``Verdict.reason``, the code scorer's ``crash``, the
driver's ``generation_error``; the failures table), ``DROP_KEYS`` the drop counts of a set
(``evaluation.scoring.drop_counts``: every summary, ``results.json``, every table row), and ``SUMMARY_KEYS`` the
keys every ``<benchmark>.summary.json`` carries (written by ``evaluation.scoring``, required by
``evaluation.report.load``). ``tests/test_drift.py`` keeps them single.
"""

from __future__ import annotations

PHASES: tuple[str, ...] = ("rollout", "reward", "old_logp", "credit", "update", "checkpoint")
REASONS: tuple[str, ...] = ("correct", "wrong", "no_answer", "parse_error", "timeout", "crash", "generation_error")
CODE_ONLY_REASONS: tuple[str, ...] = ("crash",)
"""Reasons only code scoring gives (the program crashed, ``evaluation.scoring``); a table shows them when seen."""
UNGRADED_REASONS: tuple[str, ...] = ("generation_error",)
"""Samples the engine failed to generate (``evaluation.driver``), never graded; a table shows them when seen."""
FAILURE_REASONS: tuple[str, ...] = tuple(r for r in REASONS if r not in ("correct", "wrong"))
SUMMARY_KEYS: tuple[str, ...] = (
    "benchmark", "method", "seed", "step", "n_problems", "k", "n_samples", "avg_at_k", "problem_ids",
    "per_problem_correct", "reasons", "grader_version", "data_sha256",
)
DROP_KEYS: tuple[str, ...] = (
    "requested", "graded", "failed", "generation_error", "sandbox_error", "grader_timeout", "overlong", "no_answer",
)
"""A set's samples and where they went (``summary["drops"]``); the rule of each is :data:`DROP_RULE`."""
DROP_RULE = (
    "Drops: requested = problems × k; failed = generation error (the engine raised for the prompt, e.g. longer "
    "than the model's context; never graded) + sandbox error (the code sandbox died: crash) + grader timeout (the "
    "checker's worker killed after grader_timeout_s); graded = requested − failed; overlong = cut at "
    "max_new_tokens (finish_reason length; graded as cut); no answer = graded with nothing to extract (no_answer). "
    "Failed and unanswered samples count as wrong: accuracy's denominator is the requested samples."
)
