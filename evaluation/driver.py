"""The one evaluation driver: one model on named sets (or suites, ``evaluation.benchmarks.SUITES``), for every
path that evaluates: the workflow's rules ``eval_generate`` / ``eval_score`` (each suite of config
``eval.suites`` on its checkpoints, GPU and CPU jobs apart: ``evaluation.evaluate``) and ``creditbench eval``.
Each is a thin CLI over these pieces:

* :class:`Sampling`: the one place the sampling knobs (k, temperature, top_p, max_new_tokens, batch size,
  template, seed; multiple choice: few-shot and protocol) are defined and validated, built from a config
  suite (``eval.suites``) or from the command's arguments;
* :func:`select` / :func:`load_subset`: the one subset rule, N problems drawn with a seed, stratified by
  subject / level where the set has them, kept in file order (``evaluation.benchmarks.stratified_subset``);
* :func:`generate_sets`: samples of the math and code sets (problem by problem through an optional
  per-sample cache, :class:`Cache`) and the multiple-choice sets by log-likelihood through lm-eval
  (``evaluation.mcq``, wired once);
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

from common.io import append_jsonl
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
    code set it fits, which wins; ``templates``: one per set kind (a suite's ``templates``), for the rest;
    neither: each set's default (:meth:`template_for`)."""

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
    def from_suite(cls, suite: Any, seed: int) -> Sampling:
        """A suite of config ``eval.suites`` (rules eval_generate, eval_score) with the sampling seed."""
        return cls(k=suite.k, temperature=suite.temperature, top_p=suite.top_p, max_new_tokens=suite.max_new_tokens,
                   batch_size=suite.batch_size, seed=seed, template=suite.template, templates=dict(suite.templates),
                   num_fewshot=suite.num_fewshot, mcq_protocol=suite.mcq_protocol)

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
        """The set's template: ``template`` where it fits (any template fits a generated set), else
        ``templates`` by kind, else the set's default (a config's one template over mixed sets; the CLI
        refuses a misfit in :meth:`check`)."""
        bench = get_benchmark(name)
        if self.template and (bench.generated or self.template in bench.templates):
            return self.template
        return self.templates.get(bench.kind) or bench.default_template

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
    """The per-sample cache of ``creditbench eval`` (lm-eval's ``--use_cache`` idea): one JSONL per model
    identity and set under ``folder`` (``--cache``, shared by every run), one row per problem, keyed by the
    model's identity sha256, set, problem, prompt, sampling knobs (the problem's seed among them), backend
    and device (:func:`sample_key`). A problem's samples depend on nothing else (the HF backend generates
    it alone, seeded by :func:`problem_seed`), so a larger ``--limit``, another set or another grader
    timeout reuses every cached problem and generates only the rest."""

    folder: Path
    model: str
    backend: str
    device: str

    def file(self, name: str) -> Path:
        return self.folder / self.model[:16] / f"{name}.jsonl"


def problem_seed(seed: int, name: str, problem_id: str) -> int:
    """The sampling seed of one problem: from ``--seed``, the set and the problem id alone (not from its
    position), so that a subset's problems sample as in any other subset that holds them."""
    return int(sha(f"{seed}\0{name}\0{problem_id}")[:15], 16)


def sample_key(cache: Cache, name: str, problem_id: str, prompt: str, knobs: Mapping[str, Any]) -> str:
    """Cache key of one problem's samples: any change of model, set, problem, prompt (item, template,
    truncation), sampling knobs (k, temperature, top_p, max_new_tokens, seed, stop), backend or device
    makes a new key."""
    src = {"model": cache.model, "set": name, "problem": problem_id, "prompt": sha(prompt), "sampling": dict(knobs),
           "backend": cache.backend, "device": cache.device}
    return sha(json.dumps(src, sort_keys=True))


def read_cache(path: Path, field_name: str) -> dict[str, Any]:
    """key -> value of a cache file; a corrupt line (torn by a kill, edited, truncated) is named on stderr
    and skipped, so its problem is generated again instead of failing the run."""
    from common.progress import note

    out: dict[str, Any] = {}
    if not path.is_file():
        return out
    with open(path, encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                out[row["key"]] = row[field_name]
            except (json.JSONDecodeError, KeyError, TypeError):
                note(f"cache: {path} line {i} is corrupt; its problem is generated again (the line is ignored; "
                     "delete the file to drop it)")
    return out


def raw_samples(benchmark: str, problems: Sequence[Problem], prompts: Sequence[str], completions) -> list[dict]:
    """Generated samples before grading (problem-major, ``sample`` = index within the problem); ``response``
    is the text graded (cut before the template's stop string)."""
    return [{"benchmark": benchmark, "problem_id": p.id, "sample": j, "prompt": prompt, "response": c.text,
             "tokens": len(c.token_ids), "finish_reason": c.finish_reason, "latency_s": round(c.latency_s, 6),
             **({"error": c.error} if c.error else {})}
            for p, prompt, group in zip(problems, prompts, completions) for j, c in enumerate(group)]


def fit_context(prompts: list[str], tokenizer: Any, context: int | None,
                max_new_tokens: int) -> tuple[list[str], list[int], int]:
    """Each prompt's token budget within the model's context (``max_new_tokens`` capped at ``context``
    minus the prompt's tokens) and the prompts cut from the left (as lm-eval cuts) where a prompt leaves
    no room: it keeps ``context`` minus min(``max_new_tokens``, a quarter of the context) tokens. Returns
    (prompts, budgets, prompts cut)."""
    if not context or tokenizer is None:
        return prompts, [max_new_tokens] * len(prompts), 0
    out, budgets, cut = [], [], 0
    for prompt in prompts:
        try:
            ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        except Exception:  # noqa: BLE001 (a corrupted item: generate_guarded records its generation error)
            out.append(prompt)
            budgets.append(max_new_tokens)
            continue
        if len(ids) >= context:
            keep = context - min(max_new_tokens, max(1, context // 4))
            prompt, ids, cut = tokenizer.decode(ids[-keep:]), ids[-keep:], cut + 1
        out.append(prompt)
        budgets.append(max(1, min(max_new_tokens, context - len(ids))))
    return out, budgets, cut


def engine_identity(engine: Any) -> dict[str, Any]:
    """The generation engine's identity (``evaluation.generation.engine_record``) for the summary."""
    return engine.identity()


def generate_guarded(engine: Any, prompts: Sequence[str], params: Any, offset: int = 0,
                     seeds: Sequence[int] | None = None) -> list[list[Any]]:
    """``engine.generate`` that loses no prompt to an error: when a batch raises, each prompt is retried alone
    (with the seed of its position, or its own of ``seeds``) and a prompt that still raises gets k
    ``Completion`` s with ``finish_reason`` ``error`` and the message as text, which the scorer counts as a
    generation error (``evaluation.scoring.drop_counts``) instead of dropping it. A batch whose every prompt
    fails re-raises: that is a broken engine, not a dropped sample."""
    from evaluation.generation import Completion
    from evaluation.scoring import GENERATION_ERROR

    def call(ps: list[str], start: int) -> list[list[Any]]:
        if seeds is None:
            return engine.generate(ps, params, offset=offset + start)
        return engine.generate(ps, params, seeds=list(seeds[start:start + len(ps)]))

    try:
        return call(list(prompts), 0)
    except Exception as err:  # noqa: BLE001  (retried prompt by prompt below; all failing re-raises)
        first = err
    out, errors = [], 0
    for i, prompt in enumerate(prompts):
        try:
            out += call([prompt], i)
        except Exception as err:  # noqa: BLE001
            errors += 1
            msg = f"{type(err).__name__}: {err}"
            print(f"generation error (prompt {offset + i}): {msg}", file=sys.stderr, flush=True)
            out.append([Completion(text="", token_ids=(), finish_reason=GENERATION_ERROR, latency_s=0.0, error=msg)
                        for _ in range(params.n)])
    if errors == len(prompts):
        raise first
    return out


def truncation_warnings(name: str, requested: int, budgets: Sequence[int], cut: int, context: int | None) -> list[str]:
    """The lines results.json (``warnings``) and the summary carry about the context."""
    out = []
    capped = sum(b < requested for b in budgets)
    if capped:
        out.append(f"{name}: --max-new-tokens {requested} capped for {capped} of {len(budgets)} problems at the "
                   f"model's context ({context} positions) minus the prompt (budget {min(budgets)}-{max(budgets)})")
    if cut:
        out.append(f"{name}: {cut} of {len(budgets)} prompts longer than the model's context ({context}) were cut "
                   "from the left")
    return out


def _generate_per_problem(engine: Any, name: str, problems: list[Problem], prompts: list[str], sampling: Sampling,
                          template: str, cache: Cache | None,
                          context: int | None) -> tuple[list[dict], dict[str, Any]]:
    """:func:`generate_set` problem by problem, each seeded by :func:`problem_seed` and capped at the
    context, through the per-sample cache when there is one: only problems without a valid entry are
    generated (vLLM: batches of ``batch_size // k`` problems with the same budget), each cached once done."""
    from dataclasses import replace

    from common.progress import Progress, note

    record = sampling.record(template)
    prompts, budgets, cut = fit_context(prompts, getattr(engine, "tokenizer", None), context, sampling.max_new_tokens)
    seeds = [problem_seed(sampling.seed, name, p.id) for p in problems]
    keys = [sample_key(cache, name, p.id, prompt, {**record, "max_new_tokens": b, "seed": s}) if cache else p.id
            for p, prompt, b, s in zip(problems, prompts, budgets, seeds)]
    path = cache.file(name) if cache else None
    done = read_cache(path, "samples") if path else {}
    done = {k: v for k, v in done.items() if isinstance(v, list) and len(v) == sampling.k}
    todo = [i for i, key in enumerate(keys) if key not in done]
    if path:
        note(f"{name}: {len(problems) - len(todo)} of {len(problems)} problems from the cache, {len(todo)} to "
             "generate")
        path.parent.mkdir(parents=True, exist_ok=True)
    # vLLM seeds each request apart and batches them; HF generates a seeded prompt alone anyway, so one
    # problem a call costs nothing and moves the progress line problem by problem
    per_batch = max(1, sampling.batch_size // sampling.k) if getattr(engine, "batches_seeded_prompts", False) else 1
    batches: list[list[int]] = []
    for i in todo:
        if batches and len(batches[-1]) < per_batch and budgets[batches[-1][0]] == budgets[i]:
            batches[-1].append(i)
        else:
            batches.append([i])
    seconds = 0.0
    with Progress(f"{name} generate", total=len(todo)) as bar:
        for batch in batches:
            params = replace(sampling.params(template), max_new_tokens=budgets[batch[0]])
            t0 = time.perf_counter()
            completions = generate_guarded(engine, [prompts[i] for i in batch], params,
                                           seeds=[seeds[i] for i in batch])
            seconds += time.perf_counter() - t0
            for i, group in zip(batch, completions):
                done[keys[i]] = raw_samples(name, [problems[i]], [prompts[i]], [group])
                if path and not any("error" in r for r in done[keys[i]]):  # a failed prompt is retried on resume
                    append_jsonl(path, {"key": keys[i], "set": name, "problem_id": problems[i].id,
                                        "samples": done[keys[i]]})
            bar.update(len(batch), samples=len(batch) * sampling.k)
    raw = [{**s, "sample": j} for key in keys for j, s in enumerate(done[key])]
    return raw, {"template": template, "sampling": record, "generation_seconds": round(seconds, 3),
                 "engine": engine_identity(engine),
                 "cache": {"problems_cached": len(problems) - len(todo), "problems_generated": len(todo)},
                 "context": {"positions": context, "prompts_truncated": cut,
                             "max_new_tokens_capped": sum(b < sampling.max_new_tokens for b in budgets)},
                 "warnings": truncation_warnings(name, sampling.max_new_tokens, budgets, cut, context)}


def generate_set(engine: Any, name: str, problems: list[Problem], sampling: Sampling, cache: Cache | None = None,
                 context: int | None = None, per_problem: bool = False) -> tuple[list[dict], dict[str, Any]]:
    """Raw samples of one math or code set and their meta (template, sampling, seconds, cache counts).
    ``per_problem`` or a cache (``creditbench eval``, a suite's ``per_problem_seeds``): problem by problem
    (:func:`_generate_per_problem`), each response capped at the model's ``context``; else one call over the
    set, seeded by position."""
    from evaluation.templates import render

    template = sampling.template_for(name)
    prompts = [render(template, p, getattr(engine, "tokenizer", None)) for p in problems]
    if cache is not None or per_problem:
        return _generate_per_problem(engine, name, problems, prompts, sampling, template, cache, context)
    t0 = time.perf_counter()
    raw = raw_samples(name, problems, prompts, generate_guarded(engine, prompts, sampling.params(template)))
    return raw, {"template": template, "sampling": sampling.record(template),
                 "generation_seconds": round(time.perf_counter() - t0, 3), "engine": engine_identity(engine),
                 "cache": {"problems_cached": 0, "problems_generated": len(problems)}}


def _mcq_key(cache: Cache, name: str, problem: Problem, sampling: Sampling, ids: Sequence[str]) -> str:
    """An item's key (zero-shot: the item alone; few-shot: the whole subset, whose items lm-eval draws
    the shots from)."""
    item = sha(json.dumps([problem.id, problem.question, problem.answer, problem.choices]))
    knobs = {"num_fewshot": sampling.num_fewshot, "protocol": sampling.mcq_protocol, "batch_size": sampling.batch_size,
             "subset": sha(json.dumps(list(ids))) if sampling.num_fewshot else None}
    return sample_key(cache, name, problem.id, item, knobs)


def mcq_sets(engine: Any, model_dir: str, subsets: Mapping[str, list[Problem]], sampling: Sampling, *,
             device: str, cache: Cache | None = None,
             context: int | None = None) -> dict[str, tuple[list[dict], dict[str, Any]]]:
    """The multiple-choice sets through lm-eval (``evaluation.mcq.loglikelihood_sets``), cached per item:
    only the items without a cache entry go to lm-eval; its per-set accuracies are recomputed over all."""
    from common.progress import note
    from evaluation.mcq import loglikelihood_sets

    keys = {n: [_mcq_key(cache, n, p, sampling, [q.id for q in ps]) if cache else p.id for p in ps]
            for n, ps in subsets.items()}
    done = {n: read_cache(cache.file(n), "result") if cache else {} for n in subsets}
    todo = {n: [p for p, key in zip(ps, keys[n]) if key not in done[n]] for n, ps in subsets.items()}
    todo = {n: ps for n, ps in todo.items() if ps}
    if cache:
        for n, ps in subsets.items():
            note(f"{n}: {len(ps) - len(todo.get(n, []))} of {len(ps)} items from the cache, "
                 f"{len(todo.get(n, []))} to score")
    with _quiet_truncation():  # lm-eval warns once per cut request; counted per set below instead
        fresh = loglikelihood_sets(model_dir, todo, device=device, batch_size=sampling.batch_size,
                                   seed=sampling.seed, num_fewshot=sampling.num_fewshot,
                                   protocol=sampling.mcq_protocol, engine=engine) if todo else {}
    out = {}
    for name, problems in subsets.items():
        meta = None
        if name in fresh:
            raw, meta = fresh[name]
            by_id = {r["problem_id"]: r for r in raw}
            for p, key in zip(problems, keys[name]):
                if p.id in by_id:
                    done[name][key] = [by_id[p.id], meta]
                    if cache:
                        cache.file(name).parent.mkdir(parents=True, exist_ok=True)
                        append_jsonl(cache.file(name), {"key": key, "set": name, "problem_id": p.id,
                                                        "result": done[name][key]})
        rows = [done[name][key] for key in keys[name]]
        raw, meta = [row[0] for row in rows], dict(meta or rows[0][1])
        for field_name in ("lm_eval_acc", "lm_eval_acc_norm"):
            if meta.get(field_name) is not None:
                meta[field_name] = float(sum(bool(r[field_name]) for r in raw) / len(raw))
        n, generated = len(problems), len(todo.get(name, []))
        cut = _mcq_cut(raw, getattr(engine, "tokenizer", None), context)
        meta.update({"context": {"positions": context, "prompts_truncated": cut},
                     "warnings": [f"{name}: {cut} of {n} items longer than the model's context ({context}) were "
                                  "cut from the left by lm-eval"] if cut else []})
        out[name] = (raw, {**meta, "cache": {"problems_cached": n - generated, "problems_generated": generated}})
    return out


class _quiet_truncation:
    """Drop lm-eval's per-request left-truncation warnings while it runs (:func:`_mcq_cut` counts them)."""

    def _filter(self, record: Any) -> bool:
        return "exceeds model's maximum length" not in record.getMessage()

    def __enter__(self) -> None:
        import logging

        self.logger = logging.getLogger("lm_eval.models.huggingface")
        self.logger.addFilter(self._filter)

    def __exit__(self, *exc: object) -> None:
        self.logger.removeFilter(self._filter)


def _mcq_cut(raw: Sequence[Mapping[str, Any]], tokenizer: Any, context: int | None) -> int:
    """Items whose prompt and longest option exceed ``context`` tokens, the items lm-eval cuts from the left."""
    if tokenizer is None or not context:
        return 0
    return sum(max((len(tokenizer(r["prompt"] + " " + c, add_special_tokens=False)["input_ids"])
                    for c in r.get("choices") or [""]), default=0) > context + 1 for r in raw if "prompt" in r)


def needs_engine(sets: Sequence[str], backend: str) -> bool:
    """Whether evaluating ``sets`` loads the model here: math and code sets are sampled by it, and multiple
    choice reuses the loaded HF model (vLLM's cannot serve lm-eval, which then loads its own)."""
    generated, mcq = split_sets(sets)
    return bool(generated) or (bool(mcq) and backend == "hf")


def load_engine(backend: str, model_dir: str, sampling: Sampling, device: str) -> Any:
    from evaluation.generation import make_backend

    return make_backend(backend, model_dir, seed=sampling.seed, device=device, batch_size=sampling.batch_size)


def generate_sets(model_dir: str, subsets: Mapping[str, list[Problem]], sampling: Sampling, *, backend: str,
                  device: str, cache: Cache | None = None, engine: Any = None, per_problem: bool = False,
                  progress: Callable[[str], None] = lambda name: None) -> dict[str, tuple[list[dict], dict]]:
    """Every set's raw samples and meta (name -> (raw, meta)), with one loaded model: sampled for math and
    code, by log-likelihood for multiple choice (the loaded model when the backend is HF). With a cache or
    ``per_problem``, problem by problem within the model's context (``config.json``)."""
    from evaluation.eval_checks import context_length

    context = context_length(Path(model_dir)) if cache is not None or per_problem else None
    generated_names, mcq_names = split_sets(list(subsets))
    generated, mcq = {n: subsets[n] for n in generated_names}, {n: subsets[n] for n in mcq_names}
    if engine is None and needs_engine(list(subsets), backend):
        engine = load_engine(backend, model_dir, sampling, device)
    out: dict[str, tuple[list[dict], dict]] = {}
    for name, problems in generated.items():
        progress(name)
        raw, meta = generate_set(engine, name, problems, sampling, cache, context, per_problem)
        out[name] = (raw, {**meta, "backend": backend})
    if mcq:
        progress(",".join(mcq))
        out.update(mcq_sets(engine if backend == "hf" else None, model_dir, mcq, sampling, device=device,
                            cache=cache, context=context))
    return {name: out[name] for name in subsets}


# ----------------------------------------------------------------------------------------- scoring

def sample_hashes(doc_id: int, record: Mapping[str, Any]) -> dict[str, Any]:
    """lm-eval's per-sample identity fields: ``doc_id`` and sha256 of the item, the prompt and the target."""
    doc = json.dumps({"problem_id": record["problem_id"], "answer": record.get("answer")}, sort_keys=True)
    prompt = record.get("prompt_sha256") or sha(record.get("prompt", ""))
    return {"doc_id": doc_id, "doc_hash": sha(doc), "prompt_hash": prompt,
            "target_hash": sha(str(record.get("answer", "")))}


def score_set(name: str, problems: list[Problem], raw: list[dict], meta: Mapping[str, Any], *, seed: int,
              grader_timeout_s: float, grader_workers: int = 1,
              progress: bool = False) -> tuple[list[dict], dict[str, Any]]:
    """Grade one set's raw samples (``meta`` from :func:`generate_sets`): per-sample records and the summary,
    the one schema every path writes (``evaluation.scoring.score`` plus the generation's meta). Multiple
    choice: our letter match is checked against lm-eval's verdict, and a dominant letter is a warning."""
    import logging

    from evaluation.scoring import score

    loglik = bool(meta["sampling"].get("loglikelihood"))
    t0 = time.perf_counter()
    records, summary = score(name, problems, raw, k=meta["sampling"]["n"], template=meta["template"], seed=seed,
                             grader_timeout_s=grader_timeout_s, grader_workers=grader_workers, loglikelihood=loglik,
                             progress=progress)
    if loglik:
        from evaluation.mcq import check_lm_eval, letter_warning

        check_lm_eval(name, records)
        warning = letter_warning(name, [r["response"] for r in records])  # the chosen option letters
        summary["warnings"] = [warning] if warning else []
        if warning:
            logging.getLogger(__name__).warning(warning)
    index = {p.id: i for i, p in enumerate(problems)}
    records = [{**r, **sample_hashes(index[r["problem_id"]], r)} for r in records]
    warnings = [*summary.get("warnings", []), *meta.get("warnings", [])]
    summary.update({k: v for k, v in meta.items() if k not in summary or k == "grader_version"})
    if warnings or "warnings" in summary:
        summary["warnings"] = warnings
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
