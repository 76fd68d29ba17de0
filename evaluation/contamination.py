"""Test-set contamination: of training prompts (normalised exact match, word 13-gram overlap) and of a model
(completion probe).

``creditbench contamination --model DIR --sets math500,gsm8k [--fraction 0.6] [--limit N]`` probes a model the
way Wu et al. (arXiv 2507.10532, §3 "partial-prompt completion") found Qwen2.5-Math-7B had memorised MATH-500:
each problem's first ``fraction`` of words is the prompt, the model continues it greedily, and the continuation
(cut to the rest's word count) is compared with the true rest: *exact* (equal after whitespace normalisation)
and *near-exact* (word ROUGE-L F1 >= ``--near``, default 0.8), with the mean ROUGE-L and character edit
similarity. Beside it the same problems as a control the model cannot know (:func:`shuffle_sentences`: the
sentences in another order; a one-sentence problem has its halves swapped), and optionally ``--control-model``
(a model that cannot have seen them, e.g. the tiny model), and per set the n-gram overlap of the set with the
training sets (:func:`check`). A probe rate well above its control says the model can recite the set.
Departures from the paper: the cut is on words, not tokens (model-independent); the continuation is
capped at the rest's token count + 8 (and ``--max-new-tokens``). Writes ``OUT/probe.json`` (default OUT
``results/contamination/probe``) and per set and role (model, shuffled, control_model) the continuations,
``OUT/probe_<set>.<role>.jsonl``.

``python -m evaluation.contamination`` (no ``--model``) checks every training set (default: DAPO-Math-17k; GSM8K
train and MATH train too when the shared data folder has them) against every registered test set (plus the 5000-problem
MATH test from the shared folder, when present) and prints, per pair, how many test problems occur in the
training prompts. It writes ``report.json`` and, per training set, the ids to drop
(``<train>.contaminated_ids.txt``) and to keep (``<train>.clean_ids.txt``).

Normalisation: Unicode NFKC, lower case, all whitespace runs collapsed to one space, ends stripped.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import sys
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evaluation.benchmarks import BENCHMARKS, DEFAULT_DATA_DIR, REPO_ROOT, expand_sets, load_benchmark

log = logging.getLogger(__name__)

DEFAULT_SHARED_DIR = REPO_ROOT.parent / "shared" / "data" / "benchmarks"
DEFAULT_OUT = REPO_ROOT / "results" / "contamination"


def normalise(text: str) -> str:
    """NFKC, lower case, collapsed whitespace."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    """Word n-grams of the normalised text (empty if it has fewer than ``n`` words)."""
    words = normalise(text).split()
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


@dataclass(frozen=True)
class Overlap:
    """Overlap of one test set with one training set."""

    train: str
    test: str
    n_test: int
    exact: int
    ngram: int | None
    exact_test_ids: tuple[str, ...]
    train_ids: tuple[str, ...]


def _load_shared(shared: Path) -> tuple[dict[str, list[tuple[str, str]]], dict[str, list[tuple[str, str]]]]:
    """Reference-only sets read from the shared folder if present: (extra tests, extra trains)."""
    tests: dict[str, list[tuple[str, str]]] = {}
    trains: dict[str, list[tuple[str, str]]] = {}
    f = shared / "math_test_full" / "test.jsonl"
    if f.is_file():
        rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        tests["math_test_full"] = [(f"math_test-{r['idx']}", r["problem"]) for r in rows]
    f = shared / "gsm8k" / "train.jsonl"
    if f.is_file():
        rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        trains["gsm8k_train"] = [(f"gsm8k_train-{i}", r["question"]) for i, r in enumerate(rows)]
    f = shared / "math_train" / "math_train_deepscaler.json"
    if f.is_file():
        trains["math_train"] = [(f"math_train-{i}", r["problem"]) for i, r in enumerate(json.loads(f.read_text()))]
    return tests, trains


def check(train: dict[str, list[tuple[str, str]]], tests: dict[str, list[tuple[str, str]]],
          ngram_n: int | None = 13) -> list[Overlap]:
    """Every (training set, test set) overlap; training and test items are (id, text)."""
    out: list[Overlap] = []
    for tname, titems in train.items():
        by_norm: dict[str, list[str]] = {}
        for tid, text in titems:
            by_norm.setdefault(normalise(text), []).append(tid)
        grams: set[tuple[str, ...]] = set()
        if ngram_n:
            for _, text in titems:
                grams |= ngrams(text, ngram_n)
        for sname, sitems in tests.items():
            hit_ids, train_ids = [], []
            n_gram_hits = 0
            for sid, text in sitems:
                ids = by_norm.get(normalise(text))
                if ids:
                    hit_ids.append(sid)
                    train_ids.extend(ids)
                if ngram_n and not grams.isdisjoint(ngrams(text, ngram_n)):
                    n_gram_hits += 1
            out.append(Overlap(tname, sname, len(sitems), len(hit_ids), n_gram_hits if ngram_n else None,
                               tuple(hit_ids), tuple(sorted(set(train_ids)))))
    return out


def _items(problems: Iterable) -> list[tuple[str, str]]:
    return [(p.id, p.question) for p in problems]


# ----------------------------------------------------------------------------------------- completion probe

def split_prefix(text: str, fraction: float) -> tuple[str, str]:
    """(the first ``fraction`` of the words, the rest); at least one word on each side."""
    words = text.split()
    cut = min(max(1, round(fraction * len(words))), len(words) - 1)
    return " ".join(words[:cut]), " ".join(words[cut:])


def shuffle_sentences(text: str, seed: int) -> str:
    """The control text: the sentences in a seeded order other than the original; one sentence: halves swapped."""
    units = [u for u in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if u]
    if len(units) < 2:
        words = text.split()
        half = len(words) // 2
        return " ".join(words[half:] + words[:half])
    order = list(range(len(units)))
    random.Random(seed).shuffle(order)
    if order == sorted(order):
        order = order[1:] + order[:1]
    return " ".join(units[i] for i in order)


def rouge_l(candidate: Sequence[str], reference: Sequence[str]) -> float:
    """ROUGE-L F1 of two word lists (longest common subsequence)."""
    if not candidate or not reference:
        return 0.0
    prev = [0] * (len(reference) + 1)
    for word in candidate:
        row = [0]
        for j, ref in enumerate(reference):
            row.append(prev[j] + 1 if word == ref else max(prev[j + 1], row[j]))
        prev = row
    lcs = prev[-1]
    return 0.0 if lcs == 0 else 2 * lcs / (len(candidate) + len(reference))


def edit_similarity(a: str, b: str) -> float:
    """1 - Levenshtein distance / the longer length, on characters."""
    if not a and not b:
        return 1.0
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            row.append(min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = row
    return 1 - prev[-1] / max(len(a), len(b))


def reconstruction(continuation: str, rest: str, near: float) -> dict[str, Any]:
    """One problem's scores: the continuation cut to the rest's word count against the rest."""
    ref = normalise(rest).split()
    got = normalise(continuation).split()[: len(ref)]
    rl = rouge_l(got, ref)
    return {"exact": got == ref, "near": rl >= near, "rouge_l": rl,
            "edit_similarity": edit_similarity(" ".join(got), " ".join(ref))}


def probe(engine: Any, texts: Sequence[str], *, fraction: float, near: float, cap: int) -> list[dict[str, Any]]:
    """Greedy continuations of each text's prefix and their reconstruction scores (``error`` where the engine
    failed for a prompt: ``evaluation.driver.generate_guarded``)."""
    from evaluation.driver import generate_guarded
    from evaluation.generation import SamplingParams

    pairs = [split_prefix(t, fraction) for t in texts]
    rest_tokens = [len(engine.tokenizer(" " + rest, add_special_tokens=False)["input_ids"]) for _, rest in pairs]
    params = SamplingParams(n=1, temperature=0.0, top_p=1.0, max_new_tokens=min(cap, max(rest_tokens) + 8), seed=0)
    completions = generate_guarded(engine, [prefix for prefix, _ in pairs], params)
    out = []
    for (prefix, rest), (c,) in zip(pairs, completions):
        row = {"prefix": prefix, "rest": rest, "continuation": c.text}
        row.update({"error": c.error} if c.error else reconstruction(c.text, rest, near))
        out.append(row)
    return out


def rates(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Exact and near-exact rates (%) over the probed problems (an errored one counts as not reconstructed),
    mean ROUGE-L and edit similarity, and the failures."""
    n = len(rows)
    ok = [r for r in rows if "error" not in r]
    mean = lambda key: sum(r[key] for r in ok) / len(ok) if ok else float("nan")  # noqa: E731
    return {"n": n, "failed": n - len(ok), "exact_pct": 100 * sum(r["exact"] for r in ok) / n if n else 0.0,
            "near_pct": 100 * sum(r["near"] for r in ok) / n if n else 0.0, "rouge_l": mean("rouge_l"),
            "edit_similarity": mean("edit_similarity")}


def probe_main(a: argparse.Namespace) -> int:
    """``creditbench contamination --model DIR --sets ...``: the probe per set beside its n-gram overlap."""
    from common.io import write_json_atomic, write_jsonl_atomic
    from evaluation.driver import load_subset
    from evaluation.generation import make_backend

    if not 0 < a.fraction < 1:
        print(f"{a.prog}: error: --fraction {a.fraction}: must be between 0 and 1 (e.g. 0.6)", file=sys.stderr)
        return 2
    sets = list(expand_sets(a.sets))
    if unknown := [s for s in sets if s not in BENCHMARKS]:
        print(f"{a.prog}: error: --sets {unknown[0]}: not a registered set (creditbench benchmarks list)",
              file=sys.stderr)
        return 2
    subsets = {name: load_subset(name, a.limit, a.seed, data_dir=a.data_dir)[0] for name in sets}
    train = {n: _items(load_benchmark(n, data_dir=a.data_dir)) for n in a.train}
    overlaps = check(train, {n: _items(ps) for n, ps in subsets.items()}, a.ngram or None)
    models = {"model": a.model, **({"control_model": a.control_model} if a.control_model else {})}
    out, report = Path(a.out), {"protocol": {"fraction": a.fraction, "near_rouge_l": a.near, "cut": "words",
                                             "greedy": True, "cap_new_tokens": a.max_new_tokens,
                                             "reference": "arXiv 2507.10532 §3"},
                                "models": models, "train": list(a.train), "ngram": a.ngram or None, "sets": {}}
    rows_by_set: dict[str, dict[str, list]] = {name: {} for name in sets}
    for role, model_dir in models.items():
        engine = make_backend("hf", model_dir, seed=0, device=a.device, batch_size=a.batch_size)
        for name, problems in subsets.items():
            texts = [p.question for p in problems]
            kw = {"fraction": a.fraction, "near": a.near, "cap": a.max_new_tokens}
            rows_by_set[name][role] = probe(engine, texts, **kw)
            if role == "model":
                shuffled = [shuffle_sentences(t, a.seed + i) for i, t in enumerate(texts)]
                rows_by_set[name]["shuffled"] = probe(engine, shuffled, **kw)
        report["engine" if role == "model" else "control_engine"] = engine.identity()
    print(f"{'set':<16} {'n':>4} {'exact %':>8} {'near %':>7} {'ROUGE-L':>8} {'shuffled exact %':>17} "
          f"{'control model exact %':>22} {'train exact':>11} {'ngram':>6}")
    for name, problems in subsets.items():
        entry: dict[str, Any] = {role: rates(rows) for role, rows in rows_by_set[name].items()}
        entry["overlap"] = {o.train: {"exact": o.exact, "ngram": o.ngram} for o in overlaps if o.test == name}
        report["sets"][name] = entry
        for role, rows in rows_by_set[name].items():
            write_jsonl_atomic(out / f"probe_{name}.{role}.jsonl",
                               [{"problem_id": p.id, **r} for p, r in zip(problems, rows)])
        control = f"{entry['control_model']['exact_pct']:.1f}" if "control_model" in entry else "-"
        print(f"{name:<16} {entry['model']['n']:>4} {entry['model']['exact_pct']:>8.1f} "
              f"{entry['model']['near_pct']:>7.1f} {entry['model']['rouge_l']:>8.3f} "
              f"{entry['shuffled']['exact_pct']:>17.1f} {control:>22} "
              f"{sum(v['exact'] for v in entry['overlap'].values()):>11} "
              f"{sum(v['ngram'] or 0 for v in entry['overlap'].values()):>6}")
    write_json_atomic(out / "probe.json", report)
    print(f"wrote {out / 'probe.json'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])  # prog: "creditbench contamination" via the CLI
    ap.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    ap.add_argument("--shared-dir", default=str(DEFAULT_SHARED_DIR),
                    help="folder with reference-only sets (MATH test 5000, GSM8K train, MATH train); optional")
    ap.add_argument("--train", nargs="*", default=["dapo_math_17k"], help="registered training sets")
    ap.add_argument("--ngram", type=int, default=13, help="word n-gram size; 0 disables")
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    probe_args = ap.add_argument_group("completion probe (with --model)")
    probe_args.add_argument("--model", help="HF model folder to probe (then --sets is needed)")
    probe_args.add_argument("--sets", type=lambda s: [x.strip() for x in s.split(",") if x.strip()], default=[],
                            help="comma list of registered sets or suites to probe")
    probe_args.add_argument("--fraction", type=float, default=0.6, help="share of each problem's words given")
    probe_args.add_argument("--near", type=float, default=0.8, help="near-exact: ROUGE-L F1 at least this")
    probe_args.add_argument("--limit", type=int, default=None, help="problems per set (seeded, stratified subset)")
    probe_args.add_argument("--seed", type=int, default=0, help="subset and shuffle seed")
    probe_args.add_argument("--control-model", default=None, help="a model that cannot know the sets (a control)")
    probe_args.add_argument("--max-new-tokens", type=int, default=256, help="cap on a continuation's tokens")
    probe_args.add_argument("--batch-size", type=int, default=16)
    probe_args.add_argument("--device", default="cpu")
    a = ap.parse_args(argv)
    a.prog = ap.prog
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if a.model or a.sets:
        if not (a.model and a.sets):
            ap.error("the completion probe needs both --model and --sets")
        if a.out == str(DEFAULT_OUT):
            a.out = str(DEFAULT_OUT / "probe")
        return probe_main(a)
    train = {n: _items(load_benchmark(n, data_dir=a.data_dir)) for n in a.train}
    tests = {n: _items(load_benchmark(n, data_dir=a.data_dir)) for n, b in BENCHMARKS.items()
             if b.split == "test" and not b.external and not b.generated}
    extra_tests, extra_train = _load_shared(Path(a.shared_dir))
    tests.update(extra_tests)
    train.update(extra_train)
    if not extra_tests:
        log.info("shared folder %s not found or incomplete: MATH test 5000 not checked", a.shared_dir)
    overlaps = check(train, tests, a.ngram or None)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"{'train':<14} {'test':<16} {'n':>5} {'exact':>6} {f'{a.ngram}-gram' if a.ngram else '':>8}")
    for o in overlaps:
        print(f"{o.train:<14} {o.test:<16} {o.n_test:>5} {o.exact:>6} {'' if o.ngram is None else o.ngram:>8}")
    for tname, titems in train.items():
        bad = sorted({i for o in overlaps if o.train == tname for i in o.train_ids})
        bad_set = set(bad)
        (out / f"{tname}.contaminated_ids.txt").write_text("".join(f"{i}\n" for i in bad))
        (out / f"{tname}.clean_ids.txt").write_text("".join(f"{i}\n" for i, _ in titems if i not in bad_set))
        print(f"{tname}: {len(bad)} of {len(titems)} training prompts match a test problem -> "
              f"{out / f'{tname}.contaminated_ids.txt'}")
    report = {"normalisation": "NFKC, lower case, collapsed whitespace", "ngram": a.ngram or None,
              "overlaps": [asdict(o) for o in overlaps]}
    (out / "report.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
