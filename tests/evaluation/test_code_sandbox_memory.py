"""The sandbox's memory cap holds exactly: a scored program that allocates past it in steps, in its own
process and in a forked child, never has a resident peak at or over the cap (issue 25: a 3 GiB program
once reached 2,075 MiB against a 2 GiB cap that was enforced by polling).

Each process measures its own kernel high-water mark (``VmHWM``, exact, not sampled) after its last
allocation failed, and the program returns those numbers through the sandbox's ordinary value channel.
Where the machine delegates cgroup v2, the cgroup's own ``memory.peak`` is checked too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("evalplus")

from evaluation.benchmarks import DEFAULT_DATA_DIR
from evaluation.code_compare import END, OK, READY, split_frames
from evaluation.code_eval import SandboxConfig, SandboxUnavailable, _Slot, _tools, check_memory_limits
from evaluation.code_sandbox import job_for

DATASET = DEFAULT_DATA_DIR / "mbpp_plus" / "MbppPlus.jsonl.gz"
CAP = 384 * 1024**2  # the sandbox cap under test (small, so the test is quick)
STEP_MIB, TRY_MIB = 16, 1536  # allocate in 16 MiB steps towards 4x the cap

PROGRAM = f"""
import ctypes
import os

libc = ctypes.CDLL(None)  # EvalPlus's reliability_guard removes os.fork

def _hwm():
    fd = os.open("/proc/self/status", os.O_RDONLY)  # builtins.open is gone too
    text = os.read(fd, 1 << 16).decode()
    os.close(fd)
    return int(text.split("VmHWM:")[1].split()[0]) * 1024

def _grow():
    held = []
    try:
        for _ in range({TRY_MIB // STEP_MIB}):
            held.append(b"\\x01" * ({STEP_MIB} << 20))  # written, so resident
    except MemoryError:
        pass
    n = len(held)
    del held
    return n, _hwm()

def probe(_):
    r, w = os.pipe()
    pid = libc.fork()
    if pid == 0:
        os.close(r)
        n, hwm = _grow()
        os.write(w, f"{{n}} {{hwm}}".encode())
        os._exit(0)
    os.close(w)
    child = os.read(r, 100).decode().split()
    os.waitpid(pid, 0)
    n, hwm = _grow()
    return [n, hwm, int(child[0]), int(child[1])]
"""


def _run(config: SandboxConfig, tmp_path: Path) -> tuple[str, list, int | None]:
    slot = _Slot(config, tmp_path, DATASET, [0])
    try:
        box = slot.get()
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    try:
        job = job_for("mbpp", PROGRAM, "probe", [[0]], [1.0], min_time_limit=60.0, gt_time_limit_factor=1.0,
                      out_cap=1 << 20, **check_memory_limits(config, cgroup=slot.cgroup is not None))
        status, data = box.check(job)
        peak = None
        if slot.cgroup is not None and (slot.cgroup.path / "memory.peak").exists():
            peak = int((slot.cgroup.path / "memory.peak").read_text())
        return status, split_frames(data), peak
    finally:
        slot.close()


def test_peak_resident_memory_stays_under_the_cap(tmp_path: Path) -> None:
    try:
        _tools()
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    status, frames, cgroup_peak = _run(SandboxConfig(sandbox_memory_bytes=CAP), tmp_path)
    assert status == "exited" and frames[0] == [READY] and frames[-1] == [END], (status, frames)
    i, ok, value = frames[1]
    assert (i, ok) == (0, OK)
    n_parent, hwm_parent, n_child, hwm_child = value
    for n, hwm in ((n_parent, hwm_parent), (n_child, hwm_child)):
        assert n * STEP_MIB * 1024**2 > CAP // 2  # the program did allocate far towards the cap ...
        assert n * STEP_MIB < TRY_MIB  # ... and was stopped before its goal
        assert 0 < hwm < CAP, (hwm / 2**20, CAP / 2**20)  # exact peak, not a sample
    if cgroup_peak is not None:
        assert cgroup_peak <= CAP
