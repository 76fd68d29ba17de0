"""Credit fidelity (issue 16): does a method put the gradient where the answer is decided?

*Effective credit.* c_t = -dL/d log pi(o_t) at theta_old: the coefficient of grad log pi(o_t) in the
first mini-batch's policy gradient, from the trainer's own loss (``losses.per_token_loss`` and
``losses.aggregate`` with the preset's clip, weights and aggregation; at ratio 1 nothing is clipped).
So c_t = A_i w_t times the aggregation's normaliser (1 / tokens for token_mean, 1 / (seqs |o_i|) for
GRPO's seq-mean-token-mean, ...). The KL term is left out: it is not credit for the reward.

Metrics, per response i with A_i != 0 (a zero advantage carries no credit), against a ground-truth
importance g_t (``training.studies.importance`` exact on the synthetic task, or Monte-Carlo):

- ``rho``: Spearman rank correlation of c and g over the response's tokens (average ranks for ties).
  Constant credit (uniform weights) has no ranking and counts as rho = 0; a response whose g is constant
  (no decisive token) has no defined rho and is left out.
- ``decisive share``: sum of |c| on decisive tokens (g != 0) / sum of |c|, pooled over the probe set,
  the share of the step's credit mass on decisive tokens. Uniform weights give the decisive *token*
  share (reported beside it), so the excess is what the method adds.
- ``top overlap``: share of the top-q tokens by |c| (k = ceil(q L), q = 10 %; ties at the threshold
  counted fractionally, the expectation over random tie breaks) that are top tokens by |g|
  (:func:`top_overlap`), so credit equal to g scores 1 and uniform weights the chance level.

Intervals: percentile bootstrap, seeds resampled and then prompt groups within each seed, each drawn
group with all its responses (two-stage bootstrap for clustered data, Davison & Hinkley 1997 §3.8): the
responses of one prompt share its advantage baseline and are correlated, so resampling them one by one
made the intervals too narrow (89-91 % coverage at intra-group correlation .16-.30). With one seed the
interval is conditional on that seed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.stats import rankdata

TOP_FRACTION = 0.1


@dataclass(frozen=True)
class ResponseFidelity:
    """The metrics of one response for one method."""

    seed: int
    rho: float | None
    overlap: float | None
    mass_decisive: float
    mass_total: float
    n_tokens: int
    n_decisive: int
    group: Any = None
    """The response's prompt group within its seed (GRPO's unit of advantage; None: its own group)."""


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman rho with average ranks; None if y is constant, 0 if only x is (no ranking: no credit order)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(y) < 2 or np.ptp(y) == 0:
        return None
    if np.ptp(x) == 0:
        return 0.0
    rx, ry = rankdata(x), rankdata(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return float((rx * ry).sum() / math.sqrt((rx * rx).sum() * (ry * ry).sum()))


def top_membership(v: np.ndarray, k: int) -> np.ndarray:
    """Membership in the top k of v, ties at the threshold shared fractionally (sums to k)."""
    order = np.sort(v)[::-1]
    thr = order[k - 1]
    above = v > thr
    at = v == thr
    m = above.astype(float)
    m[at] = (k - above.sum()) / at.sum()
    return m


def top_overlap(credit: Sequence[float], importance: Sequence[float], fraction: float = TOP_FRACTION) -> float | None:
    """Share of the top-``fraction`` tokens by |credit| that are top tokens by |importance|.

    k = ceil(fraction L); the importance top set D holds every token with |g| > 0 at or above the k-th
    largest |g| (ties included, so a binary ground truth is not broken arbitrarily); the result is
    sum_t m_t 1[t in D] / min(k, |D|), m the fractional top-k membership of |credit|. Credit equal to
    the importance gives 1; tied (uniform) credit gives the chance level max(k, |D|) / L.
    """
    c, g = np.abs(np.asarray(credit, dtype=float)), np.abs(np.asarray(importance, dtype=float))
    if len(g) == 0 or np.ptp(g) == 0:
        return None
    k = max(1, math.ceil(fraction * len(g) - 1e-9))
    top = (g >= np.sort(g)[::-1][k - 1]) & (g > 0)
    return float((top_membership(c, k) * top).sum() / min(k, int(top.sum())))


def response_fidelity(seed: int, credit: Sequence[float], importance: Sequence[float],
                      fraction: float = TOP_FRACTION, group: Any = None) -> ResponseFidelity:
    """All metrics of one response (its valid tokens only)."""
    c, g = np.asarray(credit, dtype=float), np.asarray(importance, dtype=float)
    decisive = g != 0
    return ResponseFidelity(seed=seed, rho=spearman(c, g), overlap=top_overlap(c, g, fraction),
                            mass_decisive=float(np.abs(c[decisive]).sum()), mass_total=float(np.abs(c).sum()),
                            n_tokens=len(g), n_decisive=int(decisive.sum()), group=group)


def batch_fidelity(seed: int, credit: torch.Tensor, importance: Sequence[Sequence[float]], mask: torch.Tensor,
                   advantages: torch.Tensor, fraction: float = TOP_FRACTION,
                   groups: Sequence[Any] | None = None) -> list[ResponseFidelity]:
    """One record per response with A != 0 and a non-empty loss mask; importance[i] covers its valid tokens;
    ``groups[i]`` is row i's prompt group (the bootstrap's unit within a seed)."""
    out = []
    for i, g in enumerate(importance):
        keep = mask[i] > 0
        if float(advantages[i]) == 0 or not keep.any():
            continue
        n = len(g)
        c = credit[i, :n][keep[:n]].tolist()
        g_kept = [v for v, k in zip(g, keep[:n].tolist()) if k]
        out.append(response_fidelity(seed, c, g_kept, fraction, None if groups is None else groups[i]))
    return out


def statistics_of(records: Sequence[ResponseFidelity]) -> dict[str, float | None]:
    """Point estimates: mean rho and overlap over defined responses, pooled decisive shares."""
    rhos = [r.rho for r in records if r.rho is not None]
    ovs = [r.overlap for r in records if r.overlap is not None]
    mass = sum(r.mass_total for r in records)
    toks = sum(r.n_tokens for r in records)
    return {
        "rho": float(np.mean(rhos)) if rhos else None,
        "overlap": float(np.mean(ovs)) if ovs else None,
        "decisive_share": sum(r.mass_decisive for r in records) / mass if mass > 0 else None,
        "decisive_token_share": sum(r.n_decisive for r in records) / toks if toks else None,
    }


def bootstrap(records: Sequence[ResponseFidelity], *, n_boot: int, seed: int,
              level: float = 0.95) -> dict[str, tuple[float | None, float | None]]:
    """Percentile intervals of :func:`statistics_of`: seeds resampled (when there are several), then prompt
    groups within each seed, every drawn group with all its responses."""
    by_seed: dict[int, dict[Any, list[ResponseFidelity]]] = {}
    for i, r in enumerate(records):
        by_seed.setdefault(r.seed, {}).setdefault(("row", i) if r.group is None else r.group, []).append(r)
    clusters = {s: list(groups.values()) for s, groups in sorted(by_seed.items())}
    seeds = list(clusters)
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {}
    for _ in range(n_boot if records else 0):
        sample: list[ResponseFidelity] = []
        drawn = rng.choice(len(seeds), size=len(seeds), replace=True) if len(seeds) > 1 else [0]
        for s in drawn:
            pool = clusters[seeds[s]]
            for j in rng.integers(0, len(pool), size=len(pool)):
                sample += pool[j]
        for key, v in statistics_of(sample).items():
            if v is not None:
                draws.setdefault(key, []).append(v)
    lo, hi = 100 * (1 - level) / 2, 100 * (1 + level) / 2
    keys = ("rho", "overlap", "decisive_share", "decisive_token_share")
    return {k: ((float(np.percentile(draws[k], lo)), float(np.percentile(draws[k], hi)))
                if draws.get(k) else (None, None)) for k in keys}


def summarise(records: Sequence[ResponseFidelity], *, n_boot: int, seed: int) -> dict[str, Any]:
    """Point estimates, intervals and counts of one table row."""
    point, ci = statistics_of(records), bootstrap(records, n_boot=n_boot, seed=seed)
    row: dict[str, Any] = {}
    for key in ("rho", "decisive_share", "overlap", "decisive_token_share"):
        row[key], (row[f"{key}_lo"], row[f"{key}_hi"]) = point[key], ci[key]
    row["n_responses"] = len(records)
    row["n_groups"] = len({(r.seed, ("row", i) if r.group is None else r.group) for i, r in enumerate(records)})
    row["n_rho"] = sum(r.rho is not None for r in records)
    row["seeds"] = sorted({r.seed for r in records})
    return row


def chance_levels(records: Sequence[ResponseFidelity], fraction: float = TOP_FRACTION) -> dict[str, float | None]:
    """What credit uniform within each response scores against a binary importance (|g| in {0, 1}, as exact
    labels are): the top overlap max(k, |D|) / L (:func:`top_overlap`) averaged over the responses whose
    overlap is defined (0 < |D| < L), and the decisive share with the records' own per-response credit mass
    spread evenly over their tokens. A method above these puts its credit on the decisive tokens."""
    ovs = [max(1, math.ceil(fraction * r.n_tokens - 1e-9), r.n_decisive) / r.n_tokens
           for r in records if 0 < r.n_decisive < r.n_tokens]
    mass = sum(r.mass_total for r in records)
    share = sum(r.mass_total * r.n_decisive / r.n_tokens for r in records if r.n_tokens) / mass if mass > 0 else None
    return {"overlap": float(np.mean(ovs)) if ovs else None, "decisive_share": share}
