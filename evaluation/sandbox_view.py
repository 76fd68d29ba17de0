"""Make the paths a sandboxed worker needs reachable by its unprivileged uid, inside a mount namespace.

The code-eval sandbox (:mod:`evaluation.code_eval`) runs EvalPlus as ``nobody``. ``nobody`` must traverse
every directory above the interpreter, the venv and this checkout, which fails for common layouts: a
pyenv Python under ``/root`` (mode 0700) or a checkout below ``mktemp -d`` (0700). Loosening those
directories' modes on the host would expose everything in them.

Instead, run as root inside a fresh mount namespace (``unshare --mount``, private propagation), for each
directory ``A`` above a needed path that others may not traverse: bind every needed child of ``A`` aside
(through an ``O_PATH`` descriptor), mount an empty tmpfs of mode 0711 over ``A`` (traversable, not
listable) and bind the children back at their old names. Paths stay identical, so the venv's symlinks and
``.pth`` files keep working, and nothing else below ``A`` becomes visible. Then exec the command (e.g.
``setpriv --reuid=nobody ...``). The mounts vanish with the namespace; the host is untouched.

It can also mount a procfs of the new PID namespace beside the host's ``/proc`` (``--proc``; see
:func:`mount_own_proc`).

Usage (as root, already inside the new mount and PID namespaces)::

    python -m evaluation.sandbox_view --path /root/.pyenv/versions/3.11.7 --path /tmp/x/repo --proc .proc -- CMD ...
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import stat
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC = 0x2, 0x4, 0x8, 0x1000, 0x4000


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    rc = libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                    data.encode() if data else None)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} -> {target}: {os.strerror(err)}")


def blocking_dir(paths: Iterable[Path]) -> Path | None:
    """The shallowest directory strictly above one of ``paths`` that others cannot traverse (no o+x)."""
    found: list[Path] = []
    for p in paths:
        for a in reversed(p.parents[:-1]):  # top-down, without "/"
            if not os.stat(a).st_mode & stat.S_IXOTH:
                found.append(a)
                break
    return min(found, key=lambda a: len(a.parts)) if found else None


def expose(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Re-expose ``paths`` (absolute, resolved) through every non-traversable directory above them.

    Returns the directories that were covered by a tmpfs. Needs root in a private mount namespace.
    """
    need = sorted({Path(os.path.realpath(p)) for p in paths if os.path.exists(p)})
    covered: list[Path] = []
    while (a := blocking_dir(need)) is not None:
        if a in covered:
            raise RuntimeError(f"{a} is still not traversable after covering it")
        children = sorted({a / p.relative_to(a).parts[0] for p in need if a in p.parents})
        fds = [os.open(c, os.O_PATH | os.O_NOFOLLOW) for c in children]  # held across the tmpfs
        try:
            _mount("tmpfs", str(a), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0711,size=1m")
            for c, fd in zip(children, fds, strict=True):
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    os.mkdir(c, 0o711)
                else:
                    os.close(os.open(c, os.O_CREAT | os.O_WRONLY, 0o600))
                _mount(f"/proc/self/fd/{fd}", str(c), None, MS_BIND | MS_REC, None)
        finally:
            for fd in fds:
                os.close(fd)
        covered.append(a)
    return covered


def mount_own_proc(path: str | os.PathLike[str]) -> Path:
    """Mount a procfs of the *current* PID namespace at ``path`` (created), leaving ``/proc`` as it is.

    Inside ``unshare --pid`` the inherited ``/proc`` shows the host's PIDs: ``psutil.Process()`` there
    looks up our namespace PID among host PIDs (a missing or an unrelated process). The sandbox's
    process sweep reads this one instead (``psutil.PROCFS_PATH``); ``/proc`` keeps the host's view, which
    RLIMIT_NPROC's system-wide count of our uid's processes needs.
    """
    target = Path(path).absolute()
    target.mkdir(mode=0o555, exist_ok=True)
    _mount("proc", str(target), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        raise SystemExit("usage: python -m evaluation.sandbox_view --path P [--path P ...] [--proc DIR] -- CMD ...")
    split = argv.index("--")
    ap = argparse.ArgumentParser(prog="python -m evaluation.sandbox_view")
    ap.add_argument("--path", action="append", default=[])
    ap.add_argument("--proc", default=None, help="mount this PID namespace's procfs here (relative: to the cwd)")
    a = ap.parse_args(argv[:split])
    cmd = argv[split + 1 :]
    if not cmd:
        raise SystemExit("no command after --")
    expose(a.path)
    if a.proc:
        mount_own_proc(a.proc)
    os.execvp(cmd[0], cmd)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
