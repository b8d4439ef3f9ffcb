"""Hindi set in a legacy font (KrutiDev 010, DevLys 010, Walkman Chanakya): its text layer is Latin letters that
the font draws as Devanagari ("Mk;fcfVd" for डायबिटिक). Decided per run of text on the input, never on how the
output looks: a run in a font whose name tells it (``font_encoding``: "KrutiDev010", "ABCDEF+DevLys-010") is that
encoding; text in a font whose name does not tell it is a legacy encoding only by its signature (``detect``): no
Indic letters, few English words, few romanized-Indic words (pipeline/dataset/lexicons.json), legacy glyphs in many
words (a capital inside a word, ``;`` ``[`` ``'`` or a Latin-1 sign between letters: "fcfVd", "v‚ijs'ku") and
hinlegacy's token patterns. Converted to Unicode Devanagari by hinlegacy."""

from __future__ import annotations

import re
from functools import cache

PATTERN_SCORE_AT_LEAST = 0.3  # hinlegacy's pattern score per character: KrutiDev leaflets 0.48, English 0.18-0.22
ENGLISH_WORDS_AT_MOST = 0.3  # English prose has most of its words in the dictionary; KrutiDev text almost none
ROMANIZED_WORDS_AT_MOST = 0.08  # romanized Hindi/Tamil leaflets: 0.39 / 0.12 of their words; KrutiDev text 0
LEGACY_GLYPHS_AT_LEAST = 0.15  # words with a legacy glyph: KrutiDev leaflets 0.37-0.43, English, romanized 0-0.01
MIN_LETTERS = 20
INDIC_AT_MOST = 0.05  # a page already in an Indian script (beyond a stray letter) is not a legacy font
DEVANAGARI_AFTER_AT_LEAST = 0.9  # a conversion that does not give Devanagari was not a legacy font
# the words of a font's name (subset prefix, spaces, dashes and digits dropped) that tell its encoding (hinlegacy slugs)
FONT_NAMES = {"krutidev": "krutidev_010", "devlys": "devlys_010", "chanakya": "walkman_chanakya_905"}
_LATIN_WORD = re.compile(r"[A-Za-z]+")
_INDIC = re.compile("[\u0900-\u0dff]")
_LEGACY_GLYPH = re.compile(r"[a-z][A-Z]|\S[^\sA-Za-z0-9.,:!?()\-–—/%]\S|[^\x00-\x7f]")


@cache
def _english() -> frozenset[str]:
    from spellchecker import SpellChecker

    return frozenset(SpellChecker(language="en").word_frequency.dictionary)


def devanagari_share(text: str) -> float:
    """Share of the letters (and signs) of ``text`` that are Devanagari."""
    letters = [c for c in text if c.isalpha() or 0x0900 <= ord(c) <= 0x097F]
    return sum(0x0900 <= ord(c) <= 0x097F for c in letters) / len(letters) if letters else 0.0


def font_encoding(font_name: str) -> str | None:
    """The legacy encoding (hinlegacy's slug) a PDF font's name tells ("ABCDEF+KrutiDev010,Bold"), or None."""
    key = re.sub(r"[^a-z]", "", font_name.rpartition("+")[2].lower())
    return next((slug for word, slug in FONT_NAMES.items() if word in key), None)


def legacy_glyph_share(text: str) -> float:
    """Share of the words with letters that carry a legacy font's glyph: a capital after a small letter, a sign
    (``;`` ``'`` ``[`` ``{`` ``~`` ``+`` …) between two characters, or a non-ASCII character."""
    words = [w for w in text.split() if _LATIN_WORD.search(w)]
    return sum(bool(_LEGACY_GLYPH.search(w)) for w in words) / len(words) if words else 0.0


def romanized_share(text: str) -> float:
    """Share of the Latin words that are romanized Hindi, Tamil, Telugu or Kannada words (the themes' lexicon)."""
    from pipeline.dataset.themes import latin_words, romanized_votes

    words = latin_words(text)
    return sum(romanized_votes(text).values()) / len(words) if words else 0.0


def detect(text: str) -> str | None:
    """The legacy encoding ``text`` in a font whose name does not tell it is written in, by its signature
    (hinlegacy's font slug; tied fonts joined by ``/``), or None: English and romanized Indian text are not."""
    from hinlegacy.detector.heuristics import score_fonts

    letters = sum(map(str.isalpha, text))
    if letters < MIN_LETTERS or len(_INDIC.findall(text)) > INDIC_AT_MOST * letters:
        return None
    if legacy_glyph_share(text) < LEGACY_GLYPHS_AT_LEAST or romanized_share(text) > ROMANIZED_WORDS_AT_MOST:
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


def decode(text: str, encoding: str) -> str:
    """``text`` of a run in a legacy font, in Unicode Devanagari (hinlegacy)."""
    import hinlegacy

    return hinlegacy.decode(text, encoding.split("/")[0])


def convert(text: str, encoding: str) -> str | None:
    """``text`` found legacy by its signature, in Unicode Devanagari; None when it does not come out Devanagari."""
    unicode_text = decode(text, encoding)
    return unicode_text if devanagari_share(unicode_text) >= DEVANAGARI_AFTER_AT_LEAST else None
