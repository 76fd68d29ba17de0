"""DelTA: discriminative token credit assignment (Zhang, Wu, Lin; arXiv 2605.21467): ``delta`` and its
``delta_within_side`` variant.

Reference code: RUCBM/DelTA @ cf048bd, ``verl-DelTA/verl/workers/actor/dp_actor.py``
(``DataParallelPPOActor.compute_log_prob_h``). Card: ``training/ALGORITHMS.md``.

Notation (all per response token t of response i, computed once per rollout batch at theta_old):

    v_{i,t}  = (1 - p_{i,t}) h_{i,t}              gradient proxy: sampled-token row of d log pi / d W_lm (§F)
    mu_+/-   = sum A^+/- a v / sum A^+/- a         advantage-weighted side centroids (a = alpha, 1 at k=0)
    m_{i,t}  = ||v - mu_opp||^2 - ||v - mu_own||^2  margin (own side = sign of A_i)
    gamma_+/- = population std of m over the side's valid tokens, floored at sqrt(1e-8)
    lambda   = lambda_min + (lambda_max - lambda_min) sigma(m / gamma)   (A_i = 0 rows: lambda_min)
    lambda~  = lambda * N / sum lambda             mean 1 over the N valid tokens of the batch (shard)

The weight multiplies the policy-gradient term only, i.e. the per-token advantage is lambda~ * A
(the reference's ``weighted_adv``); with ``token_mean`` aggregation this is the self-normalised J_DelTA.

Refinement (K rounds) follows the reference exactly, including its lag in gamma: round k scores tokens
with the margins at the centroids it starts from, sigma(m/gamma) uses the gamma computed *before*
the round, and the round then sets gamma to the std of those same margins. Hence with K = 1 the final
weights use the refined centroids mu^(1) but the gamma of the initial centroids mu^(0).

Departures from the reference code (all deliberate, none changes the numbers at K=1, local stats):
- No extra forward passes: ``h`` comes from the single theta_old forward that also gives ``old_logp``
  (the reference re-runs the model K+3 times to save memory).
- Fast path uses the identity ||v-mu_-||^2 - ||v-mu_+||^2 = 2 v.(mu_+ - mu_-) - (||mu_+||^2 - ||mu_-||^2),
  so the margin is linear in v (it is the reference's logged-but-unused discriminator ``2(W.v + b)``);
  v.mu is computed as (1-p) (h.mu) and v is never materialised.
- ``stats="global"`` all-reduces the sufficient statistics across ``torch.distributed`` ranks; the
  reference has no all-reduce (per data-parallel shard; reproduced by ``stats="local"``, the default).
- An empty side (no positive or no negative token) gives a zero centroid, as the reference's
  ``clamp(min=eps)`` of the denominator does.

Memory (streaming): ``h`` is read in row chunks of at most ``chunk_bytes`` of fp32 (each chunk is cast,
used and freed), so the stored ``h`` may stay bf16 on the host (TRL backend ``offload_hidden``) and no
full-precision [B, R, H] copy is ever made: 2 + 2K passes over the chunks (centroids, margins per
round) replace the reference's K+3 model forwards. The sums run in fp32/fp64 per chunk, so a chunked
result equals the unchunked one up to summation order (tested at atol 1e-6).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import torch
from torch import Tensor

from training.registry import register

if TYPE_CHECKING:  # pragma: no cover
    from training.credit.batch import CreditBatch

StatsMode = Literal["local", "global"]
_EPS = 1e-8  # reference: clamp of denominators and of the margin variance (gamma >= sqrt(1e-8))
CHUNK_BYTES = 1 << 30  # fp32 bytes of one row chunk of h (a 1 GiB transient at most)


def _row_chunks(hidden: Tensor, dtype: torch.dtype, chunk_bytes: int):
    """(rows, h[rows] as ``dtype`` on ``hidden``'s device) for row chunks of <= chunk_bytes; views if no cast."""
    B, R, H = hidden.shape
    rows = max(1, chunk_bytes // max(1, R * H * torch.finfo(dtype).bits // 8))
    for start in range(0, B, rows):
        sl = slice(start, min(B, start + rows))
        yield sl, hidden[sl].to(dtype)


def _sum_across_ranks(t: Tensor, stats: StatsMode) -> Tensor:
    """All-reduce (sum) ``t`` across data-parallel ranks when ``stats == "global"`` and distributed is up."""
    if stats == "global" and torch.distributed.is_available() and torch.distributed.is_initialized():
        t = t.clone()
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
    elif stats not in ("local", "global"):
        raise ValueError(f"stats must be 'local' or 'global', got {stats!r}")
    return t


def _check_knobs(K: int, lambda_min: float, lambda_max: float) -> None:
    if K < 0:
        raise ValueError(f"delta: K (refinement rounds) must be >= 0, got {K}")
    if not 0.0 < lambda_min <= lambda_max:
        raise ValueError(f"delta: need 0 < lambda_min <= lambda_max, got {lambda_min}, {lambda_max}")


def _pop_std(m: Tensor, sel: Tensor, stats: StatsMode) -> Tensor:
    """Population std of m over sel (floored at sqrt(eps)) from all-reducible sums. m, sel: [B,R] -> []."""
    sums = torch.stack([(m * sel).sum(), (m * m * sel).sum(), sel.sum()])  # [3]
    s1, s2, n = _sum_across_ranks(sums, stats).unbind()
    n = n.clamp(min=1.0)
    mean = s1 / n
    return torch.sqrt(torch.clamp(s2 / n - mean * mean, min=_EPS))


# --------------------------------------------------------------------------------------------------
# Fast implementation (production path)
# --------------------------------------------------------------------------------------------------


def delta_lambda(
    hidden: Tensor,
    old_logp: Tensor,
    mask: Tensor,
    advantages: Tensor,
    *,
    K: int,
    lambda_min: float,
    lambda_max: float,
    stats: StatsMode,
    within_side: bool = False,
    chunk_bytes: int = CHUNK_BYTES,
) -> Tensor:
    """Self-normalised DelTA coefficients lambda~ [B, R] (DelTA §3, App. G/H; ref. ``compute_log_prob_h``).

    hidden: [B, R, H] LM-head input at the position predicting response token j (any float dtype, any
    device: it is streamed in row chunks of <= ``chunk_bytes``, see the module docstring); old_logp,
    mask: [B, R]; advantages: [B]. Returns lambda~ * mask, mean 1 over valid tokens (over all ranks if
    ``stats="global"``). ``within_side=True`` is the Table-2 ablation, see :func:`delta_within_side`.
    """
    _check_knobs(K, lambda_min, lambda_max)
    dtype = torch.float64 if hidden.dtype == torch.float64 else torch.float32  # bf16/fp16 -> fp32
    dev = hidden.device
    mask = mask.to(device=dev, dtype=dtype)  # [B, R]
    old_logp, advantages = old_logp.to(dev), advantages.to(dev)
    adv = advantages.to(dtype)  # [B]
    q = (1.0 - old_logp.to(dtype).exp()) * mask  # [B, R]  v = q[..., None] * h
    pos_tok = (adv > 0).float()[:, None] * mask  # [B, R] valid tokens of positive responses
    neg_tok = (adv < 0).float()[:, None] * mask  # [B, R]
    a_pos = adv.clamp(min=0.0)[:, None] * mask  # [B, R] centroid weights A^+ m
    a_neg = (-adv).clamp(min=0.0)[:, None] * mask  # [B, R]
    H = hidden.shape[-1]
    # ||v||^2 is only needed by the within-side ablation (it cancels in the DelTA margin).
    v_sq = None
    if within_side:
        v_sq = torch.zeros_like(q)  # [B, R]
        for sl, h in _row_chunks(hidden, dtype, chunk_bytes):
            v_sq[sl] = q[sl] * q[sl] * (h * h).sum(-1)

    def centroids(w_pos: Tensor, w_neg: Tensor) -> tuple[Tensor, Tensor]:
        # sum_t w v = sum_t (w q) h: a [B*R] x [B*R, H] product per row chunk, no [B,R,H] temporary.
        num = torch.zeros(2, H, dtype=dtype, device=dev)  # [2, H]
        for sl, h in _row_chunks(hidden, dtype, chunk_bytes):
            num[0] += torch.einsum("br,brh->h", w_pos[sl] * q[sl], h)
            num[1] += torch.einsum("br,brh->h", w_neg[sl] * q[sl], h)
        den = torch.stack([w_pos.sum(), w_neg.sum()])  # [2]
        packed = _sum_across_ranks(torch.cat([num.flatten(), den]), stats)  # [2H + 2]
        num, den = packed[: 2 * H].view(2, H), packed[2 * H :].clamp(min=_EPS)
        return num[0] / den[0], num[1] / den[1]  # [H], [H]

    def margins(mu_pos: Tensor, mu_neg: Tensor) -> tuple[Tensor, Tensor]:
        # v.mu = q (h.mu): [B, R]
        h_mu = torch.zeros(2, *q.shape, dtype=dtype, device=dev)  # [2, B, R]
        for sl, h in _row_chunks(hidden, dtype, chunk_bytes):
            h_mu[:, sl] = torch.einsum("brh,sh->sbr", h, torch.stack([mu_pos, mu_neg]))
        v_mu_pos, v_mu_neg = q * h_mu[0], q * h_mu[1]  # [B, R]
        if within_side:  # -||v - mu_own||^2, own side only
            m_pos = -(v_sq - 2.0 * v_mu_pos + mu_pos.dot(mu_pos))  # [B, R]
            m_neg = -(v_sq - 2.0 * v_mu_neg + mu_neg.dot(mu_neg))  # [B, R]
            return m_pos, m_neg
        # ||v-mu_-||^2 - ||v-mu_+||^2 = 2 v.(mu_+ - mu_-) - (||mu_+||^2 - ||mu_-||^2)
        m_pos = 2.0 * (v_mu_pos - v_mu_neg) - (mu_pos.dot(mu_pos) - mu_neg.dot(mu_neg))  # [B, R]
        return m_pos, -m_pos

    def temperatures(m_pos: Tensor, m_neg: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        g_pos, g_neg = _pop_std(m_pos, pos_tok, stats), _pop_std(m_neg, neg_tok, stats)
        if within_side:  # centre the own-centroid score on its side mean (see delta_within_side)
            c_pos = _side_mean(m_pos, pos_tok, stats)
            c_neg = _side_mean(m_neg, neg_tok, stats)
        else:
            c_pos = c_neg = torch.zeros((), dtype=dtype, device=dev)
        return g_pos, g_neg, c_pos, c_neg

    mu_pos, mu_neg = centroids(a_pos, a_neg)
    m_pos, m_neg = margins(mu_pos, mu_neg)
    g_pos, g_neg, c_pos, c_neg = temperatures(m_pos, m_neg)
    for _ in range(K):
        alpha_pos = torch.sigmoid((m_pos - c_pos) / g_pos)  # [B, R]
        alpha_neg = torch.sigmoid((m_neg - c_neg) / g_neg)  # [B, R]
        new_mu = centroids(a_pos * alpha_pos * pos_tok, a_neg * alpha_neg * neg_tok)
        g_pos, g_neg, c_pos, c_neg = temperatures(m_pos, m_neg)  # reference: gamma of this round's margins
        mu_pos, mu_neg = new_mu
        m_pos, m_neg = margins(mu_pos, mu_neg)

    span = lambda_max - lambda_min
    lam_pos = lambda_min + span * torch.sigmoid((m_pos - c_pos) / g_pos)  # [B, R]
    lam_neg = lambda_min + span * torch.sigmoid((m_neg - c_neg) / g_neg)  # [B, R]
    zero_tok = mask - pos_tok - neg_tok  # [B, R] valid tokens of A = 0 responses
    lam = lam_pos * pos_tok + lam_neg * neg_tok + lambda_min * zero_tok  # [B, R]
    tot = _sum_across_ranks(torch.stack([mask.sum(), lam.sum()]), stats)  # [2]
    return lam * (tot[0] / tot[1].clamp(min=_EPS))  # [B, R]


def _side_mean(m: Tensor, sel: Tensor, stats: StatsMode) -> Tensor:
    """Mean of m over sel (all-reducible). m, sel: [B, R] -> []."""
    s, n = _sum_across_ranks(torch.stack([(m * sel).sum(), sel.sum()]), stats).unbind()
    return s / n.clamp(min=1.0)


def _hidden_or_raise(batch: "CreditBatch", name: str) -> Tensor:
    if batch.hidden is None:
        raise ValueError(f"{name} needs CreditBatch.hidden (put 'hidden' in the preset's needs)")
    return batch.hidden


@register("token_weights", reads={"old_logp", "hidden"}, cite="DelTA arXiv 2605.21467 §3, App. H")
def delta(
    batch: "CreditBatch",
    *,
    K: int,
    lambda_min: float,
    lambda_max: float,
    stats: StatsMode,
) -> Tensor:
    """DelTA token weights w = lambda~ [B, R] (arXiv 2605.21467 §3, eq. for J_DelTA; App. H).

    lambda = lambda_min + (lambda_max - lambda_min) sigma(m / gamma), m = ||v-mu_opp||^2 - ||v-mu_own||^2,
    v = (1 - p) h; self-normalised to mean 1 over valid tokens. Use on the pg term only (w * A).
    Fast path of :func:`delta_reference`; see the module docstring for the departures.
    """
    return delta_lambda(
        _hidden_or_raise(batch, "delta"), batch.old_logp, batch.response_mask, batch.advantages,
        K=K, lambda_min=lambda_min, lambda_max=lambda_max, stats=stats,
    )


@register("token_weights", reads={"old_logp", "hidden"}, cite="DelTA Table 2 ablation")
def delta_within_side(
    batch: "CreditBatch",
    *,
    K: int,
    lambda_min: float,
    lambda_max: float,
    stats: StatsMode,
) -> Tensor:
    """Ablation "within-side only" (DelTA Table 2): own-centroid closeness, no opposite-side contrast.

    Our precise definition (the paper's formula was not available): the score of a token of a response
    with A_i > 0 is s = -||v - mu_+||^2 (mirrored with mu_- for A_i < 0); it is centred and scaled on its
    side, alpha = sigma((s - mean_side s) / std_side s), and everything else is DelTA's: the same
    advantage-weighted centroids, the same K refinement rounds with the same gamma lag, the same
    lambda = lambda_min + (lambda_max - lambda_min) alpha, A = 0 rows at lambda_min and the same mean-1
    normalisation. Centring is needed because s <= 0 always (sigma(s/gamma) would stay below 1/2);
    in DelTA the opposite-side distance plays that role.
    """
    return delta_lambda(
        _hidden_or_raise(batch, "delta_within_side"), batch.old_logp, batch.response_mask, batch.advantages,
        K=K, lambda_min=lambda_min, lambda_max=lambda_max, stats=stats, within_side=True,
    )


# --------------------------------------------------------------------------------------------------
# Reference implementation: straight from the formulas (explicit [B,R,H] differences); tests only.
# --------------------------------------------------------------------------------------------------


def delta_reference(
    hidden: Tensor,
    old_logp: Tensor,
    mask: Tensor,
    advantages: Tensor,
    *,
    K: int,
    lambda_min: float,
    lambda_max: float,
) -> Tensor:
    """Slow, literal DelTA (local statistics), step by step as DelTA §3 and App. D-H. Same I/O as delta_lambda."""
    _check_knobs(K, lambda_min, lambda_max)
    B, R, H = hidden.shape
    v = (1.0 - old_logp.exp())[..., None] * hidden  # [B, R, H] gradient proxy
    sides = {+1: advantages > 0, -1: advantages < 0}  # [B] bool per side

    def centroid(sign: int, alpha: Tensor) -> Tensor:
        num, den = torch.zeros(H, dtype=v.dtype), torch.zeros((), dtype=v.dtype)
        for i in range(B):
            if not sides[sign][i]:
                continue
            for t in range(R):
                if mask[i, t] > 0:
                    w = abs(advantages[i]) * alpha[i, t]
                    num = num + w * v[i, t]
                    den = den + w
        return num / max(den, _EPS)

    def margin(mu: dict[int, Tensor]) -> Tensor:
        d_pos = ((v - mu[+1]) ** 2).sum(-1)  # [B, R]
        d_neg = ((v - mu[-1]) ** 2).sum(-1)  # [B, R]
        sign = torch.sign(advantages)[:, None]  # [B, 1]
        return torch.where(sign > 0, d_neg - d_pos, d_pos - d_neg)  # [B, R] own-side margin

    def gamma(m: Tensor) -> dict[int, Tensor]:
        out = {}
        for sign, rows in sides.items():
            vals = m[rows[:, None].expand(B, R) & (mask > 0)]
            var = vals.var(unbiased=False) if vals.numel() > 0 else torch.zeros((), dtype=m.dtype)
            out[sign] = torch.sqrt(torch.clamp(var, min=_EPS))
        return out

    def sig(m: Tensor, g: dict[int, Tensor]) -> Tensor:
        g_tok = torch.where(advantages > 0, g[+1], g[-1])[:, None]  # [B, 1]
        return torch.sigmoid(m / g_tok)  # [B, R]

    ones = torch.ones(B, R, dtype=v.dtype)
    mu = {+1: centroid(+1, ones), -1: centroid(-1, ones)}
    m = margin(mu)
    g = gamma(m)
    for _ in range(K):
        alpha = sig(m, g)
        mu_next = {+1: centroid(+1, alpha), -1: centroid(-1, alpha)}
        g = gamma(m)  # margins at the centroids used in this round
        mu = mu_next
        m = margin(mu)
    lam = lambda_min + (lambda_max - lambda_min) * sig(m, g)  # [B, R]
    lam = torch.where((advantages == 0)[:, None], torch.full_like(lam, lambda_min), lam) * mask
    return lam * (mask.sum() / lam.sum())
