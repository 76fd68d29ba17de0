"""Do creditbench's MBPP+ verdicts equal EvalPlus's own? Score one samples file both ways and compare.

    python -m evaluation.code.agreement SAMPLES.jsonl [--tsv verdicts.tsv] [--parallel 2]
    python -m evaluation.code.agreement sample --model DIR --out SAMPLES.jsonl [--tasks 100 --n 4 ...]

``compare`` (the default) scores the samples with :func:`evaluation.code.score.evaluate_evalplus`, exactly
as the workflow calls it, and with EvalPlus's ``evalplus.evaluate.evaluate`` (base and plus tests, its
default time limits) in a subprocess of its own, and prints ``agreement base k/N plus k/N`` and both wall
times. EvalPlus insists on samples for every task of its dataset, so it runs on a copy of the pinned
MBPP+ file cut to the sampled tasks (``MBPP_OVERRIDE_PATH``); it computes its expected outputs from the
same canonical solutions and caches them (keyed by that file's md5) under ``--evalplus-cache``
(``XDG_CACHE_HOME``, default ``.cache/evalplus_agreement``), so a second run times the checks alone, as
ours does with its own cache. ``--tsv`` writes one row per sample: task, both verdicts, and the sample
itself as one JSON object (``solution`` or ``completion``); :func:`read_table` reads it back (the case
table ``tests/evaluation/code_agreement_cases.tsv`` is one). Exit status 1 on any disagreement.

``sample`` writes real model completions: the workflow's ``chat_code`` prompt (or ``base_code``) through
:class:`evaluation.generation.hf.HFBackend` and :func:`evaluation.scoring.code_sample`, for the
``--tasks`` MBPP+ tasks with the shortest canonical solutions (the easiest for a small model).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common.io import read_jsonl, write_jsonl_atomic, write_text_atomic
from evaluation.benchmarks import BENCHMARKS, DEFAULT_DATA_DIR, REPO_ROOT
from evaluation.code.score import read_dataset

MBPP = DEFAULT_DATA_DIR / BENCHMARKS["mbpp_plus"].path
EVALPLUS_CACHE = REPO_ROOT / ".cache" / "evalplus_agreement"
# evaluate() writes its results file and returns; its stall watcher (a non-daemon thread sleeping in 20 s
# steps) would then hold the process up to 20 s more, so the call is timed inside and the process ends at once
_EVALPLUS = """
import os, sys, time
from evalplus.evaluate import evaluate
t0 = time.monotonic()
evaluate("mbpp", samples=sys.argv[1], parallel=int(sys.argv[2]), i_just_wanna_run=True)
open(sys.argv[3], "w").write(str(time.monotonic() - t0))
sys.stdout.flush()
os._exit(0)
"""


COLUMNS = ("task_id", "ours_base", "ours_plus", "evalplus_base", "evalplus_plus", "sample")


def write_table(path: str | Path, samples: Sequence[dict[str, Any]], ours: Sequence[tuple[str, str]],
                theirs: Sequence[tuple[str, str]]) -> None:
    lines = ["\t".join(COLUMNS) + "\n"]
    for s, o, t in zip(samples, ours, theirs, strict=True):
        body = json.dumps({k: v for k, v in s.items() if k != "task_id"})  # ASCII: no raw tab, newline or U+2028
        lines.append("\t".join((s["task_id"], *o, *t, body)) + "\n")
    write_text_atomic(path, "".join(lines))


def read_table(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a ``--tsv`` table: the columns, with ``sample`` decoded to a scorer sample (task_id added)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if tuple(lines[0].split("\t")) != COLUMNS:
        raise ValueError(f"{path}: header {lines[0]!r} is not the --tsv columns {COLUMNS}")
    rows = [dict(zip(COLUMNS, line.split("\t"), strict=True)) for line in lines[1:] if line]
    for r in rows:
        r["sample"] = {"task_id": r["task_id"], **json.loads(r["sample"])}
    return rows


def evalplus_verdicts(samples: Sequence[dict[str, Any]], *, parallel: int = 2, dataset: Path = MBPP,
                      cache: Path = EVALPLUS_CACHE) -> tuple[list[tuple[str, str]], float, float]:
    """``(base_status, plus_status)`` per sample from ``evalplus.evaluate``, the call's time and the
    subprocess's wall time (s)."""
    tasks = {s["task_id"] for s in samples}
    with tempfile.TemporaryDirectory(prefix="code_agreement_") as tmp:
        data = Path(tmp, "MbppPlus.jsonl")
        data.write_text("".join(json.dumps(r) + "\n" for r in read_dataset(dataset).values() if r["task_id"] in tasks))
        path = Path(tmp, "samples.jsonl")
        path.write_text("".join(json.dumps(s) + "\n" for s in samples))
        env = {**os.environ, "MBPP_OVERRIDE_PATH": str(data), "XDG_CACHE_HOME": str(cache)}
        t0 = time.monotonic()
        cmd = [sys.executable, "-c", _EVALPLUS, str(path), str(parallel), str(Path(tmp, "t"))]
        run = subprocess.run(cmd, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if run.returncode:
            raise RuntimeError(f"evalplus.evaluate failed ({run.returncode}): {run.stderr[-2000:]}")
        wall = time.monotonic() - t0
        res = json.loads(Path(tmp, "samples_eval_results.json").read_text())["eval"]
        t_call = float(Path(tmp, "t").read_text())
    # EvalPlus keeps each task's samples in input order (completion_id)
    seen: dict[str, int] = {}
    out: list[tuple[str, str]] = []
    for s in samples:
        k = seen.get(s["task_id"], 0)
        seen[s["task_id"]] = k + 1
        r = res[s["task_id"]][k]
        out.append((r["base_status"], r["plus_status"]))
    return out, t_call, wall


def ours_verdicts(samples: Sequence[dict[str, Any]], *, parallel: int = 2) -> tuple[list[tuple[str, str]], float]:
    """``(base_status, plus_status)`` per sample from creditbench's scorer, as the workflow calls it."""
    from evaluation.code.score import SandboxConfig, evaluate_evalplus

    t0 = time.monotonic()
    res = evaluate_evalplus("mbpp_plus", samples, config=SandboxConfig(parallel=parallel))
    return [(r.base_status, r.plus_status) for r in res.samples], time.monotonic() - t0


def same(ours: tuple[str, str], theirs: tuple[str, str]) -> tuple[bool, bool]:
    """Equal verdicts (base, plus) of one sample, pass vs. not pass (EvalPlus's ``fail``/``timeout`` are both
    a failure); plus is judged as pass@1 plus counts it: base and plus tests both pass."""
    return ((ours[0] == "pass") == (theirs[0] == "pass"),
            (ours[0] == ours[1] == "pass") == (theirs[0] == theirs[1] == "pass"))


def agreement(ours: Sequence[tuple[str, str]], theirs: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Samples with equal verdicts (:func:`same`), base and plus; ``exact``: samples whose two statuses
    are the same strings (``fail`` vs. ``timeout`` counts as a difference there)."""
    base = sum(same(o, t)[0] for o, t in zip(ours, theirs, strict=True))
    plus = sum(same(o, t)[1] for o, t in zip(ours, theirs, strict=True))
    exact = sum(tuple(o) == tuple(t) for o, t in zip(ours, theirs, strict=True))
    return {"base": base, "plus": plus, "exact": exact, "n": len(ours)}


def compare(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.code.agreement")
    ap.add_argument("samples")
    ap.add_argument("--tsv", default=None)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--evalplus-cache", type=Path, default=EVALPLUS_CACHE)
    a = ap.parse_args(argv)
    samples = [{k: v for k, v in s.items() if k in ("task_id", "solution", "completion")}
               for s in read_jsonl(a.samples)]
    ours, t_ours = ours_verdicts(samples, parallel=a.parallel)
    theirs, t_theirs, t_proc = evalplus_verdicts(samples, parallel=a.parallel, cache=a.evalplus_cache)
    agr = agreement(ours, theirs)
    if a.tsv:
        write_table(a.tsv, samples, ours, theirs)
    for i, (s, o, t) in enumerate(zip(samples, ours, theirs)):
        if not all(same(o, t)):
            print(f"disagree {i} {s['task_id']}: ours {o} evalplus {t}")
    passes = sum(o[0] == "pass" for o in ours), sum(o[0] == o[1] == "pass" for o in ours)
    print(f"agreement base {agr['base']}/{agr['n']} plus {agr['plus']}/{agr['n']} (statuses {agr['exact']}); "
          f"passes (ours) base {passes[0]} plus {passes[1]}; time ours {t_ours:.1f} s, evalplus {t_theirs:.1f} s "
          f"(its process {t_proc:.1f} s), ratio ours/evalplus {t_ours / t_theirs:.2f}")
    return 0 if agr["base"] == agr["plus"] == agr["n"] else 1


def sample(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.code.agreement sample")
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--skip", type=int, default=0, help="skip this many of the easiest tasks")
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--template", choices=("chat_code", "base_code"), default="chat_code")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    from evaluation.benchmarks import load_benchmark
    from evaluation.generation.hf import HFBackend
    from evaluation.generation.types import SamplingParams
    from evaluation.scoring import code_sample
    from evaluation.templates import render, stop_strings

    canon = {r["task_id"]: len(r["canonical_solution"]) for r in read_dataset(MBPP).values()}
    problems = sorted(load_benchmark("mbpp_plus"), key=lambda p: (canon[p.id], p.id))[a.skip:a.skip + a.tasks]
    engine = HFBackend(a.model, batch_size=a.batch_size)
    prompts = [render(a.template, p, engine.tokenizer) for p in problems]
    params = SamplingParams(n=a.n, temperature=a.temperature, top_p=a.top_p, max_new_tokens=a.max_new_tokens,
                            seed=a.seed, stop=stop_strings(a.template))
    t0 = time.monotonic()
    groups = engine.generate(prompts, params)
    wall = time.monotonic() - t0
    n_tok = sum(len(c.token_ids) for g in groups for c in g)
    write_jsonl_atomic(a.out, ({**code_sample(p, c.text, a.template), "finish": c.finish_reason}
                               for p, g in zip(problems, groups) for c in g))
    print(f"{len(problems) * a.n} samples, {n_tok} tokens in {wall:.0f} s ({n_tok / wall:.1f} tok/s)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sample"]:
        return sample(argv[1:])
    return compare(argv)


if __name__ == "__main__":
    sys.exit(main())
