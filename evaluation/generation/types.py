"""The backend-neutral types of generation; free of torch so that callers can build requests cheaply."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class SamplingParams:
    n: int
    temperature: float
    top_p: float
    max_new_tokens: int
    seed: int
    stop: tuple[str, ...] = ()
    """Stop strings (the template's, ``evaluation.templates.stop_strings``): a sample ends before the first."""


@dataclass(frozen=True)
class Completion:
    text: str
    token_ids: tuple[int, ...]
    finish_reason: str  # "stop" (eos or a stop string), "length" (max_new_tokens), "error" (not generated)
    latency_s: float
    error: str = ""
    """Why the engine could not generate it (``finish_reason`` "error"; ``evaluation.driver.generate_guarded``)."""


def cut_at_stop(text: str, stop: tuple[str, ...]) -> tuple[str, str | None]:
    """(``text`` up to the earliest stop string, that string or None). Both backends return this text."""
    hits = [(text.find(s), s) for s in stop if s and s in text]
    if not hits:
        return text, None
    at, which = min(hits)
    return text[:at], which


def engine_record(engine: str, version: str, dtype: str, tensor_parallel_size: int, batch_size: int | None) -> dict:
    """A generation engine's identity in every results record (scores move with engine, version, dtype and
    tensor-parallel size alone); the report refuses to compare rows whose identities differ."""
    return {"engine": engine, "version": version, "dtype": dtype, "tensor_parallel_size": tensor_parallel_size,
            "batch_size": batch_size}


class Backend(Protocol):
    def generate(self, prompts: list[str], params: SamplingParams, offset: int = 0,
                 seeds: list[int] | None = None) -> list[list[Completion]]: ...

    def identity(self) -> dict: ...


class BackendUnavailable(RuntimeError):
    """An optional backend (vLLM) is not installed here; the message says what to install."""
