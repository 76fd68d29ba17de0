"""Figures for the report: learning curves, accuracy vs wall-clock, step-time phases, token-weight heat-maps.

``python -m evaluation.plots --results OUT [--out OUT/figures] [--baseline dapo]`` (or
``python -m evaluation.report ... --plots``). Every figure is written as PNG and PDF, atomically and
byte-reproducibly: Agg backend, fixed ``svg.hashsalt``, no dates or software versions in the metadata.

Seed bands are min–max over seeds around the seed mean. Accuracy is the eval avg@k weighted by problem
count (the main table's Avg), training accuracy comes from ``metrics.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib import colors as mcolors  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from evaluation.report import (  # noqa: E402
    AVG,
    METHOD_LABELS,
    PHASES,
    START_METHOD,
    Results,
    load_results,
    seed_step_accuracy,
    sort_methods,
    wall_clock_at,
)

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


def _color(method: str, methods: Sequence[str]) -> str:
    if method == START_METHOD:
        return "0.4"
    palette = plt.get_cmap("tab10").colors
    others = [m for m in methods if m != START_METHOD]
    return mcolors.to_hex(palette[others.index(method) % len(palette)])


def _label(method: str) -> str:
    return METHOD_LABELS.get(method, method)


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
            x, y.min(axis=1).to_numpy(), y.max(axis=1).to_numpy(), color=color, alpha=0.2, linewidth=0
        )


def accuracy_vs_step(res: Results, stem: Path) -> list[Path]:
    """Left: eval Avg vs step (sft as a dashed line). Right: training accuracy vs step."""
    acc = seed_step_accuracy(res)
    methods = sort_methods(set(acc["method"]) | set(res.metrics.get("method", [])))
    with plt.rc_context(RC):
        fig, (ax_eval, ax_train) = plt.subplots(1, 2, figsize=(9, 3.4), constrained_layout=True)
        for method in methods:
            color = _color(method, methods)
            sub = acc[acc["method"] == method].pivot(index="step", columns="seed", values=AVG).sort_index()
            if method == START_METHOD:
                if not sub.empty:
                    ax_eval.axhline(
                        float(sub.to_numpy().mean()),
                        color=color,
                        linestyle="--",
                        linewidth=1,
                        label=_label(method),
                    )
                continue
            if not sub.empty:
                _band(ax_eval, sub.index.to_numpy(), sub, color, _label(method))
            if not res.metrics.empty and "accuracy" in res.metrics:
                run = res.metrics[res.metrics["method"] == method]
                train = run.pivot(index="step", columns="seed", values="accuracy").sort_index() * 100
                if not train.empty:
                    _band(ax_train, train.index.to_numpy(), train, color, _label(method), marker="")
        ax_eval.set(
            xlabel="step", ylabel=f"eval {AVG} avg@k (%)", title="Evaluation (seed mean, min–max band)"
        )
        ax_train.set(xlabel="step", ylabel="training accuracy (%)", title="Training batches")
        for ax in (ax_eval, ax_train):
            if ax.lines:
                ax.legend(loc="best", fontsize=8)
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
                    float(sub[AVG].mean()), color=color, linestyle="--", linewidth=1, label=_label(method)
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
            _band(ax, x, y, color, _label(method))
        ax.set(
            xlabel="wall-clock (s, seed mean)", ylabel=f"eval {AVG} avg@k (%)", title="Accuracy vs wall-clock"
        )
        if ax.lines:
            ax.legend(loc="best", fontsize=8)
        return save(fig, stem)


def phase_bars(res: Results, stem: Path) -> list[Path]:
    """Stacked bars: median seconds per step by phase, one bar per method."""
    metrics = res.metrics
    methods = sort_methods(set(metrics["method"])) if not metrics.empty else []
    phases = [p for p in PHASES if f"time_{p}" in metrics]
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(max(3.5, 1.2 * len(methods) + 2), 3.4), constrained_layout=True)
        bottom = np.zeros(len(methods))
        palette = plt.get_cmap("Set2").colors
        for i, phase in enumerate(phases):
            heights = np.array(
                [float(metrics.loc[metrics["method"] == m, f"time_{phase}"].median()) for m in methods]
            )
            heights = np.nan_to_num(heights)
            ax.bar(
                [_label(m) for m in methods],
                heights,
                bottom=bottom,
                label=phase,
                color=palette[i % len(palette)],
            )
            bottom += heights
        ax.set_ylim(0, max(float(bottom.max()) if bottom.size else 0.0, 1e-9) * 1.08)
        ax.set(ylabel="median seconds per step", title="Step time by phase")
        if phases:
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
        return save(fig, stem)


def _display_token(token: str) -> str:
    return (
        token.replace("\r", "").replace("\n", "\\n").replace("\t", "  ").replace("Ġ", " ").replace("▁", " ")
    )


def heatmap(tokens: list[str], weights: list[float], path: Path | str, title: str) -> list[Path]:
    """Colour each token of a response by its credit weight (DelTA λ, CF w_t); writes PNG and PDF.

    Tokens are laid out as monospace text wrapped at ``HEATMAP_LINE_CHARS`` (``\\n`` tokens end a line).
    The colour scale is diverging around 1 (the uniform weight) when weights fall on both sides of it,
    sequential otherwise. ``path`` may end in .png/.pdf or be a stem; both formats are written.
    """
    if len(tokens) != len(weights):
        raise ValueError(f"{len(tokens)} tokens but {len(weights)} weights")
    path = Path(path)
    stem = path.with_suffix("") if path.suffix in (".png", ".pdf") else path
    w = np.asarray(weights, dtype=float)
    placed: list[tuple[int, int, str, float]] = []  # line, column, text, weight
    line = col = chars = 0
    truncated = False
    for token, weight in zip(tokens, w, strict=False):
        text = _display_token(token)
        if chars + len(text) > HEATMAP_MAX_CHARS:
            truncated = True
            break
        if col and col + len(text) > HEATMAP_LINE_CHARS:
            line, col = line + 1, 0
        placed.append((line, col, text, float(weight)))
        col += max(len(text), 1)
        chars += len(text)
        if "\n" in token:
            line, col = line + 1, 0
    n_lines = max(row for row, _, _, _ in placed) + 1 if placed else 1
    line_chars = max([c + max(len(t), 1) for _, c, t, _ in placed] + [60])  # room for the title
    lo, hi = (float(np.nanmin(w)), float(np.nanmax(w))) if w.size else (0.0, 1.0)
    if lo < 1.0 < hi:
        norm: mcolors.Normalize = mcolors.TwoSlopeNorm(vcenter=1.0, vmin=lo, vmax=hi)
        cmap = plt.get_cmap("coolwarm")
    else:
        norm = mcolors.Normalize(vmin=lo, vmax=hi if hi > lo else lo + 1e-9)
        cmap = plt.get_cmap("viridis")
    font = 8.0
    char_in = 0.602 * font / 72  # DejaVu Sans Mono advance (0.602 em) in inches
    with plt.rc_context({**RC, "axes.grid": False}):
        rows_shown = max(n_lines, 3)  # room for the colour bar
        width_in, height_in = line_chars * char_in, 0.19 * rows_shown
        fig = plt.figure(figsize=(width_in + 1.3, height_in + 0.6))
        left, bottom = 0.1 / fig.get_figwidth(), 0.15 / fig.get_figheight()
        ax = fig.add_axes((left, bottom, width_in / fig.get_figwidth(), height_in / fig.get_figheight()))
        ax.set_xlim(0, line_chars)
        ax.set_ylim(rows_shown, 0)
        ax.axis("off")
        for row, column, text, weight in placed:
            width = max(len(text), 1)
            face = cmap(norm(weight)) if not math.isnan(weight) else (1, 1, 1, 1)
            ax.add_patch(Rectangle((column, row), width, 1, facecolor=face, edgecolor="white", linewidth=0.3))
            ax.text(column, row + 0.5, text, fontsize=font, family="DejaVu Sans Mono", va="center", ha="left")
        ax.set_title(title + (" (truncated)" if truncated else ""), fontsize=9, loc="left")
        cax = fig.add_axes(
            (
                (width_in + 0.3) / fig.get_figwidth(),
                bottom,
                0.12 / fig.get_figwidth(),
                height_in / fig.get_figheight(),
            )
        )
        fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), cax=cax, label="weight")
        return save(fig, stem)


def token_weight_heatmaps(res: Results, out_dir: Path, per_run: int = 4) -> list[Path]:
    """Heat-maps of the first ``per_run`` dumps of each run's ``token_weights.jsonl``."""
    paths: list[Path] = []
    for method, seed, file in res.token_weight_files:
        lines = [ln for ln in file.read_text(encoding="utf-8").splitlines() if ln.strip()]
        for i, line in enumerate(lines[:per_run]):
            row = json.loads(line)
            verdict = "correct" if row.get("correct") else "wrong"
            advantage = float(row.get("advantage", math.nan))
            title = f"{_label(method)} seed {seed} · step {row.get('step')} · A={advantage:+.2f} · {verdict}"
            stem = out_dir / f"heatmap_{method}_seed{seed}_{i}"
            paths += heatmap(list(row["tokens"]), [float(x) for x in row["weights"]], stem, title)
    return paths


def write_all(res: Results, out_dir: Path, *, baseline: str = "dapo") -> list[Path]:
    """Every figure into ``out_dir``; returns the written paths."""
    del baseline  # figures show every method; kept for a stable call signature with the report
    paths = accuracy_vs_step(res, out_dir / "accuracy_vs_step")
    paths += accuracy_vs_wallclock(res, out_dir / "accuracy_vs_wallclock")
    if not res.metrics.empty:
        paths += phase_bars(res, out_dir / "step_time_phases")
    paths += token_weight_heatmaps(res, out_dir)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.plots", description=__doc__.split("\n\n")[0])
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
