"""Statistics of the report (weighted Avg, stratified bootstrap, paired tests, the seeds-random test, Holm) and the
selections shared by tables and figures (final steps, problem counts, per-step accuracy)."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from evaluation.metrics import bootstrap_ci
from evaluation.metrics import weighted_average as _weighted_average
from evaluation.report.load import AVG, START_METHOD, EvalRecord, Results, main_benchmarks

log = logging.getLogger(__name__)


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


def sample_sd(values: Sequence[float]) -> float:
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


@dataclass(frozen=True)
class CrossedAnova:
    """Mean squares of a problems × seeds layout (problems nested in strata, crossed with seeds)."""

    n: int
    seeds: int
    mean: float
    ms_problem: float
    ms_seed: float
    ms_resid: float
    df_problem: int
    df_seed: int
    df_resid: int


def crossed_anova(blocks: Sequence[np.ndarray]) -> CrossedAnova:
    """Two-way ANOVA without replication of per-problem, per-seed values (one [n_b, S] block per stratum).

    The problem effect is measured within strata (df N − B), so benchmarks of different difficulty do not
    inflate it; the mean is the pooled (problem-count-weighted) mean, i.e. the table's Avg.
    """
    mats = [np.asarray(b, dtype=float) for b in blocks if np.asarray(b).size]
    mats = [m[:, None] if m.ndim == 1 else m for m in mats]
    nan = math.nan
    if not mats or len({m.shape[1] for m in mats}) != 1:
        return CrossedAnova(0, 0, nan, nan, nan, nan, 0, 0, 0)
    d = np.concatenate(mats, axis=0)
    n, s = d.shape
    rows, cols, grand = d.mean(axis=1), d.mean(axis=0), float(d.mean())
    centred = np.concatenate([m.mean(axis=1) - m.mean() for m in mats])
    df_p, df_s, df_r = n - len(mats), s - 1, (n - 1) * (s - 1)
    ms_p = s * float((centred**2).sum()) / df_p if df_p > 0 else nan
    ms_s = n * float(((cols - grand) ** 2).sum()) / df_s if df_s > 0 else nan
    resid = d - rows[:, None] - cols[None, :] + grand
    ms_r = float((resid**2).sum()) / df_r if df_r > 0 else nan
    return CrossedAnova(n, s, grand, ms_p, ms_s, ms_r, df_p, df_s, df_r)


NEEDS_SEEDS = "needs ≥ 2 seeds"


@dataclass(frozen=True)
class SeedsRandomResult:
    """A mean with seeds and problems both random: t interval and two-sided p (H0: mean 0)."""

    estimate: float
    se: float
    df: float
    ci_lo: float
    ci_hi: float
    p: float
    n_units: int
    seeds: int

    @property
    def undefined(self) -> str:
        """Why this test cannot decide anything (empty when it can): fewer than 2 seeds, or a degenerate
        variance estimate (``seeds_random_test``), where p and the interval are NaN, not 0 and a point."""
        if self.seeds < 2 or math.isnan(self.se):
            return NEEDS_SEEDS
        if self.se == 0:
            same = " (the arms score alike on every problem)" if self.estimate == 0 else ""
            return (f"no between-seed variance: the paired differences are the same at each of the {self.seeds} "
                    f"seeds{same}, so the test has no SE")
        if self.df < 1:
            return f"Satterthwaite df {self.df:.2f} < 1: the variance estimate carries no usable information"
        return ""


def seeds_random_variance(a: CrossedAnova) -> tuple[float, float]:
    """(Var of the grand mean, Satterthwaite df) under the crossed random-effects model.

    y_ps = μ + a_p + b_s + e_ps: Var(ȳ) = σ²_p/n + σ²_s/S + σ²_e/(nS) = (MS_s + MS_p − MS_e)/(nS) with the
    expected mean squares of the two-way layout (Searle, Casella & McCulloch 1992, §4.3). MS_s/(nS) is the
    variance of the mean of the S seed means; the shared problem term (MS_p − MS_e)/(nS) is added when it
    is estimated positive. Without it this is exactly the one-sample t test on the S seed means (df S − 1);
    with it, Satterthwaite (1946) df for the linear combination (between S − 1 and the problems' df; in
    simulation its level is 4-6.5 % at a nominal 5 % across seed / problem / residual mixes, where the fixed
    S − 1 reference is below 1 % once the problem term dominates, as for a method's accuracy). The seed
    term is never replaced by the residual: with 2-3 seeds a small MS_s is chance, and pooling it away makes
    the test anti-conservative (flooring it at the residual instead makes it reject 0-1 % at 5 %).
    """
    parts = [(1.0, a.ms_seed, a.df_seed)]
    if a.ms_problem > a.ms_resid:
        parts += [(1.0, a.ms_problem, a.df_problem), (-1.0, a.ms_resid, a.df_resid)]
    total = sum(c * ms for c, ms, _ in parts)
    if total <= 0:  # every seed mean equal (discrete data, 2 seeds): the residual is the least it can be
        return a.ms_resid / (a.n * a.seeds), float(a.df_seed)
    df = total**2 / sum((c * ms) ** 2 / df for c, ms, df in parts)
    return total / (a.n * a.seeds), df


def seeds_random_test(blocks: Sequence[np.ndarray], *, alpha: float = 0.05) -> SeedsRandomResult:
    """Mean of per-problem, per-seed values (e.g. paired differences) generalising to new seeds and problems.

    ``blocks``: one [problems, seeds] array per stratum (benchmark), the same seeds in every block. The
    interval is ȳ ± t_{df, 1−α/2} · SE with ``seeds_random_variance``; needs ≥ 2 seeds (else NaN: one
    training run says nothing about the next). Calibrated by ``evaluation.report.calibrate``.

    Degenerate estimates give p and interval NaN (``SeedsRandomResult.undefined`` says why), never a verdict:
    a variance estimate of exactly 0 (every seed's paired differences identical, e.g. arms whose samples
    agree under common random numbers) has a χ² interval {0} for the variance (the normal model behind the t
    is falsified by it, not confirmed: one more seed can break the tie), so t = Δ̂/0 would claim infinite
    confidence; and a Satterthwaite df < 1 (the problem term nearly cancelled by the residual) leaves the t
    reference without a usable scale. No SE floor from the sampling noise of one evaluation either: under
    common random numbers that noise is not part of Var(Δ̂), so a floor would be a made-up SE of unknown level.
    """
    a = crossed_anova(blocks)
    nan = math.nan
    if a.seeds < 2 or a.n < 2 or math.isnan(a.ms_resid):
        return SeedsRandomResult(a.mean, nan, nan, nan, nan, nan, a.n, a.seeds)
    var, df = seeds_random_variance(a)
    if var <= 0 or df < 1:
        return SeedsRandomResult(a.mean, math.sqrt(max(var, 0.0)), df, nan, nan, nan, a.n, a.seeds)
    se = math.sqrt(var)
    half = float(student_t.ppf(1 - alpha / 2, df)) * se
    p = float(2 * student_t.sf(abs(a.mean) / se, df))
    return SeedsRandomResult(a.mean, se, df, a.mean - half, a.mean + half, p, a.n, a.seeds)


def signal_to_noise(final: Mapping[str, Mapping[int, Mapping[str, EvalRecord]]], benches: Sequence[str],
                    skip: Sequence[str] = ()) -> tuple[float, float, float]:
    """(signal, noise, SNR) of a scope (``benches`` pooled), in pp, over the final checkpoints of every method
    but ``skip`` ("Signal and Noise", Ai2 2025, arXiv 2508.13144: spread between models / noise of one score).

    Signal: the sd of the scope's accuracy over every final checkpoint (method × seed). Noise: the sampling sd
    of one evaluation of one checkpoint, √(Σ_p p̂_p(1 − p̂_p)/(k − 1)) / n (unbiased binomial variance of a mean
    of k samples per problem), root-mean-square over the checkpoints. SNR ≲ 1: checkpoints differ no more than
    one evaluation's dice, so the set cannot separate methods at this k and n."""
    accs, noise = [], []
    for method, by_seed in final.items():
        if method in skip:
            continue
        for recs in by_seed.values():
            parts = [recs[b].correct.astype(float) for b in benches if b in recs and recs[b].correct.size]
            if not parts or len(parts) < len([b for b in benches if b in recs]):
                continue
            n = sum(c.shape[0] for c in parts)
            accs.append(100 * sum(c.mean(axis=1).sum() for c in parts) / n)
            if all(c.shape[1] > 1 for c in parts):
                var = sum(float((c.mean(axis=1) * (1 - c.mean(axis=1)) / (c.shape[1] - 1)).sum()) for c in parts)
                noise.append(1e4 * var / n**2)
    signal = sample_sd(accs)
    sd_noise = math.sqrt(float(np.mean(noise))) if noise else math.nan
    snr = signal / sd_noise if sd_noise and not math.isnan(signal) else math.nan
    return signal, sd_noise, snr


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


def final_records(res: Results) -> dict[str, dict[int, dict[str, EvalRecord]]]:
    """method -> seed -> benchmark -> record at that run's final step. The SFT start is one model, evaluated
    once by the workflow (``evaluation.suites``): that one evaluation stands for the start of every run's seed,
    so comparisons paired by seed keep every seed (the start has no training seed: its seed sd is 0)."""
    idx = _index(res)
    out: dict[str, dict[int, dict[str, EvalRecord]]] = {}
    for (method, seed), step in sorted(final_steps(res).items()):
        for bench in res.benchmarks:
            rec = idx.get((method, seed, step, bench))
            if rec is None:
                log.warning("%s seed %d: no %s summary at final step %d", method, seed, bench, step)
                continue
            out.setdefault(method, {}).setdefault(seed, {})[bench] = rec
    if len(start := out.get(START_METHOD, {})) == 1:
        (one,) = start.values()
        out[START_METHOD] = dict.fromkeys(sorted({s for by_seed in out.values() for s in by_seed}), one)
    return out


def paired_blocks(final: Mapping[str, Mapping[int, Mapping[str, EvalRecord]]], method: str, baseline: str,
                   seeds: Sequence[int], benches: Sequence[str]) -> dict[str, np.ndarray]:
    """Benchmark -> [problems, seeds] per-problem accuracy differences method − baseline (pp), seeds paired by
    id, problems common to every seed and both arms."""
    blocks: dict[str, np.ndarray] = {}
    for bench in benches:
        common = [s for s in seeds if bench in final[method][s] and bench in final[baseline][s]]
        if not common:
            continue
        per_seed = [final[method][s][bench].per_problem() - final[baseline][s][bench].per_problem() for s in common]
        frame = pd.concat(per_seed, axis=1, join="outer")
        if frame.isna().any().any():
            log.warning("%s vs %s on %s: problem ids differ; only common problems are paired", method, baseline, bench)
        blocks[bench] = frame.dropna().sort_index().to_numpy() * 100
    return blocks


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


def significant_rows(data: pd.DataFrame, significance: pd.DataFrame, scope: str, baseline: str,
                     alpha: float) -> frozenset[int]:
    """Rows of ``data`` whose ``scope`` differs from the baseline's in the significance table's data: verdict
    better / worse (Holm, sequential for the Avg when seeds are added on demand; ``p_holm`` < alpha without a
    verdict column).

    A method row qualifies by its own test; the baseline's row only when every other method differs.
    """
    sig = significance[significance["scope"] == scope] if "scope" in significance else significance.iloc[0:0]
    if "verdict" in sig:
        differs = {m: v in ("better", "worse") for m, v in zip(sig["method"], sig["verdict"])}
    else:
        differs = {m: p < alpha for m, p in zip(sig["method"], pd.to_numeric(sig["p_holm"], errors="coerce"))}
    others = [m for m in data["method"] if m != baseline]
    rows = set()
    for i, method in enumerate(data["method"]):
        if method == baseline:
            if others and all(differs.get(m, False) for m in others):
                rows.add(i)
        elif differs.get(method, False):
            rows.add(i)
    return frozenset(rows)
