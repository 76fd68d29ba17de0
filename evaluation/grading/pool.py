"""Sympy worker subprocesses with a hard kill, seen from the grading process."""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

_MAX_IDLE_WORKERS = 16
_ROOT = str(Path(__file__).resolve().parents[2])  # the directory holding the ``evaluation`` package

class _Worker:
    """One sympy worker subprocess speaking JSON lines over pipes."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "evaluation.grading.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            close_fds=True,
        )
        self.buf = b""
        self.ready = False
        self.poller = select.poll()  # poll, not select: no FD_SETSIZE limit in fd-heavy trainers
        out_fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        self.poller.register(out_fd, select.POLLIN | select.POLLHUP | select.POLLERR)

    def _readline(self, deadline: float) -> bytes | None:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not self.poller.poll(max(1, int(left * 1000))):
                continue  # re-check the deadline
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError("grader worker exited")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def wait_ready(self, limit: float = 120.0) -> None:
        if not self.ready:
            line = self._readline(time.monotonic() + limit)
            if line is None:
                raise TimeoutError("grader worker did not start")
            self.ready = True

    def ask(self, pred: str, gold: str, dataset: str | None, timeout_s: float) -> str | None:
        """The worker's reason (``timeout`` when it stopped itself at its budget), or None when it did not
        answer a little before ``timeout_s`` (the caller then kills it)."""
        budget = max(0.01, timeout_s - min(0.25, 0.2 * timeout_s))  # the worker's own stop, before the kill
        msg = json.dumps({"pred": pred, "gold": gold, "dataset": dataset, "budget_s": budget}) + "\n"
        self.proc.stdin.write(msg.encode())  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        # the kill and a late wake-up of a loaded caller fit in the budget too (seen at load 8: up to 36 ms)
        line = self._readline(time.monotonic() + timeout_s - min(0.05, 0.1 * timeout_s))
        return None if line is None else json.loads(line)["reason"]

    def kill(self, wait: bool = True) -> None:
        """SIGKILL; ``wait=False`` returns at once (the caller reaps it later: a timeout must not pay for the exit
        of a worker that a loaded machine schedules late)."""
        try:
            self.proc.kill()
            if wait:
                self.proc.wait(timeout=5)
        except Exception:
            pass

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(timeout=2)
        except Exception:
            self.kill()


class _WorkerPool:
    """Idle sympy workers; thread-safe; reset after a fork (workers belong to one process)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Worker] = []
        self.pid = os.getpid()

    def acquire(self) -> _Worker:
        with self.lock:
            if self.pid != os.getpid():  # inherited through fork: not ours to use
                self.idle, self.pid = [], os.getpid()
            if self.idle:
                return self.idle.pop()
        return _Worker()

    def release(self, w: _Worker) -> None:
        with self.lock:
            if self.pid == os.getpid() and len(self.idle) < _MAX_IDLE_WORKERS:
                self.idle.append(w)
                return
        w.close()

    def spare(self) -> None:
        """Start a replacement worker in the background (after a kill)."""
        self.release(_Worker())

    def close_all(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
            mine = self.pid == os.getpid()
        if mine:
            for w in idle:
                w.close()


_POOL = _WorkerPool()  # process handles only; no grading state lives here
atexit.register(_POOL.close_all)


def close_workers() -> None:
    """Close this process's idle sympy workers (the next call starts a fresh one: a benchmark's cold round)."""
    _POOL.close_all()


def _replace(w: _Worker) -> None:
    """Reap a killed worker and start its replacement (off the caller's clock)."""
    w.kill()
    _POOL.spare()


def slow_in_worker(pred: str, gold: str, dataset: str | None, timeout_s: float) -> str:
    w = _POOL.acquire()
    try:
        w.wait_ready()
        reason = w.ask(pred, gold, dataset, timeout_s)
    except (OSError, EOFError, TimeoutError, ValueError):
        w.kill()
        log.warning("grader worker failed; restarting", exc_info=True)
        return "parse_error"
    if reason is None:  # stuck where its own alarm cannot land: killed at the budget, reaped and replaced behind
        w.kill(wait=False)
        threading.Thread(target=_replace, args=(w,), daemon=True).start()
        return "timeout"
    _POOL.release(w)
    return reason

