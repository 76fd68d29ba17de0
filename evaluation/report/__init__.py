"""Paper-style result tables from an evaluated results tree.

``python -m evaluation.report --results OUT --out OUT/tables [--baseline dapo] [--plots]``

Modules: ``load`` (results tree, constants, options), ``stats`` (bootstrap, paired tests, Holm, shared
selections), ``render`` (table model, md/tex/csv/html writers, provenance footer), ``tables`` (accuracy,
learning, wall-clock, code), ``significance`` (method and checkpoint tests), ``aggregates`` (rliable),
``calibrate`` (simulation of the verdicts), ``power`` (power analysis), ``diagnostics`` (failures, checker
audit), ``figures`` (matplotlib, imported only when figures are asked for), ``__main__`` (the command line).

Reads the files the workflow writes under ``OUT`` (see ``load_results``) and builds these tables, each
from one pandas DataFrame that feeds Markdown, LaTeX (booktabs) and CSV. Benchmarks are split by their
registry kind (``evaluation.benchmarks``; unregistered names count as math), like the CF paper:

``main``          avg@k (%) per method on the math sets (incl. synthetic, without GSM8K) plus ``Avg``
                  weighted by problem count (DelTA §1.8 convention), mean ± sd over seeds, 95 % CI with
                  seeds and problems random, Δ vs the baseline, bold where the method test holds (Holm);
                  the footer says what the design can detect (power). Every ``Avg`` of the report
                  (learning curves, significance, time-to-target, figures) is over these.
``significance``  each method vs the baseline, two questions: *method* (seeds random: crossed seed ×
                  problem random-effects t test; Avg confirmatory with Holm over methods, benchmark cells
                  exploratory with Holm over the whole table) and *checkpoints* (seeds fixed: paired
                  bootstrap and sign-flip permutation over problems, Holm per scope); claimed gains.
``learning``      eval accuracy per method and step (mean ± sd over seeds) and training accuracy.
``wallclock``     mean step time per phase (means: checkpointing runs every N steps only), overhead vs
                  baseline, tokens/s (generated / rollout s, trained / update s), peak memory, and the
                  steps and seconds to reach the baseline's final Avg (the CF paper's claim).
``failures``      grader reason counts and rates per method at the final step.
``power``         minimum detectable difference vs the baseline at the run's n problems × k samples × seeds
                  and the problems / seeds needed for a 2-point difference, from the run's variances
                  (``power``: variance model and formulas).
``rliable``       interquartile mean over runs × problems and probability of improvement over the
                  baseline, stratified bootstrap over runs (``aggregates``; Agarwal et al. 2021).
``code``          (code sets) MBPP+ / HumanEval+ base and plus pass@1.
``ood``           (multiple-choice sets) avg@k as in ``main``.
``gsm8k``         (when GSM8K is evaluated) avg@k as in ``main``.
``audit``         (math ``.samples.jsonl`` present) verdicts that change when the final checkpoint's
                  samples are re-graded with Math-Verify, per method × benchmark, with examples.

The first seven are always written; the last four only when they apply (stale ones are removed).
HTML (one standalone page per table, for ``snakemake --report``) shows the Markdown cells. CSV holds
numbers only (4 decimals, ints as ints, empty for missing); provenance (k, samples, seeds, grader
version, data sha256, manifest ids, git commit) is a footer in Markdown, LaTeX and HTML and the full
set goes to ``provenance.json``. Timing and memory columns are prefixed ``time_`` / ``mem_`` so that
``evaluation.checks.regress`` can skip them. All writers are deterministic and every write is atomic.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from evaluation.report.aggregates import rliable_table
from evaluation.report.diagnostics import audit_table, failures_table
from evaluation.report.load import (
    AVG,
    FORMATS,
    METHOD_LABELS,
    METHOD_ORDER,
    OPTIONAL_TABLES,
    PHASES,
    START_METHOD,
    TABLE_NAMES,
    EvalRecord,
    ReportOptions,
    Results,
    benchmark_groups,
    benchmark_kind,
    check_engines,
    load_results,
    order_benchmarks,
    sort_methods,
)
from evaluation.report.power import power_table
from evaluation.report.render import Column, Table, atomic_write_text, footer_text, provenance, write_table
from evaluation.report.significance import significance_table
from evaluation.report.stats import (
    holm,
    paired_test,
    seed_step_accuracy,
    stratified_bootstrap_ci,
    weighted_average,
)
from evaluation.report.tables import (
    accuracy_table,
    code_table,
    learning_table,
    main_table,
    wallclock_table,
)

__all__ = [
    "AVG", "FORMATS", "METHOD_LABELS", "METHOD_ORDER", "OPTIONAL_TABLES", "PHASES", "START_METHOD",
    "TABLE_NAMES", "Column", "EvalRecord", "ReportOptions", "Results", "Table", "build_tables", "holm",
    "load_results", "paired_test", "seed_step_accuracy", "sort_methods", "stratified_bootstrap_ci",
    "weighted_average", "write_report", "write_table",
]  # fmt: skip

log = logging.getLogger(__name__)


def build_tables(res: Results, opts: ReportOptions) -> dict[str, Table]:
    """All tables, keyed by name: ``TABLE_NAMES`` always, then those of ``OPTIONAL_TABLES`` that apply."""
    prov = provenance(res)
    footer = footer_text(prov)
    groups = benchmark_groups(order_benchmarks(res.benchmarks, opts.benchmarks))
    significance = significance_table(res, opts, footer)
    power = power_table(res, opts, footer_text(prov, groups["main"]))
    main = main_table(res, opts, footer_text(prov, groups["main"]), significance, power)
    learning = learning_table(res, opts, footer)
    tables = {
        "main": main,
        "significance": significance,
        "learning": learning,
        "wallclock": wallclock_table(res, opts, main, learning, footer),
        "failures": failures_table(res, footer, opts),
        "power": power,
        "rliable": rliable_table(res, opts, footer_text(prov, groups["main"])),
    }
    if "code" in groups:
        tables["code"] = code_table(res, opts, footer_text(prov, groups["code"]), groups["code"], significance)
    for name in ("ood", "gsm8k"):
        if name in groups:
            benches = groups[name]
            tables[name] = accuracy_table(
                res, opts, footer_text(prov, benches), name, benches, with_avg=len(benches) > 1,
                significance=significance,
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
    check_engines(res.evals, opts.mix_engines)
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
        from evaluation.report import figures  # matplotlib only when asked

        paths += figures.write_all(res, plots_dir, baseline=opts.baseline)
    return paths

