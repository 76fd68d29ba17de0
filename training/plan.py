"""Plan before spending: jobs, rollouts, tokens, GPU-hours and peak memory per GPU for a recipe.

    python -m training.plan config/experiments/delta_qwen3_8b.yaml [--gpus 8 --gpu-mem-gb 80 --gpu-type H100]

Exits 0 when every setting fits, 2 (with a message naming the setting and what to change) when one
cannot fit or the batch geometry is inconsistent, so a submit script can run it before any GPU job:
``python -m training.plan CFG && snakemake --profile workflow/profiles/slurm --configfile CFG``.

Memory per GPU (GB = 1e9 bytes) for the trainer, per method (a KL term needs a reference model):

- parameters, gradients, optimizer (Adam): mixed precision bf16 keeps 2 + 2 + 12 bytes per trainable
  parameter (bf16 weights and grads; fp32 master, m, v), float32 4 + 4 + 8 (ZeRO, Rajbhandari et al.
  2020, arXiv 1910.02054 §3.1). ZeRO-1 shards the optimizer states over the data-parallel ranks,
  ZeRO-2 also the gradients, ZeRO-3 and FSDP full-shard also the weights. LoRA: the frozen base is
  weights only; the adapters carry 16 (12 + 4 in fp32) bytes per parameter.
- activations per sequence of T tokens per layer: (14 H + 6 I) bytes at 16 bit, after Korthikanti et
  al. 2022 (arXiv 2205.05198 §4.1, 34 H for a 4H GELU MLP) with flash attention (no T^2 term) and a
  SwiGLU MLP; with gradient checkpointing only each layer's input (2 H bytes per token) is kept plus one
  layer's full activations. x2 in float32.
- logits: backend trl (TRL >= 1.16 fused, chunked LM head: ``trl/kernels/chunked_logprob.py``) keeps
  fp32 tiles of at most 4,096 tokens x 32,768 vocabulary entries, counted twice (forward and backward
  buffers); backend native materialises the logits of a micro-batch (``rl.micro_batch_size`` sequences):
  8 bytes per (prompt + completion token, vocab entry), HF computing every position's logits
  [ASSUMPTION: the logits, the log-softmax copy and their gradient]. Activations count the same
  micro-batch (issue 24: counting one sequence and completion tokens only was 30x low on SmolLM2).
- DelTA (presets whose ``needs`` holds "hidden") keeps the LM-head inputs of the process's whole generation batch
  (sequences x max_new_tokens x hidden, bf16 on the host when offloaded; ``training.credit.delta``
  streams it in fp32 row chunks of at most 1 GiB, so no full-precision copy): checked against
  ``--host-mem-gb`` per node.
- a fixed framework overhead (CUDA context, NCCL buffers, allocator fragmentation) [ASSUMPTION, 3 GB];
  on CPU (gpus_per_node 0) the process's runtime instead, 0.5 GB (measured: 0.25 GB RSS after importing
  torch, transformers and TRL, plus the grader's and allocator's share). Memory is then per process.
- vLLM colocate reserves ``gpu_memory_utilization`` x GPU memory on every training GPU; inside it go
  the bf16 weights / tensor_parallel_size, 2 GB [ASSUMPTION] of vLLM activations and graphs, and the KV
  cache (2 x layers x kv_heads x head_dim x 2 bytes per token / TP), which must hold at least one whole
  sequence (prompt + max_new_tokens); the plan prints how many sequences it holds at once. Without
  ``sleep_mode`` the reservation adds to the trainer's peak; with it (TRL ``vllm_enable_sleep_mode``) the
  peak is persistent state (weights, grads, optimizer, reference, overhead) + max(activations + logits,
  reservation).

Throughput [ASSUMPTIONS, marked as such in the output; override with flags]:

- training: ``mfu`` (default 0.35) of the GPU's dense bf16 peak (NVIDIA datasheets: H100/H200 SXM 989,
  A100 312, B200 2250, L40S 362 TFLOP/s), 2 P FLOPs per token per forward; passes per token: old-logp
  forward 1, reference forward 1 if KL, policy forward 1 + backward 2 (1 with LoRA: no base weight
  grads) + 1 recompute with gradient checkpointing, CF's counterfactual re-scoring 1 + max_spans
  forwards. Attention FLOPs are ignored (an underestimate for 20k-token sequences).
- generation (vLLM): ``gen_tps_b`` / params-in-billions tokens/s per GPU (default 20,000 on an H100,
  i.e. ~2,500 tok/s for an 8B model in large-batch decoding), scaled by HBM bandwidth for other GPUs
  (decoding is bandwidth bound), and capped by the KV cache: an engine holding c whole sequences decodes
  at most c x 0.7 x HBM bandwidth x TP / bf16 weight bytes tokens/s (one weight read per token step,
  70 % bandwidth efficiency); HF generate (no vLLM) is 10x slower.
- mean completion length ``response_frac`` x max_new_tokens (default 0.5), mean prompt 200 tokens.
Every GPU of the job is charged for the whole run (rollout and update alternate on the same GPUs).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Mapping, Sequence

from common.config import Config, ConfigError, LoRAConfig, ScaleConfig, load_config
from training.credit.delta import CHUNK_BYTES
from training.launch import parse_time_limit
from training.presets import Preset, get_preset

GB = 1e9


@dataclass(frozen=True)
class ModelShape:
    """What the plan needs of a decoder-only transformer (Llama/Qwen layout, SwiGLU MLP, GQA)."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool

    def layer_params(self) -> int:
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        return h * q + 2 * h * kv + q * h + 3 * h * self.intermediate

    @property
    def params(self) -> int:
        """Total parameters (norms and biases ignored: < 0.1 %)."""
        emb = self.vocab * self.hidden * (1 if self.tied else 2)
        return self.layers * self.layer_params() + emb

    def lora_params(self, lora: LoRAConfig) -> int:
        """r x (d_in + d_out) per adapted projection per layer (PEFT LoraConfig.target_modules)."""
        h, q, kv, i = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim, self.intermediate
        dims = {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
                "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}
        unknown = [m for m in lora.target_modules if m not in dims]
        if unknown:
            raise ValueError(f"scale.lora.target_modules: unknown module(s) {unknown}; known: {sorted(dims)}")
        return self.layers * sum(lora.r * sum(dims[m]) for m in lora.target_modules)

    def kv_bytes_per_token(self, tp: int) -> float:
        """bf16 K and V of every layer for one token, split over tensor-parallel ranks."""
        return 2 * self.layers * self.kv_heads * self.head_dim * 2 / min(tp, self.kv_heads)


# config.json values of the hub models the recipes name (hub model cards; checked: params match the
# cards' 8.2B / 14.8B / 3.09B / 1.7B).
KNOWN_MODELS: Mapping[str, ModelShape] = MappingProxyType({
    "Qwen/Qwen3-8B-Base": ModelShape(36, 4096, 12288, 32, 8, 128, 151936, False),
    "Qwen/Qwen3-8B": ModelShape(36, 4096, 12288, 32, 8, 128, 151936, False),
    "Qwen/Qwen3-14B-Base": ModelShape(40, 5120, 17408, 40, 8, 128, 151936, False),
    "Qwen/Qwen3-14B": ModelShape(40, 5120, 17408, 40, 8, 128, 151936, False),
    "Qwen/Qwen3-1.7B": ModelShape(28, 2048, 6144, 16, 8, 128, 151936, True),
    "Qwen/Qwen3-1.7B-Base": ModelShape(28, 2048, 6144, 16, 8, 128, 151936, True),
    "Qwen/Qwen2.5-3B-Instruct": ModelShape(36, 2048, 11008, 16, 2, 128, 151936, True),
    "Qwen/Qwen2.5-3B": ModelShape(36, 2048, 11008, 16, 2, 128, 151936, True),
})


@dataclass(frozen=True)
class GPUSpec:
    peak_tflops: float
    """Dense bf16 tensor-core peak (NVIDIA datasheets, SXM parts)."""
    hbm_tb_s: float


GPUS: Mapping[str, GPUSpec] = MappingProxyType({
    "H100": GPUSpec(989.0, 3.35), "H200": GPUSpec(989.0, 4.8), "A100": GPUSpec(312.0, 2.0),
    "B200": GPUSpec(2250.0, 8.0), "L40S": GPUSpec(362.0, 0.864),
})
REFERENCE_GPU = "H100"
HOST_MEM_GB = 512.0
"""Host RAM per node the plan checks against: the SLURM profile's rl ``mem_mb`` (test_slurm_cluster.py)."""
TRL_TOKEN_TILE, TRL_VOCAB_TILE = 4096, 32768
"""TRL 1.16 fused LM head tiles (kernels/chunked_logprob.py TOKEN_CHUNK_SIZE, trainer/utils.py chunk size)."""


@dataclass(frozen=True)
class Assumptions:
    """Throughput and workload assumptions (see the module docstring); every one is a CLI flag."""

    mfu: float = 0.35
    gen_tps_b: float = 20_000.0
    hf_generate_slowdown: float = 10.0
    response_frac: float = 0.5
    prompt_tokens: int = 200
    overhead_gb: float = 3.0
    cpu_overhead_gb: float = 0.5
    vllm_overhead_gb: float = 2.0
    logit_bytes: float = 8.0


@dataclass(frozen=True)
class Memory:
    """Peak GB per training GPU, by component."""

    weights: float
    grads: float
    optimizer: float
    reference: float
    activations: float
    logits: float
    overhead: float
    vllm_reserved: float

    sleep_mode: bool = False

    @property
    def total(self) -> float:
        persistent = self.weights + self.grads + self.optimizer + self.reference + self.overhead
        if self.sleep_mode:
            return persistent + max(self.activations + self.logits, self.vllm_reserved)
        return persistent + self.activations + self.logits + self.vllm_reserved


@dataclass(frozen=True)
class VLLMFit:
    weights_gb: float
    kv_gb_per_seq: float
    reserved_gb: float
    concurrent_seqs: int


@dataclass(frozen=True)
class MethodPlan:
    method: str
    memory: Memory
    step_s_rollout: float
    step_s_train: float
    gpu_hours_per_run: float


@dataclass(frozen=True)
class Plan:
    experiment: str
    model: str
    params_b: float
    trainable_params_b: float
    train_gpus: int
    vllm_gpus: int
    gpu_type: str
    gpu_mem_gb: float
    snakemake_jobs: int
    rl_runs: int
    rollouts: int
    generated_tokens: float
    trained_tokens: float
    eval_generations: int
    eval_tokens: float
    methods: tuple[MethodPlan, ...]
    vllm: VLLMFit | None
    rl_gpu_hours: float
    eval_gpu_hours: float
    problems: tuple[str, ...]
    notes: tuple[str, ...]


def model_shape(cfg: Config) -> tuple[str, ModelShape]:
    """The recipe's model: a known hub id, a local HF folder (its config.json), or the tiny built model."""
    src = cfg.model.source
    if src is None:
        m = cfg.model
        return "tiny (built)", ModelShape(m.num_layers, m.hidden_size, m.intermediate_size, m.num_heads,
                                          m.num_kv_heads, m.hidden_size // m.num_heads, m.vocab_size, True)
    if src in KNOWN_MODELS:
        return src, KNOWN_MODELS[src]
    conf = Path(src) / "config.json"
    if conf.is_file():
        c = json.loads(conf.read_text())
        heads = c["num_attention_heads"]
        return src, ModelShape(c["num_hidden_layers"], c["hidden_size"], c["intermediate_size"], heads,
                               c.get("num_key_value_heads", heads), c.get("head_dim") or c["hidden_size"] // heads,
                               c["vocab_size"], bool(c.get("tie_word_embeddings", False)))
    raise ValueError(f"model.source {src!r}: not a local folder and not in training.plan.KNOWN_MODELS "
                     f"{sorted(KNOWN_MODELS)}; add its config.json values there")


def eval_problem_count(cfg: Config, bench: str, limit: int | None = None) -> int:
    if bench == "synthetic":
        n = cfg.task.n_heldout
    else:
        from evaluation.benchmarks import get_benchmark  # registry only; files are not read

        n = get_benchmark(bench).count or 0
    return min(n, limit) if limit else n


def eval_suites(cfg: Config) -> dict[str, tuple[tuple[str, ...], list[tuple[str, int, int]]]]:
    """suite -> (its available sets, the checkpoints it evaluates) for every suite with sets
    (``evaluation.suites``; seeds: auto counts the first look)."""
    from evaluation.suites import available_sets, checkpoints

    plan = {name: available_sets(cfg, name) for name in cfg.eval.suites}
    return {name: (sets, checkpoints(cfg, name)) for name, sets in plan.items() if sets}


def eval_generations(cfg: Config) -> tuple[int, float]:
    """Samples generated by every suite on its checkpoints, and their token budget (max_new_tokens each)."""
    gens, tokens = 0, 0.0
    for name, (sets, ckpts) in eval_suites(cfg).items():
        suite = cfg.eval.suites[name]
        n = sum(eval_problem_count(cfg, b, suite.limit_for(b)) for b in sets) * suite.k * len(ckpts)
        gens, tokens = gens + n, tokens + n * suite.max_new_tokens
    return gens, tokens


def snakemake_jobs(cfg: Config) -> int:
    """Jobs of the default target: make_data, build_model, sft, rl (method x seed), per evaluation suite
    eval_generate + eval_score per checkpoint (the SFT start once, each method's checkpoints) and, for each
    suite but curve, suite_report; report, all; convert_gguf; credit_analysis or real_credit."""
    from evaluation.suites import MAIN_SUITE

    suites = eval_suites(cfg)
    jobs = 3 + len(cfg.methods) * len(cfg.seeds) + sum(2 * len(ckpts) for _, ckpts in suites.values()) + 2
    jobs += sum(1 for name, (_, ckpts) in suites.items() if name != MAIN_SUITE and ckpts)
    jobs += 1 if cfg.model.convert_gguf else 0
    jobs += 1 if cfg.credit_analysis else 0  # credit_analysis
    jobs += 1 if cfg.real_credit else 0  # real_credit (real text: the one credit analysis)
    return jobs


def _shard(n_bytes: float, world: int, sharded: bool) -> float:
    return n_bytes / world if sharded else n_bytes


def memory_per_gpu(shape: ModelShape, scale: ScaleConfig, preset: Preset, *, max_prompt: int, max_new: int,
                   a: Assumptions, gpu_mem_gb: float, backend: str = "trl", micro_batch: int | None = None) -> Memory:
    """Peak trainer memory per GPU (per process on CPU; module docstring) for one preset under ``scale``.

    ``micro_batch``: sequences of one native forward (``rl.micro_batch_size``); backend trl uses
    ``scale.per_device_batch``."""
    w = scale.world_size
    zero = 3 if scale.fsdp else {None: 0, "zero1": 1, "zero2": 2, "zero3": 3}[scale.deepspeed]
    b = 2 if scale.dtype == "bfloat16" else 4
    opt_bytes = 12 if scale.dtype == "bfloat16" else 8
    p = shape.params
    if scale.lora is None:
        trainable, frozen = p, 0
    else:
        trainable, frozen = shape.lora_params(scale.lora), p
    weights = _shard(b * (frozen + trainable), w, zero >= 3)
    grads = _shard(b * trainable, w, zero >= 2)
    optimizer = _shard(opt_bytes * trainable, w, zero >= 1)
    # TRL: a separate reference model when beta > 0, except with PEFT (adapters disabled = the base)
    reference = _shard(b * p, w, zero >= 3) if preset.needs_ref_model and scale.lora is None else 0.0
    t = max_prompt + max_new
    per_token_layer = (14 * shape.hidden + 6 * shape.intermediate) * b / 2
    if scale.gradient_checkpointing:
        act = t * (shape.layers * shape.hidden * b + per_token_layer)
    else:
        act = t * shape.layers * per_token_layer
    bsz = (micro_batch if backend != "trl" and micro_batch else scale.per_device_batch) or 1
    if backend == "trl":
        logits = 2 * min(bsz * max_new, TRL_TOKEN_TILE) * min(shape.vocab, TRL_VOCAB_TILE) * 4
    else:
        logits = bsz * t * shape.vocab * a.logit_bytes  # HF computes every position's logits (prompt too)
    vllm = scale.vllm.gpu_memory_utilization * gpu_mem_gb * GB if scale.vllm.mode == "colocate" else 0.0
    overhead = a.overhead_gb if scale.gpus_per_node else a.cpu_overhead_gb
    return Memory(weights / GB, grads / GB, optimizer / GB, reference / GB, bsz * act / GB, logits / GB,
                  overhead, vllm / GB, sleep_mode=scale.vllm.sleep_mode and scale.vllm.mode == "colocate")


def vllm_fit(shape: ModelShape, scale: ScaleConfig, *, seq_len: int, a: Assumptions, gpu_mem_gb: float) -> VLLMFit:
    tp = scale.vllm.tensor_parallel_size
    weights = 2 * shape.params / tp / GB
    kv = shape.kv_bytes_per_token(tp) * seq_len / GB
    reserved = scale.vllm.gpu_memory_utilization * gpu_mem_gb
    free = reserved - weights - a.vllm_overhead_gb
    return VLLMFit(weights, kv, reserved, max(0, math.floor(free / kv)) if kv > 0 else 0)


def gen_tps_per_gpu(shape: ModelShape, gpu: str, *, vllm: bool, a: Assumptions, fit: VLLMFit | None = None,
                    tp: int = 1) -> float:
    """Decode tokens/s per GPU: the saturated assumption, capped by the sequences the KV cache holds."""
    spec = GPUS.get(gpu, GPUS[REFERENCE_GPU])
    tps = a.gen_tps_b / (shape.params / 1e9) * spec.hbm_tb_s / GPUS[REFERENCE_GPU].hbm_tb_s
    if fit is not None:
        per_seq = 0.7 * spec.hbm_tb_s * 1e12 * tp / (2 * shape.params)  # engine tokens/s for one sequence
        tps = min(tps, max(fit.concurrent_seqs, 1) * per_seq / tp)
    return tps if vllm else tps / a.hf_generate_slowdown


def passes_per_token(preset: Preset, scale: ScaleConfig) -> float:
    """Forward-equivalents (2 P FLOPs each) per trained token in one step (module docstring)."""
    passes = 1.0 + 1.0 + (1.0 if scale.lora is not None else 2.0)  # old logp, policy fwd, bwd
    passes += 1.0 if scale.gradient_checkpointing else 0.0
    passes += 1.0 if preset.needs_ref_model else 0.0
    if preset.token_weights == "cf":
        passes += 1.0 + float(preset.knobs.get("max_spans", 10))
    return passes


def make_plan(cfg: Config, *, gpus: int | None = None, gpu_mem_gb: float | None = None, gpu_type: str | None = None,
              nodes: int | None = None, a: Assumptions = Assumptions(), host_mem_gb: float = HOST_MEM_GB) -> Plan:
    """Everything the CLI prints; ``problems`` lists what cannot fit (empty: go)."""
    over = {k: v for k, v in (("gpus_per_node", gpus), ("gpu_mem_gb", gpu_mem_gb), ("gpu_type", gpu_type),
                              ("nodes", nodes)) if v is not None}
    scale = replace(cfg.scale, **over)
    rl, ev = cfg.rl, cfg.eval
    name, shape = model_shape(cfg)
    gpu = scale.gpu_type or REFERENCE_GPU
    mem_gb = scale.gpu_mem_gb
    problems: list[str] = []
    notes: list[str] = []
    world = scale.world_size
    batch = rl.prompts_per_step * rl.group_size
    # ---- configuration checks -----------------------------------------------------------------------
    if scale.deepspeed and scale.fsdp:
        problems.append(f"scale.deepspeed={scale.deepspeed} and scale.fsdp=true: choose one")
    if scale.vllm.mode is not None and scale.gpus_per_node == 0:
        problems.append(f"scale.vllm.mode={scale.vllm.mode} needs GPUs (scale.gpus_per_node is 0)")
    if scale.vllm.mode == "colocate" and scale.gpus_per_node and scale.gpus_per_node % scale.vllm.tensor_parallel_size:
        problems.append(f"scale.vllm.tensor_parallel_size={scale.vllm.tensor_parallel_size} must divide "
                        f"scale.gpus_per_node={scale.gpus_per_node} in colocate mode")
    if cfg.backend == "trl":
        pdb = scale.per_device_batch
        denom = world * scale.grad_accum * rl.mini_batches
        if pdb is None:
            if batch % denom:
                problems.append(f"rollout batch {rl.prompts_per_step} x {rl.group_size} = {batch} "
                                f"is not divisible by GPUs {world} x scale.grad_accum {scale.grad_accum} "
                                f"x rl.mini_batches {rl.mini_batches}")
        elif pdb * denom != batch:
            problems.append(f"batch geometry: scale.per_device_batch {pdb} x GPUs {world} x scale.grad_accum "
                            f"{scale.grad_accum} x rl.mini_batches {rl.mini_batches} = {pdb * denom} != "
                            f"rl.prompts_per_step x rl.group_size = {batch}; set per_device_batch = "
                            f"{batch / denom:g} or change grad_accum")
    max_prompt = scale.max_prompt_tokens or a.prompt_tokens
    # ---- memory per method ----------------------------------------------------------------------------
    method_plans = []
    train_gpus = world if scale.gpus_per_node else 0
    vllm_gpus = scale.vllm.tensor_parallel_size if scale.vllm.mode == "server" else 0
    vfit = None
    if scale.vllm.mode is not None and mem_gb > 0:
        vfit = vllm_fit(shape, scale, seq_len=max_prompt + rl.max_new_tokens, a=a, gpu_mem_gb=mem_gb)
    tps_gen = gen_tps_per_gpu(shape, gpu, vllm=scale.vllm.mode is not None, a=a, fit=vfit,
                              tp=scale.vllm.tensor_parallel_size)
    gen_gpus = vllm_gpus or world
    spec = GPUS.get(gpu)
    if spec is None:
        notes.append(f"gpu_type {gpu!r} not in {sorted(GPUS)}: using {REFERENCE_GPU} throughput")
        spec = GPUS[REFERENCE_GPU]
    peak = spec.peak_tflops * 1e12 * (1.0 if scale.dtype == "bfloat16" else 0.5)  # fp32 runs on TF32
    mean_resp = a.response_frac * rl.max_new_tokens
    total_gpus = train_gpus + vllm_gpus
    for method in cfg.methods:
        preset = get_preset(method, cfg.algorithms.get(method))
        mem = memory_per_gpu(shape, scale, preset, max_prompt=max_prompt, max_new=rl.max_new_tokens, a=a,
                             gpu_mem_gb=mem_gb, backend=cfg.backend,
                             micro_batch=min(rl.micro_batch_size, batch // max(1, world)))
        if "hidden" in preset.needs:
            seqs = batch // max(1, world)  # the local generation batch of one process
            store = seqs * rl.max_new_tokens * shape.hidden * 2
            per_proc = (store + min(CHUNK_BYTES, 2 * store)) / GB  # bf16 store + one fp32 chunk (<= 1 GiB)
            per_node = per_proc * max(1, scale.gpus_per_node)
            msg = (f"{method}: DelTA keeps h of {seqs} sequences x {rl.max_new_tokens} tokens x {shape.hidden} "
                   f"(bf16, streamed in fp32 chunks) = {per_proc:,.1f} GB per process, {per_node:,.1f} GB per node")
            if per_node > host_mem_gb:
                problems.append(msg + f" > host {host_mem_gb:g} GB; recompute h in the reference's K+3 "
                                      f"forwards instead of storing it, or use more GPUs")
            else:
                notes.append(msg)
        flops = batch * (a.prompt_tokens + mean_resp) * 2 * shape.params * passes_per_token(preset, scale)
        t_train = flops / (a.mfu * peak * max(1, world))
        t_gen = batch * mean_resp / (tps_gen * max(1, gen_gpus))
        hours = max(1, total_gpus) * rl.steps * (t_train + t_gen) / 3600
        method_plans.append(MethodPlan(method, mem, t_gen, t_train, hours))
        if mem_gb > 0 and mem.total > mem_gb:
            parts = ", ".join(f"{k} {v:.1f}" for k, v in asdict(mem).items() if v and k != "sleep_mode")
            problems.append(f"{method}: trainer needs {mem.total:.1f} GB per GPU ({parts}) > scale.gpu_mem_gb "
                            f"{mem_gb:g}; try deepspeed zero3/fsdp, gradient_checkpointing, a smaller "
                            f"per_device_batch, LoRA, or vllm mode server")
    if vfit is not None and vfit.concurrent_seqs < 1:
        problems.append(f"vLLM: {vfit.reserved_gb:.1f} GB reserved (gpu_memory_utilization "
                        f"{scale.vllm.gpu_memory_utilization}) < weights {vfit.weights_gb:.1f} + overhead "
                        f"{a.vllm_overhead_gb} + KV of one {max_prompt + rl.max_new_tokens}-token sequence "
                        f"{vfit.kv_gb_per_seq:.2f} GB; raise gpu_memory_utilization or tensor_parallel_size")
    if cfg.backend == "trl" and scale.deepspeed is None and not scale.fsdp and world > 1:
        notes.append("plain DDP: every GPU holds full weights, gradients and optimizer states")
    limit_h = parse_time_limit(scale.time_limit)
    if limit_h is not None and method_plans:
        run_h = max(m.gpu_hours_per_run for m in method_plans) / max(1, total_gpus)
        if run_h > limit_h:
            notes.append(f"an rl job needs ~{run_h:,.0f} h > scale.time_limit {scale.time_limit} ({limit_h:g} h): it "
                         f"will be stopped ~{math.ceil(run_h / limit_h) - 1} time(s) and resume from its last "
                         f"checkpoint on each rerun (--rerun-incomplete)")
    # ---- totals -----------------------------------------------------------------------------------------
    runs = len(cfg.methods) * len(cfg.seeds)
    eval_gen, eval_budget = eval_generations(cfg)
    eval_tokens = eval_budget * a.response_frac
    tps_eval = gen_tps_per_gpu(shape, gpu, vllm=ev.backend == "vllm", a=a)
    return Plan(
        experiment=cfg.experiment, model=name, params_b=shape.params / 1e9,
        trainable_params_b=(shape.lora_params(scale.lora) if scale.lora else shape.params) / 1e9,
        train_gpus=train_gpus, vllm_gpus=vllm_gpus, gpu_type=gpu, gpu_mem_gb=mem_gb,
        snakemake_jobs=snakemake_jobs(cfg), rl_runs=runs, rollouts=runs * rl.steps * batch,
        generated_tokens=runs * rl.steps * batch * mean_resp,
        trained_tokens=runs * rl.steps * batch * (a.prompt_tokens + mean_resp),
        eval_generations=eval_gen, eval_tokens=eval_tokens, methods=tuple(method_plans), vllm=vfit,
        rl_gpu_hours=sum(m.gpu_hours_per_run for m in method_plans) * len(cfg.seeds),
        eval_gpu_hours=eval_tokens / tps_eval / 3600, problems=tuple(problems), notes=tuple(notes),
    )


def _fmt(x: float) -> str:
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.2f}{unit}"
    return f"{x:.0f}"


def render(plan: Plan, a: Assumptions) -> str:
    lines = [
        (f"plan for {plan.experiment}: {plan.model} ({plan.params_b:.2f}B params, "
         f"{plan.trainable_params_b:.4g}B trainable)"),
        f"  GPUs: {plan.train_gpus} training + {plan.vllm_gpus} vLLM server, {plan.gpu_type} {plan.gpu_mem_gb:g} GB",
        f"  snakemake jobs: {plan.snakemake_jobs}   RL runs: {plan.rl_runs}   rollouts: {_fmt(plan.rollouts)}",
        (f"  tokens: generated {_fmt(plan.generated_tokens)}, trained {_fmt(plan.trained_tokens)}; "
         f"evaluation {_fmt(plan.eval_generations)} generations, {_fmt(plan.eval_tokens)} tokens"),
        ("  per method (one run):   rollout s/step  update s/step  GPU-h/run   peak GB/GPU "
         "(weights grads optim ref act logits overhead vllm[slept])"),
    ]
    for m in plan.methods:
        mem = m.memory
        lines.append(f"    {m.method:<20} {m.step_s_rollout:>10.1f} {m.step_s_train:>14.1f} "
                     f"{m.gpu_hours_per_run:>11.1f}   {mem.total:>7.1f} ({mem.weights:.1f} {mem.grads:.1f} "
                     f"{mem.optimizer:.1f} {mem.reference:.1f}"
                     f" {mem.activations:.1f} {mem.logits:.1f} {mem.overhead:.1f} {mem.vllm_reserved:.1f}"
                     f"{' slept' if mem.sleep_mode else ''})")
    if plan.vllm is not None:
        v = plan.vllm
        lines.append(f"  vLLM per engine: weights {v.weights_gb:.1f} GB, KV {v.kv_gb_per_seq:.2f} GB per full "
                     f"sequence, reserved {v.reserved_gb:.1f} GB -> {v.concurrent_seqs} sequences at once")
    job_h = max((m.gpu_hours_per_run for m in plan.methods), default=0.0) / max(1, plan.train_gpus + plan.vllm_gpus)
    lines.append(f"  GPU-hours: RL {plan.rl_gpu_hours:,.1f} + evaluation {plan.eval_gpu_hours:,.1f} = "
                 f"{plan.rl_gpu_hours + plan.eval_gpu_hours:,.1f}; longest rl job ~{job_h:,.1f} h wall-clock")
    lines.append(f"  ASSUMPTIONS: MFU {a.mfu}, vLLM {a.gen_tps_b:,.0f}/params_B tok/s per {REFERENCE_GPU} (HF generate "
                 f"{a.hf_generate_slowdown:g}x slower), mean completion {a.response_frac} x max_new_tokens, prompt "
                 f"{a.prompt_tokens} tokens, overhead {a.overhead_gb} GB (training.plan docstring)")
    lines += [f"  note: {n}" for n in plan.notes]
    lines += [f"  DOES NOT FIT: {p}" for p in plan.problems]
    lines.append("  -> OK: fits" if not plan.problems else "  -> STOP: fix the settings above before any GPU job")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="jobs, tokens, GPU-hours and peak GPU memory of a recipe")
    ap.add_argument("config")
    ap.add_argument("--gpus", type=int, help="GPUs per node (overrides scale.gpus_per_node)")
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--gpu-mem-gb", type=float)
    ap.add_argument("--gpu-type", choices=sorted(GPUS))
    ap.add_argument("--host-mem-gb", type=float, default=HOST_MEM_GB, help="host RAM per node (profile rl mem_mb)")
    d = Assumptions()
    ap.add_argument("--mfu", type=float, default=d.mfu)
    ap.add_argument("--gen-tps-b", type=float, default=d.gen_tps_b, help="vLLM tok/s per GPU x params in B")
    ap.add_argument("--response-frac", type=float, default=d.response_frac)
    ap.add_argument("--prompt-tokens", type=int, default=d.prompt_tokens)
    ap.add_argument("--json", action="store_true", help="print the plan as JSON")
    args = ap.parse_args(argv)
    a = replace(d, mfu=args.mfu, gen_tps_b=args.gen_tps_b, response_frac=args.response_frac,
                prompt_tokens=args.prompt_tokens)
    try:
        cfg = load_config(args.config)
        plan = make_plan(cfg, gpus=args.gpus, gpu_mem_gb=args.gpu_mem_gb, gpu_type=args.gpu_type, nodes=args.nodes, a=a,
                         host_mem_gb=args.host_mem_gb)
    except OSError as exc:
        print(f"plan: {args.config}: {exc.strerror}; pass a recipe YAML (e.g. config/config.yaml)", file=sys.stderr)
        return 2
    except (ConfigError, ValueError, KeyError) as exc:
        print(f"plan: {exc}", file=sys.stderr)
        return 2  # a user error, as creditbench eval's
    print(json.dumps(asdict(plan), indent=1) if args.json else render(plan, a))
    if plan.problems:
        print(f"plan: {len(plan.problems)} setting(s) cannot fit; see DOES NOT FIT above", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
