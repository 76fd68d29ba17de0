"""Reading a results tree: summaries, metrics, manifests; the report's constants and options."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from common.records import (  # noqa: F401  (re-exported to the report modules)
    CODE_ONLY_REASONS,
    FAILURE_REASONS,
    PHASES,
    REASONS,
    SUMMARY_KEYS,
)

log = logging.getLogger(__name__)

START_METHOD = "sft"
METHOD_ORDER: tuple[str, ...] = ("sft", "grpo", "dapo", "dapo_twin", "delta", "cf")
METHOD_LABELS: Mapping[str, str] = {
    "sft": "SFT (start)",
    "grpo": "GRPO",
    "dapo": "DAPO",
    "dapo_twin": "DAPO twin (A/A)",
    "delta": "DelTA",
    "cf": "CF",
    "cf_random": "cf_random (control)",
}
AVG = "Avg"
TARGET_PP = 2.0
"""The difference (pp) the power table and the main table's design note plan for."""
EQUIVALENCE_MARGIN_PP = 2.0
"""Default δ of the equivalence verdict: the power target. Differences below the smallest one the benchmark is
sized to detect are practically equivalent; the methods' claimed gains (1-4 pp) straddle it, so a verdict of
"equivalent within ±2" rules out the larger claims, and a smaller δ needs many more seeds (TOST at Δ = 0 needs
δ ≳ 3 SE: 16 seeds at a 1.8 pp seed sd give SE ≈ 0.5 pp; calibrate --sequential measures it)."""
TABLE_NAMES: tuple[str, ...] = ("main", "significance", "learning", "wallclock", "failures", "power", "rliable")
FORMATS: tuple[str, ...] = ("md", "tex", "csv", "html")
EXTRA_KEYS: tuple[str, ...] = ("pass_at_k", "maj_at_k", "base_pass_at_1", "plus_pass_at_1")
OPTIONAL_TABLES: tuple[str, ...] = ("code", "ood", "gsm8k", "audit")
"""Written only when the results have such benchmarks (code: MBPP+/HumanEval+, ood: multiple choice,
gsm8k: GSM8K, audit: ``.samples.jsonl`` of math benchmarks and Math-Verify installed)."""
AUDIT_MAX_SAMPLES = 2000
AUDIT_EXAMPLES = 3


@dataclass(frozen=True)
class ReportOptions:
    """Knobs of the report; every field changes numbers or files, so all are logged."""

    baseline: str = "dapo"
    """Method every other method is compared with (Δ, significance, overhead, time-to-target)."""
    n_boot: int = 2000
    """Bootstrap resamples for CIs and the paired bootstrap."""
    n_perm: int = 2000
    """Sign-flip permutations for the paired permutation test."""
    seed: int = 0
    """Seed of every bootstrap / permutation draw (each draw restarts from it)."""
    alpha: float = 0.05
    """Two-sided level of the CIs (0.05 -> 95 %)."""
    claims: tuple[tuple[str, str, float], ...] = ()
    """(method, scope, claimed gain in pp) rows to check against the CI of Δ; scope is a benchmark or Avg."""
    show_ci: bool = True
    """Show the bootstrap CI in the Markdown / LaTeX main table (the CSV always has it)."""
    benchmarks: tuple[str, ...] = ()
    """Column order of benchmarks (e.g. the paper's); unlisted benchmarks follow alphabetically."""
    formats: tuple[str, ...] = FORMATS
    """Which of md, tex, csv to write."""
    audit_max_samples: int = AUDIT_MAX_SAMPLES
    """Checker audit: at most this many samples per ``.samples.jsonl`` (evenly spaced); 0 skips the audit."""
    equivalence_margin: float = EQUIVALENCE_MARGIN_PP
    """δ (pp): a comparison is *equivalent* when TOST puts Δ inside ±δ (``sequential``)."""
    looks: tuple[int, ...] = ()
    """Seeds at each look of a sequential design (``seeds: auto``); empty = one look at the seeds present."""
    spending: str = "obf"
    """Alpha-spending function of the sequential design: obf (O'Brien-Fleming type) or pocock."""


# ----------------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EvalRecord:
    """One ``{benchmark}.summary.json``: a checkpoint of one run evaluated on one benchmark."""

    method: str
    seed: int
    step: int
    benchmark: str
    n_problems: int
    k: int
    n_samples: int  # graded samples in total (n_problems · k)
    avg_at_k: float
    problem_ids: tuple[str, ...]
    correct: np.ndarray  # [P, k] 0/1 in sample order
    reasons: Mapping[str, int]
    grader_version: str
    data_sha256: str
    manifest_id: str
    path: Path
    extra: Mapping[str, float] = field(default_factory=dict)  # pass_at_k, base/plus_pass_at_1 (code), ...
    template: str = ""  # prompt template, or lm-eval's protocol for multiple choice (lm_eval_mcq_cloze_0shot)
    warnings: tuple[str, ...] = ()  # the scorer's (e.g. one option letter takes >= 90 % of the predictions)

    def per_problem(self) -> pd.Series:
        """Per-problem accuracy (mean over samples), indexed by problem id."""
        if self.correct.size == 0:
            return pd.Series(dtype=float)
        return pd.Series(self.correct.mean(axis=1), index=list(self.problem_ids), dtype=float)


@dataclass(frozen=True, eq=False)
class Results:
    """Everything read from a results tree."""

    root: Path
    evals: tuple[EvalRecord, ...]
    metrics: pd.DataFrame  # one row per (method, seed, step); time_<phase> columns flattened
    manifests: Mapping[tuple[str, int], Mapping[str, Any]]
    token_weight_files: tuple[tuple[str, int, Path], ...] = field(default=())

    @property
    def benchmarks(self) -> list[str]:
        return sorted({r.benchmark for r in self.evals})

    @property
    def methods(self) -> list[str]:
        return sort_methods({r.method for r in self.evals} | set(self.metrics.get("method", [])))


def order_benchmarks(available: Sequence[str], preferred: Sequence[str] = ()) -> list[str]:
    """``preferred`` benchmarks that exist, in that order, then the others alphabetically."""
    unknown = [b for b in preferred if b not in available]
    if unknown:
        log.warning("benchmarks %s in the requested order have no results", unknown)
    head = [b for b in preferred if b in available]
    return head + sorted(b for b in available if b not in head)


def sort_methods(methods: Sequence[str] | set[str]) -> list[str]:
    """Known methods in paper order (sft, grpo, dapo, its A/A twin, delta, cf), then the rest alphabetically."""
    known = [m for m in METHOD_ORDER if m in methods]
    return known + sorted(m for m in methods if m not in METHOD_ORDER)


def benchmark_kind(name: str) -> str:
    """``evaluation.benchmarks`` kind ("math" | "code" | "mcq"); unregistered names count as math."""
    from evaluation.benchmarks import get_benchmark

    try:
        return str(get_benchmark(name).kind)
    except KeyError:
        return "math"


def benchmark_rule(name: str) -> str | None:
    """The answer checker's dataset rule of a benchmark (None for unregistered names)."""
    from evaluation.benchmarks import get_benchmark

    try:
        return get_benchmark(name).grader_rule
    except KeyError:
        return None


def main_benchmarks(benches: Sequence[str]) -> list[str]:
    """The main table's (and every ``Avg``'s) benchmarks: math sets incl. synthetic but not GSM8K.

    GSM8K gets its own table (the CF paper's convention; its 1319 problems would dominate a
    problem-weighted Avg). Falls back to GSM8K alone, then to every benchmark, when nothing else is there.
    """
    math_sets = [b for b in benches if benchmark_kind(b) == "math"]
    return [b for b in math_sets if b != "gsm8k"] or math_sets or list(benches)


def benchmark_groups(benches: Sequence[str]) -> dict[str, list[str]]:
    """Table name -> its benchmarks (in the given order); optional tables only when non-empty."""
    groups = {"main": main_benchmarks(benches)}
    optional = {
        "code": [b for b in benches if benchmark_kind(b) == "code"],
        "ood": [b for b in benches if benchmark_kind(b) == "mcq"],
        "gsm8k": [b for b in benches if b == "gsm8k"],
    }
    groups.update({name: group for name, group in optional.items() if group})
    return groups


def _parse_step(value: Any, path: Path) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{path}: step must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    raise ValueError(f"{path}: step must be an integer, got {value!r}")


def _read_summary(path: Path) -> EvalRecord:
    data = json.loads(path.read_text(encoding="utf-8"))
    missing = [key for key in SUMMARY_KEYS if key not in data]
    if missing:
        raise ValueError(f"{path}: missing keys {missing}")
    problem_ids = tuple(str(p) for p in data["problem_ids"])
    k = int(data["k"])
    rows = data["per_problem_correct"]
    if any(len(row) != k for row in rows):
        raise ValueError(f"{path}: every per_problem_correct row must have k={k} values")
    correct = np.asarray(rows, dtype=np.int8).reshape(len(rows), k)
    if len(problem_ids) != correct.shape[0] or int(data["n_problems"]) != correct.shape[0]:
        raise ValueError(
            f"{path}: n_problems={data['n_problems']}, {len(problem_ids)} problem_ids and "
            f"{correct.shape[0]} per_problem_correct rows disagree"
        )
    avg = float(data["avg_at_k"])
    if correct.size and abs(correct.mean() - avg) > 1e-6:
        log.warning("%s: avg_at_k=%.6f but per_problem_correct averages %.6f", path, avg, correct.mean())
    record = EvalRecord(
        method=str(data["method"]),
        seed=int(data["seed"]),
        step=_parse_step(data["step"], path),
        benchmark=str(data["benchmark"]),
        n_problems=int(data["n_problems"]),
        k=k,
        n_samples=int(data["n_samples"]),
        avg_at_k=avg,
        problem_ids=problem_ids,
        correct=correct,
        reasons={str(key): int(value) for key, value in data["reasons"].items()},
        grader_version=str(data["grader_version"]),
        data_sha256=str(data["data_sha256"] or ""),  # the evaluator writes null when it had no file
        manifest_id=str(data.get("manifest_id") or ""),
        path=path,
        extra={key: float(data[key]) for key in EXTRA_KEYS if isinstance(data.get(key), (int, float))},
        template=str(data.get("template") or ""),
        warnings=tuple(str(w) for w in data.get("warnings") or ()),
    )
    expected = (path.parent.parent.parent.name, f"seed{record.seed}", f"step{record.step}", record.benchmark)
    actual = (
        path.parent.parent.parent.name,
        path.parent.parent.name,
        path.parent.name,
        path.name.split(".")[0],
    )
    if (record.method, *expected[1:]) != actual:
        log.warning("%s: contents (%s) disagree with the path", path, expected)
    return record


def _read_metrics(path: Path, method: str, seed: int) -> list[dict[str, Any]]:
    rows = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        raw = json.loads(line)
        if "step" not in raw:
            raise ValueError(f"{path}:{line_no}: record without 'step'")
        row: dict[str, Any] = {"method": method, "seed": seed}
        for key, value in raw.items():
            if key == "time" and isinstance(value, Mapping):
                for phase, seconds in value.items():
                    row[f"time_{phase}"] = float(seconds)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                row[key] = value
        rows.append(row)
    return rows


def _seed_of(dirname: str) -> int | None:
    return int(dirname[4:]) if dirname.startswith("seed") and dirname[4:].isdigit() else None


def load_results(root: Path | str, eval_dir: str = "eval") -> Results:
    """Read ``root/<eval_dir>/*/seed*/step*/*.summary.json`` and ``root/runs/*/seed*/`` metrics and manifests
    (``eval_dir`` ``real_eval``: the real-benchmark evaluation of config ``real_eval``)."""
    root = Path(root)
    paths = sorted((root / eval_dir).glob("*/seed*/step*/*.summary.json"))
    if not paths:
        raise FileNotFoundError(f"no *.summary.json under {root / eval_dir}")
    evals = tuple(_read_summary(p) for p in paths)
    keys = [(r.method, r.seed, r.step, r.benchmark) for r in evals]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate (method, seed, step, benchmark) summaries")

    metric_rows: list[dict[str, Any]] = []
    manifests: dict[tuple[str, int], Mapping[str, Any]] = {}
    weights: list[tuple[str, int, Path]] = []
    for run_dir in sorted((root / "runs").glob("*/seed*")):
        seed = _seed_of(run_dir.name)
        if seed is None or not run_dir.is_dir():
            continue
        method = run_dir.parent.name
        if (run_dir / "metrics.jsonl").is_file():
            metric_rows.extend(_read_metrics(run_dir / "metrics.jsonl", method, seed))
        if (run_dir / "manifest.json").is_file():
            manifests[(method, seed)] = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
        if (run_dir / "token_weights.jsonl").is_file():
            weights.append((method, seed, run_dir / "token_weights.jsonl"))
    metrics = pd.DataFrame(metric_rows)
    if metrics.empty:
        metrics = pd.DataFrame(columns=["method", "seed", "step"])
    else:
        metrics = metrics.sort_values(["method", "seed", "step"], kind="mergesort")
        dupes = metrics.duplicated(["method", "seed", "step"], keep="last")
        if dupes.any():  # a resumed run logs some steps twice; the later record wins
            log.warning(
                "%d repeated (method, seed, step) metric records; keeping the last of each", int(dupes.sum())
            )
            metrics = metrics[~dupes]
        metrics = metrics.reset_index(drop=True)
        if "time_total" not in metrics and any(f"time_{p}" in metrics for p in PHASES):
            metrics["time_total"] = metrics[[f"time_{p}" for p in PHASES if f"time_{p}" in metrics]].sum(
                axis=1
            )
    log.info(
        "loaded %d summaries, %d metric records, %d manifests from %s",
        len(evals),
        len(metrics),
        len(manifests),
        root,
    )
    return Results(
        root=root, evals=evals, metrics=metrics, manifests=manifests, token_weight_files=tuple(weights)
    )


