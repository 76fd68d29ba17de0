"""The vLLM backend imports without vLLM, fails clearly without it, and maps outputs like the HF backend."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace

import pytest

from evaluation.generation import BackendUnavailable, Completion, SamplingParams
from evaluation.generation.vllm import INSTALL_HINT, VLLMBackend, request_params, to_completions

HAS_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_constructing_without_vllm_raises_clear_error(tmp_path) -> None:
    with pytest.raises(BackendUnavailable, match="vLLM is not installed") as exc:
        VLLMBackend(str(tmp_path), seed=0)
    assert "pip install" in str(exc.value) and str(exc.value) == INSTALL_HINT


@dataclass
class _FakeSP:
    n: int
    temperature: float
    top_p: float
    top_k: int
    max_tokens: int
    seed: int
    stop: list[str]


@dataclass
class _Out:
    text: str
    token_ids: list[int]
    finish_reason: str | None


@dataclass
class _Req:
    outputs: list[_Out]


def test_request_params_per_prompt_seed() -> None:
    p = SamplingParams(n=4, temperature=0.7, top_p=0.9, max_new_tokens=16, seed=3)
    sp = request_params(p, 3, _FakeSP)
    assert [s.seed for s in sp] == [3 * 1_000_003 + i for i in range(3)]
    assert all(s.n == 4 and s.max_tokens == 16 and s.top_p == 0.9 and s.top_k == -1 for s in sp)
    greedy = request_params(SamplingParams(1, 0.0, 0.5, 8, 0), 1, _FakeSP)[0]
    assert greedy.temperature == 0.0 and greedy.top_p == 1.0
    assert sp[0].stop == [] and request_params(replace(p, stop=("\nProblem:",)), 1, _FakeSP)[0].stop == ["\nProblem:"]


def test_to_completions() -> None:
    out = to_completions([_Req([_Out("a", [1, 2], "stop"), _Out("b", [3], None)])], 0.5)
    assert out == [[Completion("a", (1, 2), "stop", 0.5), Completion("b", (3,), "length", 0.5)]]
