"""Tables and figure of the credit-fidelity analysis (issue 16; metrics in ``training.studies.fidelity``).

``credit_fidelity.{md,csv}``: one row per trained preset (its final checkpoints, pooled over seeds) and
per control scored on the shared SFT checkpoint (``<preset>@sft``); ρ, decisive share and top-q overlap,
each with its 95 % bootstrap interval. ``gradient_snr.{md,csv}``: the LM-head gradient signal-to-noise
ratio logged per RL step (``training.credit.gradsnr``), per method over steps and seeds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from common.io import write_text_atomic
from evaluation.report.figures import RC, save
from training.studies.analysis import to_csv
from training.studies.fidelity import ResponseFidelity, summarise

METRICS = (("rho", "Spearman ρ(credit, importance)"), ("decisive_share", "credit share on decisive tokens"),
           ("overlap", "top-q overlap"))


def checkpoint_of(model_dir: str) -> str:
    """``sft`` or ``stepN`` from a model folder path."""
    name = Path(model_dir).name
    return name if name.startswith("step") else "sft"


def fidelity_rows(labels: Sequence[str], meta: Mapping[str, tuple[str, str]],
                  exact: Mapping[str, Sequence[ResponseFidelity]], mc: Mapping[str, Sequence[ResponseFidelity]],
                  *, n_boot: int, seed: int) -> list[dict[str, Any]]:
    """One summary per label (exact ground truth; Monte-Carlo ρ where probed)."""
    rows = []
    for label in labels:
        preset, model_dir = meta[label]
        row = {"label": label, "preset": preset, "checkpoint": checkpoint_of(model_dir),
               **summarise(exact.get(label, ()), n_boot=n_boot, seed=seed)}
        if mc.get(label):
            m = summarise(mc[label], n_boot=n_boot, seed=seed)
            row.update(rho_mc=m["rho"], rho_mc_lo=m["rho_lo"], rho_mc_hi=m["rho_hi"], n_mc=m["n_rho"])
        row["seeds"] = " ".join(map(str, row["seeds"]))
        rows.append(row)
    return rows


def _ci(row: Mapping[str, Any], key: str, pct: bool = False) -> str:
    v, lo, hi = row.get(key), row.get(f"{key}_lo"), row.get(f"{key}_hi")
    if v is None:
        return "–"
    f = (lambda x: f"{100 * x:.1f}") if pct else (lambda x: f"{x:+.3f}")
    return f"{f(v)} [{f(lo)}, {f(hi)}]" if lo is not None else f(v)


def fidelity_markdown(rows: Sequence[Mapping[str, Any]], top_fraction: float, n_boot: int) -> str:
    """The table with its reading notes."""
    q = f"{100 * top_fraction:g} %"
    has_mc = any("rho_mc" in r for r in rows)
    head = ["row", "preset", "checkpoint", "ρ [95 % CI]", "decisive share % [CI]", "decisive tokens %",
            f"top-{q} overlap % [CI]", "responses (ρ defined)", "prompt groups", "seeds"]
    head += ["ρ vs MC [CI] (n)"] if has_mc else []
    lines = ["**Credit fidelity: effective per-token credit vs ground-truth token importance**", "",
             "| " + " | ".join(head) + " |", "|" + "|".join([":---"] * 3 + ["---:"] * (len(head) - 3)) + "|"]
    for r in rows:
        cells = [r["label"], r["preset"], r["checkpoint"], _ci(r, "rho"), _ci(r, "decisive_share", True),
                 "–" if r["decisive_token_share"] is None else f"{100 * r['decisive_token_share']:.1f}",
                 _ci(r, "overlap", True), f"{r['n_responses']} ({r['n_rho']})", str(r.get("n_groups", "–")), r["seeds"]]
        if has_mc:
            cells.append(f"{_ci(r, 'rho_mc')} ({r['n_mc']})" if "rho_mc" in r else "–")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", (
        "Credit c_t = -dL/d log π(o_t) at θ_old (advantage × token weight × the preset's aggregation "
        "normaliser, KL left out), on probe rollouts of each checkpoint sampled as the RL loop samples its "
        "first steps; responses with A = 0 carry no credit and are left out. Importance: exact on the "
        "synthetic task (+1 on operands, results and the answer of a right solution; -1 on the one slip "
        "of a wrong solution; 0 elsewhere; training.studies.importance). ρ: mean per-response Spearman "
        "(constant credit, as uniform weights, counts 0; responses without a decisive token are left "
        "out). Decisive share: |c| on tokens with importance != 0 over all |c|; uniform weights give the "
        f"decisive token share beside it. Top-{q} overlap: chance level for tied (uniform) credit. "
        f"Intervals: percentile bootstrap ({n_boot} resamples), seeds then prompt groups (all responses of a "
        "drawn group; with one seed, conditional on it; with a handful of groups the interval is too narrow to "
        "trust). `<preset>@sft`: "
        "the preset's weights on the shared SFT checkpoint (same policy and rollouts for every such "
        "row)." + (" ρ vs MC: against Monte-Carlo importance (training.studies.mc_importance)." if has_mc else ""))]
    return "\n".join(lines) + "\n"


def fidelity_figure(rows: Sequence[Mapping[str, Any]], stem: Path, top_fraction: float) -> list[Path]:
    """Three panels (ρ, decisive share, top-q overlap), one line per row with its interval."""
    n = sorted({r["n_responses"] for r in rows})
    n_rho = sorted({r["n_rho"] for r in rows})
    seeds = sorted({s for r in rows for s in r["seeds"].split()})
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, 3, figsize=(11, 0.45 * len(rows) + 1.6), sharey=True, constrained_layout=True)
        y = np.arange(len(rows))[::-1]
        for ax, (key, title) in zip(axes, METRICS):
            scale = 1.0 if key == "rho" else 100.0
            for yi, r in zip(y, rows):
                if r[key] is None:
                    continue
                v = scale * r[key]
                lo, hi = (scale * r[f"{key}_lo"], scale * r[f"{key}_hi"]) if r[f"{key}_lo"] is not None else (v, v)
                color = "tab:gray" if r["checkpoint"] == "sft" else "tab:blue"
                ax.errorbar(v, yi, xerr=[[v - lo], [hi - v]], fmt="o", color=color, capsize=3)
                if key == "decisive_share" and r["decisive_token_share"] is not None:
                    ax.plot(100 * r["decisive_token_share"], yi, "|", color="tab:red", markersize=12)
            if key == "rho":
                ax.axvline(0.0, color="0.3", linewidth=0.8)
            label = title.replace("top-q", f"top-{100 * top_fraction:g} %")
            ax.set(title=label, xlabel="ρ" if key == "rho" else "%")
        axes[0].set_yticks(y, [r["label"] for r in rows])
        axes[1].text(0.02, 0.02, "| = decisive token share (uniform credit)", transform=axes[1].transAxes,
                     fontsize=7, color="tab:red")
        fig.suptitle(f"Credit fidelity vs exact token importance · responses per row n = "
                     f"{'/'.join(map(str, n))} (with a decisive token, ρ defined: {'/'.join(map(str, n_rho))}) · "
                     f"seeds {', '.join(seeds)} · 95 % bootstrap CI (blue: final checkpoints, grey: SFT)",
                     fontsize=9)
        return save(fig, stem)


def write_fidelity(rows: Sequence[Mapping[str, Any]], out: Path, cfg: Any) -> list[Path]:
    """credit_fidelity.md / .csv / .png / .pdf in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    fid = cfg.fidelity
    write_text_atomic(out / "credit_fidelity.md", fidelity_markdown(rows, fid.top_fraction, fid.bootstrap))
    keys = list(dict.fromkeys(k for r in rows for k in r))
    write_text_atomic(out / "credit_fidelity.csv", to_csv([{k: r.get(k) for k in keys} for r in rows]))
    return fidelity_figure(rows, out / "credit_fidelity", fid.top_fraction)


def snr_rows(runs: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> list[dict[str, Any]]:
    """Per label (runs of one method pooled over seeds): steps and the mean, median, sd of grad_snr_head."""
    pooled: dict[str, dict[str, list[float]]] = {}
    for label, metrics in runs:
        acc = pooled.setdefault(label, {"snr": [], "norm": [], "runs": []})
        acc["runs"].append(1.0)
        for m in metrics:
            v = m.get("grad_snr_head")
            if v is not None and math.isfinite(v):
                acc["snr"].append(float(v)), acc["norm"].append(float(m["grad_norm_head"]))
    out = []
    for label, acc in pooled.items():
        s = acc["snr"]
        out.append({"method": label, "runs": len(acc["runs"]), "steps": len(s),
                    "snr_mean": statistics.fmean(s) if s else None, "snr_median": statistics.median(s) if s else None,
                    "snr_sd": statistics.stdev(s) if len(s) > 1 else None,
                    "grad_norm_head_mean": statistics.fmean(acc["norm"]) if s else None})
    return out


def write_snr(rows: Sequence[Mapping[str, Any]], out: Path) -> None:
    """gradient_snr.md / .csv in ``out``."""
    def f(x: Any) -> str:
        return "–" if x is None else f"{x:.3g}"

    lines = ["**Policy-gradient signal-to-noise per RL step (LM head)**", "",
             "| method | runs | steps | SNR mean ± sd | SNR median | head grad norm (mean) |",
             "|:---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['method']} | {r['runs']} | {r['steps']} | {f(r['snr_mean'])} ± {f(r['snr_sd'])} | "
                     f"{f(r['snr_median'])} | {f(r['grad_norm_head_mean'])} |")
    lines += ["", ("SNR = ||mean_g G_g||² / (tr Cov(G_g) / n) over the n prompt groups' LM-head gradients "
                   "of each step's first mini-batch (training.credit.gradsnr): about 1 = pure noise.")]
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "gradient_snr.md", "\n".join(lines) + "\n")
    if rows:
        write_text_atomic(out / "gradient_snr.csv", to_csv(rows))
    else:
        write_text_atomic(out / "gradient_snr.csv", "method,runs,steps\n")
