"""Experiment tracking (config ``tracking``): both trainers' per-step metrics read back from the TensorBoard
event files and the MLflow file store they write, equal to ``metrics.jsonl``; a missing writer is a
config error naming the key; ``none`` writes nothing."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from common.config import ConfigError, TrackingConfig, config_from_dict
from training import rl
from training.tracking import flatten, make_tracker, report_to


def _cfg(tiny_env, backend: str, trl: bool = False, **rl_keys):
    raw = dict(tiny_env["cfg"].raw)
    raw["rl"] = {**raw["rl"], "steps": 2, "checkpoint_every": 1, "log_token_weights": 2, **rl_keys}
    raw["tracking"] = {"backend": backend}
    if trl:
        raw["backend"] = "trl"
    return config_from_dict(raw)


def _rows(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def _tensorboard(folder: Path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def _train(cfg, tiny_env, run: Path, method: str = "dapo") -> None:
    from training.presets import get_preset

    common = dict(seed=3, sft_dir=str(tiny_env["model"]), train_path=str(tiny_env["train"]), run_dir=str(run))
    if cfg.backend == "trl":
        from training.trl_backend import train_trl

        train_trl(cfg, get_preset(method), **common)
    else:
        rl.train(cfg, get_preset(method), **common)


def test_native_trainer_writes_every_metric_of_every_step_to_tensorboard(tiny_env, tmp_path):
    _train(_cfg(tiny_env, "tensorboard"), tiny_env, tmp_path)
    acc = _tensorboard(tmp_path / "tracking")
    rows = _rows(tmp_path)
    expected = [flatten(r) for r in rows]
    tags = set(acc.Tags()["scalars"])
    assert {"loss", "reward_mean", "accuracy", "time/rollout", "time/update", "time/total"} <= tags
    assert tags == set().union(*expected)  # NaN values (no signal that step) are left out
    for tag in ("loss", "reward_mean", "time/rollout", "weight_mean"):
        events = acc.Scalars(tag)
        assert [e.step for e in events] == [r["step"] for r in rows]
        assert [e.value for e in events] == pytest.approx([x[tag] for x in expected], rel=1e-6)
    texts = acc.Tags()["tensors"]  # add_text is stored as a string tensor
    assert any(t.startswith("token_weights") for t in texts), texts


def test_trl_trainer_reports_to_tensorboard_in_the_same_folder(tiny_env, tmp_path):
    pytest.importorskip("trl")
    _train(_cfg(tiny_env, "tensorboard", trl=True), tiny_env, tmp_path)
    acc = _tensorboard(tmp_path / "tracking")
    tags = set(acc.Tags()["scalars"])
    assert any("loss" in t for t in tags) and any("reward" in t for t in tags), tags
    loss = next(t for t in sorted(tags) if t.endswith("loss"))
    assert [e.step for e in acc.Scalars(loss)] == [1, 2]  # TRL's optimizer steps, one per rollout step here


def test_native_trainer_writes_an_mlflow_file_store(tiny_env, tmp_path):
    mlflow = pytest.importorskip("mlflow")
    _train(_cfg(tiny_env, "mlflow"), tiny_env, tmp_path)
    client = mlflow.MlflowClient(tracking_uri=(tmp_path / "tracking").resolve().as_uri())
    experiment = client.get_experiment_by_name("creditbench")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == "dapo-seed3" and run.info.status == "FINISHED"
    rows = _rows(tmp_path)
    for key in ("loss", "accuracy", "time/rollout"):
        history = sorted(client.get_metric_history(run.info.run_id, key), key=lambda m: m.step)
        assert [m.step for m in history] == [r["step"] for r in rows]
        assert [m.value for m in history] == pytest.approx([flatten(r)[key] for r in rows], rel=1e-6)
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.json", "token_weights"} <= artifacts


def test_none_writes_nothing_and_a_missing_writer_names_the_key_and_the_pip_command(tiny_env, tmp_path):
    make_tracker(TrackingConfig("none", None, "p"), tmp_path, name="x").log({"loss": 1.0}, 0)
    assert not any(tmp_path.iterdir()) and report_to(TrackingConfig("none", None, "p"), tmp_path) == (["none"], {})
    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed: its writer exists")
    with pytest.raises(ConfigError, match=r"config key 'tracking/backend': wandb .*pip install -e '\.\[tracking\]'"):
        make_tracker(TrackingConfig("wandb", None, "p"), tmp_path, name="x")


def test_report_to_keeps_the_integrations_offline_and_in_the_run_folder(tmp_path):
    if importlib.util.find_spec("wandb") is not None:
        names, env = report_to(TrackingConfig("wandb", None, "proj"), tmp_path)
        assert names == ["wandb"] and env["WANDB_MODE"] == "offline" and env["WANDB_DIR"] == str(tmp_path / "tracking")
    names, env = report_to(TrackingConfig("tensorboard", None, "proj"), tmp_path)
    assert names == ["tensorboard"] and env == {"TENSORBOARD_LOGGING_DIR": str(tmp_path / "tracking")}
    with pytest.raises(ConfigError, match="tracking/backend"):
        config_from_dict({"experiment": "t", "output_dir": "x", "seeds": [1], "methods": ["dapo"],
                          "tracking": {"backend": "comet"}})
