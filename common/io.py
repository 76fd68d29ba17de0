"""Small I/O helpers: atomic writes (tmp file + os.replace), JSONL, sha256. No state."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def umask_mode(*, directory: bool = False) -> int:
    """The mode ``open``/``mkdir`` would give a new file (0o666) or folder (0o777) under the process's umask.

    Temporary files (``mkstemp``: 0600, ``mkdtemp``: 0700) get it before they are moved into place, so
    results on a shared machine are as readable as any file the user writes (0644 under umask 0022)."""
    mask = None
    try:  # Linux reports the umask without changing it (os.umask would, process-wide, for a moment)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                mask = int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    if mask is None:
        mask = os.umask(0o022)
        os.umask(mask)
    return (0o777 if directory else 0o666) & ~mask


def write_bytes_atomic(path: str | os.PathLike, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half of it; the
    file gets the mode the umask asks for (:func:`umask_mode`), or ``mode`` (e.g. 0o600 for private data)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, umask_mode() if mode is None else mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """:func:`write_bytes_atomic` of ``text`` in UTF-8, line ends as given."""
    write_bytes_atomic(path, text.encode("utf-8"))


def copy_file_atomic(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Copy ``src`` to ``dst`` so that readers (e.g. concurrent jobs) never see a half-written ``dst``.

    ``dst`` gets ``src``'s permission bits (not mkstemp's 0600), like ``shutil.copy``.
    """
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        shutil.copymode(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_jsonl_atomic(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    write_text_atomic(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def read_jsonl(path: str | os.PathLike, *, drop_torn_tail: bool = False) -> list[dict]:
    """Parse a JSONL file; with ``drop_torn_tail`` a last line cut off by a killed writer is ignored."""
    with open(path) as f:
        lines = [line for line in f if line.strip()]
    rows = []
    for i, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if drop_torn_tail and i == len(lines) - 1:
                break
            raise
    return rows


def append_jsonl(path: str | os.PathLike, row: dict) -> None:
    """Append one line and fsync (metrics logs; a torn last line is dropped by readers on resume)."""
    with open(path, "a") as f:
        f.write(json.dumps(row, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def apply_umask_modes(root: str | os.PathLike) -> None:
    """Give a written folder and everything in it the umask's modes (:func:`umask_mode`); links untouched."""
    for path in [Path(root), *Path(root).rglob("*")]:
        if not path.is_symlink():
            os.chmod(path, umask_mode(directory=path.is_dir()))


def replace_dir_atomic(tmp_dir: str | os.PathLike, final_dir: str | os.PathLike) -> None:
    """Move a fully written directory into place; an existing one is swapped out then removed. The folder
    and its files get the umask's modes (not ``mkdtemp``'s 0700, nor the 0600 safetensors writes)."""
    final_dir = Path(final_dir)
    apply_umask_modes(tmp_dir)
    old = final_dir.with_name(final_dir.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if final_dir.exists():
        os.replace(final_dir, old)
    os.replace(tmp_dir, final_dir)
    if old.exists():
        shutil.rmtree(old)
