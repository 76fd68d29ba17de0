"""Run manifests: what produced a result (git commit, package versions, hardware, config hash, data sha256)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import subprocess
from pathlib import Path
from typing import Any, Mapping

from common.config import REPO_ROOT, Config
from common.io import sha256_file, write_json_atomic

PACKAGES = ("torch", "transformers", "tokenizers", "snakemake", "math-verify", "sympy", "numpy", "pandas",
            "trl", "vllm", "evalplus", "lm_eval", "creditbench")


def git_state(root: Path = REPO_ROOT) -> tuple[str, bool]:
    """(commit, dirty); ("unknown", True) outside a git checkout."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, check=True).stdout
        return commit, bool(status.strip())
    except (OSError, subprocess.CalledProcessError):
        return "unknown", True


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def _torch():
    """torch if this process already uses it (manifests of torch-free jobs stay torch-free)."""
    import sys

    return sys.modules.get("torch")


def hardware() -> dict[str, Any]:
    info: dict[str, Any] = {"machine": platform.machine(), "processor": platform.processor(),
                            "python": platform.python_version(), "system": platform.system()}
    try:
        with open("/proc/cpuinfo") as f:
            models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        info["cpu"], info["cpu_count"] = (models[0] if models else "unknown"), len(models)
    except OSError:
        pass
    torch = _torch()
    if torch is not None and torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


def build_manifest(cfg: Config, *, seeds: Mapping[str, int], data_files: Mapping[str, str],
                   extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    commit, dirty = git_state()
    body = {
        "experiment": cfg.experiment,
        "git_commit": commit,
        "git_dirty": dirty,
        "packages": package_versions(),
        "torch_threads": torch.get_num_threads() if (torch := _torch()) is not None else None,
        "hardware": hardware(),
        "config_hash": cfg.config_hash,
        "data_sha256": {k: sha256_file(v) for k, v in sorted(data_files.items())},
        "seeds": dict(seeds),
        **(extra or {}),
    }
    # The id names the inputs (code, config, data, seeds), not the timing, so reruns share it.
    ident = {k: body[k] for k in ("git_commit", "config_hash", "data_sha256", "seeds")}
    body["manifest_id"] = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
    return body


def write_manifest(path: str | Path, cfg: Config, **kwargs) -> dict[str, Any]:
    manifest = build_manifest(cfg, **kwargs)
    write_json_atomic(path, manifest)
    return manifest
