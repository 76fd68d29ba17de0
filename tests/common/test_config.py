"""Config validation: a wrong or unknown key fails before anything runs, naming the key."""

import pytest

from common.config import ConfigError, config_from_dict

BASE = {"experiment": "t", "output_dir": "x", "seeds": [1], "methods": ["dapo"]}


def test_defaults_are_filled_from_the_schema():
    cfg = config_from_dict(BASE)
    assert cfg.rl.group_size == 8 and cfg.eval.suites["curve"].k == 4 and cfg.backend == "native"


@pytest.mark.parametrize(
    ("patch", "key"),
    [
        ({"rl": {"group_sise": 8}}, "rl"),  # typo: unknown key
        ({"rl": {"group_size": 1}}, "rl/group_size"),  # below minimum
        ({"eval": {"suites": {"curve": {"k": "four"}}}}, "eval/suites/curve/k"),
        ({"bogus": 1}, "<top level>"),
        ({"backend": "megatron"}, "backend"),
        ({"seeds": [1, 1]}, "seeds"),  # a seed twice would train and count the same run twice
        ({"methods": ["dapo", "dapo"]}, "methods"),
        ({"seeds": [1, 2], "eval": {"suites": {"real": {"seeds": [2, 2]}}}}, "eval/suites/real/seeds"),
    ],
)
def test_bad_key_is_named(patch, key):
    with pytest.raises(ConfigError) as err:
        config_from_dict({**BASE, **patch})
    assert f"config key '{key}'" in str(err.value)
    if "group_sise" in str(patch):
        assert "group_sise" in str(err.value)


def test_config_hash_changes_with_results_affecting_values():
    a = config_from_dict(BASE).config_hash
    b = config_from_dict({**BASE, "rl": {"lr": 1e-3}}).config_hash
    assert a != b and a == config_from_dict(BASE).config_hash


@pytest.mark.parametrize("steps, every, expected", [(30, 10, (10, 20, 30)), (25, 10, (10, 20, 25)),
                                                    (5, 10, (5,)), (1, 1, (1,))])
def test_checkpoint_steps_every_n_and_the_last(steps, every, expected):
    cfg = config_from_dict({**BASE, "rl": {"steps": steps, "checkpoint_every": every}})
    assert cfg.rl.checkpoint_steps == expected


def test_synthetic_task_unless_a_dataset_or_source_is_configured():
    assert config_from_dict(BASE).synthetic_task
    assert not config_from_dict({**BASE, "train_data": {"dataset": "gsm8k"}}).synthetic_task


def test_duplicate_seeds_fail_the_command_in_one_line(tmp_path):
    """Through ``creditbench plan`` (the same validation as the workflow's): exit 2, one line, the key."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({**BASE, "seeds": [1, 1]}))
    repo = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, "-m", "training.cli", "plan", str(cfg)], cwd=repo, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(repo)}, timeout=300)
    assert res.returncode == 2
    assert res.stderr.strip() == "plan: config key 'seeds': [1, 1] repeats an entry; list each once"
