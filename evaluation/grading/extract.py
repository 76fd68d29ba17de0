"""Extraction: the answer string in a model response, and the one ``\\boxed{}`` parser for golds and predictions."""

from __future__ import annotations

import re
from functools import lru_cache

_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])")
_ANSWER_PHRASE_RE = re.compile(r"(?i)\b(?:final\s+answer|answer)\s*(?:is\s*:?|:)\s*")
_GSM_RE = re.compile(r"####\s*([^\n]*)")
_BOX_JOIN_GAP_RE = re.compile(r"^[\s$,;]*(?:and|or|&|\\quad|\\qquad|\\text\{\s*(?:and|or)\s*\})?[\s$,;]*$")


def _match_brace(text: str, open_idx: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``open_idx`` (escaped braces skipped), or -1."""
    depth = 0
    i = open_idx
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "{}":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _boxed_spans(text: str) -> list[tuple[int, int, str]]:
    """All ``\\boxed``/``\\fbox`` contents as (start, end, content)."""
    spans = []
    for m in _BOX_RE.finditer(text):
        j = m.end()
        while j < len(text) and text[j] == " ":
            j += 1
        if j < len(text) and text[j] == "{":
            k = _match_brace(text, j)
            if k < 0:
                continue
            spans.append((m.start(), k + 1, text[j + 1 : k]))
        elif j > m.end():  # "\boxed 7"
            tok = re.match(r"[^\s$]+", text[j:])
            if tok:
                spans.append((m.start(), j + tok.end(), tok.group(0)))
    return spans


def _phrase_tail(tail: str) -> str | None:
    """The answer in the text following an "answer is" phrase."""
    t = tail.strip().replace("**", "").strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if t.startswith(left):
            end = t.find(right, len(left))
            while end > 0 and left == "$" and t[end - 1] == "\\":  # skip an escaped \$
                end = t.find(right, end + 1)
            if end > len(left):
                return t[len(left) : end].strip()
    t = t.split("\n", 1)[0]
    t = re.split(r"\.\s|\.$|(?i:\bI hope\b)", t, maxsplit=1)[0]
    t = t.strip().rstrip(".,;:").strip()
    return t or None


def _strip_think(response: str) -> str | None:
    """Text after the last ``</think>``; None when reasoning was opened and never closed."""
    if "</think>" in response:
        return response.rsplit("</think>", 1)[1]
    if "<think>" in response:
        return None
    return response


def extract_answer(response: str, dataset: str | None = None) -> str | None:
    """The answer string in a model response, or None when there is none (see module docstring)."""
    text = _strip_think(response or "")
    if text is None:
        return None
    gsm = _GSM_RE.findall(text)
    if dataset == "gsm8k" and gsm and gsm[-1].strip():
        return gsm[-1].strip()
    spans = _boxed_spans(text)
    if spans:
        parts = [spans[-1]]
        for prev in reversed(spans[:-1]):
            if prev[1] <= parts[0][0] and _BOX_JOIN_GAP_RE.match(text[prev[1] : parts[0][0]]):
                parts.insert(0, prev)
            else:
                break
        ans = ", ".join(p[2].strip() for p in parts).strip()
        return ans or None
    phrases = list(_ANSWER_PHRASE_RE.finditer(text.replace("**", "")))
    if phrases:
        plain = text.replace("**", "")
        ans = _phrase_tail(plain[phrases[-1].end() :])
        if ans:
            return ans
    if gsm and gsm[-1].strip():
        return gsm[-1].strip()
    return None



def last_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` / ``\fbox{...}`` in ``text`` (balanced braces), or None."""
    spans = _boxed_spans(text)
    return spans[-1][2] if spans else None


@lru_cache(maxsize=16384)
def _prepare_gold(gold: str, dataset: str | None) -> str:
    """The gold answer string as compared (``####`` part, ``\\boxed`` content)."""
    g = gold.strip()
    if "####" in g:
        g = g.rsplit("####", 1)[1].strip()
    elif "\\boxed" in g or "\\fbox" in g:
        spans = _boxed_spans(g)
        if spans:
            g = spans[-1][2].strip()
    return g
