"""The rliable aggregates (Agarwal et al. 2021, "Deep RL at the edge of the statistical precipice", §4):
interquartile mean (IQM) over runs × problems and the probability of improvement over the baseline, each
with a stratified bootstrap over runs, as ``rliable.library.get_interval_estimates`` does with problems as
the tasks (runs are resampled within each problem; for the probability of improvement each method's runs
independently, rliable's ``StratifiedIndependentBootstrap``).

Scores are per-problem accuracies (mean over k samples, %) of the final checkpoint of each run, on the main
table's problems pooled (the Avg scope). IQM discards the lowest and highest 25 % of the run × problem
scores (``scipy.stats.trim_mean``), robust to a few outlier runs yet less noisy than the median.
P(X > Y) = mean over problems of P(a run of X scores above a run of Y on it), ties counting one half (the
Mann-Whitney U of rliable's ``probability_of_improvement``); 0.5 = no improvement.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import trim_mean

from evaluation.report.load import AVG, ReportOptions, Results, main_benchmarks, order_benchmarks, sort_methods
from evaluation.report.render import Column, Table
from evaluation.report.stats import final_records
from evaluation.report.tables import DROP_COLUMNS, as_counts, drop_columns, drop_fields, drop_note, method_label

CHUNK = 250  # bootstrap replicates per vectorised block


def _run_scores(res: Results, opts: ReportOptions) -> dict[str, np.ndarray]:
    """method -> [runs, problems] per-problem accuracy (%) on the main benchmarks' problems common to its runs."""
    benches = main_benchmarks(order_benchmarks(res.benchmarks, opts.benchmarks))
    out = {}
    for method, by_seed in final_records(res).items():
        seeds = sorted(s for s in by_seed if all(b in by_seed[s] for b in benches))
        if not seeds:
            continue
        blocks = [pd.concat([by_seed[s][b].per_problem() for s in seeds], axis=1, join="inner") for b in benches]
        out[method] = 100 * np.concatenate([f.sort_index().to_numpy() for f in blocks], axis=0).T
    return out


def iqm(scores: np.ndarray) -> float:
    """Interquartile mean of all scores."""
    return float(trim_mean(np.asarray(scores, dtype=float), 0.25, axis=None))


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """Mean over problems (columns) of P(x run > y run) + ½ P(tie)."""
    gt = (x[:, None, :] > y[None, :, :]).mean(axis=(0, 1))
    eq = (x[:, None, :] == y[None, :, :]).mean(axis=(0, 1))
    return float((gt + 0.5 * eq).mean())


def _resample_runs(scores: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """[reps, runs, problems]: runs drawn with replacement independently within each problem."""
    runs, problems = scores.shape
    idx = rng.integers(0, runs, size=(reps, runs, problems))
    return scores[idx, np.arange(problems)[None, None, :]]


def _interval(stat, samples: list[np.ndarray], opts: ReportOptions) -> tuple[float, float]:
    """Percentile interval of ``stat`` over the stratified bootstrap of every array in ``samples``;
    NaN when an array has one run (resampling one run gives no spread: the interval is not estimable)."""
    if any(s.shape[0] < 2 for s in samples):
        return math.nan, math.nan
    rng = np.random.default_rng(opts.seed)
    values: list[float] = []
    for start in range(0, opts.n_boot, CHUNK):
        reps = min(CHUNK, opts.n_boot - start)
        drawn = [_resample_runs(s, reps, rng) for s in samples]
        values += [stat(*(d[i] for d in drawn)) for i in range(reps)]
    lo, hi = np.quantile(values, [opts.alpha / 2, 1 - opts.alpha / 2])
    return float(lo), float(hi)


def rliable_table(res: Results, opts: ReportOptions, footer: str) -> Table:
    """``rliable``: IQM with its interval per method, and P(method > baseline) with its interval."""
    scores = _run_scores(res, opts)
    base = scores.get(opts.baseline)
    final, benches = final_records(res), main_benchmarks(order_benchmarks(res.benchmarks, opts.benchmarks))
    rows = []
    for method in sort_methods(set(scores)):
        x = scores[method]
        lo, hi = _interval(iqm, [x], opts)
        row = {"method": method, "label": method_label(method), "runs": x.shape[0], "problems": x.shape[1],
               "iqm": iqm(x), "iqm_ci_lo": lo, "iqm_ci_hi": hi, "poi": math.nan, "poi_ci_lo": math.nan,
               "poi_ci_hi": math.nan}
        if base is not None and method != opts.baseline and base.shape[1] == x.shape[1]:
            row["poi"] = 100 * probability_of_improvement(x, base)
            lo, hi = _interval(probability_of_improvement, [x, base], opts)
            row["poi_ci_lo"], row["poi_ci_hi"] = 100 * lo, 100 * hi
        row.update(drop_fields([r for recs in final.get(method, {}).values() for b, r in recs.items() if b in benches]))
        rows.append(row)
    columns = ["method", "label", "runs", "problems", "iqm", "iqm_ci_lo", "iqm_ci_hi", "poi", "poi_ci_lo",
               "poi_ci_hi", *DROP_COLUMNS]
    data = as_counts(pd.DataFrame(rows, columns=columns))
    cols = (
        Column("Method", "label", kind="str", align="l"),
        Column("IQM (%)", "iqm", lo="iqm_ci_lo", hi="iqm_ci_hi"),
        Column(f"P(X > {method_label(opts.baseline)}) (%)", "poi", lo="poi_ci_lo", hi="poi_ci_hi"),
        Column("runs", "runs", kind="int"),
        Column("problems", "problems", kind="int"),
        *drop_columns(),
    )
    level = f"{100 * (1 - opts.alpha):.0f}%"
    caption = (
        f"rliable aggregates ({AVG} problems pooled, final checkpoints): interquartile mean of the run × problem "
        f"accuracies and probability of improvement over {method_label(opts.baseline)}, each with a {level} "
        f"stratified bootstrap over runs ({opts.n_boot} resamples; problems are the strata)"
    )
    note = ("Agarwal et al. 2021 (rliable). P(X > Y) = 50 %: no improvement; its interval excluding 50 is evidence "
            "about these runs' method, at the resolution 2-3 runs allow. With one run the intervals are empty. "
            + drop_note(data, opts))
    return Table("rliable", caption, data, cols, footer, note=note)
