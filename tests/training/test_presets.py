"""Presets are data: every preset resolves to a registered token-weight function with valid knobs."""

from __future__ import annotations

import dataclasses
import inspect
import json
from pathlib import Path

import pytest
import yaml

from training.credit import TOKEN_ADVANTAGES, TOKEN_WEIGHTS
from training.losses import AGGREGATION_MODES, TOKEN_MEAN_NORMALISERS
from training.presets import PRESETS, get_preset
from training.registry import functions

OUTCOME_ADVANTAGES = functions("outcome_advantage")
EXPECTED = set(PRESETS)  # derived: every row must carry a card and run in the ablation experiment (below)
REPO = Path(__file__).resolve().parents[2]
SURROGATE_FIELDS = ("scale_adv_by_std", "eps_low", "eps_high", "dual_clip_c", "aggregation", "kl_beta",
                    "overlong_shaping", "overlong_cache_frac", "mask_truncated", "dynamic_sampling")


def test_preset_names():
    for name, preset in PRESETS.items():
        assert preset.name == name


def test_every_preset_has_a_card_and_an_ablation_run():
    """A row added through the registry cannot skip its card (training/ALGORITHMS.md names it in backticks) or
    the ablation experiment (config/experiments/ablations.yaml runs every preset)."""
    cards = (REPO / "training" / "ALGORITHMS.md").read_text(encoding="utf-8")
    ablations = yaml.safe_load((REPO / "config" / "experiments" / "ablations.yaml").read_text())["methods"]
    assert not [n for n in PRESETS if f"`{n}`" not in cards], "presets without a card"
    assert sorted(ablations) == sorted(PRESETS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_resolves_and_knobs_bind(name):
    preset = PRESETS[name]
    assert preset.token_weights in TOKEN_WEIGHTS
    assert preset.aggregation in AGGREGATION_MODES
    fn = TOKEN_WEIGHTS[preset.token_weights]
    inspect.signature(fn).bind(object(), **preset.knobs)  # raises on an unknown (or missing) knob
    assert preset.outcome_advantage in OUTCOME_ADVANTAGES
    assert preset.token_mean_normaliser in TOKEN_MEAN_NORMALISERS
    if preset.token_advantage is not None:
        inspect.signature(TOKEN_ADVANTAGES[preset.token_advantage]).bind(object(), **preset.advantage_knobs)
    else:
        inspect.signature(OUTCOME_ADVANTAGES[preset.outcome_advantage]).bind(
            object(), object(), scale_by_std=True, **preset.outcome_knobs)
    json.dumps(dataclasses.asdict(preset))  # serialisable for the run manifest


@pytest.mark.parametrize("name", ["delta", "delta_within_side", "delta_random", "cf", "cf_conserve", "cf_inverted",
                                  "cf_random", "cf_prior", "forking_tokens", "dapo_delta_paper", "otb",
                                  "ktae", "tempo"])
def test_canonical_methods_share_dapo_objective(name):
    dapo, preset = PRESETS["dapo"], PRESETS[name]
    for f in SURROGATE_FIELDS:
        assert getattr(preset, f) == getattr(dapo, f), f


def test_dapo_is_the_delta_paper_baseline():
    dapo = PRESETS["dapo"]
    assert (dapo.eps_low, dapo.eps_high, dapo.dual_clip_c, dapo.kl_beta) == (0.2, 0.28, 10.0, 0.0)
    assert dapo.aggregation == "token_mean" and dapo.overlong_shaping and not dapo.dynamic_sampling
    assert dataclasses.replace(PRESETS["dapo_delta_paper"], name="dapo") == dapo


def test_dapo_cf_paper_is_trl_dapo():
    p = PRESETS["dapo_cf_paper"]
    assert (p.eps_low, p.eps_high, p.dual_clip_c, p.kl_beta) == (0.2, 0.2, None, 0.005)
    assert p.aggregation == "token_mean" and p.mask_truncated and not p.overlong_shaping
    assert not p.dynamic_sampling and p.token_weights == "uniform"
    cf_paper = PRESETS["cf_paper"]
    for f in SURROGATE_FIELDS:
        assert getattr(cf_paper, f) == getattr(p, f), f


def test_weight_placement_and_hidden():
    assert "hidden" in PRESETS["delta"].needs and not PRESETS["delta"].weights_on_kl  # lambda * A on the pg term
    assert "hidden" in PRESETS["delta_within_side"].needs
    for name in ("cf", "cf_conserve", "cf_inverted", "cf_random", "cf_prior", "cf_paper"):
        assert PRESETS[name].weights_on_kl and "hidden" not in PRESETS[name].needs  # TRL: per_token_loss * w
    assert PRESETS["delta"].knobs == {"K": 1, "lambda_min": 0.8, "lambda_max": 1.2, "stats": "local"}
    assert PRESETS["cf"].knobs["boost"] == 4.0 and PRESETS["cf"].knobs["conserve"] is False
    assert PRESETS["cf_conserve"].knobs["conserve"] is True
    assert PRESETS["cf_inverted"].knobs["mode"] == "inverted" and PRESETS["cf_random"].knobs["mode"] == "random"
    assert PRESETS["forking_tokens"].knobs == {"top_quantile": 0.2}


def test_overrides_and_errors():
    p = get_preset("delta", {"knobs": {"K": 2}, "eps_high": 0.3})
    assert p.knobs["K"] == 2 and p.knobs["lambda_min"] == 0.8 and p.eps_high == 0.3
    assert PRESETS["delta"].knobs["K"] == 1  # the registry is untouched
    with pytest.raises(KeyError, match="valid"):
        get_preset("deltaa")
    with pytest.raises(KeyError, match="bogus"):
        get_preset("cf", {"bogus": 1})
    with pytest.raises(TypeError):
        PRESETS["new"] = PRESETS["dapo"]  # type: ignore[index]


def test_new_rows_differ_from_dapo_only_in_their_advantage():
    dapo = PRESETS["dapo"]
    assert PRESETS["otb"].token_advantage == "otb" and PRESETS["otb"].needs == ("sum_pi_sq",)
    assert PRESETS["ktae"].token_advantage == "ktae" and PRESETS["ktae"].advantage_knobs["top"] == 1.0
    tempo = PRESETS["tempo"]  # reads nothing beyond the tokens and A_i: phase 3 computes nothing extra
    assert tempo.needs == () and dataclasses.replace(tempo, name="dapo", token_advantage=None) == dapo
    w = PRESETS["w_reinforce"]
    assert w.outcome_advantage == "w_reinforce" and w.outcome_knobs == {"positive_weight": 0.1}
    assert dataclasses.replace(w, name="dapo", outcome_advantage="group", outcome_knobs={},
                               overlong_shaping=True) == dapo


def test_kl_and_normaliser_defaults_are_trl_and_native():
    """Cards claim TRL equivalence for grpo / dapo_cf_paper / cf_paper: their k3 is unclamped as TRL's."""
    for name, preset in PRESETS.items():  # Archer's recipe is verl's low_var_kl (its card)
        assert preset.kl_clamp == (10.0 if name == "archer" else None), name
        assert preset.token_mean_normaliser == "mini_batch", name
    assert get_preset("grpo", {"kl_clamp": 10.0}).kl_clamp == 10.0  # verl low_var_kl
    assert get_preset("delta", {"token_mean_normaliser": "micro_batch"}).token_mean_normaliser == "micro_batch"


def test_cf_skips_zero_advantage_rows_only_where_exact():
    """Skipping A_i = 0 rows is exact unless w multiplies a non-zero KL term."""
    for name, preset in PRESETS.items():
        if preset.token_weights == "cf":
            exact = preset.kl_beta == 0 or not preset.weights_on_kl
            assert preset.knobs["skip_zero_advantage"] == exact, name


CONFIG_BASE = {"experiment": "t", "output_dir": "x", "seeds": [1], "methods": ["dapo"]}


def test_unknown_method_lists_valid_presets():
    from common.config import ConfigError, config_from_dict
    from training.presets import check_methods

    with pytest.raises(ConfigError, match="config key 'methods': unknown algorithm 'ppo'.*dapo"):
        check_methods(config_from_dict({**CONFIG_BASE, "methods": ["ppo"], "report": {"baseline": "ppo"}}).raw)


def test_override_of_unknown_preset_field_is_named():
    from common.config import ConfigError, config_from_dict
    from training.presets import check_methods

    with pytest.raises(ConfigError, match="eps_hi"):
        check_methods(config_from_dict({**CONFIG_BASE, "algorithms": {"dapo": {"eps_hi": 0.3}}}).raw)
