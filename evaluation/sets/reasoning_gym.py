"""reasoning-gym (PyPI ``reasoning-gym``, pinned :data:`RG_VERSION`) as a data family: seeded task mixtures for
training, registered held-out draws for evaluation, and binary grading.

* **Mixture.** A task list ``[{name, weight, knobs}]`` (``knobs``: the generator's difficulty config, e.g.
  ``chain_sum`` ``{min_terms: 2, max_terms: 2, min_digits: 1, max_digits: 1}``). :func:`draw` picks each
  item's task with ``random.Random(seed)`` by weight and takes that task's next item of
  ``reasoning_gym.create_dataset(name, seed=seed + 1000 * task_index, **knobs)`` (each item is itself
  generated from ``Random(dataset_seed + index)``): same mixture, size and seed, same rows.
* **Held-out sets** (:data:`RG_SETS`) are draws without repeats, materialised once as JSONL in
  ``data/benchmarks/reasoning_gym/`` and registered in ``evaluation.benchmarks`` with their sha256 like every
  set (``python -m evaluation.sets.reasoning_gym write`` regenerates them; the tests check the bytes do not change).
* **Disjoint.** Training draws (``train_data.dataset: reasoning_gym``) skip every question of every
  registered held-out set (:func:`heldout_questions`), so no test question is ever trained on, whatever the
  difficulty: the questions are the generator's full text, so equal text = the same problem.
* **Grading** (:func:`grade_rg`), binary: a gold that is a number goes to creditbench's answer checker
  (``evaluation.grading.grade``, the same as the RL reward); any other gold to the task's own verifier
  (``score_answer``) on the checker's extracted answer, right only when it scores exactly 1.0. The verifiers
  give partial credit (the base class len(gold) / len(answer) when the gold occurs inside a longer answer;
  ``spell_backward`` per matching prefix letter), so a reward built on their raw score has variance without a
  single right answer.

    python -m evaluation.sets.reasoning_gym write [--data-dir data/benchmarks]     # materialise RG_SETS, print sha256
    python -m evaluation.sets.reasoning_gym agree SAMPLES.jsonl [...]              # checker vs verifier on real outputs
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import random
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

RG_PACKAGE = "reasoning-gym"
RG_VERSION = "0.1.25"
RG_DIR = "reasoning_gym"
"""Folder of the materialised held-out sets inside the benchmarks data dir."""
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class RgSet:
    """A registered held-out draw: ``tasks`` ((name, weight, knobs), ...), ``seed``, ``count`` distinct items."""

    name: str
    tasks: tuple[tuple[str, float, Mapping[str, Any]], ...]
    seed: int
    count: int
    sha256: str
    """of the materialised JSONL (``python -m evaluation.sets.reasoning_gym write`` prints it)."""
    description: str

    @property
    def path(self) -> str:
        return f"{RG_DIR}/{self.name}.jsonl"


def _set(name: str, tasks: list[tuple[str, float, dict]], seed: int, count: int, sha256: str, description: str):
    return name, RgSet(name, tuple((t, w, MappingProxyType(k)) for t, w, k in tasks), seed, count, sha256, description)


CHAIN_2x1 = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}
CHAIN_3x1 = {"min_terms": 3, "max_terms": 3, "min_digits": 1, "max_digits": 1}
RG_SETS: Mapping[str, RgSet] = MappingProxyType(dict([
    _set("rg_chain_sum_2x1", [("chain_sum", 1.0, CHAIN_2x1)], 10_000, 64,
         "f17dc7cd338c584ec4076d469dc985e48f4ce2bb34232f72276d833e19b10b87",
         "chain_sum, 2 terms of 1 digit (64 of the 200 distinct problems; real_cpu's training level)"),
    _set("rg_chain_sum_3x1", [("chain_sum", 1.0, CHAIN_3x1)], 10_000, 64,
         "fbb3d2fb152b277bb018c9a2ac2b09a0ee0ba2ad0cda125d8b1df535801cc5cf",
         "chain_sum, 3 terms of 1 digit (one level harder)"),
    _set("rg_basic_arithmetic_2x1", [("basic_arithmetic", 1.0, {"min_terms": 2, "max_terms": 2, "min_digits": 1,
                                                                "max_digits": 1})], 10_000, 64,
         "69d3f7e37be8e7cb866ee074799d3f2f7b87e04d379991edaf8918c1fc6e7029",
         "basic_arithmetic, 2 terms of 1 digit, + - * /"),
    _set("rg_spell_backward_3to4", [("spell_backward", 1.0, {"min_word_len": 3, "max_word_len": 4})], 10_000, 64,
         "f668c9de4fca705421bf384eee5e47be8700353d8739c7ce7a100e02f2ebc11c",
         "spell_backward, words of 3-4 letters (text answers: graded by the task's verifier)"),
]))


class RgError(ValueError):
    """A bad reasoning-gym mixture or a wrong installed version (the message names the key and the fix)."""


def check_installed() -> Any:
    """The ``reasoning_gym`` module, at the pinned version (other versions may generate other items)."""
    try:
        version = importlib.metadata.version(RG_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise RgError(f"{RG_PACKAGE} is not installed: pip install {RG_PACKAGE}=={RG_VERSION}") from None
    if version != RG_VERSION:
        raise RgError(f"{RG_PACKAGE} {version} is installed; the registered draws are pinned to {RG_VERSION}: "
                      f"pip install {RG_PACKAGE}=={RG_VERSION}")
    import reasoning_gym

    return reasoning_gym


def parse_tasks(tasks: Sequence[Mapping[str, Any]] | None, key: str = "train_data/tasks") -> tuple:
    """Config ``[{name, weight, knobs}]`` -> ((name, weight, knobs), ...), each generator built once to check it."""
    if not tasks:
        raise RgError(f"config key '{key}': train_data.dataset reasoning_gym needs a task list "
                      "[{name: chain_sum, weight: 1, knobs: {...}}]")
    rg = check_installed()
    out = []
    for i, t in enumerate(tasks):
        name, weight, knobs = t.get("name"), float(t.get("weight", 1.0)), dict(t.get("knobs") or {})
        try:
            rg.create_dataset(name, size=1, seed=0, **knobs)
        except Exception as err:  # an unknown task or knob: name it before anything runs
            raise RgError(f"config key '{key}[{i}]': reasoning-gym rejects {name!r} {knobs}: {err}") from None
        if weight <= 0:
            raise RgError(f"config key '{key}[{i}]/weight': must be > 0")
        out.append((name, weight, knobs))
    return tuple(out)


def _jsonable(x: Any) -> Any:
    return json.loads(json.dumps(x, default=str))


def draw(tasks: Sequence[tuple[str, float, Mapping[str, Any]]], n: int, seed: int, *,
         exclude: frozenset[str] = frozenset(), unique: bool = False, prefix: str = "rg") -> list[dict]:
    """``n`` rows ``{id, question, answer, task, knobs, entry}`` of the mixture (see the module docstring);
    questions in ``exclude`` are skipped; ``unique``: no question twice (held-out sets)."""
    rg = check_installed()
    pick = random.Random(seed)
    datasets = [rg.create_dataset(name, size=10**9, seed=seed + 1000 * i, **dict(knobs))
                for i, (name, _, knobs) in enumerate(tasks)]
    nxt, seen, rows, tries = [0] * len(tasks), set(), [], 0
    while len(rows) < n:
        tries += 1
        if tries > 200 * n + 1000:
            raise RgError(f"{[t[0] for t in tasks]}: fewer than {n} items outside the held-out sets; "
                          "raise the difficulty knobs or lower the size")
        i = pick.choices(range(len(tasks)), weights=[w for _, w, _ in tasks])[0]
        item = datasets[i][nxt[i]]
        nxt[i] += 1
        q = item["question"]
        if q in exclude or (unique and q in seen):
            continue
        seen.add(q)
        rows.append({"id": f"{prefix}-{len(rows)}", "question": q, "answer": str(item["answer"]),
                     "task": tasks[i][0], "knobs": dict(tasks[i][2]), "entry": _jsonable(item["metadata"])})
    return rows


def heldout_rows(name: str) -> list[dict]:
    s = RG_SETS[name]
    return draw(s.tasks, s.count, s.seed, unique=True, prefix=name)


def heldout_questions() -> frozenset[str]:
    """Every question of every registered held-out set (regenerated; the tests pin them to the files)."""
    return frozenset(r["question"] for name in RG_SETS for r in heldout_rows(name))


def training_rows(tasks: Sequence[Mapping[str, Any]] | None, size: int, seed: int) -> list[dict]:
    """Training draws of a config mixture, disjoint from every held-out set by question text."""
    return draw(parse_tasks(tasks), size, seed, exclude=heldout_questions(), prefix="rg-train")


# ----------------------------------------------------------------------------------------- grading

def is_number(gold: str) -> bool:
    return bool(_NUMBER.fullmatch(gold.strip()))


def _verifier(task: str, knobs: Mapping[str, Any]) -> Any:
    return check_installed().create_dataset(task, size=1, seed=0, **dict(knobs))


def verifier_score(task: str, knobs: Mapping[str, Any], answer: str | None, gold: str, entry: Mapping) -> float:
    """reasoning-gym's own (possibly partial) score of ``answer``."""
    return float(_verifier(task, knobs).score_answer(answer, {"answer": gold, "metadata": dict(entry)}))


def grade_rg(text: str, gold: str, meta: Mapping[str, Any], *, timeout_s: float) -> Any:
    """Binary verdict (``evaluation.grading.Verdict``): the answer checker for a number gold, else the task's
    verifier on the checker's extracted answer, right only at a score of exactly 1.0."""
    from evaluation.grading import Verdict, extract_answer, grade

    if is_number(gold):
        return grade(text, gold, timeout_s=timeout_s)
    t0 = time.perf_counter()
    extracted = extract_answer(text)
    if extracted is None:
        return Verdict(False, None, "no_answer", time.perf_counter() - t0)
    ok = verifier_score(meta["task"], meta["knobs"], extracted.strip(), gold, meta["entry"]) == 1.0
    return Verdict(ok, extracted, "correct" if ok else "wrong", time.perf_counter() - t0)


def agreement(records: Sequence[Mapping[str, Any]], rows: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Checker vs verifier on graded samples (``samples.jsonl`` rows of an rg set): binary verdicts agree
    when the checker's correct equals the verifier's score == 1.0 on the same extracted answer; also how
    often the verifier's raw score on the whole response is partial (0 < s < 1)."""
    from evaluation.grading import extract_answer, grade

    n = agree = partial = check_right = verif_right = 0
    examples = []
    for r in records:
        row = rows[r["problem_id"]]
        gold = row["answer"]
        checker = grade(r["response"], gold, timeout_s=5.0).correct
        ext = extract_answer(r["response"])
        verif = ext is not None and verifier_score(row["task"], row["knobs"], ext.strip(), gold, row["entry"]) == 1.0
        raw = verifier_score(row["task"], row["knobs"], r["response"], gold, row["entry"])
        n += 1
        agree += checker == verif
        check_right += checker
        verif_right += verif
        partial += 0.0 < raw < 1.0
        if checker != verif and len(examples) < 5:
            examples.append({"gold": gold, "extracted": ext, "checker": checker, "verifier": verif,
                             "response": r["response"][:200]})
    return {"n": n, "agree": agree, "checker_right": check_right, "verifier_right": verif_right,
            "raw_verifier_partial": partial, "disagreements": examples}


# ----------------------------------------------------------------------------------------- CLI

def write_sets(data_dir: str | Path) -> dict[str, str]:
    """Materialise every registered held-out set; returns {name: sha256}."""
    from common.io import sha256_file, write_jsonl_atomic

    out = {}
    for name in RG_SETS:
        path = Path(data_dir) / RG_SETS[name].path
        path.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomic(path, heldout_rows(name))
        out[name] = sha256_file(path)
    sums = "".join(f"{sha}  {Path(RG_SETS[n].path).name}\n" for n, sha in out.items())  # sha256sum -c format
    (Path(data_dir) / RG_DIR / "SHA256SUMS").write_text(sums)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.sets.reasoning_gym", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="materialise the registered held-out sets")
    w.add_argument("--data-dir", default="data/benchmarks")
    a = sub.add_parser("agree", help="checker vs verifier on samples.jsonl files of rg sets")
    a.add_argument("samples", nargs="+")
    a.add_argument("--data-dir", default="data/benchmarks")
    args = ap.parse_args(argv)
    if args.cmd == "write":
        for name, sha in write_sets(args.data_dir).items():
            print(f"{name} {RG_SETS[name].count} {sha}")
        return 0
    from common.io import read_jsonl, sha256_file

    for path in args.samples:
        records = read_jsonl(path)
        s = RG_SETS[records[0]["benchmark"]]
        file = Path(args.data_dir) / s.path
        if sha256_file(file) != s.sha256:
            raise RgError(f"{file}: sha256 differs from the registry's {s.sha256}; rewrite it with `write`")
        rows = {r["id"]: r for r in read_jsonl(file)}
        print(json.dumps({"file": path, "set": s.name, **agreement(records, rows)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
