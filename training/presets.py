"""Named algorithm presets: each is a composition of the pure stages in ``training.losses`` and
``training.token_weights``. The loop reads a preset; it never branches on an algorithm name.

| preset | advantage            | token weights | surrogate clip (low/high, dual c) | aggregation         | KL k3 | paper |
|--------|----------------------|---------------|-----------------------------------|---------------------|-------|-------|
| grpo   | group z-score        | uniform       | 0.2 / 0.2                         | seq_mean_token_mean | 0.04  | DeepSeekMath eq. 3 |
| dr_grpo| group mean-centred   | uniform       | 0.2 / 0.2                         | seq_mean_token_sum_norm | 0 | Dr.GRPO §3.2 |
| dapo   | group z-score        | uniform       | 0.2 / 0.28, c=10                  | token_mean          | 0     | DAPO §3 (+ overlong shaping) |

Numbers that are results-affecting live here with a paper citation, and can be overridden per
experiment through ``config.yaml`` (``algorithms.<name>.<field>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from training.losses import AggregationMode


@dataclass(frozen=True)
class Preset:
    """One RLVR algorithm as a composition of pure stages."""

    name: str
    scale_adv_by_std: bool
    """Divide the group-centred reward by the group std (GRPO) or not (Dr.GRPO)."""
    token_weights: str
    """Name in ``training.token_weights.TOKEN_WEIGHTS``."""
    eps_low: float
    eps_high: float
    dual_clip_c: float | None
    aggregation: AggregationMode
    kl_beta: float
    """Coefficient of the k3 KL penalty to the reference (SFT) policy; 0 disables it."""
    weights_on_kl: bool = False
    """If True the token weight multiplies the whole per-token loss (pg + beta*KL), as CF's TRL code."""
    overlong_shaping: bool = False
    """DAPO soft overlong punishment on the reward (L_max = max_new_tokens, L_cache below)."""
    overlong_cache_frac: float = 0.2
    """L_cache as a fraction of L_max (DAPO: 4096 / 20480 = 0.2)."""
    mask_truncated: bool = False
    """Drop truncated completions from the loss (overlong filtering; TRL mask_truncated_completions)."""
    dynamic_sampling: bool = False
    """DAPO §3.2: drop groups whose rewards all agree (zero advantage)."""
    needs_hidden: bool = False
    """The token-weight function reads ``CreditBatch.hidden`` (captured in the old-log-prob forward)."""
    knobs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of the token-weight function, e.g. ``{"lambda_min": 0.8}``."""

    def with_overrides(self, overrides: Mapping[str, Any]) -> "Preset":
        """Return a copy with fields (and ``knobs.<k>``) replaced; unknown fields raise, naming them."""
        fields = {f for f in self.__dataclass_fields__}
        top, knobs = {}, dict(self.knobs)
        for key, value in overrides.items():
            if key == "knobs":
                knobs.update(value)
            elif key in fields and key != "name":
                top[key] = value
            else:
                raise KeyError(f"preset {self.name!r}: unknown override {key!r}; valid: {sorted(fields)}")
        return replace(self, knobs=knobs, **top)


_GRPO = Preset(
    name="grpo", scale_adv_by_std=True, token_weights="uniform", eps_low=0.2, eps_high=0.2,
    dual_clip_c=None, aggregation="seq_mean_token_mean", kl_beta=0.04,  # DeepSeekMath §4.2 beta=0.04
)
_DAPO = Preset(
    name="dapo", scale_adv_by_std=True, token_weights="uniform", eps_low=0.2, eps_high=0.28,  # DAPO §3.1
    dual_clip_c=10.0, aggregation="token_mean", kl_beta=0.0,  # DAPO §3.3 token-level loss, no KL
    overlong_shaping=True, dynamic_sampling=False,  # dynamic sampling off, as the DelTA paper's baselines
)

PRESETS: Mapping[str, Preset] = {
    "grpo": _GRPO,
    "dr_grpo": replace(_GRPO, name="dr_grpo", scale_adv_by_std=False, aggregation="seq_mean_token_sum_norm",
                       kl_beta=0.0),
    "dapo": _DAPO,
}


def get_preset(name: str, overrides: Mapping[str, Any] | None = None) -> Preset:
    """Look up a preset by name and apply overrides; the error lists valid names."""
    if name not in PRESETS:
        raise KeyError(f"unknown algorithm {name!r}; valid: {sorted(PRESETS)}")
    preset = PRESETS[name]
    return preset.with_overrides(overrides) if overrides else preset
