"""Test-set contamination of training prompts: normalised exact match and (optionally) word 13-gram overlap.

``python -m evaluation.contamination`` checks every training set (default: DAPO-Math-17k; GSM8K train and
MATH train too when the shared data folder has them) against every registered test set (plus the 5000-problem
MATH test from the shared folder, when present) and prints, per pair, how many test problems occur in the
training prompts. It writes ``report.json`` and, per training set, the ids to drop
(``<train>.contaminated_ids.txt``) and to keep (``<train>.clean_ids.txt``).

Normalisation: Unicode NFKC, lower case, all whitespace runs collapsed to one space, ends stripped.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from evaluation.benchmarks import BENCHMARKS, DEFAULT_DATA_DIR, REPO_ROOT, load_benchmark

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


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.contamination", description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    ap.add_argument("--shared-dir", default=str(DEFAULT_SHARED_DIR),
                    help="folder with reference-only sets (MATH test 5000, GSM8K train, MATH train); optional")
    ap.add_argument("--train", nargs="*", default=["dapo_math_17k"], help="registered training sets")
    ap.add_argument("--ngram", type=int, default=13, help="word n-gram size; 0 disables")
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
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
