"""Power analysis of the paired comparison with the baseline, from the run's own variances.

Variance model (two-way random effects without replication, per method vs the baseline, on the main
table's problems pooled, in percentage points): the per-problem, per-seed difference of sample means

    d_ps = Δ + a_p + b_s + e_ps,   Var a_p = σ²_problem,  Var b_s = σ²_seed,  Var e_ps = σ²_resid,

where e_ps contains the sampling noise of k samples per arm. ``var_sampling`` (Σ_arms p̂(1 − p̂) / (k − 1)
averaged over problems and seeds) is what that noise would be with independent samples; σ²_resid below it
means the arms' samples are positively correlated (the evaluation sampler is seeded by the run seed, the
same for every method: common random numbers, and the policies are close), which is what makes the
paired test sensitive.
The components are the ANOVA (method-of-moments) estimates from the n × S matrix of d_ps:
σ²_resid = MS_resid, σ²_problem = max(0, (MS_problem − MS_resid) / S), σ²_seed = max(0, (MS_seed −
MS_resid) / n) (Searle, Casella & McCulloch 1992, *Variance Components*, §4.3). Two variances of Δ̂:

- *seeds fixed*, what the significance table tests (seeds averaged, problems the paired units):
  Var = σ²_d / n with σ²_d = the sample variance of the seed-averaged per-problem differences
  (= (σ²_problem + σ²_resid / S) in expectation); needs no S ≥ 2.
- *seeds random*, generalising to new seeds: Var = σ²_problem / n + σ²_seed / S + σ²_resid / (n S);
  needs S ≥ 2 (else empty).

Minimum detectable difference at power 1 − β and two-sided level α, normal approximation:
MDE = (z_{1−α/2} + z_{1−β}) · √Var, and the problems for a difference δ solve the same equation,
n = ⌈(z_{1−α/2} + z_{1−β})² σ²_d / δ²⌉ (paired design: Chow, Shao & Wang 2008, *Sample Size Calculations
in Clinical Research*, §3.2; Cohen 1988, ch. 2). With seeds random, n(δ) = z² (σ²_problem + σ²_resid / S)
/ (δ² − z² σ²_seed / S) and the seeds at the current n, S(δ) = z² (σ²_seed + σ²_resid / n) / (δ² −
z² σ²_problem / n); empty ("not reachable") when the denominator is ≤ 0, i.e. when the other factor's
variance alone exceeds the target. ``mde_holm`` uses α / m (m = methods compared, Holm's first step:
the best method must pass it). Zero variance gives MDE 0 and 1 problem (the normal approximation; a
permutation test over n problems cannot reach p < α before 2ⁿ ≥ 2/α).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from evaluation.report.load import AVG, ReportOptions, Results, main_benchmarks, order_benchmarks, sort_methods
from evaluation.report.render import Column, Table
from evaluation.report.stats import _final_records
from evaluation.report.tables import _label

POWER = 0.8
TARGET_PP = 2.0


@dataclass(frozen=True)
class VarianceComponents:
    """Estimates from an n × S matrix of per-problem, per-seed differences (pp)."""

    n: int
    seeds: int
    delta: float
    var_diff: float  # sample variance of the seed-averaged per-problem differences (σ²_d)
    var_problem: float
    var_seed: float
    var_resid: float


def variance_components(diffs: np.ndarray) -> VarianceComponents:
    """ANOVA estimates of the module docstring's components from ``diffs`` [n problems, S seeds]."""
    d = np.asarray(diffs, dtype=float)
    if d.ndim == 1:
        d = d[:, None]
    n, s = d.shape
    nan = math.nan
    if n == 0 or s == 0:
        return VarianceComponents(n, s, nan, nan, nan, nan, nan)
    rows = d.mean(axis=1)
    var_diff = float(rows.var(ddof=1)) if n > 1 else nan
    if s < 2 or n < 2:
        return VarianceComponents(n, s, float(d.mean()), var_diff, nan, nan, nan)
    cols = d.mean(axis=0)
    grand = d.mean()
    ms_problem = s * float(((rows - grand) ** 2).sum()) / (n - 1)
    ms_seed = n * float(((cols - grand) ** 2).sum()) / (s - 1)
    resid = d - rows[:, None] - cols[None, :] + grand
    ms_resid = float((resid**2).sum()) / ((n - 1) * (s - 1))
    return VarianceComponents(
        n, s, float(grand), var_diff, max(0.0, (ms_problem - ms_resid) / s), max(0.0, (ms_seed - ms_resid) / n),
        ms_resid,
    )


def z_factor(alpha: float, power: float = POWER) -> float:
    """z_{1−α/2} + z_{power}: 2.80 at α = 0.05, power 0.8."""
    return float(norm.ppf(1 - alpha / 2) + norm.ppf(power))


def mde(var: float, alpha: float, power: float = POWER) -> float:
    """Minimum detectable difference for an estimator of variance ``var``."""
    return z_factor(alpha, power) * math.sqrt(var) if var >= 0 else math.nan


def problems_needed(var_diff: float, delta: float, alpha: float, power: float = POWER) -> float:
    """Seeds fixed: ⌈z² σ²_d / δ²⌉ (at least 1); NaN when σ²_d is unknown."""
    if math.isnan(var_diff):
        return math.nan
    return float(max(1, math.ceil(z_factor(alpha, power) ** 2 * var_diff / delta**2 - 1e-9)))


def _solve(z2: float, var_own: float, var_cross: float, var_other: float, other: int, delta: float) -> float:
    """Smallest m with z² (var_own / m + var_other / other + var_cross / (m other)) <= δ² (at least 1)."""
    if any(math.isnan(v) for v in (var_own, var_cross, var_other)):
        return math.nan
    denom = delta**2 - z2 * var_other / other
    if denom <= 0:
        return math.inf
    return float(max(1, math.ceil(z2 * (var_own + var_cross / other) / denom - 1e-9)))


def random_seed_plan(vc: VarianceComponents, delta: float, alpha: float,
                     power: float = POWER) -> tuple[float, float, float]:
    """Seeds random: (MDE at the current n and S, problems for δ at S seeds, seeds for δ at n problems)."""
    if math.isnan(vc.var_seed):
        return math.nan, math.nan, math.nan
    var = vc.var_problem / vc.n + vc.var_seed / vc.seeds + vc.var_resid / (vc.n * vc.seeds)
    z2 = z_factor(alpha, power) ** 2
    n_needed = _solve(z2, vc.var_problem, vc.var_resid, vc.var_seed, vc.seeds, delta)
    s_needed = _solve(z2, vc.var_seed, vc.var_resid, vc.var_problem, vc.n, delta)
    return mde(var, alpha, power), n_needed, s_needed


def _sampling_variance(method: Sequence[np.ndarray], base: Sequence[np.ndarray]) -> float:
    """Σ_arms mean over problems × seeds of p̂(1 − p̂) / (k − 1), in pp² (unbiased binomial variance of a mean)."""
    total = 0.0
    for arm in (method, base):
        parts = []
        for correct in arm:  # [P, k] per seed
            k = correct.shape[1]
            if k < 2:
                return math.nan
            p = correct.mean(axis=1)
            parts.append(p * (1 - p) / (k - 1))
        total += float(np.concatenate(parts).mean()) if parts else math.nan
    return 1e4 * total


def power_rows(res: Results, opts: ReportOptions, target: float = TARGET_PP, power: float = POWER) -> list[dict]:
    """One row per method vs the baseline on the main benchmarks' problems pooled (the Avg scope)."""
    benches = main_benchmarks(order_benchmarks(res.benchmarks, opts.benchmarks))
    final = _final_records(res)
    base = final.get(opts.baseline)
    methods = [m for m in sort_methods(set(final)) if m != opts.baseline and base is not None]
    rows = []
    for method in methods:
        seeds = sorted(set(final[method]) & set(base))
        blocks, m_arm, b_arm, ks = [], [], [], set()
        for bench in benches:
            common = [s for s in seeds if bench in final[method][s] and bench in base[s]]
            if not common:
                continue
            frame = pd.concat([final[method][s][bench].per_problem() - base[s][bench].per_problem() for s in common],
                              axis=1, join="inner")
            blocks.append(100 * frame.to_numpy())
            for s in common:
                mr, br = final[method][s][bench], base[s][bench]
                ks |= {mr.k, br.k}
                m_arm.append(mr.correct.astype(float))
                b_arm.append(br.correct.astype(float))
        if not blocks or len({b.shape[1] for b in blocks}) != 1:
            continue
        vc = variance_components(np.concatenate(blocks, axis=0))
        var_fixed = vc.var_diff / vc.n if vc.n > 1 else math.nan
        mde_r, n_r, s_r = random_seed_plan(vc, target, opts.alpha, power)
        rows.append({
            "method": method, "baseline": opts.baseline, "scope": AVG, "n": vc.n,
            "k": "/".join(map(str, sorted(ks))), "seeds": vc.seeds, "delta": vc.delta,
            "sd_diff": math.sqrt(vc.var_diff) if not math.isnan(vc.var_diff) else math.nan,
            "var_problem": vc.var_problem, "var_seed": vc.var_seed, "var_resid": vc.var_resid,
            "var_sampling": _sampling_variance(m_arm, b_arm),
            "mde": mde(var_fixed, opts.alpha, power) if not math.isnan(var_fixed) else math.nan,
            "mde_holm": (mde(var_fixed, opts.alpha / len(methods), power) if not math.isnan(var_fixed)
                         else math.nan),
            "problems_for_target": problems_needed(vc.var_diff, target, opts.alpha, power),
            "mde_seeds_random": mde_r, "problems_for_target_seeds_random": n_r, "seeds_for_target": s_r,
        })
    return rows


def _counts(value: Any) -> Any:
    """Integer counts as ints; unreachable (inf) as a word, so CSV and Markdown say it."""
    if isinstance(value, float) and math.isinf(value):
        return "not reachable"
    if isinstance(value, float) and not math.isnan(value):
        return int(value)
    return value


def power_table(res: Results, opts: ReportOptions, footer: str, target: float = TARGET_PP,
                power: float = POWER) -> Table:
    """``power``: MDE at the run's n × k × seeds and the problems / seeds needed for ``target`` pp."""
    columns = [
        "method", "label", "baseline", "scope", "n", "k", "seeds", "delta", "sd_diff", "var_problem", "var_seed",
        "var_resid", "var_sampling", "mde", "mde_holm", "problems_for_target", "mde_seeds_random",
        "problems_for_target_seeds_random", "seeds_for_target",
    ]  # fmt: skip
    rows = power_rows(res, opts, target, power)
    for row in rows:
        row["label"] = _label(row["method"])
        for key in ("problems_for_target", "problems_for_target_seeds_random", "seeds_for_target"):
            row[key] = _counts(row[key])
    data = pd.DataFrame(rows, columns=columns).reset_index(drop=True)
    cols = (
        Column("Method", "label", kind="str", align="l"),
        Column("n", "n", kind="int"),
        Column("k", "k", kind="str"),
        Column("seeds", "seeds", kind="int"),
        Column("Δ (pp)", "delta", kind="signed"),
        Column("sd of diff (pp)", "sd_diff"),
        Column("MDE (pp)", "mde"),
        Column("MDE Holm (pp)", "mde_holm"),
        Column(f"problems for {target:g} pp", "problems_for_target", kind="str"),
        Column("MDE seeds random (pp)", "mde_seeds_random"),
        Column(f"problems for {target:g} pp, seeds random", "problems_for_target_seeds_random", kind="str"),
        Column(f"seeds for {target:g} pp at n", "seeds_for_target", kind="str"),
    )
    caption = (
        f"Power vs {_label(opts.baseline)} ({AVG} problems pooled): minimum detectable difference at "
        f"{100 * power:.0f}% power, two-sided α = {opts.alpha:g}, for the run's n problems × k samples × seeds, "
        f"and the problems (and seeds) needed to detect {target:g} pp; from the run's own variances"
    )
    note = (
        "Seeds fixed (as the significance table tests): MDE = (z_{1−α/2} + z_{0.8}) · sd of the seed-averaged "
        "per-problem differences / √n; MDE Holm uses α / (methods compared). Seeds random adds the between-seed "
        "variance of the difference: Var = σ²_problem/n + σ²_seed/S + σ²_resid/(nS) (ANOVA estimates, CSV "
        "var_* in pp²; var_sampling = binomial noise of k independent samples; var_resid below it: paired samples "
        "correlated); 'not reachable': the "
        f"seed (or problem) variance alone exceeds what a {target:g} pp test allows. Normal approximation "
        "(evaluation/report/power.py); seed variances from 2-3 seeds are rough."
    )
    return Table("power", caption, data, cols, footer, note=note)
