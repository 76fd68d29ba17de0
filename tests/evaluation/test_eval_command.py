"""``creditbench eval`` through the command (subprocess) on the tiny model: the README's quick start as
written, one-line errors before any work for each bad input, run identity, file modes and resume."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluation import driver, harness

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).with_name("creditbench")


def command() -> list[str]:
    """The installed console script (else ``python -m training.cli``, the same ``main``)."""
    return [str(SCRIPT)] if SCRIPT.is_file() else [sys.executable, "-m", "training.cli"]


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": "1", **extra}


def creditbench(*args: str, cwd: Path = REPO, timeout: float = 900, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*command(), *args], cwd=cwd, env=env(**extra), capture_output=True, text=True,
                          timeout=timeout)


def readme_commands(section: str) -> list[list[str]]:
    """The ``creditbench`` lines of the README's fenced block under ``## <section>``, comments dropped."""
    text = (REPO / "README.md").read_text(encoding="utf-8").split(f"## {section}", 1)[1]
    block = text.split("```bash", 1)[1].split("```", 1)[0]
    return [shlex.split(line.split("#", 1)[0]) for line in block.splitlines() if line.startswith("creditbench")]


def scaled(argv: list[str], model: Path, out: Path, limit: str = "2") -> list[str]:
    """A README command with the models (DIR, DIR2), the output folders (results/eval, results/eval2: OUT,
    OUT2) and --limit replaced (nothing else)."""
    folders = {"DIR": str(model), "DIR2": str(model), "results/eval": str(out), "results/eval2": f"{out}2"}
    argv = [folders.get(a, a) for a in argv]
    if "--limit" in argv:
        argv[argv.index("--limit") + 1] = limit
    return argv


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Each test's own per-sample cache (the default is shared by every run of a user)."""
    monkeypatch.setenv("CREDITBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_readme_quick_start_runs_as_written(tiny_env, tmp_path):
    """Every quick-start line, with the tiny model, a smaller --limit and a temporary --out; files 0644."""
    pytest.importorskip("lm_eval")
    lines = readme_commands("Quick start: evaluate any model")
    assert lines and lines[0][:2] == ["creditbench", "eval"]
    out = tmp_path / "eval"
    old = os.umask(0o022)
    try:
        for argv in lines:
            res = creditbench(*scaled(argv, tiny_env["model"], out)[1:])
            assert res.returncode == 0, (argv, res.stderr[-3000:])
    finally:
        os.umask(old)
    results = json.loads((out / "results.json").read_text())
    sets = lines[0][lines[0].index("--sets") + 1].split(",")
    assert sorted(results["results"]) == sorted(sets) and results["n-samples"]["gsm8k"]["effective"] == 2
    assert results["model"]["sha256"] == harness.model_sha256(tiny_env["model"].resolve())
    assert results["model"]["resolved"] == str(tiny_env["model"].resolve()) and results["date"].startswith("20")
    assert results["command"].startswith("creditbench eval --model") and results["git_hash"]
    assert results["summaries"]["gsm8k"] == "eval/model/seed0/step0/gsm8k.summary.json"
    main = (out / "tables" / "main.md").read_text()  # the report read every summary
    assert "| model |" in main and "math500" in main, main
    assert "model" in (out / "tables" / "gsm8k.md").read_text() and "arc" in (out / "tables" / "ood.md").read_text()
    compared = creditbench(*scaled(next(a for a in lines if a[1] == "compare"), tiny_env["model"], out)[1:])
    assert compared.returncode == 0 and "### gsm8k" in compared.stdout and "### Avg" in compared.stdout
    avg = compared.stdout.split("### Avg", 1)[1]
    assert f"| {2 * len(sets)} |" in avg and "DAPO" not in compared.stdout  # every set in Avg, model words
    regressed = creditbench("regress", str(out), str(out))  # run roots, not only tables folders
    assert regressed.returncode == 0 and "regress: OK" in regressed.stdout, regressed.stdout + regressed.stderr
    modes = {p.relative_to(out).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in files_under(out)}
    assert modes and all(m == 0o644 for m in modes.values()), modes


BAD = {  # name -> (arguments after `creditbench eval`, words the one line must hold)
    "model missing": (["--sets", "gsm8k"], ["--model"]),
    "model empty": (["--model", "", "--sets", "gsm8k"], ["--model", "empty"]),
    "model no such folder": (["--model", "{tmp}/nope", "--sets", "gsm8k"], ["--model", "no such folder"]),
    "model a file": (["--model", "{tmp}/file.txt", "--sets", "gsm8k"], ["--model", "is a file"]),
    "model not a model": (["--model", "{tmp}", "--sets", "gsm8k"], ["--model", "config.json"]),
    "hub id offline": (["--model", "creditbench-test/no-such-model", "--sets", "gsm8k"],
                       ["--model", "hf download creditbench-test/no-such-model"]),
    "out a file": (["--model", "{model}", "--sets", "gsm8k", "--out", "{tmp}/file.txt"], ["--out", "is a file"]),
    "out under a file": (["--model", "{model}", "--sets", "gsm8k", "--out", "{tmp}/file.txt/eval"], ["--out"]),
    "out read-only": (["--model", "{model}", "--sets", "gsm8k", "--out", "/proc/creditbench/eval"],
                      ["--out", "not writable"]),
    "sets empty": (["--model", "{model}", "--sets", ""], ["--sets", "empty"]),
    "set unknown": (["--model", "{model}", "--sets", "gsm8k,nope"], ["--sets", "unknown sets ['nope']"]),
    "set twice": (["--model", "{model}", "--sets", "gsm8k,gsm8k"], ["--sets", "twice"]),
    "set unknown beside a suite": (["--model", "{model}", "--sets", "core,nope"], ["--sets", "unknown sets ['nope']"]),
    "suite with greedy k": (["--model", "{model}", "--sets", "competition_math", "--k", "2"],
                            ["--k 2", "--temperature"]),
    "template unknown": (["--model", "{model}", "--sets", "gsm8k", "--template", "chat_boxd"],
                         ["--template chat_boxd", "unknown"]),
    "template misfit": (["--model", "{model}", "--sets", "gsm8k", "--template", "chat_code"],
                        ["--template chat_code", "gsm8k"]),
    "k with greedy": (["--model", "{model}", "--sets", "gsm8k", "--k", "4"], ["--k 4", "--temperature"]),
    "limit zero": (["--model", "{model}", "--sets", "gsm8k", "--limit", "0"], ["--limit"]),
    "set near miss": (["--model", "{model}", "--sets", "gsm8", "--limit", "1"], ["did you mean 'gsm8k'?"]),
    "no tokenizer files": (["--model", "{tmp}/notok", "--sets", "gsm8k"], ["--model", "no tokenizer files"]),
    "chat template of a base model": (["--model", "{model}", "--sets", "gsm8k", "--template", "chat_boxed"],
                                      ["--template chat_boxed", "no chat template", "--template base_boxed"]),
    "corrupt weights": (["--model", "{tmp}/corrupt", "--sets", "gsm8k"], ["model.safetensors", "corrupt"]),
}


def broken_models(tmp: Path, model: Path) -> None:
    """``tmp/notok``: the model without its tokenizer files; ``tmp/corrupt``: its weights cut in half."""
    shutil.copytree(model, tmp / "notok")
    for f in (tmp / "notok").glob("tokenizer*"):
        f.unlink()
    shutil.copytree(model, tmp / "corrupt")
    weights = tmp / "corrupt" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_exit_2_before_any_work(case, tiny_env, tmp_path):
    args, words = BAD[case]
    (tmp_path / "file.txt").write_text("not a model\n")
    broken_models(tmp_path, tiny_env["model"])
    args = [a.format(tmp=tmp_path, model=tiny_env["model"]) for a in args]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "out")]
    before = sorted(map(str, tmp_path.rglob("*")))
    t0 = time.perf_counter()
    res = creditbench("eval", *args, HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="")
    seconds = time.perf_counter() - t0
    assert res.returncode == 2, (case, res.stdout[-1000:], res.stderr[-2000:])
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr and not res.stdout, (case, res.stderr[-2000:])
    assert all(w in lines[0] for w in words), (case, lines[0])
    assert sorted(map(str, tmp_path.rglob("*"))) == before  # nothing written (no out folder, no cache)
    assert seconds < 30, (case, seconds)  # no model loaded, no hub retries


def test_debug_shows_the_traceback(tmp_path):
    res = creditbench("eval", "--model", str(tmp_path / "nope"), "--sets", "gsm8k", "--debug")
    assert res.returncode != 0 and "Traceback" in res.stderr and "UsageError" in res.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a 0555 folder")
def test_read_only_out_folder_is_refused(tiny_env, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    res = creditbench("eval", "--model", str(tiny_env["model"]), "--sets", "gsm8k", "--out", str(ro / "eval"))
    assert res.returncode == 2 and "not writable" in res.stderr and not any(ro.iterdir())


def test_another_model_or_configuration_never_replaces_a_run(tiny_env, tmp_path):
    """Same --out: the same run is rerun from its cache; another model's or another --limit's is refused."""
    out = tmp_path / "eval"
    base = ["eval", "--sets", "gsm8k", "--limit", "2", "--max-new-tokens", "8", "--out", str(out)]
    res = creditbench(*base, "--model", str(tiny_env["model"]))
    assert res.returncode == 0, res.stderr[-3000:]
    first = (out / "results.json").read_bytes()
    other = tmp_path / "other_model"
    shutil.copytree(tiny_env["model"], other)
    cfg = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**cfg, "rope_theta": 1234.0}))
    res = creditbench(*base, "--model", str(other))
    assert res.returncode == 2 and "another model" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    res = creditbench(*[("3" if a == "2" else a) for a in base], "--model", str(tiny_env["model"]))
    assert res.returncode == 2 and "another configuration (differs in limit)" in res.stderr
    assert (out / "results.json").read_bytes() == first
    stale = out / "samples_math500.jsonl"
    stale.write_text("{}\n")  # a stray file beside the results is removed when they are rewritten
    res = creditbench(*base, "--model", str(tiny_env["model"]))
    assert res.returncode == 0 and "gsm8k: 2 of 2 problems from the cache, 0 to generate" in res.stderr
    assert not stale.exists() and sorted(p.name for p in out.glob("samples_*")) == ["samples_gsm8k.jsonl"]


def _responses(out: Path) -> list[tuple]:
    rows = [json.loads(x) for x in (out / "samples_gsm8k.jsonl").read_text().splitlines()]
    return [(r["problem_id"], r["sample"], r["response"], r["correct"]) for r in rows]


def test_killed_run_resumes_with_only_the_missing_items(tiny_env, tmp_path, own_cache):
    """kill -9 after the first cached problem; the rerun generates only the rest and matches an unbroken run
    (with its own cache)."""
    args = ["eval", "--model", str(tiny_env["model"]), "--sets", "gsm8k", "--limit", "12", "--k", "2",
            "--temperature", "1.0", "--max-new-tokens", "200", "--batch-size", "4"]  # batches of 2 problems
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    proc = subprocess.Popen([*command(), *args, "--out", str(killed)], cwd=REPO, env=env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    cache = own_cache / harness.model_sha256(tiny_env["model"].resolve())[:16] / "gsm8k.jsonl"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if cache.is_file() and cache.read_text().count("\n") >= 1:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and not (killed / "results.json").exists()
    res = creditbench(*args, "--out", str(killed))
    assert res.returncode == 0, res.stderr[-3000:]
    cached = int(re.search(r"gsm8k: (\d+) of 12 problems from the cache, (\d+) to generate", res.stderr)[1])
    assert 0 < cached < 12
    results = json.loads((killed / "results.json").read_text())
    assert results["results"]["gsm8k"]["cache"] == {"problems_cached": cached, "problems_generated": 12 - cached}
    res = creditbench(*args, "--out", str(whole), "--cache", str(tmp_path / "other_cache"))
    assert res.returncode == 0 and "gsm8k: 0 of 12 problems from the cache, 12 to generate" in res.stderr
    assert _responses(killed) == _responses(whole)


def test_a_changed_key_never_reuses_a_sample():
    cache = driver.Cache(Path("c"), "a" * 64, "hf", "cpu")
    sampling = {"n": 2, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 8, "seed": 0}
    key = driver.sample_key(cache, "gsm8k", "p1", "prompt", sampling)
    changed = [
        driver.sample_key(driver.Cache(Path("c"), "b" * 64, "hf", "cpu"), "gsm8k", "p1", "prompt", sampling),
        driver.sample_key(cache, "math500", "p1", "prompt", sampling),
        driver.sample_key(cache, "gsm8k", "p2", "prompt", sampling),
        driver.sample_key(cache, "gsm8k", "p1", "prompt2", sampling),
        driver.sample_key(cache, "gsm8k", "p1", "prompt", {**sampling, "temperature": 0.6}),
        driver.sample_key(cache, "gsm8k", "p1", "prompt", {**sampling, "seed": 1}),
        driver.sample_key(cache, "gsm8k", "p1", "prompt", {**sampling, "max_new_tokens": 9}),
        driver.sample_key(driver.Cache(Path("c"), "a" * 64, "vllm", "cpu"), "gsm8k", "p1", "prompt", sampling),
        driver.sample_key(driver.Cache(Path("c"), "a" * 64, "hf", "cuda"), "gsm8k", "p1", "prompt", sampling),
    ]
    assert key == driver.sample_key(driver.Cache(Path("other"), "a" * 64, "hf", "cpu"), "gsm8k", "p1", "prompt",
                                    dict(sampling))
    assert len({key, *changed}) == 1 + len(changed)


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def test_progress_inside_a_set_on_the_console_and_in_the_log(tiny_env, tmp_path):
    """Generation and grading report problems and samples done, the rate and the time left, line by line
    where stderr is not a terminal, and the same lines land in OUT/eval.log."""
    out = tmp_path / "eval"
    res = creditbench("eval", "--model", str(tiny_env["model"]), "--sets", "gsm8k", "--limit", "3", "--k", "2",
                      "--temperature", "1", "--max-new-tokens", "8", "--batch-size", "2", "--out", str(out),
                      CREDITBENCH_PROGRESS_S="0")
    assert res.returncode == 0, res.stderr[-3000:]
    line = re.compile(r"gsm8k (generate|grade): (\d)/3 problems \((\d+) samples\), [\d.]+ problems/s, .* elapsed, "
                      r".* left")
    seen = [m.groups() for m in map(line.search, res.stderr.splitlines()) if m]
    assert ("generate", "1", "2") in seen and ("generate", "3", "6") in seen and ("grade", "3", "6") in seen, seen
    log = (out / "eval.log").read_text()
    assert "gsm8k generate: 3/3 problems (6 samples)" in log and "gsm8k grade: 3/3 problems" in log


def test_the_model_identity_survives_reconversion_and_ignores_optimizer_state(tiny_env, tmp_path):
    """The same tensors re-saved with other file metadata, beside optimizer state and a converter's notes:
    the same identity, so the same --out reruns from the cache; one changed weight is another model."""
    from safetensors.torch import load_file, save_file

    base = ["eval", "--sets", "gsm8k", "--limit", "2", "--max-new-tokens", "8", "--out", str(tmp_path / "eval")]
    assert creditbench(*base, "--model", str(tiny_env["model"])).returncode == 0
    again = tmp_path / "reconverted"
    shutil.copytree(tiny_env["model"], again)
    tensors = load_file(again / "model.safetensors")
    save_file(dict(reversed(list(tensors.items()))), again / "model.safetensors",
              metadata={"format": "pt", "converted": "2026-12-06T04:00:00"})
    (again / "optimizer.pt").write_bytes(os.urandom(1024))
    (again / "gguf_source.json").write_text(json.dumps({"convert_s": 37.1}))
    cfg = json.loads((again / "config.json").read_text())
    (again / "config.json").write_text(json.dumps({**cfg, "transformers_version": "0.0.0"}, indent=4))
    assert (again / "model.safetensors").read_bytes() != (tiny_env["model"] / "model.safetensors").read_bytes()
    res = creditbench(*base, "--model", str(again))
    assert res.returncode == 0 and "gsm8k: 2 of 2 problems from the cache, 0 to generate" in res.stderr, res.stderr
    name = next(iter(tensors))
    save_file({**tensors, name: tensors[name] + 1e-3}, again / "model.safetensors")
    res = creditbench(*base, "--model", str(again))
    assert res.returncode == 2 and "another model" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_a_failed_load_leaves_out_free_and_is_one_line(tiny_env, tmp_path):
    """A folder that passes the checks but that transformers cannot load: one line naming --model, exit 1,
    no run.json; the corrected command then runs in the same --out."""
    broken = tmp_path / "broken"
    shutil.copytree(tiny_env["model"], broken)
    cfg = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**cfg, "model_type": "no_such_architecture"}))
    out = tmp_path / "eval"
    args = ["eval", "--sets", "gsm8k", "--limit", "1", "--max-new-tokens", "4", "--out", str(out)]
    res = creditbench(*args, "--model", str(broken))
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert f"--model {broken}" in lines[0] and "could not load" in lines[0]
    assert not (out / "run.json").exists()
    assert creditbench(*args, "--model", str(tiny_env["model"])).returncode == 0


def test_the_cache_serves_a_larger_limit_another_grader_timeout_and_survives_a_corrupt_line(tiny_env, tmp_path,
                                                                                          own_cache):
    """Per-sample cache across --out folders: --limit 2 then 4 generates 2; another grader timeout
    generates nothing; --seed changes the samples, never the problems drawn; a corrupt cache line is named
    and its problem generated again."""
    def run(out: str, *extra: str) -> subprocess.CompletedProcess:
        return creditbench("eval", "--model", str(tiny_env["model"]), "--sets", "gsm8k", "--k", "2",
                           "--temperature", "1", "--max-new-tokens", "8", "--out", str(tmp_path / out), *extra)

    assert run("a", "--limit", "2").returncode == 0
    res = run("b", "--limit", "4")
    assert res.returncode == 0 and "gsm8k: 2 of 4 problems from the cache, 2 to generate" in res.stderr
    a, b = _responses(tmp_path / "a"), _responses(tmp_path / "b")
    assert set(a) <= set(b)  # the cached problems' samples, as generated
    res = run("c", "--limit", "4", "--grader-timeout-s", "3")
    assert res.returncode == 0 and "gsm8k: 4 of 4 problems from the cache, 0 to generate" in res.stderr
    res = run("d", "--limit", "4", "--seed", "1")
    assert res.returncode == 0 and "gsm8k: 0 of 4 problems from the cache, 4 to generate" in res.stderr
    assert _results(tmp_path / "d")["data"]["gsm8k"]["problem_ids"] == _results(tmp_path / "b")["data"]["gsm8k"][
        "problem_ids"]
    (cache,) = own_cache.glob("*/gsm8k.jsonl")
    lines = cache.read_text().splitlines(keepends=True)
    cache.write_text(lines[0][: len(lines[0]) // 2] + "\n" + "".join(lines[1:]))
    res = run("e", "--limit", "4")
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"cache: {cache} line 1 is corrupt" in res.stderr
    assert "gsm8k: 3 of 4 problems from the cache, 1 to generate" in res.stderr
    assert _responses(tmp_path / "e") == _responses(tmp_path / "b")


def test_max_new_tokens_beyond_the_context_is_capped_and_cuts_are_counted(tiny_env, tmp_path):
    """The tiny model has 256 positions: --max-new-tokens 300 is capped with a line; prompts longer than the
    context (its byte tokenizer makes GSM8K prompts long) are counted; both in results.json and the summary."""
    out = tmp_path / "eval"
    res = creditbench("eval", "--model", str(tiny_env["model"]), "--sets", "gsm8k", "--limit", "3",
                      "--max-new-tokens", "300", "--out", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "--max-new-tokens 300: the model's context is 256 positions" in res.stderr
    results = _results(out)
    assert any("capped for 3 of 3 problems" in w for w in results["warnings"]), results["warnings"]
    assert results["results"]["gsm8k"]["warnings"] == results["warnings"]
    summary = json.loads((out / results["summaries"]["gsm8k"]).read_text())
    assert summary["warnings"] == results["warnings"] and summary["context"]["positions"] == 256
    tokens = [json.loads(x)["tokens"] for x in (out / "samples_gsm8k.jsonl").read_text().splitlines()]
    assert max(tokens) < 256
    assert "warning: gsm8k: --max-new-tokens 300 capped" in res.stdout
