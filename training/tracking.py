"""Experiment tracking (config ``tracking``): the RL trainers' per-step metrics, phase times and token-weight
samples to TensorBoard, Weights & Biases (offline) or MLflow (a local file store), beside ``metrics.jsonl``.

One small interface (``log`` a metrics row at its step, ``text`` a sample, ``close``) for the native trainer;
the TRL backend hands the same choice to ``transformers`` through ``report_to`` (:func:`report_to`). Nothing
goes over the network: wandb runs in offline mode (``wandb sync`` uploads later), MLflow writes
``file:`` stores. A missing writer fails before training with the pip command. Tracking never changes
results, so it is in no rule's config hash: set it before the run.

Reading MLflow back: MLflow 3 refuses ``file:`` stores unless ``MLFLOW_ALLOW_FILE_STORE=true`` is set, so
``MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri file://$PWD/RUN/tracking`` (or, in Python,
``mlflow.MlflowClient(tracking_uri=...)`` with that variable set).
"""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path
from typing import Any

from common.config import ConfigError, TrackingConfig

WRITERS = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}
"""backend -> the module it needs (pip install -e '.[tracking]')."""


def flatten(row: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Numeric leaves of a metrics row as ``a/b`` keys (``time/rollout``); strings, lists and NaN dropped."""
    out: dict[str, float] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[name] = float(value)
    return out


def weights_text(rows: list[dict[str, Any]]) -> str:
    """Token-weight samples (``rl.log_token_weights`` rows) as text: one response a line, ``token:weight``."""
    return "\n\n".join(f"adv {r['advantage']:+.2f} {'right' if r['correct'] else 'wrong'}: "
                       + " ".join(f"{t!r}:{w:.2f}" for t, w in zip(r["tokens"], r["weights"])) for r in rows)


def tracking_dir(cfg: TrackingConfig, run_dir: str | os.PathLike) -> Path:
    return Path(cfg.dir) if cfg.dir else Path(run_dir) / "tracking"


def check_available(cfg: TrackingConfig) -> None:
    """Raise :class:`ConfigError` naming the key and the pip command when the backend's writer is missing."""
    module = WRITERS.get(cfg.backend)
    if module and importlib.util.find_spec(module) is None:
        raise ConfigError(f"config key 'tracking/backend': {cfg.backend} needs the {module} package; "
                          "pip install -e '.[tracking]' (or backend: none)")


class Tracker:
    """No tracking (``backend: none``); the base of the others."""

    def log(self, row: dict[str, Any], step: int) -> None:
        pass

    def text(self, tag: str, text: str, step: int) -> None:
        pass

    def close(self) -> None:
        pass


class TensorBoardTracker(Tracker):
    def __init__(self, folder: Path, config: dict[str, Any]):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder))
        self.writer.add_text("config", f"```\n{config}\n```", 0)

    def log(self, row: dict[str, Any], step: int) -> None:
        for key, value in flatten(row).items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def text(self, tag: str, text: str, step: int) -> None:
        self.writer.add_text(tag, text, step)

    def close(self) -> None:
        self.writer.close()


class WandbTracker(Tracker):
    def __init__(self, folder: Path, config: dict[str, Any], project: str, name: str):
        import wandb

        folder.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=project, name=name, dir=str(folder), mode="offline", config=config,
                              reinit=True)

    def log(self, row: dict[str, Any], step: int) -> None:
        self.run.log(flatten(row), step=step)

    def text(self, tag: str, text: str, step: int) -> None:
        import wandb

        self.run.log({tag: wandb.Html(f"<pre>{text}</pre>")}, step=step)

    def close(self) -> None:
        self.run.finish()


class MLflowTracker(Tracker):
    def __init__(self, folder: Path, config: dict[str, Any], project: str, name: str):
        import mlflow

        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for this opt-in
        self.client = mlflow.MlflowClient(tracking_uri=folder.resolve().as_uri())
        experiment = self.client.get_experiment_by_name(project)
        exp_id = experiment.experiment_id if experiment else self.client.create_experiment(project)
        self.run_id = self.client.create_run(exp_id, run_name=name).info.run_id
        self.client.log_dict(self.run_id, config, "config.json")

    def log(self, row: dict[str, Any], step: int) -> None:
        for key, value in flatten(row).items():
            self.client.log_metric(self.run_id, key.replace("@", "_at_"), value, step=step)

    def text(self, tag: str, text: str, step: int) -> None:
        self.client.log_text(self.run_id, text, f"{tag}/step{step}.txt")

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


def make_tracker(cfg: TrackingConfig, run_dir: str | os.PathLike, *, name: str,
                 config: dict[str, Any] | None = None) -> Tracker:
    """The configured tracker of one run (``name``: method and seed); ``backend: none`` logs nothing."""
    if cfg.backend == "none":
        return Tracker()
    check_available(cfg)
    folder, config = tracking_dir(cfg, run_dir), dict(config or {})
    if cfg.backend == "tensorboard":
        return TensorBoardTracker(folder, config)
    if cfg.backend == "wandb":
        return WandbTracker(folder, config, cfg.project, name)
    return MLflowTracker(folder, config, cfg.project, name)


def report_to(cfg: TrackingConfig, run_dir: str | os.PathLike) -> tuple[list[str], dict[str, str]]:
    """TRL / transformers ``report_to`` and the environment its integrations read to stay offline and write
    where the native trainer's tracker writes (transformers 5 reads ``TENSORBOARD_LOGGING_DIR``, not an argument)."""
    if cfg.backend == "none":
        return ["none"], {}
    check_available(cfg)
    folder = tracking_dir(cfg, run_dir)
    env = {"tensorboard": {"TENSORBOARD_LOGGING_DIR": str(folder)},
           "wandb": {"WANDB_MODE": "offline", "WANDB_DIR": str(folder), "WANDB_PROJECT": cfg.project},
           "mlflow": {"MLFLOW_TRACKING_URI": folder.resolve().as_uri(), "MLFLOW_EXPERIMENT_NAME": cfg.project,
                      "MLFLOW_ALLOW_FILE_STORE": "true"}}
    return [cfg.backend], env[cfg.backend]
