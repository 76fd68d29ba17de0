"""Registry, checksum/count verification, GPQA from its external folder, and prompt templates."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from evaluation import benchmarks as B
from evaluation.benchmarks import (
    BENCHMARKS,
    DEFAULT_DATA_DIR,
    BenchmarkError,
    BenchmarkIntegrityError,
    Problem,
    load_benchmark,
    resolve_gpqa_dir,
)
from evaluation.templates import BOXED_INSTRUCTION, FEWSHOT_MATH, TEMPLATES, render

LOCAL = [n for n, b in BENCHMARKS.items() if not b.external and not b.generated]
GPQA_DIR = resolve_gpqa_dir()


@pytest.mark.parametrize("name", LOCAL)
def test_every_local_set_verifies(name: str) -> None:
    bench = BENCHMARKS[name]
    problems = load_benchmark(name, data_dir=DEFAULT_DATA_DIR)
    assert len(problems) == bench.count
    assert all(isinstance(p, Problem) and p.question.strip() for p in problems)
    if bench.kind == "math":
        assert all(p.answer.strip() for p in problems), name
    if bench.kind == "mcq":
        assert all(p.choices and p.answer in B.LETTERS[: len(p.choices)] for p in problems)
    assert set(bench.templates) <= set(TEMPLATES)
    # the folder's own SHA256SUMS agrees with the registry
    sums = (DEFAULT_DATA_DIR / bench.path).parent / "SHA256SUMS"
    assert f"{bench.sha256}  {Path(bench.path).name}" in sums.read_text()
    assert ((DEFAULT_DATA_DIR / bench.path).parent / "PROVENANCE.md").is_file()


def test_known_counts_and_answers() -> None:
    assert len(load_benchmark("hmmt26_feb")) == 33
    aime = {p.id: p.answer for p in load_benchmark("aime24")}
    assert aime["aime24-I-08"] == "197"  # the ORZ copy's wrong 480 is not ours
    gsm = load_benchmark("gsm8k")
    assert gsm[0].answer == "18"
    assert load_benchmark("amc23")[0].answer == "27"


def test_gpqa_never_committed() -> None:
    repo = DEFAULT_DATA_DIR.parents[1]
    assert not list((repo / "data").rglob("*gpqa*"))


def test_corrupted_copy_fails_naming_checksum(tmp_path: Path) -> None:
    shutil.copytree(DEFAULT_DATA_DIR / "aime24", tmp_path / "aime24")
    f = tmp_path / "aime24" / "test.jsonl"
    f.chmod(0o644)
    data = bytearray(f.read_bytes())
    data[100] ^= 1
    f.write_bytes(bytes(data))
    with pytest.raises(BenchmarkIntegrityError) as exc:
        load_benchmark("aime24", data_dir=tmp_path)
    msg = str(exc.value)
    assert "sha256" in msg and str(f) in msg and BENCHMARKS["aime24"].sha256 in msg
    assert hashlib.sha256(bytes(data)).hexdigest() in msg


def test_count_mismatch_fails(tmp_path: Path) -> None:
    (tmp_path / "aime24").mkdir()
    lines = (DEFAULT_DATA_DIR / "aime24" / "test.jsonl").read_text().splitlines(keepends=True)
    f = tmp_path / "aime24" / "test.jsonl"
    f.write_text("".join(lines[:-1]))
    sha = hashlib.sha256(f.read_bytes()).hexdigest()
    with pytest.raises(BenchmarkIntegrityError, match=r"record count mismatch .*expected 30, actual 29"):
        load_benchmark("aime24", data_dir=tmp_path, sha256=sha)


def test_missing_file_is_loud(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match="file not found"):
        load_benchmark("math500", data_dir=tmp_path)


def test_unknown_name() -> None:
    with pytest.raises(KeyError, match="registered"):
        load_benchmark("nope")


def test_synthetic_path_override(tmp_path: Path) -> None:
    f = tmp_path / "heldout.jsonl"
    f.write_text("".join(json.dumps({"id": f"s{i}", "question": f"{i}+1?", "answer": str(i + 1)}) + "\n"
                         for i in range(3)))
    sha = hashlib.sha256(f.read_bytes()).hexdigest()
    probs = load_benchmark("synthetic", path=f, sha256=sha, count=3)
    assert [p.answer for p in probs] == ["1", "2", "3"]
    assert len(load_benchmark("synthetic", path=f)) == 3  # no fixed checksum for generated sets
    with pytest.raises(BenchmarkIntegrityError, match="record count"):
        load_benchmark("synthetic", path=f, count=4)
    with pytest.raises(BenchmarkIntegrityError, match="sha256"):
        load_benchmark("synthetic", path=f, sha256="0" * 64)
    with pytest.raises(BenchmarkError, match="path="):
        load_benchmark("synthetic")


def test_gpqa_loads_from_external_dir() -> None:
    if not (GPQA_DIR / "gpqa_diamond.csv").is_file():
        pytest.skip(f"GPQA-Diamond not found at {GPQA_DIR} (set CREDITBENCH_GPQA_DIR)")
    probs = load_benchmark("gpqa_diamond")
    assert len(probs) == 198
    assert all(len(p.choices or ()) == 4 and p.answer in "ABCD" for p in probs)
    again = load_benchmark("gpqa_diamond", gpqa_dir=GPQA_DIR)
    assert [p.choices for p in probs] == [p.choices for p in again]  # seeded shuffle is stable
    other = load_benchmark("gpqa_diamond", gpqa_seed=1)
    assert [p.choices for p in probs] != [p.choices for p in other]
    letters = [p.answer for p in probs]
    assert min(letters.count(c) for c in "ABCD") > 25  # shuffle spreads the gold letter


def test_gpqa_dir_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CREDITBENCH_GPQA_DIR", str(tmp_path))
    assert resolve_gpqa_dir() == tmp_path
    v = B.verify_benchmark("gpqa_diamond")
    assert not v.ok and "skipped: not found at" in v.reason and str(tmp_path) in v.reason


def test_cli_lists_every_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert B.main([]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(BENCHMARKS)
    first = out[0].split(" ", 3)
    assert first[0] == "aime24" and first[1] == "30" and first[2] == BENCHMARKS["aime24"].sha256
    assert any(line.startswith("synthetic skipped") for line in out)


# ------------------------------------------------------------------------------------------ templates

def _chat_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    from transformers import PreTrainedTokenizerFast

    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")
    fast.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
                          "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    return fast


def test_templates_render() -> None:
    math = load_benchmark("aime24")[0]
    mcq = load_benchmark("arc_challenge")[0]
    code = load_benchmark("mbpp_plus")[0]
    tok = _chat_tokenizer()
    s = render("base_boxed", math)
    assert math.question in s and BOXED_INSTRUCTION in s
    s = render("base_fewshot", math)
    assert s.count("Problem:") == len(FEWSHOT_MATH) + 1 and s.endswith("Solution:\n")
    s = render("chat_boxed", math, tok)
    assert s.startswith("<|user|>") and s.endswith("<|assistant|>") and BOXED_INSTRUCTION in s
    s = render("base_mcq", mcq)
    assert "\nA. " in s and "\nD. " in s and s.endswith("Answer:")
    assert "\\boxed{}" in render("chat_mcq", mcq, tok)
    assert render("base_code", code) == code.question
    assert "```python" in render("chat_code", code, tok)
    with pytest.raises(ValueError, match="chat template"):
        render("chat_boxed", math)
    with pytest.raises(ValueError, match="choices"):
        render("base_mcq", math)
    with pytest.raises(KeyError):
        render("nope", math)
