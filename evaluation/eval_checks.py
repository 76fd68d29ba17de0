"""``creditbench eval``'s checks before any work: each argument, the model folder, the output folder and
the run identity; a user error is a :class:`UsageError` whose one-line message names the argument and
what to do (``evaluation.harness`` prints it and exits 2)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from common.io import sha256_file
from evaluation.benchmarks import BENCHMARKS, SUITES


class UsageError(ValueError):
    """A user error found before any work: one line naming the argument and what to do (exit code 2)."""


HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def resolve_model(value: str) -> Path:
    """The model folder ``--model`` names: a local HF folder, or a hub id already in the local HF cache
    (never a download: an unreachable hub would cost a minute of retries before failing)."""
    if not value.strip():
        raise UsageError("--model is empty; pass a HF model folder (config.json + weights)")
    path = Path(value).expanduser()
    if not path.exists() and HUB_ID.match(value) and not value.startswith("."):
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            path = Path(snapshot_download(value, local_files_only=True))
        except (LocalEntryNotFoundError, OSError, ValueError):
            raise UsageError(f"--model {value}: no such folder, and no hub model of that id in the local HF "
                             f"cache; download it first (`hf download {value}`) or pass its folder") from None
    if not path.exists():
        raise UsageError(f"--model {value}: no such folder; pass a HF model folder (config.json + weights)")
    if not path.is_dir():
        raise UsageError(f"--model {value}: is a file, not a model folder; pass the folder holding config.json "
                         "(a GGUF file: python -m evaluation.gguf_convert --out DIR)")
    if not (path / "config.json").is_file():
        raise UsageError(f"--model {value}: no config.json in this folder, so not a HF model folder")
    if not any(f.name.endswith(WEIGHT_SUFFIXES) for f in path.iterdir()):
        raise UsageError(f"--model {value}: no weights (*.safetensors, *.bin) in this folder")
    return path.resolve()


def model_sha256(folder: Path) -> str:
    """Content hash of a model folder: sha256 over the sorted (relative path, file sha256) of its files."""
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        h.update(f"{f.relative_to(folder).as_posix()}\0{sha256_file(f)}\n".encode())
    return h.hexdigest()


def check_out(out: Path) -> None:
    """``--out`` must be a folder (or not yet exist) under a writable parent; probed without leaving a file."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file; pass a folder (created if missing)")
    parent = out
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"--out {out}: {parent} is a file, so the folder cannot be created; pass another --out")
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".creditbench-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise UsageError(f"--out {out}: {parent} is not writable ({err.strerror}); pass a writable folder") from None


def check_identity(out: Path, identity: dict[str, Any]) -> None:
    """Refuse an ``--out`` that holds another model's or another configuration's run."""
    run_file = out / "run.json"
    if run_file.is_file():
        try:
            old = json.loads(run_file.read_text())
        except (OSError, json.JSONDecodeError):
            old = {}
        if old.get("run_key") == identity["run_key"]:
            return
        if old.get("model", {}).get("sha256") != identity["model"]["sha256"]:
            what = f"another model ({old.get('model', {}).get('resolved')}, sha256 " \
                   f"{str(old.get('model', {}).get('sha256'))[:12]})"
        else:
            changed = sorted(k for k in {**identity["config"], **old.get("config", {})}
                             if identity["config"].get(k) != old.get("config", {}).get(k))
            what = f"another configuration (differs in {', '.join(changed) or 'data'})"
        raise UsageError(f"--out {out}: holds the results of {what}; pass another --out (or remove that folder)")
    if out.is_dir() and any(out.iterdir()):
        raise UsageError(f"--out {out}: not empty and holds no creditbench eval run (no run.json); pass a new "
                         "or empty folder")


def check_args(args: argparse.Namespace) -> None:
    """The arguments alone (no files read): sets, limit, backend, device; the sampling knobs are checked by
    :meth:`evaluation.driver.Sampling.check`."""
    if not args.sets:
        raise UsageError("--sets is empty; pass a comma list of sets (creditbench benchmarks list)")
    unknown = [s for s in args.sets if s not in BENCHMARKS or BENCHMARKS[s].generated]
    if unknown:
        raise UsageError(f"--sets: unknown sets {unknown}; see `creditbench benchmarks list` (suites: "
                         f"{', '.join(SUITES)})")
    if len(set(args.sets)) != len(args.sets):
        raise UsageError(f"--sets: {args.sets} names a set twice; name each once")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit {args.limit}: must be at least 1")
    if args.backend == "vllm":
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            raise UsageError("--backend vllm: vLLM is not installed; pip install -e '.[gpu]' or --backend hf")
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise UsageError(f"--device {args.device}: no CUDA device here; pass --device cpu")
