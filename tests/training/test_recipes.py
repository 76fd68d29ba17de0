"""Every shipped recipe validates against the schema; the paper recipes carry the papers' settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.config import REPO_ROOT, ConfigError, config_from_dict, load_config
from training.presets import get_preset

RECIPES = sorted((REPO_ROOT / "config" / "experiments").glob("*.yaml")) + [REPO_ROOT / "config" / "config.yaml"]
DELTA = ["delta_qwen3_8b.yaml", "delta_qwen3_14b.yaml"]
CF = ["cf_qwen25_3b_gsm8k.yaml", "cf_qwen3_1p7b_gsm8k.yaml"]
SEVEN = ["aime24", "aime25", "aime26", "hmmt25_feb", "hmmt25_nov", "hmmt26_feb", "brumo25"]


def _load(name: str):
    return load_config(REPO_ROOT / "config" / "experiments" / name)


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: Path(p).name)
def test_every_recipe_validates_and_batch_geometry_is_consistent(path):
    cfg = load_config(path)
    s, rl = cfg.scale, cfg.rl
    if s.per_device_batch is not None:  # TRL: one rollout batch = mini_batches optimizer steps
        assert s.per_device_batch * s.world_size * s.grad_accum * rl.mini_batches == rl.prompts_per_step * rl.group_size


def test_scale_defaults_are_the_cpu_no_op():
    cfg = config_from_dict({"experiment": "x", "output_dir": "o", "seeds": [1], "methods": ["dapo"]})
    s = cfg.scale
    got = (s.nodes, s.gpus_per_node, s.world_size, s.deepspeed, s.fsdp, s.lora, s.vllm.mode)
    assert got == (1, 0, 1, None, False, None, None)
    assert cfg.train_data.dataset is None and cfg.train_data.source is None and cfg.backend == "native"


@pytest.mark.parametrize("bad", [{"deepspeed": "zero4"}, {"vllm": {"mode": "remote"}}, {"dtype": "float16"},
                                 {"lora": {"rank": 8}}, {"time_limit": "two days"}, {"gpus": 8}])
def test_scale_rejects_bad_values_naming_the_key(bad):
    with pytest.raises(ConfigError, match="scale"):
        config_from_dict({"experiment": "x", "output_dir": "o", "seeds": [1], "methods": ["dapo"], "scale": bad})


@pytest.mark.parametrize("name", DELTA)
def test_delta_recipes_carry_the_paper_settings(name):
    cfg = _load(name)
    assert cfg.backend == "trl" and cfg.model.source.startswith("Qwen/Qwen3-") and cfg.model.source.endswith("-Base")
    rl = cfg.rl
    assert (rl.prompts_per_step, rl.group_size, rl.mini_batches, rl.lr, rl.max_new_tokens) == (128, 16, 4, 1e-6, 20480)
    for method in cfg.methods:
        p = get_preset(method, cfg.algorithms.get(method))
        assert (p.eps_low, p.eps_high, p.dual_clip_c, p.aggregation, p.kl_beta) == (0.2, 0.28, 10.0, "token_mean", 0.0)
        assert p.overlong_shaping and not p.dynamic_sampling
        assert round(p.overlong_cache_frac * rl.max_new_tokens) == 4096
    assert get_preset("delta", cfg.algorithms["delta"]).knobs["K"] == 1
    curve = cfg.eval.suites["curve"]
    assert list(curve.sets) == SEVEN and curve.k == 16 and curve.max_new_tokens == 30000


@pytest.mark.parametrize("name,steps", [(CF[0], 500), (CF[1], 200)])
def test_cf_recipes_carry_the_paper_settings(name, steps):
    cfg = _load(name)
    assert cfg.backend == "trl" and cfg.rl.steps == steps and cfg.rl.group_size == 8
    assert cfg.scale.lora is not None and cfg.scale.lora.r == 32
    base = get_preset("dapo_cf_paper", cfg.algorithms.get("dapo_cf_paper"))
    cf = get_preset("cf_paper", cfg.algorithms.get("cf_paper"))
    for p in (base, cf):
        assert (p.eps_low, p.eps_high, p.dual_clip_c, p.aggregation) == (0.2, 0.2, None, "token_mean")
        assert p.mask_truncated and not p.overlong_shaping and not p.dynamic_sampling
    assert base.kl_beta == cf.kl_beta in (0.005, 0.01) and cf.weights_on_kl and cf.token_weights == "cf"
    assert set(cfg.eval.suites["curve"].sets) == {"gsm8k", "mbpp_plus"}


def test_prepare_data_writes_the_dag_format_from_a_registered_set(tmp_path):
    import json

    import yaml

    from training.prepare_data import gsm8k_final, main

    assert gsm8k_final("3 + 4 = 7\n#### 1,234") == "1234" and gsm8k_final("\\frac{1}{2}") == "\\frac{1}{2}"
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"experiment": "pd", "output_dir": str(tmp_path), "seeds": [1], "methods": ["dapo"],
                                   "train_data": {"dataset": "dapo_math_17k", "template": "plain", "limit": 3}}))
    out = {k: tmp_path / f"{k}.json" for k in ("train", "heldout", "manifest")}
    main(["--config", str(cfg), *[x for k, v in out.items() for x in (f"--{k}", str(v))]])
    rows = [json.loads(line) for line in out["train"].read_text().splitlines()]
    assert len(rows) == 3 and set(rows[0]) == {"id", "prompt", "answer"}
    assert rows[0]["prompt"].startswith("Question: ") and rows[0]["prompt"].endswith("\nAnswer:")
    manifest = json.loads(out["manifest"].read_text())
    assert manifest["files"]["train"]["count"] == 3 and manifest["train_data"]["sha256"].startswith("246ae23d")


def test_ablations_recipe_trains_every_preset_on_the_default_budget():
    from training.presets import PRESETS

    abl, default = _load("ablations.yaml"), load_config(REPO_ROOT / "config" / "config.yaml")
    assert sorted(abl.methods) == sorted(PRESETS)
    assert (abl.rl, abl.sft, abl.task, abl.model) == (default.rl, default.sft, default.task, default.model)


def test_gsm8k_train_one_step_problems_and_sft_with_zero_steps_on_real_prompts(tmp_path, tiny_env):
    """real_cpu's prompts: GSM8K-train's problems with <= 1 calculator step (499 of 7473), before ``limit``;
    an SFT stage of 0 steps copies the model although real prompt rows carry no worked solution."""
    import json

    import yaml

    from training import sft
    from training.prepare_data import load_problems, main, solution_steps

    base = {"experiment": "pd", "output_dir": str(tmp_path), "seeds": [1], "methods": ["dapo"]}
    cfg = config_from_dict({**base, "train_data": {"dataset": "gsm8k_train", "template": "plain",
                                                   "max_solution_steps": 1}})
    problems, prov = load_problems(cfg.train_data)
    assert len(problems) == 499 and max(map(solution_steps, problems)) == 1 and prov["sha256"].startswith("17f347dc")
    limited = config_from_dict({**base, "train_data": {"dataset": "gsm8k_train", "max_solution_steps": 1, "limit": 5}})
    assert [p.id for p in load_problems(limited.train_data)[0]] == [p.id for p in problems[:5]]
    with pytest.raises(ConfigError, match="max_solution_steps"):
        config_from_dict({**base, "train_data": {"dataset": "gsm8k_train", "max_solution_steps": 0}})
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**base, "sft": {"steps": 0},
                                    "train_data": {"dataset": "gsm8k_train", "template": "plain", "limit": 4}}))
    out = {k: tmp_path / f"{k}.json" for k in ("train", "heldout", "manifest")}
    main(["--config", str(path), *[x for k, v in out.items() for x in (f"--{k}", str(v))]])
    assert "solution" not in json.loads(out["train"].read_text().splitlines()[0])
    sft.main(["--config", str(path), "--model", str(tiny_env["model"]), "--train", str(out["train"]),
              "--out", str(tmp_path / "sft"), "--metrics", str(tmp_path / "m.jsonl")])
    assert (tmp_path / "sft" / "config.json").exists()
