"""Tables that check the evaluation rather than compare methods: grader failure reasons and the
Math-Verify checker audit."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evaluation.report.load import (
    AUDIT_EXAMPLES,
    CODE_ONLY_REASONS,
    FAILURE_REASONS,
    REASONS,
    UNGRADED_REASONS,
    ReportOptions,
    Results,
    benchmark_kind,
    benchmark_rule,
    order_benchmarks,
    sort_methods,
)
from evaluation.report.render import Column, Table, md_escape
from evaluation.report.stats import final_records
from evaluation.report.tables import as_counts, drop_fields, drop_note, method_label

log = logging.getLogger(__name__)


def failures_table(res: Results, footer: str, opts: ReportOptions) -> Table:
    """Grader reason counts and rates per method at the final step (all benchmarks and seeds), with the
    drop counts (requested, graded, overlong: ``tables.drop_fields``)."""
    final = final_records(res)
    seen = {r for recs in final.values() for s in recs.values() for rec in s.values() for r in rec.reasons}
    extra = sorted(seen - set(REASONS))
    reasons = [*(r for r in REASONS if r not in (*CODE_ONLY_REASONS, *UNGRADED_REASONS) or r in seen), *extra]
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
        row: dict[str, Any] = {"method": method, "label": method_label(method), "samples": total, **counts}
        for reason in reasons[1:]:
            row[f"{reason}_pct"] = 100 * counts[reason] / total if total else math.nan
        fails = sum(counts[r] for r in FAILURE_REASONS if r in counts)
        row["failure_pct"] = 100 * fails / total if total else math.nan
        drops = drop_fields([rec for by_bench in final[method].values() for rec in by_bench.values()])
        row.update({key: drops[key] for key in ("requested", "graded", "failed", "failed_pct", "overlong",
                                                "overlong_pct")})
        rows.append(row)
    data = pd.DataFrame(rows)
    if not data.empty:
        data = as_counts(data)
    cols = [Column("Method", "label", kind="str", align="l"), Column("samples", "samples", kind="int")]
    cols += [Column(r, r, kind="count_pct", pct=None if r == "correct" else f"{r}_pct") for r in reasons]
    cols.append(Column("failure rate (%)", "failure_pct", digits=1, bold="min"))
    cols += [Column("requested", "requested", kind="int"), Column("graded", "graded", kind="int"),
             Column("failed", "failed", kind="count_pct", pct="failed_pct"),
             Column("overlong", "overlong", kind="count_pct", pct="overlong_pct")]
    caption = (
        "Grader verdicts at the final checkpoint, summed over benchmarks and seeds; failure = "
        + " + ".join(r for r in FAILURE_REASONS if r in reasons)
    )
    note = drop_note(data, opts) if not data.empty else ""
    return Table("failures", caption, data, tuple(cols), footer, note=note)


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
    return md_escape(text).replace("`", "'")


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
    """Re-grade the final checkpoint's math samples with Math-Verify (``evaluation.checks.audit.audit``).

    Per method × math benchmark (seeds pooled): how many verdicts flip, in each direction, with up to
    ``AUDIT_EXAMPLES`` examples in the Markdown. None when there is nothing to audit (no math
    ``.samples.jsonl``, ``audit_max_samples`` 0, or Math-Verify not installed).
    """
    if opts.audit_max_samples <= 0:
        return None
    benches = [b for b in order_benchmarks(res.benchmarks, opts.benchmarks) if benchmark_kind(b) == "math"]
    final = final_records(res)
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

        from evaluation.checks.audit import audit
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
                "label": method_label(method),
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
                f"| {md_escape(method_label(method))} | {md_escape(bench)} | {direction} | `{_md_cell(e['gold'], 30)}` "
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


