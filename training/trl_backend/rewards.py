"""Backend ``trl``: the reward functions TRL calls (the native checker, DAPO's overlong penalty) and the
per-completion log the metrics read."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from evaluation.grading import reward
from training import losses
from training.phases import REWARD_WORKERS
from training.presets import Preset


@dataclass
class RewardLog:
    """Per-completion outcomes of the current generation batch (local process), read by the metrics."""

    correct: list[float] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    truncated: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def reset(self) -> None:
        self.correct, self.reward, self.lengths, self.truncated, self.seconds = [], [], [], [], 0.0


def make_reward_funcs(preset: Preset, *, max_new_tokens: int, timeout_s: float, log: RewardLog,
                      stop_ids: frozenset[int] = frozenset(),
                      reward_fn: Callable[..., float] | None = None) -> list[Callable[..., list[float]]]:
    """TRL reward functions: correctness (the native checker) and, if the preset shapes, DAPO's overlong penalty.

    ``stop_ids`` (eos, pad): a completion not ending in one is truncated (TRL's test).
    """

    def correct(prompts, completions, completion_ids, answer, **_: Any) -> list[float]:
        t0 = time.perf_counter()
        if reward_fn is None:  # the native checker, the batch through its worker pool, as wide as the native loop's
            out = reward(list(completions), list(answer), timeout_s=timeout_s, workers=REWARD_WORKERS)
        else:
            out = [reward_fn(c, a, timeout_s=timeout_s) for c, a in zip(completions, answer)]
        log.correct.extend(out)
        log.reward.extend(out)
        log.lengths.extend(len(ids) for ids in completion_ids)
        log.truncated.extend(int(not ids or ids[-1] not in stop_ids) for ids in completion_ids)
        log.seconds += time.perf_counter() - t0
        return out

    funcs = [correct]
    if preset.overlong_shaping:  # DAPO §3.4, L_max = max_new_tokens, L_cache = overlong_cache_frac * L_max
        cache = max(1, int(round(preset.overlong_cache_frac * max_new_tokens)))

        def overlong(prompts, completions, completion_ids, **_: Any) -> list[float]:
            lengths = torch.tensor([len(ids) for ids in completion_ids])
            pen = losses.overlong_penalty(lengths, max_len=max_new_tokens, cache_len=cache).tolist()
            n = len(pen)
            log.reward[-n:] = [r + p for r, p in zip(log.reward[-n:], pen)]
            return pen

        funcs.append(overlong)
    return funcs
