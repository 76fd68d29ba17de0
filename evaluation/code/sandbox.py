"""The process boundary of code scoring: untrusted programs run in a sandbox and only *data* comes back.

Trust design (why a forged pass is impossible, not merely hard):

* **The answers never enter the sandbox.** A job carries the program, the entry point, EvalPlus's test
  inputs and time limits, nothing else. The expected outputs stay in the scorer (:mod:`evaluation.code.truth`),
  the dataset with its canonical solutions is not in the sandbox's file system (:mod:`evaluation.code.sandbox_view`),
  and the verdict is computed by the scorer (:func:`evaluation.code.compare.check_outputs`). Whatever runs
  in the sandbox, including a fully subverted harness, can only choose which *values* it reports; to have
  them accepted it must compute the right ones, i.e. solve the task. Forging the framing, the status or the
  values themselves therefore gains nothing; everything from the sandbox is parsed as hostile data
  (length-capped, JSON only, strict tags: never pickle).
* **One check cannot speak for, or read, another.** Per check the scorer makes two pipes: the job goes
  down one that only the check's process reads, its frames come up one that only it (and what it forks)
  holds the write end of. The harness (:func:`_harness`) receives the two ends over a unix socket
  (``SCM_RIGHTS``) with the limits, forks the check and closes its copies: it never reads a program, an
  input or an output, so the memory a check inherits from it holds nothing of earlier checks (no sibling's
  program or right answers to copy). The check keeps only its two pipe ends: ``/dev/null`` is its
  stdin/stdout/stderr and the control socket is closed. The harness is PID 1 of the sandbox's PID
  namespace, so checks cannot signal it, and non-dumpable (``PR_SET_DUMPABLE 0``), so they (same uid)
  cannot ptrace it or open its ``/proc/1/fd`` or ``/proc/1/mem``. After every check it kills every other
  process of the sandbox (``kill(-1, SIGKILL)`` from PID 1), reaps them and empties the scratch dirs, so
  no daemon or file outlives its check; a detached one dies at the latest with the namespace.
* **Limits** (recorded as :func:`evaluation.code.score.limits_mechanism`): one uid per sandbox, so
  ``RLIMIT_NPROC`` caps the whole sandbox's processes *and threads* (the kernel counts tasks per uid), and
  the sandboxes cannot signal each other; memory: every check process's ``RLIMIT_AS`` (EvalPlus's, lowered
  to the sandbox cap, inherited by all it forks) holds each process under the cap exactly, and the sum over
  processes is held by cgroup v2 ``memory.max`` (+ ``pids.max``) where the machine delegates those
  controllers, else watched (total resident memory, every ``POLL_S``); CPU seconds per check
  (``RLIMIT_CPU``); EvalPlus's per-test time limit by its own alarm in the child *and* by the scorer's
  clock on the frames' arrival (the child may disable alarms), EvalPlus's kill timeout of the check by the
  harness; output read incrementally up to a cap by the scorer (never ``communicate()``).
"""

from __future__ import annotations

import ctypes
import json
import logging
import math
import os
import pickle
import resource
import secrets
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evaluation.code.compare import END, OK, RAISED, READY, encode_frame

GRACE_S = 1.0  # harness-side slack on top of EvalPlus's per-test limit (its own alarm fires first)
POLL_S = 0.05  # resident-memory watch interval
WORK = "/sandbox"  # the sandbox user's tmpfs work dir (TMPDIR below it)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4


class SandboxDied(RuntimeError):
    """The sandbox exited, hung, or sent something that is not a well-formed reply."""


# ------------------------------------------------------------------------------------- framing

def _write_all(fd: int, data: bytes, deadline: float) -> None:
    """All of ``data`` to the non-blocking ``fd`` by ``deadline``; False-free: raises on timeout."""
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([], [fd], [], left)[1]:
            raise SandboxDied("timed out handing a job to the sandbox")
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            continue


def _frames_end(data: bytes | bytearray, pos: int) -> tuple[int, int]:
    """(new position, frames completed) after the complete 4-byte-length frames from ``pos``."""
    n = 0
    while pos + 4 <= len(data) and pos + 4 + int.from_bytes(data[pos : pos + 4], "big") <= len(data):
        pos += 4 + int.from_bytes(data[pos : pos + 4], "big")
        n += 1
    return pos, n


# ------------------------------------------------------------------------------------- inside

def _child(meta: Mapping[str, Any], job_r: int, w: int) -> None:
    """The check process: reads its own job from the scorer's pipe, then does EvalPlus's ``unsafe_execute``
    minus the comparison, reporting frames on ``w``; never returns."""
    try:
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        lo, hi = sorted((job_r, w))
        os.closerange(3, lo)  # the harness's control socket included: the check cannot talk to the scorer
        os.closerange(lo + 1, hi)
        os.closerange(hi + 1, 1 << 16)
        chunks = []
        while chunk := os.read(job_r, 1 << 20):
            chunks.append(chunk)
        os.close(job_r)
        job = pickle.loads(b"".join(chunks))  # trusted: the scorer wrote it
        resource.setrlimit(resource.RLIMIT_CPU, (meta["cpu_s"], meta["cpu_s"]))
        import tempfile

        from evalplus.eval.utils import reliability_guard, swallow_io, time_limit

        from evaluation.code.compare import encode_value

        write, send = os.write, _send
        os.chdir(tempfile.mkdtemp())  # EvalPlus's create_tempdir (TMPDIR is in the sandbox's tmpfs)
        reliability_guard(maximum_memory_bytes=meta["max_memory"])
        exec_globals: dict[str, Any] = {}
        with swallow_io():
            exec(job["code"], exec_globals)  # noqa: S102  (untrusted, contained)
            fn = exec_globals[job["entry_point"]]
        send(write, w, [READY])
        for i, inp in enumerate(job["inputs"]):
            try:
                with time_limit(job["time_limits"][i]), swallow_io():
                    out = fn(*inp)
                if job["not_none"] and type(out) is not bool:  # EvalPlus judges only `out is not None` here
                    out = out is not None  # (re.Match results); a program could return this bool itself
                frame = [i, OK, encode_value(out)]
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


def _run_check(meta: Mapping[str, Any], job_r: int, w: int, ctl: socket.socket) -> str:
    """Fork the check and watch it (exit, the scorer's kill, the overall limit, memory); kill everything
    after. The check's job and frames flow between it and the scorer directly: we never read them."""
    try:
        pid = os.fork()
    except OSError:
        pid = -1
    if pid == 0:
        ctl.close()
        _child(meta, job_r, w)
    os.close(job_r)
    os.close(w)
    if pid < 0:
        status = "forkfail"
    else:
        status = _watch(pid, meta, ctl)
    _kill_all_others()
    _wipe_scratch()
    return status


def _watch(pid: int, meta: Mapping[str, Any], ctl: socket.socket) -> str:
    pidfd = os.pidfd_open(pid)
    deadline = time.monotonic() + meta["kill_after_s"]
    watch = meta.get("max_resident")
    try:
        while (left := deadline - time.monotonic()) > 0:
            ready = select.select([pidfd, ctl], [], [], min(left, POLL_S))[0]
            if pidfd in ready:
                return "exited"
            if ctl in ready:
                return "killed"  # the scorer saw a test run over its limit, or too much output
            if watch and _resident_bytes() > watch:
                return "memory"
        return "timeout"
    finally:
        os.close(pidfd)


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
    """The sandbox's PID 1: for each job message on the control socket (fd 0; it carries the job pipe's read
    end and the result pipe's write end), run the check and answer with its status."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    import evalplus.eval  # noqa: F401  (imported once here, so that every forked check starts warm)
    import numpy  # noqa: F401

    os.makedirs(os.environ["TMPDIR"], exist_ok=True)
    ctl = socket.socket(fileno=0)
    ctl.send(json.dumps({"hello": sys.version, "uid": os.getuid(), "pid": os.getpid()}).encode())
    while True:
        msg, fds, _, _ = socket.recv_fds(ctl, 1 << 16, 2)
        if not msg:
            return 0
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            continue
        status = _run_check(json.loads(msg), fds[0], fds[1], ctl)
        ctl.send(json.dumps({"status": status}).encode())


# ------------------------------------------------------------------------------------- outside

def job_for(dataset: str, code: str, entry_point: str, inputs: Sequence[Any], ref_time: Sequence[float], *,
            min_time_limit: float, gt_time_limit_factor: float, max_memory: int, out_cap: int,
            max_resident: int | None) -> dict[str, Any]:
    """A check as EvalPlus's ``untrusted_check`` sets it up: per-test limits
    ``max(min_time_limit, factor * ref)`` and a kill ``min(60, sum) + 2`` s after start (its timeout + 1 and
    ``join(timeout + 1)``), the CPU-seconds cap likewise."""
    from evalplus.eval import MBPP_OUTPUT_NOT_NONE_TASKS

    limits = [max(min_time_limit, gt_time_limit_factor * t) for t in ref_time]
    kill_after = min(60.0, sum(limits)) + 2
    not_none = dataset == "mbpp" and entry_point in MBPP_OUTPUT_NOT_NONE_TASKS
    return {"dataset": dataset, "code": code, "entry_point": entry_point, "inputs": list(inputs),
            "not_none": not_none,
            "time_limits": limits, "kill_after_s": kill_after, "cpu_s": math.ceil(kill_after),
            "max_memory": max_memory, "out_cap": out_cap, "max_resident": max_resident}


META = ("kill_after_s", "cpu_s", "max_memory", "max_resident")  # what the harness sees of a job


class Sandbox:
    """One sandbox (namespaces, its own uid, a fresh root) with its harness, driven from the scorer."""

    def __init__(self, prefix: Sequence[str], env: Mapping[str, str], *, preexec: Any = None,
                 start_timeout_s: float = 120.0):
        self.ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.proc = subprocess.Popen(list(prefix), stdin=theirs.fileno(), stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, env=dict(env), cwd="/", start_new_session=True,
                                         preexec_fn=preexec)  # noqa: PLW1509  (only writes cgroup.procs)
        self.stderr_tail = bytearray()
        threading.Thread(target=self._drain, daemon=True).start()
        try:
            hello = json.loads(self._recv(time.monotonic() + start_timeout_s))
        except (SandboxDied, ValueError) as exc:
            self.close()
            raise SandboxDied(f"sandbox did not start ({exc}): {self.stderr_text()}") from None
        if hello.get("hello") != sys.version:
            self.close()
            raise SandboxDied(f"interpreter mismatch in the sandbox: {hello.get('hello')!r}: {self.stderr_text()}")

    def _drain(self) -> None:
        """Keep the last 64 KiB of the sandbox's stderr (read incrementally; never buffered whole)."""
        for chunk in iter(lambda: self.proc.stderr.read1(1 << 16), b""):  # type: ignore[union-attr]
            self.stderr_tail = (self.stderr_tail + chunk)[-(1 << 16):]

    def stderr_text(self) -> str:
        return self.stderr_tail.decode("utf-8", "replace")[-2000:]

    def _recv(self, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.ctl], [], [], left)[0]:
            raise SandboxDied("timed out waiting for the sandbox")
        msg = self.ctl.recv(1 << 16)
        if not msg:
            raise SandboxDied(f"sandbox exited: {self.stderr_text()}")
        return msg

    def check(self, job: Mapping[str, Any]) -> tuple[str, bytes]:
        """(status, the check's raw frames); :class:`SandboxDied` if the sandbox failed.

        The job goes down a pipe that only the check's process reads, its frames come back up a pipe that
        only it (and what it forks) can write; the harness gets the two ends and the limits, never the
        content. We time each test here: frame k+1 (k's answer) must come within k's limit + GRACE_S of
        frame k, else we tell the harness to kill the check."""
        job_r, job_w = os.pipe()
        res_r, res_w = os.pipe()
        try:
            socket.send_fds(self.ctl, [json.dumps({k: job[k] for k in META}).encode()], [job_r, res_w])
        except OSError as exc:
            for fd in (job_r, job_w, res_r, res_w):
                os.close(fd)
            raise SandboxDied(f"sandbox gone: {exc}") from None
        os.close(job_r)
        os.close(res_w)
        overall = time.monotonic() + job["kill_after_s"] + 30
        try:
            os.set_blocking(job_w, False)
            try:
                _write_all(job_w, pickle.dumps(dict(job), protocol=pickle.HIGHEST_PROTOCOL), overall)
            except BrokenPipeError:
                pass  # the check died before reading all of it: its frames (none) tell
            finally:
                os.close(job_w)
            status, data = self._collect(res_r, job, overall)
        finally:
            os.close(res_r)
        reply = json.loads(self._recv(overall))
        harness = reply.get("status") if isinstance(reply, dict) else None
        if harness not in ("exited", "killed", "timeout", "memory", "forkfail"):
            raise SandboxDied(f"unknown status {harness!r}")
        return (status if harness in ("exited", "killed") else harness), data

    def _collect(self, fd: int, job: Mapping[str, Any], overall: float) -> tuple[str, bytes]:
        """Read the check's frames up to its output cap, timing each test; kill it on a limit."""
        data, pos, frames = bytearray(), 0, 0
        limits, cap = job["time_limits"], job["out_cap"]
        deadline = min(overall, time.monotonic() + job["kill_after_s"])
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return self._kill("timeout"), b""
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return "exited", bytes(data)
            data += chunk
            if len(data) > cap:
                return self._kill("overflow"), b""
            pos, n = _frames_end(data, pos)
            for _ in range(n):  # frame k >= 1 answers input k - 1; the next input's clock starts now
                frames += 1
                if frames <= len(limits):
                    deadline = min(overall, time.monotonic() + limits[frames - 1] + GRACE_S)

    def _kill(self, status: str) -> str:
        try:
            self.ctl.send(b'{"kill": 1}')
        except OSError:
            pass
        return status

    def close(self) -> None:
        """End of input lets the harness exit; unshare then reaps it and exits (the namespace kills every
        other process). A harness that does not exit is killed by its host PID, unshare last, so that no
        zombie of the sandbox uid is left to the host's init."""
        self.ctl.close()
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

    def _children(self) -> list[int]:
        try:
            return [int(p) for p in Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()]
        except (OSError, ValueError):
            return []


class Cgroup:
    """A cgroup v2 of its own for one sandbox (``memory.max``, no swap, ``pids.max``), where the machine
    delegates the memory and pids controllers to a cgroup we may create children in (ours or its parent).

    Detection reads ``/proc/self/cgroup`` (the ``0::`` line) and ``/proc/self/mountinfo`` (a ``cgroup2``
    mount): on a cgroup v1 machine there is no ``cgroup2`` mount, on a hybrid one the v2 tree holds no
    memory controller, and in both :meth:`create` returns None, so each process's RLIMIT_AS and the
    resident-memory watch hold the cap instead (:func:`evaluation.code.score.limits_mechanism`)."""

    def __init__(self, parent: Path, memory: int, pids: int):
        self.path = parent / f"creditbench-{os.getpid()}-{secrets.token_hex(4)}"
        self.path.mkdir()
        try:
            for name, value in (("memory.max", memory), ("memory.swap.max", 0), ("pids.max", pids)):
                (self.path / name).write_text(f"{value}\n")
        except OSError:
            self.remove()
            raise

    @classmethod
    def create(cls, memory: int, pids: int, parent: Path | None = None) -> Cgroup | None:
        """The sandbox's cgroup, or None where none can be made here (no v2 delegation, no permission, no
        swap accounting): the caller then falls back to rlimits and the watch, never to no cap."""
        parent = parent if parent is not None else cls.parent()
        if parent is None:
            return None
        try:
            return cls(parent, memory, pids)
        except OSError as exc:
            logging.getLogger(__name__).warning("no cgroup v2 under %s (%s): rlimits and the memory watch "
                                                "hold the cap", parent, exc)
            return None

    def enter(self) -> None:
        """``preexec_fn`` of the sandbox: the unshare process (and so all it starts) joins the cgroup."""
        with open(self.path / "cgroup.procs", "w") as fh:
            fh.write("0\n")

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)

    @staticmethod
    def own_dir(proc_cgroup: str, mountinfo: str) -> Path | None:
        """This process's cgroup v2 directory from the texts of ``/proc/self/cgroup`` and
        ``/proc/self/mountinfo``; None without a ``0::`` line or a ``cgroup2`` mount (cgroup v1). A mount of a
        subtree (mountinfo's root field, e.g. a container without a cgroup namespace) is subtracted."""
        rel = next((line[3:].strip() for line in proc_cgroup.splitlines() if line.startswith("0::")), None)
        mount = next((line.split() for line in mountinfo.splitlines()
                      if " - " in line and line.split(" - ")[1].split()[:1] == ["cgroup2"]), None)
        if rel is None or mount is None or len(mount) < 5:
            return None
        root, point = mount[3], mount[4]
        if root != "/" and (rel == root or rel.startswith(root + "/")):
            rel = rel[len(root):]
        return Path(point) / rel.lstrip("/")

    @staticmethod
    def parent() -> Path | None:
        try:
            own = Cgroup.own_dir(Path("/proc/self/cgroup").read_text(), Path("/proc/self/mountinfo").read_text())
        except OSError:
            return None
        if own is None:
            return None
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
