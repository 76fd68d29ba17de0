"""Paper-style result tables from an evaluated results tree.

``python -m evaluation.report --results OUT --out OUT/tables [--baseline dapo] [--plots]``

Reads the files the workflow writes under ``OUT`` (see ``load_results``) and builds these tables, each
from one pandas DataFrame that feeds Markdown, LaTeX (booktabs) and CSV. Benchmarks are split by their
registry kind (``evaluation.benchmarks``; unregistered names count as math), like the CF paper:

``main``          avg@k (%) per method on the math sets (incl. synthetic, without GSM8K) plus ``Avg``
                  weighted by problem count (DelTA §1.8 convention), mean ± sd over seeds, 95 % bootstrap
                  CI over problems, best per column in bold, Δ vs the baseline. Every ``Avg`` of the report
                  (learning curves, significance, time-to-target, figures) is over these benchmarks.
``significance``  paired test of each method against the baseline over problems × samples × seeds:
                  paired percentile bootstrap over problems (stratified by benchmark) and a sign-flip
                  permutation test over problems; seeds are paired by seed id, samples are averaged
                  (they are not paired); Holm-adjusted permutation p per scope; optional claimed gain.
``learning``      eval accuracy per method and step (mean ± sd over seeds) and training accuracy.
``wallclock``     mean step time per phase (means: checkpointing runs every N steps only), overhead vs
                  baseline, tokens/s (generated / rollout s, trained / update s), peak memory, and the
                  steps and seconds to reach the baseline's final Avg (the CF paper's claim).
``failures``      grader reason counts and rates per method at the final step.
``code``          (code sets) MBPP+ / HumanEval+ base and plus pass@1.
``ood``           (multiple-choice sets) avg@k as in ``main``.
``gsm8k``         (when GSM8K is evaluated) avg@k as in ``main``.
``audit``         (math ``.samples.jsonl`` present) verdicts that change when the final checkpoint's
                  samples are re-graded with Math-Verify, per method × benchmark, with examples.

The first five are always written; the last four only when they apply (stale ones are removed).
HTML (one standalone page per table, for ``snakemake --report``) shows the Markdown cells. CSV holds
numbers only (4 decimals, ints as ints, empty for missing); provenance (k, samples, seeds, grader
version, data sha256, manifest ids, git commit) is a footer in Markdown, LaTeX and HTML and the full
set goes to ``provenance.json``. Timing and memory columns are prefixed ``time_`` / ``mem_`` so that
``evaluation.regress`` can skip them. All writers are deterministic and every write is atomic.
"""

from __future__ import annotations

import argparse
import html
import io
import json
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from common.io import write_text_atomic

from evaluation.metrics import bootstrap_ci
from evaluation.metrics import weighted_average as _weighted_average

log = logging.getLogger(__name__)

PHASES: tuple[str, ...] = ("rollout", "reward", "old_logp", "credit", "update", "checkpoint")
REASONS: tuple[str, ...] = ("correct", "wrong", "no_answer", "parse_error", "timeout")
FAILURE_REASONS: tuple[str, ...] = ("no_answer", "parse_error", "timeout")
START_METHOD = "sft"
METHOD_ORDER: tuple[str, ...] = ("sft", "grpo", "dapo", "delta", "cf")
METHOD_LABELS: Mapping[str, str] = {
    "sft": "SFT (start)",
    "grpo": "GRPO",
    "dapo": "DAPO",
    "delta": "DelTA",
    "cf": "CF",
}
AVG = "Avg"
TABLE_NAMES: tuple[str, ...] = ("main", "significance", "learning", "wallclock", "failures")
FORMATS: tuple[str, ...] = ("md", "tex", "csv", "html")
EXTRA_KEYS: tuple[str, ...] = ("pass_at_k", "maj_at_k", "base_pass_at_1", "plus_pass_at_1")
OPTIONAL_TABLES: tuple[str, ...] = ("code", "ood", "gsm8k", "audit")
"""Written only when the results have such benchmarks (code: MBPP+/HumanEval+, ood: multiple choice,
gsm8k: GSM8K, audit: ``.samples.jsonl`` of math benchmarks and Math-Verify installed)."""
AUDIT_MAX_SAMPLES = 2000
AUDIT_EXAMPLES = 3
SUMMARY_KEYS: tuple[str, ...] = (
    "benchmark", "method", "seed", "step", "n_problems", "k", "n_samples", "avg_at_k", "problem_ids",
    "per_problem_correct", "reasons", "grader_version", "data_sha256",
)  # fmt: skip


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
    """Known methods in paper order (sft, grpo, dapo, delta, cf), then the rest alphabetically."""
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


# ----------------------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------------------


def weighted_average(values: Sequence[float], weights: Sequence[float]) -> float:
    """``metrics.weighted_average`` (Σ w·v / Σ w), NaN when a value is missing or no weight is positive."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    if v.size == 0 or np.isnan(v).any() or w.sum() <= 0:
        return math.nan
    return _weighted_average(v, w)


def _sd(values: Sequence[float]) -> float:
    """Sample standard deviation (ddof=1); NaN for fewer than two values."""
    v = np.asarray(values, dtype=float)
    return float(v.std(ddof=1)) if v.size > 1 else math.nan


def _stratified_boot_means(strata: Sequence[np.ndarray], n_boot: int, seed: int) -> np.ndarray:
    """Bootstrap distribution of the pooled mean, resampling units with replacement within each stratum.

    With one stratum per benchmark and one unit per problem, the pooled mean is the problem-count-weighted
    average, so this is the bootstrap of the paper's Avg.
    """
    rng = np.random.default_rng(seed)
    total = np.zeros(n_boot)
    count = 0
    for values in strata:
        values = np.asarray(values, dtype=float)
        if values.size == 0:
            continue
        idx = rng.integers(0, values.size, size=(n_boot, values.size))
        total += values[idx].sum(axis=1)
        count += values.size
    return total / max(count, 1)


def stratified_bootstrap_ci(
    strata: Sequence[np.ndarray], *, n_boot: int = 2000, seed: int = 0, alpha: float = 0.05
) -> tuple[float, float]:
    """Percentile CI of the pooled mean of ``strata`` (per-problem values, one array per benchmark).

    One stratum is ``metrics.bootstrap_ci``; several resample problems within each benchmark.
    """
    nonempty = [np.asarray(s, dtype=float) for s in strata if np.asarray(s).size]
    if not nonempty:
        return math.nan, math.nan
    if len(nonempty) == 1:
        return bootstrap_ci(nonempty[0], n_boot=n_boot, seed=seed, alpha=alpha)
    boot = _stratified_boot_means(strata, n_boot, seed)
    lo, hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


@dataclass(frozen=True)
class PairedResult:
    """Paired comparison of a method with the baseline; Δ and its CI in the units of the inputs."""

    delta: float
    ci_lo: float
    ci_hi: float
    p_bootstrap: float
    p_permutation: float
    n_units: int


def paired_test(
    diffs: Sequence[np.ndarray], *, n_boot: int = 2000, n_perm: int = 2000, seed: int = 0, alpha: float = 0.05
) -> PairedResult:
    """Paired bootstrap and sign-flip permutation test of the mean of per-problem differences.

    ``diffs`` holds one array per stratum (benchmark) of per-problem differences method − baseline, each
    already averaged over samples and paired seeds. Δ is the pooled mean (weights = problem counts).
    Bootstrap: percentile CI and two-sided p = 2·min(P*(Δ* ≤ 0), P*(Δ* ≥ 0)) with the +1 correction.
    Permutation: each problem's difference keeps or flips its sign (labels swapped within the pair);
    p = (1 + #{|Δ_perm| ≥ |Δ|}) / (1 + n_perm). Identical methods give p = 1 for both.
    """
    strata = [np.asarray(d, dtype=float) for d in diffs if np.asarray(d).size]
    pooled = np.concatenate(strata) if strata else np.zeros(0)
    n = int(pooled.size)
    if n == 0:
        return PairedResult(math.nan, math.nan, math.nan, math.nan, math.nan, 0)
    delta = float(pooled.mean())
    boot = _stratified_boot_means(strata, n_boot, seed)
    lo, hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    tol = 1e-12
    below = (np.count_nonzero(boot <= tol) + 1) / (n_boot + 1)
    above = (np.count_nonzero(boot >= -tol) + 1) / (n_boot + 1)
    p_boot = min(1.0, 2 * min(below, above))

    rng = np.random.default_rng(seed)
    extreme = 0
    chunk = max(1, min(n_perm, 2_000_000 // max(n, 1)))
    done = 0
    while done < n_perm:
        m = min(chunk, n_perm - done)
        signs = rng.integers(0, 2, size=(m, n), dtype=np.int8) * 2 - 1
        stats = (signs * pooled).mean(axis=1)
        extreme += int(np.count_nonzero(np.abs(stats) >= abs(delta) - tol))
        done += m
    p_perm = (extreme + 1) / (n_perm + 1)
    return PairedResult(delta, float(lo), float(hi), float(p_boot), float(p_perm), n)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (NaNs pass through)."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, math.nan)
    valid = np.flatnonzero(~np.isnan(p))
    order = valid[np.argsort(p[valid], kind="mergesort")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p[i]))
        out[i] = running
    return out.tolist()


# ----------------------------------------------------------------------------------------------------
# Selections shared by tables and plots
# ----------------------------------------------------------------------------------------------------


def final_steps(res: Results) -> dict[tuple[str, int], int]:
    """(method, seed) -> last evaluated step; that checkpoint is the one in the main table."""
    out: dict[tuple[str, int], int] = {}
    for r in res.evals:
        out[(r.method, r.seed)] = max(out.get((r.method, r.seed), r.step), r.step)
    return out


def _index(res: Results) -> dict[tuple[str, int, int, str], EvalRecord]:
    return {(r.method, r.seed, r.step, r.benchmark): r for r in res.evals}


def _final_records(res: Results) -> dict[str, dict[int, dict[str, EvalRecord]]]:
    """method -> seed -> benchmark -> record at that run's final step."""
    idx = _index(res)
    out: dict[str, dict[int, dict[str, EvalRecord]]] = {}
    for (method, seed), step in sorted(final_steps(res).items()):
        for bench in res.benchmarks:
            rec = idx.get((method, seed, step, bench))
            if rec is None:
                log.warning("%s seed %d: no %s summary at final step %d", method, seed, bench, step)
                continue
            out.setdefault(method, {}).setdefault(seed, {})[bench] = rec
    return out


def problem_counts(res: Results) -> dict[str, int]:
    """Benchmark -> number of problems (the Avg weights); the most common value if runs disagree."""
    counts: dict[str, int] = {}
    for bench in res.benchmarks:
        values = sorted({r.n_problems for r in res.evals if r.benchmark == bench})
        if len(values) > 1:
            log.warning("%s: runs disagree on n_problems %s", bench, values)
        counts[bench] = max(
            values, key=lambda v: (sum(r.n_problems == v for r in res.evals if r.benchmark == bench), v)
        )
    return counts


def seed_step_accuracy(res: Results) -> pd.DataFrame:
    """One row per (method, seed, step): avg@k % per benchmark and the problem-weighted Avg.

    ``Avg`` is over the main table's benchmarks (``main_benchmarks``), so curves, the learning table and
    time-to-target all use the main table's Avg.
    """
    counts = problem_counts(res)
    weights = {b: counts[b] for b in main_benchmarks(res.benchmarks)}
    rows: dict[tuple[str, int, int], dict[str, Any]] = {}
    for r in res.evals:
        row = rows.setdefault(
            (r.method, r.seed, r.step), {"method": r.method, "seed": r.seed, "step": r.step}
        )
        row[r.benchmark] = 100.0 * r.avg_at_k
    for row in rows.values():
        row[AVG] = weighted_average([row.get(b, math.nan) for b in weights], list(weights.values()))
    df = pd.DataFrame(list(rows.values()), columns=["method", "seed", "step", *counts, AVG])
    return df.sort_values(["method", "seed", "step"], kind="mergesort").reset_index(drop=True)


def wall_clock_at(metrics: pd.DataFrame, method: str, seed: int, step: int) -> float:
    """Cumulative seconds at the end of ``step`` (the last logged step ≤ it; 0 before the first)."""
    if metrics.empty or "wall_clock" not in metrics:
        return math.nan
    run = metrics[(metrics["method"] == method) & (metrics["seed"] == seed) & (metrics["step"] <= step)]
    if run.empty:
        has_run = bool(((metrics["method"] == method) & (metrics["seed"] == seed)).any())
        return 0.0 if has_run else math.nan
    return float(run.sort_values("step", kind="mergesort")["wall_clock"].iloc[-1])


# ----------------------------------------------------------------------------------------------------
# Table model and writers
# ----------------------------------------------------------------------------------------------------

Kind = Literal["str", "int", "num", "signed", "pvalue", "count_pct"]


@dataclass(frozen=True)
class Column:
    """One displayed column; ``value`` (and ``sd``/``lo``/``hi``/``pct``) name columns of the data frame."""

    header: str
    value: str
    kind: Kind = "num"
    sd: str | None = None
    lo: str | None = None
    hi: str | None = None
    pct: str | None = None
    bold: Literal["max", "min"] | None = None
    digits: int = 2
    align: Literal["l", "r"] = "r"


@dataclass(frozen=True, eq=False)
class Table:
    """A table: ``data`` is written to CSV as is; ``columns`` say how Markdown and LaTeX show it."""

    name: str
    caption: str
    data: pd.DataFrame
    columns: tuple[Column, ...]
    footer: str
    note: str = ""
    """How to read the table (e.g. means vs medians); printed above the provenance footer."""
    appendix_md: str = ""
    """Extra Markdown after the footer (e.g. the audit's examples); not in LaTeX or CSV."""


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def _fmt_float(value: float, digits: int, signed: bool = False) -> str:
    value = round(float(value), digits)
    if value == 0:
        value = 0.0  # no "-0.00"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _fmt_p(value: float) -> tuple[str, str]:
    if value < 0.001:
        return "<0.001", "$<$0.001"
    text = f"{value:.3f}"
    return text, text


def tex_escape(text: str) -> str:
    """Escape LaTeX special characters in plain text."""
    table = {
        "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "±": r"$\pm$", "Δ": r"$\Delta$", "–": "--", "—": "---", "·": r"$\cdot$", "≥": r"$\geq$",
    }  # fmt: skip
    return "".join(table.get(ch, ch) for ch in str(text))


def _tex_minus(text: str) -> str:
    """A math minus for negative numbers (a text hyphen is too short in tables)."""
    return re.sub(r"(?<![\w$])-(?=\d)", "$-$", text)


def _md_escape(text: str) -> str:
    return str(text).replace("|", r"\|")


def _bold_rows(data: pd.DataFrame, col: Column) -> set[int]:
    if col.bold is None or col.value not in data:
        return set()
    values = pd.to_numeric(data[col.value], errors="coerce").round(col.digits)
    if values.notna().sum() < 2 or values.nunique() < 2:  # nothing to single out when every row ties
        return set()
    best = values.max() if col.bold == "max" else values.min()
    return {i for i, v in enumerate(values) if v == best}


def _render_cell(row: pd.Series, col: Column, target: Literal["md", "tex"], bold: bool) -> str:
    value = row.get(col.value)
    if _is_missing(value):
        return "–" if target == "md" else "--"
    if col.kind == "str":
        text = str(value)
        main = _md_escape(text) if target == "md" else tex_escape(text)
        extra = ""
    elif col.kind == "int":
        main, extra = str(int(value)), ""
    elif col.kind == "pvalue":
        main = _fmt_p(float(value))[0 if target == "md" else 1]
        extra = ""
    elif col.kind == "count_pct":
        main = str(int(value))
        pct = row.get(col.pct) if col.pct else None
        extra = "" if _is_missing(pct) else f" ({_fmt_float(pct, 1)}%)"
        if target == "tex":
            extra = extra.replace("%", r"\%")
    else:
        if isinstance(value, str):  # e.g. "not reached" in a numeric column
            return _md_escape(value) if target == "md" else tex_escape(value)
        main = _fmt_float(value, col.digits, signed=col.kind == "signed")
        parts = []
        sd = row.get(col.sd) if col.sd else None
        if not _is_missing(sd):
            parts.append(("± " if target == "md" else r"$\pm$") + _fmt_float(sd, col.digits))
        lo = row.get(col.lo) if col.lo else None
        hi = row.get(col.hi) if col.hi else None
        if not _is_missing(lo) and not _is_missing(hi):
            parts.append(
                f"[{_fmt_float(lo, 1, col.kind == 'signed')}, {_fmt_float(hi, 1, col.kind == 'signed')}]"
            )
        extra = (" " + " ".join(parts)) if parts else ""
        if target == "tex":
            main, extra = _tex_minus(main), _tex_minus(extra)
            if extra:
                extra = r"\,{\scriptsize " + extra.strip() + "}"
    if bold:
        main = f"**{main}**" if target == "md" else rf"\textbf{{{main}}}"
    return main + extra


def render_markdown(table: Table) -> str:
    """GitHub Markdown: caption heading, table, footer line."""
    bolds = [_bold_rows(table.data, c) for c in table.columns]
    lines = [f"### {table.caption}", ""]
    lines.append("| " + " | ".join(_md_escape(c.header) for c in table.columns) + " |")
    lines.append("|" + "|".join(":---" if c.align == "l" else "---:" for c in table.columns) + "|")
    for i, (_, row) in enumerate(table.data.iterrows()):
        cells = [_render_cell(row, c, "md", i in b) for c, b in zip(table.columns, bolds, strict=False)]
        lines.append("| " + " | ".join(cells) + " |")
    if table.note:
        lines += ["", table.note]
    lines += ["", table.footer, ""]
    if table.appendix_md:
        lines += [table.appendix_md.rstrip("\n"), ""]
    return "\n".join(lines)


def render_latex(table: Table) -> str:
    """A booktabs ``table`` environment with caption, label and the footer under the tabular."""
    bolds = [_bold_rows(table.data, c) for c in table.columns]
    spec = "".join(c.align for c in table.columns)
    lines = [
        "% generated by evaluation.report; needs \\usepackage{booktabs}",
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{tex_escape(table.caption)}}}",
        rf"\label{{tab:{table.name}}}",
        r"\resizebox{\linewidth}{!}{%",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(tex_escape(c.header) for c in table.columns) + r" \\",
        r"\midrule",
    ]
    for i, (_, row) in enumerate(table.data.iterrows()):
        lines.append(
            " & ".join(
                _render_cell(row, c, "tex", i in b) for c, b in zip(table.columns, bolds, strict=False)
            )
            + r" \\"
        )
    lines += [
        r"\bottomrule",
        r"\end{tabular}}",
        r"\par\smallskip",
        *([rf"{{\footnotesize {tex_escape(table.note)}}}\par"] if table.note else []),
        rf"{{\footnotesize {tex_escape(table.footer)}}}",
        r"\end{table}",
        "",
    ]
    return "\n".join(lines)


def _csv_cell(value: Any) -> str:
    if _is_missing(value):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return _fmt_float(float(value), 4)
    return str(value)


def render_csv(table: Table) -> str:
    """Numbers with 4 decimals, ints as ints, empty for missing, '\\n' line ends."""
    text = table.data.astype(object).map(_csv_cell)
    buf = io.StringIO()
    text.to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue()


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8, as is) atomically: :func:`common.io.write_text_atomic`."""
    write_text_atomic(path, text)


HTML_STYLE = (
    "body{font:14px/1.4 system-ui,sans-serif;margin:1em}table{border-collapse:collapse}"
    "th,td{padding:3px 8px;border-bottom:1px solid #ddd;white-space:nowrap}th{border-bottom:2px solid #444}"
    "td.r,th.r{text-align:right}td.l,th.l{text-align:left}caption{font-weight:600;text-align:left;"
    "padding-bottom:6px}p.note,p.footer{font-size:12px;color:#444;max-width:70em}"
)


def _html_inline(text: str) -> str:
    """Markdown cell text (bold, inline code, escaped pipes) as escaped HTML."""
    text = html.escape(text.replace(r"\|", "|"), quote=False)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return re.sub(r"`([^`]*)`", r"<code>\1</code>", text)


def _md_table_to_html(markdown: str) -> str:
    """The appendix's Markdown (``####`` headings and pipe tables) as HTML."""
    out: list[str] = []
    in_table = False
    for line in markdown.splitlines():
        cells = (
            [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]] if line.startswith("|") else None
        )
        if cells is not None and all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue
        if cells is not None:
            tag = "td" if in_table else "th"
            if not in_table:
                out.append("<table>")
                in_table = True
            out.append("<tr>" + "".join(f"<{tag} class=l>{_html_inline(c)}</{tag}>" for c in cells) + "</tr>")
            continue
        if in_table:
            out.append("</table>")
            in_table = False
        if line.startswith("#"):
            out.append(f"<h4>{_html_inline(line.lstrip('#').strip())}</h4>")
        elif line.strip():
            out.append(f"<p>{_html_inline(line)}</p>")
    if in_table:
        out.append("</table>")
    return "\n".join(out)


def render_html(table: Table) -> str:
    """A standalone HTML page (the ``snakemake --report`` view): the Markdown table's cells, note, footer."""
    bolds = [_bold_rows(table.data, c) for c in table.columns]
    align = {"l": "l", "r": "r"}
    lines = [
        "<!DOCTYPE html>",
        '<html><head><meta charset="utf-8">',
        f"<title>{html.escape(table.name)}</title><style>{HTML_STYLE}</style></head><body>",
        "<table>",
        f"<caption>{html.escape(table.caption)}</caption>",
        "<tr>"
        + "".join(f"<th class={align[c.align]}>{html.escape(c.header)}</th>" for c in table.columns)
        + "</tr>",
    ]
    for i, (_, row) in enumerate(table.data.iterrows()):
        cells = [
            f"<td class={align[c.align]}>{_html_inline(_render_cell(row, c, 'md', i in b))}</td>"
            for c, b in zip(table.columns, bolds, strict=False)
        ]
        lines.append("<tr>" + "".join(cells) + "</tr>")
    lines.append("</table>")
    if table.note:
        lines.append(f'<p class="note">{html.escape(table.note)}</p>')
    lines.append(f'<p class="footer">{html.escape(table.footer)}</p>')
    if table.appendix_md:
        lines.append(_md_table_to_html(table.appendix_md))
    lines += ["</body></html>", ""]
    return "\n".join(lines)


RENDERERS: Mapping[str, Callable[[Table], str]] = {
    "md": render_markdown,
    "tex": render_latex,
    "csv": render_csv,
    "html": render_html,
}


def write_table(table: Table, out_dir: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write ``{name}.md``, ``.tex``, ``.csv``, ``.html`` (those in ``formats``) atomically; returns the paths."""
    unknown = sorted(set(formats) - set(RENDERERS))
    if unknown:
        raise ValueError(f"unknown formats {unknown}; valid: {sorted(RENDERERS)}")
    paths = []
    for fmt in sorted(formats, key=FORMATS.index):
        path = out_dir / f"{table.name}.{fmt}"
        atomic_write_text(path, RENDERERS[fmt](table))
        paths.append(path)
    return paths


# ----------------------------------------------------------------------------------------------------
# Provenance footer
# ----------------------------------------------------------------------------------------------------


def _join_limited(values: Sequence[str], limit: int = 6) -> str:
    values = list(values)
    return ", ".join(values[:limit]) + (f", +{len(values) - limit} more" if len(values) > limit else "")


def provenance(res: Results) -> dict[str, Any]:
    """Everything the footers summarise, in full (also written to ``provenance.json``)."""
    benches = res.benchmarks
    shas = {b: sorted({r.data_sha256 for r in res.evals if r.benchmark == b}) for b in benches}
    for bench, values in shas.items():
        if len(values) > 1:
            log.warning("%s: runs were evaluated on different data (sha256 %s)", bench, values)
    commits = sorted({str(m.get("git_commit", "")) for m in res.manifests.values() if m.get("git_commit")})
    return {
        "k": sorted({r.k for r in res.evals}),
        "n_samples": {b: sorted({r.n_samples for r in res.evals if r.benchmark == b}) for b in benches},
        "seeds": sorted({r.seed for r in res.evals}),
        "n_problems": problem_counts(res),
        "grader_version": sorted({r.grader_version for r in res.evals}),
        "data_sha256": shas,
        "manifest_ids": sorted(
            {r.manifest_id for r in res.evals if r.manifest_id}
            | {str(m["manifest_id"]) for m in res.manifests.values() if m.get("manifest_id")}
        ),
        "git_commit": commits,
        "git_dirty": any(bool(m.get("git_dirty")) for m in res.manifests.values()),
        "runs": {
            f"{method}/seed{seed}": {
                key: m.get(key)
                for key in ("manifest_id", "git_commit", "git_dirty", "config_hash", "torch_threads")
            }
            for (method, seed), m in sorted(res.manifests.items())
        },
        "packages": {
            f"{method}/seed{seed}": dict(sorted((m.get("packages") or {}).items()))
            for (method, seed), m in sorted(res.manifests.items())
        },
        "hardware": {
            f"{method}/seed{seed}": m.get("hardware") for (method, seed), m in sorted(res.manifests.items())
        },
    }


def footer_text(prov: Mapping[str, Any], benches: Sequence[str] | None = None) -> str:
    """One line: k, seeds, problems and samples, grader, data sha256 (12 hex), manifest ids, commit.

    ``benches`` restricts the per-benchmark parts to a table's benchmarks (default: all).
    """
    if benches is not None:
        keep = set(benches)
        prov = {
            **prov,
            "data_sha256": {b: v for b, v in prov["data_sha256"].items() if b in keep},
            "n_problems": {b: v for b, v in prov["n_problems"].items() if b in keep},
        }

    def nums(values: Sequence[Any]) -> str:
        return ", ".join(str(v) for v in values) or "?"

    sha = "; ".join(f"{b} {'/'.join(s[:12] or '?' for s in v)}" for b, v in prov["data_sha256"].items())
    problems = ", ".join(
        f"{b}={n} ({'/'.join(map(str, prov['n_samples'].get(b, []))) or '?'})"
        for b, n in prov["n_problems"].items()
    )
    commits = ", ".join(c[:12] for c in prov["git_commit"]) or "?"
    return " · ".join(
        [
            f"k={nums(prov['k'])}",
            f"seeds={nums(prov['seeds'])}",
            f"problems (samples) per checkpoint: {problems}",
            f"grader {nums(prov['grader_version'])}",
            f"data sha256: {sha}",
            f"manifest {_join_limited(prov['manifest_ids']) or '?'}",
            f"commit {commits}" + (" (dirty)" if prov["git_dirty"] else ""),
        ]
    )


# ----------------------------------------------------------------------------------------------------
# Tables
# ----------------------------------------------------------------------------------------------------


def _label(method: str) -> str:
    return METHOD_LABELS.get(method, method)


def _seed_mean_problem_accuracy(by_seed: Mapping[int, EvalRecord], seeds: Sequence[int]) -> pd.Series:
    """Per-problem accuracy averaged over samples and the given seeds (problems common to all seeds)."""
    series = [by_seed[s].per_problem() for s in seeds if s in by_seed]
    if not series:
        return pd.Series(dtype=float)
    frame = pd.concat(series, axis=1, join="inner")
    return frame.mean(axis=1).sort_index()


def main_table(res: Results, opts: ReportOptions, footer: str) -> Table:
    """DelTA-style table on the math sets (``main_benchmarks``); see ``accuracy_table``."""
    benches = main_benchmarks(order_benchmarks(res.benchmarks, opts.benchmarks))
    return accuracy_table(res, opts, footer, "main", benches, with_avg=True)


ACCURACY_TITLES: Mapping[str, str] = {
    "main": "",
    "ood": "Out-of-domain (multiple choice): ",
    "gsm8k": "GSM8K: ",
}


def accuracy_table(
    res: Results, opts: ReportOptions, footer: str, name: str, benches: Sequence[str], *, with_avg: bool
) -> Table:
    """DelTA-style table: avg@k % per benchmark, weighted Avg, sd over seeds, bootstrap CI, Δ vs baseline.

    Used for ``main`` (math sets), ``ood`` (multiple-choice sets) and ``gsm8k``; ``with_avg=False`` drops
    the Avg column (Δ is then on the first benchmark).
    """
    benches = list(benches)
    weights = problem_counts(res)
    final = _final_records(res)
    rows = []
    for method in sort_methods(set(final)):
        by_seed = final[method]
        seeds = sorted(by_seed)
        row: dict[str, Any] = {"method": method}
        per_seed_avg = []
        strata = []
        for seed in seeds:
            per_seed_avg.append(
                weighted_average(
                    [100 * by_seed[seed][b].avg_at_k if b in by_seed[seed] else math.nan for b in benches],
                    [weights[b] for b in benches],
                )
            )
        for bench in benches:
            recs = {s: by_seed[s][bench] for s in seeds if bench in by_seed[s]}
            accs = [100 * r.avg_at_k for r in recs.values()]
            row[bench] = float(np.mean(accs)) if accs else math.nan
            row[f"{bench}_sd"] = _sd(accs)
            problems = _seed_mean_problem_accuracy(recs, sorted(recs)).to_numpy() * 100
            strata.append(problems)
            row[f"{bench}_ci_lo"], row[f"{bench}_ci_hi"] = stratified_bootstrap_ci(
                [problems], n_boot=opts.n_boot, seed=opts.seed, alpha=opts.alpha
            )
        row[AVG] = float(np.mean(per_seed_avg)) if per_seed_avg else math.nan
        row[f"{AVG}_sd"] = _sd(per_seed_avg)
        row[f"{AVG}_ci_lo"], row[f"{AVG}_ci_hi"] = stratified_bootstrap_ci(
            strata, n_boot=opts.n_boot, seed=opts.seed, alpha=opts.alpha
        )
        row["n"] = int(sum(weights[b] for b in benches))
        ks = sorted({r.k for recs in by_seed.values() for r in recs.values()})
        row["k"] = ks[0] if len(ks) == 1 else "/".join(map(str, ks))
        row["seeds"] = len(seeds)
        rows.append(row)
    scopes = [*benches, AVG] if with_avg else benches
    data = pd.DataFrame(rows)
    if data.empty:
        data = pd.DataFrame(columns=["method", *scopes, *[f"{b}_sd" for b in scopes], "n", "k", "seeds"])
        for bench in scopes:
            data[[f"{bench}_ci_lo", f"{bench}_ci_hi"]] = math.nan
    base = data[data["method"] == opts.baseline]
    if base.empty:
        log.warning("baseline %r has no final evaluation; Δ columns are empty", opts.baseline)
    for bench in scopes:
        data[f"{bench}_delta"] = data[bench] - (float(base[bench].iloc[0]) if not base.empty else math.nan)
    data.loc[data["method"] == opts.baseline, [f"{b}_delta" for b in scopes]] = math.nan
    order = ["method"]
    for bench in scopes:
        order += [bench, f"{bench}_sd", f"{bench}_ci_lo", f"{bench}_ci_hi", f"{bench}_delta"]
    data = data[order + ["n", "k", "seeds"]]
    data.insert(1, "label", [_label(m) for m in data["method"]])

    cols = [Column("Method", "label", kind="str", align="l")]
    for bench in scopes:
        ci = (f"{bench}_ci_lo", f"{bench}_ci_hi") if opts.show_ci else (None, None)
        cols.append(Column(bench, bench, sd=f"{bench}_sd", lo=ci[0], hi=ci[1], bold="max"))
    delta_scope = AVG if with_avg else benches[0]
    cols += [
        Column(f"Δ {delta_scope} vs {_label(opts.baseline)}", f"{delta_scope}_delta", kind="signed"),
        Column("n", "n", kind="int"),
        Column("k", "k", kind="str"),
        Column("seeds", "seeds", kind="int"),
    ]
    avg_text = f"; {AVG} weighted by problem count" if with_avg else ""
    caption = (
        f"{ACCURACY_TITLES.get(name, '')}avg@k (%) at the final checkpoint{avg_text}; mean ± sd over seeds "
        f"[{100 * (1 - opts.alpha):.0f}% bootstrap CI over problems]; best per column in bold"
    )
    return Table(name, caption, data.reset_index(drop=True), tuple(cols), footer)


def _parse_claims(claims: Sequence[tuple[str, str, float]]) -> dict[tuple[str, str], float]:
    return {(method, scope): gain for method, scope, gain in claims}


def significance_table(res: Results, opts: ReportOptions, footer: str) -> Table:
    """Paired bootstrap / permutation tests of each method vs the baseline, per benchmark and Avg."""
    benches = order_benchmarks(res.benchmarks, opts.benchmarks)
    final = _final_records(res)
    claims = _parse_claims(opts.claims)
    rows: list[dict[str, Any]] = []
    base = final.get(opts.baseline)
    if base is None:
        log.warning("baseline %r has no final evaluation; significance table is empty", opts.baseline)
    for method in sort_methods(set(final)):
        if method == opts.baseline or base is None:
            continue
        seeds = sorted(set(final[method]) & set(base))
        dropped = sorted(set(final[method]) ^ set(base))
        if dropped:
            log.warning("%s vs %s: seeds %s are not in both and are left out", method, opts.baseline, dropped)
        diffs: dict[str, np.ndarray] = {}
        ks: set[int] = set()
        for bench in benches:
            m_recs = {s: final[method][s][bench] for s in seeds if bench in final[method][s]}
            b_recs = {s: base[s][bench] for s in seeds if bench in base[s]}
            common = sorted(set(m_recs) & set(b_recs))
            if not common:
                continue
            ks |= {m_recs[s].k for s in common} | {b_recs[s].k for s in common}
            per_seed = [m_recs[s].per_problem() - b_recs[s].per_problem() for s in common]
            frame = pd.concat(per_seed, axis=1, join="outer")
            if frame.isna().any().any():
                log.warning(
                    "%s vs %s on %s: problem ids differ; only common problems are paired",
                    method,
                    opts.baseline,
                    bench,
                )
            diffs[bench] = (frame.dropna().mean(axis=1).sort_index() * 100).to_numpy()
        for scope in [*benches, AVG]:
            if scope == AVG:
                strata = [diffs[b] for b in main_benchmarks(benches) if b in diffs]
            else:
                strata = [diffs[scope]] if scope in diffs else []
            result = paired_test(
                strata, n_boot=opts.n_boot, n_perm=opts.n_perm, seed=opts.seed, alpha=opts.alpha
            )
            claim = claims.get((method, scope), math.nan)
            inside = ""
            if not (math.isnan(claim) or math.isnan(result.ci_lo)):
                inside = "yes" if result.ci_lo <= claim <= result.ci_hi else "no"
            rows.append(
                {
                    "method": method,
                    "label": _label(method),
                    "baseline": opts.baseline,
                    "scope": scope,
                    "problems": result.n_units,
                    "seeds": len(seeds),
                    "k": "/".join(map(str, sorted(ks))),
                    "delta": result.delta,
                    "delta_ci_lo": result.ci_lo,
                    "delta_ci_hi": result.ci_hi,
                    "p_bootstrap": result.p_bootstrap,
                    "p_permutation": result.p_permutation,
                    "claimed_gain": claim,
                    "claim_inside_ci": inside,
                }
            )
    columns = [
        "method", "label", "baseline", "scope", "problems", "seeds", "k", "delta", "delta_ci_lo", "delta_ci_hi",
        "p_bootstrap", "p_permutation", "p_holm", "claimed_gain", "claim_inside_ci",
    ]  # fmt: skip
    data = pd.DataFrame(rows, columns=[c for c in columns if c != "p_holm"])
    data["p_holm"] = math.nan
    for scope in data["scope"].unique():
        mask = data["scope"] == scope
        data.loc[mask, "p_holm"] = holm(data.loc[mask, "p_permutation"].tolist())
    data = data[columns].reset_index(drop=True)
    cols = (
        Column("Method", "label", kind="str", align="l"),
        Column("Scope", "scope", kind="str", align="l"),
        Column("Δ (pp)", "delta", kind="signed", lo="delta_ci_lo", hi="delta_ci_hi"),
        Column("p (bootstrap)", "p_bootstrap", kind="pvalue"),
        Column("p (permutation)", "p_permutation", kind="pvalue"),
        Column("p (Holm)", "p_holm", kind="pvalue"),
        Column("problems", "problems", kind="int"),
        Column("seeds", "seeds", kind="int"),
        Column("claimed Δ", "claimed_gain", kind="signed"),
        Column("claim in CI?", "claim_inside_ci", kind="str", align="l"),
    )
    caption = (
        f"Paired tests vs {_label(opts.baseline)} ({AVG} = main-table benchmarks): per-problem accuracy "
        f"difference (samples averaged, seeds "
        f"paired by id); Δ with {100 * (1 - opts.alpha):.0f}% paired-bootstrap CI ({opts.n_boot} resamples, "
        f"stratified by benchmark), sign-flip permutation p ({opts.n_perm}), Holm over methods per scope"
    )
    return Table("significance", caption, data, cols, footer)


def learning_table(res: Results, opts: ReportOptions, footer: str) -> Table:
    """Eval avg@k per method and step (mean ± sd over seeds), with training accuracy and wall-clock."""
    benches = order_benchmarks(res.benchmarks, opts.benchmarks)
    acc = seed_step_accuracy(res)
    metrics = res.metrics
    rows = []
    for method in sort_methods(set(acc["method"])):
        for step in sorted(acc.loc[acc["method"] == method, "step"].unique()):
            sub = acc[(acc["method"] == method) & (acc["step"] == step)]
            row: dict[str, Any] = {
                "method": method,
                "label": _label(method),
                "step": int(step),
                "seeds": len(sub),
            }
            for col in [*benches, AVG]:
                values = sub[col].dropna().tolist()
                row[col] = float(np.mean(values)) if values else math.nan
                row[f"{col}_sd"] = _sd(values)
            train = []
            if not metrics.empty and "accuracy" in metrics:
                hit = metrics[(metrics["method"] == method) & (metrics["step"] == step)]
                train = (100 * hit["accuracy"].dropna()).tolist()
            row["train_accuracy"] = float(np.mean(train)) if train else math.nan
            row["train_accuracy_sd"] = _sd(train)
            clocks = [wall_clock_at(metrics, method, int(s), int(step)) for s in sub["seed"]]
            clocks = [c for c in clocks if not math.isnan(c)]
            row["time_wall_clock_s"] = float(np.mean(clocks)) if clocks else math.nan
            rows.append(row)
    data = pd.DataFrame(rows)
    cols = [Column("Method", "label", kind="str", align="l"), Column("step", "step", kind="int")]
    cols += [Column(c, c, sd=f"{c}_sd") for c in [*benches, AVG]]
    cols += [
        Column("train acc", "train_accuracy", sd="train_accuracy_sd"),
        Column("wall-clock (s)", "time_wall_clock_s", digits=0),
        Column("seeds", "seeds", kind="int"),
    ]
    caption = (
        f"Learning curve: avg@k (%) per evaluated step, mean ± sd over seeds ({AVG} over the main-table "
        "benchmarks); training accuracy (%) at that step"
    )
    return Table("learning", caption, data, tuple(cols), footer)


def _seed_mean(run: pd.DataFrame, col: str) -> float:
    """Mean per step of ``col`` within each seed, then the mean over seeds (NaN when never logged)."""
    if col not in run or not run[col].notna().any():
        return math.nan
    return float(run.groupby("seed")[col].mean().mean())


def _throughput(run: pd.DataFrame, tokens: str, seconds: str) -> float:
    """Σ tokens / Σ seconds within each seed (a ratio of sums, not a mean of ratios), mean over seeds."""
    if tokens not in run or seconds not in run:
        return math.nan
    sums = run.groupby("seed")[[tokens, seconds]].sum()
    sums = sums[sums[seconds] > 0]
    return float((sums[tokens] / sums[seconds]).mean()) if not sums.empty else math.nan


WALLCLOCK_NOTE = (
    "Phase times are means per RL step over every logged step (per seed, then averaged over seeds): the "
    "checkpoint phase runs only every N steps, so its median is 0 and medians would not add up to the step "
    "time. gen tok/s = generated tokens / rollout seconds; train tok/s = trained (loss) tokens / update "
    "seconds (sums over the run); peak RSS = max over steps and seeds."
)


def wallclock_table(res: Results, opts: ReportOptions, main: Table, learning: Table, footer: str) -> Table:
    """Mean step time per phase, overhead, throughput, memory, time to the baseline's final Avg."""
    metrics = res.metrics
    phases = [p for p in PHASES if f"time_{p}" in metrics] + [
        c[5:] for c in sorted(metrics.columns) if c.startswith("time_") and c[5:] not in (*PHASES, "total")
    ]
    base_row = main.data[main.data["method"] == opts.baseline]
    target = float(base_row[AVG].iloc[0]) if not base_row.empty else math.nan
    rows = []
    for method in sort_methods(set(metrics["method"])) if not metrics.empty else []:
        run = metrics[metrics["method"] == method]
        row: dict[str, Any] = {"method": method, "label": _label(method), "seeds": int(run["seed"].nunique())}
        row["steps"] = int(run.groupby("seed")["step"].max().median())
        for phase in [*phases, "total"]:
            row[f"time_{phase}_s"] = _seed_mean(run, f"time_{phase}")
        if {"tokens_generated", "time_rollout"} <= set(run):
            row["time_gen_tok_per_s"] = _throughput(run, "tokens_generated", "time_rollout")
        if {"tokens_trained", "time_update"} <= set(run):
            row["time_train_tok_per_s"] = _throughput(run, "tokens_trained", "time_update")
        row["mem_peak_rss_mb"] = float(run["peak_rss_mb"].max()) if "peak_rss_mb" in run else math.nan
        row["target_avg"] = target
        curve = learning.data[learning.data["method"] == method].sort_values("step")
        hit = curve[curve[AVG] >= target - 1e-9] if not math.isnan(target) else curve.iloc[0:0]
        if hit.empty:
            row["steps_to_target"] = "not reached"
            row["time_to_target_s"] = "not reached"
        else:
            step = int(hit["step"].iloc[0])
            row["steps_to_target"] = step
            clocks = [wall_clock_at(metrics, method, int(s), step) for s in sorted(run["seed"].unique())]
            clocks = [c for c in clocks if not math.isnan(c)]
            row["time_to_target_s"] = float(np.mean(clocks)) if clocks else math.nan
        rows.append(row)
    data = pd.DataFrame(rows)
    if data.empty:
        data = pd.DataFrame(columns=["method", "label", "seeds", "steps", "time_total_s"])
    base = data[data["method"] == opts.baseline]
    if not base.empty and "time_total_s" in data:
        data["time_overhead_pct"] = 100 * (data["time_total_s"] / float(base["time_total_s"].iloc[0]) - 1)
        data.loc[data["method"] == opts.baseline, "time_overhead_pct"] = math.nan
    else:
        data["time_overhead_pct"] = math.nan
    order = [
        "method",
        "label",
        "seeds",
        "steps",
        *[f"time_{p}_s" for p in [*phases, "total"]],
        "time_overhead_pct",
    ]
    order += [c for c in ("time_gen_tok_per_s", "time_train_tok_per_s", "mem_peak_rss_mb") if c in data]
    order += [c for c in ("target_avg", "steps_to_target", "time_to_target_s") if c in data]
    data = data[order].reset_index(drop=True)
    cols = [Column("Method", "label", kind="str", align="l")]
    cols += [Column(p, f"time_{p}_s", digits=3) for p in phases]
    cols += [
        Column("step (s)", "time_total_s", digits=3, bold="min"),
        Column(f"overhead vs {_label(opts.baseline)} (%)", "time_overhead_pct", kind="signed", digits=1),
    ]
    if "time_gen_tok_per_s" in data:
        cols.append(Column("gen tok/s", "time_gen_tok_per_s", digits=0, bold="max"))
    if "time_train_tok_per_s" in data:
        cols.append(Column("train tok/s", "time_train_tok_per_s", digits=0, bold="max"))
    if "mem_peak_rss_mb" in data:
        cols.append(Column("peak RSS (MB)", "mem_peak_rss_mb", digits=0))
    cols += [
        Column(f"steps to {_label(opts.baseline)} final", "steps_to_target", kind="str"),
        Column("seconds to it", "time_to_target_s", digits=0),
        Column("steps", "steps", kind="int"),
        Column("seeds", "seeds", kind="int"),
    ]
    caption = (
        f"Wall-clock: mean seconds per step by phase, overhead vs {_label(opts.baseline)}, throughput, "
        f"peak RSS, and first evaluated step (and mean seconds) at which the seed-mean {AVG} reaches "
        f"{_label(opts.baseline)}'s final {AVG} ({_fmt_float(target, 2) if not math.isnan(target) else '?'}%)"
    )
    return Table("wallclock", caption, data, tuple(cols), footer, note=WALLCLOCK_NOTE)


def failures_table(res: Results, footer: str) -> Table:
    """Grader reason counts and rates per method at the final step (all benchmarks and seeds)."""
    final = _final_records(res)
    extra = sorted(
        {r for recs in final.values() for s in recs.values() for rec in s.values() for r in rec.reasons}
        - set(REASONS)
    )
    reasons = [*REASONS, *extra]
    rows = []
    for method in sort_methods(set(final)):
        counts = dict.fromkeys(reasons, 0)
        expected = 0
        for by_bench in final[method].values():
            for rec in by_bench.values():
                expected += rec.n_problems * rec.k
                for reason, n in rec.reasons.items():
                    counts[reason] += n
        total = sum(counts.values())
        if total != expected:
            log.warning("%s: reason counts sum to %d but n_problems·k = %d", method, total, expected)
        row: dict[str, Any] = {"method": method, "label": _label(method), "samples": total, **counts}
        for reason in reasons[1:]:
            row[f"{reason}_pct"] = 100 * counts[reason] / total if total else math.nan
        fails = sum(counts[r] for r in FAILURE_REASONS if r in counts)
        row["failure_pct"] = 100 * fails / total if total else math.nan
        rows.append(row)
    data = pd.DataFrame(rows)
    cols = [Column("Method", "label", kind="str", align="l"), Column("samples", "samples", kind="int")]
    cols += [Column(r, r, kind="count_pct", pct=None if r == "correct" else f"{r}_pct") for r in reasons]
    cols.append(Column("failure rate (%)", "failure_pct", digits=1, bold="min"))
    caption = (
        "Grader verdicts at the final checkpoint, summed over benchmarks and seeds; failure = "
        + " + ".join(FAILURE_REASONS)
    )
    return Table("failures", caption, data, tuple(cols), footer)


def code_table(res: Results, opts: ReportOptions, footer: str, benches: Sequence[str]) -> Table:
    """CF-paper code table: base and plus pass@1 (%) per code benchmark (MBPP+, HumanEval+), Δ plus.

    ``plus`` is the summary's ``plus_pass_at_1`` (avg@k when absent: every sample runs the plus tests);
    ``base`` is ``base_pass_at_1`` (missing when the evaluator did not report it).
    """
    final = _final_records(res)
    rows = []
    for method in sort_methods(set(final)):
        by_seed = final[method]
        row: dict[str, Any] = {"method": method, "label": _label(method)}
        ks: set[int] = set()
        for bench in benches:
            recs = [by_seed[s][bench] for s in sorted(by_seed) if bench in by_seed[s]]
            ks |= {r.k for r in recs}
            base = [100 * r.extra["base_pass_at_1"] for r in recs if "base_pass_at_1" in r.extra]
            plus = [100 * r.extra.get("plus_pass_at_1", r.avg_at_k) for r in recs]
            for part, values in (("base", base), ("plus", plus)):
                row[f"{bench}_{part}"] = float(np.mean(values)) if values else math.nan
                row[f"{bench}_{part}_sd"] = _sd(values)
        row["k"] = "/".join(map(str, sorted(ks)))
        row["seeds"] = len(by_seed)
        rows.append(row)
    data = pd.DataFrame(rows)
    base_row = data[data["method"] == opts.baseline]
    for bench in benches:
        ref = float(base_row[f"{bench}_plus"].iloc[0]) if not base_row.empty else math.nan
        data[f"{bench}_plus_delta"] = data[f"{bench}_plus"] - ref
        data.loc[data["method"] == opts.baseline, f"{bench}_plus_delta"] = math.nan
    order = ["method", "label"]
    for bench in benches:
        order += [
            f"{bench}_base",
            f"{bench}_base_sd",
            f"{bench}_plus",
            f"{bench}_plus_sd",
            f"{bench}_plus_delta",
        ]
    data = data[[*order, "k", "seeds"]].reset_index(drop=True)
    cols = [Column("Method", "label", kind="str", align="l")]
    for bench in benches:
        cols += [
            Column(f"{bench} base", f"{bench}_base", sd=f"{bench}_base_sd", bold="max"),
            Column(f"{bench} plus", f"{bench}_plus", sd=f"{bench}_plus_sd", bold="max"),
            Column(f"{bench} Δ plus", f"{bench}_plus_delta", kind="signed"),
        ]
    cols += [Column("k", "k", kind="str"), Column("seeds", "seeds", kind="int")]
    caption = (
        "Code: pass@1 (%) on the base and the plus (EvalPlus) tests at the final checkpoint, mean ± sd over "
        f"seeds, Δ plus vs {_label(opts.baseline)}; best per column in bold"
    )
    note = "plus = plus_pass_at_1 of the summary (avg@k where the evaluator did not report it); – = not reported."
    return Table("code", caption, data, tuple(cols), footer, note=note)


def _spread(n: int, cap: int) -> list[int]:
    """``min(n, cap)`` evenly spaced indices into ``range(n)`` (all of them when ``n <= cap``)."""
    if n <= cap:
        return list(range(n))
    return sorted({int(i) for i in np.linspace(0, n - 1, cap).round()})


def _read_samples(path: Path, cap: int) -> tuple[list[dict[str, Any]], int]:
    """(at most ``cap`` evenly spaced records of a ``.samples.jsonl``, how many it holds)."""
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    return [json.loads(lines[i]) for i in _spread(len(lines), cap)], len(lines)


def _md_cell(text: Any, limit: int = 80) -> str:
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = "…" + text[-(limit - 1) :]
    return _md_escape(text).replace("`", "'")


def _pick_examples(
    examples: Mapping[str, Sequence[Mapping[str, Any]]],
) -> list[tuple[str, Mapping[str, Any]]]:
    """Up to ``AUDIT_EXAMPLES`` distinct examples, alternating the two directions (seeds repeat responses)."""
    queues: list[list[tuple[str, Mapping[str, Any]]]] = []
    for key, direction in (("ours_only", "ours ✓ / MV ✗"), ("math_verify_only", "ours ✗ / MV ✓")):
        seen: set[tuple[str, str, str]] = set()
        queue = []
        for e in examples.get(key, []):
            ident = (str(e["gold"]), str(e["extracted"]), str(e["response_tail"]))
            if ident not in seen:
                seen.add(ident)
                queue.append((direction, e))
        queues.append(queue)
    picked: list[tuple[str, Mapping[str, Any]]] = []
    while len(picked) < AUDIT_EXAMPLES and any(queues):
        for queue in queues:
            if queue and len(picked) < AUDIT_EXAMPLES:
                picked.append(queue.pop(0))
    return picked


def audit_table(res: Results, opts: ReportOptions, footer: str) -> Table | None:
    """Re-grade the final checkpoint's math samples with Math-Verify (``evaluation.audit.audit``).

    Per method × math benchmark (seeds pooled): how many verdicts flip, in each direction, with up to
    ``AUDIT_EXAMPLES`` examples in the Markdown. None when there is nothing to audit (no math
    ``.samples.jsonl``, ``audit_max_samples`` 0, or Math-Verify not installed).
    """
    if opts.audit_max_samples <= 0:
        return None
    benches = [b for b in order_benchmarks(res.benchmarks, opts.benchmarks) if benchmark_kind(b) == "math"]
    final = _final_records(res)
    jobs: list[tuple[str, str, list[tuple[int, Path]]]] = []
    for method in sort_methods(set(final)):
        for bench in benches:
            files = [
                (seed, recs[bench].path.with_name(f"{bench}.samples.jsonl"))
                for seed, recs in sorted(final[method].items())
                if bench in recs
            ]
            files = [(seed, f) for seed, f in files if f.is_file()]
            if files:
                jobs.append((method, bench, files))
    if not jobs:
        return None
    try:
        import math_verify  # noqa: F401

        from evaluation.audit import audit
    except ImportError:
        log.warning("math_verify is not installed; no checker audit table")
        return None
    rows: list[dict[str, Any]] = []
    examples: list[str] = []
    grader_versions: set[str] = set()
    for method, bench, files in jobs:
        records: list[dict[str, Any]] = []
        total = 0
        for _, path in files:
            picked, n = _read_samples(path, opts.audit_max_samples)
            records += picked
            total += n
        log.info("auditing %d of %d %s samples of %s", len(records), total, bench, method)
        result = audit(records, dataset=benchmark_rule(bench), max_examples=3 * AUDIT_EXAMPLES)
        grader_versions.add(str(result["grader_version"]))
        c, n = result["counts"], int(result["n"])
        ours = c["both_correct"] + c["ours_only"]
        stored = sum(bool(r.get("correct")) for r in records)
        changed = c["ours_only"] + c["math_verify_only"]
        rows.append(
            {
                "method": method,
                "label": _label(method),
                "benchmark": bench,
                "seeds": len(files),
                "samples": n,
                "samples_in_files": total,
                "ours_correct": ours,
                "math_verify_correct": c["both_correct"] + c["math_verify_only"],
                "ours_only": c["ours_only"],
                "math_verify_only": c["math_verify_only"],
                "changed": changed,
                "changed_pct": 100 * changed / n if n else math.nan,
                "delta_pp": float(result["delta_points"]) if n else math.nan,
                "math_verify_error": c["math_verify_error"],
                "regrade_vs_stored": ours - stored,
            }
        )
        for direction, e in _pick_examples(result["examples"]):
            examples.append(
                f"| {_md_escape(_label(method))} | {_md_escape(bench)} | {direction} | `{_md_cell(e['gold'], 30)}` "
                f"| `{_md_cell(e['extracted'], 30)}` | {_md_cell(e['response_tail'])} |"
            )
    data = pd.DataFrame(rows)
    cols = (
        Column("Method", "label", kind="str", align="l"),
        Column("benchmark", "benchmark", kind="str", align="l"),
        Column("samples", "samples", kind="int"),
        Column("ours ✓", "ours_correct", kind="int"),
        Column("Math-Verify ✓", "math_verify_correct", kind="int"),
        Column("ours ✓ → MV ✗", "ours_only", kind="int"),
        Column("ours ✗ → MV ✓", "math_verify_only", kind="int"),
        Column("changed (%)", "changed", kind="count_pct", pct="changed_pct"),
        Column("Δ acc (pp, ours − MV)", "delta_pp", kind="signed"),
        Column("MV errors", "math_verify_error", kind="int"),
    )
    caption = (
        f"Checker audit: verdicts of our checker ({', '.join(sorted(grader_versions))}) vs Math-Verify on the "
        "final checkpoint's math samples (seeds pooled)"
    )
    note = (
        f"At most {opts.audit_max_samples} evenly spaced samples per .samples.jsonl file are re-graded "
        "(Math-Verify is slow); 'samples_in_files' in the CSV has the full count. Both checkers re-grade the "
        "same responses; 'regrade_vs_stored' (CSV) is our re-grade's accepted count minus the stored verdicts' "
        "(non-zero means the checker changed since evaluation)."
    )
    appendix = ""
    if examples:
        appendix = "\n".join(
            [
                f"#### Examples of changed verdicts (up to {AUDIT_EXAMPLES} per method and benchmark)",
                "",
                "| Method | benchmark | verdicts | gold | extracted | response tail |",
                "|:---|:---|:---|:---|:---|:---|",
                *examples,
            ]
        )
    return Table("audit", caption, data, cols, footer, note=note, appendix_md=appendix)


def build_tables(res: Results, opts: ReportOptions) -> dict[str, Table]:
    """All tables, keyed by name: ``TABLE_NAMES`` always, then those of ``OPTIONAL_TABLES`` that apply."""
    prov = provenance(res)
    footer = footer_text(prov)
    groups = benchmark_groups(order_benchmarks(res.benchmarks, opts.benchmarks))
    main = main_table(res, opts, footer_text(prov, groups["main"]))
    learning = learning_table(res, opts, footer)
    tables = {
        "main": main,
        "significance": significance_table(res, opts, footer),
        "learning": learning,
        "wallclock": wallclock_table(res, opts, main, learning, footer),
        "failures": failures_table(res, footer),
    }
    if "code" in groups:
        tables["code"] = code_table(res, opts, footer_text(prov, groups["code"]), groups["code"])
    for name in ("ood", "gsm8k"):
        if name in groups:
            benches = groups[name]
            tables[name] = accuracy_table(
                res, opts, footer_text(prov, benches), name, benches, with_avg=len(benches) > 1
            )
    math_sets = [b for b in res.benchmarks if benchmark_kind(b) == "math"]
    audit = audit_table(res, opts, footer_text(prov, math_sets))
    if audit is not None:
        tables["audit"] = audit
    return tables


def write_report(
    results: Path, out: Path, opts: ReportOptions, *, plots_dir: Path | None = None, eval_dir: str = "eval"
) -> list[Path]:
    """Load ``results``, write every table (and ``provenance.json``) to ``out``; plots when asked.

    Optional tables that no longer apply (e.g. ``code.md`` after code benchmarks were dropped) are
    removed so that the directory matches the results.
    """
    res = load_results(results, eval_dir)
    log.info("report options: %s", opts)
    paths: list[Path] = []
    tables = build_tables(res, opts)
    for table in tables.values():
        paths += write_table(table, out, opts.formats)
    for name in OPTIONAL_TABLES:
        if name not in tables:
            for fmt in FORMATS:
                (out / f"{name}.{fmt}").unlink(missing_ok=True)
    prov_path = out / "provenance.json"
    prov = {"options": {k: v for k, v in vars(opts).items()}, "tables": list(tables), **provenance(res)}
    atomic_write_text(prov_path, json.dumps(prov, indent=2, sort_keys=True, default=str) + "\n")
    paths.append(prov_path)
    if plots_dir is not None:
        from evaluation import plots  # matplotlib only when asked

        paths += plots.write_all(res, plots_dir, baseline=opts.baseline)
    return paths


def _parse_claim(text: str) -> tuple[str, str, float]:
    """``method=gain`` (Avg) or ``method:scope=gain``, gain in percentage points."""
    try:
        key, value = text.split("=", 1)
        method, _, scope = key.partition(":")
        return method.strip(), (scope.strip() or AVG), float(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"--claim wants METHOD[:SCOPE]=GAIN, got {text!r}") from err


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, required=True, help="results tree (OUT) with eval/ and runs/")
    parser.add_argument("--out", type=Path, default=None, help="table directory (default OUT/tables)")
    parser.add_argument("--eval-dir", default="eval", help="summaries under OUT/EVAL_DIR (real_eval: real sets)")
    parser.add_argument("--baseline", default=ReportOptions.baseline, help="method to compare against")
    parser.add_argument("--claim", type=_parse_claim, action="append", default=[],
                        help="claimed gain to check, METHOD[:SCOPE]=PP, e.g. delta=3.26 (repeatable)")  # fmt: skip
    parser.add_argument("--n-boot", type=int, default=ReportOptions.n_boot)
    parser.add_argument("--n-perm", type=int, default=ReportOptions.n_perm)
    parser.add_argument("--seed", type=int, default=ReportOptions.seed)
    parser.add_argument("--alpha", type=float, default=ReportOptions.alpha)
    parser.add_argument("--benchmarks", default="", help="comma list: benchmark column order (others follow)")
    parser.add_argument("--no-ci", action="store_true", help="hide CIs in the Markdown/LaTeX main table")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma list of md,tex,csv,html")
    parser.add_argument("--audit-max-samples", type=int, default=AUDIT_MAX_SAMPLES,
                        help="checker audit: samples re-graded per .samples.jsonl (0: no audit table)")  # fmt: skip
    parser.add_argument("--plots", action="store_true", help="also write figures (see --figures)")
    parser.add_argument("--figures", type=Path, default=None, help="figure directory (default OUT/figures)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    opts = ReportOptions(
        baseline=args.baseline,
        n_boot=args.n_boot,
        n_perm=args.n_perm,
        seed=args.seed,
        alpha=args.alpha,
        claims=tuple(args.claim),
        show_ci=not args.no_ci,
        benchmarks=tuple(b for b in args.benchmarks.split(",") if b),
        formats=tuple(f for f in args.formats.split(",") if f),
        audit_max_samples=args.audit_max_samples,
    )
    out = args.out or args.results / "tables"
    figures = (args.figures or args.results / "figures") if args.plots else None
    for path in write_report(args.results, out, opts, plots_dir=figures, eval_dir=args.eval_dir):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
