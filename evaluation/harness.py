"""``creditbench eval``: one model, any registered sets, N problems each -> one results JSON + per-sample JSONL.

The lm-eval habit (``lm_eval --model hf --model_args pretrained=DIR --tasks arc_challenge --limit 200``)
without an experiment config or run labels:

    creditbench eval --model DIR --sets gsm8k,math500,arc_challenge --limit 200 --k 4 --temperature 0.6

Math and code sets are sampled (``evaluation.generation``) and graded (``evaluation.evaluate.score``: the
answer checker, EvalPlus for code); multiple-choice sets are scored by log-likelihood through lm-eval
(``evaluation.mcq``; cloze by default, as lm-eval's standard tasks). ``OUT/results.json`` holds the
config, the command, the date, the model's resolved path and content sha256, package versions, git commit,
each set's data sha256 and problem ids, the grader version and per-set metrics with stderr and 95 %
bootstrap CIs (lm-eval's field names where it has one: ``n-shot``, ``n-samples``, ``git_hash``,
``chat_template_sha``, per sample ``doc_id`` / ``doc_hash`` / ``prompt_hash`` / ``target_hash``);
``OUT/samples_<set>.jsonl`` holds every graded sample with exactly what was graded, and
``OUT/eval/<model>/seed<s>/step0/<set>.summary.json`` each set in the workflow's summary schema, so that
``creditbench report --results OUT`` tabulates it. ``--limit`` draws a seeded subset stratified by subject
and level where the set has them (``evaluation.benchmarks.stratified_subset``), kept in file order.

Errors before work: every argument (model folder, output folder, sets, template, k / temperature, data
files) is checked before the model is loaded; a user error is one line on stderr and exit code 2
(``--debug``: with its traceback). Greedy decoding (``--temperature 0``) with ``--k`` > 1 is refused: the
k samples would be identical copies, so avg@k would be greedy accuracy under another name.

Identity and resume: ``OUT/run.json`` (written once the checks pass) names the model's content sha256 and
the configuration; another model or configuration in the same ``--out`` is refused, so results never
replace another run's. Generated samples are cached in ``OUT/cache/<set>.jsonl`` one generation chunk at a
time, keyed by the model sha256, set, the chunk's prompts (items and template), sampling parameters, backend
and device; a killed run, rerun with the same command, generates only the missing chunks (its log gives
the counts) and, with the same seeds per chunk, writes the numbers an uninterrupted run writes.
Multiple-choice sets are cached per set.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import logging
import math
import re
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from common.io import append_jsonl, read_jsonl, write_json_atomic, write_jsonl_atomic
from common.manifest import git_state, package_versions
from evaluation.benchmarks import (
    BENCHMARKS,
    BenchmarkError,
    Problem,
    get_benchmark,
    load_benchmark,
    stratified_subset,
)
from evaluation.eval_checks import (
    HUB_ID,
    UsageError,
    check_args,
    check_identity,
    check_out,
    model_sha256,
    resolve_model,
)
from evaluation.grading import GRADER_VERSION
from evaluation.mcq import letter_warning
from evaluation.metrics import bootstrap_ci, mean_g_pass_at_k
from evaluation.templates import FEWSHOT_MATH

log = logging.getLogger(__name__)


subset = stratified_subset  # the one subset rule (evaluation.benchmarks)


def _ci(per_problem: np.ndarray, seed: int) -> list[float]:
    return list(bootstrap_ci(per_problem, seed=seed))


def _stderr(per_problem: np.ndarray) -> float:
    """Standard error of the mean over problems (lm-eval's ``*_stderr``: sample sd / sqrt(n))."""
    n = len(per_problem)
    return float(np.std(per_problem, ddof=1) / math.sqrt(n)) if n > 1 else float("nan")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Plan:
    """Everything a run needs, checked: the resolved model, the sets' subsets and templates, the identity."""

    model_dir: Path
    jobs: dict[str, tuple[list[Problem], str]]  # math and code sets: problems, template
    mcq: dict[str, list[Problem]]
    data: dict[str, dict[str, Any]]
    identity: dict[str, Any]


KEY_EXCLUDED = ("func", "out", "verbose", "debug", "data_dir", "model")
"""Arguments that do not change the numbers (the model enters the key by its content sha256)."""


def make_plan(args: argparse.Namespace) -> Plan:
    """Check every argument and file before any work; raises :class:`UsageError`."""
    check_args(args)
    model_dir = resolve_model(args.model)
    out = Path(args.out)
    check_out(out)
    chosen, data = {}, {}
    for name in args.sets:
        try:
            problems = load_benchmark(name, data_dir=args.data_dir)  # sha256 and count verified
        except (BenchmarkError, OSError) as err:
            raise UsageError(f"--sets {name}: {err} (--data-dir)") from None
        chosen[name] = subset(problems, args.limit, args.seed)
        bench = get_benchmark(name)
        data[name] = {"sha256": bench.sha256, "n_total": len(problems), "license": bench.license,
                      "problem_ids": [p.id for p in chosen[name]]}
    jobs = {n: (p, args.template or get_benchmark(n).default_template)
            for n, p in chosen.items() if get_benchmark(n).kind != "mcq"}
    mcq = {n: p for n, p in chosen.items() if n not in jobs}
    config = {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()
              if key not in KEY_EXCLUDED}
    config["templates"] = {n: t for n, (_, t) in jobs.items()}
    model = {"path": args.model, "resolved": str(model_dir), "sha256": model_sha256(model_dir)}
    key_src = {"model_sha256": model["sha256"], "config": config, "data": {n: d["sha256"] for n, d in data.items()}}
    identity = {"run_key": _sha(json.dumps(key_src, sort_keys=True))[:16], "model": model, "config": config}
    check_identity(out, identity)
    return Plan(model_dir, jobs, mcq, data, identity)


# ----------------------------------------------------------------------------------------- the work

def chunk_key(identity: dict[str, Any], name: str, template: str, sampling: dict, offset: int,
              prompts: Sequence[str]) -> str:
    """Cache key of one generation chunk: model sha256, set, template, sampling, backend, device, position
    and the prompts themselves (so the items); any change makes a new key."""
    cfg = identity["config"]
    src = {"model": identity["model"]["sha256"], "set": name, "template": template, "sampling": sampling,
           "backend": cfg["backend"], "device": cfg["device"], "offset": offset,
           "prompts": [_sha(p) for p in prompts]}
    return _sha(json.dumps(src, sort_keys=True))


def _generate_cached(engine: Any, name: str, problems: list[Problem], template: str, params: Any,
                     plan: Plan, cache_file: Path) -> tuple[list[dict], float, int]:
    """Raw samples of one set, chunk by chunk through the cache: (samples, generation seconds, problems
    taken from the cache). A chunk is the backend's batch, generated with the seed it gets in one call."""
    from dataclasses import replace

    from evaluation.evaluate import raw_samples, sampling_dict
    from evaluation.templates import render, stop_strings

    tokenizer = getattr(engine, "tokenizer", None)
    prompts = [render(template, p, tokenizer) for p in problems]
    params = replace(params, stop=stop_strings(template))
    sampling = sampling_dict(params, template)
    cached = {row["key"]: row["samples"] for row in read_jsonl(cache_file, drop_torn_tail=True)} \
        if cache_file.is_file() else {}
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    per_chunk = max(1, engine_batch(engine) // params.n)
    chunks = [(start, problems[start:start + per_chunk], prompts[start:start + per_chunk])
              for start in range(0, len(problems), per_chunk)]
    keys = [chunk_key(plan.identity, name, template, sampling, start, ps) for start, _, ps in chunks]
    from_cache = sum(len(c[1]) for c, key in zip(chunks, keys) if key in cached)
    print(f"{name}: {from_cache} of {len(problems)} problems from the cache, {len(problems) - from_cache} to "
          "generate", file=sys.stderr, flush=True)
    samples, seconds = [], 0.0
    for (start, probs, ps), key in zip(chunks, keys):
        if key not in cached:
            t0 = time.perf_counter()
            completions = engine.generate(ps, params, offset=start)
            seconds += time.perf_counter() - t0
            cached[key] = raw_samples(name, probs, ps, completions)
            append_jsonl(cache_file, {"key": key, "set": name, "offset": start, "samples": cached[key]})
        samples += cached[key]
    return samples, seconds, from_cache


def engine_batch(engine: Any) -> int:
    return int(getattr(engine, "batch_size", 0) or 32)


def _generated_sets(engine: Any, plan: Plan, args: argparse.Namespace, bar: Any) -> dict[str, tuple[dict, list, dict]]:
    """Sample and grade the math and code sets: name -> (metrics, per-sample records, summary)."""
    from evaluation.evaluate import sampling_dict, score
    from evaluation.generation import SamplingParams

    params = SamplingParams(n=args.k, temperature=args.temperature, top_p=args.top_p,
                            max_new_tokens=args.max_new_tokens, seed=args.seed)
    out = {}
    for name, (problems, template) in plan.jobs.items():
        bar.set_postfix_str(name)
        raw, seconds, from_cache = _generate_cached(engine, name, problems, template, params, plan,
                                                    Path(args.out) / "cache" / f"{name}.jsonl")
        records, summary = score(name, problems, raw, k=args.k, template=template, seed=args.seed,
                                 grader_timeout_s=args.grader_timeout_s)
        arr = np.asarray(summary["per_problem_correct"], dtype=int)
        metrics = {key: summary[key] for key in ("avg_at_k", "pass_at_k", "maj_at_k") if key in summary}
        metrics["avg_at_k_ci95"] = summary["ci95"]
        metrics["avg_at_k_stderr"] = _stderr(arr.mean(axis=1))
        if args.k > 1:
            metrics.update({f"g_pass_at_k_tau{tau}": mean_g_pass_at_k(arr, args.k, tau) for tau in (0.5, 1.0)})
        metrics.update({key: summary[key] for key in ("base_pass_at_1", "plus_pass_at_1") if key in summary})
        out[name] = ({"kind": get_benchmark(name).kind, "protocol": "generate", "template": template,
                      "n": len(problems), "k": args.k, "metrics": metrics, "reasons": summary["reasons"],
                      "sampling": sampling_dict(params, template), "seconds": round(seconds, 3),
                      "cache": {"problems_cached": from_cache, "problems_generated": len(problems) - from_cache},
                      "mean_response_tokens": summary["mean_response_tokens"]}, records, summary)
        bar.update(1)
    return out


def _mcq_sets(engine: Any, plan: Plan, args: argparse.Namespace, bar: Any) -> dict[str, tuple[dict, list, dict]]:
    """Score the multiple-choice sets through lm-eval (cached per set): name -> (metrics, records, summary)."""
    from evaluation.mcq import run_ood

    cache_file = Path(args.out) / "cache" / "mcq.jsonl"
    keys = {n: _sha(json.dumps({"model": plan.identity["model"]["sha256"], "set": n, "config":
                                plan.identity["config"], "ids": [p.id for p in ps]}, sort_keys=True))
            for n, ps in plan.mcq.items()}
    cached = {row["key"]: row["result"] for row in read_jsonl(cache_file, drop_torn_tail=True)} \
        if cache_file.is_file() else {}
    todo = {n: ps for n, ps in plan.mcq.items() if keys[n] not in cached}
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    print(f"multiple choice: {len(plan.mcq) - len(todo)} of {len(plan.mcq)} sets from the cache",
          file=sys.stderr, flush=True)
    bar.set_postfix_str(",".join(plan.mcq))
    t0 = time.perf_counter()
    results = run_ood(str(plan.model_dir), tasks=list(todo), problems=todo, device=args.device,
                      batch_size=args.batch_size, seed=args.seed, num_fewshot=args.num_fewshot,
                      protocol=args.mcq_protocol, model=getattr(engine, "model", None),
                      tokenizer=getattr(engine, "tokenizer", None)) if todo else {}
    seconds = round(time.perf_counter() - t0, 3)
    out = {}
    for name in plan.mcq:
        if name in todo:
            res = results[name]
            if res.skipped:
                raise RuntimeError(f"{name}: {res.skipped}")
            records = [{"benchmark": name, "problem_id": it.id, "prompt": it.prompt, "choices": list(it.choices),
                        "logliks": list(it.logliks), "extracted": it.predicted, "answer": it.target,
                        "correct": it.correct, "predicted_norm": it.predicted_norm,
                        "correct_norm": it.correct_norm} for it in res.items]
            head = {"protocol": res.protocol, "template": res.template, "lm_eval_acc": res.acc, "seconds": seconds}
            append_jsonl(cache_file, {"key": keys[name], "set": name, "result": {"head": head, "records": records}})
        else:
            head, records = cached[keys[name]]["head"], cached[keys[name]]["records"]
        acc = np.array([r["correct"] for r in records], dtype=float)
        metrics: dict[str, Any] = {"acc": float(acc.mean()), "acc_ci95": _ci(acc, args.seed),
                                   "acc_stderr": _stderr(acc)}
        if head["protocol"] == "cloze":
            norm = np.array([r["correct_norm"] for r in records], dtype=float)
            metrics.update({"acc_norm": float(norm.mean()), "acc_norm_ci95": _ci(norm, args.seed),
                            "acc_norm_stderr": _stderr(norm)})
        warning = letter_warning(name, [r["extracted"] for r in records])
        if warning:
            log.warning(warning)
        out[name] = ({"kind": "mcq", "protocol": head["protocol"], "template": head["template"], "n": len(records),
                      "k": 1, "metrics": metrics, "lm_eval_acc": head["lm_eval_acc"],
                      "warnings": [warning] if warning else [], "seconds": head["seconds"],
                      "cache": {"problems_cached": 0 if name in todo else len(records),
                                "problems_generated": len(records) if name in todo else 0}},
                     records, mcq_summary(name, records, head, args.seed, [warning] if warning else []))
        bar.update(1)
    return out


def mcq_summary(name: str, records: list[dict], head: dict, seed: int, warnings: list[str]) -> dict[str, Any]:
    """A multiple-choice set in the workflow's summary schema (``evaluation.evaluate.score``): the headline
    verdict per item (cloze: acc_norm, as lm-eval reports it; letters: acc) as k = 1 samples."""
    import lm_eval

    metric = "acc_norm" if head["protocol"] == "cloze" else "acc"
    correct = [int(bool(r["correct_norm"] if metric == "acc_norm" else r["correct"])) for r in records]
    arr = np.asarray(correct, dtype=float)
    return {"benchmark": name, "n_problems": len(records), "k": 1, "n_samples": len(records),
            "avg_at_k": float(arr.mean()), "ci95": _ci(arr, seed), "pass_at_k": float(arr.mean()),
            "maj_at_k": float(arr.mean()), "problem_ids": [r["problem_id"] for r in records],
            "per_problem_correct": [[c] for c in correct],
            "reasons": {"correct": sum(correct), "wrong": len(correct) - sum(correct)},
            "grader_version": f"lm-eval/{lm_eval.__version__} {metric}", "template": head["template"],
            "mcq_protocol": head["protocol"], "mcq_metric": metric, "warnings": warnings}


def model_label(value: str, resolved: Path) -> str:
    """The model's name in report tables (lm-eval's ``model_name_sanitized``): a folder's name, or the hub
    id with ``/`` as ``__``."""
    name = value if not Path(value).expanduser().exists() and HUB_ID.match(value) else resolved.name
    return re.sub(r"[^\w.-]+", "__", name) or "model"


def write_summaries(out: Path, plan: Plan, args: argparse.Namespace,
                    per_set: dict[str, tuple[dict, list, dict]]) -> dict[str, str]:
    """Each set's summary in the workflow's schema at ``OUT/eval/<model>/seed<seed>/step0/<set>.summary.json``,
    so that ``creditbench report --results OUT`` reads them; stale ones are removed. Returns set -> path."""
    label = model_label(args.model, plan.model_dir)
    manifest = plan.model_dir / "manifest.json"
    manifest_id = json.loads(manifest.read_text()).get("manifest_id") if manifest.is_file() else None
    folder = out / "eval" / label / f"seed{args.seed}" / "step0"
    paths = {}
    for name, (_, _, summary) in per_set.items():
        path = folder / f"{name}.summary.json"
        write_json_atomic(path, {**summary, "method": label, "seed": args.seed, "step": 0,
                                 "data_sha256": plan.data[name]["sha256"], "manifest_id": manifest_id,
                                 "model_sha256": plan.identity["model"]["sha256"]})
        paths[name] = path.relative_to(out).as_posix()
    for stale in (out / "eval").glob("*/seed*/step*/*.summary.json"):
        if stale.relative_to(out).as_posix() not in paths.values():
            stale.unlink()
    return paths


def sample_hashes(doc_id: int, record: dict) -> dict[str, Any]:
    """lm-eval's per-sample identity fields: ``doc_id`` and sha256 of the item, the prompt and the target."""
    doc = json.dumps({"problem_id": record["problem_id"], "answer": record.get("answer")}, sort_keys=True)
    return {"doc_id": doc_id, "doc_hash": _sha(doc), "prompt_hash": _sha(record.get("prompt", "")),
            "target_hash": _sha(str(record.get("answer", "")))}


def evaluate_model(args: argparse.Namespace, plan: Plan, command: str) -> dict[str, Any]:
    """Evaluate the planned sets; writes ``run.json``, the cache, ``samples_<set>.jsonl`` and ``results.json``."""
    from tqdm import tqdm

    t0 = time.perf_counter()
    start = dt.datetime.now(dt.timezone.utc)
    out = Path(args.out)
    write_json_atomic(out / "run.json", {**plan.identity, "command": command, "date": start.isoformat()})
    engine = None
    if plan.jobs or args.backend == "hf":
        from evaluation.generation import make_backend

        engine = make_backend(args.backend, str(plan.model_dir), seed=args.seed, device=args.device,
                              batch_size=args.batch_size)
    per_set: dict[str, tuple[dict, list[dict], dict]] = {}
    with tqdm(total=len(args.sets), desc="creditbench eval", unit="set", file=sys.stderr) as bar:
        if plan.jobs:
            per_set.update(_generated_sets(engine, plan, args, bar))
        if plan.mcq:
            per_set.update(_mcq_sets(engine if args.backend == "hf" else None, plan, args, bar))
    for name, (_, records, _) in per_set.items():
        index = {pid: i for i, pid in enumerate(plan.data[name]["problem_ids"])}
        write_jsonl_atomic(out / f"samples_{name}.jsonl",
                           [{**r, **sample_hashes(index[r["problem_id"]], r)} for r in records])
    for stale in out.glob("samples_*.jsonl"):  # never beside results that do not list them
        if stale.name[len("samples_"):-len(".jsonl")] not in per_set:
            stale.unlink()
    commit, dirty = git_state()
    template = getattr(getattr(engine, "tokenizer", None), "chat_template", None)
    results = {
        "results": {name: per_set[name][0] for name in args.sets},
        "config": plan.identity["config"],
        "model": plan.identity["model"],
        "model_name": args.model,
        "run_key": plan.identity["run_key"],
        "command": command,
        "date": start.isoformat(),
        "data": plan.data,
        "n-shot": {name: args.num_fewshot if name in plan.mcq
                   else len(FEWSHOT_MATH) * (plan.jobs[name][1] == "base_fewshot") for name in args.sets},
        "n-samples": {name: {"original": plan.data[name]["n_total"],
                             "effective": len(plan.data[name]["problem_ids"])} for name in args.sets},
        "seeds": {"subset_seed": args.seed, "sampling_seed": args.seed},  # one --seed draws both
        "chat_template_sha": _sha(template) if isinstance(template, str) else None,
        "grader_version": GRADER_VERSION,
        "versions": {**package_versions(), "python": sys.version.split()[0]},
        "git": {"commit": commit, "dirty": dirty},
        "git_hash": commit,
        "samples": {name: f"samples_{name}.jsonl" for name in args.sets},
        "summaries": write_summaries(out, plan, args, per_set),
        "total_evaluation_time_seconds": round(time.perf_counter() - t0, 3),
    }
    write_json_atomic(out / "results.json", results)
    return results


def format_results(results: dict[str, Any]) -> str:
    """A short table, one line per set: the headline metric with its CI."""
    lines = [f"{'set':<16} {'protocol':<9} {'n':>5} {'k':>3}  metric"]
    for name, r in results["results"].items():
        m = r["metrics"]
        key = "acc_norm" if "acc_norm" in m else "acc" if "acc" in m else "avg_at_k"
        lo, hi = m[f"{key}_ci95"]
        lines.append(f"{name:<16} {r['protocol']:<9} {r['n']:>5} {r['k']:>3}  "
                     f"{key} {100 * m[key]:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]")
    lines += [f"warning: {w}" for r in results["results"].values() for w in r.get("warnings", [])]
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (the argument and what to do), exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(prog: str = "creditbench eval") -> argparse.ArgumentParser:
    ap = _Parser(prog=prog, description=__doc__.split("\n")[0],
                 usage=f"{prog} --model DIR --sets A,B[,...] [--limit N] [options]",
                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--model", required=True, help="HF model folder (or a hub id in the local HF cache)")
    ap.add_argument("--sets", required=True, type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
                    help=f"comma list of registered sets ({len(BENCHMARKS)}: creditbench benchmarks list)")
    ap.add_argument("--limit", type=int, default=None, help="problems per set (seeded, stratified subset)")
    ap.add_argument("--k", type=int, default=1, help="samples per problem (math, code; > 1 needs temperature > 0)")
    ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--template", default=None, help="prompt template (default: each set's own)")
    ap.add_argument("--mcq-protocol", choices=("cloze", "letters"), default="cloze",
                    help="multiple choice: option text (acc, acc_norm) or option letters")
    ap.add_argument("--num-fewshot", type=int, default=0, help="multiple choice: few-shot examples")
    ap.add_argument("--backend", choices=("hf", "vllm"), default="hf")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0, help="sampling and subset seed")
    ap.add_argument("--grader-timeout-s", type=float, default=5.0)
    ap.add_argument("--data-dir", type=Path, default=None, help="benchmark files (default data/benchmarks)")
    ap.add_argument("--out", type=Path, default=Path("results/eval"),
                    help="one run's folder: results.json, samples_*.jsonl, cache/ (resumes the same run)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--debug", action="store_true", help="show the traceback of a user error")
    return ap


def main(argv: Sequence[str] | None = None, prog: str = "creditbench eval") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = build_parser(prog)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        plan = make_plan(args)
    except UsageError as err:
        if args.debug:
            raise
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    results = evaluate_model(args, plan, shlex.join([*prog.split(), *argv]))
    print(format_results(results))
    print(f"wrote {Path(args.out) / 'results.json'} in {results['total_evaluation_time_seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(prog="python -m evaluation.harness"))
