"""Prose rewrites before a closing sentence is read: full-width punctuation, CJK spacing, Unicode powers and
fractions, "N degrees below zero", points grouping thousands in a continental-European sentence."""

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


def continental(sentence: str) -> str:
    """``Daher gibt es 3.000 Stifte.`` -> ``... 3000 ...`` (in English 3.000 stays 3); ``7 degrees below zero``
    -> ``-7 degrees``."""
    sentence = _BELOW_ZERO_RE.sub(r"-\1", sentence)
    if _CONTINENTAL_RE.search(sentence) and not _ENGLISH_RE.search(sentence):
        sentence = _POINT_GROUPS_RE.sub(lambda m: m.group().replace(".", ""), sentence)
    return sentence


# "..., so there are $2\,048$ subsets.": a stating verb, the sentence's last math span, then only its noun
_SPAN_LEAD_RE = re.compile(r"(?i)\b(?:is|are|was|were|equals?|gives?|makes?|has|have|gets?|totals?)\s*$")
_SPAN_NOUN_RE = re.compile(r"(?i)\s+(?!.*\b(?:or|and|maybe|possibly|perhaps|but|not|than|if|unless|times)\b)"
                           r"[a-z][a-z'\-]*(?:\s+[a-z][a-z'\-]*){0,5}\s*[.!]?\s*")


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
