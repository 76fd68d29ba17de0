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
    """A README command with the model, the output folder (results/eval) and --limit replaced (nothing else)."""
    argv = [str(model) if a == "DIR" else str(out) if a == "results/eval" else a for a in argv]
    if "--limit" in argv:
        argv[argv.index("--limit") + 1] = limit
    return argv


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


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
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_exit_2_before_any_work(case, tiny_env, tmp_path):
    args, words = BAD[case]
    (tmp_path / "file.txt").write_text("not a model\n")
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


def test_killed_run_resumes_with_only_the_missing_items(tiny_env, tmp_path):
    """kill -9 after the first cached chunk; the rerun generates only the rest and matches an unbroken run."""
    args = ["eval", "--model", str(tiny_env["model"]), "--sets", "gsm8k", "--limit", "12", "--k", "2",
            "--temperature", "1.0", "--max-new-tokens", "200", "--batch-size", "4"]  # 6 chunks of 2 problems
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    proc = subprocess.Popen([*command(), *args, "--out", str(killed)], cwd=REPO, env=env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    cache = killed / "cache" / "gsm8k.jsonl"
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
    res = creditbench(*args, "--out", str(whole))
    assert res.returncode == 0 and "gsm8k: 0 of 12 problems from the cache, 12 to generate" in res.stderr
    assert _responses(killed) == _responses(whole)


def test_a_changed_key_never_reuses_a_chunk():
    identity = {"model": {"sha256": "a" * 64}, "config": {"backend": "hf", "device": "cpu"}}
    sampling = {"n": 2, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 8, "seed": 0}
    key = driver.chunk_key(identity, "gsm8k", "base_boxed", sampling, 0, ["p1", "p2"])
    changed = [
        driver.chunk_key({**identity, "model": {"sha256": "b" * 64}}, "gsm8k", "base_boxed", sampling, 0,
                          ["p1", "p2"]),
        driver.chunk_key(identity, "math500", "base_boxed", sampling, 0, ["p1", "p2"]),
        driver.chunk_key(identity, "gsm8k", "base_fewshot", sampling, 0, ["p1", "p2"]),
        driver.chunk_key(identity, "gsm8k", "base_boxed", {**sampling, "temperature": 0.6}, 0, ["p1", "p2"]),
        driver.chunk_key(identity, "gsm8k", "base_boxed", {**sampling, "seed": 1}, 0, ["p1", "p2"]),
        driver.chunk_key(identity, "gsm8k", "base_boxed", sampling, 2, ["p1", "p2"]),
        driver.chunk_key(identity, "gsm8k", "base_boxed", sampling, 0, ["p1", "p3"]),
        driver.chunk_key({**identity, "config": {"backend": "vllm", "device": "cpu"}}, "gsm8k", "base_boxed",
                          sampling, 0, ["p1", "p2"]),
    ]
    assert key == driver.chunk_key(identity, "gsm8k", "base_boxed", dict(sampling), 0, ["p1", "p2"])
    assert len({key, *changed}) == 1 + len(changed)
