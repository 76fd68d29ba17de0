"""The process boundary of code scoring: untrusted programs run in a sandbox and only *data* comes back.

Trust design (why a forged pass is impossible, not merely hard):

* **The answers never enter the sandbox.** A job carries the program, the entry point, EvalPlus's test
  inputs and time limits, nothing else. The expected outputs stay in the scorer (:mod:`evaluation.code_truth`),
  the dataset with its canonical solutions is not in the sandbox's file system (:mod:`evaluation.sandbox_view`),
  and the verdict is computed by the scorer (:func:`evaluation.code_compare.check_outputs`). Whatever runs
  in the sandbox, including a fully subverted harness, can only choose which *values* it reports; to have
  them accepted it must compute the right ones, i.e. solve the task. Forging the framing, the status or the
  values themselves therefore gains nothing; everything from the sandbox is parsed as hostile data
  (length-capped, JSON only, strict tags: never pickle).
* **One check cannot speak for another.** The harness (:func:`_harness`) is PID 1 of the sandbox's PID
  namespace, so the checks it forks cannot signal it, and it is non-dumpable (``PR_SET_DUMPABLE 0``), so
  they (same uid) cannot ptrace it or open its ``/proc/1/fd`` or ``/proc/1/mem``. Each check's child gets
  ``/dev/null`` as stdin/stdout/stderr and one pipe of its own: it cannot write to the harness's channel to
  the scorer nor to another check's pipe. After every check the harness kills every other process of the
  sandbox (``kill(-1, SIGKILL)`` from PID 1) and reaps them, so no daemon outlives its check; a detached one
  dies at the latest with the namespace when the harness exits.
* **Limits** (see :func:`limits_mechanism`): one uid per sandbox, so ``RLIMIT_NPROC`` caps the whole
  sandbox's processes *and threads* (the kernel counts tasks per uid), and the sandboxes cannot signal each
  other; memory by cgroup v2 ``memory.max`` (+ ``pids.max``) where the machine delegates those controllers,
  else EvalPlus's per-process ``RLIMIT_AS`` plus a watch of the sandbox's total resident memory; CPU seconds
  per check (``RLIMIT_CPU``); EvalPlus's per-test time limit by its own alarm in the child *and* by the
  harness's clock (the child may disable alarms); output read incrementally up to a cap, by the harness and
  again by the scorer (never ``communicate()``).
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import pickle
import resource
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evaluation.code_compare import END, OK, RAISED, READY, encode_frame

GRACE_S = 1.0  # harness-side slack on top of EvalPlus's per-test limit (its own alarm fires first)
POLL_S = 0.05  # resident-memory watch interval
WORK = "/sandbox"  # the sandbox user's tmpfs work dir (TMPDIR below it)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4


class SandboxDied(RuntimeError):
    """The sandbox exited, hung, or sent something that is not a well-formed reply."""


# ------------------------------------------------------------------------------------- framing

def write_msg(fd: int, body: bytes, deadline: float | None = None) -> None:
    """Length-prefixed message; with ``deadline``, ``fd`` must be non-blocking (the scorer's side)."""
    view = memoryview(len(body).to_bytes(8, "big") + body)
    while view:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise SandboxDied("timed out writing to the sandbox")
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            continue
        except OSError as exc:
            raise SandboxDied(f"sandbox pipe closed: {exc}") from None


def read_msg(fd: int, cap: int, deadline: float | None = None) -> bytes | None:
    """One message of at most ``cap`` bytes; None at EOF before it starts."""
    head = _read_exact(fd, 8, deadline, eof_ok=True)
    if head is None:
        return None
    n = int.from_bytes(head, "big")
    if n > cap:
        raise SandboxDied(f"message of {n} bytes exceeds the cap of {cap}")
    return _read_exact(fd, n, deadline, eof_ok=False) or b""


def _read_exact(fd: int, n: int, deadline: float | None, *, eof_ok: bool) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise SandboxDied("timed out waiting for the sandbox")
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            if eof_ok and not buf:
                return None
            raise SandboxDied("sandbox closed its output mid-message")
        buf += chunk
    return bytes(buf)


# ------------------------------------------------------------------------------------- inside

def _child(job: Mapping[str, Any], w: int) -> None:
    """The check process: EvalPlus's ``unsafe_execute`` minus the comparison; never returns."""
    try:
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, w)
        os.closerange(w + 1, 1 << 16)
        resource.setrlimit(resource.RLIMIT_CPU, (job["cpu_s"], job["cpu_s"]))
        import tempfile

        from evalplus.eval.utils import reliability_guard, swallow_io, time_limit

        from evaluation.code_compare import _enc

        write, send = os.write, _send
        os.chdir(tempfile.mkdtemp())  # EvalPlus's create_tempdir (TMPDIR is in the sandbox's tmpfs)
        reliability_guard(maximum_memory_bytes=job["max_memory"])
        exec_globals: dict[str, Any] = {}
        with swallow_io():
            exec(job["code"], exec_globals)  # noqa: S102  (untrusted, contained)
            fn = exec_globals[job["entry_point"]]
        send(write, w, [READY])
        for i, inp in enumerate(job["inputs"]):
            try:
                with time_limit(job["time_limits"][i]), swallow_io():
                    out = fn(*inp)
                frame = [i, OK, _enc(out)]
            except BaseException:  # noqa: BLE001  (EvalPlus: an exception fails the test, hence the check)
                send(write, w, [i, RAISED])
                break
            send(write, w, frame)
        else:
            send(write, w, [END])
    finally:
        os._exit(0)


def _send(write: Any, fd: int, item: list) -> None:
    view = memoryview(encode_frame(item))
    while view:
        view = view[write(fd, view):]


def _kill_all_others() -> None:
    """From PID 1 as the sandbox uid: SIGKILL every other process of the namespace, then reap them."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            break
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    while True:
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return


def _resident_bytes() -> int:
    """Total resident memory of the namespace's processes (our procfs shows only them)."""
    total, page = 0, os.sysconf("SC_PAGE_SIZE")
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/statm", "rb") as fh:
                    total += int(fh.read().split()[1]) * page
            except (OSError, IndexError, ValueError):
                pass
    return total


def _run_check(job: Mapping[str, Any]) -> tuple[str, bytes]:
    """Fork the check, collect its frames under the time, output and memory limits; kill everything after."""
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        _kill_all_others()
        return "forkfail", b""
    if pid == 0:
        os.close(r)
        _child(job, w)
    os.close(w)
    data, pos, frames, status = bytearray(), 0, 0, "exited"
    start = time.monotonic()
    overall = start + job["kill_after_s"]
    deadline = overall
    watch, polled = job.get("max_resident"), start
    while True:
        now = time.monotonic()
        if now >= deadline:
            status = "timeout"
            break
        if watch and now - polled >= POLL_S:
            polled = now
            if _resident_bytes() > watch:
                status = "memory"
                break
        if not select.select([r], [], [], min(deadline - now, POLL_S))[0]:
            continue
        chunk = os.read(r, 1 << 20)
        if not chunk:
            break
        data += chunk
        if len(data) > job["out_cap"]:
            status, data = "overflow", bytearray()
            break
        while pos + 4 <= len(data) and pos + 4 + int.from_bytes(data[pos : pos + 4], "big") <= len(data):
            pos += 4 + int.from_bytes(data[pos : pos + 4], "big")
            frames += 1  # frame k >= 1 answers input k - 1; the next input's clock starts now
            if frames <= len(job["time_limits"]):
                deadline = min(overall, time.monotonic() + job["time_limits"][frames - 1] + GRACE_S)
    os.close(r)
    _kill_all_others()
    _wipe_scratch()
    return status, bytes(data)


def _wipe_scratch() -> None:
    """Empty the writable dirs, so that nothing a check wrote (e.g. a module that shadows an import) reaches
    the next one; the child may have made its files unreadable, but they are ours (one uid)."""
    import shutil

    def force(func: Any, path: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
        except OSError:
            pass
        func(path)

    for top in (WORK, "/tmp", "/var/tmp", "/dev/shm"):
        try:
            names = os.listdir(top)
        except OSError:
            continue
        for n in names:
            p = os.path.join(top, n)
            try:
                if os.lstat(p).st_uid != os.getuid():  # e.g. the root-owned parents of a bound checkout
                    continue
                if os.path.isdir(p) and not os.path.islink(p):
                    shutil.rmtree(p, onerror=force)
                else:
                    os.unlink(p)
            except OSError:
                pass
    os.makedirs(os.environ["TMPDIR"], exist_ok=True)


def _harness() -> int:
    """The sandbox's PID 1: read jobs (pickles from the scorer) on stdin, answer each on stdout."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    import evalplus.eval  # noqa: F401  (imported once here, so that every forked check starts warm)
    import numpy  # noqa: F401

    os.makedirs(os.environ["TMPDIR"], exist_ok=True)
    out = os.dup(1)
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 1)  # stray prints of ours can never interleave with the replies
    write_msg(out, json.dumps({"hello": sys.version, "uid": os.getuid(), "pid": os.getpid()}).encode())
    while (msg := read_msg(0, 1 << 34)) is not None:
        status, data = _run_check(pickle.loads(msg))  # trusted: the scorer wrote it
        write_msg(out, json.dumps({"status": status}).encode() + b"\n" + data)
    return 0


# ------------------------------------------------------------------------------------- outside

def job_for(dataset: str, code: str, entry_point: str, inputs: Sequence[Any], ref_time: Sequence[float], *,
            min_time_limit: float, gt_time_limit_factor: float, max_memory: int, out_cap: int,
            max_resident: int | None) -> dict[str, Any]:
    """A check as EvalPlus's ``untrusted_check`` sets it up: per-test limits
    ``max(min_time_limit, factor * ref)`` and a kill ``min(60, sum) + 2`` s after start (its timeout + 1 and
    ``join(timeout + 1)``), the CPU-seconds cap likewise."""
    limits = [max(min_time_limit, gt_time_limit_factor * t) for t in ref_time]
    kill_after = min(60.0, sum(limits)) + 2
    return {"dataset": dataset, "code": code, "entry_point": entry_point, "inputs": list(inputs),
            "time_limits": limits, "kill_after_s": kill_after, "cpu_s": math.ceil(kill_after),
            "max_memory": max_memory, "out_cap": out_cap, "max_resident": max_resident}


class Sandbox:
    """One sandbox (namespaces, its own uid, a fresh root) with its harness, driven from the scorer."""

    def __init__(self, prefix: Sequence[str], env: Mapping[str, str], *, preexec: Any = None,
                 start_timeout_s: float = 120.0):
        self.proc = subprocess.Popen(list(prefix), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=dict(env), cwd="/", start_new_session=True,
                                     preexec_fn=preexec)  # noqa: PLW1509  (only writes cgroup.procs)
        self.stderr_tail = bytearray()
        threading.Thread(target=self._drain, daemon=True).start()
        self.wfd, self.rfd = self.proc.stdin.fileno(), self.proc.stdout.fileno()  # type: ignore[union-attr]
        os.set_blocking(self.wfd, False)
        try:
            hello = json.loads(read_msg(self.rfd, 1 << 16, time.monotonic() + start_timeout_s) or b"{}")
        except (SandboxDied, ValueError) as exc:
            self.close()
            raise SandboxDied(f"sandbox did not start ({exc}): {self.stderr_text()}") from None
        if hello.get("hello") != sys.version:
            self.close()
            raise SandboxDied(f"interpreter mismatch in the sandbox: {hello.get('hello')!r}: {self.stderr_text()}")
        self.uid = hello.get("uid")

    def _drain(self) -> None:
        """Keep the last 64 KiB of the sandbox's stderr (read incrementally; never buffered whole)."""
        for chunk in iter(lambda: self.proc.stderr.read1(1 << 16), b""):  # type: ignore[union-attr]
            self.stderr_tail = (self.stderr_tail + chunk)[-(1 << 16):]

    def stderr_text(self) -> str:
        return self.stderr_tail.decode("utf-8", "replace")[-2000:]

    def check(self, job: Mapping[str, Any]) -> tuple[str, bytes]:
        """(harness status, the check's raw frames); :class:`SandboxDied` if the sandbox failed."""
        deadline = time.monotonic() + job["kill_after_s"] + 30
        write_msg(self.wfd, pickle.dumps(dict(job), protocol=pickle.HIGHEST_PROTOCOL), deadline)
        reply = read_msg(self.rfd, job["out_cap"] + 4096, deadline)
        if reply is None:
            raise SandboxDied(f"sandbox exited: {self.stderr_text()}")
        head, _, data = reply.partition(b"\n")
        try:
            status = json.loads(head)["status"]
        except (ValueError, KeyError, TypeError):
            raise SandboxDied("malformed reply header") from None
        if status not in ("exited", "timeout", "overflow", "memory", "forkfail"):
            raise SandboxDied(f"unknown status {status!r}")
        return status, data

    def close(self) -> None:
        """End of input lets the harness exit; unshare then reaps it and exits (the namespace kills every
        other process). A harness that does not exit is killed by its host PID, unshare last, so that no
        zombie of the sandbox uid is left to the host's init."""
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            for pid in self._children():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc.stdout.close()  # type: ignore[union-attr]

    def _children(self) -> list[int]:
        try:
            return [int(p) for p in Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()]
        except (OSError, ValueError):
            return []


class Cgroup:
    """A cgroup v2 of its own for one sandbox (``memory.max``, no swap, ``pids.max``), where the machine
    delegates the memory and pids controllers to a cgroup we may create children in (ours or its parent)."""

    def __init__(self, parent: Path, memory: int, pids: int):
        self.path = parent / f"creditbench-{os.getpid()}-{secrets.token_hex(4)}"
        self.path.mkdir()
        for name, value in (("memory.max", memory), ("memory.swap.max", 0), ("pids.max", pids)):
            (self.path / name).write_text(f"{value}\n")

    def enter(self) -> None:
        """``preexec_fn`` of the sandbox: the unshare process (and so all it starts) joins the cgroup."""
        with open(self.path / "cgroup.procs", "w") as fh:
            fh.write("0\n")

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)

    @staticmethod
    def parent() -> Path | None:
        try:
            rel = next(line[3:].strip() for line in Path("/proc/self/cgroup").read_text().splitlines()
                       if line.startswith("0::"))
            mount = next(line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
                         if line.split(" - ")[1].split()[0] == "cgroup2")
        except (OSError, StopIteration, IndexError):
            return None
        own = Path(mount) / rel.lstrip("/")
        for cand in (own, own.parent):
            try:
                enabled = (cand / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if {"memory", "pids"} <= set(enabled) and os.access(cand, os.W_OK):
                return cand
        return None


def sandbox_uid() -> int:
    """A uid of its own for each sandbox (no passwd entry needed): RLIMIT_NPROC then counts exactly its tasks."""
    return 0x40000000 + secrets.randbelow(0x3FFF0000)


def worker_paths(repo_root: Path) -> list[str]:
    """What the harness reads: the interpreter (and its libpython), the venv, and this package."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)), repo_root / "evaluation"}
    return sorted(os.path.realpath(p) for p in paths)


if __name__ == "__main__":
    sys.exit(_harness())
