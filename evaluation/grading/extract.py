"""Extraction: the answer string in a model response, and the one ``\\boxed{}`` parser for golds and predictions.

Every step is linear in the length of the text, and only the last :data:`MAX_RESPONSE` characters of the
final turn are searched (answers close a response), so a response of any length is cheap.
"""

from __future__ import annotations

import re
from functools import lru_cache

from evaluation.grading.boxes import boxed_spans, is_echo
from evaluation.grading.prose import (
    DOUBT_RE,
    EMOTICON_RE,
    PRAISE_OR_REMARK,
    applied_at_number,
    cjk_spaced,
    combined_value,
    condition_cut,
    continental,
    money_signs_dropped,
    plain_index,
    praise_cut,
    retracted,
    span_stated,
    value_stated,
)
from evaluation.grading.words import count_in_words, foreign_count, last_count_in_words

MAX_RESPONSE = 20_000
"""Characters searched, counted back from the end of the final turn."""

_ANSWER_PHRASE_RE = re.compile(r"(?i)\b(final\s+answer|answer)\s*(?:is\s*:?|:|[—–](?=\s*[\d$\\-]))\s*")
_GSM_RE = re.compile(r"####\s*([^\n]*)")
_BOX_JOIN_GAP_RE = re.compile(r"^[\s$,;]*(?:and|or|&|\\quad|\\qquad|\\text\{\s*(?:and|or)\s*\})?[\s$,;]*$")
_SAME_LINE_GAP_RE = re.compile(r"^[^\n.!?:]{0,40}$")
_GAP_SEP_RE = re.compile(r",|;|&|\band\b|\bor\b|\\quad")
# a chat-template turn the model went on to write after its answer (cut before searching)
_TURN_RE = re.compile(
    r"<\|(?:im_start|im_end|endoftext|eot_id|start_header_id|end_of_text|user|assistant|system)\|>"
    r"|<(?:end|start)_of_turn>|</s>|\n(?:Human|User|USER|Assistant|ASSISTANT|Question|Problem)\s*:"
    r"|\n[ \t]*(?:user|human)[ \t]*\n|\[INST\]|\n#{1,4}[ \t]*(?:Instruction|Input|Human|User)(?:[ \t]*:|[ \t]*\n)"
    r"|\n(?:Next|New|Another)\s+(?:question|problem)\s*:"
)  # the last line: a template's role line whose special tokens were decoded away, Llama-2 and Alpaca turns
_NUM = (r"-?\\?\$?\s?(?:(?:\d+\s+)?\d+\s?/\s?\d+(?![\d/]|[.,]\d)"  # 3/7, a mixed 4 1/2
        r"|\d{1,3}(?:[.\s]\d{3})+,\d+(?![\d,])"  # 1.234,5 / 1 234,5: grouped thousands, decimal comma
        r"|(?:\d+,(?:\d{1,2}|\d{4,})|0,\d{3})(?![\d,)\]])"  # decimal comma 3,75 0,35625 (1,250: thousands)
        r"(?:\s*(?:\\times|\\cdot|×)\s*10\^\{?[+-]?\d+\}?)?(?:\s?\\?%)?"  # 1,2 \cdot 10^{3}
        r"|(?:\d{1,3}(?:(?:,|\{,\}|['’]|\s|\\[,;: ]|~)\d{3})+|\d+)(?:\.\d+)?(?:\s*(?:[eE][+-]?\d+"
        r"|(?:\\times|\\cdot|x|×|\*)\s*10\^\{?[+-]?\d+\}?))?(?:\s?\\?%)?(?:!(?=\.))?)|-?\.\d+(?:\s?\\?%)?")
_NUM_RE = re.compile(rf"(?<![\w.])(?<![a-zA-Z]\^)(?<![a-zA-Z]\^\{{){_NUM}(?![\w]|\\[a-zA-Z])")  # 12\pi is no number
_MATH_SPAN_RE = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\$(.+?)(?<!\\)\$|\\\((.+?)\\\)", re.S)
_CLOSING_VERB_RE = re.compile(
    rf"(?i)(?:\bis|\bare|\bwas|\bwere|=|\bequals?|\bbe|\bmakes?|\bgets?|\bcosts?|\bhas|\bhave|\bneeds?|\bpays?"
    rf"|\bspends?|\bearns?|\bsaves?|\btotal(?:s|\s+of)?|\bleft\s+with|\bof|,\s*so)\s+(?:about\s+|approximately\s+)?({_NUM})"
    r"(?:\s+[a-zA-Z][a-zA-Z'\-]*(?:\^\{?[23]\}?)?(?:\s+of\s+\d+(?=\s*[.!]?\s*$))?){0,8}\s*[.!]?\s*$"  # 36 cm^2
)  # "There are 33 multiples of 3.": after the value's noun, "of N" qualifies it
# "..., so Robert went down the slide 84 times.": the clause after the last "so" holds one value, then words
# (a number after "in"/"over"/"after"/... qualifies it: "So over 8 weeks it collects 10 000 eggs.")
_CLOSING_SO_RE = re.compile(
    rf"(?i)(?:^|,|;)\s*(?:so|therefore|thus|hence)\b,?\s+"
    rf"(?:(?:in|over|after|for|within|during|every|each|at)\s+\d+(?:[.,]\d+)?\s+|[a-zA-Z'\-]+,?\s+){{0,12}}?"
    rf"(?<![\w.])({_NUM})"
    r"(?:\s+[a-zA-Z][a-zA-Z'\-]*){0,8}\s*[.!]?\s*$"
)
# an unboxed closing value in bare LaTeX, no dollars ("Hence the angle is \frac{\pi}{6}."): atoms are commands,
# brace groups (nested to depth 3), numbers and operators, so the run stops at the first English word
_BAL = r"\{(?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*\}"
_TEX_ATOM = (rf"(?:\\[a-zA-Z]+\*?(?![a-zA-Z])(?:\[\d{{1,3}}\])?|{_BAL}"  # \sqrt[3]{2}
             rf"|\d+(?:\.\d+)?(?!\.?\d)|(?<![a-zA-Z])[a-zA-Z](?![a-zA-Z'])"
             r"|[\^_+\-*/()|!']|\\[,;!])")
_TEX_EXPR = rf"[-+]?{_TEX_ATOM}(?:\s*{_TEX_ATOM})*"
_CLOSING_TEX_RE = re.compile(
    rf"(?i)(?:\bis|\bare|\bwas|\bwere|=|\bequals?|\bbe|\bto)\s+"
    rf"(?:(?:therefore|thus|hence|then|so|now|exactly|about|approximately|equal\s+to)\s+)*"
    rf"({_TEX_EXPR})(?:\s+[a-zA-Z][a-zA-Z'\-]*){{0,8}}\s*[.!]?\s*$"
)
_TEX_TAIL_RE = re.compile(rf"(?:^|\s)({_TEX_EXPR})\s*[.!]?\s*$")  # any language: "La réponse est donc \frac{5}{6}."
# LaTeX, not a number (3 x 10^8) or word; 4i, 2x, 4210_5 count
_TEX_CONSTRUCT_RE = re.compile(r"\\[a-zA-Z]|[\^_]\{|[a-zA-Z][\^_]|\d_|\d[a-z](?![a-zA-Z])")
# "$3$ or $4$" after an answer phrase: the second span joins the first
_JOINED_SPAN_RE = re.compile(r"\s*(?:,|\bor\b|\band\b|\bou\b|\bo\b|\boder\b)\s*\$([^$]+)\$")
# "42, since 6 times 7 is 42" / "42 balls, which is 6 more than 36": the clause after the value explains it
_REASON_CLAUSE_RE = re.compile(r"(?i),?\s+(?:since|because|given\s+that)\s+(?=[a-z\d])|\s*—\s*|\s+--\s+"
                               r"|(?i:,\s+(?:(?:attained|achieved|obtained|reached|when|where|that\s+is)\b|i\.e\.?))"
                               r"|\s+\((?!or\b)(?=[^()]*(?<![\\a-zA-Z])[a-zA-Z]{3})[^()]*\)(?=\s*[.!]?\s*$)")
# after an answer phrase a relative clause explains the value too: "the answer is 42, which is 6 times 7"
_PHRASE_CLAUSE_RE = re.compile(rf"{_REASON_CLAUSE_RE.pattern}|(?i:,\s+(?:which|not|rather\s+than)\s+)"
                               r"|(?i:,?\s+and\s+(?=(?:the|it|this|that|so|we|he|she|they|its|there)\s))")
# a closing line that asks the reader something states nothing ("Does that make sense?")
_ASK_BACK_RE = re.compile(r"(?i)^(?![^\n]*[.!]\s+[A-Z])(?=.*\?\s*$).*\b(?:you|me|make\s+sense|anything\s+else|clarif)\b"
                          r"|^(?:if\s+you\s+(?:want|like|wish|need|'d\s+like)|feel\s+free|I\s+can\s+also)\b")
# an interval, tuple, set or matrix closing a sentence without dollars: "Das Ergebnis ist (1, 2)."
_STRUCT_ONE = (r"\\begin\{[a-zA-Z]*matrix\}.*?\\end\{[a-zA-Z]*matrix\}|\\begin\{array\}.*?\\end\{array\}"
               rf"|\\\{{(?:[^{{}}\\]|\\[a-zA-Z]+(?![a-zA-Z])|\\[,;!]|{_BAL})*?\\\}}"
               rf"|(?:\\left\s*)?[\[(]\s*(?:[^\[\]()${{}}]|{_BAL})*,(?:[^\[\]()${{}}]|{_BAL})*[\])]")
_STRUCT = rf"(?:{_STRUCT_ONE})(?:\s*\\cup\s*(?:{_STRUCT_ONE}))*"
_CLOSING_STRUCT_RE = re.compile(rf"(?:^|[\s:])({_STRUCT})(?:\s+[a-zA-Z][a-zA-Z'\-]*){{0,6}}\s*[.!]?\s*$")
_STRUCT_LEAD_RE = re.compile(r"(?i)(?:\bis|\bare|=|\bequals?|:|\bist|\best|\bes|是)\s*$")
# a clause restating the value in words ("..., i.e. the price rose by 20%."), not a value in another unit
# ("30°, i.e. \frac{\pi}{6}", kept as the first)
_RESTATED_RE = re.compile(r"(?i),?\s+(?:i\.e\.|that\s+is),?\s+((?=(?:[^$\\]*?[a-z]{2,}\b){2})[^$\\]*?)\s*[.!]?\s*$")
_LIST_ITEM = rf"(?>(?:[a-zA-Z]\s*=\s*)?(?:{_NUM}))"  # atomic, separators possessive: linear on "1, 1, 1, ..."
_CLOSING_LIST_RE = re.compile(
    rf"(?i)(?:\bare|\bis|\bbe|=|:)\s++({_LIST_ITEM}(?:\s*+,\s*+{_LIST_ITEM})*+,?\s++(?:and|or)\s++{_LIST_ITEM})"
    r"\s*[.!]?\s*$")
_HEDGE_WORD_RE = re.compile(r"(?i)^(?:approximately|approx\.|about|around|roughly|exactly|precisely|probably|likely|"
                            r"most\s+likely|surely|certainly|definitely|clearly|≈|~)\s+")  # "probably 8": 8, committed
_HEDGE_RE = re.compile(r"(?i)\b(?:or|maybe|possibly|perhaps|not\s+sure|unsure)\b[^.]*?\d")
# a reply to a value questioned after an answer phrase, with no value of its own: "12? Yes, that checks out."
_CONFIRMED_RE = re.compile(r"(?i)(?:yes|yep|yeah|yup|correct|right|indeed|exactly|confirmed|that'?s\s+(?:right|correct)"
                           r")\b[^\d$\\?]*$")
_DENIED_RE = re.compile(r"(?i)(?:no|nope|wrong|not\s+quite)\b[^\d$\\?]*$")
_SPAN_JOIN_RE = re.compile(r"\s*(?:,|,?\s*\b(?:and|or)\b)\s*")
_CLOSING_CHOICE_RE = re.compile(r"\b(?i:is|option|choice)\s*:?\s*(\([A-E]\))\s*[.!]?\s*$"
                                r"|\b(?i:option|choice)\b(?:\s+(?i:is))?\s*:?\s*([A-E])\s*[.!]?\s*$|^\(?([A-E])\)?\.?$")
_ECHO_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*\{\s*(?:\\text\{)?\s*(?:your |the |final )*(?:answer)?\s*\}?\s*\}")
_PLEASANTRY_RE = re.compile(
    rf"(?i){PRAISE_OR_REMARK}"  # praise, numbers or not (read only when nothing before it states a value); a remark
    r"|^(?=[^\d$\\]{0,80}$).*\b(?:hope|helps?|thanks?|thank you|glad|let me know|good luck|enjoy|cheers)\b"
    r"|^\W*(?:the\s+)?(?:final\s+)?answer\s*(?:is)?\s*:?\W*$"  # an answer label left empty
    r"|^\W*(?:so,?\s+)?(?:this|that)\s+is\s+(?:the|our|my)\s+(?:final\s+)?answer\W*$"  # "This is the answer."
)
_WORD_TAIL_RE = re.compile(
    rf"^((?:{_NUM})(?:\s+\d+/\d+)?|\d+/\d+)\s+([a-zA-Z][a-zA-Z'\-]*(?:\s+[a-zA-Z][a-zA-Z'\-]*){{0,4}})\.?$"
)
_MATH_WORDS = {"pi", "sqrt", "root", "roots", "times", "over", "plus", "minus", "divided", "and", "or", "to", "i",
               "squared", "cubed", "thirds", "halves", "fourths", "fifths", "quarters", "sixths", "eighths"}


def _chain_value(expr: str) -> str:
    """``3858 - 2820 = 428`` -> ``428``: an arithmetic chain (a computation without letters left of its
    first ``=``, or a name then a letter-free computation, ``m+n = 256+37 = 293``; no relation or list)
    states its last value; labels, equations (``x = 5``, ``x=1, y=2``)
    and a value restated in another unit (``90^\\circ = \\frac{\\pi}{2}``) are kept."""
    parts = expr.split("=")
    letters = [bool(re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", p))) for p in parts]
    if len(parts) >= 3 and letters[0] and not any(letters[1:]):
        parts = parts[1:]  # m+n = 256+37 = 293: a named quantity, then its computation
    elif letters[0]:
        return expr
    if (len(parts) < 2 or re.search(r"[<>]|!=|,(?!\d{3})|\\[a-z]*(?:eq|le|ge|approx)", expr) or not parts[-1].strip()
            or not re.search(r"[+\-*/×÷]|\^\{?\d|\d!|\\(?:times|cdot|div|[dt]?frac|[dt]?binom|sqrt)", parts[0])):
        return expr
    return parts[-1].strip()


def _clause_cut(text: str, clause: re.Pattern[str]) -> str:
    """``text`` up to the clause explaining its value; kept whole when that clause offers another value ("3 —
    or maybe 4", "3 (possibly 4)"): a hedge is not cut down to its first value."""
    head = clause.split(text, maxsplit=1)[0]
    return text if len(head) < len(text) and _HEDGE_RE.search(text, len(head)) else head


def _phrase_tail(tail: str) -> str | None:
    """The answer in the text following an "answer is" phrase."""
    t = tail.strip().replace("**", "").strip()
    first, nl, rest = t.partition("\n")
    t = money_signs_dropped(first) + nl + rest
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if t.startswith(left):
            end = t.find(right, len(left))
            while end > 0 and left == "$" and t[end - 1] == "\\":  # skip an escaped \$
                end = t.find(right, end + 1)
            if end > len(left):
                more = _JOINED_SPAN_RE.match(t, end + len(right)) if left == "$" else None
                if more:  # "$3$ or $4$": a list (a hedge is never one value)
                    return f"{_chain_value(t[len(left) : end].strip())}, {more.group(1).strip()}"
                return _chain_value(t[len(left) : end].strip())
    t = t.split("\n", 1)[0]
    asked = re.match(r"[^?\d]*\d[^?]*\?\s+(?=\S)", t)  # "3.5 dollars? No units; it's $\frac{7}{2}$.": a value
    if asked and (later := _closing_statement(t[asked.end() :])):  # questioned, then stated again: the later one
        return later
    if asked and _CONFIRMED_RE.match(t, asked.end()):  # "12? Yes.": the questioned value, confirmed
        t = t[: asked.end()].rstrip()[:-1]
    elif asked and _DENIED_RE.match(t, asked.end()):  # "12? No.": retracted, and nothing stated in its place
        return None
    t = re.split(r"(?<!\.)\.(?!\.)\s|(?<!\.)\.$|(?i:\bI hope\b)", t, maxsplit=1)[0]
    t = _clause_cut(t, _PHRASE_CLAUSE_RE)
    t = _HEDGE_WORD_RE.sub("", t.strip())  # "approximately 3.14": the value, compared as stated
    t = (t if t.endswith("...") else t.rstrip(".,;:")).strip()  # "0.333..." repeats
    return _drop_trailing_words(_chain_value(t)) or None


def _drop_trailing_words(t: str) -> str:
    """``18 apples`` -> ``18`` (GSM8K-style units and nouns after a final number)."""
    m = _WORD_TAIL_RE.match(t)
    if m and not any(w.lower() in _MATH_WORDS or len(w) < 2 for w in m.group(2).split()):
        return m.group(1)
    return t


def _strip_think(response: str) -> str | None:
    """Text after the last ``</think>``; None when reasoning was opened and never closed."""
    if "</think>" in response:
        return response.rsplit("</think>", 1)[1]
    if "<think>" in response:
        return None
    return response


def _final_turn(text: str) -> tuple[str, int]:
    """The text before a leaked chat-template turn, capped to its last :data:`MAX_RESPONSE` characters, and
    where it starts in ``text``."""
    m = _TURN_RE.search(text)
    if m and text[: m.start()].strip():
        text = text[: m.start()]
    start = max(0, len(text) - MAX_RESPONSE)
    return text[start:], start


def _rhs(expr: str) -> str:
    """``3 + 4 = 7``, ``x = 3 + 4 = 7``, ``f(g(2)) = 7`` -> ``7``; a single ``x = 5`` is kept (a label)."""
    parts = expr.split("=")
    named = [bool(re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", p))) for p in parts]
    if len(parts) > 2 or (len(parts) == 2 and (applied_at_number(parts[0]) or not any(named))):  # 10 = x + y
        return parts[-1].strip()
    return expr.strip()


# a remark closing the response after its committed answer (a "---" rule, "*Remark:*", "Note:", "Check:" opening
# each of its last paragraphs): its values are not the answer
_ASIDE_RE = re.compile(r"(?i)^[ \t]*(?:(?:-{3,}|\*{3,}|_{3,})[ \t]*(?:\n|$)|[*_>]*[ \t]*(?:remarks?|notes?|aside|check|"
                       r"sanity\s+check|verification|p\.?\s?s\.?)[ \t]*[*_]*[ \t]*[:.—-])")


def _aside_cut(text: str, commits=None) -> str:
    """``text`` before the remark paragraphs that close it, when what precedes them commits to a value
    (``commits(head)``; default: a closing statement)."""
    paras = re.split(r"(\n[ \t]*\n)", text)  # paragraphs at even indexes
    k = len(paras) - 1
    while k >= 2 and paras[k].strip() == "":
        k -= 2
    for _ in range(8):  # a few remark paragraphs at most: linear time on "\n\nNote:" repeated
        if k < 2 or not _ASIDE_RE.match(paras[k].lstrip("\n")):
            break
        k -= 2
        head = "".join(paras[: k + 1])
        if head.strip() and (commits(head) if commits else _closing_statement(head) is not None):
            return head
    return text


_BULLET_RE = re.compile(r"^[ \t]*(?:[*>]+[ \t]*|-[ \t]+)*")  # "- ", "* ", "> ": a bullet; "-4" keeps its sign
_ASSIGN_LINE_RE = re.compile(r"^[ \t]*(?:[-*][ \t]+)?\$?\s*([a-zA-Z])\s*=\s*(-?\s*[\d\\][^=$,;]*?)\s*\$?\s*[.;,]?$")


def _assignments_from(lines: list[str]) -> int:
    """Index of the first of the assignment lines closing ``lines``."""
    k = len(lines)
    while k > 0 and _ASSIGN_LINE_RE.match(lines[k - 1].replace("**", "")):
        k -= 1
    return k


def _assignment_lines(lines: list[str]) -> str | None:
    """``- x = 4`` / ``- y = -1`` closing the response, one per line: a system's solution, a tuple in order
    (as ``$x = 4$, $y = -1$`` in one sentence); the same variable twice is a list of roots."""
    k = _assignments_from(lines)
    if len(lines) - k < 2:
        return None
    return _joined_values([lines[i].replace("**", "").strip(" \t-*$.;,") for i in range(k, len(lines))], "")


def _joined_values(spans: list[str], gaps: str) -> str:
    """``$x = 1$ and $x = -3$`` -> ``1, -3`` (a list; "or": a hedge, a list too); ``$x = 1$, $y = -2$`` -> ``(1, -2)``:
    values of distinct variables, joined without "or", are one solution of a system, a tuple in order."""
    named = [re.match(r"^\s*([a-zA-Z])\s*=\s*(.+)$", _rhs(s)) for s in spans]
    values = ", ".join(re.sub(r"^\s*[a-zA-Z]\s*=\s*", "", _rhs(s)) for s in spans)
    if all(named) and len({m.group(1) for m in named}) == len(named) and not re.search(r"(?i)\bor\b", gaps):
        return f"({values})"
    return values


def _stated_after(tail: str) -> str | None:
    """The value stated after a sentence's last math span ("..., so the vertex is (1.5, 0).", "which is 4\\pi."):
    only with a stating verb, so a trailing hedge ("$3$ or maybe 4") states nothing."""
    verb = _CLOSING_VERB_RE.search(tail)
    if verb:
        return verb.group(1).strip()
    struct = _CLOSING_STRUCT_RE.search(tail)
    if struct and _STRUCT_LEAD_RE.search(tail[: struct.start(1)]):
        return struct.group(1).strip()
    tex = _CLOSING_TEX_RE.search(tail)
    return tex.group(1).strip() if tex and _TEX_CONSTRUCT_RE.search(tex.group(1)) else None


def _words_last(sentence: str) -> str | None:
    """:func:`last_count_in_words` when no numeral or math span follows the count, else None."""
    found = last_count_in_words(sentence)
    if found is None or _NUM_RE.search(sentence, found[0]) or _MATH_SPAN_RE.search(sentence, found[0]):
        return None
    return found[1]


def _closing_statement(text: str) -> str | None:
    """The value a response states in its closing line when it has no box and no "answer is" phrase."""
    tail = text.rstrip()
    for closer in ("\\]", "$$"):  # display math closing the response, possibly over several lines
        if tail.endswith(closer):
            opener = "\\[" if closer == "\\]" else "$$"
            start = tail.rfind(opener, 0, len(tail) - len(closer))
            if start >= 0 and tail.count("\n", start) <= 6:
                inner = tail[start + len(opener) : len(tail) - len(closer)].strip()
                return _rhs(inner) if inner else None
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    if len(lines) >= 2 and (_PLEASANTRY_RE.match(lines[-1]) or _ASK_BACK_RE.search(lines[-1])):
        lines.pop()  # "I hope this helps!", "Does that make sense?"
    if not lines:
        return None
    listed = _assignment_lines(lines)
    if listed:
        return listed
    line = cjk_spaced(_BULLET_RE.sub("", lines[-1].replace("**", "")).strip())
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z])", line) if len(line) < 2000 else [""]
    while len(sentences) >= 2 and (_ASK_BACK_RE.search(sentences[-1]) or _PLEASANTRY_RE.match(sentences[-1])):
        sentences.pop()  # "So there are 42 balls. Want me to check it another way?"
    sentence = sentences[-1]
    if len(sentence) > 400 or sentence.rstrip().endswith("?"):
        return None  # a question (often the problem echoed back) states no answer
    restated = _RESTATED_RE.search(sentence)  # "= 0.2$, i.e. the price rose by 20%.": the restatement is final
    if restated and "$" not in restated.group(1) and len(found := _NUM_RE.findall(restated.group(1))) == 1:
        return found[0].strip()
    sentence = continental(sentence)  # "7 degrees below zero" is -7; "Daher gibt es 3.000 Stifte." 3000
    sentence = condition_cut(retracted(sentence))  # "..., nein, $7! = 5.040$ Anordnungen."; "... for $x \\neq 1$"
    if stated := value_stated(sentence):  # "so 20 is $25\\%$ of 80."; "... at $x = -2$, where $f(-2) = -3$."
        return stated
    sentence = money_signs_dropped(_clause_cut(sentence, _REASON_CLAUSE_RE))
    spans = [next(g for g in m.groups() if g is not None) for m in _MATH_SPAN_RE.finditer(sentence)]
    if spans and (last := _words_last(sentence)) is not None:  # "$... = 15000$, so ... that is sixty thousand."
        return last or None
    if spans:
        rest = _MATH_SPAN_RE.sub(" ", sentence)
        if len(spans) == 1 and not _NUM_RE.search(rest):
            return _rhs(spans[0]) or None
        if sentence.rstrip(" .!").endswith(("$", "\\)", "\\]")):
            found = list(_MATH_SPAN_RE.finditer(sentence))
            k = len(found) - 1
            while k > 0 and _SPAN_JOIN_RE.fullmatch(sentence[found[k - 1].end() : found[k].start()]):
                k -= 1  # "$x = 1$ and $x = -3$": one list ("$3$ or $4$": a hedge, a list too)
            if k < len(found) - 1:
                return _joined_values(spans[k:], sentence[found[k].end() : found[-1].start()])
            return _rhs(spans[-1]) or None
        last = list(_MATH_SPAN_RE.finditer(sentence))[-1]
        stated = _stated_after(sentence[last.end() :])
        return stated if stated or not span_stated(sentence, last) else _rhs(spans[-1]) or None
    choice = _CLOSING_CHOICE_RE.search(sentence)
    if choice and not _NUM_RE.search(sentence):
        return next(g for g in choice.groups() if g)  # "The correct option is (D).", "option B", a lone "B"
    several = _CLOSING_LIST_RE.search(sentence)  # "The roots are -1 and 2.": a list ("3 or 4": a hedge, one)
    if several:
        items = re.split(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+", several.group(1))
        return ", ".join(re.sub(r"^[a-zA-Z]\s*=\s*", "", it) for it in items if it)
    verb = _CLOSING_VERB_RE.search(sentence)
    if verb:  # "is 6.5 \times 10^{-7} m.": a number after the verb, before any LaTeX reading
        return verb.group(1).strip()
    struct = _CLOSING_STRUCT_RE.search(sentence)  # "The area is therefore (1, 2).", "答案是 \\{1, 2\\}"
    lead = sentence[: struct.start(1)] if struct else ""
    if struct and (not _NUM_RE.search(lead) or _STRUCT_LEAD_RE.search(lead)):
        return struct.group(1).strip()
    tex = _CLOSING_TEX_RE.search(sentence)
    if tex and _TEX_CONSTRUCT_RE.search(tex.group(1)):
        return tex.group(1).strip()
    tex = _TEX_TAIL_RE.search(sentence)  # no stating verb: the one expression of a sentence without numbers
    if tex and _TEX_CONSTRUCT_RE.search(tex.group(1)) and not _NUM_RE.search(sentence[: tex.start(1)]):
        return tex.group(1).strip()
    nums = _NUM_RE.findall(sentence)
    if nums:  # "... 15000, and in four weeks that is sixty thousand widgets."
        last = _words_last(sentence)
        if last is not None:
            return last or None
    words = None if nums else count_in_words(sentence) or foreign_count(sentence)
    if words:
        return words
    if len(nums) == 1:
        return nums[0].strip()
    m = _CLOSING_SO_RE.search(sentence)
    return m.group(1).strip() if m else None


def extract_answer(response: str, dataset: str | None = None) -> str | None:
    """The answer string in a model response, or None when there is none (see the package docstring)."""
    return _extract(response, dataset)[0]


def answer_start(response: str, dataset: str | None = None) -> int | None:
    """Character offset in ``response`` where the statement of the extracted answer begins, or None when
    :func:`extract_answer` finds no answer: the ``####`` of a GSM8K line, the ``\\boxed`` of the (first joined)
    box, the "answer is" / "Final Answer:" phrase, or the closing statement (its display-math opener, else the
    start of its sentence).  Every token from there on states the answer (CF's answer region)."""
    return _extract(response, dataset)[1]


def _closing_start(text: str) -> int:
    """Where :func:`_closing_statement`'s value is stated: the display-math opener closing ``text``, else
    the start of the last sentence of its last line (a closing pleasantry skipped)."""
    tail = text.rstrip()
    for closer in ("\\]", "$$"):
        if tail.endswith(closer):
            start = tail.rfind("\\[" if closer == "\\]" else "$$", 0, len(tail) - len(closer))
            if start >= 0 and tail.count("\n", start) <= 6:
                return start
    lines = [m for m in re.finditer(r"[^\n]+", tail) if m.group().strip()]
    if len(lines) >= 2 and (_PLEASANTRY_RE.match(lines[-1].group().strip()) or _ASK_BACK_RE.search(lines[-1].group())):
        lines.pop()
    if not lines:
        return 0
    first = _assignments_from([ln.group() for ln in lines])
    if len(lines) - first >= 2:  # "- x = 4" / "- y = -1": the first assignment line
        return lines[first].start() + _BULLET_RE.match(lines[first].group()).end()
    line = lines[-1]
    lead = _BULLET_RE.match(line.group()).end()
    cuts = [lead, *(m.end() for m in re.finditer(r"(?<=[.!?])(?:\*\*)?\s+(?=(?:\*\*)?[A-Z])", line.group()))]
    while len(cuts) >= 2 and (_ASK_BACK_RE.search(tail := line.group()[cuts[-1] :].replace("**", ""))
                              or _PLEASANTRY_RE.match(tail)):
        cuts.pop()
    return line.start() + cuts[-1]


def _extract(response: str, dataset: str | None) -> tuple[str | None, int | None]:
    """(:func:`extract_answer`, :func:`answer_start`): the answer and where in ``response`` it is stated."""
    response = response or ""
    after = _strip_think(response)
    if after is None:
        return None, None
    text, cut = _final_turn(after)
    text = EMOTICON_RE.sub(lambda m: " " * len(m.group()), text)  # "The answer is 31 :)": offsets kept
    base = len(response) - len(after) + cut  # the text after the last </think>, then the turn cut and the cap
    answer, pos = _extract_final(text, dataset)
    return (None, None) if answer is None else (answer, base + pos)


def _extract_final(text: str, dataset: str | None) -> tuple[str | None, int]:
    """The answer in the final turn ``text`` and its statement's offset in ``text`` (0 when there is none)."""
    gsm_matches = list(_GSM_RE.finditer(text))
    gsm = [m.group(1) for m in gsm_matches]
    if dataset == "gsm8k" and gsm and gsm[-1].strip():
        return _drop_trailing_words(gsm[-1].strip()), gsm_matches[-1].start()
    plain = text.replace("**", "")
    phrases = list(_ANSWER_PHRASE_RE.finditer(plain))
    spans = [s for s in boxed_spans(text) if not is_echo(s[2])]
    if len(spans) >= 2:  # a box committed before closing remarks ("Note: without ... it would be \boxed{64}")
        head = len(_aside_cut(text, lambda h: spans[0][1] <= len(h)))
        spans = [s for s in spans if s[1] <= head]
    if spans:
        last_final = next((m for m in reversed(phrases) if m.group(1).lower().startswith("final")), None)
        if last_final is not None and "\\boxed" not in plain[last_final.end() :]:
            # a closing "Final Answer:" after the last box supersedes it
            box_end_plain = len(text[: spans[-1][1]].replace("**", ""))
            if last_final.start() >= box_end_plain:
                ans = _phrase_tail(plain[last_final.end() :])
                if ans and re.search(r"[\d\\$]", ans):
                    return ans, plain_index(text, last_final.start())
        parts = [spans[-1]]
        for prev in reversed(spans[:-1]):
            gap = text[prev[1] : parts[0][0]]
            if prev[1] <= parts[0][0] and (
                _BOX_JOIN_GAP_RE.match(gap) or (_SAME_LINE_GAP_RE.match(gap) and _GAP_SEP_RE.search(gap))
            ):
                parts.insert(0, prev)
            else:
                break
        ans = ", ".join(_chain_value(p[2].strip()) for p in parts).strip()
        if len(parts) >= 2 and (combined := combined_value(text[parts[-1][1] :], [p[2] for p in parts])):
            return combined, parts[-1][1]  # the sentence after the boxes states it
        return ans or None, parts[0][0]
    doubt = DOUBT_RE.search(plain, max(0, len(plain) - 400)) if plain.rstrip().endswith("?") else None
    for m in phrases[-3:][::-1]:  # a phrase followed by a comma ("the answer is, because") states nothing
        if doubt and doubt.start() > m.end():  # "the answer is 8. ... maybe it's 9?": no final answer
            return None, 0
        if plain[m.end() : m.end() + 1] not in (",", ";"):
            ans = _phrase_tail(_ECHO_BOX_RE.sub("", plain[m.end() : m.end() + 2000]))
            if ans:
                return ans, plain_index(text, m.start())
            break
    if gsm and gsm[-1].strip():
        return _drop_trailing_words(gsm[-1].strip()), gsm_matches[-1].start()
    blanked = _ECHO_BOX_RE.sub(lambda m: " " * len(m.group()), text)  # the same cut, offsets kept
    head = _aside_cut(blanked)
    answer = _closing_statement(_ECHO_BOX_RE.sub("", text[: len(head)]))
    start = head.rstrip().rfind("\n") + 1
    if k := praise_cut(head[start:]):  # "Great job! The class collected 96 cans.": its rest, the last statement
        praised = _closing_statement(_ECHO_BOX_RE.sub("", text[:start] + " " * k + text[start + k : len(head)]))
        if praised is not None or answer is None:
            answer, head = praised, head[:start] + " " * k + head[start + k :]
    return answer, _closing_start(head)


@lru_cache(maxsize=16384)
def prepare_gold(gold: str, dataset: str | None) -> str:
    """The gold answer string as compared (``####`` part, ``\\boxed`` content)."""
    g = gold.strip()
    if "####" in g:
        g = g.rsplit("####", 1)[1].strip()
    elif "\\boxed" in g or "\\fbox" in g:
        spans = boxed_spans(g)
        if spans:
            g = spans[-1][2].strip()
    return g
