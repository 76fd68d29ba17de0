"""Experiment config: one YAML file validated against ``workflow/schemas/config.schema.yaml``.

The schema is the single source of defaults (Snakemake's ``validate`` fills them the same way), and
the frozen dataclasses below have no defaults of their own, so YAML and code cannot drift apart.
An unknown or mistyped key fails before anything runs, with the key's path in the message.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

import jsonschema
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = REPO_ROOT / "workflow" / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A config file that does not match the schema (the message names the bad key)."""


@dataclass(frozen=True)
class TaskConfig:
    seed: int
    n_train: int
    n_heldout: int
    max_operand: int
    max_value: int
    min_ops: int
    max_ops: int
    slip_prob: float


@dataclass(frozen=True)
class ModelConfig:
    source: str | None
    convert_gguf: bool
    arch: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    max_position: int
    seed: int


@dataclass(frozen=True)
class SFTConfig:
    steps: int
    batch_size: int
    lr: float
    warmup_steps: int
    weight_decay: float
    seed: int


@dataclass(frozen=True)
class RLConfig:
    steps: int
    prompts_per_step: int
    group_size: int
    mini_batches: int
    micro_batch_size: int
    lr: float
    weight_decay: float
    grad_clip: float
    max_new_tokens: int
    temperature: float
    top_p: float
    checkpoint_every: int
    log_token_weights: int

    @property
    def checkpoint_steps(self) -> tuple[int, ...]:
        """RL steps whose checkpoints are kept and evaluated: every ``checkpoint_every`` steps, and the last."""
        steps = list(range(self.checkpoint_every, self.steps + 1, self.checkpoint_every))
        return tuple(steps if steps and steps[-1] == self.steps else steps + [self.steps])


@dataclass(frozen=True)
class EvalConfig:
    benchmarks: tuple[str, ...]
    k: int
    temperature: float
    top_p: float
    max_new_tokens: int
    batch_size: int
    limit: int | None
    template: str
    backend: str
    grader_timeout_s: float


@dataclass(frozen=True)
class RealEvalConfig:
    """Real benchmarks on chosen checkpoints (rules real_generate, real_score, real_report)."""

    sets: tuple[str, ...]
    limit: int | None
    limit_per_set: Mapping[str, int | None]
    subset_seed: int | None
    checkpoints: tuple[str, ...]
    seeds: tuple[int, ...] | None
    methods: tuple[str, ...] | None
    k: int
    temperature: float
    top_p: float
    max_new_tokens: int
    batch_size: int
    templates: Mapping[str, str]
    num_fewshot: int
    mcq_protocol: str

    def limit_for(self, name: str) -> int | None:
        """Problems evaluated of set ``name`` (None = all)."""
        return self.limit_per_set[name] if name in self.limit_per_set else self.limit


def _build_real_eval(section: Mapping[str, Any]) -> RealEvalConfig:
    s = dict(section)
    for key in ("sets", "checkpoints", "seeds", "methods"):
        s[key] = None if s[key] is None else tuple(s[key])
    return _build(RealEvalConfig, s)


@dataclass(frozen=True)
class DataConfig:
    benchmarks_dir: str
    gpqa_dir: str


@dataclass(frozen=True)
class ReportConfig:
    baseline: str
    audit_max_samples: int


@dataclass(frozen=True)
class MCConfig:
    """Monte-Carlo token importance (``training.credit.mc_importance``), opt-in."""

    enabled: bool
    k: int
    responses: int
    seed: int


@dataclass(frozen=True)
class FidelityConfig:
    """Credit fidelity tables and per-step gradient diagnostics (``training.credit.fidelity_run``)."""

    enabled: bool
    controls: tuple[str, ...]
    seeds: tuple[int, ...] | None
    batches: int
    top_fraction: float
    bootstrap: int
    bootstrap_seed: int
    grad_snr: bool
    mc: MCConfig


def _build_fidelity(section: Mapping[str, Any]) -> FidelityConfig:
    s = dict(section)
    s["controls"] = tuple(s["controls"])
    s["seeds"] = None if s["seeds"] is None else tuple(s["seeds"])
    s["mc"] = _build(MCConfig, s["mc"])
    return _build(FidelityConfig, s)


@dataclass(frozen=True)
class RuntimeConfig:
    torch_threads: int
    device: str


@dataclass(frozen=True)
class TrainDataConfig:
    """RL training prompts: a registered set or a hub dataset (``training.prepare_data``); both None = synthetic."""

    dataset: str | None
    source: str | None
    subset: str | None
    split: str
    question_field: str
    answer_field: str
    template: str
    limit: int | None


@dataclass(frozen=True)
class LoRAConfig:
    """PEFT LoRA adapter settings (``peft.LoraConfig``)."""

    r: int
    alpha: float
    dropout: float
    target_modules: tuple[str, ...]


@dataclass(frozen=True)
class VLLMConfig:
    """vLLM rollouts inside TRL (``GRPOConfig.vllm_mode``); mode None = HF generate."""

    mode: str | None
    tensor_parallel_size: int
    gpu_memory_utilization: float
    sleep_mode: bool


@dataclass(frozen=True)
class ScaleConfig:
    """Cluster / parallelism knobs of backend ``trl`` and the slurm profile (defaults: CPU no-op)."""

    nodes: int
    gpus_per_node: int
    partition: str | None
    account: str | None
    time_limit: str | None
    gpu_type: str | None
    gpu_mem_gb: float
    dtype: str
    gradient_checkpointing: bool
    deepspeed: str | None
    fsdp: bool
    lora: LoRAConfig | None
    vllm: VLLMConfig
    per_device_batch: int | None
    grad_accum: int
    max_prompt_tokens: int | None

    @property
    def world_size(self) -> int:
        """Training processes (one per GPU; 1 on CPU)."""
        return max(1, self.nodes * self.gpus_per_node)


def _build_scale(section: Mapping[str, Any]) -> ScaleConfig:
    s = dict(section)
    lora = s["lora"]
    s["lora"] = None if lora is None else LoRAConfig(
        r=lora["r"], alpha=lora["alpha"], dropout=lora["dropout"], target_modules=tuple(lora["target_modules"]))
    s["vllm"] = _build(VLLMConfig, s["vllm"])
    return _build(ScaleConfig, s)


@dataclass(frozen=True)
class Config:
    experiment: str
    output_dir: str
    seeds: tuple[int, ...]
    methods: tuple[str, ...]
    algorithms: Mapping[str, Mapping[str, Any]]
    backend: str
    task: TaskConfig
    model: ModelConfig
    sft: SFTConfig
    rl: RLConfig
    eval: EvalConfig
    real_eval: RealEvalConfig
    data: DataConfig
    report: ReportConfig
    runtime: RuntimeConfig
    train_data: TrainDataConfig
    scale: ScaleConfig
    fidelity: FidelityConfig
    raw: Mapping[str, Any]
    """The validated dict with defaults filled (hashed into manifests)."""

    @property
    def config_hash(self) -> str:
        return config_hash(self.raw)

    @property
    def synthetic_task(self) -> bool:
        """True when training prompts come from ``training.data`` (no dataset or hub source configured)."""
        return not (self.train_data.dataset or self.train_data.source)


def _with_defaults(validator_class):
    """A jsonschema validator that fills ``default`` values while validating (as Snakemake does)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = json.loads(json.dumps(sub["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def load_schema() -> dict:
    with open(SCHEMA_PATH) as f:
        return yaml.safe_load(f)


def validate_config(raw: Mapping[str, Any]) -> dict:
    """Validate and fill defaults; raise ConfigError naming the offending key path. Preset names and knobs
    are checked by ``training.presets.check_methods`` (common imports nothing of the project), which the
    workflow calls at DAG time and ``training.presets.get_preset`` repeats in every training job."""
    data = json.loads(json.dumps(raw))  # deep copy, plain types
    validator = _with_defaults(jsonschema.Draft202012Validator)(load_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for err in errors:
            where = "/".join(str(p) for p in err.absolute_path) or "<top level>"
            lines.append(f"config key '{where}': {err.message}")
        raise ConfigError("invalid config:\n  " + "\n  ".join(lines))
    _check_algorithms(data)
    _check_real_eval(data)
    if data["model"]["convert_gguf"] and not data["model"]["source"]:
        raise ConfigError("config key 'model/convert_gguf': needs model.source (the folder it writes)")
    return data


def _check_algorithms(data: Mapping[str, Any]) -> None:
    for name in data["algorithms"]:
        if name not in data["methods"]:
            raise ConfigError(f"config key 'algorithms/{name}': not one of methods {data['methods']}")


def _check_real_eval(data: Mapping[str, Any]) -> None:
    """real_eval seeds / methods must be the experiment's; limit_per_set keys must be listed sets."""
    section = data["real_eval"]
    for key in ("seeds", "methods"):
        extra = [v for v in section[key] or () if v not in data[key]]
        if extra:
            raise ConfigError(f"config key 'real_eval/{key}': {extra} not in {key} {data[key]}")
    extra = [name for name in section["limit_per_set"] if name not in section["sets"]]
    if extra:
        raise ConfigError(f"config key 'real_eval/limit_per_set': {extra} not in real_eval/sets")


def _build(cls, section: Mapping[str, Any]):
    kwargs = {f.name: section[f.name] for f in fields(cls)}
    return cls(**kwargs)


def config_from_dict(raw: Mapping[str, Any]) -> Config:
    data = validate_config(raw)
    ev = dict(data["eval"])
    ev["benchmarks"] = tuple(ev["benchmarks"])
    return Config(
        experiment=data["experiment"],
        output_dir=data["output_dir"],
        seeds=tuple(data["seeds"]),
        methods=tuple(data["methods"]),
        algorithms=data["algorithms"],
        backend=data["backend"],
        task=_build(TaskConfig, data["task"]),
        model=_build(ModelConfig, data["model"]),
        sft=_build(SFTConfig, data["sft"]),
        rl=_build(RLConfig, data["rl"]),
        eval=_build(EvalConfig, ev),
        real_eval=_build_real_eval(data["real_eval"]),
        data=_build(DataConfig, data["data"]),
        report=_build(ReportConfig, data["report"]),
        runtime=_build(RuntimeConfig, data["runtime"]),
        train_data=_build(TrainDataConfig, data["train_data"]),
        scale=_build_scale(data["scale"]),
        fidelity=_build_fidelity(data["fidelity"]),
        raw=data,
    )


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Config:
    """Read a YAML config (optionally deep-merged with ``overrides``), validate, build dataclasses."""
    with open(path) as f:
        raw = yaml.safe_load(f) or {}
    if overrides:
        raw = deep_merge(raw, overrides)
    return config_from_dict(raw)


def deep_merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def config_hash(data: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
