"""Named algorithm presets: each is a composition of the pure stages in ``training.losses`` and
``training.credit``. The loop reads a preset; it never branches on an algorithm name.

Advantage is the group z-score everywhere except ``dr_grpo`` (group-centred only).

| preset            | token weights (knobs)                   | clip, dual c | aggregation  | KL k3 | w*KL |
|-------------------|-----------------------------------------|--------------|--------------|-------|------|
| grpo              | uniform                                 | .2/.2        | seq_mean_tm  | 0.04  | -    |
| dr_grpo           | uniform                                 | .2/.2        | seq_sum_norm | 0     | -    |
| dapo              | uniform (+overlong shaping)             | .2/.28, c=10 | token_mean   | 0     | -    |
| dapo_delta_paper  | = dapo, dynamic sampling off (named)    | .2/.28, c=10 | token_mean   | 0     | -    |
| dapo_cf_paper     | uniform, truncated masked, no shaping   | .2/.2        | token_mean   | 0.005 | -    |
| delta             | delta K=1, lambda .8-1.2, local stats   | = dapo       | token_mean   | 0     | no   |
| delta_within_side | delta_within_side (as delta)            | = dapo       | token_mean   | 0     | no   |
| delta_random      | random_weights U(.8,1.2), mean 1        | = dapo       | token_mean   | 0     | no   |
| cf                | cf boost 4, w_min .5, ans 1.5, no cons. | = dapo       | token_mean   | 0     | yes  |
| cf_conserve       | cf, conserve=True (row mean 1)          | = dapo       | token_mean   | 0     | yes  |
| cf_inverted       | cf, mode=inverted                       | = dapo       | token_mean   | 0     | yes  |
| cf_random         | cf, mode=random                         | = dapo       | token_mean   | 0     | yes  |
| cf_paper          | cf (as cf) on dapo_cf_paper             | .2/.2        | token_mean   | 0.005 | yes  |
| forking_tokens    | forking_tokens top_quantile=.2          | = dapo       | token_mean   | 0     | no   |

(seq_mean_tm = seq_mean_token_mean, seq_sum_norm = seq_mean_token_sum_norm; "w*KL": the token weight
multiplies pg + beta KL instead of pg only.) Paper §, code and tests per row: ``training/ALGORITHMS.md``.

Canonical DelTA and CF rows are built on the canonical ``dapo`` preset (algorithms.md §3.4); the
``*_paper`` presets are each paper's native baseline. Cards: ``training/ALGORITHMS.md``.

Numbers that are results-affecting live here with a paper citation, and can be overridden per
experiment through ``config.yaml`` (``algorithms.<name>.<field>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

from training.losses import AggregationMode


@dataclass(frozen=True)
class Preset:
    """One RLVR algorithm as a composition of pure stages."""

    name: str
    scale_adv_by_std: bool
    """Divide the group-centred reward by the group std (GRPO) or not (Dr.GRPO)."""
    token_weights: str
    """Name in ``training.credit.TOKEN_WEIGHTS``."""
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
    needs_kv: bool = False
    """The token-weight function re-scores edited responses (CF): the old-log-prob forward keeps its keys and
    values, so that ``training.credit.rescoring.edited_logp`` runs only the edited suffixes."""
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

_DELTA_KNOBS = {"K": 1, "lambda_min": 0.8, "lambda_max": 1.2, "stats": "local"}  # run_DelTA.sh
_CF_KNOBS = {  # aligntune configs/qwen25_3b_gsm8k_*.yaml
    "boost": 4.0, "min_weight": 0.5, "answer_weight": 1.5, "max_spans": 10, "conserve": False,
    "mode": "counterfactual",
}

# TRL loss_type="dapo" as aligntune runs it: symmetric eps 0.2 (no clip-higher), KL beta 0.005 (k3),
# mask_truncated_completions=True, no overlong shaping, no dynamic sampling, no dual clip.
# (TRL's group std uses eps 1e-4 in the denominator, ours 1e-6; irrelevant unless std ~ 0.)
_DAPO_CF_PAPER = replace(
    _DAPO, name="dapo_cf_paper", eps_high=0.2, dual_clip_c=None, kl_beta=0.005,
    overlong_shaping=False, mask_truncated=True, dynamic_sampling=False,
)
_DELTA = replace(_DAPO, name="delta", token_weights="delta", needs_hidden=True, knobs=dict(_DELTA_KNOBS))
# CF's TRL code multiplies the whole per-token loss (pg + beta KL) by w.
_CF = replace(_DAPO, name="cf", token_weights="cf", weights_on_kl=True, needs_kv=True, knobs=dict(_CF_KNOBS))

PRESETS: Mapping[str, Preset] = MappingProxyType({
    "grpo": _GRPO,
    "dr_grpo": replace(_GRPO, name="dr_grpo", scale_adv_by_std=False, aggregation="seq_mean_token_sum_norm",
                       kl_beta=0.0),
    "dapo": _DAPO,
    # DelTA's baseline: DAPO with dynamic sampling off (run_DelTA.sh "w/o Dynamic Sampling") = our dapo.
    "dapo_delta_paper": replace(_DAPO, name="dapo_delta_paper", dynamic_sampling=False),
    "dapo_cf_paper": _DAPO_CF_PAPER,
    "delta": _DELTA,
    "delta_within_side": replace(_DELTA, name="delta_within_side", token_weights="delta_within_side"),
    "delta_random": replace(_DAPO, name="delta_random", token_weights="random_weights",
                            knobs={"low": 0.8, "high": 1.2, "normalise": True}),
    "cf": _CF,
    "cf_conserve": replace(_CF, name="cf_conserve", knobs={**_CF_KNOBS, "conserve": True}),
    "cf_inverted": replace(_CF, name="cf_inverted", knobs={**_CF_KNOBS, "mode": "inverted"}),
    "cf_random": replace(_CF, name="cf_random", needs_kv=False, knobs={**_CF_KNOBS, "mode": "random"}),
    "cf_paper": replace(_DAPO_CF_PAPER, name="cf_paper", token_weights="cf", weights_on_kl=True, needs_kv=True,
                        knobs=dict(_CF_KNOBS)),
    "forking_tokens": replace(_DAPO, name="forking_tokens", token_weights="forking_tokens",
                              knobs={"top_quantile": 0.2}),  # arXiv 2506.01939: top 20 %
})


def get_preset(name: str, overrides: Mapping[str, Any] | None = None) -> Preset:
    """Look up a preset by name and apply overrides; the error lists valid names."""
    if name not in PRESETS:
        raise KeyError(f"unknown algorithm {name!r}; valid: {sorted(PRESETS)}")
    preset = PRESETS[name]
    return preset.with_overrides(overrides) if overrides else preset


def check_methods(data: Mapping[str, Any], error: type[Exception] = ValueError) -> None:
    """Every ``methods`` entry names a preset whose ``algorithms.<name>`` overrides are valid knobs."""
    for method in data["methods"]:
        try:
            get_preset(method, data["algorithms"].get(method))
        except KeyError as exc:
            raise error(f"config key 'methods': {exc.args[0]}") from None
