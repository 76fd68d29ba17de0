"""Cell-by-cell regression check of result tables against committed references.

``python -m evaluation.checks.regress RESULTS_DIR REFERENCE_DIR [--tolerances FILE] [--update --reason TEXT]``

Compares every ``*.csv`` in ``RESULTS_DIR/tables`` (or ``RESULTS_DIR`` itself when it has no ``tables``
folder) with the same-named CSV in ``REFERENCE_DIR``. Rows are matched by key columns (``method``,
``scope``, ``step``, ... whichever the table has), cells by column name. Prints every differing cell as

    table row column: result=X reference=Y (|Δ|=Z > tol T)

and every missing / extra table, row and column, then exits 1 on any regression and 0 otherwise.

Tolerances come from ``REFERENCE_DIR/tolerances.yaml`` (or ``--tolerances``)::

    default: 0.0              # absolute tolerance of numeric cells no pattern matches
    columns:                  # column glob, or "table:column glob" -> tolerance; first match wins
      "*_sd": 1.0
      "p_*": 0.05
      "main:Avg": {abs: 0.5, k: 2, scale: "{column}_sd"}   # max(abs, k · reference {column}_sd)
    drift:                    # optional: mean signed Δ over a column's rows may not exceed this
      "*": 0.5
    ignore: ["time_*", "mem_*"]   # never compared; this is the default (timing is machine-dependent)
    keys:                     # optional row keys per table (default: method, scope, step, ... if present)
      learning: [method, step]
    other_machine:            # optional overlay used when this machine is not the reference's (below)
      default: 15.0
      columns: {"failures:correct": 8}

Machines. ``--update`` also writes ``REFERENCE_DIR/machine.json``, the fingerprint of the machine that
recorded the reference (:func:`machine_fingerprint`: CPU model and vector ISA torch dispatches to, torch /
transformers / tokenizers versions) and the commit it was recorded at. Float rounding differs between
CPUs (even with ``runtime.portable_kernels``: an AMD EPYC and an Intel Xeon still differ), and an RL run
that samples from a slightly different policy soon draws different tokens, so on another machine a tiny
DAG's numbers are a different random draw, not a regression: when the fingerprints differ the
``other_machine`` overlay (its ``default`` replaces the default, its ``columns`` come first) applies and
the run says so and how to check exactly instead (rebuild the reference here from the recorded commit).
On the recording machine the tables are byte-identical run to run, so the base tolerances can be tight.

Strings are always compared exactly, and so are integers (counts) unless a pattern names their column.
``--update`` copies the result CSVs over the reference (stale reference CSVs are removed), only from a
clean git tree (``git status --porcelain`` empty; exit 2 otherwise) and with a ``--reason``, which is
appended with the date and commit to ``REFERENCE_DIR/CHANGELOG.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fnmatch
import json
import logging
import math
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from common.io import write_text_atomic

log = logging.getLogger(__name__)

DEFAULT_IGNORE: tuple[str, ...] = ("time_*", "mem_*")
KEY_CANDIDATES: tuple[str, ...] = ("method", "baseline", "scope", "benchmark", "step", "seed", "phase")
TOLERANCE_KEYS = frozenset({"default", "columns", "drift", "ignore", "keys", "other_machine"})
OVERLAY_KEYS = frozenset({"default", "columns"})
MACHINE_FILE = "machine.json"
INT_RE = re.compile(r"^[+-]?\d+$")
EXIT_OK, EXIT_REGRESSION, EXIT_REFUSED = 0, 1, 2


@dataclass(frozen=True)
class Tolerance:
    """Allowed |result − reference|: max(abs, k · reference value of the ``scale`` column)."""

    abs: float
    k: float = 0.0
    scale: str | None = None  # column name template, "{column}" is replaced by the compared column


@dataclass(frozen=True)
class Tolerances:
    """Parsed ``tolerances.yaml``; patterns are ``column-glob`` or ``table:column-glob``, first match wins."""

    default: float = 0.0
    columns: tuple[tuple[str, Tolerance], ...] = ()
    drift: tuple[tuple[str, float], ...] = ()
    ignore: tuple[str, ...] = DEFAULT_IGNORE
    keys: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def is_ignored(self, table: str, column: str) -> bool:
        return _match(self.ignore, table, column) is not None

    def tolerance(self, table: str, column: str) -> Tolerance | None:
        """The first matching column pattern's tolerance; None when no pattern matches."""
        i = _match([p for p, _ in self.columns], table, column)
        return None if i is None else self.columns[i][1]

    def drift_tolerance(self, table: str, column: str) -> float | None:
        i = _match([p for p, _ in self.drift], table, column)
        return None if i is None else self.drift[i][1]

    def key_columns(self, table: str) -> tuple[str, ...] | None:
        return dict(self.keys).get(table)


def _match(patterns: Sequence[str], table: str, column: str) -> int | None:
    for i, pattern in enumerate(patterns):
        if ":" in pattern:
            t_glob, c_glob = pattern.split(":", 1)
            if fnmatch.fnmatchcase(table, t_glob) and fnmatch.fnmatchcase(column, c_glob):
                return i
        elif fnmatch.fnmatchcase(column, pattern):
            return i
    return None


def _tolerance(value: Any, where: str) -> Tolerance:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Tolerance(abs=float(value))
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"abs", "k", "scale"})
        if unknown:
            raise ValueError(f"{where}: unknown tolerance keys {unknown}; valid: abs, k, scale")
        return Tolerance(
            abs=float(value.get("abs", 0.0)), k=float(value.get("k", 0.0)), scale=value.get("scale")
        )
    raise ValueError(f"{where}: a tolerance is a number or {{abs, k, scale}}, got {value!r}")


def load_tolerances(path: Path | None, *, other_machine: bool = False) -> Tolerances:
    """Read a tolerance file; missing file -> defaults (exact numbers, timing ignored).

    ``other_machine``: apply the file's ``other_machine`` overlay (see the module docstring)."""
    if path is None or not path.is_file():
        return Tolerances()
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{path}: expected a mapping at the top level")
    unknown = sorted(set(raw) - TOLERANCE_KEYS)
    if unknown:
        raise ValueError(f"{path}: unknown keys {unknown}; valid: {sorted(TOLERANCE_KEYS)}")
    overlay = raw.get("other_machine") or {}
    if not isinstance(overlay, Mapping) or set(overlay) - OVERLAY_KEYS:
        raise ValueError(f"{path}: other_machine takes only {sorted(OVERLAY_KEYS)}")
    column_items = list((raw.get("columns") or {}).items())
    if other_machine:
        column_items = list((overlay.get("columns") or {}).items()) + column_items
        if "default" in overlay:
            raw = {**raw, "default": overlay["default"]}
    columns = tuple((str(p), _tolerance(v, f"{path}: columns[{p!r}]")) for p, v in column_items)
    drift = tuple((str(p), float(v)) for p, v in (raw.get("drift") or {}).items())
    ignore = tuple(str(p) for p in raw["ignore"]) if raw.get("ignore") is not None else DEFAULT_IGNORE
    keys = tuple((str(t), tuple(str(c) for c in cols)) for t, cols in (raw.get("keys") or {}).items())
    return Tolerances(
        default=float(raw.get("default", 0.0)), columns=columns, drift=drift, ignore=ignore, keys=keys
    )


@dataclass(frozen=True)
class Finding:
    """One printed line; ``regression`` findings make the exit status 1."""

    table: str
    row: str
    column: str
    message: str
    regression: bool = True

    def __str__(self) -> str:
        where = " ".join(part for part in (self.table, self.row, self.column) if part)
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]
    tables: int
    cells: int
    ignored_columns: tuple[str, ...] = field(default=())

    @property
    def regressions(self) -> list[Finding]:
        return [f for f in self.findings if f.regression]


def _read_csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def _row_keys(table: str, frame: pd.DataFrame, tol: Tolerances) -> list[str]:
    keys = tol.key_columns(table)
    if keys is None:
        keys = tuple(c for c in KEY_CANDIDATES if c in frame.columns) or tuple(frame.columns[:1])
    missing = [k for k in keys if k not in frame.columns]
    if missing:
        raise ValueError(f"{table}: key columns {missing} are not in the table")
    labels = ["/".join(str(v) for v in values) for values in frame[list(keys)].itertuples(index=False)]
    if len(set(labels)) != len(labels):
        log.warning("%s: key columns %s do not identify rows; matching rows by position", table, keys)
        labels = [f"#{i}" for i in range(len(frame))]
    return labels


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def compare_table(
    name: str, result: pd.DataFrame, reference: pd.DataFrame, tol: Tolerances
) -> tuple[list[Finding], int]:
    """Findings for one table and the number of cells compared."""
    findings: list[Finding] = []
    res_rows = dict(zip(_row_keys(name, result, tol), range(len(result)), strict=False))
    ref_rows = dict(zip(_row_keys(name, reference, tol), range(len(reference)), strict=False))
    for row in ref_rows:
        if row not in res_rows:
            findings.append(Finding(name, row, "", "row missing from result"))
    for row in res_rows:
        if row not in ref_rows:
            findings.append(Finding(name, row, "", "extra row in result (not in reference)"))
    columns = [c for c in reference.columns if not tol.is_ignored(name, c)]
    for col in columns:
        if col not in result.columns:
            findings.append(Finding(name, "", col, "column missing from result"))
    for col in result.columns:
        if col not in reference.columns and not tol.is_ignored(name, col):
            findings.append(Finding(name, "", col, "extra column in result (not in reference)"))
    cells = 0
    for col in (c for c in columns if c in result.columns):
        explicit = tol.tolerance(name, col)
        signed: list[float] = []
        for row, ref_i in ref_rows.items():
            if row not in res_rows:
                continue
            got, want = result[col].iloc[res_rows[row]], reference[col].iloc[ref_i]
            cells += 1
            if got == want:
                if _float(got) is not None:
                    signed.append(0.0)
                continue
            x, y = _float(got), _float(want)
            if x is None or y is None:
                findings.append(Finding(name, row, col, f"result={got!r} reference={want!r} (exact)"))
                continue
            delta = abs(x - y)
            signed.append(x - y)
            if explicit is None and INT_RE.match(got) and INT_RE.match(want):
                findings.append(
                    Finding(name, row, col, f"result={got} reference={want} (|Δ|={_fmt(delta)}, exact count)")
                )
                continue
            allowed = explicit.abs if explicit is not None else tol.default
            if explicit is not None and explicit.k and explicit.scale:
                scale_col = explicit.scale.format(column=col)
                if scale_col in reference.columns:
                    scale = _float(reference[scale_col].iloc[ref_i])
                    if scale is not None:
                        allowed = max(allowed, explicit.k * abs(scale))
            if delta > allowed + 1e-12:
                findings.append(
                    Finding(
                        name,
                        row,
                        col,
                        f"result={got} reference={want} (|Δ|={_fmt(delta)} > tol {_fmt(allowed)})",
                    )
                )
        drift_tol = tol.drift_tolerance(name, col)
        if drift_tol is not None and signed:
            mean = sum(signed) / len(signed)
            if abs(mean) > drift_tol + 1e-12:
                findings.append(
                    Finding(
                        name,
                        "(all rows)",
                        col,
                        f"mean signed Δ={_fmt(mean)} over {len(signed)} rows > drift tol {_fmt(drift_tol)}",
                    )
                )
    return findings, cells


def table_dir(results: Path) -> Path:
    """``results/tables`` when it exists, else ``results``."""
    return results / "tables" if (results / "tables").is_dir() else results


def compare(results: Path, reference: Path, tol: Tolerances) -> Report:
    """Compare every reference CSV with its result counterpart."""
    res_dir = table_dir(results)
    res_tables = {p.stem: p for p in sorted(res_dir.glob("*.csv"))}
    ref_tables = {p.stem: p for p in sorted(reference.glob("*.csv"))}
    findings: list[Finding] = []
    cells = 0
    if not ref_tables:
        findings.append(Finding("", "", "", f"no reference tables (*.csv) in {reference}"))
    for name, ref_path in ref_tables.items():
        if name not in res_tables:
            findings.append(Finding(name, "", "", f"table missing from result ({res_dir / ref_path.name})"))
            continue
        found, n = compare_table(name, _read_csv(res_tables[name]), _read_csv(ref_path), tol)
        findings += found
        cells += n
    for name in res_tables:
        if name not in ref_tables:
            findings.append(Finding(name, "", "", "table has no reference (not compared)", regression=False))
    return Report(
        tuple(findings),
        tables=len(set(ref_tables) & set(res_tables)),
        cells=cells,
        ignored_columns=tol.ignore,
    )


# ----------------------------------------------------------------------------------------------------
# Machines
# ----------------------------------------------------------------------------------------------------


def machine_fingerprint() -> dict[str, str]:
    """What decides the float rounding of a CPU run: CPU model, torch's vector ISA, library versions
    (from the run manifest's own probes, ``common.manifest``)."""
    import torch

    from common.manifest import hardware, package_versions

    hw, versions = hardware(), package_versions()
    info = {"machine": hw["machine"], "cpu_model": hw.get("cpu") or hw["processor"] or "unknown",
            "torch_cpu_capability": str(torch.backends.cpu.get_cpu_capability())}
    info.update({name: versions.get(name, "absent") for name in ("torch", "transformers", "tokenizers")})
    return info


def reference_machine(reference: Path) -> dict[str, str] | None:
    path = reference / MACHINE_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def machine_differences(reference: Path, here: Mapping[str, str]) -> list[str]:
    """``key: reference -> here`` for each fingerprint field that differs (empty: same machine, or no
    fingerprint recorded, which keeps the strict tolerances)."""
    ref = reference_machine(reference)
    if ref is None:
        return []
    ref = {k: v for k, v in ref.items() if k != "commit"}
    keys = sorted(set(ref) | set(here))
    return [f"{k}: {ref.get(k)!r} -> {here.get(k)!r}" for k in keys if ref.get(k) != here.get(k)]


# ----------------------------------------------------------------------------------------------------
# Re-recording the reference
# ----------------------------------------------------------------------------------------------------


def _git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return out.stdout


def _existing_parent(path: Path) -> Path:
    path = path.resolve()
    while not path.exists():
        path = path.parent
    return path


def update_reference(results: Path, reference: Path, reason: str) -> int:
    """Copy result CSVs over the reference from a clean git tree and log why; returns an exit status."""
    if not reason.strip():
        print("regress --update: a non-empty --reason is required", file=sys.stderr)
        return EXIT_REFUSED
    where = _existing_parent(reference)
    try:
        top = Path(_git(where, "rev-parse", "--show-toplevel").strip())
        dirty = _git(top, "status", "--porcelain")
        commit = _git(top, "rev-parse", "HEAD").strip()
    except (subprocess.CalledProcessError, FileNotFoundError) as err:
        print(f"regress --update: {where} is not in a git work tree with a commit ({err})", file=sys.stderr)
        return EXIT_REFUSED
    if dirty.strip():
        lines = dirty.strip().splitlines()
        shown = "\n".join("  " + line for line in lines[:10]) + (
            f"\n  ... {len(lines) - 10} more" if len(lines) > 10 else ""
        )
        print(f"regress --update: refusing, the git tree at {top} is not clean:\n{shown}", file=sys.stderr)
        return EXIT_REFUSED
    res_dir = table_dir(results)
    new = {p.name: p for p in sorted(res_dir.glob("*.csv"))}
    if not new:
        print(f"regress --update: no result tables (*.csv) in {res_dir}", file=sys.stderr)
        return EXIT_REFUSED
    reference.mkdir(parents=True, exist_ok=True)
    for stale in sorted(set(p.name for p in reference.glob("*.csv")) - set(new)):
        (reference / stale).unlink()
        print(f"removed stale reference {stale}")
    for name, path in new.items():
        write_text_atomic(reference / name, path.read_text(encoding="utf-8"))
    recorded = {**machine_fingerprint(), "commit": commit}
    write_text_atomic(reference / MACHINE_FILE, json.dumps(recorded, indent=2, sort_keys=True) + "\n")
    changelog = reference / "CHANGELOG.md"
    text = (
        changelog.read_text(encoding="utf-8") if changelog.is_file() else "# Reference tables changelog\n\n"
    )
    if not text.endswith("\n"):
        text += "\n"
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    tables = ", ".join(Path(n).stem for n in new)
    reason_line = " ".join(reason.split())
    text += f"- {today} · commit {commit[:12]} · tables: {tables} · {reason_line}\n"
    write_text_atomic(changelog, text)
    print(f"updated {len(new)} reference tables in {reference} at commit {commit[:12]}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.checks.regress", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("results", type=Path, help="results dir (its tables/ subfolder is used when present)")
    parser.add_argument(
        "reference", type=Path, help="reference dir with the expected CSVs and tolerances.yaml (a run root: its "
        "tables/)"
    )
    parser.add_argument(
        "--tolerances", type=Path, default=None, help="tolerance file (default REFERENCE/tolerances.yaml)"
    )
    parser.add_argument("--update", action="store_true", help="re-record the reference (clean git tree only)")
    parser.add_argument("--reason", default=None, help="why the reference changes (required with --update)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    for name, folder in (("results", args.results), ("reference", args.reference)):
        if not args.update and not any(table_dir(folder).glob("*.csv")):
            print(f"regress: {name} {folder}: no tables (*.csv) there or in its tables/; pass a run root or a "
                  "tables folder (creditbench report writes them)", file=sys.stderr)
            return EXIT_REFUSED
    if not args.update:
        args.reference = table_dir(args.reference)
    differences = [] if args.update else machine_differences(args.reference, machine_fingerprint())
    tol_path = args.tolerances or args.reference / "tolerances.yaml"
    if differences:
        raw = yaml.safe_load(tol_path.read_text(encoding="utf-8")) if tol_path.is_file() else None
        overlay = isinstance(raw, Mapping) and bool(raw.get("other_machine"))
        commit = (reference_machine(args.reference) or {}).get("commit", "COMMIT")
        print("regress: this machine is not the one that recorded the reference (" + "; ".join(differences)
              + ("): using the other_machine tolerances" if overlay else "): the tolerances have no other_machine "
                 "overlay, the same tolerances apply")
              + f". For an exact check here, rebuild the reference on this machine from the commit that recorded "
                f"it ({commit[:12]}: run its DAG in `git worktree add --detach DIR {commit[:12]}`) and regress "
                f"against those tables, as tests/workflow/test_workflow.py does")
    tol = load_tolerances(tol_path, other_machine=bool(differences))
    if args.update:
        if not args.reason:
            print("regress --update: --reason TEXT is required", file=sys.stderr)
            return EXIT_REFUSED
        if any(args.reference.glob("*.csv")):
            for finding in compare(args.results, args.reference, tol).findings:
                print(f"accepting: {finding}")
        return update_reference(args.results, args.reference, args.reason)
    report = compare(args.results, args.reference, tol)
    for finding in report.findings:
        print(finding)
    ignored = list(report.ignored_columns)
    status = f"{report.tables} tables, {report.cells} cells compared, ignored columns {ignored}"
    if report.regressions:
        print(f"regress: FAIL, {len(report.regressions)} regression(s); {status}")
        return EXIT_REGRESSION
    print(f"regress: OK; {status}")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
