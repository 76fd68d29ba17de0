"""EvalPlus's expected outputs, computed only from canonical solutions and cached with verified checksums.

EvalPlus computes its ground truth (``evalplus.evaluate.get_groundtruth``: the canonical solution run on
every input, with reference times) in the process that then runs model code, and trusts a pickle in its
cache dir. Here it is computed by ``get_groundtruth`` itself in a subprocess of the scorer that runs no
model-written code, and stored per task in ``<cache_dir>/<benchmark>/``: ``<task>-<row hash>.pkl``
(0600, in a 0700 dir; the row hash ties it to the exact task text and inputs) with a ``.sha256`` sidecar
written after it. Every load verifies the checksum; a missing or mismatching file is recomputed. The
sandbox never sees these files (:mod:`evaluation.code.sandbox` builds its root without the cache or the
dataset), so model code can neither read nor poison them.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from common.io import write_bytes_atomic
from evaluation.benchmarks import REPO_ROOT


def problems_for(dataset: str, rows: Mapping[str, dict], task_ids: Iterable[str]) -> dict[str, dict]:
    """EvalPlus's problem dicts for ``task_ids``; MBPP inputs deserialised as ``get_mbpp_plus`` does."""
    out = {}
    for t in task_ids:
        p = json.loads(json.dumps(rows[t]))  # a private copy
        if dataset == "mbpp":
            from evalplus.data.mbpp import mbpp_deserialize_inputs

            p["base_input"] = mbpp_deserialize_inputs(t, p["base_input"])
            p["plus_input"] = mbpp_deserialize_inputs(t, p["plus_input"])
        out[t] = p
    return out


def _paths(cache: Path, task_id: str, row: dict) -> tuple[Path, Path]:
    key = hashlib.sha256(json.dumps(row, sort_keys=True).encode()).hexdigest()[:24]
    data = cache / f"{task_id.replace('/', '_')}-{key}.pkl"
    return data, data.with_name(data.name + ".sha256")


def _load_verified(data: Path, sidecar: Path) -> dict | None:
    try:
        raw, want = data.read_bytes(), sidecar.read_text().strip()
    except OSError:
        return None
    if hashlib.sha256(raw).hexdigest() != want:
        return None
    return pickle.loads(raw)  # trusted: written by us (checksum above), unreachable from the sandbox


def expected_outputs(dataset: str, rows: Mapping[str, dict], problems: Mapping[str, dict],
                     cache_dir: Path, *, timeout_s: float = 7200.0) -> dict[str, dict]:
    """``{task_id: {"base", "base_time", "plus", "plus_time"}}`` for ``problems`` (from :func:`problems_for`)."""
    cache = (Path(cache_dir) / dataset).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    os.chmod(cache, 0o700)
    out: dict[str, dict] = {}
    for t in problems:
        got = _load_verified(*_paths(cache, t, rows[t]))
        if got is not None:
            out[t] = got
    missing = {t: p for t, p in problems.items() if t not in out}
    if missing:
        computed = _compute(dataset, missing, cache, timeout_s)
        for t, oracle in computed.items():
            data, sidecar = _paths(cache, t, rows[t])
            raw = pickle.dumps(oracle, protocol=pickle.HIGHEST_PROTOCOL)
            write_bytes_atomic(data, raw, mode=0o600)  # ground truth: private, whatever the umask
            write_bytes_atomic(sidecar, (hashlib.sha256(raw).hexdigest() + "\n").encode(), mode=0o600)
            out[t] = oracle
    return out


def _compute(dataset: str, problems: Mapping[str, dict], cache: Path, timeout_s: float) -> dict[str, dict]:
    """Run ``get_groundtruth`` on canonical solutions in a fresh subprocess with a private cache dir."""
    with tempfile.TemporaryDirectory(dir=cache, prefix="compute-") as tmp:
        src = Path(tmp) / "problems.pkl"
        src.write_bytes(pickle.dumps(dict(problems)))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "XDG_CACHE_HOME": tmp, "HOME": tmp,
               "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"}
        proc = subprocess.run([sys.executable, "-m", "evaluation.code.truth", dataset, str(src)], cwd=tmp,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout_s,
                              check=False)
        result = Path(tmp) / "evalplus" / "truth.pkl"
        if proc.returncode != 0 or not result.is_file():
            raise RuntimeError(f"computing expected outputs failed: {proc.stderr.decode(errors='replace')[-2000:]}")
        return pickle.loads(result.read_bytes())


def _main(argv: list[str]) -> int:
    dataset, src = argv
    from evalplus.eval._special_oracle import MBPP_OUTPUT_NOT_NONE_TASKS
    from evalplus.evaluate import get_groundtruth

    problems = pickle.loads(Path(src).read_bytes())
    get_groundtruth(problems, "truth", MBPP_OUTPUT_NOT_NONE_TASKS if dataset == "mbpp" else [])
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
