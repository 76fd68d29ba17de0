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
    finish_reason: str  # "stop" (eos) or "length"
    latency_s: float


def cut_at_stop(text: str, stop: tuple[str, ...]) -> tuple[str, str | None]:
    """(``text`` up to the earliest stop string, that string or None). Both backends return this text."""
    hits = [(text.find(s), s) for s in stop if s and s in text]
    if not hits:
        return text, None
    at, which = min(hits)
    return text[:at], which


class Backend(Protocol):
    def generate(self, prompts: list[str], params: SamplingParams, offset: int = 0,
                 seeds: list[int] | None = None) -> list[list[Completion]]: ...


class BackendUnavailable(RuntimeError):
    """An optional backend (vLLM) is not installed here; the message says what to install."""
