"""MBPP+ and HumanEval+ scoring through EvalPlus itself, offline, with an extra OS-level sandbox around it.

Layers, outermost first:

1. **Our subprocess boundary.** EvalPlus runs in a child process with its own session, a wall-clock
   limit, and (when running as root, which CI containers are) fresh network and PID namespaces
   (``unshare --net --pid --fork --kill-child``; no network, and every process it started dies with it)
   and the unprivileged ``nobody`` uid (``setpriv``), so it cannot delete, change or read files that are
   not world-accessible. A mount namespace (:mod:`evaluation.sandbox_view`) makes the interpreter, venv
   and checkout reachable by ``nobody`` when they sit below 0700 directories, without exposing anything
   else there. ``prlimit`` caps file size, core dumps and the process count.
2. **EvalPlus's own runner** (``evalplus.evaluate.evaluate``): each (sample, base|plus) check runs in a
   fresh process under EvalPlus's ``reliability_guard`` (destructive ``os``/``shutil``/``subprocess``
   functions disabled, ``RLIMIT_AS`` memory cap via ``EVALPLUS_MAX_MEMORY_BYTES``), a per-test time limit
   ``max(min_time_limit, gt_time_limit_factor * reference_time)`` and a per-check kill timeout. We add a
   CPU-seconds limit per check, and kill whatever a check leaves running (fork-bomb orphans) after it.
3. **Crash isolation.** If a batch crashes (e.g. a sample kills its parent), the batch is split per task
   and then per sample; a sample whose own run crashes is recorded as failed (``status="crash"``).

The dataset is read from a local file via ``MBPP_OVERRIDE_PATH`` / ``HUMANEVAL_OVERRIDE_PATH`` (EvalPlus
reads it at import time, so it is set in the child's environment); no download happens. Only the tasks present in ``samples`` are
written to the evaluated file, so a subset run computes a small ground truth. The expected-output cache
(``<cache_dir>/<md5>.pkl``; ~750 MB for all 378 tasks) is kept in ``cache_dir``, owned by the caller;
the sandbox sees a read-only link to it and a newly computed one is copied back after a successful run. Every run uses a
fresh work dir, so a stale EvalPlus results file is never reused.

Deliberately targeted attacks on the harness itself (forging its results file, ptrace, kernel exploits)
are out of scope; use a VM or EvalPlus's Docker image for that threat model.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import logging
import os
import pwd
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback
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
from common.io import copy_file_atomic

log = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = REPO_ROOT / ".cache" / "evalplus_gt"
NS_PROC_DIR = ".nsproc"  # in each run's work dir: procfs of the sandbox's PID namespace (sandbox_view --proc)
PASS = "pass"
# registered benchmark -> (EvalPlus dataset name, the environment variable that points EvalPlus at our file)
EVALPLUS_SETS: Mapping[str, tuple[str, str]] = {
    "mbpp_plus": ("mbpp", "MBPP_OVERRIDE_PATH"),
    "humaneval_plus": ("humaneval", "HUMANEVAL_OVERRIDE_PATH"),
}


@dataclass(frozen=True)
class SandboxConfig:
    """Limits for executing untrusted completions; recorded in every result."""

    min_time_limit: float = 1.0  # EvalPlus DEFAULT_MIN_TIME_LIMIT (seconds per test input)
    gt_time_limit_factor: float = 4.0  # EvalPlus DEFAULT_GT_TIME_LIMIT_FACTOR
    max_memory_bytes: int = 4 * 1024**3  # RLIMIT_AS per check (EVALPLUS_MAX_MEMORY_BYTES; EvalPlus default)
    parallel: int = 2  # EvalPlus worker processes
    run_timeout_s: float = 3600.0  # wall limit for one EvalPlus run
    max_file_bytes: int = 2 * 1024**3  # RLIMIT_FSIZE (the full MBPP+ expected-output pickle is ~0.75 GB)
    extra_procs: int = 32  # RLIMIT_NPROC head-room beyond EvalPlus's own processes
    isolate: bool = True  # namespaces + nobody uid when available


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
    evalplus_version: str
    wall_s: float
    n_runs: int = 1

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
    """EvalPlus is not installed or the sandbox could not be started."""


# ----------------------------------------------------------------------------------------- helpers

def _read_dataset(path: Path) -> dict[str, dict[str, Any]]:
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    rows = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
    return {r["task_id"]: r for r in rows}


def _isolation_prefix(config: SandboxConfig) -> tuple[list[str], tuple[str, ...], int | None]:
    """Command prefix, isolation labels, and uid to own the work dir (None: keep ours)."""
    if not config.isolate:
        return [], ("session",), None
    unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
    if os.geteuid() == 0 and unshare and setpriv:
        try:
            nobody = pwd.getpwnam("nobody")
        except KeyError:
            nobody = None
        if nobody is not None:
            drop = [setpriv, f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
            ns = [unshare, "--net", "--pid", "--fork", "--kill-child"]
            # first choice: a mount namespace in which the interpreter, venv and checkout are reachable by
            # nobody even below 0700 directories (/root, mktemp -d), with a procfs of the new PID namespace
            # in the work dir (NS_PROC_DIR) for the process sweep; else only world-traversable layouts work
            view = [sys.executable, "-m", "evaluation.sandbox_view", "--proc", NS_PROC_DIR]
            for p in _worker_paths():
                view += ["--path", str(p)]
            for prefix, labels in ((ns[:1] + ["--mount"] + ns[1:] + view + ["--"] + drop, ("mountns",)),
                                   (ns + drop, ())):
                with tempfile.TemporaryDirectory(prefix="creditbench-probe-") as cwd:  # holds NS_PROC_DIR
                    os.chmod(cwd, 0o755)
                    ok = subprocess.run(prefix + ["true"], capture_output=True, check=False, cwd=cwd,
                                        env=_probe_env()).returncode == 0
                    if ok:
                        _check_readable_by_sandbox_user(prefix, cwd)
                if ok:
                    return prefix, ("session", "netns", "pidns", *labels, f"uid={nobody.pw_uid}"), nobody.pw_uid
    if unshare:
        prefix = [unshare, "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child"]
        if subprocess.run(prefix + ["true"], capture_output=True, check=False).returncode == 0:
            return prefix, ("session", "netns", "pidns", "userns"), None
    log.warning("no namespace isolation available: untrusted code runs with our uid and network; "
                "only EvalPlus's reliability_guard and rlimits apply")
    return [], ("session",), None


def _worker_paths() -> list[Path]:
    """What the sandboxed worker reads: the interpreter (and its libpython), the venv, this checkout, and
    the temp dir that holds each run's work dir."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)), REPO_ROOT, tempfile.gettempdir()}
    return sorted(Path(os.path.realpath(p)) for p in paths)


def _probe_env() -> dict[str, str]:
    """The minimal environment of the sandbox probes: our PATH, and this checkout importable."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO_ROOT)}


def _check_readable_by_sandbox_user(prefix: list[str], cwd: str) -> None:
    """The worker runs as ``nobody``: it must import this package and EvalPlus with *our* interpreter
    build. Otherwise every sample would crash and be graded wrong, silently (or, seen on a pyenv Python
    under a 0700 /root: the dynamic loader falls back to the system's libpython of another patch
    release); fail loudly instead."""
    code = ("import sys, evaluation.code_eval, evalplus; "
            "sys.exit(0 if sys.version == sys.argv[1] else 'interpreter mismatch: ' + sys.version)")
    probe = subprocess.run(prefix + [sys.executable, "-c", code, sys.version],
                           capture_output=True, text=True, check=False, cwd=cwd, env=_probe_env())
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        raise SandboxUnavailable(
            f"the sandbox user 'nobody' cannot run the code-eval worker ({last}): {sys.executable} and "
            f"{REPO_ROOT} must be readable by others; without a mount namespace (unshare --mount) their parent "
            "directories must also be world-traversable (chmod o+x)")


def _rlimit_prefix(config: SandboxConfig) -> list[str]:
    """``prlimit`` prefix: no core dumps, capped file size and process count for the whole sandbox."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        log.warning("prlimit not found: the sandbox runs without file-size and process-count limits")
        return []
    nproc = 2 * config.parallel + 4 + config.extra_procs
    return [prlimit, "--core=0", f"--fsize={config.max_file_bytes}", f"--nproc={nproc}", "--"]


def _chown_tree(path: Path, uid: int) -> None:
    os.chown(path, uid, -1)
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            os.chown(os.path.join(root, n), uid, -1)


def _run_once(dataset: Mapping[str, dict], samples: Sequence[tuple[int, dict]], *, benchmark: str,
              cache_dir: Path, config: SandboxConfig, prefix: list[str],
              owner: int | None) -> dict[int, tuple[str, str]] | None:
    """One EvalPlus run over ``samples`` (index, sample); None if it crashed or timed out."""
    tasks = sorted({s["task_id"] for _, s in samples})
    evalplus_name, override_var = EVALPLUS_SETS[benchmark]
    with tempfile.TemporaryDirectory(prefix="creditbench-evalplus-") as tmp:
        work = Path(tmp)
        ds_path = work / f"{evalplus_name}.subset.jsonl"
        ds_path.write_text("".join(json.dumps(dataset[t]) + "\n" for t in tasks))
        sample_path = work / "samples.jsonl"
        with sample_path.open("w") as fh:
            for _, s in samples:
                rec = {"task_id": s["task_id"]}
                rec["solution" if "solution" in s else "completion"] = s.get("solution", s.get("completion"))
                fh.write(json.dumps(rec) + "\n")
        (work / "home").mkdir()
        gt_name = hashlib.md5(ds_path.read_bytes()).hexdigest() + ".pkl"
        run_cache = work / "cache" / "evalplus"
        run_cache.mkdir(parents=True)
        if owner is not None:  # before the cache link: chown through a hard link would hand over our file
            _chown_tree(work, owner)
        if (cache_dir / gt_name).is_file():  # read-only for the sandbox: link (or copy) it in
            cached = cache_dir / gt_name
            if owner is not None and not cached.stat().st_mode & stat.S_IROTH:
                # the sandbox user reads it through the link; unreadable, EvalPlus would crash on every sample
                log.info("making the EvalPlus cache %s world-readable for the sandbox user", cached)
                cached.chmod(cached.stat().st_mode | 0o444)
            _link_or_copy(cached, run_cache / gt_name)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(work / "home"),
            "PYTHONPATH": str(REPO_ROOT),
            override_var: str(ds_path),
            "XDG_CACHE_HOME": str(work / "cache"),
            "EVALPLUS_MAX_MEMORY_BYTES": str(config.max_memory_bytes),
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "TOKENIZERS_PARALLELISM": "false", "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
        }
        cmd = prefix + [sys.executable, "-m", "evaluation.code_eval", "_worker", str(sample_path),
                        "--dataset", evalplus_name, "--parallel", str(config.parallel),
                        "--min-time-limit", str(config.min_time_limit),
                        "--gt-time-limit-factor", str(config.gt_time_limit_factor)]
        proc = subprocess.Popen(_rlimit_prefix(config) + cmd, cwd=work, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=config.run_timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, _ = proc.communicate()
            log.error("EvalPlus run over %d samples timed out after %.0f s", len(samples), config.run_timeout_s)
            return None
        finally:
            _kill_group(proc)
        text = out.decode("utf-8", "replace")
        result_path = work / "samples_eval_results.json"
        if proc.returncode != 0 or not result_path.is_file():
            log.warning("EvalPlus run over %d samples failed (rc=%s): %s", len(samples), proc.returncode,
                        text[-2000:])
            return None
        log.debug("EvalPlus output: %s", text[-2000:])
        results = json.loads(result_path.read_text())
        if results.get("hash") + ".pkl" != gt_name:
            log.warning("EvalPlus results hash does not match the evaluated dataset; treating as a crash")
            return None
        if not (cache_dir / gt_name).is_file() and (run_cache / gt_name).is_file():
            # owned by us, not the sandbox; atomic: concurrent jobs sharing cache_dir never link half a file
            copy_file_atomic(run_cache / gt_name, cache_dir / gt_name)
    verdicts: dict[int, tuple[str, str]] = {}
    per_task_idx: dict[str, list[int]] = {}
    for idx, s in samples:
        per_task_idx.setdefault(s["task_id"], []).append(idx)
    for task_id, idxs in per_task_idx.items():
        recs = results["eval"].get(task_id, [])
        if len(recs) != len(idxs):
            return None
        for idx, rec in zip(idxs, recs):
            verdicts[idx] = (str(rec["base_status"]), str(rec["plus_status"]))
    return verdicts


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _run_isolating(dataset: Mapping[str, dict], samples: list[tuple[int, dict]], counter: list[int],
                   **kw: Any) -> dict[int, tuple[str, str]]:
    counter[0] += 1
    verdicts = _run_once(dataset, samples, **kw)
    if verdicts is not None:
        return verdicts
    tasks = sorted({s["task_id"] for _, s in samples})
    if len(tasks) > 1:
        groups = [[x for x in samples if x[1]["task_id"] == t] for t in tasks]
    elif len(samples) > 1:
        groups = [[x] for x in samples]
    else:
        log.warning("sample %d (%s) crashed its sandbox; recorded as failed", samples[0][0], tasks[0])
        return {samples[0][0]: ("crash", "crash")}
    out: dict[int, tuple[str, str]] = {}
    for g in groups:
        out.update(_run_isolating(dataset, g, counter, **kw))
    return out


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
        import evalplus  # noqa: F401  (only to fail early with a clear message)
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
    dataset = _read_dataset(path)
    indexed: list[tuple[int, dict]] = []
    for i, s in enumerate(samples):
        if s.get("task_id") not in dataset:
            raise ValueError(f"sample {i}: unknown task_id {s.get('task_id')!r} (not in {path})")
        if not isinstance(s.get("solution", s.get("completion")), str):
            raise TypeError(f"sample {i}: needs a str 'solution' or 'completion'")
        indexed.append((i, dict(s)))
    cache = Path(cache_dir or DEFAULT_CACHE_DIR)
    cache.mkdir(parents=True, exist_ok=True)
    prefix, isolation, owner = _isolation_prefix(config)
    counter = [0]
    t0 = time.monotonic()
    verdicts = _run_isolating(dataset, indexed, counter, benchmark=benchmark, cache_dir=cache, config=config,
                              prefix=prefix, owner=owner)
    wall = time.monotonic() - t0
    results = tuple(SampleResult(i, s["task_id"], *verdicts[i]) for i, s in indexed)
    by_task: dict[str, list[SampleResult]] = {}
    for r in results:
        by_task.setdefault(r.task_id, []).append(r)
    p_base = sum(sum(r.passed_base for r in rs) / len(rs) for rs in by_task.values()) / len(by_task)
    p_plus = sum(sum(r.passed_plus for r in rs) / len(rs) for rs in by_task.values()) / len(by_task)
    log.info("%s: %d samples over %d tasks, pass@1 base %.3f plus %.3f in %.1f s (%d EvalPlus runs)", benchmark,
             len(results), len(by_task), p_base, p_plus, wall, counter[0])
    return CodeEvalResult(dataset_path=str(path), dataset_sha256=actual, samples=results,
                          pass_at_1_base=p_base, pass_at_1_plus=p_plus, config=config, isolation=isolation,
                          evalplus_version=str(evalplus_version), wall_s=wall, n_runs=counter[0])


def evaluate_mbpp_plus(samples: Sequence[Mapping[str, Any]], **kwargs: Any) -> CodeEvalResult:
    """:func:`evaluate_evalplus` on MBPP+ (same keyword arguments)."""
    return evaluate_evalplus("mbpp_plus", samples, **kwargs)


# ----------------------------------------------------------------------------------------- worker

def _count_own_processes() -> int:
    uid, n = os.getuid(), 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                n += os.stat(f"/proc/{d}").st_uid == uid
            except OSError:
                pass
    return n


def _own_procfs() -> str | None:
    """A procfs whose PIDs are this PID namespace's: the work dir's NS_PROC_DIR (mounted by sandbox_view)
    or /proc when we are in the namespace it shows; None otherwise (e.g. ``unshare --pid`` without a
    mount namespace: /proc is the host's, where our PIDs name other processes or none)."""
    for path in (os.path.abspath(NS_PROC_DIR), "/proc"):
        try:
            if os.readlink(os.path.join(path, "self")) == str(os.getpid()):
                return path
        except OSError:
            pass
    return None


def _kill_descendants(psutil: Any) -> None:
    """Kill and reap every descendant (we are a child subreaper): whole process groups first, then a
    stop-then-kill sweep until none is left, so a fork bomb cannot outrun it. Needs a procfs of our PID
    namespace (``psutil.PROCFS_PATH``, set by :func:`_install_extra_guard`, which skips the sweep without
    one: then only the check's own process-group kill and the namespace's kill-on-exit apply)."""
    me, own_pgid = psutil.Process(), os.getpgid(0)
    for _ in range(50):
        kids = me.children(recursive=True)
        if not kids:
            return
        for pgid in {_pgid(k.pid) for k in kids} - {own_pgid, None}:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for k in kids:
                try:
                    k.send_signal(sig)
                except psutil.Error:
                    pass
        psutil.wait_procs(kids, timeout=2)  # reap: zombies still count against RLIMIT_NPROC


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _install_extra_guard(max_start_retries: int = 20, per_check_procs: int = 4) -> None:
    """Augment EvalPlus's runner (in the sandboxed worker only).

    * each check process gets ``RLIMIT_CPU`` = its own EvalPlus kill timeout and an ``RLIMIT_NPROC`` that
      lets it start at most ``per_check_procs`` processes (both inherited by anything it forks), runs in
      its own process group, and kills that group once its verdict is recorded;
    * each EvalPlus pool worker becomes a child subreaper and, after every check, kills whatever the
      check left behind (e.g. a fork bomb's orphans), so leftovers cannot starve later checks;
    * a check whose process cannot start (process limit reached) is retried after a short wait.
    """
    import ctypes
    import math

    import evalplus.eval as ev
    import evalplus.evaluate as ee
    import psutil

    own_procfs = _own_procfs()
    if own_procfs is not None:
        psutil.PROCFS_PATH = own_procfs  # absolute: EvalPlus's checks chdir
    else:
        print("creditbench sandbox: no procfs of this PID namespace; the leftover-process sweep is off",
              file=sys.stderr)

    original_execute, original_check = ev.unsafe_execute, ee.untrusted_check
    libc = ctypes.CDLL(None, use_errno=True)

    def execute(dataset, entry_point, code, inputs, expected, time_limits, *rest):  # type: ignore[no-untyped-def]
        cpu = math.ceil(min(60.0, sum(time_limits)) + 2)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        nproc = _count_own_processes() + per_check_procs  # RLIMIT_NPROC counts all processes of our uid
        if hard != resource.RLIM_INFINITY:
            nproc = min(nproc, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        os.setpgid(0, 0)  # this check and whatever it forks form one group ...
        killpg = os.killpg  # (reliability_guard sets os.killpg to None)
        original_execute(dataset, entry_point, code, inputs, expected, time_limits, *rest)
        killpg(0, signal.SIGKILL)  # ... which dies as soon as the verdict is in shared memory

    def check(*args, **kwargs):  # type: ignore[no-untyped-def]
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        try:
            for attempt in range(max_start_retries):
                try:
                    return original_check(*args, **kwargs)
                except OSError:  # fork failed: process limit reached by a previous check's leftovers
                    if attempt == max_start_retries - 1:
                        raise
                    time.sleep(0.5)
        finally:
            if own_procfs is not None:
                _kill_descendants(psutil)

    ev.unsafe_execute = execute
    ee.untrusted_check = check


def _worker(argv: Sequence[str]) -> int:
    """Inside the sandbox: run ``evalplus.evaluate.evaluate`` and exit without waiting on its threads."""
    ap = argparse.ArgumentParser()
    ap.add_argument("samples")
    ap.add_argument("--dataset", choices=["mbpp", "humaneval"], required=True)
    ap.add_argument("--parallel", type=int, required=True)
    ap.add_argument("--min-time-limit", type=float, required=True)
    ap.add_argument("--gt-time-limit-factor", type=float, required=True)
    a = ap.parse_args(argv)
    from evalplus.evaluate import evaluate

    _install_extra_guard()
    rc = 0
    try:
        evaluate(dataset=a.dataset, samples=a.samples, parallel=a.parallel, min_time_limit=a.min_time_limit,
                 gt_time_limit_factor=a.gt_time_limit_factor)
    except BaseException:  # noqa: BLE001  (e.g. a sample killed a pool worker: BrokenProcessPool)
        traceback.print_exc()
        rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)  # EvalPlus's non-daemon watchdog thread would otherwise keep us alive (forever on errors)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``python -m evaluation.code_eval SAMPLES.jsonl [--out result.json]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "_worker":
        return _worker(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m evaluation.code_eval")
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
          f"({len(res.samples)} samples, {res.wall_s:.1f} s, isolation {','.join(res.isolation)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
