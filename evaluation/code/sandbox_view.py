"""The code-eval sandbox's file system: a fresh, read-only root that holds only what the worker needs.

Run as root inside fresh mount and PID namespaces (``unshare --mount --pid --fork``), :func:`build_root`
assembles a new root on a tmpfs and ``pivot_root``s into it, then the command is exec'd (e.g. ``setpriv
--reuid=nobody ... python -m evaluation.code.sandbox``):

* read-only binds of the system directories (``/usr``, ``/etc``, ``/opt``; ``/bin`` & co. as their
  symlinks) and of the named paths (the interpreter, the venv, this checkout's ``evaluation`` package),
  at their host paths, so the venv's symlinks and ``.pth`` files keep working. Parents are fresh 0755
  directories, so a checkout or a pyenv Python below 0700 directories (``/root``, ``mktemp -d``) is
  reachable without loosening anything on the host, and nothing else of those directories is visible;
* ``--hide`` paths covered by an empty read-only tmpfs (belt and braces: they are not bound anyway);
* private, size-capped tmpfs ``/tmp``, ``/var/tmp``, ``/dev/shm`` and a work dir owned by the sandbox
  user; a minimal ``/dev`` (null, zero, full, random, urandom); a procfs of the new PID namespace.

Nothing else of the host exists in the sandbox: not the dataset (whose canonical solutions would give the
answers away), not the expected-output cache, not other checkouts, not the host's processes. Everything the
sandbox writes lives in its tmpfs mounts, which vanish with the namespace.

Usage (as root, already inside the new mount and PID namespaces)::

    python -m evaluation.code.sandbox_view --bind /root/.pyenv/versions/3.11.7 --work /sandbox --uid 65534 -- CMD ...
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import stat
import sys
from collections.abc import Sequence

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    0x1, 0x2, 0x4, 0x8, 0x20, 0x1000, 0x4000, 0x40000)
MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}
SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
DEVICES = ("null", "zero", "full", "random", "urandom")
# private tmpfs mounts: path -> size (memory they use is bounded here, not by RLIMIT_AS)
SCRATCH = {"/tmp": "64m", "/var/tmp": "16m", "/dev/shm": "64m"}


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    rc = _libc().mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                    data.encode() if data else None)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} -> {target}: {os.strerror(err)}")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _bind_ro(fd: int, target: str) -> None:
    """Bind what ``fd`` (O_PATH) names at ``target`` (created), read-only, nosuid, nodev."""
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o600))
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC, None)
    _mount("none", target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)


def _tmpfs(target: str, options: str, flags: int = MS_NOSUID | MS_NODEV) -> None:
    os.makedirs(target, mode=0o755, exist_ok=True)
    _mount("tmpfs", target, "tmpfs", flags, options)


def build_root(binds: Sequence[str], *, work: str, uid: int, hide: Sequence[str] = (),
               work_size: str = "128m") -> None:
    """Assemble the sandbox root described in the module docstring and ``pivot_root`` into it.

    Needs root in fresh mount and PID namespaces; afterwards the cwd is ``work``.
    """
    _mount("none", "/", None, MS_REC | MS_PRIVATE, None)  # nothing propagates back to the host
    wanted = sorted({os.path.realpath(p) for p in binds if os.path.exists(p)} | {
        d for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)})
    links = {d: os.readlink(d) for d in SYSTEM_DIRS if os.path.islink(d)}
    fds = {p: os.open(p, os.O_PATH) for p in wanted}  # held across the tmpfs that hides /tmp below
    new = "/tmp"  # any directory will do: the host's /tmp stays as it is, hidden only in this namespace
    try:
        _tmpfs(new, "mode=0755,size=4m")
        # scratch first: a named path below /tmp (a checkout in mktemp -d) is then bound on top of it
        _tmpfs(new + "/dev", "mode=0755,size=64k")
        for path, size in SCRATCH.items():
            _tmpfs(new + path, f"mode=1777,size={size}")
        _tmpfs(new + work, f"mode=0700,uid={uid},gid={uid},size={work_size}")
        for p in wanted:  # parents before children, so a nested bind is not hidden by its parent's
            _bind_ro(fds[p], new + p)
    finally:
        for fd in fds.values():
            os.close(fd)
    for d, target in links.items():
        os.symlink(target, new + d)
    for h in hide:
        if os.path.isdir(new + h):
            _tmpfs(new + h, "mode=0555,size=4k", MS_NOSUID | MS_NODEV | MS_RDONLY)
    for dev in DEVICES:
        fd = os.open("/dev/" + dev, os.O_PATH)
        try:
            _bind_ro(fd, f"{new}/dev/{dev}")
            _mount("none", f"{new}/dev/{dev}", None, MS_REMOUNT | MS_BIND | MS_NOSUID, None)  # writable
        finally:
            os.close(fd)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{new}/dev/{name}")
    os.makedirs(new + "/proc", mode=0o555, exist_ok=True)
    _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    _mount("none", new, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
    os.chdir(new)
    if _libc().syscall(_PIVOT_ROOT[os.uname().machine], b".", b".") != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"pivot_root: {os.strerror(err)}")
    if _libc().umount2(b".", MNT_DETACH) != 0:  # the old root, stacked below the new one
        err = ctypes.get_errno()
        raise OSError(err, f"umount old root: {os.strerror(err)}")
    os.chdir(work)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        raise SystemExit("usage: python -m evaluation.code.sandbox_view --bind P ... --work DIR --uid N -- CMD ...")
    split = argv.index("--")
    ap = argparse.ArgumentParser(prog="python -m evaluation.code.sandbox_view")
    ap.add_argument("--bind", action="append", default=[], help="host path to show read-only")
    ap.add_argument("--hide", action="append", default=[], help="path to cover with an empty tmpfs")
    ap.add_argument("--work", required=True, help="the sandbox user's private work dir (a tmpfs)")
    ap.add_argument("--work-size", default="128m")
    ap.add_argument("--uid", type=int, required=True)
    a = ap.parse_args(argv[:split])
    cmd = argv[split + 1 :]
    if not cmd:
        raise SystemExit("no command after --")
    build_root(a.bind, work=a.work, uid=a.uid, hide=a.hide, work_size=a.work_size)
    os.execvp(cmd[0], cmd)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
