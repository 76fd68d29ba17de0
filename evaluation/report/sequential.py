"""Verdicts that decide: better / worse / equivalent within ±δ / undecided, at a fixed number of seeds or after
each batch of seeds (``seeds: auto``), with error rates that hold over the looks.

Per comparison (a method vs the baseline, the Avg of the main-table benchmarks) the statistic is the method
test of the significance table: the crossed seed × problem random-effects t (``stats.seeds_random_test``,
Satterthwaite df). Looks are taken at S_1 < S_2 < … < S_K = ``max_seeds`` seeds (information fraction
t_k = S_k / S_K; the schedule is fixed before any data, as Lan-DeMets requires) and at look k a comparison
uses the first S_k seeds (by id) common to both arms.

- *Better / worse* (H0: Δ = 0, two-sided): group-sequential test with the Lan & DeMets (1983, Biometrika 70,
  659-663) alpha-spending function of O'Brien-Fleming type, α(t) = 2 − 2Φ(z_{1−α/2}/√t) (``spending``;
  Pocock type α·ln(1 + (e − 1)t) optional). The z boundaries come from the canonical joint distribution
  Corr(Z_i, Z_j) = √(t_i/t_j) by recursive numerical integration (Armitage, McPherson & Rowe 1969; Jennison &
  Turnbull 2000, *Group Sequential Methods*, §19.2); a t statistic on few df is compared through its p value
  with the boundary's nominal level 2(1 − Φ(c_k)) (the significance-level approach, Jennison & Turnbull §3.8,
  exact at one look). Across methods: the group-sequential Holm procedure of Maurer & Bretz (2013, *Stat.
  Biopharm. Res.* 5, 311-320; Ye et al. 2013, *Stat. Med.* 32, 1112-1124): at each look the hypotheses not
  yet rejected share α equally (α/m'), rejections are step-down within the look, and a rejection re-spends
  its α on the rest (boundaries recomputed at α/(m' − 1) for every look). FWER ≤ α over looks and methods.
  A comparison that stopped for equivalence stays in m' (it is never rejected): conservative.
- *Equivalent within ±δ* (H0: |Δ| ≥ δ): TOST (Schuirmann 1987, *J. Pharmacokin. Biopharm.* 15, 657-680):
  two one-sided t tests on the same estimate, SE and df, p_− = P(T ≥ (Δ̂ + δ)/SE), p_+ = P(T ≤ (Δ̂ − δ)/SE);
  each side is a one-sided group-sequential test at level α with the same spending function, and the
  comparison is equivalent once both sides have crossed their boundary (at this or an earlier look). By the
  intersection-union principle (Berger 1982) P(equivalent | |Δ| ≥ δ) ≤ α per comparison; equivalence is
  *not* Holm-adjusted across methods (each "equivalent" is its own claim at level α, documented in the
  table's note), which keeps its power at a true 0.
- *Undecided*: neither, at the cap (``max_seeds``) or while seeds are still to come; also a look whose method
  test is undefined (``SeedsRandomResult.undefined``: no between-seed variance, or df < 1) decides nothing, for
  either test: skipping a look's rejection only lowers the error rates the boundaries spend, and more seeds
  (the next look) are what can give the comparison a variance.

Better / worse take precedence when both hold (then Δ is established and within the margin; the CI shows it).
A fixed design (seed list) is the single look K = 1: c = z_{1−α/2}, i.e. the fixed-sample test with Holm.
The replay is deterministic from the results alone, so the Snakemake checkpoint (``plan``) and the report
agree on every verdict and on which methods get the next batch of seeds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm
from scipy.stats import t as student_t

from evaluation.report.load import AVG, EvalRecord, ReportOptions, main_benchmarks
from evaluation.report.stats import NEEDS_SEEDS, SeedsRandomResult, paired_blocks, seeds_random_test

BETTER, WORSE, EQUIVALENT, UNDECIDED = "better", "worse", "equivalent", "undecided"
VERDICTS = (BETTER, WORSE, EQUIVALENT, UNDECIDED)
SPENDING = ("obf", "pocock")


def spending(t: float, alpha: float, kind: str = "obf") -> float:
    """Cumulative α spent at information fraction t (Lan & DeMets 1983): O'Brien-Fleming or Pocock type."""
    t = min(max(t, 0.0), 1.0)
    if t == 0:
        return 0.0
    if kind == "obf":
        return float(2 - 2 * norm.cdf(norm.ppf(1 - alpha / 2) / math.sqrt(t)))
    if kind == "pocock":
        return float(alpha * math.log(1 + (math.e - 1) * t))
    raise ValueError(f"spending function {kind!r} is not one of {SPENDING}")


_GRID = 1201  # points of the continuation region per look (Simpson's rule)


def _simpson(n: int) -> np.ndarray:
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4, 2
    return w / 3


@lru_cache(maxsize=512)
def boundaries(fractions: tuple[float, ...], alpha: float, two_sided: bool, kind: str = "obf") -> tuple[float, ...]:
    """z boundaries c_1..c_K spending α(t_k) − α(t_{k−1}) at each look (inf when nothing is left to spend).

    Two-sided: reject at k when |Z_k| ≥ c_k, spending α/2 per side (symmetric, as gsDesign's
    ``test.type = 2``: 4.877, 3.357, 2.680, 2.290, 2.031 for five equal looks at α = 0.05, OBF type);
    one-sided: Z_k ≥ c_k. The score B_k = Z_k √t_k has independent N(0, t_k − t_{k−1}) increments; the density
    of B on the continuation region is carried look to look on a grid (Jennison & Turnbull 2000, §19.2) and
    c_k solves the exit probability in closed form given it.
    """
    out: list[float] = []
    spent_before = 0.0
    grid = dens = None  # continuation-region density of B at the previous look
    t_prev = 0.0
    for t in fractions:
        inc = (2 * spending(t, alpha / 2, kind) if two_sided else spending(t, alpha, kind)) - spent_before
        var = t - t_prev
        if grid is None:
            def exit_prob(c: float) -> float:
                p = norm.sf(c)
                return float(2 * p if two_sided else p)
        else:
            sd = math.sqrt(var)
            w = dens * _simpson(grid.size) * (grid[1] - grid[0])

            def exit_prob(c: float, w=w, g=grid, sd=sd, t=t) -> float:
                up = norm.sf((c * math.sqrt(t) - g) / sd)
                if two_sided:
                    up = up + norm.cdf((-c * math.sqrt(t) - g) / sd)
                return float((w * up).sum())
        if inc <= 1e-15 or exit_prob(40.0) >= inc:
            c = math.inf
        else:
            c = float(brentq(lambda x: exit_prob(x) - inc, 0.0, 40.0, xtol=1e-10))
        out.append(c)
        spent_before += inc if math.isfinite(c) else 0.0
        hi = min(c, 12.0) * math.sqrt(t)
        lo = -hi if two_sided else -12.0 * math.sqrt(t)
        new = np.linspace(lo, hi, _GRID)
        if grid is None:
            dens = norm.pdf(new / math.sqrt(t)) / math.sqrt(t)
        else:
            sd = math.sqrt(var)
            kernel = norm.pdf((new[:, None] - grid[None, :]) / sd) / sd
            dens = kernel @ (dens * _simpson(grid.size) * (grid[1] - grid[0]))
        grid, t_prev = new, t
    return tuple(out)


def nominal_levels(fractions: tuple[float, ...], alpha: float, two_sided: bool, kind: str = "obf") -> tuple[float, ...]:
    """The p-value thresholds of the boundaries: 2(1 − Φ(c_k)) two-sided, 1 − Φ(c_k) one-sided."""
    return tuple(float((2 if two_sided else 1) * norm.sf(c)) for c in boundaries(fractions, alpha, two_sided, kind))


def looks_schedule(start: int, step: int, max_seeds: int) -> tuple[int, ...]:
    """Seeds at each look: start, start + step, …, and max_seeds last."""
    looks = list(range(start, max_seeds, step)) if start < max_seeds else []
    return (*looks, max_seeds)


def tost_p(test: SeedsRandomResult, margin: float) -> tuple[float, float]:
    """(p_−, p_+) of the two one-sided tests H0: Δ ≤ −δ and H0: Δ ≥ +δ with the method test's SE and df; NaN
    where the method test is undefined (``SeedsRandomResult.undefined``: SE 0 or df < 1 decide nothing)."""
    if test.undefined or math.isnan(test.estimate):
        return math.nan, math.nan
    lower = float(student_t.sf((test.estimate + margin) / test.se, test.df))
    upper = float(student_t.cdf((test.estimate - margin) / test.se, test.df))
    return lower, upper


@dataclass
class Decision:
    """One comparison's sequential outcome."""

    method: str
    verdict: str = UNDECIDED
    look: int = 0
    """1-based look of the decision (or of the last look taken)."""
    seeds: int = 0
    """Seeds the comparison used (at its decision, or at its last look)."""
    reason: str = ""
    test: SeedsRandomResult | None = None
    p_tost: float = math.nan
    level: float = math.nan
    """Nominal two-sided level of the better/worse boundary at the last look (after Holm's α share)."""
    level_tost: float = math.nan
    sides: set = field(default_factory=set)

    @property
    def decided(self) -> bool:
        return self.verdict != UNDECIDED


def _look_test(final: Mapping[str, Mapping[int, Mapping[str, EvalRecord]]], method: str, baseline: str,
               seeds: Sequence[int], benches: Sequence[str]) -> SeedsRandomResult:
    blocks = paired_blocks(final, method, baseline, seeds, benches)
    return seeds_random_test([blocks[b] for b in main_benchmarks(benches) if b in blocks])


def decide(final: Mapping[str, Mapping[int, Mapping[str, EvalRecord]]], baseline: str, methods: Sequence[str],
           benches: Sequence[str], *, looks: Sequence[int] = (), alpha: float = 0.05, margin: float = 2.0,
           kind: str = "obf", upto: int | None = None) -> dict[str, Decision]:
    """Replay the looks on the final-checkpoint records and return each method's decision (module docstring).

    ``looks``: the seeds at each look (``looks_schedule``); empty = one look at the seeds present (fixed
    design). A method without the seeds of a look stops there: undecided, waiting for seeds. ``upto``: replay
    only the first ``upto`` looks (the Snakemake checkpoint after look ``upto``).
    """
    common = {m: sorted(set(final.get(m, {})) & set(final.get(baseline, {}))) for m in methods}
    fixed = not looks
    if fixed:
        looks = (max((len(s) for s in common.values()), default=0),)
    fractions = tuple(s / looks[-1] for s in looks) if looks[-1] else (1.0,)
    out = {m: Decision(m) for m in methods}
    rejected: set[str] = set()
    for k, n_seeds in enumerate(looks[:upto]):
        active = [m for m in methods if not out[m].decided and (len(common[m]) >= n_seeds or fixed)
                  and (out[m].look == k)]  # took every earlier look
        tests = {}
        for m in active:
            seeds = common[m] if fixed else common[m][:n_seeds]
            d = out[m]
            d.look, d.seeds = k + 1, len(seeds)
            d.test = tests[m] = _look_test(final, m, baseline, seeds, benches)
        # better / worse: step-down Holm within the look, α re-spent after each rejection (Maurer & Bretz 2013)
        todo = sorted((m for m in active if not math.isnan(tests[m].p)), key=lambda m: tests[m].p)
        for m in active:
            out[m].level = nominal_levels(fractions, alpha / max(1, len(methods) - len(rejected)), True, kind)[k]
        for m in todo:
            level = nominal_levels(fractions, alpha / (len(methods) - len(rejected)), True, kind)[k]
            out[m].level = level
            if tests[m].p >= level:
                break
            rejected.add(m)
            out[m].verdict = BETTER if tests[m].estimate > 0 else WORSE
            out[m].reason = f"{out[m].verdict} at look {k + 1} ({out[m].seeds} seeds)"
        one_sided = nominal_levels(fractions, alpha, False, kind)[k]
        for m in active:
            d = out[m]
            lo, hi = tost_p(tests[m], margin)
            d.p_tost, d.level_tost = max(lo, hi), one_sided
            if d.decided or math.isnan(lo):
                continue
            d.sides |= {s for s, p in (("-", lo), ("+", hi)) if p < one_sided}
            if d.sides == {"-", "+"}:
                d.verdict = EQUIVALENT
                d.reason = f"equivalent within ±{margin:g} pp at look {k + 1} ({d.seeds} seeds)"
    for m, d in out.items():
        if d.decided:
            continue
        if d.test is None or d.seeds < 2:
            d.reason = NEEDS_SEEDS
            continue
        if fixed:
            d.reason = f"fixed design ({d.seeds} seeds)"
        elif d.seeds >= looks[-1]:
            d.reason = f"max_seeds reached ({d.seeds} seeds)"
        else:
            nxt = looks[d.look] if d.look < len(looks) else looks[-1]
            d.reason = f"waiting for seeds (next look at {nxt})"
        if d.test.undefined:
            d.reason += f"; {d.test.undefined}"
    return out


def seeds_wanted(decisions: Mapping[str, Decision], looks: Sequence[int]) -> dict[str, int]:
    """Seeds each method should have after this look: the next look's count for an undecided method that took
    every look so far, else what its decision used (never fewer than the first look's)."""
    out = {}
    for m, d in decisions.items():
        took_all = d.look >= 1 and d.seeds >= looks[d.look - 1]
        nxt = looks[d.look] if (not d.decided and took_all and d.look < len(looks)) else d.seeds
        out[m] = max(nxt, looks[0])
    return out


def verdict_rule(opts: ReportOptions) -> str:
    """One sentence on how the verdict column is decided (caption and main-table note)."""
    design = (f"group-sequential over looks at {', '.join(map(str, opts.looks))} seeds ({opts.spending.upper()} "
              f"alpha spending)" if opts.looks else "fixed design")
    return (f"{BETTER} / {WORSE} when the method test rejects Δ = 0 after Holm at α = {opts.alpha:g}, "
            f"{EQUIVALENT} when both one-sided tests (TOST, same model and df) put Δ inside "
            f"±{opts.equivalence_margin:g} pp at α = {opts.alpha:g} each (per comparison, not Holm-adjusted), "
            f"else {UNDECIDED}; {AVG}: {design}; benchmark cells: the same rules at the seeds present "
            "(exploratory; evaluation/report/sequential.py)")
