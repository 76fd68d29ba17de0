"""Token-weight functions: the credit-assignment stage between advantage and surrogate.

Every function has the signature ``fn(batch: CreditBatch, **knobs) -> w[B, R]`` and is registered in
``TOKEN_WEIGHTS``. The loop calls the preset's function once per rollout batch, at theta_old, under
``torch.no_grad``; the weights are held fixed across mini-batches and epochs (DelTA §3, CF §3).
A preset says whether ``w`` multiplies the policy-gradient term only (equivalently: per-token
advantage w*A, as DelTA's ``weighted_adv``) or the whole per-token loss including the KL term (CF's
``per_token_loss * w``).

Modules: ``batch`` (the inputs), ``simple``, ``delta``, ``cf`` (the weights), ``rescoring`` (CF's
prefix-cached counterfactual forwards), ``gradsnr`` (effective credit and the per-step gradient SNR). The offline
studies of a checkpoint live in ``training.studies``; this package imports neither them nor the loop.

| name              | function                                    | paper / card (training/ALGORITHMS.md) |
|-------------------|---------------------------------------------|---------------------------------------|
| uniform           | ``training.credit.simple.uniform``          | GRPO / DAPO                           |
| delta             | ``training.credit.delta.delta``             | DelTA arXiv 2605.21467 §3, App. H     |
| delta_within_side | ``training.credit.delta.delta_within_side`` | DelTA Table 2 ablation                |
| cf                | ``training.credit.cf.cf`` (mode knob)       | CF arXiv 2602.09331, aligntune code   |
| forking_tokens    | ``training.credit.simple.forking_tokens``   | 80/20, arXiv 2506.01939               |
| random_weights    | ``training.credit.simple.random_weights``   | control                               |
| clip_cov          | ``training.credit.covariance.clip_cov``     | Clip-Cov arXiv 2505.22617 §4, verl    |

Token-level advantages (``TOKEN_ADVANTAGES``, ``fn(batch, **advantage_knobs) -> adv[B, R]``, replacing A_i in
the loss; module ``advantage``): ``otb`` (optimal token baseline, verl), ``ktae`` (KTAE) and ``gae`` (a learned
critic's GAE, ``training.critic``).

Per-token loss terms (``TOKEN_TERMS``, ``fn(batch, **terms_knobs) -> {"eps_low" | "eps_high" | "kl_beta": [B, R]}``,
replacing the preset's scalar clip bounds / KL coefficient token by token): ``kl_cov`` (KL-Cov).

A new token-weight method is one function here (registered below) plus one preset row (``training.presets``);
what it reads beyond log-probs and entropy it names in the preset's ``needs`` (phase 3 computes it once).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Callable, Mapping

from torch import Tensor

from training.credit.advantage import gae, ktae, otb
from training.credit.batch import CreditBatch, EditLogProbFn, LogProbFn
from training.credit.cf import cf
from training.credit.covariance import clip_cov, kl_cov
from training.credit.delta import delta, delta_within_side
from training.credit.simple import forking_tokens, random_weights, uniform

__all__ = ["OLD_FORWARD_READS", "TOKEN_ADVANTAGES", "TOKEN_TERMS", "TOKEN_WEIGHTS", "CreditBatch", "EditLogProbFn",
           "LogProbFn", "get_token_advantage_fn", "get_token_terms_fn", "get_token_weight_fn"]

TokenWeightFn = Callable[..., Tensor]
TOKEN_WEIGHTS: Mapping[str, TokenWeightFn] = MappingProxyType({
    "uniform": uniform,
    "delta": delta,
    "delta_within_side": delta_within_side,
    "cf": cf,
    "forking_tokens": forking_tokens,
    "random_weights": random_weights,
    "clip_cov": clip_cov,
})


OLD_FORWARD_READS: Mapping[str, frozenset[str]] = MappingProxyType({
    "uniform": frozenset(),
    "delta": frozenset({"old_logp", "hidden"}),
    "delta_within_side": frozenset({"old_logp", "hidden"}),
    "cf": frozenset(),  # re-scores through logp_fn (S(x) from old_logp only via the native loop's edit_logp_fn)
    "forking_tokens": frozenset({"entropy"}),
    "random_weights": frozenset(),
    "clip_cov": frozenset({"old_logp"}),
})
"""What each token-weight function reads of phase 3's outputs (``CreditBatch.old_logp``, ``entropy``, ``hidden``).
A backend whose loss needs no pi_old forward (TRL on-policy: ratio 1) runs that forward only for weights that read
it (``training.trl_backend.needs_old_forward``); ``tests/training/test_trl_backend.py`` checks the empty entries."""


def get_token_weight_fn(name: str) -> TokenWeightFn:
    """Look up a token-weight function by name; the error lists the valid ones."""
    try:
        return TOKEN_WEIGHTS[name]
    except KeyError:
        raise KeyError(f"unknown token-weight function {name!r}; valid: {sorted(TOKEN_WEIGHTS)}") from None


TOKEN_ADVANTAGES: Mapping[str, TokenWeightFn] = MappingProxyType({"otb": otb, "ktae": ktae, "gae": gae})


def get_token_advantage_fn(name: str) -> TokenWeightFn:
    """Look up a token-advantage function by name; the error lists the valid ones."""
    try:
        return TOKEN_ADVANTAGES[name]
    except KeyError:
        raise KeyError(f"unknown token-advantage function {name!r}; valid: {sorted(TOKEN_ADVANTAGES)}") from None


TokenTermsFn = Callable[..., Mapping[str, Tensor]]
TOKEN_TERMS: Mapping[str, TokenTermsFn] = MappingProxyType({"kl_cov": kl_cov})
TERM_NAMES: tuple[str, ...] = ("eps_low", "eps_high", "kl_beta")
"""The ``losses.per_token_loss`` arguments a token-terms function may give per token."""


def get_token_terms_fn(name: str) -> TokenTermsFn:
    """Look up a per-token loss-terms function by name; the error lists the valid ones."""
    try:
        return TOKEN_TERMS[name]
    except KeyError:
        raise KeyError(f"unknown token-terms function {name!r}; valid: {sorted(TOKEN_TERMS)}") from None
