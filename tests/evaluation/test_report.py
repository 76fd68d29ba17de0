"""Report tables: hand-computed cells, bold/Δ, paired tests, wall-clock, byte-identical writers."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evaluation import report
from evaluation.report import __main__ as report_cli
from evaluation.report import diagnostics, figures, render

pytestmark = pytest.mark.timeout(60)


def _tables(fake_results: Callable[..., Path], *args: str, name: str = "out", **kwargs: bool) -> Path:
    """Write a fixture tree named ``name`` (``kwargs``: identical, kinds) and its tables; the tables dir."""
    out = fake_results(name, **kwargs)
    assert report_cli.main(["--results", str(out), "--n-boot", "500", "--n-perm", "500", *args]) == 0
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
    # bench_a: +30 pp on 2 seeds is not significant with seeds random (exploratory Holm p 0.23); Avg is
    assert "| 77.50 ± 3.54 [" in rows["DelTA"] and "**76.79** ± 0.84" in rows["DelTA"]
    assert "100.0]" in rows["DelTA"]  # an accuracy interval stops at 100 %
    assert "**" not in rows["DAPO"] and "**" not in rows["SFT (start)"]
    assert rows["DelTA"].split(" | ")[4] == "+26.79"  # Δ Avg vs DAPO = 76.79 - 50.00
    assert rows["DAPO"].split(" | ")[4] == "–"
    tex = (tables / "main.tex").read_text()
    assert r"\textbf{76.79}" in tex and r"\toprule" in tex and r"\bottomrule" in tex
    main = _csv(tables, "main")
    assert main.loc["delta", "Avg_delta"] == "26.7857" and main.loc["dapo", "Avg_delta"] == ""


def test_no_bold_when_every_row_ties() -> None:
    col = report.Column("x", "x", bold="max")
    assert render._bold_rows(pd.DataFrame({"x": [0.0, 0.0, 0.0]}), col) == set()  # e.g. a tiny model's zeros
    assert render._bold_rows(pd.DataFrame({"x": [0.0, 2.0, 2.0]}), col) == {1, 2}  # ties at the top stay bold


def test_footer_on_every_table(fake_results: Callable[..., Path]) -> None:
    tables = _tables(fake_results)
    for name in report.TABLE_NAMES:
        md = (tables / f"{name}.md").read_text()
        assert (
            "k=4 · 2 seeds (ids 0, 1) · problems (samples) per checkpoint: bench_a=30 (120), bench_b=33 (132) · grader "
            "math-v3"
            in md
        )
        assert "data sha256: bench_a 111111111111; bench_b 222222222222" in md
        assert "manifest m-dapo-0, m-dapo-1" in md and "commit 0123456789ab" in md
        assert r"grader math-v3" in (tables / f"{name}.tex").read_text()
        assert (
            "data sha256: bench_a 111111111111; bench_b 222222222222" in (tables / f"{name}.html").read_text()
        )


def test_byte_identical_and_golden(fake_results: Callable[..., Path]) -> None:
    first = fake_results("a")
    second = fake_results("b")
    for out in (first, second):
        assert report_cli.main(["--results", str(out), "--n-boot", "300", "--n-perm", "300", "--plots"]) == 0
    names = sorted(
        p.relative_to(first) for p in first.rglob("*") if p.is_file() and p.parts[-2] in ("tables", "figures")
    )
    figures = sorted(p.name for p in (first / "figures").iterdir())
    stems = ["accuracy_vs_step", "accuracy_vs_wallclock", "heatmap_delta", "step_time_phases", "training_curves"]
    assert figures == sorted(f"{s}.{ext}" for s in stems for ext in ("pdf", "png"))
    assert len(names) == 7 * 4 + 1 + 10  # md/tex/csv/html; no code/ood/gsm8k/audit without such benchmarks
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
        "| Method | bench_a | bench_b | Avg | Δ Avg vs DAPO | verdict (±2 pp) | n | k | seeds |"
        in (tables / "main.md").read_text()
    )
    assert "\n| DAPO | 47.50 ± 3.54 [" in (tables / "main.md").read_text()
    assert not list(tables.glob(".*.tmp"))  # atomic writes leave no temporaries
    page = (tables / "main.html").read_text()  # the snakemake --report view of the table
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</body></html>\n")
    assert (
        "<td class=l>DelTA</td><td class=r>77.50 ± 3.54 [" in page and "<b>76.79</b> ± 0.84 [" in page
        and "<th class=l>Method</th>" in page
    )
    wall = (tables / "wallclock.html").read_text()
    assert '<p class="note">Phase times are means' in wall and "<td class=r>–</td>" in wall


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
    assert row["p_ckpt_permutation"] < 0.01 and row["p_ckpt_bootstrap"] < 0.01 and row["ckpt_ci_lo"] > 0
    # seeds random: 2 seeds, so the t reference has 1 df and the interval is wider than the seeds-fixed one
    assert row["family"] == "confirmatory" and row["df"] == pytest.approx(1.0) and row["p"] < 0.05
    assert row["delta_ci_lo"] < row["ckpt_ci_lo"] and row["delta_ci_hi"] > row["ckpt_ci_hi"]
    assert row["claim_inside_ci"] == "no"
    bench_a = sig[(sig["method"] == "delta") & (sig["scope"] == "bench_a")].iloc[0]
    assert bench_a["delta"] == pytest.approx(30.0) and bench_a["claim_inside_ci"] == "yes"
    # benchmark cells are one exploratory family: Holm over methods × benchmarks (sft and delta, 2 sets)
    exploratory = sig[sig["family"] == "exploratory"]
    assert len(exploratory) == 4 and (exploratory["p_holm"] >= exploratory["p"]).all()
    smallest = exploratory.loc[exploratory["p"].idxmin()]
    assert smallest["p_holm"] == pytest.approx(min(1.0, 4 * smallest["p"]), abs=1e-4)

    same = pd.read_csv(_tables(fake_results, name="same", identical=True) / "significance.csv")
    row = same[(same["method"] == "delta") & (same["scope"] == "Avg")].iloc[0]
    assert (
        row["delta"] == 0
        and row["p_ckpt_permutation"] == pytest.approx(1.0)
        and row["p_ckpt_bootstrap"] == pytest.approx(1.0)
    )
    # seeds random: every seed's differences are 0, the variance estimate is 0 and the t test undefined (not
    # p 1 and a zero-width interval); so neither TOST nor Holm decides, at any margin (issue 35)
    assert all(math.isnan(row[c]) for c in ("p", "p_holm", "delta_ci_lo", "delta_ci_hi", "p_tost"))
    assert row["verdict"] == "undecided" and "no between-seed variance" in row["stop_reason"]


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
    # + checkpoint 0.25 at steps 10 and 20 only: its median is 0, its mean 0.025 -> means 3.75 / 4.25
    assert (
        wall.loc["dapo", "time_checkpoint_s"] == "0.0250" and wall.loc["dapo", "time_rollout_s"] == "2.1250"
    )
    assert wall.loc["dapo", "time_total_s"] == "3.7500" and wall.loc["delta", "time_total_s"] == "4.2500"
    assert wall.loc["delta", "time_overhead_pct"] == f"{100 * (4.25 / 3.75 - 1):.4f}"
    assert wall.loc["dapo", "time_overhead_pct"] == ""  # the baseline has no overhead vs itself
    # 1000 generated tokens / rollout s (20·1000 / 40 s and / 45 s), 900 trained tokens / 1.0 s update
    assert wall.loc["dapo", "time_gen_tok_per_s"] == f"{(500 + 20_000 / 45) / 2:.4f}"
    assert wall.loc["delta", "time_train_tok_per_s"] == "900.0000"
    wall_md = (tables / "wallclock.md").read_text()
    assert "Phase times are means per RL step" in wall_md and "its median is 0" in wall_md
    assert (
        "| DAPO | 2.125 | 0.100 | 0.500 | 0.000 | 1.000 | 0.025 | **3.750** | – | 472 | 900 | 1020 |"
        in wall_md
    )
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
    paths = figures.heatmap(["a", " b", "\n", "c"], [0.5, 1.0, 1.5, 2.0], tmp_path / "hm.png", "t")
    assert [p.name for p in paths] == ["hm.png", "hm.pdf"] and all(p.stat().st_size > 0 for p in paths)
    with pytest.raises(ValueError):
        figures.heatmap(["a"], [1.0, 2.0], tmp_path / "bad", "t")


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


CODE_CSV = """\
method,label,humaneval_plus_base,humaneval_plus_base_sd,humaneval_plus_plus,humaneval_plus_plus_sd,\
humaneval_plus_plus_delta,mbpp_plus_base,mbpp_plus_base_sd,mbpp_plus_plus,mbpp_plus_plus_sd,mbpp_plus_plus_delta,k,seeds,\
requested,graded,failed,overlong,no_answer,failed_pct,overlong_pct,no_answer_pct
sft,SFT (start),,,28.1250,4.4194,-18.7500,32.5000,3.5355,27.5000,3.5355,-20.0000,4,2,144,142,2,,9,1.3889,,6.2500
dapo,DAPO,,,46.8750,4.4194,,52.5000,3.5355,47.5000,3.5355,,4,2,144,142,2,,6,1.3889,,4.1667
delta,DelTA,,,78.1250,4.4194,31.2500,82.5000,3.5355,77.5000,3.5355,30.0000,4,2,144,142,2,,1,1.3889,,0.6944
"""


def test_tables_split_by_kind(fake_results: Callable[..., Path]) -> None:
    stale = fake_results("plain") / "tables" / "code.md"
    stale.parent.mkdir()
    stale.write_text("stale")
    _tables(fake_results, name="plain")
    assert not stale.exists()  # a table that no longer applies is removed

    tables = _tables(fake_results, name="kinds", kinds=True)
    assert {p.stem for p in tables.glob("*.md")} == {*report.TABLE_NAMES, "code", "ood", "gsm8k"}
    # main keeps the math sets only: the same cells as without the other kinds, and its footer names only them
    main = _csv(tables, "main")
    assert main.loc["delta", "Avg"] == "76.7857" and "gsm8k" not in main.columns
    assert (
        "problems (samples) per checkpoint: bench_a=30 (120), bench_b=33 (132) · grader"
        in (tables / "main.md").read_text()
    )
    # MBPP+ reports base and plus; HumanEval+ reports neither, so plus = avg@k and base is missing
    assert (tables / "code.csv").read_text() == CODE_CSV
    code_md = (tables / "code.md").read_text()
    assert (
        "| DelTA | – | 78.12 ± 4.42 | +31.25 | 82.50 ± 3.54 | 77.50 ± 3.54 | +30.00 | 4 | 2 | 144 | 142 | 2 (1.4%) "
        "| – | 1 (0.7%) |" in code_md
    )  # no bold: with 2 seeds neither plus difference holds as an exploratory cell after whole-table Holm
    assert "humaneval_plus=8 (32), mbpp_plus=10 (40) · grader" in code_md
    ood = _csv(tables, "ood")
    assert list(ood.columns[:2]) == ["label", "arc_challenge"] and "Avg" not in ood.columns
    assert ood.loc["delta", "arc_challenge"] == f"{100 * 37 / 48:.4f}"  # round(0.8·48)=38, round(0.75·48)=36
    assert "multiple choice): cloze (option text, acc_norm); avg@k" in (tables / "ood.md").read_text()
    gsm = _csv(tables, "gsm8k")
    assert gsm.loc["delta", "gsm8k"] == "77.5000" and gsm.loc["delta", "gsm8k_delta"] == "30.0000"
    sig = pd.read_csv(tables / "significance.csv")
    assert set(sig["scope"]) == {
        "Avg",
        "arc_challenge",
        "bench_a",
        "bench_b",
        "gsm8k",
        "humaneval_plus",
        "mbpp_plus",
    }
    avg = sig[(sig["method"] == "delta") & (sig["scope"] == "Avg")].iloc[0]
    assert avg["problems"] == 63  # Avg pools the main table's benchmarks only
    assert report.benchmark_groups(["gsm8k"]) == {"main": ["gsm8k"], "gsm8k": ["gsm8k"]}


AUDIT_CSV = """\
method,label,benchmark,seeds,samples,samples_in_files,ours_correct,math_verify_correct,ours_only,\
math_verify_only,changed,changed_pct,delta_pp,math_verify_error,regrade_vs_stored
dapo,DAPO,bench_a,1,10,10,7,5,2,0,2,20.0000,20.0000,0,1
"""


def test_checker_audit_table(fake_results: Callable[..., Path]) -> None:
    pytest.importorskip("math_verify")
    import importlib.util  # by path: tests/workflow has a conftest module of the same name

    spec = importlib.util.spec_from_file_location("evaluation_conftest", Path(__file__).with_name("conftest.py"))
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    write_samples = helpers.write_samples

    out = fake_results()
    write_samples(out, "dapo", 0, 20, "bench_a")  # final step; non-final steps are not audited
    write_samples(out, "dapo", 0, 10, "bench_b")
    tables = _tables_at(out)
    assert (tables / "audit.csv").read_text() == AUDIT_CSV
    md = (tables / "audit.md").read_text()
    # grader v2 reads "so x = 4" (a closing statement without a box), as Math-Verify does; the stored
    # verdict (v1) said wrong, so regrade_vs_stored counts it
    assert "| DAPO | bench_a | 10 | 7 | 5 | 2 | 0 | 2 (20.0%) | +20.00 | 0 |" in md
    assert "At most 2000 evenly spaced samples per .samples.jsonl" in md
    examples = [line for line in md.splitlines() if line.startswith("| DAPO | bench_a | ours")]
    assert examples == [
        "| DAPO | bench_a | ours ✓ / MV ✗ | `4` | `four` | \\boxed{four} |",
        "| DAPO | bench_a | ours ✓ / MV ✗ | `1000` | `1e3` | \\boxed{1e3} |",
    ]
    assert "\\begin{tabular}" in (tables / "audit.tex").read_text()
    assert (
        "<td class=l><code>1e3</code></td><td class=l>\\boxed{1e3}</td>"
        in (tables / "audit.html").read_text()
    )

    res = report.load_results(out)
    capped = report.audit_table(res, report.ReportOptions(audit_max_samples=4), "footer")
    assert capped is not None
    row = capped.data.iloc[0]
    # evenly spaced records 0, 3, 6, 9: both accept, only ours, both accept, both reject
    assert (row["samples"], row["samples_in_files"], row["ours_only"], row["changed"]) == (4, 10, 1, 1)
    assert report.audit_table(res, report.ReportOptions(audit_max_samples=0), "footer") is None
    assert diagnostics._spread(10, 4) == [0, 3, 6, 9] and diagnostics._spread(3, 4) == [0, 1, 2]


def _tables_at(out: Path, *args: str) -> Path:
    assert report_cli.main(["--results", str(out), "--n-boot", "200", "--n-perm", "200", *args]) == 0
    return out / "tables"


def test_heatmap_sample_choice_and_scale(fake_results: Callable[..., Path]) -> None:
    # the figures themselves (heatmap_delta but none for DAPO's uniform weights) are checked in
    # test_byte_identical_and_golden
    out = fake_results()
    rows = figures._weight_rows(out / "runs" / "delta" / "seed0" / "token_weights.jsonl")
    assert [(r["step"], r["correct"]) for r in figures._pick_pair(rows)] == [(10, True), (20, False)]
    rows.append({**rows[1], "step": 10})  # now step 10 has both verdicts: the latest such step wins
    assert [(r["step"], r["correct"]) for r in figures._pick_pair(rows)] == [(10, True), (10, False)]
    norm, _ = figures._scale(np.array([0.5, 1.0, 4.0]))  # log scale symmetric around the uniform weight 1
    assert (norm.vmin, norm.vmax) == (0.25, 4.0) and figures._log_ticks(norm) == [0.25, 0.5, 1.0, 2.0, 4.0]
    norm, _ = figures._scale(np.array([-0.5, 1.0, 2.0]))
    assert (norm.vmin, norm.vcenter, norm.vmax) == (-0.5, 1.0, 2.0)
    assert figures._display_token("a\n") == "a↵"
    # an untrained model's control bytes are drawn as escapes, not as glyphs the font lacks
    assert figures._display_token("\x0c\x7f b\u200b") == "\\x0c\\x7f b\\u200b"


def test_heatmap_of_control_bytes_warns_of_no_missing_glyph(tmp_path: Path) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figures.heatmap(["\x01", "\x0c", "\x7f", "ok"], [0.5, 1.0, 1.5, 2.0], tmp_path / "ctl", "t")


def test_a_suites_summaries_are_read_from_its_own_folder(fake_results: Callable[..., Path]) -> None:
    """``--eval-dir eval/real`` (rule suite_report_real): the same tables from OUT/eval/real."""
    out = fake_results(kinds=True)
    (out / "eval").rename(out / "real")
    (out / "eval").mkdir()
    (out / "real").rename(out / "eval" / "real")
    with pytest.raises(FileNotFoundError, match="summary"):
        report.load_results(out)
    args = ["--results", str(out), "--eval-dir", "eval/real", "--out", str(out / "real_tables"), "--n-boot", "200",
            "--n-perm", "200"]
    assert report_cli.main(args) == 0
    assert {"main.md", "code.md", "ood.md", "gsm8k.md"} <= {p.name for p in (out / "real_tables").iterdir()}


def _rows(md: str) -> dict[str, str]:
    return {line.split(" | ")[0].strip("| "): line for line in md.splitlines() if line.startswith("| ")}


def test_bold_only_where_the_difference_to_the_baseline_is_significant(fake_results: Callable[..., Path]) -> None:
    # identical: DelTA's samples are DAPO's, so the two tie at the top of every column with p = 1
    rows = _rows((_tables(fake_results, name="same", identical=True) / "main.md").read_text())
    assert not any("**" in line for line in rows.values())
    main = (_tables(fake_results) / "main.md").read_text()  # DelTA +26.8 pp, p_holm < 0.05: bold
    assert "**76.79**" in _rows(main)["DelTA"] and "holds with training seeds random after Holm" in main


def test_missing_baseline_is_said_in_the_tables(fake_results: Callable[..., Path]) -> None:
    tables = _tables(fake_results, "--baseline", "grpo")
    for name in ("main", "significance"):
        md = (tables / f"{name}.md").read_text()
        assert "Warning: the baseline GRPO ('grpo') has no final evaluation (methods: dapo, delta, sft)" in md


def test_wallclock_counts_the_steps_logged_from_zero(fake_results: Callable[..., Path]) -> None:
    """training.rl logs steps 0..N-1; a 20-step run is 20 steps, not 19."""
    import json

    out = fake_results("zero")
    for path in (out / "runs").glob("*/seed*/metrics.jsonl"):
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({**r, "step": r["step"] - 1}) + "\n" for r in rows))
    assert report_cli.main(["--results", str(out), "--n-boot", "200", "--n-perm", "200"]) == 0
    wall = _csv(out / "tables", "wallclock")
    assert wall.loc["dapo", "steps"] == wall.loc["delta", "steps"] == "20"


def test_footer_counts_the_seeds_of_the_tables_benchmarks(fake_results: Callable[..., Path]) -> None:
    prov = report.provenance(report.load_results(fake_results()))
    assert "· 2 seeds (ids 0, 1) ·" in report.footer_text(prov, ["bench_a"])
    one = {**prov, "seeds_by_benchmark": {**prov["seeds_by_benchmark"], "bench_a": [1]}}
    assert "· 1 seed (ids 1) ·" in report.footer_text(one, ["bench_a"])


def test_accuracy_vs_step_is_small_multiples_that_state_n_k_and_seeds(
    fake_results: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from matplotlib.figure import Figure

    seen: list[Figure] = []
    real = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: (seen.append(fig), real(fig, *a, **k))[1])
    figures.accuracy_vs_step(report.load_results(fake_results()), tmp_path / "acc")
    fig = seen[0]
    assert fig._suptitle is not None
    title = " ".join(fig._suptitle.get_text().split())
    assert "avg@k over bench_a (n=30), bench_b (n=33); k=4; 2 seeds (0, 1)" in title
    # one panel per RL method and row: no two methods' seed curves share an axis, no min-max blob
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["DAPO", "DelTA"]
    for ax in fig.axes:
        colours = {line.get_color() for line in ax.lines if line.get_color() not in ("0.4", "0.55")}
        assert len(colours) <= 1 and not ax.collections, ax.get_title()
    assert fig.legends and not any(ax.get_legend() for ax in fig.axes)  # legend outside the panels


def test_letter_dominance_warning_of_the_scorer_is_in_the_table(fake_results: Callable[..., Path]) -> None:
    import json

    out = fake_results("letters", kinds=True)
    path = out / "eval" / "delta" / "seed0" / "step20" / "arc_challenge.summary.json"
    warning = "arc_challenge: option A is predicted for 12 of 12 items (100 %); the accuracy then measures ..."
    path.write_text(json.dumps({**json.loads(path.read_text()), "warnings": [warning]}))
    assert report_cli.main(["--results", str(out), "--n-boot", "200", "--n-perm", "200"]) == 0
    ood = (out / "tables" / "ood.md").read_text()
    assert f"Warning: DelTA seed 0: {warning}." in ood
    assert "Warning: DelTA seed" not in (out / "tables" / "main.md").read_text()


def test_the_start_evaluated_once_stands_for_every_seed(fake_results: Callable[..., Path]) -> None:
    """Issue 38: the workflow evaluates the SFT start once (seed 0's folder). A tree with that one evaluation gives
    the same main and significance tables as one whose start was evaluated identically on every seed (every
    method's cells, the start's Δ and Holm p included); only the learning table counts one start seed."""
    import json
    import shutil

    trees = {}
    for name in ("every_seed", "once"):
        out = fake_results(name)
        one = out / "eval" / "sft" / "seed0" / "step0"
        for path in one.glob("*.summary.json"):  # seed 1's start: the same evaluation
            target = out / "eval" / "sft" / "seed1" / "step0" / path.name
            target.write_text(json.dumps({**json.loads(path.read_text()), "seed": 1}))
        if name == "once":
            shutil.rmtree(out / "eval" / "sft" / "seed1")
        assert report_cli.main(["--results", str(out), "--n-boot", "200", "--n-perm", "200"]) == 0
        trees[name] = out / "tables"
    for table in ("main", "significance", "power", "rliable"):
        a, b = (pd.read_csv(trees[n] / f"{table}.csv") for n in ("every_seed", "once"))
        pd.testing.assert_frame_equal(a, b, obj=table)
    learning = pd.read_csv(trees["once"] / "learning.csv")
    assert learning.loc[learning["method"] == "sft", "seeds"].tolist() == [1]
