"""training.plan: hand-computed parameter counts, memory, throughput, job counts; failing settings exit 2."""

from __future__ import annotations

import pytest
import yaml

from common.config import REPO_ROOT, LoRAConfig, config_from_dict, load_config
from training.plan import (
    GB,
    KNOWN_MODELS,
    Assumptions,
    ModelShape,
    main,
    make_plan,
    memory_per_gpu,
    parse_time_limit,
    passes_per_token,
    snakemake_jobs,
)
from training.presets import get_preset

TOY = ModelShape(layers=2, hidden=10, intermediate=20, heads=2, kv_heads=1, head_dim=5, vocab=100, tied=True)
BASE = {"experiment": "p", "output_dir": "o", "seeds": [1], "methods": ["dapo"]}


def _scale(**kw):
    return config_from_dict({**BASE, "scale": kw}).scale


def test_parameter_counts_match_the_model_cards():
    # Qwen3-8B: 36 x (q 4096^2 + k,v 2 x 4096 x 1024 + o 4096^2 + mlp 3 x 4096 x 12288) + 2 x 151936 x 4096
    assert KNOWN_MODELS["Qwen/Qwen3-8B-Base"].params == 36 * 192_937_984 + 2 * 622_329_856 == 8_190_427_136
    assert round(KNOWN_MODELS["Qwen/Qwen3-14B-Base"].params / 1e9, 1) == 14.8
    assert round(KNOWN_MODELS["Qwen/Qwen2.5-3B-Instruct"].params / 1e9, 2) == 3.09
    assert TOY.params == 2 * (100 + 2 * 50 + 100 + 600) + 1000 == 2800


def test_lora_and_kv_counts():
    lora = LoRAConfig(r=32, alpha=32, dropout=0.1,
                      target_modules=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"))
    # Qwen2.5-3B: 32 x [(2048+2048) + 2 (2048+256) + (2048+2048) + 2 (2048+11008) + (11008+2048)] x 36 layers
    assert KNOWN_MODELS["Qwen/Qwen2.5-3B-Instruct"].lora_params(lora) == 32 * 51_968 * 36 == 59_867_136
    assert KNOWN_MODELS["Qwen/Qwen3-8B-Base"].kv_bytes_per_token(1) == 2 * 36 * 8 * 128 * 2 == 147_456
    assert KNOWN_MODELS["Qwen/Qwen3-8B-Base"].kv_bytes_per_token(2) == 73_728


@pytest.mark.parametrize("sharding,weights,grads,optim", [
    ({}, 5600, 5600, 33600),                                # DDP: 2 + 2 + 12 bytes x 2800
    ({"deepspeed": "zero1"}, 5600, 5600, 8400),             # optimizer / 4 ranks
    ({"deepspeed": "zero2"}, 5600, 1400, 8400),             # + gradients / 4
    ({"deepspeed": "zero3"}, 1400, 1400, 8400),             # + weights / 4
    ({"fsdp": True}, 1400, 1400, 8400),                     # FSDP full shard = ZeRO-3
])
def test_memory_of_weights_grads_optimizer_under_sharding(sharding, weights, grads, optim):
    scale = _scale(gpus_per_node=4, dtype="bfloat16", **sharding)
    m = memory_per_gpu(TOY, scale, get_preset("dapo"), max_prompt=6, max_new=4, a=Assumptions(), gpu_mem_gb=80)
    assert (m.weights * GB, m.grads * GB, m.optimizer * GB) == pytest.approx((weights, grads, optim))
    assert m.reference == 0  # dapo has no KL term


def test_memory_of_activations_logits_reference_and_lora():
    a = Assumptions(overhead_gb=0.0)
    kl = get_preset("grpo")  # beta 0.04: a reference copy of the weights
    ckpt = memory_per_gpu(TOY, _scale(dtype="bfloat16", gradient_checkpointing=True), kl, max_prompt=6, max_new=4,
                          a=a, gpu_mem_gb=0)
    # T = 10 tokens; checkpointed: 10 x (2 layers x 10 hidden x 2 B + (14 x 10 + 6 x 20) B) = 3000
    assert ckpt.activations * GB == pytest.approx(3000)
    full = memory_per_gpu(TOY, _scale(dtype="bfloat16"), kl, max_prompt=6, max_new=4, a=a, gpu_mem_gb=0)
    assert full.activations * GB == pytest.approx(10 * 2 * 260)
    assert full.logits * GB == pytest.approx(4 * 100 * 8)  # completion tokens x vocab x 8 B
    assert full.reference * GB == pytest.approx(5600)
    lora = LoRAConfig(r=1, alpha=1, dropout=0, target_modules=("q_proj",))  # 2 layers x 1 x (10 + 10) = 40
    peft = memory_per_gpu(TOY, _scale(dtype="bfloat16", lora={"r": 1, "alpha": 1, "dropout": 0,
                                                              "target_modules": ["q_proj"]}),
                          kl, max_prompt=6, max_new=4, a=a, gpu_mem_gb=0)
    assert TOY.lora_params(lora) == 40
    assert (peft.weights * GB, peft.grads * GB, peft.optimizer * GB, peft.reference) == pytest.approx(
        (2 * 2840, 80, 480, 0))  # frozen base + adapters; the reference is the base with adapters off


def test_vllm_colocate_adds_or_sleeps():
    a = Assumptions(overhead_gb=0.0)
    for sleep, total in ((False, 40 + 1e-9 * (5600 + 5600 + 33600 + 5200 + 3200)),
                         (True, 40 + 1e-9 * (5600 + 5600 + 33600))):
        s = _scale(gpus_per_node=1, gpu_mem_gb=80, dtype="bfloat16",
                   vllm={"mode": "colocate", "gpu_memory_utilization": 0.5, "sleep_mode": sleep})
        m = memory_per_gpu(TOY, s, get_preset("dapo"), max_prompt=6, max_new=4, a=a, gpu_mem_gb=80)
        assert m.total == pytest.approx(total)


def test_passes_per_token():
    full_ckpt = _scale(gradient_checkpointing=True)
    assert passes_per_token(get_preset("dapo"), full_ckpt) == 1 + 1 + 2 + 1  # old logp, fwd, bwd, recompute
    lora = _scale(lora={"r": 8, "alpha": 8, "dropout": 0, "target_modules": ["q_proj"]})
    assert passes_per_token(get_preset("cf_paper"), lora) == 1 + 1 + 1 + 1 + 11  # + ref, + CF 1 + 10 spans


def test_job_count_matches_snakemake_dry_run_of_ci():
    # snakemake -n on config/experiments/ci.yaml: make_data, build_model, sft 1 each, rl 5 (methods, with the
    # A/A twin), eval_generate_curve and eval_score_curve 1 (sft, once) + 5 x 2 checkpoints each, report 1,
    # credit_analysis 1, all 1 = 33 (the real suite's sets: [])
    assert snakemake_jobs(load_config(REPO_ROOT / "config" / "experiments" / "ci.yaml")) == 33


def test_gpu_hours_by_hand():
    raw = {**BASE, "model": {"source": None}, "rl": {"steps": 10, "prompts_per_step": 2, "group_size": 2,
                                                    "max_new_tokens": 100, "checkpoint_every": 10},
           "backend": "trl", "eval": {"suites": {"curve": {"k": 1, "max_new_tokens": 100}}},
           "task": {"n_heldout": 10},
           "scale": {"gpus_per_node": 2, "gpu_type": "A100", "gpu_mem_gb": 80, "dtype": "bfloat16",
                     "per_device_batch": 2, "grad_accum": 1, "vllm": {"mode": "server", "tensor_parallel_size": 1}}}
    cfg = config_from_dict(raw)
    a = Assumptions(mfu=0.5, gen_tps_b=1e6, response_frac=0.5, prompt_tokens=50)
    plan = make_plan(cfg, a=a)
    p = plan.params_b * 1e9
    t_train = 4 * (50 + 50) * 2 * p * 4 / (0.5 * 312e12 * 2)  # batch 4, 100 tokens, passes 4, 2 GPUs
    t_gen = 4 * 50 / (1e6 / plan.params_b * 2.0 / 3.35 * 1)  # A100 bandwidth 2.0 vs H100 3.35, 1 server GPU
    assert plan.methods[0].gpu_hours_per_run == pytest.approx(3 * 10 * (t_train + t_gen) / 3600)
    # make_data, build_model, sft, rl, report, all + suite curve (sft + 1 checkpoint: 2 x (generate, score)) +
    # suite real (sft + 1 final: 2 x (generate, score) + suite_report) + credit_analysis (synthetic task) = 16
    assert (plan.train_gpus, plan.vllm_gpus, plan.rollouts, plan.snakemake_jobs) == (2, 1, 40, 16)
    from evaluation.suites import available_sets

    real = 2 * 2 * len(available_sets(cfg, "real"))  # 2 problems of every real set on 2 checkpoints, k 1
    assert plan.generated_tokens == 40 * 50 and plan.eval_generations == 10 * 2 + real
    assert not plan.problems


def test_time_limit():
    assert parse_time_limit("7-00:00:00") == 168 and parse_time_limit("01:30:00") == 1.5
    assert parse_time_limit(None) is None


def _write(tmp_path, raw):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_cli_exits_2_before_any_gpu_job_when_it_cannot_fit(tmp_path, capsys):
    raw = yaml.safe_load((REPO_ROOT / "config" / "experiments" / "delta_qwen3_8b.yaml").read_text())
    host = ["--host-mem-gb", "2000"]
    assert main([_write(tmp_path, raw), *host]) == 0
    assert main([_write(tmp_path, raw), *host, "--gpu-mem-gb", "40"]) == 2
    assert "DOES NOT FIT" in capsys.readouterr().out
    raw["scale"]["grad_accum"] = 32  # 1 x 8 x 32 x 4 = 1024 != 2048
    assert main([_write(tmp_path, raw), *host]) == 2
    assert "batch geometry" in capsys.readouterr().out
    raw["scale"].update(grad_accum=64, deepspeed="zero3", fsdp=True)
    assert main([_write(tmp_path, raw), *host]) == 2
    raw["scale"].update(fsdp=False)
    assert main([_write(tmp_path, raw)]) == 0  # DelTA's streamed bf16 h fits a 512 GB host
    assert main([_write(tmp_path, raw), "--host-mem-gb", "256"]) == 2  # ... but not a 256 GB one


@pytest.mark.parametrize("name", ["cf_qwen25_3b_gsm8k", "cf_qwen3_1p7b_gsm8k"])
def test_cf_recipes_fit_their_declared_hardware(name):
    plan = make_plan(load_config(REPO_ROOT / "config" / "experiments" / f"{name}.yaml"))
    assert not plan.problems, plan.problems


@pytest.mark.parametrize("name", ["delta_qwen3_8b", "delta_qwen3_14b"])
def test_delta_recipes_fit_with_streamed_bf16_hidden_states(name):
    plan = make_plan(load_config(REPO_ROOT / "config" / "experiments" / f"{name}.yaml"))
    assert not plan.problems, plan.problems
    assert all(m.memory.total <= 80 for m in plan.methods)
    note = next(n for n in plan.notes if n.startswith("delta: DelTA keeps h of 256 sequences"))
    # 256 sequences (2048 / 8 GPUs) x 20480 tokens x hidden x 2 B (bf16) + one 1 GiB fp32 chunk
    hidden = 4096 if name.endswith("8b") else 5120
    assert f"{(256 * 20480 * hidden * 2 + 2**30) / GB:,.1f} GB per process" in note
    # the host check still bites: a 256 GB host cannot hold 8 processes' h
    small_host = make_plan(load_config(REPO_ROOT / "config" / "experiments" / f"{name}.yaml"), host_mem_gb=256)
    assert len(small_host.problems) == 1 and small_host.problems[0].startswith("delta: DelTA keeps h")


def test_logits_memory_by_backend():
    q = KNOWN_MODELS["Qwen/Qwen3-8B-Base"]
    s = _scale(gpus_per_node=1, per_device_batch=1)
    kw = dict(max_prompt=2048, max_new=20480, a=Assumptions(), gpu_mem_gb=80)
    trl = memory_per_gpu(q, s, get_preset("dapo"), backend="trl", **kw)
    native = memory_per_gpu(q, s, get_preset("dapo"), backend="native", **kw)
    assert trl.logits * GB == 2 * 4096 * 32768 * 4  # TRL's fused LM head tiles
    assert native.logits * GB == (2048 + 20480) * 151936 * 8  # every position's logits (HF), one sequence
    micro = memory_per_gpu(q, s, get_preset("dapo"), backend="native", micro_batch=4, **kw)
    assert micro.logits == pytest.approx(4 * native.logits)
    assert micro.activations == pytest.approx(4 * native.activations)
    cpu = memory_per_gpu(q, _scale(), get_preset("dapo"), backend="native", **kw)
    assert cpu.overhead == Assumptions().cpu_overhead_gb and native.overhead == Assumptions().overhead_gb


def test_slurm_resources_and_launch_prefix():
    from training.launch import launch_prefix, slurm_resources

    delta = load_config(REPO_ROOT / "config" / "experiments" / "delta_qwen3_8b.yaml")
    assert slurm_resources(delta, "rl") == {"gpu": 8, "nodes": 1, "runtime": 7 * 24 * 60}
    assert slurm_resources(delta, "eval_generate") == {"gpu": 1} and slurm_resources(delta, "sft") == {"gpu": 0}
    assert launch_prefix(delta) == ("accelerate launch --multi_gpu --num_processes 8 --num_machines 1 "
                                    "--mixed_precision bf16")
    ci = load_config(REPO_ROOT / "config" / "experiments" / "ci.yaml")
    assert slurm_resources(ci, "rl") == {"gpu": 0} and launch_prefix(ci) == "python"
    cf = load_config(REPO_ROOT / "config" / "experiments" / "cf_qwen25_3b_gsm8k.yaml")
    assert launch_prefix(cf) == "python" and slurm_resources(cf, "rl") == {"gpu": 1, "nodes": 1, "runtime": 2 * 24 * 60}
