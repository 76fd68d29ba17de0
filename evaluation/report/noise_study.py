"""What removes noise from the difference of two methods: common random numbers (CRN) and a problem-level or
seed-level covariate from the start checkpoint (CUPED: Deng, Xu, Kohavi & Walker 2013, WSDM).

``python -m evaluation.report.noise_study [--experiments 300] [--results OUT]`` prints, for the simulated
default-shaped experiment (``calibrate.Design``, a start arm evaluated with each seed's sampler) and, with
``--results``, for a workflow results tree (the start checkpoint ``sft``, evaluated once, stands for each seed):

- *CRN*: the variance of Δ̂ (Avg difference method − baseline over seeds) with the evaluation sampler's uniforms
  shared by the methods of a seed (what the evaluation does: it is seeded by the run seed) over independent ones;
  training-side CRN (the rollout sampler is seeded by (seed, step), prompts by seed, for every method) is already
  in the loop and cannot be switched off in a simulation of evaluations.
- *Problem covariate* x_p (the start's per-problem accuracy): both arms are scored on the same problems, so the
  centred adjustment d_ps − θ(x_p − x̄) leaves Δ̂ unchanged; it can only shrink the problem term of the seeds-
  random SE (the share R² of the seed-averaged differences' problem variance that x_p explains).
- *Seed covariate* x_s (the start's Avg under seed s's sampler): it could remove the part of the seed term
  correlated with it, 1 − ρ² with ρ = corr(d_s, x_s) over seeds.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy.special import expit, logit

from evaluation.report.calibrate import BASELINE, Design, truth
from evaluation.report.load import START_METHOD, load_results, main_benchmarks
from evaluation.report.stats import final_records, paired_blocks, seeds_random_test


def _simulate(design: Design, tau: float, rng: np.random.Generator, crn: bool):
    """[problems, seeds] accuracies (%) of the baseline, one equal method and the start (no run effect)."""
    n, s = design.problems[0], design.seeds
    eta = logit(np.clip(rng.beta(*design.beta, size=n), 1e-9, 1 - 1e-9))
    out = {name: np.zeros((n, s)) for name in ("base", "method", "start")}
    for j in range(s):
        shared = rng.random((n, design.k))
        for name in out:
            u = shared if crn else rng.random((n, design.k))
            run = 0.0 if name == "start" else rng.normal(0, tau) + rng.normal(0, design.interaction, n)
            out[name][:, j] = 100 * (u < expit(eta + run)[:, None]).mean(axis=1)
    return out


def study(d: np.ndarray, x: np.ndarray) -> dict[str, float]:
    """Δ̂, the seeds-random SE, the SE after the centred problem-covariate adjustment, the R² of the seed-averaged
    differences on x_p, and ρ(d_s, x_s) over seeds, from [problems, seeds] differences d and start accuracies x."""
    plain = seeds_random_test([d])
    xp, dp = x.mean(axis=1), d.mean(axis=1)
    xc = xp - xp.mean()
    theta = float(xc @ (dp - dp.mean()) / (xc @ xc)) if xc @ xc > 0 else 0.0
    adjusted = seeds_random_test([d - theta * xc[:, None]])
    r2 = 1 - float(((dp - dp.mean() - theta * xc) ** 2).sum() / max(((dp - dp.mean()) ** 2).sum(), 1e-12))
    ds, xs = d.mean(axis=0), x.mean(axis=0)
    rho = float(np.corrcoef(ds, xs)[0, 1]) if ds.std() > 0 and xs.std() > 0 else math.nan
    return {"delta": plain.estimate, "se": plain.se, "se_adjusted": adjusted.se, "delta_adjusted": adjusted.estimate,
            "r2_problem": r2, "rho_seed": rho}


def simulated(design: Design, experiments: int, seed: int = 0) -> dict[str, float]:
    tau = truth(design).tau
    rng = np.random.default_rng(seed)
    rows = {crn: [] for crn in (True, False)}
    for crn in rows:
        for _ in range(experiments):
            sim = _simulate(design, tau, rng, crn)
            rows[crn].append(study(sim["method"] - sim["base"], sim["start"]))
    crn, ind = rows[True], rows[False]
    var = {k: float(np.var([r["delta"] for r in v], ddof=1)) for k, v in (("crn", crn), ("independent", ind))}
    return {"var_delta_crn": var["crn"], "var_delta_independent": var["independent"],
            "crn_variance_ratio": var["crn"] / var["independent"],
            "mean_se": float(np.mean([r["se"] for r in crn])),
            "mean_se_problem_covariate": float(np.mean([r["se_adjusted"] for r in crn])),
            "mean_r2_problem": float(np.mean([r["r2_problem"] for r in crn])),
            "mean_rho2_seed": float(np.nanmean([r["rho_seed"] ** 2 for r in crn]))}


def observed(results: Path, baseline: str = "dapo", eval_dir: str = "eval/curve") -> dict[str, dict[str, float]]:
    """``study`` for every method vs ``baseline`` of a results tree. The workflow evaluates the start once (its
    first seed's sampler), which then stands for every seed: x_s is constant and ρ NaN; a tree with the start
    evaluated on each seed (older runs) gives each seed its own."""
    final = final_records(load_results(results, eval_dir))
    if START_METHOD not in final or baseline not in final:
        raise SystemExit(f"{results}: needs {START_METHOD} and {baseline} evaluations")
    out = {}
    for method in sorted(set(final) - {START_METHOD, baseline}):
        seeds = sorted(set(final[method]) & set(final[baseline]))
        benches = main_benchmarks(sorted({b for s in seeds for b in final[method][s]}))
        d = np.concatenate(list(paired_blocks(final, method, baseline, seeds, benches).values()))
        one = final[START_METHOD][min(final[START_METHOD])]
        start = {s: final[START_METHOD].get(s, one) for s in seeds}
        x = np.concatenate([np.column_stack([100 * start[s][b].per_problem().sort_index().to_numpy() for s in seeds])
                            for b in benches])
        if len(seeds) >= 2 and x.shape == d.shape:
            out[method] = study(d, x)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.report.noise_study",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiments", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed-sd", type=float, default=1.8)
    parser.add_argument("--results", type=Path, default=None, help="also a workflow results tree (its eval/curve)")
    args = parser.parse_args(argv)
    design = replace(Design(), seeds=args.seeds, seed_sd_pp=args.seed_sd)
    print(f"simulated ({args.experiments} experiments, {design.problems[0]} problems, k {design.k}, "
          f"{args.seeds} seeds, run-effect sd {args.seed_sd:g} pp, one method equal to {BASELINE}):")
    for key, value in simulated(design, args.experiments).items():
        print(f"  {key}: {value:.4g}")
    if args.results is not None:
        for method, row in observed(args.results).items():
            print(f"{args.results} {method} vs {BASELINE}: " + ", ".join(f"{k} {v:.4g}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
