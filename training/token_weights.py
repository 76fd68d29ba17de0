"""Token-weight functions: the credit-assignment stage between advantage and surrogate.

Every function has the signature ``fn(batch: CreditBatch, **knobs) -> w[B, R]`` and is registered in
``TOKEN_WEIGHTS``. The loop calls the preset's function once per rollout batch, at theta_old, under
``torch.no_grad``; the weights are held fixed across mini-batches and epochs (DelTA §3, CF §3).
A preset says whether ``w`` multiplies the policy-gradient term only (equivalently: per-token
advantage w*A, as DelTA's ``weighted_adv``) or the whole per-token loss including the KL term (CF's
``per_token_loss * w``).

Tensor layout (see ``training.losses``): ``R`` response positions, right padded, ``response_mask``
marks real response tokens. ``hidden[:, j]`` is the input of the LM head at the position that
predicts response token ``j`` (the DelTA gradient proxy's ``h``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch
from torch import Tensor

# (prompt_ids [B,P], prompt_mask [B,P], response_ids [B,R], response_mask [B,R]) -> logp [B,R], no grad,
# under the current policy; used by counterfactual methods that re-score edited responses.
LogProbFn = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]


@dataclass(frozen=True)
class CreditBatch:
    """Everything a token-weight function may read, computed once per rollout batch by the loop."""

    prompt_ids: Tensor  # [B, P] left padded
    prompt_mask: Tensor  # [B, P] 1 on real prompt tokens
    response_ids: Tensor  # [B, R] right padded
    response_mask: Tensor  # [B, R] float, 1 on real response tokens
    old_logp: Tensor  # [B, R] log pi_old(response_j | ...)
    entropy: Tensor  # [B, R] entropy of pi_old at each response position
    advantages: Tensor  # [B] sequence advantage
    group_ids: Tensor  # [B] prompt group of each response
    hidden: Tensor | None  # [B, R, H] LM-head input (only if the preset asks for it)
    pad_token_id: int
    tokenizer: Any  # a transformers tokenizer (decode / offsets for span detection)
    logp_fn: LogProbFn | None  # re-score edited responses under the current policy
    generator: torch.Generator  # seeded RNG for random ablations


def uniform(batch: CreditBatch) -> Tensor:
    """w = 1 on every response token: plain GRPO / DAPO."""
    return batch.response_mask.clone()


TokenWeightFn = Callable[..., Tensor]
TOKEN_WEIGHTS: Mapping[str, TokenWeightFn] = {
    "uniform": uniform,
}


def get_token_weight_fn(name: str) -> TokenWeightFn:
    """Look up a token-weight function by name; the error lists the valid ones."""
    try:
        return TOKEN_WEIGHTS[name]
    except KeyError:
        raise KeyError(f"unknown token-weight function {name!r}; valid: {sorted(TOKEN_WEIGHTS)}") from None
