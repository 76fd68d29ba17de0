"""The one evaluation driver: one model on named sets (or suites, ``evaluation.benchmarks.SUITES``), for every
path that evaluates: the workflow's rules (``evaluate``: the synthetic held-out set and registered sets of
every checkpoint; ``real_generate`` / ``real_score``: the real sets of chosen checkpoints, GPU and CPU jobs
apart) and ``creditbench eval``. Each is a thin CLI over these pieces:

* :class:`Sampling`: the one place the sampling knobs (k, temperature, top_p, max_new_tokens, batch size,
  template, seed; multiple choice: few-shot and protocol) are defined and validated, built from the config
  (``eval`` / ``real_eval``) or from the command's arguments;
* :func:`select` / :func:`load_subset`: the one subset rule, N problems drawn with a seed, stratified by
  subject / level where the set has them, kept in file order (``evaluation.benchmarks.stratified_subset``);
* :func:`generate_sets`: samples of the math and code sets (chunk by chunk through an optional sample-level
  cache) and the multiple-choice sets by log-likelihood through lm-eval (``evaluation.mcq``, wired once);
* :func:`score_set`: graded per-sample records (with lm-eval's ``doc_id`` / ``doc_hash`` / ``prompt_hash`` /
  ``target_hash``) and the one summary schema (``evaluation.scoring``: what the report reads, with a
  ``metrics`` block in lm-eval's naming); :func:`results_entry` is a summary as ``results.json`` lists it.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.io import append_jsonl, read_jsonl
from evaluation.benchmarks import BENCHMARKS, Problem, get_benchmark, load_benchmark, stratified_subset
from evaluation.eval_checks import UsageError
from evaluation.templates import FEWSHOT_MATH, TEMPLATES

FLAG: Callable[[str], str] = lambda knob: "--" + knob.replace("_", "-")  # noqa: E731
"""How a knob is named in a message: ``creditbench eval``'s flag; a config's is ``config key 'eval/k'``."""


def config_key(section: str) -> Callable[[str], str]:
    return lambda knob: f"config key '{section}/{knob}'"


def sha(text: str) -> str:
    """sha256 of the text's UTF-8 (a lone surrogate of a corrupted item is hashed as is, not an error)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def split_sets(sets: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(generated and graded: math + code, lm-eval: multiple choice)."""
    mcq = tuple(s for s in sets if get_benchmark(s).kind == "mcq")
    return tuple(s for s in sets if s not in mcq), mcq


# ----------------------------------------------------------------------------------------- sampling knobs

@dataclass(frozen=True)
class Sampling:
    """How a model is sampled; one run's knobs for all its sets. ``template``: one template for every math and
    code set (a set it does not fit takes its own default, see :meth:`template_for`); ``templates``: one per
    set kind (``real_eval.templates``), which wins; neither: each set's default."""

    k: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 512
    batch_size: int = 16
    seed: int = 0
    template: str | None = None
    templates: Mapping[str, str] = field(default_factory=dict)
    num_fewshot: int = 0
    mcq_protocol: str = "cloze"

    @classmethod
    def from_eval(cls, ev: Any, seed: int) -> Sampling:
        """Config ``eval`` (the workflow's rule evaluate) with the run's seed."""
        return cls(k=ev.k, temperature=ev.temperature, top_p=ev.top_p, max_new_tokens=ev.max_new_tokens,
                   batch_size=ev.batch_size, seed=seed, template=ev.template)

    @classmethod
    def from_real_eval(cls, re_: Any, seed: int) -> Sampling:
        """Config ``real_eval`` (rules real_generate, real_score) with the run's seed."""
        return cls(k=re_.k, temperature=re_.temperature, top_p=re_.top_p, max_new_tokens=re_.max_new_tokens,
                   batch_size=re_.batch_size, seed=seed, templates=dict(re_.templates),
                   num_fewshot=re_.num_fewshot, mcq_protocol=re_.mcq_protocol)

    @classmethod
    def from_args(cls, args: Any) -> Sampling:
        """``creditbench eval``'s arguments."""
        return cls(k=args.k, temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens,
                   batch_size=args.batch_size, seed=args.seed, template=args.template,
                   num_fewshot=args.num_fewshot, mcq_protocol=args.mcq_protocol)

    def check(self, sets: Sequence[str], name: Callable[[str], str] = FLAG) -> None:
        """Refuse knobs that cannot give the numbers asked for (:class:`UsageError`, one line naming the knob
        by ``name``): bounds, greedy decoding with k > 1 (k identical samples: avg@k would be greedy accuracy
        under another name), unknown templates, a template that fits none or only some of the sets."""
        for knob, low in (("k", 1), ("max_new_tokens", 1), ("batch_size", 1), ("num_fewshot", 0)):
            if getattr(self, knob) < low:
                raise UsageError(f"{name(knob)} {getattr(self, knob)}: must be at least {low}")
        if not self.temperature >= 0 or not 0 < self.top_p <= 1:
            raise UsageError(f"{name('temperature')} {self.temperature} / {name('top_p')} {self.top_p}: need "
                             "temperature >= 0 and 0 < top-p <= 1")
        generated = split_sets(sets)[0]
        if generated and self.k > 1 and self.temperature == 0:
            raise UsageError(f"{name('k')} {self.k} with {name('temperature')} 0: greedy decoding gives {self.k} "
                             f"identical samples; pass {name('temperature')} > 0 to sample (e.g. 0.6) or "
                             f"{name('k')} 1")
        if self.mcq_protocol not in ("cloze", "letters"):
            raise UsageError(f"{name('mcq_protocol')} {self.mcq_protocol}: cloze or letters")
        for kind, template in self.templates.items():
            if template not in TEMPLATES:
                raise UsageError(f"{name('templates')} {kind}: {template} unknown; known: {', '.join(TEMPLATES)}")
        if self.template is None:
            return
        if self.template not in TEMPLATES:
            raise UsageError(f"{name('template')} {self.template}: unknown; known: {', '.join(TEMPLATES)}")
        if not generated:
            raise UsageError(f"{name('template')} applies to math and code sets; multiple choice takes "
                             f"{name('mcq_protocol')}")
        misfit = [s for s in generated if not BENCHMARKS[s].generated and self.template not in BENCHMARKS[s].templates]
        if misfit and name is FLAG:
            raise UsageError(f"--template {self.template}: does not fit {', '.join(misfit)} (their templates: "
                             f"{', '.join(sorted({t for s in misfit for t in BENCHMARKS[s].templates}))}); "
                             "evaluate those sets in another run")

    def template_for(self, name: str) -> str:
        """The set's template: ``templates`` by kind, else ``template`` where it fits (any template fits a
        generated set), else the set's default (a config's one template over mixed sets; the CLI refuses
        a misfit in :meth:`check`)."""
        bench = get_benchmark(name)
        if bench.kind in self.templates:
            return self.templates[bench.kind]
        if self.template and (bench.generated or self.template in bench.templates):
            return self.template
        return bench.default_template

    def params(self, template: str) -> Any:
        """The backends' :class:`~evaluation.generation.SamplingParams` (with the template's stop strings)."""
        from evaluation.generation import SamplingParams
        from evaluation.templates import stop_strings

        return SamplingParams(n=self.k, temperature=self.temperature, top_p=self.top_p,
                              max_new_tokens=self.max_new_tokens, seed=self.seed, stop=stop_strings(template))

    def record(self, template: str) -> dict[str, Any]:
        """The ``sampling`` record of a summary (and of the cache key)."""
        from evaluation.templates import stop_strings

        out = {"n": self.k, "temperature": self.temperature, "top_p": self.top_p,
               "max_new_tokens": self.max_new_tokens, "seed": self.seed}
        stop = stop_strings(template)
        return {**out, "stop": list(stop)} if stop else out

    def n_shot(self, name: str) -> int:
        """lm-eval's ``n-shot`` of a set: few-shot examples in its prompt."""
        if get_benchmark(name).kind == "mcq":
            return self.num_fewshot
        return len(FEWSHOT_MATH) if self.template_for(name) == "base_fewshot" else 0


# ----------------------------------------------------------------------------------------- subsets

def select(problems: Sequence[Problem], limit: int | None, seed: int) -> list[Problem]:
    """The one subset rule: ``limit`` problems drawn with ``seed``, stratified by subject / level where the set
    has them, in file order; all when ``limit`` is None or not smaller than the set."""
    return stratified_subset(problems, limit, seed)


def load_subset(name: str, limit: int | None, seed: int, *, data_dir: Any = None, gpqa_dir: Any = None,
                path: Any = None, sha256: str | None = None,
                count: int | None = None) -> tuple[list[Problem], dict[str, Any]]:
    """A verified set's evaluated problems and the subset record every summary carries (limit, subset seed,
    set size, data sha256, problem ids). ``path`` / ``sha256`` / ``count``: a generated set's file."""
    problems = load_benchmark(name, data_dir=data_dir, gpqa_dir=gpqa_dir, path=path, sha256=sha256, count=count)
    chosen = select(problems, limit, seed)
    return chosen, {"limit": limit, "subset_seed": seed if limit else None, "n_total": len(problems),
                    "data_sha256": sha256 if get_benchmark(name).generated else get_benchmark(name).sha256,
                    "problem_ids": [p.id for p in chosen]}


# ----------------------------------------------------------------------------------------- generation

@dataclass(frozen=True)
class Cache:
    """The sample-level cache of one run (``creditbench eval``'s ``OUT/cache``): ``identity`` holds the model's
    content sha256 and the configuration (backend, device among it), which enter every key."""

    folder: Path
    identity: Mapping[str, Any]


def chunk_key(identity: Mapping[str, Any], name: str, template: str, sampling: dict, offset: int,
              prompts: Sequence[str]) -> str:
    """Cache key of one generation chunk: model sha256, set, template, sampling, backend, device, position
    and the prompts themselves (so the items); any change makes a new key."""
    cfg = identity["config"]
    src = {"model": identity["model"]["sha256"], "set": name, "template": template, "sampling": sampling,
           "backend": cfg["backend"], "device": cfg["device"], "offset": offset,
           "prompts": [sha(p) for p in prompts]}
    return sha(json.dumps(src, sort_keys=True))


def raw_samples(benchmark: str, problems: Sequence[Problem], prompts: Sequence[str], completions) -> list[dict]:
    """Generated samples before grading (problem-major, ``sample`` = index within the problem); ``response``
    is the text graded (cut before the template's stop string)."""
    return [{"benchmark": benchmark, "problem_id": p.id, "sample": j, "prompt": prompt, "response": c.text,
             "tokens": len(c.token_ids), "finish_reason": c.finish_reason, "latency_s": round(c.latency_s, 6),
             **({"error": c.error} if c.error else {})}
            for p, prompt, group in zip(problems, prompts, completions) for j, c in enumerate(group)]


def engine_identity(engine: Any) -> dict[str, Any]:
    """The generation engine's identity (``evaluation.generation.engine_record``) for the summary."""
    return engine.identity()


def generate_guarded(engine: Any, prompts: Sequence[str], params: Any, offset: int = 0) -> list[list[Any]]:
    """``engine.generate`` that loses no prompt to an error: when a batch raises, each prompt is retried alone
    (with the seed of its position) and a prompt that still raises gets k ``Completion`` s with
    ``finish_reason`` ``error`` and the message as text, which the scorer counts as a generation error
    (``evaluation.scoring.drop_counts``) instead of dropping it. A batch whose every prompt fails re-raises:
    that is a broken engine, not a dropped sample."""
    from evaluation.generation import Completion
    from evaluation.scoring import GENERATION_ERROR

    try:
        return engine.generate(list(prompts), params, offset=offset)
    except Exception as err:  # noqa: BLE001  (retried prompt by prompt below; all failing re-raises)
        first = err
    out, errors = [], 0
    for i, prompt in enumerate(prompts):
        try:
            out += engine.generate([prompt], params, offset=offset + i)
        except Exception as err:  # noqa: BLE001
            errors += 1
            msg = f"{type(err).__name__}: {err}"
            print(f"generation error (prompt {offset + i}): {msg}", file=sys.stderr, flush=True)
            out.append([Completion(text="", token_ids=(), finish_reason=GENERATION_ERROR, latency_s=0.0, error=msg)
                        for _ in range(params.n)])
    if errors == len(prompts):
        raise first
    return out


def _read_cache(path: Path, field_name: str) -> dict[str, Any]:
    return {row["key"]: row[field_name] for row in read_jsonl(path, drop_torn_tail=True)} if path.is_file() else {}


def generate_set(engine: Any, name: str, problems: list[Problem], sampling: Sampling,
                 cache: Cache | None = None) -> tuple[list[dict], dict[str, Any]]:
    """Raw samples of one math or code set and their meta (template, sampling, seconds, cache counts).
    With a cache, chunk by chunk (the backend's batch, with the seed it gets in one call over the set, so
    a resumed run writes the numbers of an uninterrupted one); only missing chunks are generated."""
    from evaluation.templates import render

    template = sampling.template_for(name)
    prompts = [render(template, p, getattr(engine, "tokenizer", None)) for p in problems]
    params, record = sampling.params(template), sampling.record(template)
    per_chunk = len(problems) or 1
    if cache is not None:
        per_chunk = max(1, int(getattr(engine, "batch_size", 0) or 32) // sampling.k)
    chunks = [(s, problems[s:s + per_chunk], prompts[s:s + per_chunk]) for s in range(0, len(problems), per_chunk)]
    cache_file = cache.folder / f"{name}.jsonl" if cache else None
    done = _read_cache(cache_file, "samples") if cache_file else {}
    keys = [chunk_key(cache.identity, name, template, record, s, ps) if cache else "" for s, _, ps in chunks]
    from_cache = sum(len(c[1]) for c, key in zip(chunks, keys) if cache and key in done)
    if cache_file:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        print(f"{name}: {from_cache} of {len(problems)} problems from the cache, {len(problems) - from_cache} to "
              "generate", file=sys.stderr, flush=True)
    raw, seconds = [], 0.0
    for (start, probs, ps), key in zip(chunks, keys):
        if not (cache and key in done):
            t0 = time.perf_counter()
            samples = raw_samples(name, probs, ps, generate_guarded(engine, ps, params, offset=start))
            seconds += time.perf_counter() - t0
            if cache_file and not any("error" in r for r in samples):  # a failed prompt is retried on resume
                done[key] = samples
                append_jsonl(cache_file, {"key": key, "set": name, "offset": start, "samples": samples})
        else:
            samples = done[key]
        raw += samples
    return raw, {"template": template, "sampling": record, "generation_seconds": round(seconds, 3),
                 "engine": engine_identity(engine),
                 "cache": {"problems_cached": from_cache, "problems_generated": len(problems) - from_cache}}


def mcq_sets(engine: Any, model_dir: str, subsets: Mapping[str, list[Problem]], sampling: Sampling, *,
             device: str, cache: Cache | None = None) -> dict[str, tuple[list[dict], dict[str, Any]]]:
    """The multiple-choice sets through lm-eval (``evaluation.mcq.loglikelihood_sets``), cached per set."""
    from evaluation.mcq import loglikelihood_sets

    cache_file = cache.folder / "mcq.jsonl" if cache else None
    keys = {n: sha(json.dumps({"model": cache.identity["model"]["sha256"], "set": n, "config":
                               cache.identity["config"], "ids": [p.id for p in ps]}, sort_keys=True)) if cache else ""
            for n, ps in subsets.items()}
    done = _read_cache(cache_file, "result") if cache_file else {}
    todo = {n: ps for n, ps in subsets.items() if not (cache and keys[n] in done)}
    if cache_file:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        print(f"multiple choice: {len(subsets) - len(todo)} of {len(subsets)} sets from the cache",
              file=sys.stderr, flush=True)
    fresh = loglikelihood_sets(model_dir, todo, device=device, batch_size=sampling.batch_size, seed=sampling.seed,
                               num_fewshot=sampling.num_fewshot, protocol=sampling.mcq_protocol,
                               engine=engine) if todo else {}
    out = {}
    for name, problems in subsets.items():
        if name in todo:
            raw, meta = fresh[name]
            if cache_file:
                append_jsonl(cache_file, {"key": keys[name], "set": name, "result": [raw, meta]})
        else:
            raw, meta = done[keys[name]]
        n = len(problems)
        out[name] = (raw, {**meta, "cache": {"problems_cached": 0 if name in todo else n,
                                             "problems_generated": n if name in todo else 0}})
    return out


def needs_engine(sets: Sequence[str], backend: str) -> bool:
    """Whether evaluating ``sets`` loads the model here: math and code sets are sampled by it, and multiple
    choice reuses the loaded HF model (vLLM's cannot serve lm-eval, which then loads its own)."""
    generated, mcq = split_sets(sets)
    return bool(generated) or (bool(mcq) and backend == "hf")


def load_engine(backend: str, model_dir: str, sampling: Sampling, device: str) -> Any:
    from evaluation.generation import make_backend

    return make_backend(backend, model_dir, seed=sampling.seed, device=device, batch_size=sampling.batch_size)


def generate_sets(model_dir: str, subsets: Mapping[str, list[Problem]], sampling: Sampling, *, backend: str,
                  device: str, cache: Cache | None = None, engine: Any = None,
                  progress: Callable[[str], None] = lambda name: None) -> dict[str, tuple[list[dict], dict]]:
    """Every set's raw samples and meta (name -> (raw, meta)), with one loaded model: sampled for math and
    code, by log-likelihood for multiple choice (the loaded model when the backend is HF)."""
    generated_names, mcq_names = split_sets(list(subsets))
    generated, mcq = {n: subsets[n] for n in generated_names}, {n: subsets[n] for n in mcq_names}
    if engine is None and needs_engine(list(subsets), backend):
        engine = load_engine(backend, model_dir, sampling, device)
    out: dict[str, tuple[list[dict], dict]] = {}
    for name, problems in generated.items():
        progress(name)
        raw, meta = generate_set(engine, name, problems, sampling, cache)
        out[name] = (raw, {**meta, "backend": backend})
    if mcq:
        progress(",".join(mcq))
        out.update(mcq_sets(engine if backend == "hf" else None, model_dir, mcq, sampling, device=device,
                            cache=cache))
    return {name: out[name] for name in subsets}


# ----------------------------------------------------------------------------------------- scoring

def sample_hashes(doc_id: int, record: Mapping[str, Any]) -> dict[str, Any]:
    """lm-eval's per-sample identity fields: ``doc_id`` and sha256 of the item, the prompt and the target."""
    doc = json.dumps({"problem_id": record["problem_id"], "answer": record.get("answer")}, sort_keys=True)
    prompt = record.get("prompt_sha256") or sha(record.get("prompt", ""))
    return {"doc_id": doc_id, "doc_hash": sha(doc), "prompt_hash": prompt,
            "target_hash": sha(str(record.get("answer", "")))}


def score_set(name: str, problems: list[Problem], raw: list[dict], meta: Mapping[str, Any], *, seed: int,
              grader_timeout_s: float, grader_workers: int = 1) -> tuple[list[dict], dict[str, Any]]:
    """Grade one set's raw samples (``meta`` from :func:`generate_sets`): per-sample records and the summary,
    the one schema every path writes (``evaluation.scoring.score`` plus the generation's meta). Multiple
    choice: our letter match is checked against lm-eval's verdict, and a dominant letter is a warning."""
    import logging

    from evaluation.scoring import score

    loglik = bool(meta["sampling"].get("loglikelihood"))
    t0 = time.perf_counter()
    records, summary = score(name, problems, raw, k=meta["sampling"]["n"], template=meta["template"], seed=seed,
                             grader_timeout_s=grader_timeout_s, grader_workers=grader_workers, loglikelihood=loglik)
    if loglik:
        from evaluation.mcq import check_lm_eval, letter_warning

        check_lm_eval(name, records)
        warning = letter_warning(name, [r["response"] for r in records])  # the chosen option letters
        summary["warnings"] = [warning] if warning else []
        if warning:
            logging.getLogger(__name__).warning(warning)
    index = {p.id: i for i, p in enumerate(problems)}
    records = [{**r, **sample_hashes(index[r["problem_id"]], r)} for r in records]
    summary.update({k: v for k, v in meta.items() if k not in summary or k == "grader_version"})
    summary["scoring_seconds"] = round(time.perf_counter() - t0, 3)
    return records, summary


def results_entry(summary: Mapping[str, Any]) -> dict[str, Any]:
    """One set as ``results.json`` lists it (lm-eval's ``results`` block): its summary's headline fields."""
    kind = get_benchmark(summary["benchmark"]).kind
    out = {"kind": kind, "protocol": summary.get("mcq_protocol", "generate"), "template": summary["template"],
           "n": summary["n_problems"], "k": summary["k"], "metrics": summary["metrics"],
           "reasons": summary["reasons"], "sampling": summary["sampling"],
           "seconds": summary.get("generation_seconds"), "cache": summary.get("cache"), "drops": summary["drops"],
           "engine": summary.get("engine")}
    keep = ("lm_eval_acc", "lm_eval_acc_norm", "warnings", "mean_response_tokens")
    out.update({key: summary[key] for key in keep if key in summary})
    return out


def evaluate_sets(model_dir: str, subsets: Mapping[str, list[Problem]], sampling: Sampling, *, backend: str,
                  device: str, grader_timeout_s: float, grader_workers: int = 1, cache: Cache | None = None,
                  progress: Callable[[str], None] = lambda name: None) -> dict[str, tuple[list[dict], dict]]:
    """Generate and score in one process: name -> (per-sample records, summary)."""
    raw = generate_sets(model_dir, subsets, sampling, backend=backend, device=device, cache=cache, progress=progress)
    return {name: score_set(name, subsets[name], samples, meta, seed=sampling.seed, grader_timeout_s=grader_timeout_s,
                            grader_workers=grader_workers) for name, (samples, meta) in raw.items()}


def run_ids(model_dir: str, method: str, seed: int, step: int) -> dict[str, Any]:
    """The workflow's run identifiers in every summary (the checkpoint's manifest id when it has one)."""
    manifest = Path(model_dir) / "manifest.json"
    return {"method": method, "seed": seed, "step": step, "model_dir": str(model_dir),
            "manifest_id": json.loads(manifest.read_text()).get("manifest_id") if manifest.is_file() else None}
