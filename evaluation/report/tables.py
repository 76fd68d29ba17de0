"""The accuracy, significance, learning, wall-clock and code tables."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from evaluation.report.load import (
    AVG,
    DROP_RULE,
    PHASES,
    EvalRecord,
    ReportOptions,
    Results,
    main_benchmarks,
    method_label,
    order_benchmarks,
    sort_methods,
)
from evaluation.report.power import design_note
from evaluation.report.render import Column, Table, fmt_float
from evaluation.report.sequential import verdict_rule
from evaluation.report.stats import (
    final_records,
    problem_counts,
    sample_sd,
    seed_step_accuracy,
    seeds_random_test,
    significant_rows,
    stratified_bootstrap_ci,
    wall_clock_at,
    weighted_average,
)

log = logging.getLogger(__name__)


def _problem_seed_accuracy(by_seed: Mapping[int, EvalRecord]) -> np.ndarray:
    """[problems, seeds] per-problem accuracy (%, mean over samples), problems common to every seed."""
    series = [by_seed[s].per_problem() for s in sorted(by_seed)]
    if not series:
        return np.zeros((0, 0))
    return pd.concat(series, axis=1, join="inner").sort_index().to_numpy() * 100


def accuracy_interval(blocks: Sequence[np.ndarray], opts: ReportOptions) -> tuple[float, float]:
    """CI of a method's expected accuracy (%): seeds and problems random with ≥ 2 seeds (``seeds_random_test``,
    cut to [0, 100]), else (or when that test is undefined) the bootstrap over problems, conditional on the seeds."""
    blocks = [b for b in blocks if b.size]
    if blocks and blocks[0].shape[1] >= 2:
        if not (result := seeds_random_test(blocks, alpha=opts.alpha)).undefined:
            return max(0.0, result.ci_lo), min(100.0, result.ci_hi)
    return stratified_bootstrap_ci([b.mean(axis=1) for b in blocks], n_boot=opts.n_boot, seed=opts.seed,
                                   alpha=opts.alpha)


DROP_SHOWN: tuple[str, ...] = ("requested", "graded", "failed", "overlong", "no_answer")
DROP_COLUMNS: tuple[str, ...] = (*DROP_SHOWN, *(f"{key}_pct" for key in DROP_SHOWN[2:]))
"""The data columns of a row's drops (:func:`drop_fields`), in table order."""


def drop_fields(records: Sequence[EvalRecord]) -> dict[str, float]:
    """A row's drop counts, summed over its records (benchmarks × seeds), with each share of requested (%)."""
    out = {key: float(sum(r.drops.get(key, math.nan) for r in records)) for key in DROP_SHOWN}
    for key in DROP_SHOWN[2:]:
        out[f"{key}_pct"] = 100 * out[key] / out["requested"] if out["requested"] else math.nan
    return out


def as_counts(data: pd.DataFrame) -> pd.DataFrame:
    """The drop counts as integers (missing where unrecorded), so that CSV writes counts, not floats."""
    for key in DROP_SHOWN:
        data[key] = pd.to_numeric(data[key]).round().astype("Int64") if key in data else pd.NA
    return data


def drop_columns() -> list[Column]:
    """The drop columns beside a score (count and share of requested); the rule is ``DROP_RULE``."""
    return [Column("requested", "requested", kind="int"), Column("graded", "graded", kind="int"),
            Column("failed", "failed", kind="count_pct", pct="failed_pct"),
            Column("overlong", "overlong", kind="count_pct", pct="overlong_pct"),
            Column("no answer", "no_answer", kind="count_pct", pct="no_answer_pct")]


def drop_note(data: pd.DataFrame, opts: ReportOptions) -> str:
    """The drop rule, and a warning naming every row whose failed, overlong or unanswered share exceeds
    ``opts.max_drop_pct``."""
    over = [f"{row['label']}{f' step {row.step}' if 'step' in row else ''} {key.replace('_', ' ')} "
            f"{row[f'{key}_pct']:.1f} %" for _, row in data.iterrows()
            for key in DROP_SHOWN[2:] if f"{key}_pct" in row and row[f"{key}_pct"] > opts.max_drop_pct]
    warning = (f"Warning: drops above {opts.max_drop_pct:g} % of the requested samples (report.max_drop_pct): "
               f"{'; '.join(over)}; these scores are not comparable with a run that kept its samples. ") if over else ""
    return warning + DROP_RULE


INTERVAL_RULE = ("CI: seeds and problems random (crossed random-effects t interval, Satterthwaite df) with ≥ 2 "
                 "seeds; with 1 seed a bootstrap over problems, conditional on that seed")


def main_table(res: Results, opts: ReportOptions, footer: str, significance: Table | None = None,
               power: Table | None = None) -> Table:
    """DelTA-style table on the math sets (``main_benchmarks``); see ``accuracy_table``. With ``power`` the
    note says what the design can detect (``design_note``)."""
    benches = main_benchmarks(order_benchmarks(res.benchmarks, opts.benchmarks))
    table = accuracy_table(res, opts, footer, "main", benches, with_avg=True, significance=significance)
    if significance is not None and "verdict" in significance.data:
        table = with_verdicts(table, significance.data, opts)
    if power is None:
        return table
    note = " ".join(x for x in (table.note, design_note(power.data, opts)) if x)
    return replace(table, note=note)


def with_verdicts(table: Table, significance: pd.DataFrame, opts: ReportOptions) -> Table:
    """The main table plus the significance table's Avg verdict per method after the Δ column; the note has the
    rule and, with seeds on demand, each method's seeds and why it stopped (significance.md's stop_reason)."""
    avg = significance[significance["scope"] == AVG]
    verdicts = dict(zip(avg["method"], avg["verdict"]))
    data = table.data.assign(verdict=[verdicts.get(m, "") for m in table.data["method"]])
    cols = list(table.columns)
    at = next(i for i, c in enumerate(cols) if c.value == f"{AVG}_delta") + 1
    cols.insert(at, Column(f"verdict (±{opts.equivalence_margin:g} pp)", "verdict", kind="str", align="l"))
    seeds = dict(zip(data["method"], data["seeds"]))
    why = [f"{method_label(m)}: {seeds.get(m, '?')} seeds, {r}" for m, r in zip(avg["method"], avg["stop_reason"])]
    auto = (f"Seeds on demand (looks at {', '.join(map(str, opts.looks))} seeds; {method_label(opts.baseline)}: "
            f"{seeds.get(opts.baseline, '?')} seeds, as many as any method): {'; '.join(why)}.") if opts.looks else ""
    note = " ".join(x for x in (table.note, f"Verdict vs {method_label(opts.baseline)} ({AVG}): {verdict_rule(opts)}.",
                                auto) if x)
    return replace(table, data=data, columns=tuple(cols), note=note)


ACCURACY_TITLES: Mapping[str, str] = {
    "main": "",
    "ood": "Out-of-domain (multiple choice): ",
    "gsm8k": "GSM8K: ",
}


def accuracy_table(
    res: Results, opts: ReportOptions, footer: str, name: str, benches: Sequence[str], *, with_avg: bool,
    significance: Table | None = None,
) -> Table:
    """DelTA-style table: avg@k % per benchmark, weighted Avg, sd over seeds, bootstrap CI, Δ vs baseline.

    Used for ``main`` (math sets), ``ood`` (multiple-choice sets) and ``gsm8k``; ``with_avg=False`` drops
    the Avg column (Δ is then on the first benchmark).
    """
    benches = list(benches)
    weights = problem_counts(res)
    final = final_records(res)
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
            row[f"{bench}_sd"] = sample_sd(accs)
            block = _problem_seed_accuracy(recs)
            strata.append(block)
            row[f"{bench}_ci_lo"], row[f"{bench}_ci_hi"] = accuracy_interval([block], opts)
        row[AVG] = float(np.mean(per_seed_avg)) if per_seed_avg else math.nan
        row[f"{AVG}_sd"] = sample_sd(per_seed_avg)
        row[f"{AVG}_ci_lo"], row[f"{AVG}_ci_hi"] = accuracy_interval(strata, opts)
        row["n"] = int(sum(weights[b] for b in benches))
        ks = sorted({r.k for recs in by_seed.values() for r in recs.values()})
        row["k"] = ks[0] if len(ks) == 1 else "/".join(map(str, ks))
        row["seeds"] = len(seeds)
        row.update(drop_fields([by_seed[s][b] for s in seeds for b in benches if b in by_seed[s]]))
        rows.append(row)
    scopes = [*benches, AVG] if with_avg else benches
    data = pd.DataFrame(rows)
    if data.empty:
        data = pd.DataFrame(columns=["method", *scopes, *[f"{b}_sd" for b in scopes], "n", "k", "seeds"])
        for bench in scopes:
            data[[f"{bench}_ci_lo", f"{bench}_ci_hi"]] = math.nan
    base = data[data["method"] == opts.baseline]
    note = ""
    if base.empty:
        log.warning("baseline %r has no final evaluation; Δ columns are empty", opts.baseline)
        note = baseline_note(res, opts.baseline)
    for bench in scopes:
        data[f"{bench}_delta"] = data[bench] - (float(base[bench].iloc[0]) if not base.empty else math.nan)
    data.loc[data["method"] == opts.baseline, [f"{b}_delta" for b in scopes]] = math.nan
    order = ["method"]
    for bench in scopes:
        order += [bench, f"{bench}_sd", f"{bench}_ci_lo", f"{bench}_ci_hi", f"{bench}_delta"]
    for key in DROP_COLUMNS:
        if key not in data:
            data[key] = math.nan
    data = as_counts(data[order + ["n", "k", "seeds", *DROP_COLUMNS]].copy())
    data.insert(1, "label", [method_label(m) for m in data["method"]])

    cols = [Column("Method", "label", kind="str", align="l")]
    for bench in scopes:
        ci = (f"{bench}_ci_lo", f"{bench}_ci_hi") if opts.show_ci else (None, None)
        cols.append(Column(bench, bench, sd=f"{bench}_sd", lo=ci[0], hi=ci[1], bold="max"))
    delta_scope = AVG if with_avg else benches[0]
    cols += [
        Column(f"Δ {delta_scope} vs {method_label(opts.baseline)}", f"{delta_scope}_delta", kind="signed"),
        Column("n", "n", kind="int"),
        Column("k", "k", kind="str"),
        Column("seeds", "seeds", kind="int"),
        *drop_columns(),
    ]
    avg_text = f"; {AVG} weighted by problem count" if with_avg else ""
    protocols = "" if name != "ood" else mcq_protocols(res, benches)
    caption = (
        f"{ACCURACY_TITLES.get(name, '')}{protocols}avg@k (%) at the final checkpoint{avg_text}; mean ± sd over seeds "
        f"[{100 * (1 - opts.alpha):.0f}% {INTERVAL_RULE}]; {BOLD_RULE.format(method_label(opts.baseline))}"
    )
    data = data.reset_index(drop=True)
    # bold needs a significant difference; the Avg of a non-main table is not the tested Avg
    tested = set(benches) | ({AVG} if name == "main" else set())
    allowed = {scope: (significant_rows(data, significance.data, scope, opts.baseline, opts.alpha)
                       if significance is not None and scope in tested else frozenset()) for scope in scopes}
    note = " ".join(x for x in (note, scorer_warnings(res, benches), drop_note(data, opts)) if x)
    return Table(name, caption, data, tuple(cols), footer, note=note, bold_allowed=allowed)


BOLD_RULE = ("bold: the best per column whose difference to {} holds with training seeds random after Holm "
             "(significance table: Avg confirmatory, benchmark columns exploratory, Holm over the whole table)")


def scorer_warnings(res: Results, benches: Sequence[str]) -> str:
    """The scorers' warnings at the final checkpoints of ``benches`` (e.g. one option letter dominating)."""
    seen = [f"{method_label(m)} seed {s}: {w}" for m, by_seed in final_records(res).items()
            for s, recs in sorted(by_seed.items()) for b, r in recs.items() if b in benches for w in r.warnings]
    return " ".join(f"Warning: {w}." for w in dict.fromkeys(seen))


def baseline_note(res: Results, baseline: str) -> str:
    """Why Δ columns and the significance table are empty: the baseline was not evaluated."""
    methods = ", ".join(sorted({r.method for r in res.evals}))
    return (f"Warning: the baseline {method_label(baseline)} ({baseline!r}) has no final evaluation "
            f"(methods: {methods}); "
            f"Δ columns are empty and there are no significance tests. Pass --baseline METHOD "
            f"(report.baseline) or add it to `methods`.")


def mcq_protocols(res: Results, benches: Sequence[str]) -> str:
    """``"cloze (acc_norm) · "``-style text naming how the multiple-choice sets were scored (from templates)."""
    names = {"cloze": "cloze (option text, acc_norm)", "letters": "lettered options (acc)"}
    found = sorted({r.template for r in res.evals if r.benchmark in benches and r.template})
    labels = [next((v for k, v in names.items() if f"_{k}_" in t), t) for t in found]
    return f"{' / '.join(labels)}; " if labels else ""


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
                "label": method_label(method),
                "step": int(step),
                "seeds": len(sub),
            }
            for col in [*benches, AVG]:
                values = sub[col].dropna().tolist()
                row[col] = float(np.mean(values)) if values else math.nan
                row[f"{col}_sd"] = sample_sd(values)
            train = []
            if not metrics.empty and "accuracy" in metrics:
                hit = metrics[(metrics["method"] == method) & (metrics["step"] == step)]
                train = (100 * hit["accuracy"].dropna()).tolist()
            row["train_accuracy"] = float(np.mean(train)) if train else math.nan
            row["train_accuracy_sd"] = sample_sd(train)
            clocks = [wall_clock_at(metrics, method, int(s), int(step)) for s in sub["seed"]]
            clocks = [c for c in clocks if not math.isnan(c)]
            row["time_wall_clock_s"] = float(np.mean(clocks)) if clocks else math.nan
            row.update(drop_fields([r for r in res.evals if r.method == method and r.step == step]))
            rows.append(row)
    data = pd.DataFrame(rows)
    if not data.empty:
        data = as_counts(data)
    cols = [Column("Method", "label", kind="str", align="l"), Column("step", "step", kind="int")]
    cols += [Column(c, c, sd=f"{c}_sd") for c in [*benches, AVG]]
    cols += [
        Column("train acc", "train_accuracy", sd="train_accuracy_sd"),
        Column("wall-clock (s)", "time_wall_clock_s", digits=0),
        Column("seeds", "seeds", kind="int"),
        *drop_columns(),
    ]
    caption = (
        f"Learning curve: avg@k (%) per evaluated step, mean ± sd over seeds ({AVG} over the main-table "
        "benchmarks); training accuracy (%) at that step"
    )
    note = drop_note(data, opts) if not data.empty else ""
    return Table("learning", caption, data, tuple(cols), footer, note=note)


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
        row: dict[str, Any] = {"method": method, "label": method_label(method), "seeds": int(run["seed"].nunique())}
        # logged steps, not the last step's index: training.rl logs steps 0..N-1 for an N-step run
        row["steps"] = int(run.groupby("seed")["step"].nunique().median())
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
        Column(f"overhead vs {method_label(opts.baseline)} (%)", "time_overhead_pct", kind="signed", digits=1),
    ]
    if "time_gen_tok_per_s" in data:
        cols.append(Column("gen tok/s", "time_gen_tok_per_s", digits=0, bold="max"))
    if "time_train_tok_per_s" in data:
        cols.append(Column("train tok/s", "time_train_tok_per_s", digits=0, bold="max"))
    if "mem_peak_rss_mb" in data:
        cols.append(Column("peak RSS (MB)", "mem_peak_rss_mb", digits=0))
    cols += [
        Column(f"steps to {method_label(opts.baseline)} final", "steps_to_target", kind="str"),
        Column("seconds to it", "time_to_target_s", digits=0),
        Column("steps", "steps", kind="int"),
        Column("seeds", "seeds", kind="int"),
    ]
    caption = (
        f"Wall-clock: mean seconds per step by phase, overhead vs {method_label(opts.baseline)}, throughput, "
        f"peak RSS, and first evaluated step (and mean seconds) at which the seed-mean {AVG} reaches "
        f"{method_label(opts.baseline)}'s final {AVG} ({fmt_float(target, 2) if not math.isnan(target) else '?'}%)"
    )
    return Table("wallclock", caption, data, tuple(cols), footer, note=WALLCLOCK_NOTE)


def code_table(res: Results, opts: ReportOptions, footer: str, benches: Sequence[str],
               significance: Table | None = None) -> Table:
    """CF-paper code table: base and plus pass@1 (%) per code benchmark (MBPP+, HumanEval+), Δ plus.

    ``plus`` is the summary's ``plus_pass_at_1`` (avg@k when absent: every sample runs the plus tests);
    ``base`` is ``base_pass_at_1`` (missing when the evaluator did not report it). Only plus is tested
    (the significance table's scope for the benchmark), so only plus can be bold.
    """
    final = final_records(res)
    rows = []
    for method in sort_methods(set(final)):
        by_seed = final[method]
        row: dict[str, Any] = {"method": method, "label": method_label(method)}
        ks: set[int] = set()
        for bench in benches:
            recs = [by_seed[s][bench] for s in sorted(by_seed) if bench in by_seed[s]]
            ks |= {r.k for r in recs}
            base = [100 * r.extra["base_pass_at_1"] for r in recs if "base_pass_at_1" in r.extra]
            plus = [100 * r.extra.get("plus_pass_at_1", r.avg_at_k) for r in recs]
            for part, values in (("base", base), ("plus", plus)):
                row[f"{bench}_{part}"] = float(np.mean(values)) if values else math.nan
                row[f"{bench}_{part}_sd"] = sample_sd(values)
        row["k"] = "/".join(map(str, sorted(ks)))
        row["seeds"] = len(by_seed)
        row.update(drop_fields([recs[b] for recs in by_seed.values() for b in benches if b in recs]))
        rows.append(row)
    data = pd.DataFrame(rows)
    base_row = data[data["method"] == opts.baseline]
    for bench in benches:
        ref = float(base_row[f"{bench}_plus"].iloc[0]) if not base_row.empty else math.nan
        data[f"{bench}_plus_delta"] = data[f"{bench}_plus"] - ref
        data.loc[data["method"] == opts.baseline, f"{bench}_plus_delta"] = math.nan
    order = ["method", "label"]
    for bench in benches:
        order += [f"{bench}_{c}" for c in ("base", "base_sd", "plus", "plus_sd", "plus_delta")]
    data = as_counts(data[[*order, "k", "seeds", *DROP_COLUMNS]].reset_index(drop=True))
    cols = [Column("Method", "label", kind="str", align="l")]
    for bench in benches:
        cols += [
            Column(f"{bench} base", f"{bench}_base", sd=f"{bench}_base_sd"),
            Column(f"{bench} plus", f"{bench}_plus", sd=f"{bench}_plus_sd", bold="max"),
            Column(f"{bench} Δ plus", f"{bench}_plus_delta", kind="signed"),
        ]
    cols += [Column("k", "k", kind="str"), Column("seeds", "seeds", kind="int"), *drop_columns()]
    caption = (
        "Code: pass@1 (%) on the base and the plus (EvalPlus) tests at the final checkpoint, mean ± sd over "
        f"seeds, Δ plus vs {method_label(opts.baseline)}; plus {BOLD_RULE.format(method_label(opts.baseline))}"
    )
    note = ("plus = plus_pass_at_1 of the summary (avg@k where the evaluator did not report it); – = not reported. "
            + drop_note(data, opts))
    allowed = {f"{b}_plus": significant_rows(data, significance.data, b, opts.baseline, opts.alpha)
               if significance is not None else frozenset() for b in benches}
    return Table("code", caption, data, tuple(cols), footer, note=note, bold_allowed=allowed)


