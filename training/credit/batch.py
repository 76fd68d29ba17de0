"""``CreditBatch``: everything a token-weight function may read, built once per rollout batch by the loop.

Tensor layout (see ``training.losses``): ``R`` response positions, right padded, ``response_mask``
marks real response tokens. ``hidden[:, j]`` is the input of the LM head at the position that
predicts response token ``j`` (the DelTA gradient proxy's ``h``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

import torch
from torch import Tensor

# (prompt_ids [B,P], prompt_mask [B,P], response_ids [B,R], response_mask [B,R]) -> logp [B,R], no grad,
# under the current policy; used by counterfactual methods that re-score edited responses.
LogProbFn = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]
# (rows [n] batch rows, edited response ids [n,R], first_edit [n], *, score_from [n] | None) -> logp [n,R],
# no grad, current policy: the same numbers as LogProbFn on the edited rows at positions >= score_from,
# computed from each row's unedited prefix cache (training.credit.rescoring.edited_logp). Optional; CF falls
# back to LogProbFn without it.
EditLogProbFn = Callable[[Tensor, Tensor, Tensor], Tensor]


def sum_pi_sq(logp_all: Tensor) -> Tensor:
    """sum_v pi_v^2 [B, R] at each response position (OTB's path-variance proxy, arXiv 2602.07078)."""
    return logp_all.mul(2.0).exp().sum(-1)


POSITION_STATS: Mapping[str, Callable[[Tensor], Tensor]] = MappingProxyType({"sum_pi_sq": sum_pi_sq})
"""Per-position statistics of pi_old, ``fn(log_softmax [B, R, V]) -> [B, R]``: phase 3 computes those a preset
names in ``Preset.needs`` (no grad, in its one forward) and credit functions read ``CreditBatch.stats[name]``."""


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
    edit_logp_fn: EditLogProbFn | None = None  # prefix-cached re-scoring of edited rows (faster logp_fn)
    rewards: Tensor | None = None  # [B] shaped reward of each response (OTB's return, KTAE's correct/wrong split)
    stats: Mapping[str, Tensor] = field(default_factory=dict)  # POSITION_STATS the preset needs, [B, R] each
