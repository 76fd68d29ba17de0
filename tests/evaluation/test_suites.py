"""Evaluation suites (config eval.suites; evaluation.suites plans them, evaluation.evaluate runs them as
generate and score jobs): which checkpoints and sets, the old keys' one-line errors, a fixed subset, and one
tiny model through both jobs on a math, a code and a multiple-choice set."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from common.config import ConfigError, config_from_dict, load_config, load_schema
from evaluation import driver, evaluate, suites
from evaluation.benchmarks import BENCHMARKS, DEFAULT_DATA_DIR, SUITES, Problem, load_benchmark
from evaluation.code.score import read_dataset
from evaluation.mcq import prompt_record

REPO = Path(__file__).resolve().parents[2]
BASE = {"experiment": "t", "output_dir": "x", "seeds": [3, 4], "methods": ["grpo", "dapo"]}


def with_suite(name: str, section: dict, **extra) -> dict:
    return {**BASE, "eval": {"suites": {name: section}}, **extra}


def test_default_config_evaluates_sft_and_the_first_seed_finals_on_every_set():
    cfg = load_config(REPO / "config" / "config.yaml")
    real = cfg.eval.suites["real"]
    assert suites.checkpoints(cfg, "real") == [("sft", 1, 0)] + [(m, 1, cfg.rl.steps) for m in cfg.methods]
    assert real.limit == 2 and real.k == 1 and real.temperature == 0.0
    gen, mcq = driver.split_sets(real.sets)
    assert set(mcq) == {"gpqa_diamond", "arc_challenge", "mmlu_stem"} and {"mbpp_plus", "aime24"} <= set(gen)
    assert len(real.sets) == 17


def test_the_curve_suite_evaluates_every_checkpoint_and_the_start_once():
    """The SFT start is one model: one evaluation per suite and set (sampled with the first seed), not one per
    seed; every method x seed x kept checkpoint after it."""
    cfg = load_config(REPO / "config" / "config.yaml")
    ckpts = suites.checkpoints(cfg, "curve")
    assert [c for c in ckpts if c[0] == "sft"] == [("sft", 1, 0)]
    assert len(ckpts) == 1 + len(cfg.methods) * len(cfg.seeds) * len(cfg.rl.checkpoint_steps)
    curve = cfg.eval.suites["curve"]
    assert (curve.sets, curve.k, curve.temperature, curve.template, curve.per_problem_seeds) == (
        ("synthetic",), 4, 1.0, "qa", False)


def test_a_suite_written_keeps_its_built_in_keys_and_a_new_suite_starts_from_the_key_defaults():
    cfg = config_from_dict(with_suite("real", {"limit": 5}))
    assert cfg.eval.suites["real"].limit == 5 and len(cfg.eval.suites["real"].sets) == 17
    assert cfg.eval.suites["curve"].k == 4  # the other built-in suite untouched
    extra = config_from_dict(with_suite("gsm8k_full", {"sets": ["gsm8k"]}))
    new = extra.eval.suites["gsm8k_full"]
    assert (new.limit, new.k, new.checkpoints, new.seeds) == (None, 1, ("sft", "final"), "first")


def test_checkpoints_follow_the_seeds_methods_and_checkpoints_keys():
    section = {"seeds": [4], "methods": ["dapo"], "checkpoints": ["final"]}
    cfg = config_from_dict(with_suite("real", section))
    assert suites.checkpoints(cfg, "real") == [("dapo", 4, cfg.rl.steps)]
    sft_only = config_from_dict(with_suite("real", {"checkpoints": ["sft"]}))
    assert suites.checkpoints(sft_only, "real") == [("sft", 3, 0)]


@pytest.mark.parametrize(("section", "key"), [
    ({"seeds": [9]}, "eval/suites/real/seeds"), ({"methods": ["cf"]}, "eval/suites/real/methods"),
    ({"sets": ["no_such_set"]}, "eval/suites/real/sets/0"),
    ({"checkpoints": ["best"]}, "eval/suites/real/checkpoints/0"),
])
def test_bad_suite_keys_are_named(section, key):
    with pytest.raises(ConfigError, match=f"config key '{key}'"):
        config_from_dict(with_suite("real", section))


@pytest.mark.parametrize(("raw", "line"), [
    ({"real_eval": {"limit": 5}}, "config key 'real_eval': moved; write its keys under eval.suites.real"),
    ({"eval": {"k": 2}}, "config key 'eval/k': sampling knobs live in a suite now; write it as eval.suites.curve.k"),
    ({"eval": {"benchmarks": ["gsm8k"]}}, "write it as eval.suites.curve.sets"),
])
def test_an_old_config_gets_one_line_saying_what_to_write(raw, line):
    with pytest.raises(ConfigError) as err:
        config_from_dict({**BASE, **raw})
    assert line in str(err.value) and "\n" not in str(err.value)


def test_the_readme_eval_snippet_is_a_valid_config():
    text = (REPO / "README.md").read_text()
    snippet = yaml.safe_load(text[text.index("`eval: {suites:") + 1:].split("`")[0])
    cfg = config_from_dict({**BASE, **snippet})
    assert cfg.eval.suites["real"].limit == 200 and cfg.eval.suites["curve"].checkpoints == ("sft", "every")
    assert suites.checkpoints(cfg, "real") == [("sft", 3, 0), ("grpo", 3, cfg.rl.steps), ("dapo", 3, cfg.rl.steps)]
    assert suites.available_sets(cfg, "real") == ("math500",)


def test_schema_lists_every_registered_test_set_and_suite():
    suite = load_schema()["properties"]["eval"]["properties"]["suites"]["additionalProperties"]
    enum = suite["properties"]["sets"]["items"]["enum"]
    assert sorted(enum) == sorted([n for n, b in BENCHMARKS.items() if b.split == "test" and not b.generated]
                                  + list(SUITES) + ["synthetic"])


def test_the_sampling_keys_are_defined_once_in_the_schema():
    """Issue 38: one definition of each sampling knob for every suite (the built-in suites' values are data)."""
    text = (REPO / "workflow" / "schemas" / "config.schema.yaml").read_text()
    section = text[text.index("\n  eval:\n"):text.index("\n  data:\n")]
    for key in ("k", "temperature", "top_p", "max_new_tokens", "batch_size", "limit", "limit_per_set", "subset_seed",
                "template", "templates", "num_fewshot", "mcq_protocol", "per_problem_seeds"):
        assert sum(line.lstrip().startswith(f"{key}:") for line in section.splitlines()) == 1, key


def test_a_suite_of_sets_in_the_config_is_its_sets():
    cfg = config_from_dict(with_suite("real", {"sets": ["competition_math", "gsm8k"]}))
    assert suites.available_sets(cfg, "real") == (*SUITES["competition_math"], "gsm8k")


def test_limit_per_set_names_listed_sets_or_suite_members():
    cfg = config_from_dict(with_suite("real", {"sets": ["competition_math"], "limit_per_set": {"aime24": 3}}))
    real = cfg.eval.suites["real"]
    assert suites.available_sets(cfg, "real") == SUITES["competition_math"] and real.limit_for("aime24") == 3
    bad = config_from_dict(with_suite("real", {"sets": ["gsm8k"], "limit_per_set": {"aime24": 3}}))
    with pytest.raises(ConfigError, match="config key 'eval/suites/real/limit_per_set': \\['aime24'\\] not in"):
        suites.available_sets(bad, "real")


def test_missing_external_set_is_left_out(tmp_path):
    cfg = config_from_dict({**BASE, "data": {"gpqa_dir": str(tmp_path)}})
    sets = suites.available_sets(cfg, "real")
    assert "gpqa_diamond" not in sets and len(sets) == len(cfg.eval.suites["real"].sets) - 1


def test_subset_is_the_seeded_draw_kept_in_file_order():
    problems = [Problem(id=str(i), question="q", answer="1") for i in range(50)]
    seeded = [int(p.id) for p in driver.select(problems, 5, 7)]
    assert seeded == sorted(seeded) and seeded == [int(p.id) for p in driver.select(problems, 5, 7)]
    assert seeded != [0, 1, 2, 3, 4] and driver.select(problems, None, 7) == problems


# ----------------------------------------------------------------------------------------- end to end

SETS = ["gsm8k", "mbpp_plus", "arc_challenge"]


@pytest.fixture(scope="module")
def split_run(tiny_env, tmp_path_factory):
    """generate + score of the tiny model on 2 problems of a math, a code and a multiple-choice set."""
    pytest.importorskip("lm_eval")
    pytest.importorskip("evalplus")
    root = tmp_path_factory.mktemp("real")
    raw = yaml.safe_load(Path(tiny_env["config"]).read_text())
    raw["eval"]["suites"]["real"] = {"sets": SETS, "limit": 2, "max_new_tokens": 8,
                                     "limit_per_set": {"arc_challenge": 5}}
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    out = root / "sft" / "seed1" / "step0"
    ids = ["--method", "sft", "--seed", "1", "--step", "0"]
    assert evaluate.main(["generate", "--config", str(config), "--suite", "real", "--model-dir",
                           str(tiny_env["model"]), *ids, "--out-dir", str(out), "--sets", *SETS]) == 0
    assert evaluate.main(["score", "--config", str(config), "--suite", "real", "--out-dir", str(out),
                           "--sets", *SETS]) == 0
    return config, out


def _summary(out: Path, name: str) -> dict:
    return json.loads((out / f"{name}.summary.json").read_text())


def test_split_jobs_write_summaries_with_their_provenance(split_run):
    _, out = split_run
    for name, n in (("gsm8k", 2), ("mbpp_plus", 2), ("arc_challenge", 5)):
        s = _summary(out, name)
        drawn = [p.id for p in driver.select(load_benchmark(name), n, 0)]
        assert (s["n_problems"], s["k"], s["problem_ids"]) == (n, 1, drawn)
        assert s["data_sha256"] == BENCHMARKS[name].sha256
        assert s["limit"] == n and s["subset_seed"] == 0 and s["n_total"] == BENCHMARKS[name].count
        assert s["grader_version"] and s["template"] and (s["method"], s["seed"], s["step"]) == ("sft", 1, 0)
        samples = [json.loads(x) for x in (out / f"{name}.samples.jsonl").read_text().splitlines()]
        assert len(samples) == n
        assert sum(r["correct"] for r in samples) == sum(map(sum, s["per_problem_correct"]))
    assert _summary(out, "gsm8k")["template"] == "base_boxed"
    assert _summary(out, "mbpp_plus")["template"] == "base_code"
    mcq = _summary(out, "arc_challenge")
    assert mcq["template"] == "lm_eval_mcq_cloze_0shot" and mcq["grader_version"].startswith("lm-eval/")
    assert (mcq["mcq_protocol"], mcq["mcq_metric"]) == ("cloze", "acc_norm")
    assert mcq["avg_at_k"] == mcq["lm_eval_acc_norm"] and mcq["lm_eval_acc"] is not None  # lm-eval's own aggregates
    assert "plus_pass_at_1" in _summary(out, "mbpp_plus")


def test_score_grades_ground_truth_code_right_and_trivial_code_wrong(split_run, tmp_path):
    """The raw file is what score grades: canonical MBPP+ completions pass, `return None` fails."""
    config, out = split_run
    with gzip.open(DEFAULT_DATA_DIR / BENCHMARKS["mbpp_plus"].path, "rt") as fh:
        canonical = {r["task_id"]: r for r in map(json.loads, fh)}
    for kind, expected in (("truth", 1.0), ("wrong", 0.0)):
        work = tmp_path / kind
        work.mkdir()
        (work / "mbpp_plus.gen.json").write_text((out / "mbpp_plus.gen.json").read_text())
        rows = [json.loads(x) for x in (out / "mbpp_plus.raw.jsonl").read_text().splitlines()]
        for r in rows:
            task = canonical[r["problem_id"]]
            r["response"] = task["canonical_solution"] if kind == "truth" else \
                f"\ndef {task['entry_point']}(*args, **kwargs):\n    return None\n"
        (work / "mbpp_plus.raw.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        evaluate.main(["score", "--config", str(config), "--suite", "real", "--out-dir", str(work),
                       "--sets", "mbpp_plus"])
        s = _summary(work, "mbpp_plus")
        assert s["avg_at_k"] == s["plus_pass_at_1"] == s["base_pass_at_1"] == expected, kind
        questions = {p.id: p.question for p in load_benchmark("mbpp_plus")}
        for r in map(json.loads, (work / "mbpp_plus.samples.jsonl").read_text().splitlines()):
            assert r["program"] == questions[r["problem_id"]] + r["response"]  # what EvalPlus ran


def test_score_refuses_raw_samples_that_do_not_match_the_subset(split_run, tmp_path):
    config, out = split_run
    (tmp_path / "gsm8k.gen.json").write_text((out / "gsm8k.gen.json").read_text())
    (tmp_path / "gsm8k.raw.jsonl").write_text((out / "gsm8k.raw.jsonl").read_text().splitlines()[0] + "\n")
    with pytest.raises(ValueError, match="raw samples do not match"):
        evaluate.main(["score", "--config", str(config), "--suite", "real", "--out-dir", str(tmp_path),
                       "--sets", "gsm8k"])


def test_score_checks_the_letter_match_against_lm_eval(split_run, tmp_path):
    config, out = split_run
    (tmp_path / "arc_challenge.gen.json").write_text((out / "arc_challenge.gen.json").read_text())
    rows = [json.loads(x) for x in (out / "arc_challenge.raw.jsonl").read_text().splitlines()]
    rows[0]["lm_eval_correct"] = not rows[0]["lm_eval_correct"]
    (tmp_path / "arc_challenge.raw.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match="disagree"):
        evaluate.main(["score", "--config", str(config), "--suite", "real", "--out-dir", str(tmp_path),
                        "--sets", "arc_challenge"])


def test_score_writes_the_letter_dominance_warning_into_the_summary(split_run, tmp_path):
    """Every item answered A: the summary (what the report reads) says so."""
    config, out = split_run
    (tmp_path / "arc_challenge.gen.json").write_text((out / "arc_challenge.gen.json").read_text())
    gold = {p.id: p.answer for p in load_benchmark("arc_challenge")}
    rows = [json.loads(x) for x in (out / "arc_challenge.raw.jsonl").read_text().splitlines()]
    rows = [{**r, "response": "A", "lm_eval_correct": gold[r["problem_id"]] == "A"} for r in rows]
    (tmp_path / "arc_challenge.raw.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    evaluate.main(["score", "--config", str(config), "--suite", "real", "--out-dir", str(tmp_path),
                   "--sets", "arc_challenge"])
    assert _summary(tmp_path, "arc_challenge")["warnings"][0] == (  # then the context's (items lm-eval cut)
        "arc_challenge: option A is predicted for 5 of 5 items (100 %); the accuracy then measures how often the "
        "gold answer is A, not knowledge")
    assert isinstance(_summary(out, "arc_challenge")["warnings"], list)  # written for every multiple-choice set


def test_gpqa_prompts_are_kept_only_as_a_hash():
    assert set(prompt_record("gpqa_diamond", "Question: secret")) == {"prompt_sha256"}
    assert prompt_record("arc_challenge", "Question: q") == {"prompt": "Question: q"}


def test_score_counts_a_grader_timeout_and_cut_samples_in_the_summary_and_the_real_tables(split_run, tmp_path):
    """Forced failures through the score job and the report: an adversarial prediction the checker cannot
    settle within a tiny grader_timeout_s (a timeout) and samples marked cut at the token limit are counted in
    the summaries and in the real-set tables. (A program that kills its sandbox's init and parent, as the
    hostile-code tests do, is contained and graded wrong: a sandbox error is forced from outside below.)"""
    from evaluation.report import __main__ as report_cli

    config, out = split_run
    raw_cfg = yaml.safe_load(Path(config).read_text())
    raw_cfg["eval"]["grader_timeout_s"] = 0.01
    tight = tmp_path / "config.yaml"
    tight.write_text(yaml.safe_dump(raw_cfg))
    work = tmp_path / "eval" / "real" / "sft" / "seed1" / "step0"
    work.mkdir(parents=True)
    edits = {"gsm8k": {"response": r"So the answer is \boxed{9^{9^{9^{9}}}}", "finish_reason": "stop"},
             "mbpp_plus": {"finish_reason": "stop"}}
    for name, edit in edits.items():
        (work / f"{name}.gen.json").write_text((out / f"{name}.gen.json").read_text())
        rows = [json.loads(x) for x in (out / f"{name}.raw.jsonl").read_text().splitlines()]
        rows[0].update(edit)
        rows[1]["finish_reason"] = "length"
        (work / f"{name}.raw.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert evaluate.main(["score", "--config", str(tight), "--suite", "real", "--out-dir", str(work),
                          "--sets", *edits]) == 0
    math, code = _summary(work, "gsm8k")["drops"], _summary(work, "mbpp_plus")["drops"]
    assert (math["grader_timeout"], math["failed"], math["graded"], math["overlong"]) == (1, 1, 1, 1)
    assert (code["sandbox_error"], code["failed"], code["graded"], code["overlong"]) == (0, 0, 2, 1)
    assert report_cli.main(["--results", str(tmp_path), "--eval-dir", "eval/real", "--out", str(tmp_path / "t"),
                            "--baseline", "sft", "--n-boot", "50", "--n-perm", "50", "--audit-max-samples", "0"]) == 0
    for table, expected in (("gsm8k", math), ("code", code)):
        header, row = (tmp_path / "t" / f"{table}.csv").read_text().splitlines()[:2]
        cells = dict(zip(header.split(","), row.split(",")))
        assert {key: int(cells[key]) for key in ("requested", "graded", "failed", "overlong")} == \
            {key: expected[key] for key in ("requested", "graded", "failed", "overlong")}, table
    failures = (tmp_path / "t" / "failures.md").read_text()
    assert "| timeout |" in failures and "Warning: drops above 5 %" in failures


MARK = "cb-sandbox-kill"  # the process name a sample gives its check, so that the test finds that check's sandbox
SANDBOX_UIDS = 0x40000000  # evaluation.code.sandbox.sandbox_uid draws every sandbox's uid at or above this


def _harnesses_running_the_marked_check(scorer: int) -> set[int]:
    """Host pids of the sandbox harnesses started (through ``unshare``) by process ``scorer`` whose forked check
    named itself :data:`MARK`: only this test's own sandboxes, never another run's."""
    procs = {}
    for d in Path("/proc").iterdir():
        try:
            status = dict(ln.split(":", 1) for ln in (d / "status").read_text().splitlines() if ":" in ln)
            procs[int(d.name)] = (status["Name"].strip(), int(status["Uid"].split()[0]), int(status["PPid"]))
        except (OSError, ValueError, KeyError):
            continue
    out = set()
    for name, uid, harness in procs.values():
        unshare = procs.get(harness, ("", 0, 0))[2]
        if name == MARK and uid >= SANDBOX_UIDS and procs.get(unshare, ("", 0, 0))[2] == scorer:
            out.add(harness)
    return out


def test_score_counts_a_sandbox_that_dies_under_a_sample_as_a_sandbox_error(split_run, tmp_path):
    """A forced sandbox error through the score job (the eval_score rule's command, run as a subprocess) and the
    report: the code sandboxes running one sample's checks are killed from the host while they run (as the
    host's OOM killer or an operator would; a sample cannot kill its sandbox from inside, its harness is the
    PID namespace's init). That sample is recorded as ``crash`` and counted as failed (sandbox error) in the
    summary, the command's line and the code table, neither graded wrong nor dropped. Sample 0 holds both its
    checks; sample 1 is the right program holding only its plus check, so its base check passes (in a fresh
    sandbox) and the deciding check dies: a sandbox error too, not a wrong program."""
    from evaluation.report import __main__ as report_cli

    config, out = split_run
    work = tmp_path / "eval" / "real" / "sft" / "seed1" / "step0"
    work.mkdir(parents=True)
    (work / "mbpp_plus.gen.json").write_text((out / "mbpp_plus.gen.json").read_text())
    rows = [json.loads(x) for x in (out / "mbpp_plus.raw.jsonl").read_text().splitlines()]
    hold = f"import ctypes, time\nctypes.CDLL(None).prctl(15, {MARK.encode()!r}, 0, 0, 0)\ntime.sleep(60)\n"
    rows[0]["response"] = hold  # PR_SET_NAME, then hold the check open until its sandbox dies: base and plus
    task = read_dataset(DEFAULT_DATA_DIR / BENCHMARKS["mbpp_plus"].path)[rows[1]["problem_id"]]
    entry, n_base = task["entry_point"], len(task["base_input"])
    hold_plus = "\n".join(" " * 8 + ln for ln in hold.splitlines())
    rows[1]["response"] = (  # the right program, held only in its plus check (called more often than base)
        f"{task['canonical_solution']}\n_calls, _right = [0], {entry}\n\n\ndef {entry}(*args):\n"
        f"    _calls[0] += 1\n    if _calls[0] > {n_base}:\n{hold_plus}\n    return _right(*args)\n")
    (work / "mbpp_plus.raw.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cmd = [sys.executable, "-m", "evaluation.evaluate", "score", "--config", str(config), "--suite", "real",
           "--out-dir", str(work), "--sets", "mbpp_plus"]
    proc = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    killed: set[int] = set()
    try:
        while proc.poll() is None:
            for pid in _harnesses_running_the_marked_check(proc.pid) - killed:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            time.sleep(0.05)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    assert len(killed) == 3, killed  # sample 0's base and plus checks, sample 1's plus check: a sandbox each
    assert stderr.count("crashed its sandbox; recorded as crash") == 3
    samples = [json.loads(x) for x in (work / "mbpp_plus.samples.jsonl").read_text().splitlines()]
    assert [(s["reason"], s["correct"], s["extracted"]) for s in samples] == [
        ("crash", False, "base=crash plus=crash"),
        ("crash", False, "base=pass plus=crash")]  # base passed in a fresh sandbox; the deciding check died
    drops = _summary(work, "mbpp_plus")["drops"]
    assert (drops["requested"], drops["graded"], drops["failed"], drops["sandbox_error"]) == (2, 0, 2, 2)
    assert "2 failed (0 generation, 2 sandbox, 0 grader timeout)" in stdout
    assert report_cli.main(["--results", str(tmp_path), "--eval-dir", "eval/real", "--out", str(tmp_path / "t"),
                            "--baseline", "sft", "--n-boot", "50", "--n-perm", "50", "--audit-max-samples", "0"]) == 0
    header, row = (tmp_path / "t" / "code.csv").read_text().splitlines()[:2]
    cells = dict(zip(header.split(","), row.split(",")))
    assert {key: int(cells[key]) for key in ("requested", "graded", "failed")} == {"requested": 2, "graded": 0,
                                                                                   "failed": 2}
    failures = (tmp_path / "t" / "failures.md").read_text()
    assert "| crash |" in failures and "Warning: drops above 5 %" in failures
