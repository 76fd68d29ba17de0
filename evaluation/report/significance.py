"""The significance table: each method vs the baseline, as a verdict about the method (training seeds random)
and about these checkpoints (seeds fixed)."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from evaluation.report.load import (
    AVG,
    START_METHOD,
    ReportOptions,
    Results,
    main_benchmarks,
    order_benchmarks,
    sort_methods,
)
from evaluation.report.render import Column, Table
from evaluation.report.sequential import BETTER, EQUIVALENT, UNDECIDED, WORSE, decide, tost_p, verdict_rule
from evaluation.report.stats import (
    NEEDS_SEEDS,
    final_records,
    holm,
    paired_blocks,
    paired_test,
    seeds_random_test,
    signal_to_noise,
)
from evaluation.report.tables import (
    DROP_COLUMNS,
    as_counts,
    baseline_note,
    drop_columns,
    drop_fields,
    drop_note,
    method_label,
)

log = logging.getLogger(__name__)


def _parse_claims(claims: Sequence[tuple[str, str, float]]) -> dict[tuple[str, str], float]:
    return {(method, scope): gain for method, scope, gain in claims}


FAMILY_CONFIRMATORY = "confirmatory"
FAMILY_EXPLORATORY = "exploratory"


def significance_table(res: Results, opts: ReportOptions, footer: str) -> Table:
    """Each method vs the baseline, per benchmark and Avg, answering two questions.

    *Method* (``delta_ci_*``, ``p``, ``p_holm``; what bold cells and verdicts use): training seeds and problems
    are random, ``stats.seeds_random_test`` on the problems × seeds matrix of paired differences (needs ≥ 2
    seeds). The family is the table: the Avg (main-table benchmarks) is the one confirmatory endpoint, Holm
    over methods; every benchmark cell is exploratory, Holm over methods × benchmarks together.
    *Checkpoints* (``ckpt_*``): these seeds' checkpoints on these problems, seeds fixed: paired bootstrap
    over problems (stratified by benchmark) and sign-flip permutation p, Holm over methods per scope.
    """
    benches = order_benchmarks(res.benchmarks, opts.benchmarks)
    final = final_records(res)
    claims = _parse_claims(opts.claims)
    rows: list[dict[str, Any]] = []
    base = final.get(opts.baseline)
    note = ""
    if base is None:
        log.warning("baseline %r has no final evaluation; significance table is empty", opts.baseline)
        note = baseline_note(res, opts.baseline)
    snr = {scope: signal_to_noise(final, main_benchmarks(benches) if scope == AVG else [scope], skip=[START_METHOD])
           for scope in [*benches, AVG]}
    for method in sort_methods(set(final)):
        if method == opts.baseline or base is None:
            continue
        seeds = sorted(set(final[method]) & set(base))
        dropped = sorted(set(final[method]) ^ set(base))
        if dropped:
            log.warning("%s vs %s: seeds %s are not in both and are left out", method, opts.baseline, dropped)
        blocks = paired_blocks(final, method, opts.baseline, seeds, benches)
        ks = sorted({final[m][s][b].k for m in (method, opts.baseline) for s in seeds for b in blocks
                     if b in final[m][s]})
        for scope in [*benches, AVG]:
            names = main_benchmarks(benches) if scope == AVG else [scope]
            parts = [blocks[b] for b in names if b in blocks]
            method_test = seeds_random_test(parts, alpha=opts.alpha)
            ckpt = paired_test([b.mean(axis=1) for b in parts], n_boot=opts.n_boot, n_perm=opts.n_perm,
                               seed=opts.seed, alpha=opts.alpha)
            claim = claims.get((method, scope), math.nan)
            inside = ""
            if not (math.isnan(claim) or math.isnan(method_test.ci_lo)):
                inside = "yes" if method_test.ci_lo <= claim <= method_test.ci_hi else "no"
            rows.append({
                "method": method, "label": method_label(method), "baseline": opts.baseline, "scope": scope,
                "family": FAMILY_CONFIRMATORY if scope == AVG else FAMILY_EXPLORATORY,
                "problems": ckpt.n_units, "seeds": method_test.seeds, "k": "/".join(map(str, ks)),
                "delta": ckpt.delta, "delta_ci_lo": method_test.ci_lo, "delta_ci_hi": method_test.ci_hi,
                "df": method_test.df, "p": method_test.p,
                "ckpt_ci_lo": ckpt.ci_lo, "ckpt_ci_hi": ckpt.ci_hi, "p_ckpt_bootstrap": ckpt.p_bootstrap,
                "p_ckpt_permutation": ckpt.p_permutation, "claimed_gain": claim, "claim_inside_ci": inside,
                "p_tost": max(tost_p(method_test, opts.equivalence_margin)), "undefined": method_test.undefined,
                "signal_sd": snr[scope][0], "noise_sd": snr[scope][1], "snr": snr[scope][2],
                **drop_fields([final[method][s][b] for s in seeds for b in names if b in final[method][s]]),
            })
    columns = [
        "method", "label", "baseline", "scope", "family", "problems", "seeds", "k", "delta", "delta_ci_lo",
        "delta_ci_hi", "df", "p", "p_holm", "ckpt_ci_lo", "ckpt_ci_hi", "p_ckpt_bootstrap", "p_ckpt_permutation",
        "p_ckpt_holm", "claimed_gain", "claim_inside_ci", "p_tost", "margin", "verdict", "look", "level",
        "stop_reason", "signal_sd", "noise_sd", "snr", *DROP_COLUMNS,
    ]  # fmt: skip
    data = pd.DataFrame(rows, columns=[c for c in columns if c not in VERDICT_COLUMNS] + ["undefined"])
    data["p_holm"] = math.nan
    data["p_ckpt_holm"] = math.nan
    for family in (FAMILY_CONFIRMATORY, FAMILY_EXPLORATORY):
        mask = data["family"] == family
        data.loc[mask, "p_holm"] = holm(data.loc[mask, "p"].tolist())
    for scope in data["scope"].unique():
        mask = data["scope"] == scope
        data.loc[mask, "p_ckpt_holm"] = holm(data.loc[mask, "p_ckpt_permutation"].tolist())
    _verdicts(data, res, opts, final, benches)
    data = as_counts(data[columns].reset_index(drop=True))
    cols = (
        Column("Method", "label", kind="str", align="l"),
        Column("Scope", "scope", kind="str", align="l"),
        Column("family", "family", kind="str", align="l"),
        Column("Δ (pp) [CI seeds random]", "delta", kind="signed", lo="delta_ci_lo", hi="delta_ci_hi"),
        Column("df", "df", digits=1),
        Column("p", "p", kind="pvalue"),
        Column("p (Holm)", "p_holm", kind="pvalue"),
        Column("CI seeds fixed", "delta", kind="signed", lo="ckpt_ci_lo", hi="ckpt_ci_hi"),
        Column("p seeds fixed (perm.)", "p_ckpt_permutation", kind="pvalue"),
        Column("p seeds fixed (Holm)", "p_ckpt_holm", kind="pvalue"),
        Column(f"p TOST ±{opts.equivalence_margin:g}", "p_tost", kind="pvalue"),
        Column("verdict", "verdict", kind="str", align="l"),
        Column("why it stopped", "stop_reason", kind="str", align="l"),
        Column("problems", "problems", kind="int"),
        Column("seeds", "seeds", kind="int"),
        Column("SNR", "snr", digits=1),
        Column("claimed Δ", "claimed_gain", kind="signed"),
        Column("claim in CI?", "claim_inside_ci", kind="str", align="l"),
        *drop_columns(),
    )
    level = f"{100 * (1 - opts.alpha):.0f}%"
    caption = (
        f"Tests vs {method_label(opts.baseline)} ({AVG} = main-table benchmarks), per-problem accuracy differences "
        f"(samples averaged, seeds paired by id). Method (seeds random): Δ with {level} t interval and p of the "
        f"crossed seed × problem random-effects model (Satterthwaite df; ≥ 2 seeds); Holm over methods for "
        f"{AVG} (confirmatory), over methods × benchmarks for the benchmark cells (exploratory). Checkpoints "
        f"(seeds fixed, these runs only): paired-bootstrap CI ({opts.n_boot}, stratified by benchmark) and "
        f"sign-flip permutation p ({opts.n_perm}), Holm over methods per scope. Verdict: "
        f"{verdict_rule(opts)}"
    )
    drops = drop_note(data, opts) + " (the method's samples in the scope; its baseline's are in the main table)"
    note = " ".join(x for x in (note, SIGNIFICANCE_NOTE, SNR_NOTE, POWER_NOTE, drops) if x)
    return Table("significance", caption, data, cols, footer, note=note)


VERDICT_COLUMNS = ("p_holm", "p_ckpt_holm", "margin", "verdict", "look", "level", "stop_reason")


def _verdicts(data: pd.DataFrame, res: Results, opts: ReportOptions, final, benches: Sequence[str]) -> None:
    """Fill ``margin``, ``verdict``, ``look``, ``level``, ``stop_reason``: Avg rows by the (sequential) replay
    of ``sequential.decide``, benchmark cells by the fixed-sample rule on their Holm p and TOST p."""
    data["margin"] = opts.equivalence_margin
    if data.empty:
        for col in ("verdict", "look", "level", "stop_reason"):
            data[col] = pd.Series(dtype=object)
        return
    sign = [BETTER if d > 0 else WORSE for d in pd.to_numeric(data["delta"], errors="coerce")]
    fixed = [s if ph < opts.alpha else EQUIVALENT if pt < opts.alpha else UNDECIDED
             for s, ph, pt in zip(sign, data["p_holm"], data["p_tost"])]
    data["verdict"], data["look"], data["level"] = fixed, 1, opts.alpha
    data["stop_reason"] = ["exploratory cell (fixed-sample rule)" + (f"; {why}" if why not in ("", NEEDS_SEEDS) else "")
                           for why in data["undefined"]]
    methods = [m for m in data["method"].unique()]
    decisions = decide(final, opts.baseline, methods, benches, looks=opts.looks, alpha=opts.alpha,
                       margin=opts.equivalence_margin, kind=opts.spending)
    for method, d in decisions.items():
        mask = (data["method"] == method) & (data["scope"] == AVG)
        data.loc[mask, ["verdict", "look", "level", "stop_reason"]] = [d.verdict, d.look, d.level, d.reason]
        if opts.looks:  # the decision's own seeds, estimate and TOST p (later seeds are not part of the design)
            data.loc[mask, "p_tost"] = d.p_tost


SIGNIFICANCE_NOTE = (
    "A verdict about a method reads the seeds-random columns: one training run is one draw of the method, and "
    "the seeds-fixed test calls equal methods different whenever runs differ by chance (evaluation/report/"
    "calibrate.py measures both). With one seed the seeds-random columns are empty."
)
SNR_NOTE = ("SNR (per scope, the same for every method): sd of the scope's accuracy over every final checkpoint "
            "(methods × seeds) / sampling sd of one evaluation (binomial, k samples per problem); near 1 or below, "
            "checkpoints differ no more than one evaluation's noise and the set cannot separate methods (CSV "
            "signal_sd, noise_sd in pp; Signal and Noise, Ai2, arXiv 2508.13144).")
POWER_NOTE = ("power.md: the smallest Δ these tests detect at 80 % power (MDE) and the problems / seeds needed "
              "for a 2-point difference, from this run's variances.")
