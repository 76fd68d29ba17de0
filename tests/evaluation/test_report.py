"""Report tables: hand-computed cells, bold/Δ, paired tests, wall-clock, byte-identical writers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evaluation import plots, report

pytestmark = pytest.mark.timeout(60)


def _tables(fake_results: Callable[..., Path], *args: str, name: str = "out", **kwargs: bool) -> Path:
    out = fake_results(name, **kwargs)
    assert report.main(["--results", str(out), "--n-boot", "500", "--n-perm", "500", *args]) == 0
    return out / "tables"


def _csv(tables: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(tables / f"{name}.csv", dtype=str, keep_default_na=False).set_index("method")


def test_weighted_average_by_hand(fake_results: Callable[..., Path]) -> None:
    main = _csv(_tables(fake_results), "main")
    # delta final: seed 0 bench_a 96/120, bench_b 99/132; seed 1 90/120, 102/132; weights 30 and 33
    seed0 = (30 * 96 / 120 + 33 * 99 / 132) / 63 * 100
    seed1 = (30 * 90 / 120 + 33 * 102 / 132) / 63 * 100
    assert main.loc["delta", "Avg"] == f"{(seed0 + seed1) / 2:.4f}" == "76.7857"
    assert main.loc["delta", "Avg_sd"] == f"{np.std([seed0, seed1], ddof=1):.4f}"
    assert main.loc["delta", "bench_a"] == "77.5000"  # (80 + 75) / 2
    assert main.loc["dapo", "Avg"] == "50.0000"
    assert (main.loc["delta", "n"], main.loc["delta", "k"], main.loc["delta", "seeds"]) == ("63", "4", "2")
    lo, hi = float(main.loc["delta", "Avg_ci_lo"]), float(main.loc["delta", "Avg_ci_hi"])
    assert lo < 76.7857 < hi


def test_weighted_average_unit() -> None:
    assert report.weighted_average([28.12, 20.27], [30, 33]) == pytest.approx((30 * 28.12 + 33 * 20.27) / 63)
    assert np.isnan(report.weighted_average([1.0, float("nan")], [1, 1]))


def test_best_in_bold_and_delta(fake_results: Callable[..., Path]) -> None:
    tables = _tables(fake_results)
    md = (tables / "main.md").read_text()
    rows = {line.split(" | ")[0].strip("| "): line for line in md.splitlines() if line.startswith("| ")}
    assert "**77.50** ± 3.54" in rows["DelTA"] and "**76.79** ± 0.84" in rows["DelTA"]
    assert "**" not in rows["DAPO"] and "**" not in rows["SFT (start)"]
    assert rows["DelTA"].split(" | ")[4] == "+26.79"  # Δ Avg vs DAPO = 76.79 - 50.00
    assert rows["DAPO"].split(" | ")[4] == "–"
    tex = (tables / "main.tex").read_text()
    assert r"\textbf{77.50}" in tex and r"\toprule" in tex and r"\bottomrule" in tex
    main = _csv(tables, "main")
    assert main.loc["delta", "Avg_delta"] == "26.7857" and main.loc["dapo", "Avg_delta"] == ""


def test_footer_on_every_table(fake_results: Callable[..., Path]) -> None:
    tables = _tables(fake_results)
    for name in report.TABLE_NAMES:
        md = (tables / f"{name}.md").read_text()
        assert (
            "k=4 · seeds=0, 1 · problems (samples) per checkpoint: bench_a=30 (120), bench_b=33 (132) · grader math-v3"
            in md
        )
        assert "data sha256: bench_a 111111111111; bench_b 222222222222" in md
        assert "manifest m-dapo-0, m-dapo-1" in md and "commit 0123456789ab" in md
        assert r"grader math-v3" in (tables / f"{name}.tex").read_text()


def test_byte_identical_and_golden(fake_results: Callable[..., Path]) -> None:
    first = fake_results("a")
    second = fake_results("b")
    for out in (first, second):
        assert report.main(["--results", str(out), "--n-boot", "300", "--n-perm", "300", "--plots"]) == 0
    names = sorted(
        p.relative_to(first) for p in first.rglob("*") if p.is_file() and p.parts[-2] in ("tables", "figures")
    )
    assert len(names) >= 16 + 10
    for rel in names:
        assert (first / rel).read_bytes() == (second / rel).read_bytes(), rel
    tables = first / "tables"
    assert (
        (tables / "main.csv")
        .read_text()
        .splitlines()[0]
        .startswith("method,label,bench_a,bench_a_sd,bench_a_ci_lo,bench_a_ci_hi,bench_a_delta,bench_b,")
    )
    assert "delta,DelTA,77.5000,3.5355," in (tables / "main.csv").read_text()
    assert (
        "| Method | bench_a | bench_b | Avg | Δ Avg vs DAPO | n | k | seeds |"
        in (tables / "main.md").read_text()
    )
    assert "\n| DAPO | 47.50 ± 3.54 [" in (tables / "main.md").read_text()
    assert not list(tables.glob(".*.tmp"))  # atomic writes leave no temporaries


def test_paired_test_identical_and_better() -> None:
    rng = np.random.default_rng(1)
    zeros = [np.zeros(30), np.zeros(33)]
    same = report.paired_test(zeros, n_boot=500, n_perm=500)
    assert same.delta == 0 and same.p_bootstrap == 1.0 and same.p_permutation == 1.0
    better = report.paired_test([rng.normal(20, 10, 30), rng.normal(20, 10, 33)], n_boot=500, n_perm=500)
    assert better.p_bootstrap < 0.01 and better.p_permutation < 0.01 and better.ci_lo > 0


def test_significance_table(fake_results: Callable[..., Path]) -> None:
    sig = pd.read_csv(
        _tables(fake_results, "--claim", "delta=3.26", "--claim", "delta:bench_a=30") / "significance.csv"
    )
    row = sig[(sig["method"] == "delta") & (sig["scope"] == "Avg")].iloc[0]
    assert row["delta"] == pytest.approx(26.7857, abs=1e-4) and row["problems"] == 63 and row["seeds"] == 2
    assert row["p_permutation"] < 0.01 and row["p_bootstrap"] < 0.01 and row["delta_ci_lo"] > 0
    assert row["claim_inside_ci"] == "no"
    bench_a = sig[(sig["method"] == "delta") & (sig["scope"] == "bench_a")].iloc[0]
    assert bench_a["delta"] == pytest.approx(30.0) and bench_a["claim_inside_ci"] == "yes"

    same = pd.read_csv(_tables(fake_results, name="same", identical=True) / "significance.csv")
    row = same[(same["method"] == "delta") & (same["scope"] == "Avg")].iloc[0]
    assert (
        row["delta"] == 0
        and row["p_permutation"] == pytest.approx(1.0)
        and row["p_bootstrap"] == pytest.approx(1.0)
    )


def test_learning_wallclock_failures(fake_results: Callable[..., Path]) -> None:
    tables = _tables(fake_results)
    learning = pd.read_csv(tables / "learning.csv")
    dapo10 = learning[(learning["method"] == "dapo") & (learning["step"] == 10)].iloc[0]
    seed_avgs = [(30 * 48 / 120 + 33 * 50 / 132) / 63 * 100, (30 * 45 / 120 + 33 * 55 / 132) / 63 * 100]
    assert dapo10["Avg"] == pytest.approx(np.mean(seed_avgs), abs=1e-4)
    assert dapo10["Avg_sd"] == pytest.approx(np.std(seed_avgs, ddof=1), abs=1e-4)
    assert dapo10["train_accuracy"] == pytest.approx(30.0)

    wall = _csv(tables, "wallclock")
    # per step: rollout 2.0 (+0.25 on seed 1) + reward 0.1 + old_logp 0.5 + update 1.0 (+ credit 0.5 delta)
    assert wall.loc["dapo", "time_total_s"] == "3.8500" and wall.loc["delta", "time_total_s"] == "4.3500"
    assert wall.loc["delta", "time_overhead_pct"] == f"{100 * (4.35 / 3.85 - 1):.4f}"
    assert wall.loc["delta", "steps_to_target"] == "10"  # 53.77 at step 10 ≥ DAPO's final 50.00
    assert wall.loc["dapo", "steps_to_target"] == "20"
    assert wall.loc["delta", "mem_peak_rss_mb"] == "1120.0000"
    assert "sft" not in wall.index

    wall_vs_delta = _csv(_tables(fake_results, "--baseline", "delta", name="vs_delta"), "wallclock")
    assert wall_vs_delta.loc["dapo", "steps_to_target"] == "not reached"
    assert "not reached" in (tables.parent.parent / "vs_delta" / "tables" / "wallclock.md").read_text()

    fail = _csv(tables, "failures")
    # dapo final wrong samples: 60, 66 (seed 0), 66, 60 (seed 1) -> no_answer = wrong // 10 each
    assert fail.loc["dapo", "no_answer"] == "24" and fail.loc["dapo", "samples"] == "504"
    assert fail.loc["dapo", "timeout"] == "2" and fail.loc["delta", "parse_error"] == "4"
    assert fail.loc["dapo", "failure_pct"] == f"{100 * 26 / 504:.4f}"


def test_heatmap_writes_png_and_pdf(tmp_path: Path) -> None:
    paths = plots.heatmap(["a", " b", "\n", "c"], [0.5, 1.0, 1.5, 2.0], tmp_path / "hm.png", "t")
    assert [p.name for p in paths] == ["hm.png", "hm.pdf"] and all(p.stat().st_size > 0 for p in paths)
    with pytest.raises(ValueError):
        plots.heatmap(["a"], [1.0, 2.0], tmp_path / "bad", "t")


def test_missing_summary_keys_are_named(tmp_path: Path) -> None:
    path = tmp_path / "eval" / "dapo" / "seed0" / "step0" / "b.summary.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"benchmark": "b"}')
    with pytest.raises(ValueError, match="missing keys"):
        report.load_results(tmp_path)


def test_benchmark_column_order(fake_results: Callable[..., Path]) -> None:
    tables = _tables(fake_results, "--benchmarks", "bench_b,bench_a")
    assert "| Method | bench_b | bench_a | Avg |" in (tables / "main.md").read_text()
    assert report.order_benchmarks(["a", "b", "c"], ["c", "x"]) == ["c", "a", "b"]
