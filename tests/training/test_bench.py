"""The step bench's bookkeeping: rotation, paired ratios, the control preset and forced-length sampling."""

from __future__ import annotations

import dataclasses

import torch

from training.bench import CONTROL, bench_preset, forced_length_sampler, paired_ratios, ratio_line, rotated
from training.presets import PRESETS


def test_rotation_puts_every_preset_first_equally_often():
    names = ["dapo", CONTROL, "cf"]
    firsts = [rotated(names, k)[0] for k in range(6)]
    assert firsts == ["dapo", CONTROL, "cf"] * 2
    assert all(sorted(rotated(names, k)) == sorted(names) for k in range(6))


def test_control_is_dapo_with_another_name():
    assert dataclasses.replace(bench_preset(CONTROL), name="dapo") == PRESETS["dapo"]


def test_ratios_are_paired_per_round():
    times = {"dapo": [{"total": 1.0}, {"total": 2.0}, {"total": 4.0}],
             "cf": [{"total": 1.2}, {"total": 2.2}, {"total": 4.8}]}
    assert paired_ratios(times, "cf") == [1.2, 1.1, 1.2]
    line = ratio_line("step_ratio_vs_dapo cf", paired_ratios(times, "cf"))
    assert line.startswith("step_ratio_vs_dapo cf 1.200 spread ") and line.endswith(" n 3")


def test_forced_length_sampler_never_stops_at_eos(tiny_env):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_env["model"], padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(tiny_env["model"]).eval()
    enc = tok(["1+1=", "2+3="], return_tensors="pt", padding=True, add_special_tokens=False)
    # make EOS the most likely token everywhere: plain sampling stops, the forced sampler does not
    with torch.no_grad():
        head = model.get_output_embeddings()
        head.weight[tok.eos_token_id] = 0.0
        head.bias = torch.nn.Parameter(torch.zeros(head.weight.shape[0]))
        head.bias[tok.eos_token_id] = 50.0
    kw = dict(n=2, temperature=1.0, top_p=1.0, max_new_tokens=12, generator_seed=0)
    from evaluation.generation.hf import sample_hf

    assert (sample_hf(model, tok, enc["input_ids"], enc["attention_mask"], **kw) == tok.eos_token_id).any()
    forced = forced_length_sampler(model, tok, enc["input_ids"], enc["attention_mask"], **kw)
    assert forced.shape[1] == 12 and not (forced == tok.eos_token_id).any()
    assert model.generation_config.min_new_tokens != 12  # restored


def test_reasoning_workload_has_L_reasoning_tokens_spans_and_signal(tiny_env):
    """``--reasoning-tokens L``: every completion is L reasoning tokens, a boxed answer and EOS; right and
    wrong alternate in every group (advantages ±1); CF finds spans across the reasoning."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from common.io import read_jsonl
    from training.bench import cf_work, reasoning_sampler
    from training.rl import grade_rollout, sample_rollout

    L = 40
    tok = AutoTokenizer.from_pretrained(tiny_env["model"], padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(tiny_env["model"]).eval()
    problems = read_jsonl(tiny_env["train"])
    rl = dataclasses.replace(tiny_env["cfg"].rl, prompts_per_step=2, group_size=4, max_new_tokens=L + 16)
    ro = grade_rollout(sample_rollout(model, tok, problems, rl, seed=0, step=0,
                                      sampler=reasoning_sampler(problems, L)), tok, timeout_s=5)
    boxed = tok.encode(" \\boxed{", add_special_tokens=False)[0]
    for i in range(ro.response_ids.shape[0]):
        ids = ro.response_ids[i, : int(ro.response_mask[i].sum())].tolist()
        assert ids[L] == boxed and ids[-1] == tok.eos_token_id and tok.eos_token_id not in ids[:-1]
    assert ro.correct.tolist() == [1.0, 0.0] * 4
    work = cf_work(tok, ro, rl.max_new_tokens)
    assert work["spans_per_completion"] >= 3 and work["needed"] > 0 and work["reference"] > work["needed"]


def test_bench_cli_prints_cf_floor_and_window_lines(tmp_path):
    """The command itself, scaled down: ratios with spread, CF's floor ratio, query tokens (the re-scoring
    forwards ran at least what CF needs) and the window's fidelity against exact CF."""
    import os
    import re
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-m", "training.bench", "--presets", "dapo,cf,cf_w4", "--reasoning-tokens",
                          "24", "--steps", "2", "--sft-steps", "10", "--prompts", "2", "--group", "4", "--hidden", "32",
                          "--layers", "1", "--cf-windows", "0"], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout
    assert re.search(r"step_ratio_vs_dapo cf \d+\.\d+ spread \d+\.\d+-\d+\.\d+ .* reasoning_tokens 24", out), out
    assert re.search(r"cf_credit_floor_ratio \d+\.\d+ spread", out) and "cf_step_floor_vs_dapo" in out, out
    m = re.search(r"cf_query_tokens needed (\d+) ran (\d+) .* reference \(1\+n_spans\)x\(P\+L\) (\d+)", out)
    assert m and 0 < int(m[1]) <= int(m[2]) and int(m[3]) > int(m[1]), out
    assert re.search(r"cf_w0_fidelity credit_s .* drop_spearman -?\d", out), out


def test_bench_cli_trl_ratio_with_both_sides_work(tmp_path):
    """``--trl`` through the command, scaled down: the TRL/native ratio with spread, both backends' phase
    medians and the tokens each generated and trained per round (same prompts, so the reader can see the
    work is alike)."""
    import os
    import re
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-m", "training.bench", "--presets", "dapo", "--trl", "--steps", "0",
                          "--trl-rounds", "2", "--sft-steps", "10", "--prompts", "2", "--group", "2", "--hidden", "32",
                          "--layers", "1", "--max-new-tokens", "12"], capture_output=True, text=True, env=env,
                         timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout
    assert re.search(r"step_ratio_trl_vs_native \d+\.\d+ spread \d+\.\d+-\d+\.\d+ .* n 2", out), out
    assert "step_ratio_vs_dapo" not in out  # --steps 0: no preset rounds
    for label in ("trained_token_ratio_trl_vs_native", "generated_token_ratio_trl_vs_native"):  # work divided out
        assert re.search(rf"{label} \d+\.\d+ spread \d+\.\d+-\d+\.\d+ .* n [12]$", out, re.M), out
    assert re.search(r"^native +(\d+\.\d+ +){6}\d+\.\d+$", out, re.M) and re.search(r"^trl +(\d+\.\d+ +){6}", out, re.M)
    for backend in ("native", "trl"):
        m = re.search(rf"trl_vs_native_work {backend} tokens_generated (\d+)/(\d+) tokens_trained \d+/\d+ "
                      r"response_length [\d.]+/[\d.]+", out)
        assert m and all(0 < int(t) <= 4 * 12 for t in m.groups()), out
