"""Registry of pinned benchmark files and a verifying loader.

Every benchmark is a frozen :class:`Benchmark` entry in :data:`BENCHMARKS` (one immutable mapping).
:func:`load_benchmark` checks the file's sha256 and record count before parsing it and raises
:class:`BenchmarkIntegrityError` naming the file, the expected and the actual value on any mismatch.

GPQA-Diamond is never stored in this repository: it is read from ``gpqa_dir`` (argument), else the
``CREDITBENCH_GPQA_DIR`` environment variable, else ``<repo>/../shared/data/benchmarks/gpqa_diamond``.

``python -m evaluation.benchmarks`` verifies and lists every registered set as
``<name> <count> <sha256> <license>``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import logging
import math
import os
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from common.io import sha256_file  # noqa: F401  (re-exported for code.score, gguf_convert)
from evaluation.grading.boxes import last_boxed
from evaluation.sets.reasoning_gym import RG_SETS, RG_VERSION

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO_ROOT / "data" / "benchmarks"
GPQA_ENV_VAR = "CREDITBENCH_GPQA_DIR"
DEFAULT_GPQA_DIR = REPO_ROOT.parent / "shared" / "data" / "benchmarks" / "gpqa_diamond"
GPQA_SHUFFLE_SEED = 0

Kind = Literal["math", "code", "mcq"]

MATH_TEMPLATES = ("base_boxed", "base_fewshot", "chat_boxed")
MCQ_TEMPLATES = ("base_mcq", "chat_mcq")
CODE_TEMPLATES = ("base_code", "chat_code")
RG_TEMPLATES = ("chat_answer", "chat_boxed", "base_boxed")


class BenchmarkError(RuntimeError):
    """A benchmark could not be found or loaded."""


class BenchmarkIntegrityError(BenchmarkError):
    """A benchmark file's sha256 or record count differs from the registry."""


@dataclass(frozen=True)
class Problem:
    """One evaluation item. ``answer`` is the gold answer as a string ('' for code tasks)."""

    id: str
    question: str
    answer: str
    choices: tuple[str, ...] | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Benchmark:
    """A registered benchmark file.

    ``path`` is relative to the data dir (to the GPQA dir when ``external``); ``sha256``/``count`` are
    ``None`` only for generated sets (``synthetic``), whose path and checksum come at load time.
    ``grader_rule`` is the dataset rule passed to the answer checker ("math", "aime", "gsm8k");
    ``None`` for multiple-choice (letter match) and code (executed) sets.
    """

    name: str
    kind: Kind
    path: str | None
    sha256: str | None
    count: int | None
    license: str
    upstream: str
    answer_field: str
    grader_rule: str | None
    templates: tuple[str, ...]
    fmt: str
    split: Literal["test", "train"] = "test"
    external: bool = False
    generated: bool = False

    @property
    def default_template(self) -> str:
        return self.templates[0]


def _b(**kw: Any) -> tuple[str, Benchmark]:
    bench = Benchmark(**kw)
    return bench.name, bench


_MATHARENA_LICENSE = "CC BY-NC-SA 4.0 (MathArena upstream; keep internal)"
_QWEN_MIT = "MIT (QwenLM/Qwen2.5-Math evaluation/LICENSE)"

BENCHMARKS: Mapping[str, Benchmark] = MappingProxyType(dict([
    _b(name="aime24", kind="math", path="aime24/test.jsonl",
       sha256="c605c7b12fee2dc3742bdf8b76e99236852720505195b30a548a2dfcd7750aa6", count=30,
       license="MIT (eth-sri/matharena repo); problems MAA",
       upstream="eth-sri/matharena@81f103e38b1df076afa65ee0a3ffbe148d42e6d2 data/aime/aime_2024_{I,II}",
       answer_field="answer", grader_rule="aime", templates=MATH_TEMPLATES, fmt="competition"),
    _b(name="aime25", kind="math", path="aime25/test.jsonl",
       sha256="93b718686444d706d5b9c94054a2d794d732f749a783714e1e419843f4089a99", count=30,
       license=_MATHARENA_LICENSE,
       upstream="HF MathArena/aime_2025@c94da77eb22bbd6439e62a323bec18493a421302 via "
                "Geraldxm/math-vault@bdaacfe0d17945af3287f4406e3f31136f06d7f5",
       answer_field="answer", grader_rule="aime", templates=MATH_TEMPLATES, fmt="competition"),
    _b(name="aime26", kind="math", path="aime26/test.jsonl",
       sha256="3b163529d9a18b1fe68c82423d2b830a54fd297842f220498f82a8378075e039", count=30,
       license=_MATHARENA_LICENSE,
       upstream="HF MathArena/aime_2026@d2de22f3c656b4f56cf8981212186377d1e23bc3 via "
                "Geraldxm/math-vault@bdaacfe0d17945af3287f4406e3f31136f06d7f5",
       answer_field="answer", grader_rule="aime", templates=MATH_TEMPLATES, fmt="competition"),
    _b(name="hmmt25_feb", kind="math", path="hmmt25_feb/test.jsonl",
       sha256="89269922513886cfc922ff5ca88e197780a6c3119ca8d563c979cf20b3dbc74e", count=30,
       license=_MATHARENA_LICENSE,
       upstream="HF MathArena/hmmt_feb_2025@6fdc4277120810ff75aa22d2d5489b91f7a262a1 via "
                "Geraldxm/math-vault@bdaacfe0d17945af3287f4406e3f31136f06d7f5",
       answer_field="answer", grader_rule="math", templates=MATH_TEMPLATES, fmt="competition"),
    _b(name="hmmt25_nov", kind="math", path="hmmt25_nov/test.jsonl",
       sha256="8f429235b27d81ff254bdee22d17762341a476a0d7f7dc3dc493ce934870ddaa", count=30,
       license=_MATHARENA_LICENSE,
       upstream="HF MathArena/hmmt_nov_2025 (revision not recorded) via "
                "ash-ding/frontier-teacher@858b98c343a6c3ca77dc22eb457216b8f979ef60",
       answer_field="answer", grader_rule="math", templates=MATH_TEMPLATES, fmt="competition"),
    _b(name="hmmt26_feb", kind="math", path="hmmt26_feb/test.jsonl",
       sha256="6ab3f30decb314c4795933f61185b6cb54d231688c66476dff705628e4bd98e3", count=33,
       license=_MATHARENA_LICENSE,
       upstream="HF MathArena/hmmt_feb_2026 (revision not recorded) via "
                "ash-ding/frontier-teacher@858b98c343a6c3ca77dc22eb457216b8f979ef60",
       answer_field="answer", grader_rule="math", templates=MATH_TEMPLATES, fmt="competition"),
    _b(name="brumo25", kind="math", path="brumo25/test.jsonl",
       sha256="b0fa45d50634a570197e2575b7b0fbd19851fec8eaa184f1601e0ff4ea1ff95c", count=30,
       license=_MATHARENA_LICENSE,
       upstream="HF MathArena/brumo_2025@6de9bc0987f5710c6376ee980e1483dbeb55cfda via "
                "Geraldxm/math-vault@bdaacfe0d17945af3287f4406e3f31136f06d7f5",
       answer_field="answer", grader_rule="math", templates=MATH_TEMPLATES, fmt="competition"),
    _b(name="math500", kind="math", path="math500/test.jsonl",
       sha256="35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132", count=500,
       license="MIT (openai/prm800k; copy from ZubinGou/math-evaluation-harness)",
       upstream="openai/prm800k math_splits/test.jsonl (LFS oid = sha256) via "
                "ZubinGou/math-evaluation-harness@db77bc6bb2a17c90ed2d63e88ebd8c40a82858c5",
       answer_field="answer", grader_rule="math", templates=MATH_TEMPLATES, fmt="math500"),
    _b(name="gsm8k", kind="math", path="gsm8k/test.jsonl",
       sha256="3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14", count=1319,
       license="MIT (openai/grade-school-math)",
       upstream="openai/grade-school-math@3101c7d5072418e28b9008a6636bde82a006892c",
       answer_field="answer (text after '#### ')", grader_rule="gsm8k", templates=MATH_TEMPLATES,
       fmt="gsm8k"),
    _b(name="gsm8k_train", kind="math", path="gsm8k/train.jsonl",
       sha256="17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465", count=7473,
       license="MIT (openai/grade-school-math)",
       upstream="openai/grade-school-math@3101c7d5072418e28b9008a6636bde82a006892c",
       answer_field="answer (text after '#### ')", grader_rule="gsm8k", templates=MATH_TEMPLATES,
       fmt="gsm8k", split="train"),
    _b(name="amc23", kind="math", path="amc23/amc23_test.jsonl",
       sha256="43707e1ca784602d8479de24ee8ce36609dbebc46dd152b0b12a46611aa898a4", count=40,
       license=_QWEN_MIT, upstream="QwenLM/Qwen2.5-Math@a45202bd16f1ec06f433442dc1152d0074773465",
       answer_field="answer (float written as integer when integral)", grader_rule="math",
       templates=MATH_TEMPLATES, fmt="amc"),
    _b(name="amc22_23", kind="math", path="amc23/amc_2022_2023_deepscaler.json",
       sha256="2666a217cb566efb77ebfce61841d5d8855d4b4be89633b29df3a43dcfd942dd", count=83,
       license="MIT (agentica-project/deepscaler)",
       upstream="agentica-project/deepscaler@95ef74ffee001cce89463f2d61dfdce1d03576c1 "
                "deepscaler/data/test/amc.json",
       answer_field="answer (float written as integer when integral)", grader_rule="math",
       templates=MATH_TEMPLATES, fmt="amc"),
    _b(name="minerva_math", kind="math", path="minerva_math/test.jsonl",
       sha256="0e656b430d3a0a1dab6aa853f453ba3805e28e2cabe4fc72486a897cc09d8ba2", count=272,
       license=_QWEN_MIT, upstream="QwenLM/Qwen2.5-Math@a45202bd16f1ec06f433442dc1152d0074773465",
       answer_field="solution (last \\boxed{})", grader_rule="math", templates=MATH_TEMPLATES,
       fmt="minerva"),
    _b(name="olympiadbench", kind="math", path="olympiadbench/test.jsonl",
       sha256="bb8c1e38a16ea9eacb77530315a674d883f267fbff79183effc53681b4fcc416", count=675,
       license=_QWEN_MIT, upstream="QwenLM/Qwen2.5-Math@a45202bd16f1ec06f433442dc1152d0074773465",
       answer_field="final_answer (joined, $ stripped)", grader_rule="math", templates=MATH_TEMPLATES,
       fmt="olympiadbench"),
    _b(name="mbpp_plus", kind="code", path="mbpp_plus/MbppPlus.jsonl.gz",
       sha256="af43697e8791c4c149bdfd6b489d8b5412507551ac20e28a439f650b8225db63", count=378,
       license="Apache-2.0 (evalplus/mbppplus_release)",
       upstream="evalplus/mbppplus_release@dadf43da556a00f7bacd71cb154f2932757d9144 (v0.2.0)",
       answer_field="canonical_solution (graded by EvalPlus tests)", grader_rule=None,
       templates=CODE_TEMPLATES, fmt="evalplus"),
    _b(name="humaneval_plus", kind="code", path="humaneval_plus/HumanEvalPlus.jsonl.gz",
       sha256="272720b90ac375502c8ed23cd791c2a93dfb22a911641a494da74a426c09f101", count=164,
       license="Apache-2.0 (evalplus/humanevalplus_release)",
       upstream="evalplus/humanevalplus_release@200defce9e3429d28ca215b6dd061c0f7f31c18b (v0.1.10)",
       answer_field="canonical_solution (graded by EvalPlus tests)", grader_rule=None,
       templates=CODE_TEMPLATES, fmt="evalplus"),
    _b(name="arc_challenge", kind="mcq", path="arc_challenge/arc_challenge_test.jsonl",
       sha256="bafb2fcb61ad7fdf85d3540d36a00d48228317298ae976ad2c0c0f24e247151c", count=1172,
       license="none stated (yukangZhuu/basic_evaluator); ARC is AI2's, not checked",
       upstream="yukangZhuu/basic_evaluator@a85b6686ee9c716a69ca865ef77f408a29e3d5c2",
       answer_field="answer (letter)", grader_rule=None, templates=MCQ_TEMPLATES, fmt="arc"),
    _b(name="mmlu_stem", kind="mcq", path="mmlu_stem/test.jsonl",
       sha256="fd7c16f96067d285638abb5aaef9cd8a063b11454e14cb64df93141a58691478", count=3018,
       license=_QWEN_MIT, upstream="QwenLM/Qwen2.5-Math@a45202bd16f1ec06f433442dc1152d0074773465",
       answer_field="answer (index into choices, as letter)", grader_rule=None, templates=MCQ_TEMPLATES,
       fmt="mmlu"),
    _b(name="gpqa_diamond", kind="mcq", path="gpqa_diamond.csv",
       sha256="41d1213cd7a4998605a26c2798500652572007161b3a92817ba46b35befcd305", count=198,
       license="MIT (openai/simple-evals PR #20); GPQA asks that examples not be posted: never commit",
       upstream="openai/simple-evals@be11f462e3834c4571e4683b171101db8300944e (refs/pull/20/head)",
       answer_field="Correct Answer (options shuffled with a seeded RNG, letter recorded)",
       grader_rule=None, templates=MCQ_TEMPLATES, fmt="gpqa_csv", external=True),
    _b(name="dapo_math_17k", kind="math", path="dapo_math_17k/dapo_math_17k.parquet",
       sha256="246ae23df97c9eae8126cb4da780e9a0a31d10110e16eed144bcecbf2132d535", count=17917,
       license="Apache-2.0 (MasterVito/SvS); HF original not checked",
       upstream="MasterVito/SvS@9fd8f35375b31b8632b52e715296c264a3ad4176 data/dapo_math_17k.parquet",
       answer_field="reward_model.ground_truth", grader_rule="math", templates=MATH_TEMPLATES,
       fmt="verl_parquet", split="train"),
    _b(name="synthetic", kind="math", path=None, sha256=None, count=None,
       license="generated by the workflow", upstream="workflow-generated (sha256 in its manifest)",
       answer_field="answer", grader_rule="math", templates=MATH_TEMPLATES, fmt="generic_jsonl",
       generated=True),
    _b(name="reasoning_gym", kind="math", path=None, sha256=None, count=None,
       license="Apache-2.0 (reasoning-gym)", upstream=f"PyPI reasoning-gym=={RG_VERSION}, drawn by the workflow "
       "(train_data.tasks; sha256 in its manifest)", answer_field="answer", grader_rule="reasoning_gym",
       templates=RG_TEMPLATES, fmt="reasoning_gym", split="train", generated=True),
    *(_b(name=s.name, kind="math", path=s.path, sha256=s.sha256, count=s.count,
         license="Apache-2.0 (reasoning-gym)",
         upstream=f"PyPI reasoning-gym=={RG_VERSION} {[(t, dict(k)) for t, _, k in s.tasks]} seed {s.seed}",
         answer_field="answer (number: answer checker; text: the task's verifier, binary)",
         grader_rule="reasoning_gym", templates=RG_TEMPLATES, fmt="reasoning_gym") for s in RG_SETS.values()),
]))


RG_SUITE = tuple(RG_SETS)
_COMPETITION = ("aime24", "aime25", "aime26", "hmmt25_feb", "hmmt25_nov", "hmmt26_feb", "brumo25")
SUITES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "competition_math": _COMPETITION,
    "math": (*_COMPETITION, "math500", "gsm8k", "amc23", "minerva_math", "olympiadbench"),
    "code": ("mbpp_plus", "humaneval_plus"),
    "mcq": ("gpqa_diamond", "arc_challenge", "mmlu_stem"),
    "core": ("gsm8k", "math500", "arc_challenge"),
    "reasoning_gym": RG_SUITE,
})
"""Named suites of registered sets (``creditbench eval --sets competition_math``, config ``eval.suites.*.sets``): the
seven competition sets, the twelve math sets, code, multiple choice, and ``core`` (the quick start's three)."""


def expand_sets(names: Sequence[str]) -> tuple[str, ...]:
    """Suite names replaced by their sets, in order, each set once (a set named twice stays twice, so that
    the caller can refuse it)."""
    out: list[str] = []
    for name in names:
        out += [s for s in SUITES[name] if s not in out] if name in SUITES else [name]
    return tuple(out)


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """`` (did you mean 'gsm8k'?)`` for a near miss among ``known`` (difflib's ratio >= 0.6), else ``""``."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def get_benchmark(name: str) -> Benchmark:
    """Return the registry entry for ``name`` or raise a :class:`KeyError` listing known names."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise KeyError(f"unknown benchmark {name!r}{did_you_mean(name, list(BENCHMARKS))}; the {len(BENCHMARKS)} "
                       "registered sets: creditbench benchmarks list") from None


def resolve_gpqa_dir(gpqa_dir: str | os.PathLike[str] | None = None) -> Path:
    """GPQA folder: the argument, else ``$CREDITBENCH_GPQA_DIR``, else ``<repo>/../shared/...``."""
    if gpqa_dir is not None:
        return Path(gpqa_dir)
    env = os.environ.get(GPQA_ENV_VAR)
    return Path(env) if env else DEFAULT_GPQA_DIR


def benchmark_file(bench: Benchmark, *, data_dir: str | os.PathLike[str] | None = None,
                   gpqa_dir: str | os.PathLike[str] | None = None) -> Path:
    """Absolute path of a registered (non-generated) benchmark's file."""
    if bench.path is None:
        raise BenchmarkError(f"{bench.name}: generated set; pass path= to load_benchmark")
    base = resolve_gpqa_dir(gpqa_dir) if bench.external else Path(data_dir or DEFAULT_DATA_DIR)
    return base / bench.path


# ----------------------------------------------------------------------------------------- parsing

def _read_jsonl(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


def _read_rows(path: Path, raw: bytes, fmt: str) -> list[dict[str, Any]]:
    if fmt == "verl_parquet":
        import pandas as pd  # heavy; only needed for the training prompt set

        return pd.read_parquet(io.BytesIO(raw)).to_dict(orient="records")
    if fmt == "gpqa_csv":
        return list(csv.DictReader(io.StringIO(raw.decode("utf-8"))))
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    if path.suffix == ".json":
        data = json.loads(raw)
        if not isinstance(data, list):
            raise BenchmarkError(f"{path}: expected a JSON array")
        return data
    return _read_jsonl(raw)


def _num_str(x: Any) -> str:
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x).strip()


def _strip_dollars(s: str) -> str:
    s = s.strip()
    while len(s) >= 2 and s.startswith("$") and s.endswith("$"):
        s = s[1:-1].strip()
    return s


LETTERS = "ABCDEFGHIJ"


def _p_competition(rows: list[dict], name: str, **_: Any) -> list[Problem]:
    return [Problem(id=str(r["id"]), question=r["problem"], answer=str(r["answer"]).strip(),
                    meta={k: v for k, v in r.items() if k not in ("id", "problem", "answer")})
            for r in rows]


def _p_math500(rows: list[dict], name: str, **_: Any) -> list[Problem]:
    return [Problem(id=r["unique_id"], question=r["problem"], answer=r["answer"],
                    meta={"subject": r["subject"], "level": r["level"]}) for r in rows]


def _p_gsm8k(rows: list[dict], name: str, **_: Any) -> list[Problem]:
    out = []
    for i, r in enumerate(rows):
        solution, sep, final = r["answer"].rpartition("####")
        if not sep:
            raise BenchmarkError(f"{name}: row {i} has no '####' answer line")
        out.append(Problem(id=f"{name}-{i}", question=r["question"], answer=final.strip().replace(",", ""),
                           meta={"solution": solution.strip()}))
    return out


def _p_amc(rows: list[dict], name: str, **_: Any) -> list[Problem]:
    return [Problem(id=f"{name}-{r.get('id', i)}", question=r["problem"], answer=_num_str(r["answer"]),
                    meta={"url": r.get("url")}) for i, r in enumerate(rows)]


def _p_minerva(rows: list[dict], name: str, **_: Any) -> list[Problem]:
    out = []
    for i, r in enumerate(rows):
        ans = last_boxed(r["solution"])
        if ans is None:
            raise BenchmarkError(f"{name}: row {i} has no \\boxed{{}} answer in its solution")
        out.append(Problem(id=f"{name}-{r.get('idx', i)}", question=r["problem"], answer=ans.strip(),
                           meta={"type": r.get("type")}))
    return out


def _p_olympiadbench(rows: list[dict], name: str, **_: Any) -> list[Problem]:
    out = []
    for r in rows:
        question = r["question"] if not r.get("context") else f"{r['context']}\n\n{r['question']}"
        answers = [_strip_dollars(a) for a in r["final_answer"]]
        out.append(Problem(id=f"{name}-{r['id']}", question=question, answer=", ".join(answers),
                           meta={k: r.get(k) for k in ("subfield", "unit", "answer_type", "error",
                                                       "is_multiple_answer")}))
    return out


def _p_arc(rows: list[dict], name: str, **_: Any) -> list[Problem]:
    out = []
    for r in rows:
        labels = [o["label"] for o in r["options"]]
        if labels != list(LETTERS[: len(labels)]):
            raise BenchmarkError(f"{name}: {r['id']} has non-letter labels {labels}")
        out.append(Problem(id=r["id"], question=r["question"], answer=r["answer"],
                           choices=tuple(o["text"] for o in r["options"]), meta={"index": r["index"]}))
    return out


def _p_mmlu(rows: list[dict], name: str, **_: Any) -> list[Problem]:
    return [Problem(id=f"{name}-{i}", question=r["question"], answer=LETTERS[int(r["answer"])],
                    choices=tuple(r["choices"]), meta={"subject": r["type"]}) for i, r in enumerate(rows)]


def _p_gpqa(rows: list[dict], name: str, *, seed: int = GPQA_SHUFFLE_SEED, **_: Any) -> list[Problem]:
    out = []
    for r in rows:
        options = [r["Correct Answer"], r["Incorrect Answer 1"], r["Incorrect Answer 2"], r["Incorrect Answer 3"]]
        options = [o.strip() for o in options]
        order = list(range(4))
        random.Random(f"{seed}:{r['Record ID']}").shuffle(order)
        choices = tuple(options[k] for k in order)
        out.append(Problem(id=r["Record ID"], question=r["Question"].strip(), answer=LETTERS[order.index(0)],
                           choices=choices, meta={"domain": r["High-level domain"], "subdomain": r["Subdomain"],
                                                  "shuffle_seed": seed}))
    return out


def _p_evalplus(rows: list[dict], name: str, **_: Any) -> list[Problem]:
    return [Problem(id=r["task_id"], question=r["prompt"], answer="",
                    meta={"entry_point": r["entry_point"], "task_id": r["task_id"]}) for r in rows]


def _p_verl(rows: list[dict], name: str, **_: Any) -> list[Problem]:
    out = []
    for r in rows:
        msgs = list(r["prompt"])
        out.append(Problem(id=f"{name}-{r['extra_info']['index']}", question=msgs[-1]["content"],
                           answer=str(r["reward_model"]["ground_truth"]).strip(),
                           meta={"data_source": r.get("data_source")}))
    return out


def _p_generic(rows: list[dict], name: str, **_: Any) -> list[Problem]:
    out = []
    for i, r in enumerate(rows):
        q = next((r[k] for k in ("question", "problem", "prompt") if k in r), None)
        if q is None or "answer" not in r:
            raise BenchmarkError(f"{name}: row {i} needs 'question'/'problem'/'prompt' and 'answer'")
        rest = {k: v for k, v in r.items() if k not in ("id", "question", "problem", "prompt", "answer")}
        out.append(Problem(id=str(r.get("id", f"{name}-{i}")), question=q, answer=str(r["answer"]), meta=rest))
    return out


_PARSERS: Mapping[str, Callable[..., list[Problem]]] = MappingProxyType({
    "competition": _p_competition, "math500": _p_math500, "gsm8k": _p_gsm8k, "amc": _p_amc,
    "minerva": _p_minerva, "olympiadbench": _p_olympiadbench, "arc": _p_arc, "mmlu": _p_mmlu,
    "gpqa_csv": _p_gpqa, "evalplus": _p_evalplus, "verl_parquet": _p_verl, "generic_jsonl": _p_generic,
    "reasoning_gym": _p_generic,  # rows {id, question, answer, task, knobs, entry} (evaluation.sets.reasoning_gym)
})


# ----------------------------------------------------------------------------------------- loading

STRATA = ("subject", "level")
"""Problem ``meta`` keys a subset is stratified by, where a set has them (MMLU-STEM: subject; MATH-500: both)."""


def stratified_subset(problems: Sequence[Problem], limit: int | None, seed: int) -> list[Problem]:
    """``limit`` problems drawn with ``seed``, stratified by :data:`STRATA` where present, in file order: the
    one subset rule of ``creditbench eval`` and of every seeded ``limit`` subset of the workflow.

    Strata get ``limit`` in proportion to their size (largest remainders first, ties by stratum name), so a
    sorted file's first subject cannot fill the subset; all problems when ``limit`` is None or too large.
    """
    problems = list(problems)
    if limit is None or limit >= len(problems):
        return problems
    strata: dict[str, list[int]] = {}
    for i, p in enumerate(problems):
        strata.setdefault("/".join(str(p.meta.get(k, "")) for k in STRATA), []).append(i)
    quota = {s: limit * len(idx) / len(problems) for s, idx in strata.items()}
    take = {s: math.floor(q) for s, q in quota.items()}
    for s in sorted(quota, key=lambda s: (take[s] - quota[s], s))[: limit - sum(take.values())]:
        take[s] += 1
    rng = random.Random(seed)
    keep = sorted(i for s, idx in sorted(strata.items()) for i in rng.sample(idx, take[s]))
    return [problems[i] for i in keep]


def load_benchmark(name: str, *, data_dir: str | os.PathLike[str] | None = None,
                   gpqa_dir: str | os.PathLike[str] | None = None, path: str | os.PathLike[str] | None = None,
                   sha256: str | None = None, count: int | None = None,
                   gpqa_seed: int = GPQA_SHUFFLE_SEED) -> list[Problem]:
    """Load and verify a benchmark.

    ``path`` overrides the file (required for generated sets such as ``synthetic``); with an override
    the registry's fixed sha256 is not applied, but ``sha256`` (e.g. from the generating manifest) and
    ``count`` are checked when given. Raises :class:`BenchmarkIntegrityError` on any mismatch.
    """
    bench = get_benchmark(name)
    if path is not None:
        file = Path(path)
        exp_sha, exp_count = sha256, count
    else:
        if bench.generated:
            raise BenchmarkError(f"{name}: generated by the workflow; pass path= (and its manifest sha256)")
        file = benchmark_file(bench, data_dir=data_dir, gpqa_dir=gpqa_dir)
        exp_sha = sha256 or bench.sha256
        exp_count = count if count is not None else bench.count
    if not file.is_file():
        hint = f" (set {GPQA_ENV_VAR} or pass gpqa_dir)" if bench.external else ""
        raise BenchmarkError(f"{name}: file not found: {file}{hint}")
    raw = file.read_bytes()
    actual_sha = hashlib.sha256(raw).hexdigest()
    if exp_sha is not None and actual_sha != exp_sha:
        raise BenchmarkIntegrityError(
            f"{name}: sha256 checksum mismatch for {file}: expected {exp_sha}, actual {actual_sha}")
    rows = _read_rows(file, raw, bench.fmt)
    if exp_count is not None and len(rows) != exp_count:
        raise BenchmarkIntegrityError(
            f"{name}: record count mismatch for {file}: expected {exp_count}, actual {len(rows)}")
    problems = _PARSERS[bench.fmt](rows, name, seed=gpqa_seed)
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        raise BenchmarkIntegrityError(f"{name}: duplicate problem ids in {file}")
    log.info("loaded %s: %d problems from %s (sha256 %s)", name, len(problems), file, actual_sha)
    return problems


@dataclass(frozen=True)
class Verified:
    """Outcome of :func:`verify_benchmark`: ``ok`` False means skipped (``reason`` says why)."""

    name: str
    ok: bool
    count: int | None
    sha256: str | None
    license: str
    reason: str = ""


def verify_benchmark(name: str, *, data_dir: str | os.PathLike[str] | None = None,
                     gpqa_dir: str | os.PathLike[str] | None = None) -> Verified:
    """Verify one registered set; missing external or generated files are skipped, not errors."""
    bench = get_benchmark(name)
    if bench.generated:
        return Verified(name, False, None, None, bench.license,
                        "skipped: generated by the workflow (path and sha256 come from its manifest)")
    file = benchmark_file(bench, data_dir=data_dir, gpqa_dir=gpqa_dir)
    if bench.external and not file.is_file():
        return Verified(name, False, None, None, bench.license,
                        f"skipped: not found at {file} (set {GPQA_ENV_VAR})")
    problems = load_benchmark(name, data_dir=data_dir, gpqa_dir=gpqa_dir)
    return Verified(name, True, len(problems), bench.sha256, bench.license)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: verify every registered set and print ``<name> <count> <sha256> <license>``."""
    ap = argparse.ArgumentParser(prog="python -m evaluation.benchmarks", description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    ap.add_argument("--gpqa-dir", default=None, help=f"default: ${GPQA_ENV_VAR} or {DEFAULT_GPQA_DIR}")
    ap.add_argument("names", nargs="*", help="subset of registered names (default: all)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        print(f"benchmarks verify: unknown set {unknown[0]!r}{did_you_mean(unknown[0], list(BENCHMARKS))}; see "
              "`creditbench benchmarks list`", file=sys.stderr)
        return 2
    failed = 0
    for name in args.names or list(BENCHMARKS):
        try:
            v = verify_benchmark(name, data_dir=args.data_dir, gpqa_dir=args.gpqa_dir)
        except BenchmarkError as exc:
            print(f"{name} FAILED: {exc}")
            failed += 1
            continue
        print(f"{v.name} {v.count} {v.sha256} {v.license}" if v.ok else f"{v.name} {v.reason}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
