"""Credit assignment: the stage between the outcome advantage and the surrogate, token by token.

Three kinds of registered function (``training.registry``), each computed once per rollout batch at theta_old
under ``torch.no_grad`` and held fixed across mini-batches and epochs (DelTA §3, CF §3):

- token weights (``TOKEN_WEIGHTS``, ``fn(batch: CreditBatch, **knobs) -> w[B, R]``); a preset says whether
  ``w`` multiplies the policy-gradient term only (equivalently: per-token advantage w*A, as DelTA's
  ``weighted_adv``) or the whole per-token loss including the KL term (CF's ``per_token_loss * w``);
- token-level advantages (``TOKEN_ADVANTAGES``, ``fn(batch, **advantage_knobs) -> adv[B, R]``), replacing A_i in
  the loss;
- per-token loss terms (``TOKEN_TERMS``, ``fn(batch, **terms_knobs) -> {"eps_low" | "eps_high" | "kl_beta":
  [B, R]}``), replacing the preset's scalar clip bounds / KL coefficient token by token.

Modules (each method module's docstring names the functions it registers; ``tests/test_drift.py`` checks both
lists): ``batch`` (the inputs), ``simple`` (weights that need no model), ``delta``, ``cf`` (the weights),
``rescoring`` (CF's prefix-cached counterfactual forwards), ``covariance`` (Clip-Cov, KL-Cov), ``entropy``
(entropy-aware terms and advantages), ``advantage`` (token advantages from rollout statistics or a critic),
``tree`` (prefix-tree credit), ``gradsnr`` (effective credit and the per-step gradient SNR). The offline studies
of a checkpoint live in ``training.studies``; this package imports neither them nor the loop.

The tables of registered functions, their papers and the presets that name them: ``python -m training.presets``
(derived from the registry). A new method is one decorated function in a module of this package (found without
an import edit) plus one preset row (``training.presets``); what it reads beyond log-probs it declares in
``register(reads=...)``.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, Mapping

from torch import Tensor

from training.credit.batch import CreditBatch, EditLogProbFn, LogProbFn
from training.registry import functions, get, methods

__all__ = ["OLD_FORWARD_READS", "TOKEN_ADVANTAGES", "TOKEN_TERMS", "TOKEN_WEIGHTS", "CreditBatch", "EditLogProbFn",
           "LogProbFn", "get_token_advantage_fn", "get_token_terms_fn", "get_token_weight_fn"]

TokenWeightFn = Callable[..., Tensor]
TokenTermsFn = Callable[..., Mapping[str, Tensor]]
TERM_NAMES: tuple[str, ...] = ("eps_low", "eps_high", "kl_beta")
"""The ``losses.per_token_loss`` arguments a token-terms function may give per token."""


for _info in pkgutil.iter_modules(__path__):  # every method module registers on import (no list to keep)
    importlib.import_module(f"{__name__}.{_info.name}")

TOKEN_WEIGHTS: Mapping[str, TokenWeightFn] = functions("token_weights")
TOKEN_ADVANTAGES: Mapping[str, TokenWeightFn] = functions("token_advantage")
TOKEN_TERMS: Mapping[str, TokenTermsFn] = functions("token_terms")
OLD_FORWARD_READS: Mapping[str, frozenset[str]] = {n: m.reads for n, m in methods("token_weights").items()}
"""What each token-weight function reads (``registry.register(reads=...)``; ``trl_backend.needs_old_forward``)."""


def get_token_weight_fn(name: str) -> TokenWeightFn:
    """Look up a token-weight function by name; the error lists the valid ones."""
    return get("token_weights", name).fn


def get_token_advantage_fn(name: str) -> TokenWeightFn:
    """Look up a token-advantage function by name; the error lists the valid ones."""
    return get("token_advantage", name).fn


def get_token_terms_fn(name: str) -> TokenTermsFn:
    """Look up a per-token loss-terms function by name; the error lists the valid ones."""
    return get("token_terms", name).fn
