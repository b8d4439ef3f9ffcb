"""Hindi set in a legacy font (KrutiDev 010, DevLys 010, Walkman Chanakya): its text layer is Latin letters that
the font draws as Devanagari ("Mk;fcfVd" for डायबिटिक). Detected by its signature — no Indic letters, few
English words, and hinlegacy's token patterns — and converted to Unicode Devanagari by hinlegacy."""

from __future__ import annotations

import re
from functools import cache

PATTERN_SCORE_AT_LEAST = 0.3  # hinlegacy's pattern score per character: KrutiDev leaflets 0.48, English 0.18-0.22
ENGLISH_WORDS_AT_MOST = 0.3  # English prose has most of its words in the dictionary; KrutiDev text almost none
MIN_LETTERS = 20
INDIC_AT_MOST = 0.05  # a page already in an Indian script (beyond a stray letter) is not a legacy font
DEVANAGARI_AFTER_AT_LEAST = 0.9  # a conversion that does not give Devanagari was not a legacy font
_LATIN_WORD = re.compile(r"[A-Za-z]+")
_INDIC = re.compile("[\u0900-\u0dff]")


@cache
def _english() -> frozenset[str]:
    from spellchecker import SpellChecker

    return frozenset(SpellChecker(language="en").word_frequency.dictionary)


def devanagari_share(text: str) -> float:
    """Share of the letters (and signs) of ``text`` that are Devanagari."""
    letters = [c for c in text if c.isalpha() or 0x0900 <= ord(c) <= 0x097F]
    return sum(0x0900 <= ord(c) <= 0x097F for c in letters) / len(letters) if letters else 0.0


def detect(text: str) -> str | None:
    """The legacy encoding ``text`` is written in (hinlegacy's font slug; tied fonts joined by ``/``), or None."""
    from hinlegacy.detector.heuristics import score_fonts

    letters = sum(map(str.isalpha, text))
    if letters < MIN_LETTERS or len(_INDIC.findall(text)) > INDIC_AT_MOST * letters:
        return None
    scores = score_fonts(text)
    if not scores or scores[0].score < PATTERN_SCORE_AT_LEAST:
        return None
    words = _LATIN_WORD.findall(text)
    english = sum(w.lower() in _english() for w in words if len(w) > 1) / max(sum(len(w) > 1 for w in words), 1)
    if english > ENGLISH_WORDS_AT_MOST:
        return None
    best = [s.font_slug for s in scores if s.score == scores[0].score]
    return "/".join(sorted(best))


def convert(text: str, encoding: str) -> str | None:
    """``text`` in Unicode Devanagari, or None when the conversion does not come out as Devanagari."""
    import hinlegacy

    unicode_text = hinlegacy.decode(text, encoding.split("/")[0])
    return unicode_text if devanagari_share(unicode_text) >= DEVANAGARI_AFTER_AT_LEAST else None
