"""Multiple-choice sets (ARC-Challenge, MMLU-STEM, GPQA-Diamond) through lm-eval, offline, in two protocols.

Each set is loaded with :func:`evaluation.benchmarks.load_benchmark` (sha256 and count verified), written
as a uniform JSONL (``question``, ``choices``, ``letters``, ``answer`` index) and handed to lm-eval as a
task config dict with ``dataset_path: json`` and ``data_files`` pointing at that local file; the model is
a local HF folder (``hf`` model type) or an already loaded one. Scoring is lm-eval's log-likelihood
``multiple_choice`` in one of two protocols:

* ``cloze`` (default, as lm-eval's standard ``arc_challenge`` task): ``Question: ...\nAnswer:`` and each
  option's *text* as the continuation; ``acc`` (highest log-likelihood) and ``acc_norm`` (log-likelihood
  per character of the option). Small models can be measured this way: they need not know the letters.
* ``letters`` (MMLU-style): the options listed as ``A. ...`` in the prompt, the letters as continuations.
  A small model tends to pick one letter for every item, and the accuracy is then the share of that
  gold letter (``letter_warning`` says so, in ``creditbench eval``'s output and in the report's tables).

GPQA's derived file is written to a temporary directory and removed afterwards, so it never lands in
the repository.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evaluation.benchmarks import BENCHMARKS, LETTERS, BenchmarkError, Problem, load_benchmark, stratified_subset

log = logging.getLogger(__name__)

OOD_SETS: tuple[str, ...] = ("arc_challenge", "mmlu_stem", "gpqa_diamond")
DOC_TO_TEXT = ("Question: {{question}}\n{% for c in choices %}{{letters[loop.index0]}}. {{c}}\n{% endfor %}"
               "Answer:")
CLOZE_DOC_TO_TEXT = "Question: {{question}}\nAnswer:"  # lm-eval's arc_easy.yaml / arc_challenge.yaml
PROTOCOLS = ("cloze", "letters")
DOMINANT_LETTER_SHARE = 0.9
"""Warn when one option letter takes at least this share of a set's predictions (a position bias)."""


def letter_warning(name: str, predicted: Sequence[str], threshold: float = DOMINANT_LETTER_SHARE) -> str | None:
    """A warning when one option letter takes ``threshold`` or more of the predictions, else None."""
    if len(predicted) < 5:
        return None
    letter, count = Counter(predicted).most_common(1)[0]
    share = count / len(predicted)
    if share < threshold:
        return None
    return (f"{name}: option {letter} is predicted for {count} of {len(predicted)} items ({100 * share:.0f} %); "
            f"the accuracy then measures how often the gold answer is {letter}, not knowledge")


class LmEvalUnavailable(RuntimeError):
    """lm-eval is not installed."""


@dataclass(frozen=True)
class OODItem:
    """One item's lm-eval verdict: the letter of the highest-likelihood option vs the gold letter.

    ``predicted_norm`` / ``correct_norm``: the same with per-character log-likelihoods (cloze ``acc_norm``).
    """

    id: str
    correct: bool
    predicted: str
    target: str
    logliks: tuple[float, ...] = ()
    prompt: str = ""
    choices: tuple[str, ...] = ()
    predicted_norm: str | None = None
    correct_norm: bool | None = None


@dataclass(frozen=True)
class OODResult:
    """lm-eval accuracy on one set (``skipped`` holds the reason when it was not run)."""

    name: str
    n: int
    acc: float | None
    acc_stderr: float | None
    template: str = "lm_eval_mcq_cloze_0shot"
    skipped: str = ""
    items: tuple[OODItem, ...] = ()
    protocol: str = "cloze"
    acc_norm: float | None = None


def task_config(name: str, data_file: str | os.PathLike[str], *, num_fewshot: int = 0,
                cache_dir: str | os.PathLike[str] | None = None, protocol: str = "cloze") -> dict[str, Any]:
    """lm-eval task config dict reading ``data_file`` (uniform JSONL) as its test split; ``cache_dir``
    keeps the HF datasets cache of that file out of ``~/.cache``."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown multiple-choice protocol {protocol!r}; valid: {list(PROTOCOLS)}")
    kwargs: dict[str, Any] = {"data_files": {"test": str(data_file)}}
    if cache_dir is not None:
        kwargs["cache_dir"] = str(cache_dir)
    cloze = protocol == "cloze"
    metrics = ("acc", "acc_norm") if cloze else ("acc",)
    return {
        "task": f"creditbench_{name}",
        "dataset_path": "json",
        "dataset_kwargs": kwargs,
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": CLOZE_DOC_TO_TEXT if cloze else DOC_TO_TEXT,
        "doc_to_choice": "{{choices}}" if cloze else "{{letters}}",
        "doc_to_target": "answer",
        "num_fewshot": num_fewshot,
        "metric_list": [{"metric": m, "aggregation": "mean", "higher_is_better": True} for m in metrics],
        "metadata": {"version": 1.0, "source": BENCHMARKS[name].upstream},
    }


def write_task_file(name: str, path: Path, *, data_dir: str | os.PathLike[str] | None = None,
                    gpqa_dir: str | os.PathLike[str] | None = None,
                    problems: Sequence[Problem] | None = None) -> int:
    """Write the verified set (or the given ``problems`` of it) as uniform JSONL; returns the item count."""
    if problems is None:
        problems = load_benchmark(name, data_dir=data_dir, gpqa_dir=gpqa_dir)
    with path.open("w") as fh:
        for p in problems:
            assert p.choices is not None
            letters = list(LETTERS[: len(p.choices)])
            fh.write(json.dumps({"id": p.id, "question": p.question, "choices": list(p.choices),
                                 "letters": letters, "answer": letters.index(p.answer)}) + "\n")
    return len(problems)


def _argmax(values: Sequence[float]) -> int:
    return max(range(len(values)), key=values.__getitem__)  # the first on ties, as numpy's argmax


def _items(samples: Sequence[Mapping[str, Any]], protocol: str = "letters") -> tuple[OODItem, ...]:
    """Per-item verdicts from lm-eval's logged samples (``filtered_resps``: (loglik, greedy) per option).

    Cloze's normalised choice divides by the option's length in characters, as lm-eval's ``acc_norm``.
    """
    out = []
    for s in sorted(samples, key=lambda s: s["doc_id"]):
        doc = s["doc"]
        logliks = [float(r[0]) for r in s["filtered_resps"]]
        letters = doc["letters"]
        norm_pred, norm_ok = None, None
        if protocol == "cloze":
            norm = _argmax([ll / len(c) for ll, c in zip(logliks, doc["choices"])])
            norm_pred, norm_ok = letters[norm], bool(s["acc_norm"])
        out.append(OODItem(str(doc["id"]), bool(s["acc"]), letters[_argmax(logliks)], letters[doc["answer"]],
                           tuple(logliks), str(s["arguments"][0][0]), tuple(doc["choices"]), norm_pred, norm_ok))
    return tuple(out)


def run_ood(model_dir: str | os.PathLike[str], *, tasks: Sequence[str] = OOD_SETS, limit: int | None = None,
            data_dir: str | os.PathLike[str] | None = None, gpqa_dir: str | os.PathLike[str] | None = None,
            device: str = "cpu", batch_size: int = 1, seed: int = 0, num_fewshot: int = 0,
            dtype: str = "float32", problems: Mapping[str, Sequence[Problem]] | None = None,
            model: Any = None, tokenizer: Any = None, protocol: str = "cloze",
            subset_seed: int = 0) -> dict[str, OODResult]:
    """Evaluate a local HF model folder on the multiple-choice sets with ``lm_eval.simple_evaluate``.

    ``limit`` draws N items of each set with ``subset_seed`` by the one subset rule of every evaluation path
    (``evaluation.driver.select``: stratified by subject where the set has them, kept in file order);
    ``problems`` (set -> verified items) replaces loading;
    ``model`` / ``tokenizer``: an already loaded transformers model (then ``model_dir`` is not read).
    """
    try:
        import lm_eval
        from lm_eval.tasks import TaskManager
    except ImportError as exc:
        raise LmEvalUnavailable("lm-eval is not installed: pip install 'lm-eval[hf]' (extra 'eval')") from exc
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    results: dict[str, OODResult] = {}
    with tempfile.TemporaryDirectory(prefix="creditbench-ood-") as tmp:
        configs, sizes = [], {}
        for name in tasks:
            if BENCHMARKS[name].kind != "mcq":
                raise ValueError(f"{name} is not a multiple-choice set")
            f = Path(tmp) / f"{name}.jsonl"
            try:
                if problems and name in problems:
                    items = list(problems[name])
                else:
                    items = stratified_subset(load_benchmark(name, data_dir=data_dir, gpqa_dir=gpqa_dir), limit,
                                              subset_seed)
                sizes[name] = write_task_file(name, f, problems=items)
            except BenchmarkError as exc:
                if not BENCHMARKS[name].external:
                    raise
                log.warning("%s skipped: %s", name, exc)
                results[name] = OODResult(name, 0, None, None, skipped=str(exc))
                continue
            configs.append(task_config(name, f, num_fewshot=num_fewshot, cache_dir=Path(tmp) / "hf_datasets",
                                       protocol=protocol))
        if not configs:
            return results
        t0 = time.monotonic()
        if model is not None:
            from lm_eval.models.huggingface import HFLM

            lm: Any = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)
            model_args: dict[str, Any] = {}
        else:
            lm, model_args = "hf", {"pretrained": str(model_dir), "dtype": dtype}
        out = lm_eval.simple_evaluate(
            model=lm, model_args=model_args, tasks=configs, device=device, batch_size=batch_size,
            random_seed=seed, numpy_random_seed=seed, torch_random_seed=seed, fewshot_random_seed=seed,
            bootstrap_iters=0, log_samples=True, task_manager=TaskManager(include_defaults=False))
        log.info("lm-eval on %s took %.1f s", [c["task"] for c in configs], time.monotonic() - t0)
    for name in tasks:
        if name in results:
            continue
        r = out["results"][f"creditbench_{name}"]
        stderr = r.get("acc_stderr,none")
        results[name] = OODResult(name, sizes[name], float(r["acc,none"]),
                                  float(stderr) if isinstance(stderr, (int, float)) else None,
                                  template=f"lm_eval_mcq_{protocol}_{num_fewshot}shot",
                                  items=_items(out["samples"][f"creditbench_{name}"], protocol),
                                  protocol=protocol, acc_norm=r.get("acc_norm,none"))
    return results


def prompt_record(name: str, prompt: str) -> dict[str, str]:
    """The prompt, or only its sha256 for an external set (GPQA asks that its items not be published)."""
    if BENCHMARKS[name].external:
        return {"prompt_sha256": hashlib.sha256(prompt.encode()).hexdigest()}
    return {"prompt": prompt}


def loglikelihood_sets(model_dir: str | os.PathLike[str], subsets: Mapping[str, Sequence[Problem]], *,
                       device: str, batch_size: int, seed: int, num_fewshot: int, protocol: str,
                       engine: Any = None) -> dict[str, tuple[list[dict], dict]]:
    """The one wiring of multiple choice for every evaluation path (``evaluation.driver``): one lm-eval call
    over the sets (with ``engine``'s loaded HF model, else ``model_dir``); name -> (raw records, meta).

    A raw record is one k = 1 sample: ``response`` the headline choice (cloze: acc_norm's, as lm-eval's
    standard tasks report it; letters: acc's), ``lm_eval_correct`` lm-eval's verdict on it, and lm-eval's
    per-item ``lm_eval_acc`` / ``lm_eval_acc_norm`` (None under letters), ``choices`` and ``logliks``."""
    import lm_eval

    t0 = time.perf_counter()
    from evaluation.generation import engine_record

    dtype = getattr(engine, "dtype", "float32")  # run_ood's own load is float32, as the HF engine's
    results = run_ood(model_dir, tasks=list(subsets), problems=subsets, device=device, batch_size=batch_size,
                      seed=seed, num_fewshot=num_fewshot, protocol=protocol, dtype=dtype,
                      model=getattr(engine, "model", None), tokenizer=getattr(engine, "tokenizer", None))
    seconds = round(time.perf_counter() - t0, 3)  # one lm-eval call for all of them
    out = {}
    for name, res in results.items():
        if res.skipped:
            raise BenchmarkError(f"{name}: {res.skipped}")
        norm = res.protocol == "cloze"
        metric = "acc_norm" if norm else "acc"
        raw = [{"benchmark": name, "problem_id": it.id, "sample": 0, **prompt_record(name, it.prompt),
                "choices": list(it.choices), "response": it.predicted_norm if norm else it.predicted,
                "logliks": list(it.logliks), "lm_eval_correct": it.correct_norm if norm else it.correct,
                "lm_eval_acc": it.correct, "lm_eval_acc_norm": it.correct_norm if norm else None}
               for it in res.items]
        out[name] = (raw, {"template": res.template, "grader_version": f"lm-eval/{lm_eval.__version__} {metric}",
                           "engine": engine_record("lm-eval", lm_eval.__version__, dtype, 1, batch_size),
                           "sampling": {"n": 1, "loglikelihood": True, "num_fewshot": num_fewshot},
                           "backend": f"lm-eval/{lm_eval.__version__} hf", "generation_seconds": seconds,
                           "lm_eval_acc": res.acc, "lm_eval_acc_norm": res.acc_norm if norm else None,
                           "mcq_protocol": res.protocol, "mcq_metric": metric})
    return out


def check_lm_eval(name: str, records: Sequence[Mapping[str, Any]]) -> None:
    """Our letter match must agree with lm-eval's own verdict on every item."""
    bad = [r["problem_id"] for r in records if r["correct"] != r["lm_eval_correct"]]
    if bad:
        raise ValueError(f"{name}: letter match and lm-eval disagree on {bad[:5]}")

def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.mcq", description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--tasks", nargs="*", default=list(OOD_SETS))
    ap.add_argument("--limit", type=int, default=None, help="N items per set, drawn by the driver's subset rule")
    ap.add_argument("--subset-seed", type=int, default=0, help="seed of the --limit draw (as a suite's subset_seed)")
    ap.add_argument("--gpqa-dir", default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--protocol", choices=PROTOCOLS, default="cloze")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    res = run_ood(a.model_dir, tasks=a.tasks, limit=a.limit, gpqa_dir=a.gpqa_dir, device=a.device,
                  batch_size=a.batch_size, protocol=a.protocol, subset_seed=a.subset_seed)
    for r in res.values():
        print(f"{r.name} skipped: {r.skipped}" if r.skipped else f"{r.name} n={r.n} acc={r.acc:.4f}")
    if a.out:
        Path(a.out).write_text(json.dumps({k: asdict(v) for k, v in res.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
