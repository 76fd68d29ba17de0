"""The one ``\\boxed{}`` / ``\\fbox{}`` parser (balanced braces, linear time), for golds and predictions."""

from __future__ import annotations

import re

_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])")
_ECHO_BOXES = {"", "answer", "your answer", "final answer", "your final answer", "the answer", "...", "\\ldots",
               "\\dots", "ans", "\\text{answer}", "\\text{your answer}", "\\text{final answer}"}

def _close_map(text: str) -> dict[int, int]:
    """Index of each unescaped ``{`` -> index of its ``}`` (one pass with a stack: linear)."""
    stack: list[int] = []
    out: dict[int, int] = {}
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":  # an escaped brace or ``\\\\`` (a line break)
            i += 2
            continue
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            out[stack.pop()] = i
        i += 1
    return out


def match_brace(text: str, open_idx: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``open_idx`` (escaped braces skipped), or -1: the same pairing
    as :func:`_close_map`, whose stack pairs a brace independently of what stands before it."""
    close = _close_map(text[open_idx:]).get(0)
    return -1 if close is None else open_idx + close


def boxed_spans(text: str) -> list[tuple[int, int, str]]:
    """All ``\\boxed``/``\\fbox`` contents as (start, end, content); ``\\boxed 7`` too."""
    spans = []
    closes: dict[int, int] | None = None
    for m in _BOX_RE.finditer(text):
        j = m.end()
        while j < len(text) and text[j] == " ":
            j += 1
        if j < len(text) and text[j] == "{":
            if closes is None:
                closes = _close_map(text)
            k = closes.get(j, -1)
            if k >= 0:
                spans.append((m.start(), k + 1, text[j + 1 : k]))
        elif j > m.end():  # "\boxed 7"
            tok = re.match(r"[^\s$]+", text[j : j + 200])
            if tok:
                spans.append((m.start(), j + tok.end(), tok.group(0)))
    return spans


def last_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` / ``\fbox{...}`` in ``text`` (balanced braces), or None."""
    spans = boxed_spans(text)
    return spans[-1][2] if spans else None


def is_echo(content: str) -> bool:
    """An empty box, or one that parrots the instruction ("within \\boxed{answer}")."""
    return " ".join(content.split()).lower().strip("$ ") in _ECHO_BOXES
