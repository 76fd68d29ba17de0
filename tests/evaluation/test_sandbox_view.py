"""The code-eval sandbox reaches the interpreter, venv and checkout below 0700 directories, and nothing else.

pytest's own tmp dirs sit below ``/tmp/pytest-of-<user>`` (mode 0700): the layout a ``mktemp -d`` clone has.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluation.benchmarks import DEFAULT_DATA_DIR, REPO_ROOT
from evaluation.sandbox_view import blocking_dir

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _can_isolate() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"):
        return False
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        return False
    return subprocess.run(["unshare", "--mount", "--fork", "true"], capture_output=True, check=False).returncode == 0


needs_mountns = pytest.mark.skipif(not _can_isolate(), reason="needs root, unshare --mount, setpriv and 'nobody'")


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A 0755 dir right below /tmp (1777), so that no ancestor blocks and the test controls every mode."""
    d = Path(tempfile.mkdtemp(prefix="creditbench-view-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    for dirpath, dirnames, _ in os.walk(d):
        for n in dirnames:
            os.chmod(os.path.join(dirpath, n), 0o755)
    shutil.rmtree(d)


def _layout(root: Path) -> tuple[Path, Path]:
    """root/secret (0700) holding inner/f and other/f (both world-readable)."""
    secret = root / "secret"
    (secret / "inner" / "deeper").mkdir(parents=True)
    (secret / "other").mkdir()
    (secret / "inner" / "f").write_text("hi\n")
    (secret / "other" / "f").write_text("hidden\n")
    for d in (secret / "inner", secret / "inner" / "deeper", secret / "other"):
        d.chmod(0o755)
    secret.chmod(0o700)
    return secret / "inner", secret / "other"


def test_blocking_dir_is_the_shallowest_non_traversable_ancestor(open_dir: Path) -> None:
    inner, other = _layout(open_dir)
    (inner / "deeper").chmod(0o700)
    (inner / "deeper" / "x").mkdir()
    assert blocking_dir([inner / "deeper" / "x", other]) == open_dir / "secret"
    assert blocking_dir([open_dir / "secret"]) is None  # a path's own mode is not its ancestors' business
    assert blocking_dir([Path("/usr/bin")]) is None
    open_dir.chmod(0o700)
    assert blocking_dir([inner / "deeper" / "x", other]) == open_dir


@needs_mountns
def test_only_the_named_paths_become_reachable_and_the_host_is_untouched(open_dir: Path) -> None:
    inner, other = _layout(open_dir)
    (inner / "deeper").chmod(0o700)  # covered in a second round; deeper/g is named
    (inner / "deeper" / "g").write_text("deep\n")
    (inner / "deeper" / "g").chmod(0o644)
    script = (f"cat {inner}/f {inner}/deeper/g; cat {other}/f 2>/dev/null || echo no-other; "
              f"ls {inner.parent} 2>/dev/null || echo no-list")
    before = Path("/proc/self/mountinfo").read_text()
    out = subprocess.run(["unshare", "--mount", "--fork", sys.executable, "-m", "evaluation.sandbox_view",
                          "--path", str(inner), "--path", str(inner / "deeper" / "g"), "--", *NOBODY, "sh", "-c", script],
                         capture_output=True, text=True, cwd=REPO_ROOT, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["hi", "deep", "no-other", "no-list"]
    assert Path("/proc/self/mountinfo").read_text() == before  # mounts stayed in the namespace
    assert oct((inner.parent).stat().st_mode & 0o777) == "0o700" and (other / "f").read_text() == "hidden\n"
    # without the view, nobody cannot even reach the file
    plain = subprocess.run([*NOBODY, "cat", str(inner / "f")], capture_output=True, text=True, check=False)
    assert plain.returncode != 0


@needs_mountns
def test_code_eval_from_a_checkout_below_a_0700_directory(tmp_path: Path) -> None:
    """A copy of the packages below a 0700 dir (like ``git clone`` into ``mktemp -d``) still grades MBPP+."""
    pytest.importorskip("evalplus")
    root = tmp_path / "clone"
    root.mkdir(mode=0o700)
    checkout = root / "creditbench"
    checkout.mkdir(mode=0o755)
    for pkg in ("evaluation", "training"):
        shutil.copytree(REPO_ROOT / pkg, checkout / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for dirpath, dirnames, filenames in os.walk(checkout):
        for n in dirnames:
            os.chmod(os.path.join(dirpath, n), 0o755)
        for n in filenames:
            os.chmod(os.path.join(dirpath, n), 0o644)
    dataset = DEFAULT_DATA_DIR / "mbpp_plus" / "MbppPlus.jsonl.gz"
    code = (
        "import json, sys; from evaluation.code_eval import evaluate_mbpp_plus, SandboxConfig, REPO_ROOT\n"
        "import gzip\n"
        f"rows = {{json.loads(l)['task_id']: json.loads(l) for l in gzip.open({str(dataset)!r}, 'rt')}}\n"
        "t = rows['Mbpp/762']\n"
        "res = evaluate_mbpp_plus([{'task_id': 'Mbpp/762', 'completion': t['canonical_solution']}],\n"
        f"    dataset_path={str(dataset)!r}, cache_dir={str(tmp_path / 'gt')!r}, config=SandboxConfig(run_timeout_s=120))\n"
        "print(json.dumps({'root': str(REPO_ROOT), 'plus': res.pass_at_1_plus, 'iso': res.isolation}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=checkout,
                         env={**os.environ, "PYTHONPATH": str(checkout)}, check=False, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["root"] == str(checkout)
    assert got["plus"] == 1.0 and "mountns" in got["iso"], got


@needs_mountns
def test_the_sandbox_sweep_sees_its_own_pid_namespace(open_dir: Path) -> None:
    """Inside ``unshare --pid`` the inherited /proc is the host's: ``psutil.Process()`` looked up our
    namespace PID among host PIDs (seen: pid 9 absent on the host, every check of a run crashed). The
    sweep reads the namespace's own procfs that sandbox_view mounts in the work dir."""
    pytest.importorskip("psutil")
    from evaluation.code_eval import SandboxConfig, _isolation_prefix

    prefix, labels, _ = _isolation_prefix(SandboxConfig())
    if "mountns" not in labels:
        pytest.skip(f"no mount namespace: {labels}")
    code = ("import os, psutil; from evaluation.code_eval import _own_procfs\n"
            "p = _own_procfs(); psutil.PROCFS_PATH = p\n"
            "me = psutil.Process()\n"
            "print(p, os.getpid(), me.pid, me.uids().real, 'python' in me.name())\n")
    tmp_path = open_dir  # like a run's work dir: reachable by nobody (below /tmp)
    out = subprocess.run(prefix + [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO_ROOT)},
                         check=False, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    procfs, pid, psutil_pid, uid, is_python = out.stdout.split()
    assert procfs == str(tmp_path / ".nsproc") and pid == psutil_pid and uid == "65534" and is_python == "True"
    assert int(pid) < 10  # a fresh PID namespace: the worker is one of its first processes
    assert not os.path.ismount(tmp_path / ".nsproc")  # the mount stayed inside the namespace
