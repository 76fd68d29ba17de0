"""Atomic file helpers: a reader sees the old file or the new one, and nothing is left behind."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from common.io import copy_file_atomic, replace_dir_atomic, umask_mode, write_json_atomic, write_text_atomic


def test_copy_file_atomic_copies_and_leaves_no_temp_file(tmp_path):
    src, dst = tmp_path / "a.pkl", tmp_path / "cache" / "b.pkl"
    src.write_bytes(b"\x00\x01" * 1000)
    copy_file_atomic(src, dst)
    assert dst.read_bytes() == src.read_bytes()
    assert sorted(p.name for p in dst.parent.iterdir()) == ["b.pkl"]


def test_copy_file_atomic_failure_keeps_the_old_file(tmp_path):
    dst = tmp_path / "b.pkl"
    dst.write_bytes(b"old")
    with pytest.raises(FileNotFoundError):
        copy_file_atomic(tmp_path / "missing.pkl", dst)
    assert dst.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["b.pkl"]


def test_copy_file_atomic_keeps_the_source_mode_not_mkstemps_0600(tmp_path):
    """The EvalPlus ground-truth cache is hard-linked into the sandbox: ``nobody`` must be able to read it."""
    src, dst = tmp_path / "a.pkl", tmp_path / "b.pkl"
    src.write_bytes(b"x")
    src.chmod(0o644)
    copy_file_atomic(src, dst)
    assert dst.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("umask, file_mode, dir_mode", [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750),
                                                        (0o077, 0o600, 0o700)])
def test_atomic_writes_get_the_mode_the_umask_asks_for(tmp_path, umask, file_mode, dir_mode):
    """Not mkstemp's 0600 / mkdtemp's 0700: colleagues read results on a shared machine."""
    old = os.umask(umask)
    try:
        assert umask_mode() == file_mode and umask_mode(directory=True) == dir_mode
        write_json_atomic(tmp_path / "a.json", {"x": 1})
        write_text_atomic(tmp_path / "a.json", "again\n")  # replacing keeps the umask's mode too
        staged = Path(tempfile.mkdtemp(dir=tmp_path))
        fd, _ = tempfile.mkstemp(dir=staged)  # 0600, as safetensors writes its weights
        os.close(fd)
        replace_dir_atomic(staged, tmp_path / "ckpt")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == file_mode
    assert stat.S_IMODE((tmp_path / "ckpt").stat().st_mode) == dir_mode
    assert [stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "ckpt").iterdir()] == [file_mode]
