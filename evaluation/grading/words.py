"""Counts written in words closing a sentence ("Therefore there are twenty-one marbles.", "... 15000, and in four weeks
that is sixty thousand or more widgets."): the regular expressions and the two rules that read them."""

from __future__ import annotations

import re

_UNITS_W = r"one|two|three|four|five|six|seven|eight|nine"
# a count in words, read whole (atomic: "sixty thousand or ..." never backs off to "sixty")
_WORD_NUM = (rf"(?>(?:(?:a|one)\s+(?:half|third|quarter|fifth)(?![a-z])"
             rf"|(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[-\s](?:{_UNITS_W}))?"
             rf"|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|zero|{_UNITS_W}"
             r"|a\s+dozen)(?:\s+(?:hundred|thousand|million)(?:\s+(?:and\s+)?(?:[a-z]+ty(?:-[a-z]+)?|[a-z]+teen|ten|eleven|twelve"
             rf"|{_UNITS_W})(?![a-z]))?)?)")
# "sixty thousand or more widgets": a bound right after the count states it, as "60000 or more" does ("seven or
# eight" is a hedge)
_OR_MORE = r"(?:\s+or\s+(?:more|less|fewer)\b)?"
# after a stating verb ("Therefore there are twenty-one marbles.") or a colon ("..., wait, the green ones: ten."), or
# opening the sentence ("So, twenty-four ...")
_CLOSING_WORD_NUM_RE = re.compile(
    rf"(?i)(?:(?<=\S):|\bis|\bare|\bwas|\bwere|\bbe|\bbeen|\bequals?|\bhas|\bhave|\bmakes?|\bgets?|\bneeds?|\btotal(?:s|\s+of)?|\bleft\s+with)\s+"
    rf"(?:exactly\s+|only\s+)?\b({_WORD_NUM})\b{_OR_MORE}(?!\s+(?:or|to)\s)(?:\s+[a-zA-Z][a-zA-Z'\-]*){{0,6}}\s*[.!]?\s*$"
    rf"|^(?:(?:so|thus|therefore|hence|altogether|in\s+total)\s*,?\s+)?(?!one\s|a\s)({_WORD_NUM})\s+[a-zA-Z][a-zA-Z'\-]*(?:\s+[a-zA-Z][a-zA-Z'\-]*){{0,6}}\s*[.!]?\s*$")
# "He runs thirty miles in total.": a subject, any verb, then a count in words
_SUBJECT_WORD_NUM_RE = re.compile(
    rf"(?i)^(?:(?:so|thus|therefore|hence|altogether|in\s+total)\s*,?\s+)?(?:he|she|it|we|they|you|I|[A-Z][a-z]+)"
    rf"\s+[a-z]+\s+(?:exactly\s+|only\s+)?\b({_WORD_NUM})\s+[a-zA-Z][a-zA-Z'\-]*(?:\s+[a-zA-Z][a-zA-Z'\-]*){{0,6}}\s*[.!]?\s*$")
_WORDS_VERB_RE = re.compile(rf"(?i)\b(?:is|are|was|were|equals?|be|been|makes?|totals?)\s+(?!one\b|a\b)({_WORD_NUM})\b")
_NOT_NOUN = r"(?:more|less|fewer|than|times|or|and)\b"
# after the count: only its noun, with a bound before or after it ("sixty thousand widgets or more"), nothing compared
_WORDS_TAIL_RE = re.compile(rf"(?i)(?:{_OR_MORE}(?!.*\b{_NOT_NOUN})(?:\s+[a-zA-Z][a-zA-Z'\-]*){{0,6}}"
                            rf"|(?:\s+(?!{_NOT_NOUN})[a-zA-Z][a-zA-Z'\-]*){{1,6}}\s+or\s+(?:more|less|fewer))\s*[.!]?\s*$")


def count_in_words(sentence: str) -> str | None:
    """The count in words a sentence without numerals closes on, after a stating verb or a subject's verb, or
    opening it ("So, twenty-four students passed."); None when there is none."""
    words = _CLOSING_WORD_NUM_RE.search(sentence) or _SUBJECT_WORD_NUM_RE.search(sentence)
    return next(g for g in words.groups() if g).strip() if words else None


def last_count_in_words(sentence: str) -> tuple[int, str] | None:
    """The sentence's last count in words after a stating verb (not "one"/"a"): where it ends and its words, or
    ``""`` when what follows makes it state nothing (a comparison "sixty thousand more", a hedge "sixty or
    seventy"), so that an earlier numeral is not read in its place; None when there is no such count.  A bound
    right after it ("or more/less/fewer") leaves it stated."""
    found = None
    for found in _WORDS_VERB_RE.finditer(sentence):
        pass
    if found is None:
        return None
    return found.end(), found.group(1).strip() if _WORDS_TAIL_RE.match(sentence, found.end()) else ""


# counts 0-20 and the tens in Spanish, French and German, read only after that language's answer phrase
_FOREIGN = {
    r"la\s+respuesta\s+(?:final\s+)?es": "cero uno dos tres cuatro cinco seis siete ocho nueve diez once doce trece "
    "catorce quince dieciséis diecisiete dieciocho diecinueve veinte treinta cuarenta cincuenta sesenta setenta "
    "ochenta noventa",
    r"la\s+réponse\s+(?:finale\s+)?est": "zéro un deux trois quatre cinq six sept huit neuf dix onze douze treize "
    "quatorze quinze seize dix-sept dix-huit dix-neuf vingt trente quarante cinquante soixante soixante-dix "
    "quatre-vingts quatre-vingt-dix",
    r"die\s+(?:endgültige\s+)?antwort\s+(?:ist|lautet)": "null eins zwei drei vier fünf sechs sieben acht neun zehn "
    "elf zwölf dreizehn vierzehn fünfzehn sechzehn siebzehn achtzehn neunzehn zwanzig dreißig vierzig fünfzig "
    "sechzig siebzig achtzig neunzig",
}
_FOREIGN_VALUES = {phrase: {w: str(i if i <= 20 else 10 * (i - 18)) for i, w in enumerate(ws.split())}
                   for phrase, ws in _FOREIGN.items()}
_FOREIGN_RE = re.compile(rf"(?i)\b({'|'.join(_FOREIGN)})\s*:?\s*([^\W\d_]+(?:-[^\W\d_]+)*)\s*[.!]?\s*$")


def foreign_count(sentence: str) -> str | None:
    """"La respuesta es quince." -> ``15``: a count in Spanish, French or German closing that language's answer
    phrase (only there, and only in its own language), as digits."""
    m = _FOREIGN_RE.search(sentence)
    if not m:
        return None
    phrase = next(p for p in _FOREIGN if re.fullmatch(p, m.group(1), re.IGNORECASE))
    return _FOREIGN_VALUES[phrase].get(m.group(2).lower())
