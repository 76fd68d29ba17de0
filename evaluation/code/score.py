"""MBPP+ and HumanEval+ scoring with EvalPlus's tests, inputs, expected outputs and time limits, in a
sandbox that hostile model-written programs can neither fool nor escape.

EvalPlus's own runner decides each verdict inside the program's interpreter (``out == exp``) and keeps
its ground truth where the program runs, so a program can forge a pass (always-true ``__eq__``, patched
``numpy.allclose``, rewriting ``exp`` through ``sys._getframe``, a forged results file) or poison the
cache. Here EvalPlus supplies the data and the oracle; three modules split the rest:

* :mod:`evaluation.code.truth`: expected outputs from canonical solutions only, in a run of their own,
  cached with a checksum verified on every load;
* :mod:`evaluation.code.sandbox`: the process boundary. Each sandbox (``unshare`` mount/net/pid/ipc/uts
  namespaces, a uid of its own, the read-only root of :mod:`evaluation.code.sandbox_view` without dataset or
  cache, private tmpfs scratch dirs, cgroup v2 or rlimits) runs checks and returns only each test's
  return value, encoded type-strictly;
* :mod:`evaluation.code.compare`: the format, and EvalPlus's comparison (``atol``, per-task special
  oracles) computed in the scorer on decoded builtin values.

A check whose sandbox fails (it died or hung) is recorded as ``crash`` and a fresh sandbox takes the
remaining checks. Without root, ``unshare``, ``setpriv`` and ``prlimit`` scoring refuses
(:class:`SandboxUnavailable`); there is no unsandboxed fallback.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import pickle
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evaluation.benchmarks import (
    BENCHMARKS,
    DEFAULT_DATA_DIR,
    REPO_ROOT,
    BenchmarkIntegrityError,
    sha256_file,
)
from evaluation.code.compare import FormatError, check_outputs, split_frames
from evaluation.code.sandbox import WORK, Cgroup, Sandbox, SandboxDied, job_for, sandbox_uid, worker_paths
from evaluation.code.truth import expected_outputs, problems_for

log = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = REPO_ROOT / ".cache" / "evalplus_gt"
PASS = "pass"
# registered benchmark -> EvalPlus dataset name
EVALPLUS_SETS: Mapping[str, str] = {"mbpp_plus": "mbpp", "humaneval_plus": "humaneval"}


@dataclass(frozen=True)
class SandboxConfig:
    """Limits for executing untrusted completions; recorded in every result."""

    min_time_limit: float = 1.0  # EvalPlus DEFAULT_MIN_TIME_LIMIT (seconds per test input)
    gt_time_limit_factor: float = 4.0  # EvalPlus DEFAULT_GT_TIME_LIMIT_FACTOR
    max_memory_bytes: int = 4 * 1024**3  # RLIMIT_AS per check process (EvalPlus's default), at most the next
    sandbox_memory_bytes: int = 2 * 1024**3  # each process (RLIMIT_AS); whole sandbox: cgroup memory.max, else a watch
    max_procs: int = 48  # whole sandbox, threads included (RLIMIT_NPROC of its own uid, or pids.max)
    max_file_bytes: int = 64 * 1024**2  # RLIMIT_FSIZE; the scratch tmpfs mounts are capped too
    max_output_bytes: int = 64 * 1024**2  # per check, or 4x the pickled expected outputs if larger
    parallel: int = 2  # sandboxes running at once (each runs its checks one after another)
    run_timeout_s: float = 3600.0  # wall limit for one scoring call


@dataclass(frozen=True)
class SampleResult:
    """Verdict of one sample; ``index`` is its position in the input list."""

    index: int
    task_id: str
    base_status: str
    plus_status: str

    @property
    def passed_base(self) -> bool:
        return self.base_status == PASS

    @property
    def passed_plus(self) -> bool:
        return self.base_status == PASS and self.plus_status == PASS


@dataclass(frozen=True)
class CodeEvalResult:
    """Per-sample verdicts, pass@1 (mean over tasks of the pass fraction) and the run's settings."""

    dataset_path: str
    dataset_sha256: str
    samples: tuple[SampleResult, ...]
    pass_at_1_base: float
    pass_at_1_plus: float
    config: SandboxConfig
    isolation: tuple[str, ...]
    limits: str
    evalplus_version: str
    wall_s: float
    n_runs: int = 1  # sandboxes started (a crashed or hung one is replaced)

    def per_task(self) -> dict[str, list[SampleResult]]:
        out: dict[str, list[SampleResult]] = {}
        for s in self.samples:
            out.setdefault(s.task_id, []).append(s)
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["samples"] = [asdict(s) for s in self.samples]
        return d


class SandboxUnavailable(RuntimeError):
    """EvalPlus is not installed or the sandbox cannot be built here (scoring refuses)."""


# ----------------------------------------------------------------------------------------- sandbox

def read_dataset(path: Path) -> dict[str, dict[str, Any]]:
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    rows = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
    return {r["task_id"]: r for r in rows}


def _tools() -> dict[str, str]:
    tools = {t: shutil.which(t) for t in ("unshare", "setpriv", "prlimit")}
    missing = [t for t, p in tools.items() if p is None]
    if os.geteuid() != 0 or missing:
        raise SandboxUnavailable(
            "code scoring runs untrusted programs only in its sandbox, which needs root (for the mount, "
            f"network and PID namespaces and a uid of its own) and unshare, setpriv and prlimit; euid="
            f"{os.geteuid()}, missing: {missing or 'none'}. Run as root (e.g. in the project's container).")
    return tools  # type: ignore[return-value]


def _command(config: SandboxConfig, uid: int, cache_dir: Path, dataset_path: Path, cgroup: bool) -> list[str]:
    """unshare -> sandbox_view (fresh root) -> prlimit -> setpriv (the sandbox uid) -> the harness."""
    t = _tools()
    cmd = [t["unshare"], "--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child",
           sys.executable, "-m", "evaluation.code.sandbox_view", "--work", WORK, "--uid", str(uid)]
    for p in worker_paths(REPO_ROOT):
        cmd += ["--bind", p]
    for h in {DEFAULT_DATA_DIR, cache_dir, dataset_path.parent}:
        cmd += ["--hide", str(Path(h).resolve())]
    nproc = "" if cgroup else f"--nproc={config.max_procs}"
    cmd += ["--", t["prlimit"], "--core=0", f"--fsize={config.max_file_bytes}", "--nofile=256", *[nproc][:bool(nproc)],
            "--", t["setpriv"], f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--",
            sandbox_interpreter(), "-P", "-m", "evaluation.code.sandbox"]
    return cmd


def sandbox_interpreter() -> str:
    """``sys.executable`` with its folder resolved: the sandbox's root holds only the resolved paths of
    :func:`worker_paths`, so a venv reached through a symlink (``repo/.venv -> elsewhere``) is found there.
    The file name stays unresolved, so that Python still finds the venv's ``pyvenv.cfg`` next to it."""
    return os.path.join(os.path.realpath(os.path.dirname(sys.executable)), os.path.basename(sys.executable))


def _env() -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "HOME": WORK,
            "TMPDIR": f"{WORK}/tmp", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "LANG": "C.UTF-8"}


class _Slot:
    """One sandbox at a time, with its cgroup where available; restarted after a crash."""

    def __init__(self, config: SandboxConfig, cache_dir: Path, dataset_path: Path, counter: list[int]):
        self.config, self.cache_dir, self.dataset_path, self.counter = config, cache_dir, dataset_path, counter
        self.box: Sandbox | None = None
        self.cgroup: Cgroup | None = None

    def get(self) -> Sandbox:
        if self.box is None:
            uid = sandbox_uid()
            self.cgroup = Cgroup.create(self.config.sandbox_memory_bytes, self.config.max_procs)
            try:
                try:
                    cmd = _command(self.config, uid, self.cache_dir, self.dataset_path, self.cgroup is not None)
                    self.box = Sandbox(cmd, _env(), preexec=self.cgroup.enter if self.cgroup else None)
                except subprocess.SubprocessError:  # could not join the cgroup: rlimits and the watch instead
                    self.close()
                    cmd = _command(self.config, uid, self.cache_dir, self.dataset_path, False)
                    self.box = Sandbox(cmd, _env())
            except SandboxDied as exc:
                self.close()
                raise SandboxUnavailable(f"the code-eval sandbox could not be started: {exc}") from None
            self.counter[0] += 1
        return self.box

    def close(self) -> None:
        if self.box is not None:
            self.box.close()
            self.box = None
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None


def check_memory_limits(config: SandboxConfig, *, cgroup: bool) -> dict[str, int | None]:
    """``max_memory`` (each check process's RLIMIT_AS) and ``max_resident`` (the harness's watch) of a job.

    The address-space limit of every process is at most the sandbox cap, so that no process of a scored
    program can be resident over it (resident <= mapped), however fast it allocates: a watch alone lets a
    program overshoot by what it allocates in one poll interval (issue 25: 2,075 MiB against 2 GiB). A
    cgroup's ``memory.max`` also holds the sum over processes exactly; without one the sum is watched."""
    per_process = min(config.max_memory_bytes, config.sandbox_memory_bytes)
    return {"max_memory": per_process, "max_resident": None if cgroup else config.sandbox_memory_bytes}


def limits_mechanism() -> str:
    """Which mechanism caps the whole sandbox's memory and processes on this machine (run record): a cgroup
    v2 is reported only when one can actually be made (and is removed again), else the fallback."""
    probe = Cgroup.create(1 << 30, 64)
    if probe is None:
        return "rlimits+rss-watch"
    probe.remove()
    return "cgroup2"


# ----------------------------------------------------------------------------------------- scoring

def _verdict(dataset: str, problem: Mapping[str, Any], phase: str, status: str, data: bytes,
             expected: Mapping[str, Any]) -> str:
    """EvalPlus's status for one check, decided here from the reported values."""
    try:
        frames = split_frames(data)
    except FormatError:
        frames = []
    if status == "exited" and check_outputs(dataset, problem["entry_point"], problem[f"{phase}_input"], frames,
                                            expected[phase], problem["atol"]):
        return PASS
    return "timeout" if status == "timeout" else "fail"


def _score(dataset: str, problems: Mapping[str, dict], truth: Mapping[str, dict],
           samples: Sequence[tuple[int, dict]], config: SandboxConfig, slots: list[_Slot]) -> dict[int, list[str]]:
    """Run every (sample, base|plus) check on ``config.parallel`` sandboxes; ``{index: [base, plus]}``."""
    caps = {(t, ph): max(config.max_output_bytes, 4 * len(pickle.dumps(truth[t][ph]))) for t in problems
            for ph in ("base", "plus")}
    todo: queue.Queue = queue.Queue()
    for idx, s in samples:
        for ph in ("base", "plus"):
            todo.put((idx, s, ph))
    out: dict[int, list[str]] = {idx: ["crash", "crash"] for idx, _ in samples}
    deadline = time.monotonic() + config.run_timeout_s
    errors: list[BaseException] = []

    def work(slot: _Slot) -> None:
        while time.monotonic() < deadline and not errors:
            try:
                idx, s, ph = todo.get_nowait()
            except queue.Empty:
                return
            p, t = problems[s["task_id"]], s["task_id"]
            try:
                box = slot.get()  # first, so that the job's memory limits know whether a cgroup holds it
                job = job_for(dataset, _program(s, p), p["entry_point"], p[f"{ph}_input"],
                              truth[t][f"{ph}_time"], min_time_limit=config.min_time_limit,
                              gt_time_limit_factor=config.gt_time_limit_factor, out_cap=caps[(t, ph)],
                              **check_memory_limits(config, cgroup=slot.cgroup is not None))
                status, data = box.check(job)
            except SandboxDied as exc:
                log.warning("sample %d (%s, %s) crashed its sandbox; recorded as crash: %s", idx, t, ph, exc)
                slot.close()
                continue
            except BaseException as exc:  # noqa: BLE001  (SandboxUnavailable: re-raised below)
                errors.append(exc)
                return
            out[idx][0 if ph == "base" else 1] = _verdict(dataset, p, ph, status, data, truth[t])

    threads = [threading.Thread(target=work, args=(slot,)) for slot in slots]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return out


def _program(sample: Mapping[str, Any], problem: Mapping[str, Any]) -> str:
    """EvalPlus's rule: a ``solution`` is the whole program, a ``completion`` is appended to the prompt."""
    return sample["solution"] if "solution" in sample else problem["prompt"] + sample["completion"]


# ----------------------------------------------------------------------------------------- public API

_UNSET: Any = object()


def evaluate_evalplus(benchmark: str, samples: Sequence[Mapping[str, Any]], *,
                      dataset_path: str | os.PathLike[str] | None = None,
                      expected_sha256: str | None = _UNSET,
                      cache_dir: str | os.PathLike[str] | None = None,
                      config: SandboxConfig = SandboxConfig()) -> CodeEvalResult:
    """Score ``mbpp_plus`` or ``humaneval_plus`` samples with EvalPlus (base and plus tests) in the sandbox.

    ``samples``: dicts with ``task_id`` and either ``solution`` (full program) or ``completion``
    (appended to the task prompt, EvalPlus convention). Several samples per task are allowed.
    Only the tasks that occur in ``samples`` are evaluated. pass@1 is the mean over those tasks of the
    fraction of passing samples (plus = base and plus tests both pass). ``expected_sha256`` defaults to
    the registry's pin; None skips the check.
    """
    if benchmark not in EVALPLUS_SETS:
        raise ValueError(f"{benchmark!r} is not an EvalPlus set; valid: {sorted(EVALPLUS_SETS)}")
    try:
        from evalplus import __version__ as evalplus_version
    except ImportError as exc:
        raise SandboxUnavailable("EvalPlus is not installed: pip install 'creditbench[eval]'") from exc
    if not samples:
        raise ValueError("no samples to evaluate")
    if expected_sha256 is _UNSET:
        expected_sha256 = BENCHMARKS[benchmark].sha256
    path = Path(dataset_path or DEFAULT_DATA_DIR / BENCHMARKS[benchmark].path)
    actual = sha256_file(path)
    if expected_sha256 is not None and actual != expected_sha256:
        raise BenchmarkIntegrityError(
            f"{benchmark}: sha256 checksum mismatch for {path}: expected {expected_sha256}, actual {actual}")
    dataset = read_dataset(path)
    indexed: list[tuple[int, dict]] = []
    for i, s in enumerate(samples):
        if s.get("task_id") not in dataset:
            raise ValueError(f"sample {i}: unknown task_id {s.get('task_id')!r} (not in {path})")
        if not isinstance(s.get("solution", s.get("completion")), str):
            raise TypeError(f"sample {i}: needs a str 'solution' or 'completion'")
        indexed.append((i, dict(s)))
    cache = Path(cache_dir or DEFAULT_CACHE_DIR)
    cache.mkdir(parents=True, exist_ok=True)
    _tools()  # refuse before computing anything
    name = EVALPLUS_SETS[benchmark]
    t0 = time.monotonic()
    problems = problems_for(name, dataset, sorted({s["task_id"] for _, s in indexed}))
    truth = expected_outputs(name, dataset, problems, cache)
    counter, limits = [0], limits_mechanism()
    slots = [_Slot(config, cache, path, counter) for _ in range(max(1, config.parallel))]
    try:
        verdicts = _score(name, problems, truth, indexed, config, slots)
    finally:
        for slot in slots:
            slot.close()
    wall = time.monotonic() - t0
    results = tuple(SampleResult(i, s["task_id"], *verdicts[i]) for i, s in indexed)
    by_task: dict[str, list[SampleResult]] = {}
    for r in results:
        by_task.setdefault(r.task_id, []).append(r)
    p_base = sum(sum(r.passed_base for r in rs) / len(rs) for rs in by_task.values()) / len(by_task)
    p_plus = sum(sum(r.passed_plus for r in rs) / len(rs) for rs in by_task.values()) / len(by_task)
    log.info("%s: %d samples over %d tasks, pass@1 base %.3f plus %.3f in %.1f s (%d sandboxes)", benchmark,
             len(results), len(by_task), p_base, p_plus, wall, counter[0])
    isolation = ("netns", "pidns", "mountns", "ipcns", "utsns", "rootfs", "uid=own")
    return CodeEvalResult(dataset_path=str(path), dataset_sha256=actual, samples=results,
                          pass_at_1_base=p_base, pass_at_1_plus=p_plus, config=config, isolation=isolation,
                          limits=limits,
                          evalplus_version=str(evalplus_version), wall_s=wall, n_runs=counter[0])


def evaluate_mbpp_plus(samples: Sequence[Mapping[str, Any]], **kwargs: Any) -> CodeEvalResult:
    """:func:`evaluate_evalplus` on MBPP+ (same keyword arguments)."""
    return evaluate_evalplus("mbpp_plus", samples, **kwargs)



# ----------------------------------------------------------------------------------------- CLI

def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``python -m evaluation.code.score SAMPLES.jsonl [--out result.json]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m evaluation.code.score")
    ap.add_argument("samples", help="JSONL with task_id and solution|completion")
    ap.add_argument("--benchmark", choices=sorted(EVALPLUS_SETS), default="mbpp_plus")
    ap.add_argument("--dataset", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--min-time-limit", type=float, default=1.0)
    ap.add_argument("--gt-time-limit-factor", type=float, default=4.0)
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    samples = [json.loads(line) for line in Path(a.samples).read_text().splitlines() if line.strip()]
    cfg = SandboxConfig(parallel=a.parallel, min_time_limit=a.min_time_limit,
                        gt_time_limit_factor=a.gt_time_limit_factor)
    res = evaluate_evalplus(a.benchmark, samples, dataset_path=a.dataset, config=cfg)
    text = json.dumps(res.to_dict(), indent=1)
    if a.out:
        Path(a.out).write_text(text)
    print(f"pass@1 base {res.pass_at_1_base:.4f} plus {res.pass_at_1_plus:.4f} "
          f"({len(res.samples)} samples, {res.wall_s:.1f} s, isolation {','.join(res.isolation)}, limits {res.limits})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
