"""``creditbench compare RUN RUN [...]``: models compared on the problems they share, from the output folders
of ``creditbench eval``; the first run is the reference.

One table per set and an ``Avg`` over every set all runs evaluated (problem-weighted, so no set falls out):
each model's accuracy (avg@k; multiple choice: the headline choice, acc_norm under cloze) with its 95 %
bootstrap CI, and for every other model the paired difference with the reference over the shared problems
(per-problem mean over samples, model − reference) with the same statistics as the method tables
(``evaluation.report.stats.paired_test``: stratified percentile bootstrap CI, bootstrap and sign-flip
permutation p) and Holm's adjustment over every (model, scope) comparison. One run per model: the problems
are the random unit here (no training seeds), so an interval speaks for these problems' population.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from evaluation.report.stats import holm, paired_test, stratified_bootstrap_ci


def load_run(folder: Path) -> tuple[str, dict[str, dict[str, float]]]:
    """(label, set -> problem id -> per-problem accuracy) of one ``creditbench eval`` output folder."""
    results_file = folder / "results.json"
    if not results_file.is_file():
        raise SystemExit(f"compare: {folder}: no results.json; pass the --out folders of creditbench eval runs")
    results = json.loads(results_file.read_text())
    sets = {}
    for name, rel in results.get("summaries", {}).items():
        summary = json.loads((folder / rel).read_text())
        sets[name] = {pid: float(np.mean(row)) for pid, row in
                      zip(summary["problem_ids"], summary["per_problem_correct"])}
    label = Path(results["model"]["resolved"]).name if results.get("model") else folder.name
    return label, sets


def compare_runs(runs: Sequence[tuple[str, dict[str, dict[str, float]]]], *, n_boot: int, n_perm: int,
                 seed: int) -> dict[str, list[dict]]:
    """scope (each shared set, then ``Avg``) -> one row per model (the reference first)."""
    shared = [s for s in runs[0][1] if all(s in sets for _, sets in runs[1:])]
    scopes: dict[str, list[dict]] = {}
    for scope in [*shared, "Avg"]:
        names = shared if scope == "Avg" else [scope]
        common = {s: sorted(set.intersection(*(set(sets[s]) for _, sets in runs))) for s in names}
        rows = []
        for i, (label, sets) in enumerate(runs):
            strata = [np.array([sets[s][p] for p in common[s]]) for s in names]
            pooled = np.concatenate(strata) if strata else np.zeros(0)
            lo, hi = stratified_bootstrap_ci(strata, n_boot=n_boot, seed=seed)
            row = {"model": label, "accuracy": float(pooled.mean()) if pooled.size else float("nan"),
                   "ci": (lo, hi), "n": int(pooled.size)}
            if i:
                ref = runs[0][1]
                diffs = [np.array([sets[s][p] - ref[s][p] for p in common[s]]) for s in names]
                r = paired_test(diffs, n_boot=n_boot, n_perm=n_perm, seed=seed)
                row.update(delta=r.delta, delta_ci=(r.ci_lo, r.ci_hi), p_boot=r.p_bootstrap, p_perm=r.p_permutation)
            rows.append(row)
        scopes[scope] = rows
    tested = [row for rows in scopes.values() for row in rows[1:]]
    for row, p in zip(tested, holm([row["p_perm"] for row in tested])):
        row["p_holm"] = p
    return scopes


def render(scopes: dict[str, list[dict]], reference: str) -> str:
    pct = lambda x: f"{100 * x:.1f}"  # noqa: E731
    out = []
    for scope, rows in scopes.items():
        title = "Avg (every shared set, problem-weighted)" if scope == "Avg" else scope
        out += [f"### {title}", "", f"| model | accuracy (%) [95 % CI] | n | Δ vs {reference} (pp) [95 % CI] | "
                "p (bootstrap) | p (permutation) | p (Holm) |", "|:---|---:|---:|---:|---:|---:|---:|"]
        for row in rows:
            acc = f"{pct(row['accuracy'])} [{pct(row['ci'][0])}, {pct(row['ci'][1])}]"
            if "delta" in row:
                lo, hi = row["delta_ci"]
                rest = (f"{100 * row['delta']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] | {row['p_boot']:.3f} | "
                        f"{row['p_perm']:.3f} | {row['p_holm']:.3f}")
            else:
                rest = "reference | – | – | –"
            out.append(f"| {row['model']} | {acc} | {row['n']} | {rest} |")
        out.append("")
    out.append("Δ: paired over the problems both models answered (per-problem mean over samples); p: paired "
               "bootstrap and sign-flip permutation, Holm over every model × scope.")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="creditbench compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="creditbench eval --out folders (the first: the reference)")
    ap.add_argument("--out", type=Path, default=None, help="also write the tables to OUT/compare.md")
    ap.add_argument("--n-boot", type=int, default=2000)
    ap.add_argument("--n-perm", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if len(args.runs) < 2:
        print("compare: pass two or more runs (creditbench eval --out folders)", file=sys.stderr)
        return 2
    try:
        runs = [load_run(folder) for folder in args.runs]
    except SystemExit as err:
        print(err, file=sys.stderr)
        return 2
    labels = [label for label, _ in runs]
    if len(set(labels)) < len(labels):  # the same model folder name twice: the run folders name them
        runs = [(f"{label} ({folder.name})", sets) for (label, sets), folder in zip(runs, args.runs)]
    scopes = compare_runs(runs, n_boot=args.n_boot, n_perm=args.n_perm, seed=args.seed)
    if len(scopes) == 1:
        print("compare: the runs share no set; evaluate the same sets (creditbench eval --sets)", file=sys.stderr)
        return 2
    text = render(scopes, runs[0][0])
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "compare.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
