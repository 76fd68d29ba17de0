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
from evaluation.benchmarks import BENCHMARKS, SUITES, did_you_mean


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


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "merges.txt", "vocab.txt",
                   "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "chat_template.jinja",
                   "chat_template.json")
"""What the tokenizer (and its chat template) is built from; the first five hold a vocabulary."""
VOLATILE_KEYS = frozenset({"transformers_version", "_name_or_path", "name_or_path", "_commit_hash"})
"""JSON keys that record how a file was written, not what the model does."""


def _canonical_json(path: Path) -> str:
    """A JSON file without its volatile keys, keys sorted: what it decides, not how it was written."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UsageError(f"--model {path}: not valid JSON ({err}); restore the file from the model's source") from None
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in VOLATILE_KEYS}
    return json.dumps(data, sort_keys=True)


def weight_files(folder: Path) -> list[Path]:
    """The files ``from_pretrained`` loads: an index's shards, else ``model.safetensors`` /
    ``pytorch_model.bin``, else every ``*.safetensors`` (never optimizer or trainer state)."""
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (folder / index).is_file():
            shards = json.loads((folder / index).read_text()).get("weight_map", {}).values()
            return [folder / name for name in sorted(set(shards))]
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (folder / name).is_file():
            return [folder / name]
    return sorted(folder.glob("*.safetensors"))


def _safetensors_digest(path: Path) -> list[str]:
    """``name dtype shape sha256`` of every tensor of a safetensors file (its ``__metadata__`` left out)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        try:
            if not 0 < n <= size - 8:
                raise ValueError("header length out of range")
            header = json.loads(f.read(n))
            out = []
            for name in sorted(k for k in header if k != "__metadata__"):
                info = header[name]
                start, end = info["data_offsets"]
                if not 0 <= start <= end <= size - 8 - n:
                    raise ValueError(f"tensor {name} lies beyond the end of the file")
                f.seek(8 + n + start)
                out.append(f"{name} {info['dtype']} {info['shape']} {hashlib.sha256(f.read(end - start)).hexdigest()}")
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
            raise UsageError(f"--model {path}: corrupt safetensors file ({err}); re-download or re-convert the "
                             "model") from None
    return out


def _torch_digest(path: Path) -> list[str]:
    """The same for a ``pytorch_model.bin`` (loaded with ``weights_only``)."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 (any unpickling failure is a corrupt file)
        raise UsageError(f"--model {path}: corrupt weights file ({type(err).__name__}); re-download or "
                         "re-convert the model") from None
    return [f"{name} {t.dtype} {list(t.shape)} "
            f"{hashlib.sha256(t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()).hexdigest()}"
            for name, t in sorted(state.items()) if isinstance(t, torch.Tensor)]


def model_identity(folder: Path) -> dict[str, str]:
    """The model's identity: sha256 of what decides its outputs, each part apart: the weights' tensors
    (names, dtypes, shapes, bytes; not the files' metadata), the tokenizer files, ``config.json`` and
    ``generation_config.json`` (without volatile keys such as ``transformers_version``). Other files
    (optimizer state, a converter's notes, READMEs) do not enter, so a re-converted or re-saved model keeps
    its identity and its cached samples. ``sha256`` combines the parts."""
    files = weight_files(folder)
    if not files:
        raise UsageError(f"--model {folder}: no weights (*.safetensors, *.bin) in this folder")
    weights = [line for f in files for line in
               (_safetensors_digest(f) if f.suffix == ".safetensors" else _torch_digest(f))]
    if not weights:
        raise UsageError(f"--model {files[0]}: holds no tensors; re-download or re-convert the model")
    tokenizer = [f"{name} {_canonical_json(folder / name) if name.endswith('.json') else sha256_file(folder / name)}"
                 for name in TOKENIZER_FILES if (folder / name).is_file()]
    parts = {"weights": "\n".join(weights), "tokenizer": "\n".join(tokenizer),
             "config": _canonical_json(folder / "config.json"),
             "generation_config": _canonical_json(folder / "generation_config.json")
             if (folder / "generation_config.json").is_file() else ""}
    out = {name: hashlib.sha256(text.encode()).hexdigest() for name, text in parts.items()}
    return {"sha256": hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest(), **out}


def model_sha256(folder: Path) -> str:
    """The identity's combined sha256 (:func:`model_identity`)."""
    return model_identity(folder)["sha256"]


def context_length(folder: Path) -> int | None:
    """Positions the model can attend over (``config.json``'s ``max_position_embeddings`` or its aliases)."""
    cfg = json.loads((folder / "config.json").read_text())
    cfg = {**cfg.get("text_config", {}), **cfg}
    for key in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"):
        if isinstance(cfg.get(key), int) and cfg[key] > 0:
            return cfg[key]
    return None


def has_chat_template(folder: Path) -> bool:
    if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
        return True
    config = folder / "tokenizer_config.json"
    return config.is_file() and bool(json.loads(config.read_text()).get("chat_template"))


def check_model_files(folder: Path, value: str, templates: dict[str, str]) -> None:
    """Before the model loads: a tokenizer to build (transformers builds an empty one from a folder without
    vocabulary files, which fails deep in generation) and a chat template for every chat-template set."""
    vocab = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt")
    if not any((folder / name).is_file() for name in vocab):
        raise UsageError(f"--model {value}: no tokenizer files ({', '.join(vocab)}) in this folder; copy the "
                         "tokenizer of the model it was trained from into it (tokenizer.save_pretrained(DIR))")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if (folder / name).is_file():
            _canonical_json(folder / name)  # corrupt JSON: one line naming the file
    chat = sorted(s for s, t in templates.items() if t.startswith("chat_"))
    if chat and not has_chat_template(folder):
        template = templates[chat[0]]
        raise UsageError(f"--template {template} ({', '.join(chat)}): --model {value} has no chat template (a "
                         f"base model: no chat_template.jinja, none in tokenizer_config.json); pass --template "
                         f"{template.replace('chat_', 'base_')} or a chat model")


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
        raise UsageError(f"--out {out}: holds the results of {what}; pass another --out (generations still valid "
                         "come from the cache) or remove that folder")
    if out.is_dir() and any(out.iterdir()):
        raise UsageError(f"--out {out}: not empty and holds no creditbench eval run (no run.json); pass a new "
                         "or empty folder")


def check_args(args: argparse.Namespace) -> None:
    """The arguments alone (no files read): sets, limit, backend, device; the sampling knobs are checked by
    :meth:`evaluation.driver.Sampling.check`."""
    if not args.sets:
        raise UsageError("--sets is empty; pass a comma list of sets (creditbench benchmarks list)")
    evaluable = [n for n, b in BENCHMARKS.items() if not b.generated]
    unknown = [s for s in args.sets if s not in evaluable]
    if unknown:
        hint = "".join(did_you_mean(s, [*evaluable, *SUITES]) for s in unknown[:1])
        raise UsageError(f"--sets: unknown sets {unknown}{hint}; see `creditbench benchmarks list` (suites: "
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
