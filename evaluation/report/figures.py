"""Figures for the report: learning curves, accuracy vs wall-clock, step-time phases, token-weight heat-maps.

``python -m evaluation.report.figures --results OUT [--out OUT/figures] [--baseline dapo]`` (or
``python -m evaluation.report ... --plots``). Every figure is written as PNG and PDF, atomically and
byte-reproducibly: Agg backend, fixed ``svg.hashsalt``, no dates or software versions in the metadata.

Figures: ``accuracy_vs_step`` (eval Avg and training accuracy), ``accuracy_vs_wallclock``,
``step_time_phases`` (stacked mean seconds per step by phase, total and overhead on top) and
``heatmap_{method}`` (a correct and an incorrect sample's token weights, for each method whose logged
weights are not uniform). ``accuracy_vs_step`` is small multiples (a panel per method, a thin line per seed,
the seed mean, the baseline's mean for reference; n, k and seeds in its title); ``accuracy_vs_wallclock``
bands are min–max over seeds. Accuracy is the eval avg@k weighted by problem count (the main table's Avg),
training accuracy comes from ``metrics.jsonl`` (smoothed by a moving mean on long runs).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib import colors as mcolors  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from common.io import umask_mode  # noqa: E402
from evaluation.report.load import (  # noqa: E402
    AVG,
    METHOD_ORDER,
    PHASES,
    START_METHOD,
    Results,
    load_results,
    main_benchmarks,
    method_label,
    sort_methods,
)
from evaluation.report.stats import problem_counts, seed_step_accuracy, wall_clock_at  # noqa: E402

log = logging.getLogger(__name__)

RC = {
    "svg.hashsalt": "creditbench",
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
METADATA = {
    "png": {"Software": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None, "ModDate": None},
}
HEATMAP_MAX_CHARS = 4000
HEATMAP_LINE_CHARS = 90
TRAIN_SMOOTH_POINTS = 40  # training-accuracy curves are smoothed to about this many points
HEATMAP_PANEL_CHARS = 1200  # per sample in the per-method figures (~14 lines)


def _color(method: str, methods: Sequence[str]) -> str:
    """Grey for the start; the paper methods keep one tab10 colour each in every figure, others follow."""
    if method == START_METHOD:
        return "0.4"
    palette = plt.get_cmap("tab10").colors
    known = [m for m in METHOD_ORDER if m != START_METHOD]
    others = sorted(m for m in methods if m not in METHOD_ORDER)
    index = known.index(method) if method in known else len(known) + others.index(method)
    return mcolors.to_hex(palette[index % len(palette)])


def save(fig: plt.Figure, stem: Path) -> list[Path]:
    """Write ``stem.png`` and ``stem.pdf`` atomically with date-free metadata; closes the figure."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in ("png", "pdf"):
        path = stem.with_name(f"{stem.name}.{fmt}")
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        try:
            fig.savefig(tmp, format=fmt, metadata=METADATA[fmt])
            os.chmod(tmp, umask_mode())  # not mkstemp's 0600
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        paths.append(path)
    plt.close(fig)
    return paths


def _band(ax: plt.Axes, x: np.ndarray, y: pd.DataFrame, color: str, label: str, marker: str = "o") -> None:
    """Seed mean line with a min–max band; ``y`` has one column per seed, rows aligned with ``x``."""
    mean = y.mean(axis=1).to_numpy()
    ax.plot(x, mean, color=color, label=label, marker=marker, markersize=3, linewidth=1.5)
    if y.shape[1] > 1:
        ax.fill_between(
            x, y.min(axis=1).to_numpy(), y.max(axis=1).to_numpy(), color=color, alpha=0.25, linewidth=0
        )


def _seeds_and_mean(ax: plt.Axes, x: np.ndarray, y: pd.DataFrame, color: str, marker: str = "o") -> None:
    """One thin line per seed (a column of ``y``) and the seed mean on top."""
    for seed in y.columns:
        ax.plot(x, y[seed].to_numpy(), color=color, alpha=0.35, linewidth=0.8)
    ax.plot(x, y.mean(axis=1).to_numpy(), color=color, marker=marker, markersize=3, linewidth=1.8)


def _n_k_seeds(res: Results) -> str:
    """``Avg over bench_a (n=30), bench_b (n=33); k=4; 2 seeds (0, 1)``: what every curve point averages."""
    counts = problem_counts(res)
    sets = ", ".join(f"{b} (n={counts[b]})" for b in main_benchmarks(res.benchmarks))
    ks, seeds = sorted({r.k for r in res.evals}), sorted({r.seed for r in res.evals})
    return (f"eval {AVG} avg@k over {sets}; k={'/'.join(map(str, ks))}; "
            f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''} ({', '.join(map(str, seeds))})")


def _with_start(sub: pd.DataFrame, start: pd.DataFrame) -> pd.DataFrame:
    """Step 0 of every RL run is the shared SFT checkpoint's evaluation, when not logged: the seed's own where
    the start was evaluated per seed, else its one evaluation (the workflow evaluates it once)."""
    if sub.empty or start.empty or 0 in sub.index:
        return sub
    first = start.iloc[[0]].reindex(columns=sub.columns).set_axis([0]).fillna(float(start.iloc[0].mean()))
    return pd.concat([first, sub]).sort_index()


def accuracy_vs_step(res: Results, stem: Path, baseline: str = "dapo") -> list[Path]:
    """Small multiples, one column per RL method: eval Avg vs step (top) and training accuracy (bottom).

    Thin lines are seeds, the thick line their mean; the baseline's mean is a grey reference in the other
    panels and the SFT start a dashed line. The title says n (problems per set), k and the seeds.
    """
    acc = seed_step_accuracy(res)
    start = acc[acc["method"] == START_METHOD].pivot(index="step", columns="seed", values=AVG)
    methods = [m for m in sort_methods(set(acc["method"]) | set(res.metrics.get("method", []))) if m != START_METHOD]
    has_train = not res.metrics.empty and "accuracy" in res.metrics
    evals = {m: _with_start(acc[acc["method"] == m].pivot(index="step", columns="seed", values=AVG).sort_index(),
                            start) for m in methods}
    trains = {m: res.metrics[res.metrics["method"] == m].pivot(index="step", columns="seed", values="accuracy")
              .sort_index() * 100 for m in methods} if has_train else {}
    window = max(1, round(max((len(t) for t in trains.values()), default=0) / TRAIN_SMOOTH_POINTS))
    rows, cols = (2 if has_train else 1), max(1, len(methods))
    with plt.rc_context(RC):
        fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols + 0.6, 2.5 * rows + 0.9), sharex=True,
                                 sharey="row", squeeze=False, constrained_layout=True)
        for j, method in enumerate(methods):
            color = _color(method, methods)
            for i, (curves, what) in enumerate([(evals, "eval"), (trains, "train")][:rows]):
                ax, sub = axes[i, j], curves[method]
                if method != baseline and baseline in curves and not curves[baseline].empty:
                    ref = curves[baseline]
                    ax.plot(ref.index, ref.mean(axis=1), color="0.55", linewidth=1.2, linestyle=":")
                if what == "eval" and not start.empty:
                    ax.axhline(float(start.to_numpy().mean()), color="0.4", linestyle="--", linewidth=1)
                if not sub.empty:
                    sub = sub.rolling(window, min_periods=1).mean() if what == "train" else sub
                    _seeds_and_mean(ax, sub.index.to_numpy(), sub, color, marker="o" if what == "eval" else "")
                ax.set_title(method_label(method) if i == 0 else "", fontsize=9, color=color)
                ax.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
            axes[-1, j].set_xlabel("step")
        axes[0, 0].set_ylabel(f"eval {AVG} avg@k (%)")
        if has_train:
            smooth = f", {window}-step moving mean" if window > 1 else ""
            axes[1, 0].set_ylabel(f"training accuracy (%){smooth}")
        handles = [plt.Line2D([], [], color="0.2", linewidth=1.8, marker="o", markersize=3, label="seed mean"),
                   plt.Line2D([], [], color="0.2", linewidth=0.8, alpha=0.35, label="one seed"),
                   plt.Line2D([], [], color="0.55", linewidth=1.2, linestyle=":",
                              label=f"{method_label(baseline)} mean"),
                   plt.Line2D([], [], color="0.4", linewidth=1, linestyle="--", label=f"{method_label(START_METHOD)}")]
        fig.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=8, frameon=False)
        width = max(50, round(15 * (2.6 * cols + 0.6)))  # characters that fit the figure at font size 9
        fig.suptitle("Accuracy vs step\n" + textwrap.fill(_n_k_seeds(res), width), fontsize=9)
        return save(fig, stem)


TRAINING_CURVES = (("reward_mean", "training reward"), ("response_length", "response length (tokens)"),
                   ("entropy", "policy entropy (nats/token)"))


def training_curves(res: Results, stem: Path) -> list[Path]:
    """Training reward, response length and entropy vs step (the run's metrics.jsonl), one line per method:
    the seed mean with a min-max band. With ``accuracy_vs_step`` (held-out accuracy) the learning curves."""
    metrics = res.metrics
    panels = [(col, label) for col, label in TRAINING_CURVES if col in metrics]
    methods = sort_methods(set(metrics["method"]))
    seeds = sorted(set(metrics["seed"]))
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 3.2), squeeze=False,
                                 constrained_layout=True)
        for ax, (col, label) in zip(axes[0], panels):
            for method in methods:
                sub = metrics[metrics["method"] == method].pivot(index="step", columns="seed", values=col).sort_index()
                _band(ax, sub.index.to_numpy(), sub, _color(method, methods), method_label(method), marker="")
            ax.set_xlabel("step")
            ax.set_ylabel(label)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
        axes[0, 0].legend(fontsize=7, frameon=False)
        fig.suptitle(f"Training curves: seed mean, min-max band over {len(seeds)} seeds "
                     f"({', '.join(map(str, seeds))})", fontsize=9)
        return save(fig, stem)


def accuracy_vs_wallclock(res: Results, stem: Path) -> list[Path]:
    """Eval Avg vs cumulative training seconds at each evaluated checkpoint."""
    acc = seed_step_accuracy(res)
    methods = sort_methods(set(acc["method"]))
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(5, 3.4), constrained_layout=True)
        for method in methods:
            color = _color(method, methods)
            sub = acc[acc["method"] == method]
            if method == START_METHOD:
                ax.axhline(
                    float(sub[AVG].mean()), color=color, linestyle="--", linewidth=1, label=method_label(method)
                )
                continue
            sub = sub.assign(
                clock=[
                    wall_clock_at(res.metrics, method, int(s), int(t))
                    for s, t in zip(sub["seed"], sub["step"], strict=False)
                ]
            )
            if sub["clock"].isna().all():
                log.warning("%s: no wall_clock in metrics.jsonl; left out of the wall-clock figure", method)
                continue
            y = sub.pivot(index="step", columns="seed", values=AVG).sort_index()
            x = sub.groupby("step")["clock"].mean().reindex(y.index).to_numpy()
            _band(ax, x, y, color, method_label(method))
        ax.set(
            xlabel="wall-clock (s, seed mean)", ylabel=f"eval {AVG} avg@k (%)", title="Accuracy vs wall-clock"
        )
        if ax.lines:
            ax.legend(loc="best", fontsize=8)
        return save(fig, stem)


def phase_bars(res: Results, stem: Path, baseline: str = "dapo") -> list[Path]:
    """Stacked bars: mean seconds per step by phase (seed means averaged), one bar per method.

    Means, not medians: checkpointing happens every N steps only, so its median is 0. The bar's total
    and its overhead vs the baseline are written above it.
    """
    metrics = res.metrics
    methods = sort_methods(set(metrics["method"])) if not metrics.empty else []
    phases = [p for p in PHASES if f"time_{p}" in metrics]
    phases += sorted(
        c[5:] for c in metrics.columns if c.startswith("time_") and c[5:] not in (*PHASES, "total")
    )

    def mean(method: str, col: str) -> float:
        run = metrics[metrics["method"] == method]
        return float(run.groupby("seed")[col].mean().mean()) if col in run else math.nan

    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(methods) + 2.6), 3.4), constrained_layout=True)
        bottom = np.zeros(len(methods))
        palette = plt.get_cmap("Set2").colors
        labels = [method_label(m) for m in methods]
        for i, phase in enumerate(phases):
            heights = np.nan_to_num(np.array([mean(m, f"time_{phase}") for m in methods]))
            ax.bar(labels, heights, bottom=bottom, label=phase, color=palette[i % len(palette)], width=0.6)
            bottom += heights
        base = bottom[methods.index(baseline)] if baseline in methods else math.nan
        for x, total in enumerate(bottom):
            text = f"{total:.2f} s"
            if math.isfinite(base) and base > 0 and methods[x] != baseline:
                text += f"\n{100 * (total / base - 1):+.0f}%"
            ax.text(x, total, text, ha="center", va="bottom", fontsize=8)
        ax.set_ylim(0, max(float(bottom.max()) if bottom.size else 0.0, 1e-9) * 1.25)
        ax.grid(axis="x", visible=False)
        ax.set(ylabel="mean seconds per step", title="Step time by phase (mean over steps and seeds)")
        if phases:  # legend top-down in stacking order (top phase first)
            handles, names = ax.get_legend_handles_labels()
            ax.legend(handles[::-1], names[::-1], loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
                      title="phase", title_fontsize=8)  # fmt: skip
        return save(fig, stem)


def _display_token(token: str) -> str:
    """A token as drawn: newline as ``↵``, tab as two spaces, other control characters as ``\\xNN``."""
    text = token.replace("\r", "").replace("\n", "↵").replace("\t", "  ").replace("Ġ", " ").replace("▁", " ")
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
                   for c in text)  # fmt: skip


def _layout(
    tokens: Sequence[str], weights: np.ndarray, max_chars: int
) -> tuple[list[tuple[int, int, str, float]], int, bool]:
    """(line, column, text, weight) per shown token, the number of lines, whether it was truncated.

    Wraps at ``HEATMAP_LINE_CHARS``; a token holding a newline ends its line (shown as ``↵``).
    """
    placed: list[tuple[int, int, str, float]] = []
    line = col = chars = 0
    for token, weight in zip(tokens, weights, strict=False):
        text = _display_token(token)
        if chars + len(text) > max_chars:
            return placed, (max(r for r, _, _, _ in placed) + 1 if placed else 1), True
        if col and col + len(text) > HEATMAP_LINE_CHARS:
            line, col = line + 1, 0
        placed.append((line, col, text, float(weight)))
        col += max(len(text), 1)
        chars += len(text)
        if "\n" in token:
            line, col = line + 1, 0
    return placed, (max(r for r, _, _, _ in placed) + 1 if placed else 1), False


def _scale(values: np.ndarray) -> tuple[mcolors.Normalize, mcolors.Colormap]:
    """Colour scale of token weights.

    Weights on both sides of 1 (the uniform weight): diverging; on a log scale symmetric around 1 when
    all are positive (w and 1/w get mirrored colours, the colour bar is readable on both sides), else
    two linear halves. Otherwise sequential.
    """
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if 0.0 < lo < 1.0 < hi:
        ratio = max(hi, 1.0 / lo)
        return mcolors.LogNorm(vmin=1.0 / ratio, vmax=ratio), plt.get_cmap("coolwarm")
    if lo < 1.0 < hi:
        return mcolors.TwoSlopeNorm(vcenter=1.0, vmin=lo, vmax=hi), plt.get_cmap("coolwarm")
    return mcolors.Normalize(vmin=lo, vmax=hi if hi > lo else lo + 1e-9), plt.get_cmap("viridis")


def _log_ticks(norm: mcolors.Normalize) -> list[float] | None:
    """1 and the powers of two inside a symmetric log scale (0.25, 0.5, 1, 2, 4, ...)."""
    if not isinstance(norm, mcolors.LogNorm):
        return None
    top = math.floor(math.log2(norm.vmax) + 1e-9)
    if top < 1:
        return [norm.vmin, 1.0, norm.vmax]
    return [2.0**e for e in range(-top, top + 1)]


def heatmap_panels(
    panels: Sequence[tuple[str, Sequence[str], Sequence[float]]],
    path: Path | str,
    *,
    max_chars: int = HEATMAP_MAX_CHARS,
) -> list[Path]:
    """One panel per (title, tokens, weights), stacked, sharing one colour scale and colour bar.

    Each token is a cell of monospace text on a background coloured by its weight (white text on dark
    cells). ``path`` may end in .png/.pdf or be a stem; both formats are written.
    """
    for title, tokens, weights in panels:
        if len(tokens) != len(weights):
            raise ValueError(f"{title}: {len(tokens)} tokens but {len(weights)} weights")
    path = Path(path)
    stem = path.with_suffix("") if path.suffix in (".png", ".pdf") else path
    arrays = [np.asarray(w, dtype=float) for _, _, w in panels]
    norm, cmap = _scale(np.concatenate(arrays) if arrays else np.zeros(0))
    layouts = [_layout(list(tokens), w, max_chars) for (_, tokens, _), w in zip(panels, arrays, strict=True)]
    line_chars = max([c + max(len(t), 1) for placed, _, _ in layouts for _, c, t, _ in placed] + [60])
    font = 8.0
    char_in = 0.602 * font / 72  # DejaVu Sans Mono advance (0.602 em) in inches
    row_in, title_in, gap_in, margin_in = 0.19, 0.28, 0.12, 0.1
    rows = [max(n_lines, 2) for _, n_lines, _ in layouts]
    width_in = line_chars * char_in
    height_in = sum(r * row_in + title_in for r in rows) + gap_in * (len(rows) - 1) + 2 * margin_in
    with plt.rc_context({**RC, "axes.grid": False}):
        fig = plt.figure(figsize=(width_in + 1.4, max(height_in, 1.2)))
        fig_w, fig_h = fig.get_figwidth(), fig.get_figheight()
        top = fig_h - margin_in
        for (title, _, _), (placed, _, truncated), n_rows in zip(panels, layouts, rows, strict=True):
            top -= title_in
            ax = fig.add_axes(
                (
                    margin_in / fig_w,
                    (top - n_rows * row_in) / fig_h,
                    width_in / fig_w,
                    n_rows * row_in / fig_h,
                )
            )
            ax.set_xlim(0, line_chars)
            ax.set_ylim(n_rows, 0)
            ax.axis("off")
            for row, column, text, weight in placed:
                face = cmap(norm(weight)) if math.isfinite(weight) else (1.0, 1.0, 1.0, 1.0)
                r, g, b = face[:3]
                ink = "white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else "black"
                ax.add_patch(
                    Rectangle(
                        (column, row), max(len(text), 1), 1, facecolor=face, edgecolor="white", linewidth=0.4
                    )
                )
                ax.text(column, row + 0.55, text, fontsize=font, family="DejaVu Sans Mono", va="center",
                        ha="left", color=ink)  # fmt: skip
            ax.set_title(title + (" (truncated)" if truncated else ""), fontsize=9, loc="left", pad=3)
            top -= n_rows * row_in + gap_in
        bar_h = height_in - 2 * margin_in - title_in
        cax = fig.add_axes(
            ((width_in + 0.35) / fig_w, margin_in / fig_h, 0.12 / fig_w, max(bar_h, 0.5) / fig_h)
        )
        bar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), cax=cax, label="token weight")
        ticks = _log_ticks(norm)
        if ticks:
            bar.set_ticks(ticks, labels=[f"{t:g}" if t >= 1 else f"{t:.2g}" for t in ticks])
            bar.ax.minorticks_off()
        return save(fig, stem)


def heatmap(tokens: list[str], weights: list[float], path: Path | str, title: str) -> list[Path]:
    """Colour each token of one response by its credit weight (DelTA λ, CF w_t); writes PNG and PDF."""
    return heatmap_panels([(title, tokens, weights)], path)


def _weight_rows(file: Path) -> list[dict[str, object]]:
    return [json.loads(ln) for ln in file.read_text(encoding="utf-8").splitlines() if ln.strip()]


def _pick_pair(rows: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    """A correct and an incorrect sample from the latest step that has both (else the latest of each)."""
    steps = sorted({int(r.get("step", 0)) for r in rows}, reverse=True)  # type: ignore[call-overload]
    for step in steps:
        at = [r for r in rows if int(r.get("step", 0)) == step]  # type: ignore[call-overload]
        good = [r for r in at if r.get("correct")]
        bad = [r for r in at if not r.get("correct")]
        if good and bad:
            return [good[0], bad[0]]
    good = [r for r in rows if r.get("correct")]
    bad = [r for r in rows if not r.get("correct")]
    return ([good[-1]] if good else []) + ([bad[-1]] if bad else [])


def token_weight_heatmaps(res: Results, out_dir: Path) -> list[Path]:
    """``heatmap_{method}``: one correct and one incorrect sample for each method with non-uniform weights.

    Samples come from the method's lowest seed with a ``token_weights.jsonl``; methods whose logged
    weights are all equal (GRPO, DAPO: uniform credit) get no figure.
    """
    paths: list[Path] = []
    by_method: dict[str, tuple[int, Path]] = {}
    for method, seed, file in sorted(res.token_weight_files):
        by_method.setdefault(method, (seed, file))
    for method in sort_methods(set(by_method)):
        seed, file = by_method[method]
        rows = [r for r in _weight_rows(file) if r.get("tokens")]
        values = (
            np.concatenate([np.asarray(r["weights"], dtype=float) for r in rows]) if rows else np.zeros(0)
        )
        if values.size == 0 or float(np.nanmax(values) - np.nanmin(values)) < 1e-6:
            log.info("%s: uniform token weights; no heat-map", method)
            continue
        panels = []
        for row in _pick_pair(rows):
            verdict = "correct" if row.get("correct") else "incorrect"
            advantage = float(row.get("advantage", math.nan))  # type: ignore[arg-type]
            title = (f"{method_label(method)} seed {seed} · step {row.get('step')} · {verdict} · "
                     f"advantage {advantage:+.2f}")
            panels.append((title, [str(t) for t in row["tokens"]], [float(x) for x in row["weights"]]))  # type: ignore[union-attr]
        paths += heatmap_panels(panels, out_dir / f"heatmap_{method}", max_chars=HEATMAP_PANEL_CHARS)
    return paths


def write_all(res: Results, out_dir: Path, *, baseline: str = "dapo") -> list[Path]:
    """Every figure into ``out_dir``; returns the written paths."""
    paths = accuracy_vs_step(res, out_dir / "accuracy_vs_step", baseline=baseline)
    paths += accuracy_vs_wallclock(res, out_dir / "accuracy_vs_wallclock")
    if not res.metrics.empty:
        paths += phase_bars(res, out_dir / "step_time_phases", baseline=baseline)
        paths += training_curves(res, out_dir / "training_curves")
    paths += token_weight_heatmaps(res, out_dir)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.report.figures", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, required=True, help="results tree (OUT)")
    parser.add_argument("--out", type=Path, default=None, help="figure directory (default OUT/figures)")
    parser.add_argument("--baseline", default="dapo")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    for path in write_all(
        load_results(args.results), args.out or args.results / "figures", baseline=args.baseline
    ):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
