"""Experiment config: one YAML file validated against ``workflow/schemas/config.schema.yaml``.

The schema is the single source of defaults (Snakemake's ``validate`` fills them the same way), and
the frozen dataclasses below have no defaults of their own, so YAML and code cannot drift apart.
An unknown or mistyped key fails before anything runs, with the key's path in the message.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

import jsonschema
import yaml

from common.coerce import coerce, schema_types
from common.io import write_text_atomic

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
    scaffold_repeats: int = 0


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
    train_top_layers: int | None
    log_token_weights: int
    fold_old_logp: bool
    """With one mini-batch, the old-log-prob forward is the update's own forward (``training.rl.update_forward``)."""

    @property
    def checkpoint_steps(self) -> tuple[int, ...]:
        """RL steps whose checkpoints are kept and evaluated: every ``checkpoint_every`` steps, and the last."""
        steps = list(range(self.checkpoint_every, self.steps + 1, self.checkpoint_every))
        return tuple(steps if steps and steps[-1] == self.steps else steps + [self.steps])


@dataclass(frozen=True)
class SuiteConfig:
    """Config ``eval.suites.<name>``: sets, checkpoints, sampling (``evaluation.driver.Sampling.from_suite``)."""

    sets: tuple[str, ...]
    checkpoints: tuple[str, ...]
    seeds: str | tuple[int, ...]  # all | first | the list
    methods: tuple[str, ...] | None
    k: int
    temperature: float
    top_p: float
    max_new_tokens: int
    batch_size: int
    per_problem_seeds: bool
    limit: int | None
    limit_per_set: Mapping[str, int | None]
    subset_seed: int
    template: str | None
    templates: Mapping[str, str]
    num_fewshot: int
    mcq_protocol: str

    def limit_for(self, name: str) -> int | None:
        """Problems evaluated of set ``name`` (None = all)."""
        return self.limit_per_set[name] if name in self.limit_per_set else self.limit


@dataclass(frozen=True)
class EvalConfig:
    backend: str
    grader_timeout_s: float
    suites: Mapping[str, SuiteConfig]  # curve: OUT/tables; every other suite: OUT/<suite>_tables


def _build_eval(section: Mapping[str, Any]) -> EvalConfig:
    tup = lambda v: v if v is None or isinstance(v, str) else tuple(v)  # noqa: E731
    suites = {name: _build(SuiteConfig, {k: tup(v) if isinstance(v, list) or k == "methods" else v
                                         for k, v in suite.items()}) for name, suite in section["suites"].items()}
    return EvalConfig(backend=section["backend"], grader_timeout_s=section["grader_timeout_s"], suites=suites)


@dataclass(frozen=True)
class DataConfig:
    benchmarks_dir: str
    gpqa_dir: str | None
    """None: ``$CREDITBENCH_GPQA_DIR`` (filled in by :func:`validate_config`), else the benchmarks' default."""


@dataclass(frozen=True)
class ReportConfig:
    baseline: str
    audit_max_samples: int
    max_drop_pct: float
    mix_engines: bool
    equivalence_margin: float
    spending: str


@dataclass(frozen=True)
class SeedsAuto:
    """``seeds: auto``: the looks of the group-sequential design (``evaluation.report.sequential``)."""

    start: int
    step: int
    max_seeds: int

    @property
    def looks(self) -> tuple[int, ...]:
        """Seeds at each look: start, start + step, ..., max_seeds."""
        return (*range(self.start, self.max_seeds, self.step), self.max_seeds)


@dataclass(frozen=True)
class MCConfig:
    """Monte-Carlo token importance (``training.studies.mc_importance``), opt-in."""

    enabled: bool
    k: int
    responses: int
    seed: int


@dataclass(frozen=True)
class FidelityConfig:
    """Credit fidelity tables and per-step gradient diagnostics (``training.studies.fidelity_run``)."""

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
    portable_kernels: bool

    @property
    def env(self) -> str:
        """Environment of every torch job: one thread, passive OpenMP waits, ``portable_kernels`` if set."""
        words = ["OMP_WAIT_POLICY=PASSIVE", f"OMP_NUM_THREADS={self.torch_threads}"]
        if self.portable_kernels:
            words += ["ATEN_CPU_CAPABILITY=default", "MKL_CBWR=COMPATIBLE"]
        return " ".join(words)


@dataclass(frozen=True)
class TrackingConfig:
    """Experiment tracking of both trainers (``training.tracking``); offline, never changes results."""

    backend: str  # none | tensorboard | wandb | mlflow
    dir: str | None  # None: <run_dir>/tracking
    project: str


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
    max_solution_steps: int | None
    tasks: tuple[Mapping[str, Any], ...] | None  # dataset reasoning_gym: the task mixture
    size: int
    seed: int


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
    cpu_processes: int = 1

    @property
    def world_size(self) -> int:
        """Training processes: one per GPU; on CPU ``cpu_processes`` (gloo, backend trl)."""
        return max(1, self.nodes * self.gpus_per_node) if self.gpus_per_node else self.cpu_processes


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
    """The seeds every method trains (``seeds: auto``: the first look's; the workflow's checkpoint adds more)."""
    methods: tuple[str, ...]
    algorithms: Mapping[str, Mapping[str, Any]]
    backend: str
    task: TaskConfig
    model: ModelConfig
    sft: SFTConfig
    rl: RLConfig
    eval: EvalConfig
    data: DataConfig
    report: ReportConfig
    runtime: RuntimeConfig
    seeds_auto: SeedsAuto | None
    train_data: TrainDataConfig
    scale: ScaleConfig
    fidelity: FidelityConfig
    tracking: TrackingConfig
    raw: Mapping[str, Any]
    """The validated dict with defaults filled (hashed into manifests)."""

    @property
    def config_hash(self) -> str:
        return config_hash(self.raw)

    @property
    def synthetic_task(self) -> bool:
        """True when training prompts come from ``training.data`` (no dataset or hub source configured)."""
        return not (self.train_data.dataset or self.train_data.source)

    @property
    def credit_analysis(self) -> bool:
        """Rule credit_analysis runs: the synthetic task, or a CPU-size real model where real_credit does not."""
        return self.synthetic_task or (self.model.convert_gguf and not self.real_credit)

    @property
    def real_credit(self) -> bool:
        """Rule real_credit runs: a CPU-size real model (``model.convert_gguf``) on real data, fidelity and MC on."""
        f = self.fidelity
        return not self.synthetic_task and self.model.convert_gguf and f.enabled and f.mc.enabled


def _with_defaults(validator_class):
    """A jsonschema validator that fills ``default`` values while validating (as Snakemake does); an object
    default is the base a given object is merged over (``eval.suites``: a suite written keeps its built-in keys)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                default = json.loads(json.dumps(sub.get("default")))
                if "default" in sub and name not in instance:
                    instance[name] = default
                elif isinstance(default, dict) and isinstance(instance.get(name), dict):
                    instance[name] = deep_merge(default, instance[name])  # eval.suites: over the built-in suites
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def load_schema() -> dict:
    with open(SCHEMA_PATH) as f:
        return yaml.safe_load(f)


def validate_config(raw: Mapping[str, Any]) -> dict:
    """Validate and fill defaults; raise ConfigError naming the offending key path. Presets are checked by
    ``training.presets.check_methods`` (DAG time; common imports nothing of the project). Strings are first
    read as the numbers / booleans / nulls the schema asks for: PyYAML reads ``1e-4`` as a string, and
    ``--config 'rl={lr: 1e-4}'`` delivers every nested value as one."""
    _check_moved(raw)
    schema = load_schema()
    data = coerce(json.loads(json.dumps(raw)), schema)  # deep copy, plain types
    validator = _with_defaults(jsonschema.Draft202012Validator)(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [_error_line(err) for err in errors[:5]] + ([f"... {len(errors) - 5} more"] if len(errors) > 5 else [])
        raise ConfigError("; ".join(lines))
    if data["data"]["gpqa_dir"] is None and os.environ.get(GPQA_ENV_VAR):
        data["data"]["gpqa_dir"] = os.environ[GPQA_ENV_VAR]  # recorded in the resolved config the jobs read
    _check_algorithms(data)
    _check_suites(data)
    _check_cross_keys(data)
    if data["model"]["convert_gguf"] and not data["model"]["source"]:
        raise ConfigError("config key 'model/convert_gguf': needs model.source (the folder it writes)")
    return data


GPQA_ENV_VAR = "CREDITBENCH_GPQA_DIR"
def _error_line(err: jsonschema.ValidationError) -> str:
    """One short line per schema error: the key path, what is wrong, what to write (never the schema)."""
    where = "/".join(str(p) for p in err.absolute_path) or "<top level>"
    schema = err.schema if isinstance(err.schema, Mapping) else {}
    if err.validator == "additionalProperties":
        props = schema.get("properties") or {}
        unknown = ", ".join(repr(k) for k in err.instance if k not in props)
        return f"config key '{where}': unknown key {unknown}; valid keys here: {', '.join(sorted(props))}"
    if err.validator == "type":
        want = " or ".join(sorted(schema_types(schema)))
        return f"config key '{where}': {err.instance!r} is not of type {want}; write a plain YAML {want}"
    if err.validator == "enum" and "/sets/" in f"/{where}":  # 29 names: the registry lists them
        return f"config key '{where}': {err.instance!r} is not a registered set; creditbench benchmarks list names them"
    if err.validator == "enum":
        return f"config key '{where}': {err.instance!r} is not one of {list(err.validator_value)}"
    if err.validator == "uniqueItems":
        return f"config key '{where}': {err.instance!r} repeats an entry; list each once"
    message = err.message if len(err.message) <= 160 else err.message[:157] + "..."
    return f"config key '{where}': {message}"


def _check_cross_keys(data: Mapping[str, Any]) -> None:
    """Cross-key checks: a run that would fail (or write empty columns) after training fails at DAG time."""
    auto = data["seeds_auto"]
    if data["seeds"] == "auto" and auto["start"] > auto["max_seeds"]:
        raise ConfigError(f"config key 'seeds_auto/start': {auto['start']} > seeds_auto.max_seeds "
                          f"{auto['max_seeds']}; start at or below the cap")
    if data["report"]["baseline"] not in data["methods"]:
        raise ConfigError(f"config key 'report/baseline': {data['report']['baseline']!r} is not one of methods "
                          f"{data['methods']}; set report.baseline to one of them")
    m = data["model"]
    if m["source"] is None:  # built locally by training.model (a hub / HF folder has its own shape)
        if m["hidden_size"] % m["num_heads"]:
            raise ConfigError(f"config key 'model/hidden_size': {m['hidden_size']} is not divisible by "
                              f"model.num_heads {m['num_heads']}")
        if (m["hidden_size"] // m["num_heads"]) % 2:
            raise ConfigError(f"config key 'model/hidden_size': head dim hidden_size / num_heads = "
                              f"{m['hidden_size'] // m['num_heads']} is odd (rotary embeddings need it even)")
        if m["num_heads"] % m["num_kv_heads"]:
            raise ConfigError(f"config key 'model/num_kv_heads': model.num_heads {m['num_heads']} is not "
                              f"divisible by num_kv_heads {m['num_kv_heads']}")
    sc = data["scale"]
    if sc["cpu_processes"] > 1 and (data["backend"] != "trl" or sc["gpus_per_node"]):
        raise ConfigError(f"config key 'scale/cpu_processes': {sc['cpu_processes']} processes need backend trl on "
                          f"CPU (backend {data['backend']!r}, gpus_per_node {sc['gpus_per_node']}); set it to 1")
    t = data["task"]
    if t["min_ops"] > t["max_ops"]:
        raise ConfigError(f"config key 'task/min_ops': {t['min_ops']} > task.max_ops {t['max_ops']} (empty range)")
    if t["max_operand"] > t["max_value"]:
        raise ConfigError(f"config key 'task/max_operand': {t['max_operand']} > task.max_value {t['max_value']} "
                          "(operands must fit in the value range)")


def _check_algorithms(data: Mapping[str, Any]) -> None:
    for name in data["algorithms"]:
        if name not in data["methods"]:
            raise ConfigError(f"config key 'algorithms/{name}': not one of methods {data['methods']}")


def _check_suites(data: Mapping[str, Any]) -> None:
    """A suite's seeds / methods must be the experiment's (limit_per_set's keys: ``evaluation.suites``)."""
    for name, suite in data["eval"]["suites"].items():
        for key, allowed in (("seeds", _seed_list(data)), ("methods", data["methods"])):
            extra = [v for v in (suite[key] if isinstance(suite[key], list) else ()) if v not in allowed]
            if extra:
                raise ConfigError(f"config key 'eval/suites/{name}/{key}': {extra} not in {key} {data[key]}")


def _check_moved(raw: Mapping[str, Any]) -> None:
    """Keys of older configs: one line saying what to write instead, before the schema's message."""
    if "real_eval" in raw:
        raise ConfigError("config key 'real_eval': moved; write its keys under eval.suites.real (sets, limit, k, "
                          "...; checkpoints [sft, final] and seeds first by default)")
    ev = raw.get("eval") if isinstance(raw.get("eval"), Mapping) else {}
    if knob := next((k for k in ev if k not in ("backend", "grader_timeout_s", "suites")), None):
        raise ConfigError(f"config key 'eval/{knob}': sampling knobs live in a suite now; write it as "
                          f"eval.suites.curve.{'sets' if knob == 'benchmarks' else knob}")


def _seed_list(data: Mapping[str, Any]) -> list[int]:
    """The seeds list, or 1..max_seeds for ``seeds: auto`` (every seed the design may train)."""
    if data["seeds"] == "auto":
        return list(range(1, data["seeds_auto"]["max_seeds"] + 1))
    return list(data["seeds"])


def _build(cls, section: Mapping[str, Any]):
    kwargs = {f.name: section[f.name] for f in fields(cls)}
    return cls(**kwargs)


def config_from_dict(raw: Mapping[str, Any]) -> Config:
    data = validate_config(raw)
    return Config(
        experiment=data["experiment"],
        output_dir=data["output_dir"],
        seeds=tuple(_seed_list(data)[: data["seeds_auto"]["start"]] if data["seeds"] == "auto" else data["seeds"]),
        seeds_auto=_build(SeedsAuto, data["seeds_auto"]) if data["seeds"] == "auto" else None,
        methods=tuple(data["methods"]),
        algorithms=data["algorithms"],
        backend=data["backend"],
        task=_build(TaskConfig, data["task"]),
        model=_build(ModelConfig, data["model"]),
        sft=_build(SFTConfig, data["sft"]),
        rl=_build(RLConfig, data["rl"]),
        eval=_build_eval(data["eval"]),
        data=_build(DataConfig, data["data"]),
        report=_build(ReportConfig, data["report"]),
        runtime=_build(RuntimeConfig, data["runtime"]),
        train_data=_build(TrainDataConfig, {**data["train_data"], "tasks": None if data["train_data"]["tasks"] is None
                                             else tuple(data["train_data"]["tasks"])}),
        scale=_build_scale(data["scale"]),
        fidelity=_build_fidelity(data["fidelity"]),
        tracking=_build(TrackingConfig, data["tracking"]),
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
    both = lambda k, v: isinstance(v, Mapping) and isinstance(base.get(k), Mapping)  # noqa: E731
    return {**base, **{k: deep_merge(base[k], v) if both(k, v) else v for k, v in extra.items()}}


def config_hash(data: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------------------------------
# What shapes each rule's outputs (Snakemake params), and where the jobs read the resolved config
# ----------------------------------------------------------------------------------------------------

_TORCH = ("runtime/device", "runtime/portable_kernels")  # every rule whose job computes with torch

RULE_SECTIONS: dict[str, tuple[str, ...]] = {
    "make_data": ("task", "train_data", "data/benchmarks_dir", "model/source"),
    "build_model": ("model", *_TORCH),
    "sft": ("sft", *_TORCH),
    "rl": ("rl", "algorithms/{method}", "backend", "scale", "eval/backend", "eval/grader_timeout_s",
           "fidelity/grad_snr", *_TORCH),
    "launch_check": ("backend", "scale", "eval/backend", "sft/steps"),
    # one CLI, two subcommands (evaluation.evaluate): both hash what either reads (a key only generation
    # reads reruns scoring through its inputs anyway)
    "eval_generate": ("eval/suites/{suite}", "eval/backend", "eval/grader_timeout_s", "data", *_TORCH),
    "eval_score": ("eval/suites/{suite}", "eval/backend", "eval/grader_timeout_s", "data", *_TORCH),
    "credit_analysis": ("rl", "algorithms", "eval/grader_timeout_s", *_TORCH),
    "credit_fidelity": ("fidelity", "rl", "algorithms", "eval/grader_timeout_s", *_TORCH),
    "real_credit": ("fidelity", "rl", "algorithms", "eval/grader_timeout_s", *_TORCH),
}
"""Resolved config keys read by each rule's entry point. A rule's param is the hash of exactly these, so
Snakemake's params rerun-trigger reruns the rule when one changes, and everything downstream through its
outputs; a change elsewhere reruns nothing. Upstream keys need not be listed: they arrive as inputs.
``tests/test_drift.py`` derives each job's reads from its entry point's code and fails on a key missing here."""

RESUME_KEEPS = ("rl/steps", "rl/checkpoint_every", "rl/log_token_weights")
"""RL keys a resume may change: the trainer has no schedule, so a longer run continues a shorter one."""


def _pick(raw: Mapping[str, Any], key: str) -> Any:
    value: Any = raw
    for part in key.split("/"):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def rule_digest(raw: Mapping[str, Any], rule: str, **wildcards: str) -> str:
    """Hash of the resolved keys ``RULE_SECTIONS[rule]`` (``{method}`` filled from ``wildcards``)."""
    keys = [k.format(**wildcards) for k in RULE_SECTIONS[rule]]
    return config_hash({k: _pick(raw, k) for k in keys})


def resume_digest(raw: Mapping[str, Any], method: str) -> str:
    """What an RL resume state must match: every key that shaped the run up to its last checkpoint (data,
    model, SFT, RL) except :data:`RESUME_KEEPS`. A stale state of another config is discarded, not resumed."""
    keys = [k.format(method=method) for rule in ("make_data", "build_model", "sft", "rl") for k in RULE_SECTIONS[rule]]
    picked = {k: _pick(raw, k) for k in keys}
    picked["rl"] = {k: v for k, v in (picked["rl"] or {}).items() if f"rl/{k}" not in RESUME_KEEPS}
    return config_hash(picked)


def resolved_yaml(raw: Mapping[str, Any]) -> str:
    return yaml.safe_dump(json.loads(json.dumps(raw)), sort_keys=True)


def _content_path(raw: Mapping[str, Any], text: str) -> str:
    return f"{raw['output_dir']}/configs/{hashlib.sha256(text.encode()).hexdigest()[:16]}.yaml"


def resolved_config_path(raw: Mapping[str, Any]) -> str:
    """``<output_dir>/configs/<hash>.yaml``: by content, never rewriting the file a running invocation reads."""
    return _content_path(raw, resolved_yaml(raw))


def write_resolved_config(raw: Mapping[str, Any]) -> str:
    """Write :func:`resolved_config_path` atomically if absent (Snakemake's onstart, after the lock)."""
    text = resolved_yaml(raw)
    path = _content_path(raw, text)
    if not Path(path).is_file() or Path(path).read_text() != text:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text)
    return path
