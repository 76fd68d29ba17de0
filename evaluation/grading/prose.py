"""Prose rewrites before a closing sentence is read: full-width punctuation, CJK spacing, Unicode powers and
fractions, "N degrees below zero", points grouping thousands in a continental-European sentence, currency signs,
self-corrections ("nein, ..."), conditions after the value; and the prose rules that pick one value of several (a
span before its noun, a percent of a number, an extreme value at a point, a sum of boxed candidates, praise, doubt)."""

from __future__ import annotations

import re

_FULLWIDTH = str.maketrans({"。": ". ", "，": ", ", "：": ": ", "！": "! ", "？": "? ", "；": "; ", "（": "(",
                            "）": ")", "π": "\\pi ", "√": "\\sqrt", "−": "-",
                            "∞": "\\infty ", "∪": "\\cup ", "∩": "\\cap ",
                            "½": " 1/2", "⅓": " 1/3", "⅔": " 2/3", "¼": " 1/4", "¾": " 3/4"})
_CJK_RE = re.compile(r"([\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af])(?=[^\s\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af])")
# a sentence in German, French, Spanish, Italian or Portuguese groups thousands with points: 3.000 is 3000 there
_CONTINENTAL_RE = re.compile(r"(?i)\b(?:ist|sind|gibt|daher|insgesamt|ergebnis|antwort|also\s+ist|sont|donc|réponse"
                             r"|hay|tanto|respuesta|resultado|quindi|sono|risposta|são|portanto|total\s+de|il\s+y\s+a)\b")
_ENGLISH_RE = re.compile(r"(?i)\b(?:the|is|are|was|were|there|so|of|has|have|had|he|she|it|they|we|his|her|its|their"
                         r"|and|to|be)\b")
_POINT_GROUPS_RE = re.compile(r"(?<![\d.,])\d{1,3}(?:\.\d{3})+(?![\d.,]?\d)")
_BELOW_ZERO_RE = re.compile(r"(?<![\w.\-])(\d+(?:\.\d+)?(?:\s*(?:°|degrees?)(?:\s*[CF]\b|\s+(?:Celsius|Fahrenheit))?)?)"
                            r"\s+below\s+zero\b")


_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_SUPERSCRIPT_RE = re.compile(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+")
_VALUE_POWER_RE = re.compile(r"(?<=[\w)}])[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+")  # in prose a power (cm³ -> cm^{3}, read as 36 cm^2)


def superscripts_as_tex(s: str, *, prose: bool = False) -> str:
    """``10²³`` -> ``10^{23}``: Unicode superscript digits as a LaTeX power (in ``prose`` only after a number
    or a group, so a unit's ``m²`` stays a word)."""
    pat = _VALUE_POWER_RE if prose else _SUPERSCRIPT_RE
    return pat.sub(lambda m: "^{" + m.group().translate(_SUPERSCRIPT) + "}", s) if _SUPERSCRIPT_RE.search(s) else s


def cjk_spaced(line: str) -> str:
    """``答案是12。`` -> ``答案是 12.``: full-width punctuation as ASCII, a space between a CJK character and
    what follows it, so the closing rules read CJK sentences as they read others."""
    line = superscripts_as_tex(line.translate(_FULLWIDTH), prose=True)
    return _CJK_RE.sub(r"\1 ", line) if _CJK_RE.search(line) else line


# "3 * $15 = $45.": every unescaped $ opens an amount (a digit follows, no word character before), so the
# signs are money, not math delimiters
_DOLLAR_RE = re.compile(r"(?<!\\)\$")
_CURRENCY_RE = re.compile(r"(?<![\\\w$])\$(?=\d)")


def money_signs_dropped(line: str) -> str:
    """``3 * $15 = $45`` -> ``3 * 15 = 45`` when every ``$`` of ``line`` is a currency sign (else unchanged)."""
    n = len(_DOLLAR_RE.findall(line))
    return _CURRENCY_RE.sub("", line) if n and len(_CURRENCY_RE.findall(line)) == n else line


def plain_index(text: str, i: int) -> int:
    """Index in ``text`` of character ``i`` of ``text.replace("**", "")``."""
    j = k = 0
    while j < len(text):
        if text.startswith("**", j):
            j += 2
            continue
        if k == i:
            return j
        k += 1
        j += 1
    return j


def continental(sentence: str) -> str:
    """``Daher gibt es 3.000 Stifte.`` -> ``... 3000 ...`` (in English 3.000 stays 3); ``7 degrees below zero``
    -> ``-7 degrees``."""
    sentence = _BELOW_ZERO_RE.sub(r"-\1", sentence)
    if _CONTINENTAL_RE.search(sentence) and not _ENGLISH_RE.search(sentence):
        sentence = _POINT_GROUPS_RE.sub(lambda m: m.group().replace(".", ""), sentence)
    return sentence


# "..., so there are $2\,048$ subsets.": a stating verb, the sentence's last math span, then only its noun
_SPAN_LEAD_RE = re.compile(r"(?i)\b(?:is|are|was|were|equals?|gives?|makes?|has|have|gets?|totals?)\s*$")
_NOUN = (r"\s+(?!.*\b(?:or|and|maybe|possibly|perhaps|but|not|than|if|unless|times)\b)"
         r"[a-z][a-z'\-]*(?:\s+[a-z][a-z'\-]*){0,5}")
# "that is $60000$ or more widgets", "$2\,048$ subsets or more": a bound right after the value or after its noun
# states it, as "60000 or more" does ("or more than ..." compares: nothing stated)
_BOUND = r"\s+or\s+(?:more|less|fewer)\b"
_NOUN_BOUND = (r"(?:\s+(?!(?:or|and|maybe|possibly|perhaps|but|not|than|if|unless|times|more|less|fewer)\b)"
               r"[a-z][a-z'\-]*){1,6}")
_SPAN_NOUN_RE = re.compile(rf"(?i)(?:{_BOUND}(?:{_NOUN})?|{_NOUN}|{_NOUN_BOUND}{_BOUND})\s*[.!]?\s*")


def span_stated(sentence: str, span: re.Match[str]) -> bool:
    """Whether the math ``span`` closing ``sentence`` before a noun is the value it states: a stating verb
    right before it and only words after it ("so there are $2\\,048$ subsets.": a noun; "is $5$ less than
    ..." or "$3$ or so" are not)."""
    return bool(_SPAN_LEAD_RE.search(sentence, 0, span.start()) and _SPAN_NOUN_RE.fullmatch(sentence, span.end()))


# a closing line opening with praise ("Great job! The class collected 96 cans."): the praise and its address
PRAISE = (r"(?:(?:great|good|nice|excellent|awesome|amazing|fantastic|super|wonderful)\s+(?:job|work|effort)"
          r"|well\s+done|congratulations|congrats|bravo|keep\s+(?:it\s+)?up|way\s+to\s+go)\b")
_PRAISE_RE = re.compile(rf"(?i)^\W*{PRAISE}(?:\s*,\s*[a-z]+(?:\s+[a-z]+){{0,2}})?\s*[!.,:;—–]+\s*")
_COMPARED_RE = re.compile(r"(?i)\b(?:more|less|fewer|than|up\s+from|down\s+from|increase|decrease|improvement)\b")


def praise_cut(line: str) -> int:
    """Length of the praise opening ``line`` ("Great job! " in "Great job! The class collected 96 cans."), 0 when
    the line is not led by praise, is praise alone, or its rest compares with something else ("Great job, class!
    That's 16 more than last year's 80 cans.": a remark, not the answer)."""
    m = _PRAISE_RE.match(line)
    return 0 if not m or not line[m.end():].strip() or _COMPARED_RE.search(line, m.end()) else m.end()


# "..., nein, $(8-1)! = 7! = 5.040$ Anordnungen.": a self-correction; only what follows the retraction is read
_RETRACT_RE = re.compile(r"(?i)(?:^|[\s,;:.…])(?:no|nein|non|nee|wait|oops|sorry|correction)\s*[,:!—–]+\s+(?=\S)")


def retracted(sentence: str) -> str:
    """``sentence`` after its last retraction ("no,", "nein,", "wait,") when a value follows it, else unchanged."""
    cut = None
    for cut in _RETRACT_RE.finditer(sentence):
        pass
    return sentence[cut.end():] if cut and re.search(r"\d", sentence[cut.end():]) else sentence


# "... = 1 + x$ for $x \neq 1$.": a condition right after the value's span restricts it; it is not the answer
# (not after a lone variable: "all $x$ with $-3 < x < 5$" is the answer)
_CONDITION_RE = re.compile(r"(?i)(?<=\$|\))(?<!\$[a-z]\$)(?<!\\\([a-z]\\\))\s*,?\s+(?:(?:valid|defined|true)\s+)?"
                           r"(?:for|when|where|if|provided(?:\s+that)?|unless)\s+(?:all\s+)?"
                           r"(?:\$[^$]*|\\\((?:(?!\\\)).)*)(?:\\neq?|\\notin|\\in|\\[lg]eq?|[<>≠≤≥])[^$]*?(?:\$|\\\))"
                           r"\s*[.!]?\s*$")
# "so 20 is $25\%$ of 80.": a percent after a stating verb and before "of <number>" is the value stated
_PERCENT_OF_RE = re.compile(r"(?i)\b(?:is|are|was|were|equals?|makes?|represents?)\s+\$?\s*(\d+(?:\.\d+)?)\s?(\\?%)\s*"
                            r"\$?\s+of\s+(?:the\s+|a\s+|an\s+|his\s+|her\s+|their\s+|its\s+)?\$?\d[\d,.]*\$?"
                            r"(?:\s+[a-z][a-z'\-]*){0,4}\s*[.!]?\s*$")
# "The minimum value occurs at $x = -2$, where $f(-2) = -3$.": an extreme value located at a point, then the
# function's value there: the value is asked, the point locates it
_VALUE_AT_RE = re.compile(r"(?i)^(?:(?:so|thus|hence|therefore)\s*,?\s+)?(?:the\s+)?(?:minimum|maximum|minimal|maximal|"
                          r"smallest|largest|least|greatest)\s+(?:possible\s+)?value\b[^$]{0,60}?\bat\s+\$\s*[a-z]\s*=\s*"
                          r"([^$=]+?)\s*\$\s*,?\s+(?:where|with|and|giving)\s+\$\s*[a-zA-Z]\s*\(\s*([^$=()]+?)\s*\)\s*="
                          r"\s*([^$=]+?)\s*\$\s*[.!]?\s*$")


def condition_cut(sentence: str) -> str:
    """``sentence`` without a closing condition on the value it states ("= 1 + x$ for $x \\neq 1$.")."""
    return _CONDITION_RE.sub(".", sentence)


def value_stated(sentence: str) -> str | None:
    """A value the sentence states over a later or larger number: a percent before "of N", a function's extreme
    value after the point where it is attained (the same point in both spans)."""
    m = _PERCENT_OF_RE.search(sentence)
    if m:
        return m.group(1) + m.group(2)
    m = _VALUE_AT_RE.search(sentence)
    return m.group(3) if m and "".join(m.group(1).split()) == "".join(m.group(2).split()) else None


# "I think the answer is 8. ... Let me try again: maybe it's 9?": a closing question offering another value
DOUBT_RE = re.compile(r"(?i)(?:^|[.!?:]\s+)[^.!?:\n]*\b(?:maybe|perhaps|possibly|or\s+is\s+it|could\s+it\s+be)\b"
                      r"[^.!?\n]*\d[^.!?\n]*\?\s*$")


# "The roots are $\boxed{2}$ and $\boxed{5}$. But the problem asks for their sum, which is $2 + 5 = 7$.": the boxes
# are candidates, and a closing sum (product, difference) of exactly their values states the asked quantity
_COMBINED_RE = re.compile(r"(?i)\b(?:sum|product|difference|total)\b[^=\n]{0,80}?((?:-?\d+(?:\.\d+)?\s*"
                          r"(?:[+*×-]|\\times|\\cdot)\s*)+-?\d+(?:\.\d+)?)\s*=\s*(-?\d+(?:\.\d+)?)\s*\$?\s*[.!]?\s*$")


def combined_value(rest: str, boxed: list[str]) -> str | None:
    """The value closing ``rest`` (the text after the last of several boxes) when it combines exactly the boxed
    values; a check ("Check: ...", "to verify") states nothing new."""
    m = _COMBINED_RE.search(rest[-300:].replace("**", "").rstrip())
    if not m or re.search(r"(?i)\b(?:check|verif|confirm|note|remark)", rest):
        return None
    operands = sorted(re.findall(r"\d+(?:\.\d+)?", m.group(1)))
    return m.group(2) if operands == sorted(b.strip().lstrip("-") for b in boxed) else None


# an emoticon standing alone (``:)``, ``;-)``, ``:D``, ``=)``): a tone, never part of a value
EMOTICON_RE = re.compile(r"(?<=\s)[:;=]-?[)(DPp](?=\s|$)")
_APPLIED_RE = re.compile(r"\s*((?:[a-zA-Z]\s*\(\s*)+)-?\d+(?:\.\d+)?\s*((?:\)\s*)+)")


def applied_at_number(side: str) -> bool:
    """``f(g(2))``, ``h(-1)``: a function applied at a number names the value asked for (so ``f(5) = 24`` states
    24), unlike ``f(x)`` or ``x``, which label an unknown."""
    m = _APPLIED_RE.fullmatch(side)
    return bool(m) and m.group(1).count("(") == m.group(2).count(")")


# "This problem is a great example of how multiplication helps us count things quickly!": a sentence about the
# problem, closing the response after its statement, with no value of its own (no numeral, math or number word) and
# no negation (a closing "This problem has no solution." is an answer)
REMARK = (r"^(?=[^\d$\\]*$)(?!.*\b(?:no|not|never|none|nothing|cannot|can't|impossible|undefined|answer|solution|zero|"
          r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|[a-z]+teen|[a-z]+ty|hundred|thousand|million|"
          r"half|twice|dozen)\b)\W*(?:this|that|these|such)\s+(?:problem|question|puzzle|exercise|example|kind\s+of|"
          r"type\s+of|method|approach|strategy|shows|illustrates|demonstrates)\b")
PRAISE_OR_REMARK = rf"^\W*{PRAISE}|{REMARK}"
