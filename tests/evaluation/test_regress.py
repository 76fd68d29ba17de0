"""Regression check: identical tables pass, a hand-edited reference cell fails, tolerances, --update."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from evaluation.checks import regress
from evaluation.report import __main__ as report_cli

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def tables(fake_results: Callable[..., Path]) -> tuple[Path, Path]:
    """(results dir with tables/, a reference dir holding copies of its CSVs)."""
    out = fake_results()
    assert report_cli.main(["--results", str(out), "--n-boot", "200", "--n-perm", "200"]) == 0
    ref = out.parent / "reference"
    ref.mkdir()
    for csv in (out / "tables").glob("*.csv"):
        shutil.copy(csv, ref / csv.name)
    return out, ref


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_identical_tables_pass(tables: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out, ref = tables
    assert regress.main([str(out), str(ref)]) == 0
    assert "regress: OK" in capsys.readouterr().out
    assert regress.main([str(out / "tables"), str(ref)]) == 0  # the tables dir itself works too


def test_hand_edited_cell_fails_and_is_printed(
    tables: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out, ref = tables
    _edit(ref / "main.csv", "delta,DelTA,77.5000,", "delta,DelTA,77.0000,")
    assert regress.main([str(out), str(ref)]) == 1
    printed = capsys.readouterr().out
    assert "main delta bench_a: result=77.5000 reference=77.0000 (|Δ|=0.5 > tol 0)" in printed
    assert "regress: FAIL, 1 regression(s)" in printed


def test_tolerances(tables: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out, ref = tables
    _edit(ref / "main.csv", "delta,DelTA,77.5000,", "delta,DelTA,77.0000,")
    (ref / "tolerances.yaml").write_text('columns:\n  "main:bench_*": 0.6\n')
    assert regress.main([str(out), str(ref)]) == 0
    (ref / "tolerances.yaml").write_text('default: 1.0\ncolumns:\n  "bench_a": 0.1\n')  # first match wins
    assert regress.main([str(out), str(ref)]) == 1
    assert "(|Δ|=0.5 > tol 0.1)" in capsys.readouterr().out
    # max(abs, k · reference sd): bench_a_sd is 3.5355 -> allowed 1.77
    (ref / "tolerances.yaml").write_text('columns:\n  "bench_a": {abs: 0.1, k: 0.5, scale: "{column}_sd"}\n')
    assert regress.main([str(out), str(ref)]) == 0
    # counts stay exact under a default tolerance; strings are always exact
    (ref / "tolerances.yaml").write_text("default: 5.0\n")
    _edit(ref / "failures.csv", "dapo,DAPO,504,", "dapo,DAPO,505,")
    assert regress.main([str(out), str(ref)]) == 1
    assert "failures dapo samples: result=504 reference=505 (|Δ|=1, exact count)" in capsys.readouterr().out


def test_drift(tables: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out, ref = tables
    _edit(ref / "main.csv", "delta,DelTA,77.5000,", "delta,DelTA,77.0000,")
    (ref / "tolerances.yaml").write_text('default: 1.0\ndrift:\n  "bench_a": 0.1\n')
    assert regress.main([str(out), str(ref)]) == 1
    assert (
        "main (all rows) bench_a: mean signed Δ=0.166667 over 3 rows > drift tol 0.1"
        in capsys.readouterr().out
    )


def test_timing_columns_ignored_by_default(
    tables: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out, ref = tables
    _edit(ref / "wallclock.csv", "3.7500", "9.9999")  # dapo time_total_s
    assert regress.main([str(out), str(ref)]) == 0
    (ref / "tolerances.yaml").write_text("ignore: []\n")
    assert regress.main([str(out), str(ref)]) == 1
    assert "wallclock dapo time_total_s: result=3.7500 reference=9.9999" in capsys.readouterr().out


def test_missing_and_extra_rows_columns_tables(
    tables: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out, ref = tables
    lines = (ref / "failures.csv").read_text().splitlines(keepends=True)
    (ref / "failures.csv").write_text("".join(line for line in lines if not line.startswith("sft,")))
    _edit(ref / "main.csv", "method,label,", "method,name,")
    (ref / "extra.csv").write_text("method,x\ndapo,1\n")
    assert regress.main([str(out), str(ref)]) == 1
    printed = capsys.readouterr().out
    assert "failures sft: extra row in result (not in reference)" in printed
    assert "main name: column missing from result" in printed
    assert "main label: extra column in result (not in reference)" in printed
    assert "extra: table missing from result" in printed


def test_a_new_table_without_reference_is_reported_not_failed(
    tables: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A table the reference predates (e.g. power.csv) passes until the reference is re-recorded."""
    out, ref = tables
    (ref / "power.csv").unlink()
    assert regress.main([str(out), str(ref)]) == 0
    assert "power: table has no reference (not compared)" in capsys.readouterr().out


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True, capture_output=True,
        text=True,
    ).stdout


def test_update_refuses_dirty_tree_and_records_reason(
    tables: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = tables
    repo = tmp_path / "repo"
    ref = repo / "results" / "reference"
    ref.mkdir(parents=True)
    (ref / "main.csv").write_text("method,Avg\ndapo,1.0000\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "init")
    (repo / "untracked.txt").write_text("dirty")
    assert regress.main([str(out), str(ref), "--update", "--reason", "new grader"]) == 2
    assert "not clean" in capsys.readouterr().err
    assert (ref / "main.csv").read_text() == "method,Avg\ndapo,1.0000\n"  # untouched

    (repo / "untracked.txt").unlink()
    assert regress.main([str(out), str(ref), "--update"]) == 2  # a reason is required
    assert regress.main([str(out), str(ref), "--update", "--reason", "grader v3 re-score"]) == 0
    assert (ref / "main.csv").read_bytes() == (out / "tables" / "main.csv").read_bytes()
    changelog = (ref / "CHANGELOG.md").read_text()
    assert "grader v3 re-score" in changelog and "· commit " in changelog
    recorded = regress.reference_machine(ref)  # the recording machine and the commit it recorded at
    assert recorded == {**regress.machine_fingerprint(), "commit": _git(repo, "rev-parse", "HEAD").strip()}
    assert regress.main([str(out), str(ref)]) == 0


def test_unknown_tolerance_keys_are_named(tmp_path: Path) -> None:
    (tmp_path / "tolerances.yaml").write_text("defualt: 1\n")
    with pytest.raises(ValueError, match="defualt"):
        regress.load_tolerances(tmp_path / "tolerances.yaml")


def test_other_machine_overlay_applies_only_when_the_fingerprint_differs(
    tables: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out, ref = tables
    _edit(ref / "main.csv", "delta,DelTA,77.5000,", "delta,DelTA,74.0000,")  # |Δ| = 3.5
    _edit(ref / "failures.csv", "dapo,DAPO,504,", "dapo,DAPO,505,")  # a count (samples): exact unless named
    (ref / "tolerances.yaml").write_text(
        'default: 1.0\nother_machine:\n  default: 5.0\n  columns: {"failures:samples": 2}\n'
    )
    here = regress.machine_fingerprint()
    assert {"cpu_model", "torch_cpu_capability", "torch", "transformers"} <= set(here)
    (ref / "machine.json").write_text(__import__("json").dumps(here))  # recorded here: strict
    assert regress.main([str(out), str(ref)]) == 1
    printed = capsys.readouterr().out
    assert "(|Δ|=3.5 > tol 1)" in printed and "exact count" in printed and "other_machine" not in printed
    (ref / "machine.json").write_text(__import__("json").dumps({**here, "cpu_model": "Some Other CPU"}))
    assert regress.main([str(out), str(ref)]) == 0  # elsewhere: the overlay's tolerances
    printed = capsys.readouterr().out
    assert "not the one that recorded the reference (cpu_model: 'Some Other CPU' -> " in printed
    assert "using the other_machine tolerances" in printed
    _edit(ref / "main.csv", "delta,DelTA,74.0000,", "delta,DelTA,70.0000,")  # |Δ| = 7.5 > 5
    assert regress.main([str(out), str(ref)]) == 1
    capsys.readouterr()
    (ref / "tolerances.yaml").write_text("default: 1.0\n")  # no overlay: said so, the same tolerances apply
    assert regress.main([str(out), str(ref)]) == 1
    printed = capsys.readouterr().out
    assert "no other_machine overlay, the same tolerances apply" in printed and "using the other" not in printed
    assert "rebuild the reference on this machine from the commit that recorded it" in printed
    with pytest.raises(ValueError, match="other_machine"):
        (ref / "tolerances.yaml").write_text("other_machine:\n  ignore: ['x']\n")
        regress.load_tolerances(ref / "tolerances.yaml", other_machine=True)
