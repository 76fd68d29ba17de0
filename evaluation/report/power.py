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
- *seeds random*, generalising to new seeds (what the method test of the significance table uses):
  Var = σ²_problem / n + σ²_seed / S + σ²_resid / (n S); needs S ≥ 2 (else empty).

Seeds fixed, normal approximation: MDE = (z_{1−α/2} + z_{1−β}) · √Var, and the problems for a difference δ
solve n = ⌈(z_{1−α/2} + z_{1−β})² σ²_d / δ²⌉ (paired design: Chow, Shao & Wang 2008, *Sample Size
Calculations in Clinical Research*, §3.2; Cohen 1988, ch. 2). NaN at σ²_d = 0 (the seed-averaged differences
are the same on every problem, e.g. the same samples): an estimate of 0 is no scale, and "MDE 0, 1 problem"
would claim any difference is detected.
Seeds random: the method test is a t test with Satterthwaite df (``stats.seeds_random_variance``), 2 df
with 3 seeds, so its power is the noncentral t's, P(|T_{df, δ/SE}| > t_{df, 1−α/2}), with SE and df from
the expected mean squares at the design (n', S'); MDE solves power = 1 − β, ``problems_for_target_seeds_
random`` is the least n' at S seeds and ``seeds_for_target`` the least S' ≥ 2 at n problems that reach it
("not reachable" when no n' does: the seed variance alone exceeds what the target allows); NaN where every
component is estimated 0, as the method test is undefined there (``stats.SeedsRandomResult.undefined``), not
"MDE 0, 2 seeds". ``*_holm``
uses α / m (m = methods compared, Holm's first step: the best method must pass it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.stats import chi2, norm
from scipy.stats import t as student_t

from evaluation.report.load import (
    AVG,
    TARGET_PP,
    ReportOptions,
    Results,
    main_benchmarks,
    method_label,
    order_benchmarks,
    sort_methods,
)
from evaluation.report.render import Column, Table, fmt_float
from evaluation.report.stats import (
    CrossedAnova,
    crossed_anova,
    final_records,
    paired_blocks,
    seeds_random_variance,
)

POWER = 0.8


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
    var_diff = float(d.mean(axis=1).var(ddof=1)) if n > 1 else nan
    if s < 2 or n < 2:
        return VarianceComponents(n, s, float(d.mean()), var_diff, nan, nan, nan)
    a = crossed_anova([d])
    return VarianceComponents(
        n, s, a.mean, var_diff, max(0.0, (a.ms_problem - a.ms_resid) / s), max(0.0, (a.ms_seed - a.ms_resid) / n),
        a.ms_resid,
    )


def no_variance(vc: VarianceComponents) -> bool:
    """Every component estimated 0: the paired differences are the same at every seed and problem (within
    benchmarks), where the method test is undefined (``stats.SeedsRandomResult.undefined``)."""
    return vc.var_problem == vc.var_seed == vc.var_resid == 0


def z_factor(alpha: float, power: float = POWER) -> float:
    """z_{1−α/2} + z_{power}: 2.80 at α = 0.05, power 0.8."""
    return float(norm.ppf(1 - alpha / 2) + norm.ppf(power))


def mde(var: float, alpha: float, power: float = POWER) -> float:
    """Minimum detectable difference for an estimator of variance ``var``; NaN at 0 (no scale) or unknown."""
    return z_factor(alpha, power) * math.sqrt(var) if var > 0 else math.nan


def problems_needed(var_diff: float, delta: float, alpha: float, power: float = POWER) -> float:
    """Seeds fixed: ⌈z² σ²_d / δ²⌉ (at least 1); NaN when σ²_d is 0 (no scale) or unknown."""
    if not var_diff > 0:
        return math.nan
    return float(max(1, math.ceil(z_factor(alpha, power) ** 2 * var_diff / delta**2 - 1e-9)))


def _expected_anova(vc: VarianceComponents, n: int, seeds: int) -> CrossedAnova:
    """Expected mean squares of an n × S layout with ``vc``'s components (one stratum)."""
    ms_p, ms_s = vc.var_resid + seeds * vc.var_problem, vc.var_resid + n * vc.var_seed
    return CrossedAnova(n, seeds, vc.delta, ms_p, ms_s, vc.var_resid, n - 1, seeds - 1, (n - 1) * (seeds - 1))


_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(400)
_QUANTILES = (_NODES + 1) / 2  # Gauss-Legendre on (0, 1)


def t_power(delta: float, se: float, df: float, alpha: float) -> float:
    """Power of the two-sided t test of level α for a true mean ``delta``: the noncentral t's
    P(|T| > t_crit), as E_V[Φ(nc − c √(V/df)) + Φ(−nc − c √(V/df))] over V ~ χ²_df, integrated over V's
    quantiles (scipy's ``nct`` returns NaN or 0 far in the tail, where Holm's small α puts it). NaN at SE 0 or
    df < 1, where the test decides nothing (``stats.seeds_random_test``)."""
    if not se > 0 or not df >= 1:
        return math.nan
    crit = float(student_t.ppf(1 - alpha / 2, df))
    nc = abs(delta) / se
    scale = crit * np.sqrt(chi2.ppf(_QUANTILES, df) / df)
    given = norm.sf(scale - nc) + norm.cdf(-scale - nc)
    return float(min(1.0, (_WEIGHTS * given).sum() / 2))


def seeds_random_power(vc: VarianceComponents, delta: float, alpha: float, n: int, seeds: int) -> float:
    """Power of the seeds-random method test at n problems × S seeds for a true difference δ."""
    var, df = seeds_random_variance(_expected_anova(vc, n, seeds))
    return t_power(delta, math.sqrt(max(var, 0.0)), df, alpha)


def _t_mde(se: float, df: float, alpha: float, power: float) -> float:
    """δ at which the t test of this SE and df has the given power (NaN where ``t_power`` is)."""
    if not se > 0 or not df >= 1:
        return math.nan
    hi = se * 10
    while t_power(hi, se, df, alpha) < power:
        hi *= 4
    return float(brentq(lambda d: t_power(d, se, df, alpha) - power, 0.0, hi, xtol=1e-6 * se))


def _least(reaches, lo: int, cap: int) -> float:
    """Least m in [lo, cap] with reaches(m) (monotone); inf when even cap does not."""
    if not reaches(cap):
        return math.inf
    if reaches(lo):
        return float(lo)
    bad, good = lo, cap
    while good - bad > 1:
        mid = (bad + good) // 2
        bad, good = (bad, mid) if reaches(mid) else (mid, good)
    return float(good)


def c4(df: float) -> float:
    """E[s] / σ for a variance estimate on ``df`` degrees of freedom: √(2/ν) Γ((ν+1)/2) / Γ(ν/2)."""
    if not math.isfinite(df):
        return 1.0
    return math.exp(0.5 * math.log(2 / df) + math.lgamma((df + 1) / 2) - math.lgamma(df / 2))


def random_seed_plan(vc: VarianceComponents, delta: float, alpha: float,
                     power: float = POWER) -> tuple[float, float, float]:
    """Seeds random: (MDE at the current n and S, problems for δ at S seeds, seeds ≥ 2 for δ at n problems);
    NaN with one seed or when every component is estimated 0 (no scale: module docstring)."""
    if math.isnan(vc.var_seed) or no_variance(vc):
        return math.nan, math.nan, math.nan
    mde_r = seeds_random_mde(vc, alpha, power)
    n_needed = _least(lambda m: seeds_random_power(vc, delta, alpha, m, vc.seeds) >= power, 2, 10**7)
    s_needed = _least(lambda m: seeds_random_power(vc, delta, alpha, vc.n, m) >= power, 2, 10**4)
    return mde_r, n_needed, s_needed


def seeds_random_mde(vc: VarianceComponents, alpha: float, power: float = POWER) -> float:
    """MDE of the seeds-random method test at the run's own n and S (NaN with one seed).

    The SE comes from variances estimated on few df (2 with 3 seeds), and the square root of such an
    estimate is low on average (Jensen: by 11 % at 2 df), so the MDE is divided by ``c4(df)`` to be unbiased;
    without it the promised 80 % was 66-74 % in ``calibrate``'s simulation at a 1.8 pp run sd."""
    if math.isnan(vc.var_seed):
        return math.nan
    var, df = seeds_random_variance(_expected_anova(vc, vc.n, vc.seeds))
    return _t_mde(math.sqrt(max(var, 0.0)), df, alpha, power) / c4(df)


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
    final = final_records(res)
    base = final.get(opts.baseline)
    methods = [m for m in sort_methods(set(final)) if m != opts.baseline and base is not None]
    rows = []
    for method in methods:
        seeds = sorted(set(final[method]) & set(base))
        paired = paired_blocks(final, method, opts.baseline, seeds, benches)
        if not paired or len({b.shape[1] for b in paired.values()}) != 1:
            continue
        m_arm, b_arm, ks = [], [], set()
        for bench in paired:
            for s in seeds:
                if bench in final[method][s] and bench in base[s]:
                    mr, br = final[method][s][bench], base[s][bench]
                    ks |= {mr.k, br.k}
                    m_arm.append(mr.correct.astype(float))
                    b_arm.append(br.correct.astype(float))
        blocks = list(paired.values())
        vc = variance_components(np.concatenate(blocks, axis=0))
        var_fixed = vc.var_diff / vc.n if vc.n > 1 else math.nan
        mde_r, n_r, s_r = random_seed_plan(vc, target, opts.alpha, power)
        mde_r_holm = seeds_random_mde(vc, opts.alpha / len(methods), power)
        rows.append({
            "method": method, "baseline": opts.baseline, "scope": AVG, "n": vc.n,
            "k": "/".join(map(str, sorted(ks))), "seeds": vc.seeds, "delta": vc.delta,
            "sd_diff": math.sqrt(vc.var_diff) if not math.isnan(vc.var_diff) else math.nan,
            "var_problem": vc.var_problem, "var_seed": vc.var_seed, "var_resid": vc.var_resid,
            "var_sampling": _sampling_variance(m_arm, b_arm),
            "mde": mde(var_fixed, opts.alpha, power),
            "mde_holm": mde(var_fixed, opts.alpha / len(methods), power),
            "problems_for_target": problems_needed(vc.var_diff, target, opts.alpha, power),
            "mde_seeds_random": mde_r, "mde_seeds_random_holm": mde_r_holm,
            "problems_for_target_seeds_random": n_r, "seeds_for_target": s_r,
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
        "mde_seeds_random_holm", "problems_for_target_seeds_random", "seeds_for_target",
    ]  # fmt: skip
    rows = power_rows(res, opts, target, power)
    counts = ("problems_for_target", "problems_for_target_seeds_random", "seeds_for_target")
    for row in rows:
        row["label"] = method_label(row["method"])
    data = pd.DataFrame(rows, columns=columns).reset_index(drop=True)
    for key in counts:  # object columns: an undefined (NaN) row must not turn the others' counts into floats
        data[key] = pd.Series([_counts(row[key]) for row in rows], index=data.index, dtype=object)
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
        Column("MDE seeds random Holm (pp)", "mde_seeds_random_holm"),
        Column(f"problems for {target:g} pp, seeds random", "problems_for_target_seeds_random", kind="str"),
        Column(f"seeds for {target:g} pp at n", "seeds_for_target", kind="str"),
    )
    caption = (
        f"Power vs {method_label(opts.baseline)} ({AVG} problems pooled): minimum detectable difference at "
        f"{100 * power:.0f}% power, two-sided α = {opts.alpha:g}, for the run's n problems × k samples × seeds, "
        f"and the problems (and seeds) needed to detect {target:g} pp; from the run's own variances"
    )
    note = (
        "Seeds random (the method test, what verdicts use): Var = σ²_problem/n + σ²_seed/S + σ²_resid/(nS) "
        "(ANOVA estimates, CSV var_* in pp²), t test with Satterthwaite df (2 with 3 seeds), power from the "
        "noncentral t; 'not reachable': the seed variance alone exceeds what a "
        f"{target:g} pp test at this many seeds allows. Seeds fixed (the checkpoint test): MDE = (z_{{1−α/2}} + "
        "z_{0.8}) · sd of the seed-averaged per-problem differences / √n. Holm columns use α / (methods "
        "compared). var_sampling = binomial noise of k independent samples (var_resid below it: paired samples "
        "correlated). Seed variances from 2-3 seeds are rough. '–': undefined, not 0 (an estimate of 0 is no "
        "scale, and an MDE of 0 would claim any difference is detected)" + undefined_note(data) + " "
        "(evaluation/report/power.py)."
    )
    return Table("power", caption, data, cols, footer, note=note)


def undefined_note(data: pd.DataFrame) -> str:
    """Which rows' MDE cells are undefined and why (``power_table``'s note): seeds fixed at sd of diff 0,
    seeds random with one seed or where the method test is undefined (no between-seed variance, or
    Satterthwaite df < 1)."""
    if data.empty:
        return ""
    labels = data["label"] if "label" in data else data["method"].map(method_label)
    fixed = labels[pd.to_numeric(data["sd_diff"], errors="coerce") == 0].tolist()
    random = labels[(data["seeds"] >= 2) & pd.to_numeric(data["mde_seeds_random"], errors="coerce").isna()].tolist()
    one_seed = labels[data["seeds"] < 2].tolist()
    parts = [f"seeds random, {'every row' if len(one_seed) == len(data) else ', '.join(one_seed)}: 1 seed (the "
             "method test needs ≥ 2)"] if one_seed else []
    if fixed:
        parts.append(f"seeds fixed, {', '.join(fixed)}: sd of diff 0 (the seed-averaged differences are the same "
                     "on every problem: these checkpoints score alike)")
    if random:
        parts.append(f"seeds random, {', '.join(random)}: the method test is undefined (no between-seed variance "
                     "in the paired differences, or Satterthwaite df < 1; significance.md's stop_reason)")
    return (": " + "; ".join(parts)) if parts else ""


def _span(values: Sequence[float], digits: int = 1) -> str:
    """``a`` or ``a-b`` of the finite values, rounded."""
    finite = sorted(float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v))
    if not finite:
        return "?"
    lo, hi = fmt_float(finite[0], digits), fmt_float(finite[-1], digits)
    return lo if lo == hi else f"{lo}-{hi}"


def design_note(power: pd.DataFrame, opts: ReportOptions) -> str:
    """What the design can detect with seeds random, from the power table (its MDE and seeds for 2 pp)."""
    if power.empty:
        return ""
    seeds, n = int(power["seeds"].max()), int(power["n"].max())
    if seeds < 2:
        return (f"Design: {seeds} seed × {n} problems; a verdict about a method needs ≥ 2 seeds (these tests are about "
                f"these checkpoints only; power.md).")
    undefined = [method_label(m) for m, v in zip(power["method"], power["mde_seeds_random"]) if not math.isfinite(v)]
    design = f"Design: {seeds} seeds × {n} problems × k {power['k'].iloc[0]}: the method test vs "
    if len(undefined) == len(power):
        return (design + f"{method_label(opts.baseline)} is undefined for every method (no between-seed variance in "
                "the paired differences, or Satterthwaite df < 1), so there is no detectable difference to state "
                "(power.md).")
    skipped = f"; undefined for {', '.join(undefined)}: power.md" if undefined else ""
    need = [v for v in power["seeds_for_target"] if v != "not reachable"]
    seeds_text = _span(need, 0) if need else "no number of"
    return (design + f"{method_label(opts.baseline)} detects {_span(power['mde_seeds_random'])} pp at 80 % power "
            f"({_span(power['mde_seeds_random_holm'])} pp at Holm's first step{skipped}); a {TARGET_PP:g} pp "
            "difference needs "
            f"{seeds_text} seeds at these problems (power.md). A smaller true difference is mostly reported as no "
            "difference.")
