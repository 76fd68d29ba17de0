"""lm-eval on the OOD sets, offline, with a tiny randomly initialised Qwen3 model built here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.benchmarks import load_benchmark, resolve_gpqa_dir
from evaluation.driver import select
from evaluation.mcq import OOD_SETS, task_config, write_task_file


def _tiny_model(path: Path) -> Path:
    torch = pytest.importorskip("torch")
    tokenizers = pytest.importorskip("tokenizers")
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token=None))
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(["Question: Answer: A. B. C. D. the of and to a in is"], trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=4096,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    Qwen3ForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_task_file_and_config(tmp_path: Path) -> None:
    f = tmp_path / "arc.jsonl"
    assert write_task_file("arc_challenge", f) == 1172
    row = json.loads(f.read_text().splitlines()[0])
    assert row["letters"][row["answer"]] == "C" and len(row["choices"]) == 4
    cfg = task_config("arc_challenge", f)
    assert cfg["dataset_path"] == "json" and cfg["dataset_kwargs"]["data_files"]["test"] == str(f)


def test_lm_eval_runs_offline_on_tiny_model(tmp_path: Path) -> None:
    pytest.importorskip("lm_eval")
    import torch

    from evaluation.mcq import run_ood

    torch.set_num_threads(1)
    model = _tiny_model(tmp_path / "tiny")
    res = run_ood(model, tasks=OOD_SETS, limit=5)
    for name in ("arc_challenge", "mmlu_stem"):
        assert res[name].n == 5 and 0.0 <= res[name].acc <= 1.0
    if (resolve_gpqa_dir() / "gpqa_diamond.csv").is_file():
        assert res["gpqa_diamond"].n == 5 and res["gpqa_diamond"].acc is not None
    else:
        assert res["gpqa_diamond"].skipped
    arc = res["arc_challenge"]
    assert [i.id for i in arc.items] == [p.id for p in select(load_benchmark("arc_challenge"), 5, 0)]
    assert sum(i.correct for i in arc.items) / 5 == arc.acc
    assert all(i.correct == (i.predicted == i.target) and len(i.logliks) == 4 for i in arc.items)


def test_lm_eval_with_a_loaded_model_matches_the_folder(tmp_path: Path) -> None:
    """The eval_generate job hands lm-eval the model it already loaded: same verdicts as from the folder."""
    pytest.importorskip("lm_eval")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evaluation.mcq import run_ood

    torch.set_num_threads(1)
    model = _tiny_model(tmp_path / "tiny")
    chosen = {"mmlu_stem": load_benchmark("mmlu_stem")[10:14]}
    by_path = run_ood(model, tasks=["mmlu_stem"], problems=chosen)["mmlu_stem"]
    loaded = run_ood(tmp_path / "unused", tasks=["mmlu_stem"], problems=chosen,
                     model=AutoModelForCausalLM.from_pretrained(model),
                     tokenizer=AutoTokenizer.from_pretrained(model))["mmlu_stem"]
    assert [i.id for i in by_path.items] == [p.id for p in chosen["mmlu_stem"]]
    assert [(i.id, i.predicted) for i in loaded.items] == [(i.id, i.predicted) for i in by_path.items]
    for a, b in zip(loaded.items, by_path.items):
        assert a.logliks == pytest.approx(b.logliks, abs=1e-4)


def test_gpqa_missing_is_skipped_not_fatal(tmp_path: Path) -> None:
    pytest.importorskip("lm_eval")
    from evaluation.mcq import run_ood

    res = run_ood(tmp_path / "no-model", tasks=["gpqa_diamond"], gpqa_dir=tmp_path)
    assert "not found" in res["gpqa_diamond"].skipped


def _lm_eval_own_task(name: str, data_file: Path) -> dict:
    """lm-eval's bundled task YAML (``include`` resolved), reading ``data_file`` instead of the HF hub."""
    import lm_eval
    import yaml

    task_dir = Path(lm_eval.__file__).parent / "tasks" / "arc"
    cfg = yaml.safe_load((task_dir / f"{name}.yaml").read_text())
    while "include" in cfg:
        base = yaml.safe_load((task_dir / cfg.pop("include")).read_text())
        cfg = {**base, **cfg}
    for key in ("tag", "dataset_name", "training_split", "validation_split"):
        cfg.pop(key, None)
    return {**cfg, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(data_file)},
                                                              "cache_dir": str(data_file.parent / "hf")}}


def test_cloze_agrees_per_item_with_lm_evals_own_arc_challenge_task(tiny_env, tmp_path: Path) -> None:
    """Our cloze protocol vs lm-eval's standard ``arc_challenge`` task on the same items, same model."""
    lm_eval = pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    from evaluation.driver import select as subset
    from evaluation.mcq import run_ood

    chosen = subset(load_benchmark("arc_challenge"), 30, seed=0)
    ours = run_ood(tiny_env["model"], tasks=["arc_challenge"], problems={"arc_challenge": chosen},
                   protocol="cloze")["arc_challenge"]
    upstream = tmp_path / "arc_upstream.jsonl"  # the allenai/ai2_arc schema that lm-eval's task reads
    rows = [{"id": p.id, "question": p.question, "answerKey": p.answer,
             "choices": {"text": list(p.choices), "label": list("ABCDE"[:len(p.choices)])}} for p in chosen]
    upstream.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = lm_eval.simple_evaluate(model="hf", model_args={"pretrained": str(tiny_env["model"]), "dtype": "float32"},
                                  tasks=[_lm_eval_own_task("arc_challenge", upstream)], device="cpu", batch_size=1,
                                  bootstrap_iters=0, log_samples=True, task_manager=TaskManager(include_defaults=False))
    theirs = sorted(out["samples"]["arc_challenge"], key=lambda s: s["doc_id"])
    assert [s["doc"]["id"] for s in theirs] == [i.id for i in ours.items] == [p.id for p in chosen]
    agree = sum((i.correct, i.correct_norm) == (bool(s["acc"]), bool(s["acc_norm"]))
                for i, s in zip(ours.items, theirs))
    assert agree == len(chosen)
    for i, s in zip(ours.items, theirs):
        assert i.logliks == pytest.approx([float(r[0]) for r in s["filtered_resps"]], abs=1e-5)
        assert i.prompt == s["arguments"][0][0]
    assert ours.acc == out["results"]["arc_challenge"]["acc,none"]
    assert ours.acc_norm == out["results"]["arc_challenge"]["acc_norm,none"]
    assert sum(i.correct_norm for i in ours.items) / len(chosen) == ours.acc_norm


def test_letters_protocol_lists_the_options_and_scores_the_letters(tiny_env) -> None:
    pytest.importorskip("lm_eval")
    from evaluation.mcq import run_ood

    chosen = {"arc_challenge": load_benchmark("arc_challenge")[:3]}
    res = run_ood(tiny_env["model"], tasks=["arc_challenge"], problems=chosen, protocol="letters")["arc_challenge"]
    assert res.template == "lm_eval_mcq_letters_0shot" and res.acc_norm is None
    assert all("\nA. " in i.prompt and i.correct_norm is None for i in res.items)


def test_cli_limit_draws_the_drivers_subset(tmp_path: Path) -> None:
    """``python -m evaluation.mcq MODEL --limit N`` evaluates the N problems every other path evaluates (the
    driver's stratified, seeded draw), not the first N of the file."""
    pytest.importorskip("lm_eval")
    model, out = _tiny_model(tmp_path / "tiny"), tmp_path / "mmlu.json"
    cmd = [sys.executable, "-m", "evaluation.mcq", str(model), "--tasks", "mmlu_stem", "--limit", "6",
           "--subset-seed", "3", "--out", str(out)]
    subprocess.run(cmd, cwd=Path(__file__).resolve().parents[2], check=True, capture_output=True, timeout=600,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    got = [i["id"] for i in json.loads(out.read_text())["mmlu_stem"]["items"]]
    problems = load_benchmark("mmlu_stem")
    assert got == [p.id for p in select(problems, 6, 3)] != [p.id for p in problems[:6]]
