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


@dataclass(frozen=True)
class Completion:
    text: str
    token_ids: tuple[int, ...]
    finish_reason: str  # "stop" (eos) or "length"
    latency_s: float


class Backend(Protocol):
    def generate(self, prompts: list[str], params: SamplingParams) -> list[list[Completion]]: ...


class BackendUnavailable(RuntimeError):
    """An optional backend (vLLM) is not installed here; the message says what to install."""
