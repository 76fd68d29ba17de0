"""Named algorithm presets: each is a composition of the pure stages in ``training.losses`` and
``training.credit``. The loop reads a preset; it never branches on an algorithm name.

A preset names registered functions (``training.registry``: outcome advantage, token weights, token-level
advantage, per-token loss terms, policy loss) and their knobs; what it reads, and so what phase 3 computes and
which backends run it, comes from the functions' declarations. The table of rows: ``python -m training.presets``;
paper §, code and tests per row: ``training/ALGORITHMS.md``.

Canonical DelTA and CF rows are built on the canonical ``dapo`` preset (both papers compare against DAPO); the
``*_paper`` presets are each paper's native baseline. Cards: ``training/ALGORITHMS.md``.

Numbers that are results-affecting live here with a paper citation, and can be overridden per
experiment through ``config.yaml`` (``algorithms.<name>.<field>``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

from common.config import ConfigError
from training import credit  # noqa: F401  (imports every registering module)
from training.credit.batch import POSITION_STATS
from training.losses import AggregationMode, KLEstimator, RatioLevel, TokenMeanNormaliser
from training.registry import BACKENDS, get

NEEDS: frozenset[str] = frozenset({"hidden", "kv", *POSITION_STATS})
"""What a preset may ask phase 3 (the old-log-prob forward) to compute, once, beside log-probs and entropy:
``hidden`` (LM-head input h, DelTA), ``kv`` (keys/values for CF's prefix-cached re-scoring) and the per-position
statistics of ``training.credit.batch.POSITION_STATS`` (``sum_pi_sq``, OTB)."""


@dataclass(frozen=True)
class Preset:
    """One RLVR algorithm as a composition of pure stages."""

    name: str
    scale_adv_by_std: bool
    """Divide the group-centred reward by the group std (GRPO) or not (Dr.GRPO)."""
    token_weights: str
    """A registered ``token_weights`` function (``training.registry``)."""
    eps_low: float
    eps_high: float
    dual_clip_c: float | None
    aggregation: AggregationMode
    kl_beta: float
    """Coefficient of the k3 KL penalty to the reference (SFT) policy; 0 disables it."""
    kl_clamp: float | None = None
    """None: unclamped k3 (DeepSeekMath, TRL, aligntune); 10.0: verl ``low_var_kl`` (``losses.kl_k3``)."""
    token_mean_normaliser: TokenMeanNormaliser = "mini_batch"
    """``token_mean``'s count: each mini-batch's own ("mini_batch"), verl / verl-DelTA per-micro-batch mean
    ("micro_batch"), or TRL's generation-batch tokens / mini-batches ("step_mean"); ``losses.token_mean_normaliser``."""
    outcome_advantage: str = "group"
    """A registered ``outcome_advantage`` ("group": GRPO z-score / Dr.GRPO; "w_reinforce")."""
    outcome_knobs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of the outcome-advantage function (e.g. W-REINFORCE's ``positive_weight``)."""
    token_advantage: str | None = None
    """Token-level advantage in ``training.credit.TOKEN_ADVANTAGES`` that replaces A_i in the loss (e.g. OTB, TEMPO)."""
    advantage_knobs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of the token-advantage function."""
    needs_override: tuple[str, ...] | None = None
    """None: phase 3 computes what the preset's functions declare they read (:attr:`needs`); a tuple: exactly
    that (CF's random / prior controls keep no keys/values: they re-score nothing)."""
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
    knobs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of the token-weight function, e.g. ``{"lambda_min": 0.8}``."""
    seed_offset: int = 0
    """Added to the run's seed for every training draw (init, prompts, rollouts). An A/A twin (``dapo_twin``)
    is its baseline trained on other seeds under the same seed ids, so the report pairs it with the baseline
    like any method and its evaluation keeps the shared sampler seed; it must come out not significant."""
    token_terms: str | None = None
    """Per-token loss terms in ``training.credit.TOKEN_TERMS`` (clip bounds, KL coefficient per token; KL-Cov)."""
    terms_knobs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of the token-terms function."""
    ratio_level: RatioLevel = "token"
    """Importance ratio of the surrogate (``losses.log_importance_ratio``): "token" (PPO), "sequence" (GSPO, TRL
    ``importance_sampling_level="sequence"``), "sequence_token" (GSPO-token, verl ``compute_policy_loss_gspo``)."""
    kl_estimator: KLEstimator = "k3"
    """Per-token KL penalty (``losses.KL_ESTIMATORS``): "k3" (DeepSeekMath) or "abs" (|log ratio|, KL-Cov)."""
    kl_reference: str = "ref"
    """What the KL penalty compares with: "ref" (the SFT reference model) or "old" (pi_old; KL-Cov, no model)."""
    critic: Mapping[str, Any] = field(default_factory=dict)
    """A learned critic (``training.critic``) if non-empty: its knobs gamma, lam_critic, value_clip, value_lr_scale;
    its values reach the credit functions as ``CreditBatch.stats["values"]`` (the ``gae`` token advantage)."""

    policy_loss: str = "ppo_clip"
    """A registered ``policy_loss`` (the surrogate and its clip statistic, ``losses.per_token_loss``)."""

    def __post_init__(self) -> None:
        if self.needs_override is not None:  # a set, kept JSON-able and ordered
            object.__setattr__(self, "needs_override", tuple(sorted(set(self.needs_override))))
            if unknown := sorted(set(self.needs_override) - NEEDS):
                raise KeyError(f"preset {self.name!r}: needs {unknown} unknown; valid: {sorted(NEEDS)}")
        self.functions()  # every named function is registered (the error lists the valid names)
        if self.kl_reference not in ("ref", "old"):
            raise KeyError(f"preset {self.name!r}: kl_reference {self.kl_reference!r}; valid: ['old', 'ref']")

    def functions(self) -> dict[str, Any]:
        """The registered methods this preset names, by kind (``training.registry.Method``)."""
        named = {"outcome_advantage": self.outcome_advantage, "token_weights": self.token_weights,
                 "token_advantage": self.token_advantage, "token_terms": self.token_terms,
                 "policy_loss": self.policy_loss}
        return {kind: get(kind, name) for kind, name in named.items() if name is not None}

    @property
    def reads(self) -> frozenset[str]:
        """What the preset's functions declare they read (``registry.READS``); a critic reads the LM-head input."""
        reads = set().union(*(m.reads for m in self.functions().values()))
        return frozenset(reads | ({"hidden"} if self.critic else set()))

    @property
    def needs(self) -> tuple[str, ...]:
        """What phase 3 computes once beside log-probs and entropy (``NEEDS``): "hidden" (``CreditBatch.hidden``,
        DelTA, a critic), "kv" (CF: the forward keeps its keys/values, so that ``credit.rescoring.edited_logp``
        runs only the edited suffixes), a ``POSITION_STATS`` name (``CreditBatch.stats``, OTB)."""
        if self.needs_override is not None:
            return self.needs_override
        return tuple(sorted(self.reads & NEEDS))

    def loss_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``losses.per_token_loss`` for this preset (one place for the loop and TRL)."""
        return {"eps_low": self.eps_low, "eps_high": self.eps_high, "dual_clip_c": self.dual_clip_c,
                "kl_beta": self.kl_beta, "weights_on_kl": self.weights_on_kl, "kl_clamp": self.kl_clamp,
                "ratio_level": self.ratio_level, "kl_estimator": self.kl_estimator, "policy_loss": self.policy_loss}

    @property
    def needs_ref_model(self) -> bool:
        """The KL term reads the reference (SFT) model's log-probs (phase 3 runs its forward)."""
        return self.kl_beta > 0 and self.kl_reference == "ref"

    def with_overrides(self, overrides: Mapping[str, Any]) -> "Preset":
        """Return a copy with fields (and ``knobs.<k>``) replaced; unknown fields raise, naming them."""
        fields = {f for f in self.__dataclass_fields__}
        top, knobs = {}, dict(self.knobs)
        nested = {"advantage_knobs": dict(self.advantage_knobs), "outcome_knobs": dict(self.outcome_knobs),
                  "terms_knobs": dict(self.terms_knobs), "critic": dict(self.critic)}
        for key, value in overrides.items():
            if key == "knobs":
                knobs.update(value)
            elif key in nested:
                nested[key].update(value)
            elif key in fields and key != "name":
                top[key] = value
            else:
                raise KeyError(f"preset {self.name!r}: unknown override {key!r}; valid: {sorted(fields)}")
        return replace(self, knobs=knobs, **nested, **top)


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
    # reference behaviours behind switches (training/ALGORITHMS.md, CF departures 12-15): our defaults
    "span_stop": "marker", "fallback": "batched", "cap_reasoning_end": False, "span_drop": "per_token",
    # exact speed-up: A_i = 0 rows run no counterfactual forward (needs kl_beta = 0 or weights off the KL)
    "skip_zero_advantage": True,
    "suffix_window": None,  # None: exact CF; W: the approximate bounded suffix window (CF departure 17)
    # the answer region starts where the answer checker states the answer (CF departure 18); "markers": reference
    "answer_marker": "checker",
}

# TRL loss_type="dapo" as aligntune runs it: symmetric eps 0.2 (no clip-higher), KL beta 0.005 (k3),
# mask_truncated_completions=True, no overlong shaping, no dynamic sampling, no dual clip.
# (TRL's group std uses eps 1e-4 in the denominator, ours 1e-6; irrelevant unless std ~ 0.)
_DAPO_CF_PAPER = replace(
    _DAPO, name="dapo_cf_paper", eps_high=0.2, dual_clip_c=None, kl_beta=0.005,
    overlong_shaping=False, mask_truncated=True, dynamic_sampling=False,
)
_DELTA = replace(_DAPO, name="delta", token_weights="delta", knobs=dict(_DELTA_KNOBS))
# CF's TRL code multiplies the whole per-token loss (pg + beta KL) by w.
_CF = replace(_DAPO, name="cf", token_weights="cf", weights_on_kl=True, knobs=dict(_CF_KNOBS))

_GSPO = replace(_DAPO, name="gspo", ratio_level="sequence", eps_low=3e-4, eps_high=4e-4, dual_clip_c=None,
                aggregation="seq_mean_token_mean")

PRESETS: Mapping[str, Preset] = MappingProxyType({
    "grpo": _GRPO,
    "dr_grpo": replace(_GRPO, name="dr_grpo", scale_adv_by_std=False, aggregation="seq_mean_token_sum_norm",
                       kl_beta=0.0),
    "dapo": _DAPO,
    # A/A twin: DAPO again on seeds disjoint from dapo's (seed id s trains with s + 1000); the empirical check
    # of the report's method test beside evaluation/report/calibrate.py's simulation
    "dapo_twin": replace(_DAPO, name="dapo_twin", seed_offset=1000),
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
    "cf_random": replace(_CF, name="cf_random", needs_override=(), knobs={**_CF_KNOBS, "mode": "random"}),
    # CF's structural prior alone: no spans, so every row takes CF's own no-span path (imp 0.5 everywhere,
    # = zero counterfactual drops), then the same damping / answer weight / EOS: a fidelity control
    "cf_prior": replace(_CF, name="cf_prior", needs_override=(), knobs={**_CF_KNOBS, "max_spans": 0}),
    # beta = 0.005 and w on pg + beta KL: an A_i = 0 row's weight scales its KL term, so no skipping
    "cf_paper": replace(_DAPO_CF_PAPER, name="cf_paper", token_weights="cf", weights_on_kl=True,
                        knobs={**_CF_KNOBS, "skip_zero_advantage": False}),
    "forking_tokens": replace(_DAPO, name="forking_tokens", token_weights="forking_tokens",
                              knobs={"top_quantile": 0.2}),  # arXiv 2506.01939: top 20 %
    # Optimal token baseline, arXiv 2602.07078; verl compute_optimal_token_baseline_advantage defaults
    "otb": replace(_DAPO, name="otb", token_advantage="otb",
                   advantage_knobs={"handle_zero_tail": True, "eps": 1e-8}),
    # KTAE (xiaolizh1/KTAE core_algos: ComputeKeyTokens(alpha=1, beta_ig=1, gamma_tf=1, top=1))
    "ktae": replace(_DAPO, name="ktae", token_advantage="ktae",
                    advantage_knobs={"alpha": 1.0, "beta_ig": 1.0, "gamma_tf": 1.0, "top": 1.0}),
    # W-REINFORCE, arXiv 2506.01347 (RLVR-Decomposed run_*_psr_nsr.sh: positive_advantage_weight=0.1);
    # its 0/1 score test needs the unshaped reward
    "w_reinforce": replace(_DAPO, name="w_reinforce", outcome_advantage="w_reinforce", overlong_shaping=False,
                           outcome_knobs={"positive_weight": 0.1}),
    # Clip-Cov / KL-Cov, arXiv 2505.22617 §4 (verl core_algos defaults: ratios 2e-4, cov bounds (1, 5), coef 1);
    # Clip-Cov = a preset + one token-weight function; KL-Cov's surrogate is unclipped (verl pg_losses1)
    "clip_cov": replace(_DAPO, name="clip_cov", token_weights="clip_cov",
                        knobs={"clip_ratio": 2e-4, "cov_lb": 1.0, "cov_ub": 5.0}),
    "kl_cov": replace(_DAPO, name="kl_cov", eps_low=math.inf, eps_high=math.inf, dual_clip_c=None,
                      token_terms="kl_cov", terms_knobs={"kl_cov_ratio": 2e-4, "ppo_kl_coef": 1.0},
                      kl_estimator="abs", kl_reference="old"),
    # GSPO, arXiv 2507.18071 §4-5: sequence ratio, eps 3e-4 / 4e-4, sequence-mean loss (TRL loss_type="grpo")
    "gspo": _GSPO,
    "gspo_token": replace(_GSPO, name="gspo_token", ratio_level="sequence_token"),  # verl compute_policy_loss_gspo
    # CISPO, MiniMax-M1 arXiv 2506.13585 §3.1: the IS weight clipped and detached, no lower bound (eps_low 1:
    # "we only tuned eps_high"), eps_max = 1 + 4 = 5 (ScaleRL arXiv 2510.13786 via TRL's GRPOConfig docs); DAPO's rest
    "cispo": replace(_DAPO, name="cispo", policy_loss="cispo", eps_low=1.0, eps_high=4.0, dual_clip_c=None),
    # Archer, arXiv 2507.15778 (ArcherCodeR run_archer_qwen2.5_1.5b_code.sh): per-response entropy quantile .8,
    # clip .2/.2 on low- and .5/.5 on high-entropy tokens, KL .001 (low_var_kl) on low-entropy tokens only, no
    # overlong buffer; DAPO's token mean and dual clip 10
    "archer": replace(_DAPO, name="archer", eps_high=0.2, kl_beta=0.001, kl_clamp=10.0, overlong_shaping=False,
                      token_terms="archer", terms_knobs={"entropy_quantile": 0.8, "low_eps_low": 0.2,
                                                     "low_eps_high": 0.2, "high_eps_low": 0.5, "high_eps_high": 0.5,
                                                     "kl_coef": 0.001, "high_kl_scale": 0.0}),
    # Entropy advantage, Cheng et al. arXiv 2506.14758: alpha 0.4, kappa 2 (the paper's GRPO setting); DAPO's rest
    "entropy_adv": replace(_DAPO, name="entropy_adv", token_advantage="entropy_advantage",
                           advantage_knobs={"alpha": 0.4, "kappa": 2.0}),
    # TEMPO, arXiv 2509.18314 (fatebreaker/tempo compute_tempo_outcome_advantage): A_i plus the prefix-tree TD
    # step at branching tokens; no knobs. The authors' recipe is clip 0.2/0.28, no KL, token mean: DAPO's rest
    "tempo": replace(_DAPO, name="tempo", token_advantage="tempo"),
    # PPO with a learned critic as VAPO sets it (arXiv 2504.05118 §3): decoupled GAE, lambda_critic 1,
    # length-adaptive lambda_policy (alpha 0.05), gamma 1, clip-higher, token-level loss; value LR 2x the policy's
    "ppo_critic": replace(_DAPO, name="ppo_critic", token_advantage="gae",
                          advantage_knobs={"gamma": 1.0, "lam_policy": 0.95, "lam_alpha": 0.05},
                          critic={"gamma": 1.0, "lam_critic": 1.0, "value_clip": 0.5, "value_lr_scale": 2.0}),
})


def get_preset(name: str, overrides: Mapping[str, Any] | None = None) -> Preset:
    """Look up a preset by name and apply overrides; the error lists valid names."""
    if name not in PRESETS:
        raise KeyError(f"unknown algorithm {name!r}; valid: {sorted(PRESETS)}")
    preset = PRESETS[name]
    return preset.with_overrides(overrides) if overrides else preset


def lacking(preset: Preset, backend: str) -> list[str]:
    """What of ``preset`` ``backend`` cannot run: the functions that do not declare it (``registry.register(
    backends=...)``) and, for TRL, dynamic sampling, a learned critic or a KL to pi_old (not carried by TRL)."""
    out = [f"{kind} {m.name!r}" for kind, m in preset.functions().items() if backend not in m.backends]
    if backend == "trl":
        out += [what for what, on in (("dynamic sampling", preset.dynamic_sampling), ("a learned critic",
                bool(preset.critic)), ("a KL to pi_old", preset.kl_reference != "ref")) if on]
    return out


def supported(backend: str) -> list[str]:
    """The presets ``backend`` runs (derived from the registry, as test and bench lists are)."""
    return [name for name, p in PRESETS.items() if not lacking(p, backend)]


def refusal(preset: Preset, backend: str) -> str | None:
    """Why ``backend`` cannot run ``preset``, in one line, or None."""
    if backend not in BACKENDS:
        return f"unknown backend {backend!r}; valid: {list(BACKENDS)}"
    if missing := lacking(preset, backend):
        return (f"backend {backend!r} cannot run preset {preset.name!r} ({', '.join(missing)}); use backend "
                "'native' (`python -m training.presets` lists the backends of every preset)")
    return None


def distinct(names: list[str] | None = None, *, loss_shape: bool = False) -> list[str]:
    """One preset per distinct composition of registered functions, ratio level and critic (the first in
    ``PRESETS`` order): the bench's default rows, every method once. ``loss_shape`` also tells apart the
    aggregation, dual clip, KL and the weight's placement (the TRL adapter's equivalence tests)."""
    seen, out = set(), []
    for name in names or list(PRESETS):
        p = PRESETS[name]
        key = (tuple((k, m.name) for k, m in p.functions().items()), p.ratio_level, bool(p.critic))
        if loss_shape:
            key += (p.aggregation, p.dual_clip_c is None, p.kl_beta > 0, p.weights_on_kl)
        if key not in seen:
            seen.add(key)
            out.append(name)
    return out


def check_methods(data: Mapping[str, Any]) -> None:
    """Every ``methods`` entry names a preset whose ``algorithms.<name>`` overrides are valid knobs, and the
    configured ``backend`` runs it (run by the workflow at DAG time, so a typo or an unsupported pair fails
    before any job starts)."""
    for method in data["methods"]:
        try:
            preset = get_preset(method, data["algorithms"].get(method))
        except KeyError as exc:
            raise ConfigError(f"config key 'methods': {exc.args[0]}") from None
        if why := refusal(preset, data.get("backend", "native")):
            raise ConfigError(f"config key 'methods': {why}")


def table() -> str:
    """The preset rows (markdown), from the presets and the registry's declarations."""
    rows = ["| preset | functions | clip, dual c | aggregation | KL | phase-3 needs | backends |", "|---" * 7 + "|"]
    for name, p in PRESETS.items():
        fns = ", ".join(f"{m.name}" for k, m in p.functions().items() if (k, m.name) not in (
            ("outcome_advantage", "group"), ("token_weights", "uniform"), ("policy_loss", "ppo_clip")))
        extra = [f"ratio {p.ratio_level}"] * (p.ratio_level != "token") + ["critic"] * bool(p.critic)
        rows.append(f"| {name} | {', '.join(filter(None, [fns, *extra])) or 'uniform'} | {p.eps_low:g}/{p.eps_high:g}, "
                    f"{p.dual_clip_c} | {p.aggregation} | {p.kl_beta:g} {p.kl_estimator}/{p.kl_reference} | "
                    f"{', '.join(p.needs) or '-'} | {', '.join(b for b in BACKENDS if not lacking(p, b))} |")
    return "\n".join(rows)


if __name__ == "__main__":  # the preset rows and the registered functions they name
    from training import registry

    print(table() + "\n\n" + registry.table())
