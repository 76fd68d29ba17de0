"""``creditbench eval``: one model, any registered sets, N problems each -> one results JSON + per-sample JSONL.

The lm-eval habit (``lm_eval --model hf --model_args pretrained=DIR --tasks arc_challenge --limit 200``)
without an experiment config or run labels:

    creditbench eval --model DIR --sets gsm8k,math500,arc_challenge --limit 200 --k 4 --temperature 0.6

A thin CLI over the one evaluation driver (``evaluation.driver``, which the workflow's evaluation rules run
too): math and code sets are sampled and graded (the answer checker, EvalPlus for code); multiple-choice sets
are scored by log-likelihood through lm-eval (cloze by default, as lm-eval's standard tasks). ``--sets``
takes set names and suite names (``competition_math``, ``math``, ``code``, ``mcq``, ``core``).

``OUT/results.json`` holds the config, the command, the date, the model's resolved path and content sha256,
package versions, git commit, each set's data sha256 and problem ids, the grader version and per-set
metrics with stderr and 95 % bootstrap CIs (lm-eval's field names where it has one: ``n-shot``,
``n-samples``, ``git_hash``, ``chat_template_sha``, per sample ``doc_id`` / ``doc_hash`` / ``prompt_hash``
/ ``target_hash``);
``OUT/samples_<set>.jsonl`` holds every graded sample with exactly what was graded, and
``OUT/eval/<model>/seed<s>/step0/<set>.summary.json`` each set in the workflow's summary schema, so that
``creditbench report --results OUT`` tabulates it (``creditbench compare OUT1 OUT2`` compares models).
``--limit`` draws ``--subset-seed``'s subset by the one subset rule (``evaluation.driver.select``:
stratified by subject and level where the set has them, kept in file order), the draw the workflow's
``eval.suites.<suite>.limit`` / ``subset_seed`` makes.

Errors before work: every argument (model folder, output folder, sets, template, k / temperature, data
files) is checked before the model is loaded; a user error is one line on stderr and exit code 2
(``--debug``: with its traceback). Greedy decoding (``--temperature 0``) with ``--k`` > 1 is refused: the
k samples would be identical copies, so avg@k would be greedy accuracy under another name.

Identity, cache and resume: the model's identity (``evaluation.eval_checks.model_identity``) hashes what
decides its outputs (weight tensors, tokenizer, config, generation config), so a re-converted model or a
checkpoint beside its optimizer state keeps it. ``OUT/run.json`` (written once the model has loaded, so a
failed start leaves ``--out`` free) names it and the configuration; another model or configuration in the
same ``--out`` is refused, so results never replace another run's. Generated samples are cached per problem
in ``--cache`` (default ``$CREDITBENCH_CACHE`` or ``~/.cache/creditbench/eval``, shared by every run), keyed by
the identity, set, problem, prompt, sampling knobs, backend and device (``evaluation.driver.Cache``): a
larger ``--limit``, another set, another grader timeout or a killed run generates only what is missing, and
a problem's samples are those of any other run that draws it (seeded per problem from ``--seed``;
``--subset-seed`` alone draws the problems). A corrupt cache line is named and its problem generated again.
Progress (problems and samples done, rate, time left) goes to stderr and ``OUT/eval.log``; a response is
capped at the model's context minus its prompt and cut prompts are counted (``results.json`` ``warnings``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import re
import shlex
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.io import write_json_atomic, write_jsonl_atomic
from common.manifest import git_state, package_versions
from common.records import DROP_RULE
from evaluation import driver
from evaluation.benchmarks import BENCHMARKS, SUITES, BenchmarkError, Problem, expand_sets, get_benchmark
from evaluation.eval_checks import (
    HUB_ID,
    UsageError,
    check_args,
    check_identity,
    check_model_files,
    check_out,
    context_length,
    model_identity,
    model_sha256,  # noqa: F401  (re-exported: the identity's sha256)
    resolve_model,
)
from evaluation.grading import GRADER_VERSION
from evaluation.scoring import drops_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    """Everything a run needs, checked: the resolved model, the sets' subsets, the sampling, the identity."""

    model_dir: Path
    subsets: dict[str, list[Problem]]
    data: dict[str, dict[str, Any]]
    sampling: driver.Sampling
    identity: dict[str, Any]


KEY_EXCLUDED = ("func", "out", "verbose", "debug", "data_dir", "model", "cache")
"""Arguments that do not change the numbers (the model enters the key by its identity sha256)."""


def default_cache() -> Path:
    """``$CREDITBENCH_CACHE``, else ``$XDG_CACHE_HOME/creditbench/eval`` (``~/.cache/creditbench/eval``)."""
    if os.environ.get("CREDITBENCH_CACHE"):
        return Path(os.environ["CREDITBENCH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "creditbench" / "eval"


def make_plan(args: argparse.Namespace) -> Plan:
    """Check every argument and file before any work; raises :class:`UsageError`."""
    args.sets = list(expand_sets(args.sets))  # suites as their sets; an unknown name stays to be refused
    check_args(args)
    sampling = driver.Sampling.from_args(args)
    sampling.check(args.sets)
    model_dir = resolve_model(args.model)
    out = Path(args.out)
    check_out(out)
    subsets, data = {}, {}
    for name in args.sets:
        try:  # sha256 and count verified
            subsets[name], record = driver.load_subset(name, args.limit, args.subset_seed, data_dir=args.data_dir)
        except (BenchmarkError, OSError) as err:
            raise UsageError(f"--sets {name}: {err} (--data-dir)") from None
        data[name] = {"sha256": record["data_sha256"], "n_total": record["n_total"],
                      "license": get_benchmark(name).license, "problem_ids": record["problem_ids"]}
    config = {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()
              if key not in KEY_EXCLUDED}
    config["templates"] = {n: sampling.template_for(n) for n in driver.split_sets(args.sets)[0]}
    check_model_files(model_dir, args.model, config["templates"])
    model = {"path": args.model, "resolved": str(model_dir), "context": context_length(model_dir),
             "identity": model_identity(model_dir)}
    model["sha256"] = model["identity"]["sha256"]
    key_src = {"model_sha256": model["sha256"], "config": config, "data": {n: d["sha256"] for n, d in data.items()}}
    identity = {"run_key": driver.sha(json.dumps(key_src, sort_keys=True))[:16], "model": model, "config": config}
    check_identity(out, identity)
    return Plan(model_dir, subsets, data, sampling, identity)


def model_label(value: str, resolved: Path) -> str:
    """The model's name in report tables (lm-eval's ``model_name_sanitized``): a folder's name, or the hub
    id with ``/`` as ``__``."""
    name = value if not Path(value).expanduser().exists() and HUB_ID.match(value) else resolved.name
    return re.sub(r"[^\w.-]+", "__", name) or "model"


def write_summaries(out: Path, plan: Plan, args: argparse.Namespace, summaries: dict[str, dict]) -> dict[str, str]:
    """Each set's summary (the one schema) at ``OUT/eval/<model>/seed<seed>/step0/<set>.summary.json``, so that
    ``creditbench report --results OUT`` reads them; stale ones are removed. Returns set -> path."""
    label = model_label(args.model, plan.model_dir)
    folder = out / "eval" / label / f"seed{args.seed}" / "step0"
    ids = driver.run_ids(str(plan.model_dir), label, args.seed, 0)
    paths = {}
    for name, summary in summaries.items():
        path = folder / f"{name}.summary.json"
        subset = {"limit": args.limit, "subset_seed": args.subset_seed if args.limit else None,
                  "n_total": plan.data[name]["n_total"], "data_sha256": plan.data[name]["sha256"]}
        write_json_atomic(path, {**summary, **ids, **subset, "model_sha256": plan.identity["model"]["sha256"]})
        paths[name] = path.relative_to(out).as_posix()
    for stale in (out / "eval").glob("*/seed*/step*/*.summary.json"):
        if stale.relative_to(out).as_posix() not in paths.values():
            stale.unlink()
    return paths


class AfterLoadError(RuntimeError):
    """A failure once the work has started, already worded as one line (the file and what to do)."""


def load_model(args: argparse.Namespace, plan: Plan) -> Any:
    """The generation engine (None when no set needs it here); a model transformers cannot load is one line."""
    if not driver.needs_engine(list(plan.subsets), args.backend):
        return None
    if not args.verbose:  # transformers' own warnings before a failure would make it more than one line
        import transformers

        transformers.logging.set_verbosity_error()
    try:
        return driver.load_engine(args.backend, str(plan.model_dir), plan.sampling, args.device)
    except Exception as err:  # noqa: BLE001 (transformers raises OSError, ValueError, RuntimeError, ...)
        first = (str(err).strip().splitlines() or [""])[0][:200]
        raise AfterLoadError(f"--model {args.model}: transformers could not load this folder ({type(err).__name__}: "
                             f"{first}); check its weights and tokenizer files (re-download or re-convert); no "
                             "output was written") from err


def evaluate_model(args: argparse.Namespace, plan: Plan, command: str) -> dict[str, Any]:
    """Evaluate the planned sets; writes ``run.json`` (once the model has loaded, so a failed start leaves
    ``--out`` free), ``eval.log`` (progress), the cache, ``samples_<set>.jsonl`` and ``results.json``."""
    from common import progress

    t0 = time.perf_counter()
    start = dt.datetime.now(dt.timezone.utc)
    out = Path(args.out)
    engine = load_model(args, plan)
    write_json_atomic(out / "run.json", {**plan.identity, "command": command, "date": start.isoformat()})
    progress.log_to(out / "eval.log")
    progress.note(f"creditbench eval: {command}")
    cache = driver.Cache(Path(args.cache), plan.identity["model"]["sha256"], args.backend, args.device)
    raw = driver.generate_sets(str(plan.model_dir), plan.subsets, plan.sampling, backend=args.backend,
                               device=args.device, cache=cache, engine=engine)
    scored = {}
    for name, (samples, meta) in raw.items():
        scored[name] = driver.score_set(name, plan.subsets[name], samples, meta, seed=args.seed,
                                        grader_timeout_s=args.grader_timeout_s, progress=True)
    for name, (records, _) in scored.items():
        write_jsonl_atomic(out / f"samples_{name}.jsonl", records)
    for stale in out.glob("samples_*.jsonl"):  # never beside results that do not list them
        if stale.name[len("samples_"):-len(".jsonl")] not in scored:
            stale.unlink()
    commit, dirty = git_state()
    template = getattr(getattr(engine, "tokenizer", None), "chat_template", None)
    results = {
        "results": {name: driver.results_entry(scored[name][1]) for name in args.sets},
        "config": plan.identity["config"],
        "model": plan.identity["model"],
        "model_name": args.model,
        "run_key": plan.identity["run_key"],
        "command": command,
        "date": start.isoformat(),
        "data": plan.data,
        "n-shot": {name: plan.sampling.n_shot(name) for name in args.sets},
        "n-samples": {name: {"original": plan.data[name]["n_total"],
                             "effective": len(plan.data[name]["problem_ids"])} for name in args.sets},
        "seeds": {"subset_seed": args.subset_seed, "sampling_seed": args.seed},
        "chat_template_sha": driver.sha(template) if isinstance(template, str) else None,
        "grader_version": GRADER_VERSION,
        "versions": {**package_versions(), "python": sys.version.split()[0]},
        "git": {"commit": commit, "dirty": dirty},
        "git_hash": commit,
        "samples": {name: f"samples_{name}.jsonl" for name in args.sets},
        "summaries": write_summaries(out, plan, args, {n: s for n, (_, s) in scored.items()}),
        "warnings": [w for name in args.sets for w in scored[name][1].get("warnings", [])],
        "total_evaluation_time_seconds": round(time.perf_counter() - t0, 3),
    }
    write_json_atomic(out / "results.json", results)
    return results


def format_results(results: dict[str, Any]) -> str:
    """A short table, one line per set: the headline metric with its CI and where the samples went (the drop
    rule under it), then the warnings."""
    lines = [f"{'set':<16} {'protocol':<9} {'n':>5} {'k':>3}  metric"]
    for name, r in results["results"].items():
        m = r["metrics"]
        key = "acc_norm" if "acc_norm" in m else "acc" if "acc" in m else "avg_at_k"
        lo, hi = m[f"{key}_ci95"]
        lines.append(f"{name:<16} {r['protocol']:<9} {r['n']:>5} {r['k']:>3}  "
                     f"{key} {100 * m[key]:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"
                     + (f"  samples: {drops_text(r['drops'])}" if "drops" in r else ""))
    if any("drops" in r for r in results["results"].values()):
        lines.append(DROP_RULE)
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
                    help=f"comma list of registered sets ({len(BENCHMARKS)}: creditbench benchmarks list) or suites "
                         f"({', '.join(SUITES)})")
    ap.add_argument("--limit", type=int, default=None, help="problems per set (seeded, stratified subset)")
    ap.add_argument("--k", type=int, default=1, help="samples per problem (math, code; > 1 needs temperature > 0)")
    ap.add_argument("--temperature", type=float, default=0.0, metavar="T", help="0: greedy")
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--max-new-tokens", type=int, default=512, metavar="N")
    ap.add_argument("--template", default=None, help="prompt template (default: each set's own)")
    ap.add_argument("--mcq-protocol", choices=("cloze", "letters"), default="cloze",
                    help="multiple choice: option text (acc, acc_norm) or option letters")
    ap.add_argument("--num-fewshot", type=int, default=0, metavar="N", help="multiple choice: few-shot examples")
    ap.add_argument("--backend", choices=("hf", "vllm"), default="hf")
    ap.add_argument("--batch-size", type=int, default=16, metavar="N")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed (not the problems drawn)")
    ap.add_argument("--subset-seed", type=int, default=0, metavar="S", help="seed of --limit's draw of problems")
    ap.add_argument("--grader-timeout-s", type=float, default=5.0, metavar="S")
    ap.add_argument("--data-dir", type=Path, default=None, help="benchmark files (default data/benchmarks)")
    ap.add_argument("--out", type=Path, default=Path("results/eval"),
                    help="one run's folder: results.json, samples_*.jsonl, eval.log (reruns the same run)")
    ap.add_argument("--cache", type=Path, default=None, metavar="DIR",
                    help="per-sample cache shared by runs (None: $CREDITBENCH_CACHE or ~/.cache/creditbench/eval)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--debug", action="store_true", help="show the traceback of a user error")
    return ap


def main(argv: Sequence[str] | None = None, prog: str = "creditbench eval") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = build_parser(prog)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    args.cache = args.cache or default_cache()
    try:
        plan = make_plan(args)
    except UsageError as err:
        if args.debug:
            raise
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    context = plan.identity["model"]["context"]
    if context and args.max_new_tokens >= context and driver.split_sets(args.sets)[0]:
        print(f"{prog}: --max-new-tokens {args.max_new_tokens}: the model's context is {context} positions "
              "(config.json); each response is capped at the context minus its prompt (results.json: warnings)",
              file=sys.stderr)
    try:
        results = evaluate_model(args, plan, shlex.join([*prog.split(), *argv]))
    except AfterLoadError as err:
        if args.debug:
            raise
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 (after load: one line; --debug for the traceback)
        if args.debug:
            raise
        where = traceback.extract_tb(err.__traceback__)[-1]
        print(f"{prog}: error: {type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:300]} (at "
              f"{Path(where.filename).name}:{where.lineno}; what was generated is in the cache {args.cache}: rerun "
              "the same command to resume, --debug for the traceback)", file=sys.stderr)
        return 1
    print(format_results(results))
    print(f"wrote {Path(args.out) / 'results.json'} in {results['total_evaluation_time_seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(prog="python -m evaluation.harness"))
