"""The code-eval sandbox's root: the named paths (also below 0700 directories) read-only, and nothing else.

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


@needs_mountns
def test_the_sandbox_root_shows_only_the_named_paths_read_only(open_dir: Path) -> None:
    inner, other = _layout(open_dir)
    marker = f"creditbench-view-{os.getpid()}"
    script = (f"cat {inner}/f; cat {other}/f 2>/dev/null || echo no-other; ls {open_dir}; "
              f"touch {inner}/x 2>/dev/null || echo ro; touch /{marker} 2>/dev/null || echo ro; "
              f"touch /tmp/{marker} /dev/shm/{marker} /sandbox/{marker} && echo scratch; pwd; "
              "ls /proc | grep -c '^[0-9]'; ls /dev | tr '\\n' ' '")
    before = Path("/proc/self/mountinfo").read_text()
    out = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--kill-child", sys.executable, "-m",
                          "evaluation.code.sandbox_view", "--bind", str(inner), "--work", "/sandbox", "--uid", "65534",
                          "--", *NOBODY, "sh", "-c", script], capture_output=True, text=True, cwd=REPO_ROOT,
                         check=False, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:7] == ["hi", "no-other", "secret", "ro", "ro", "scratch", "/sandbox"], lines
    assert int(lines[7]) <= 4  # a procfs of the new PID namespace: sh, ls, grep
    assert lines[8].split() == ["fd", "full", "null", "random", "shm", "stderr", "stdin", "stdout", "urandom", "zero"]
    assert Path("/proc/self/mountinfo").read_text() == before  # mounts stayed in the namespace
    assert not any(Path(d, marker).exists() for d in ("/tmp", "/dev/shm", "/"))
    assert oct(inner.parent.stat().st_mode & 0o777) == "0o700" and not (inner / "x").exists()


@needs_mountns
def test_code_eval_from_a_checkout_below_a_0700_directory(tmp_path: Path) -> None:
    """A copy of the packages below a 0700 dir (like ``git clone`` into ``mktemp -d``) still grades MBPP+."""
    pytest.importorskip("evalplus")
    root = tmp_path / "clone"
    root.mkdir(mode=0o700)
    checkout = root / "creditbench"
    checkout.mkdir(mode=0o755)
    for pkg in ("common", "evaluation", "training"):
        shutil.copytree(REPO_ROOT / pkg, checkout / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for dirpath, dirnames, filenames in os.walk(checkout):
        for n in dirnames:
            os.chmod(os.path.join(dirpath, n), 0o755)
        for n in filenames:
            os.chmod(os.path.join(dirpath, n), 0o644)
    dataset = DEFAULT_DATA_DIR / "mbpp_plus" / "MbppPlus.jsonl.gz"
    code = (
        "import json, sys; from evaluation.code.score import evaluate_mbpp_plus, SandboxConfig, REPO_ROOT\n"
        "import gzip\n"
        f"rows = {{json.loads(l)['task_id']: json.loads(l) for l in gzip.open({str(dataset)!r}, 'rt')}}\n"
        "t = rows['Mbpp/762']\n"
        "res = evaluate_mbpp_plus([{'task_id': 'Mbpp/762', 'completion': t['canonical_solution']}],\n"
        f"    dataset_path={str(dataset)!r}, cache_dir={str(tmp_path / 'gt')!r},\n"
        "    config=SandboxConfig(run_timeout_s=120))\n"
        "print(json.dumps({'root': str(REPO_ROOT), 'plus': res.pass_at_1_plus, 'iso': res.isolation}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=checkout,
                         env={**os.environ, "PYTHONPATH": str(checkout)}, check=False, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["root"] == str(checkout)
    assert got["plus"] == 1.0 and "mountns" in got["iso"], got
