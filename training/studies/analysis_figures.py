"""Figures of ``training.studies.analysis``: token heat-maps and ``credit_by_class`` (PNG + PDF)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from evaluation.report.figures import RC, heatmap_panels, save

# calculation split into its operands and its result (DelTA weights the two differently)
FIGURE_CLASSES: tuple[str, ...] = ("scaffolding", "calc_operands", "calc_result", "answer", "other")


def _panel_title(name: str, row: Mapping[str, Any], adv_key: str) -> str:
    verdict = "correct" if row["correct"] else "wrong"
    where = f"step {row['step']} row {row['row']}"
    return f"{name} · {where} · {verdict} (gold {row['gold']}) · A {row[adv_key]:+.2f}"


def heatmaps(
    rows: Sequence[Mapping[str, Any]], picks: Sequence[tuple[int, int]], out: Path, label: str
) -> list[Path]:
    """heatmap_delta (λ~) and heatmap_cf (w) of the picked (step, row) responses."""
    by_key = {(r["step"], r["row"]): r for r in rows}
    chosen = [by_key[k] for k in picks]
    paths: list[Path] = []
    for stem, key, adv_key, what in (("heatmap_delta", "lambda", "advantage_delta", "DelTA λ~"),
                                     ("heatmap_cf", "cf_w", "advantage_cf", "CF w")):
        panels = [(_panel_title(f"{label} · {what}", r, adv_key), r["tokens"], r[key]) for r in chosen]
        if not panels:  # an empty batch: still write the declared files
            panels = [(f"{label} · {what} · no response", [""], [1.0])]
        paths += heatmap_panels(panels, out / stem)
    return paths


def bar_figure(lam_rows: Sequence[Mapping[str, Any]], cf_rows: Sequence[Mapping[str, Any]], out: Path,
               label: str) -> list[Path]:
    """credit_by_class: λ~ mean ± sd per class (operands and results apart) and side, n tokens under each
    class; CF critical / distractor share per span kind (n spans)."""
    cell = {(r["class"], r["side"]): r for r in lam_rows}
    with plt.rc_context(RC):
        fig, (ax_l, ax_c) = plt.subplots(1, 2, figsize=(10.5, 3.6), width_ratios=(1.6, 1), constrained_layout=True)
        x = np.arange(len(FIGURE_CLASSES))
        for k, (side, color) in enumerate((("A>0", "tab:green"), ("A<0", "tab:red"))):
            means = [cell[(c, side)]["mean"] for c in FIGURE_CLASSES]
            sds = [cell[(c, side)]["sd"] for c in FIGURE_CLASSES]
            ax_l.bar(x + (k - 0.5) * 0.38, [m - 1.0 if m is not None else 0.0 for m in means], width=0.38,
                     bottom=1.0, yerr=[s if s is not None else 0.0 for s in sds], color=color, alpha=0.8,
                     label=side, capsize=2)  # bars from 1, the uniform weight
        ax_l.axhline(1.0, color="0.3", linewidth=0.8)
        ticks = [f"{c.replace('calc_', 'calc. ')}\n(n={cell[(c, 'A>0')]['n']}/{cell[(c, 'A<0')]['n']})"
                 for c in FIGURE_CLASSES]
        ax_l.set_xticks(x, ticks, fontsize=8)
        ax_l.set(ylabel="DelTA λ~ (mean ± sd over tokens)", xlabel="token class (n tokens A>0/A<0)",
                 title=f"{label}: DelTA λ~ by token class")
        ax_l.legend(fontsize=8, ncol=2, loc="lower left", framealpha=0.9)
        kinds = [r for r in cf_rows if r["kind"] != "all"]
        xc = np.arange(len(kinds))
        for k, (key, color, name) in enumerate((("share_critical", "tab:blue", "critical"),
                                               ("share_distractor", "tab:orange", "distractor (I<0)"))):
            vals = [100 * r[key] if r[key] is not None else 0.0 for r in kinds]
            ax_c.bar(xc + (k - 0.5) * 0.38, vals, width=0.38, color=color, alpha=0.8, label=name)
        ax_c.set_xticks(xc, [f"{r['kind']}\n(n={r['n_spans']})" for r in kinds])
        ax_c.set(ylabel="share of spans (%)", title=f"{label}: CF spans by kind")
        ax_c.legend(fontsize=8)
        return save(fig, out / "credit_by_class")
