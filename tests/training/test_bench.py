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
