"""Languages the datasets may use, and the scripts they are written in (letters counted per script)."""

from __future__ import annotations

import unicodedata
from collections import Counter
from functools import cache
from typing import Literal, NamedTuple


class Language(NamedTuple):
    """A language the datasets may use: English name, script name and the script's code-point ranges."""

    name: str
    script: str
    ranges: tuple[tuple[int, int], ...]


# Adding a language is one line here (e.g. "bn": Language("Bengali", "Bengali", ((0x0980, 0x09FF),))).
LANGUAGE_TABLE: dict[str, Language] = {
    "en": Language("English", "Latin", ((0x0041, 0x005A), (0x0061, 0x007A), (0x00C0, 0x024F))),
    "hi": Language("Hindi", "Devanagari", ((0x0900, 0x097F), (0xA8E0, 0xA8FF))),
    "ta": Language("Tamil", "Tamil", ((0x0B80, 0x0BFF),)),
    "te": Language("Telugu", "Telugu", ((0x0C00, 0x0C7F),)),
    "kn": Language("Kannada", "Kannada", ((0x0C80, 0x0CFF),)),
    "bn": Language("Bengali", "Bengali", ((0x0980, 0x09FF),)),
    "mr": Language("Marathi", "Devanagari", ((0x0900, 0x097F), (0xA8E0, 0xA8FF))),  # Hindi's script: told by `language`
}
LANGUAGES: dict[str, str] = {code: lang.name for code, lang in LANGUAGE_TABLE.items()}


@cache
def letter_script(ch: str) -> str | None:
    """The script name (``LANGUAGE_TABLE``) of a letter or combining mark, None for other characters (cached per
    character: curating a large log asks this of every character of every message)."""
    if unicodedata.category(ch)[0] not in "LM":
        return None
    point = ord(ch)
    return next((lang.script for lang in LANGUAGE_TABLE.values() if any(lo <= point <= hi for lo, hi in lang.ranges)),
                None)


def script_letters(text: str, code: str) -> int:
    """Number of letters (and combining marks) of ``text`` in the script of language ``code``."""
    script = LANGUAGE_TABLE[code].script
    return sum(1 for ch in text if letter_script(ch) == script)


def script_counts(text: str) -> Counter[str]:
    """Letters per script name (first language code per script), e.g. ``{"hi": 12, "en": 3}``."""
    by_script = Counter(script for ch in text if (script := letter_script(ch)) is not None)
    counts: Counter[str] = Counter()
    for code, lang in LANGUAGE_TABLE.items():
        if by_script[lang.script] and lang.script not in {LANGUAGE_TABLE[c].script for c in counts}:
            counts[code] = by_script[lang.script]
    return counts


def dominant_script(text: str) -> str | None:
    """Language code whose script has the most letters in ``text`` (``None`` if no known letters)."""
    counts = script_counts(text)
    return counts.most_common(1)[0][0] if counts else None


def derived_script(text: str, language: str) -> Literal["native", "latin"]:
    """``latin`` for a non-English query with more Latin letters than letters of its own script, else ``native``."""
    if language == "en" or language not in LANGUAGE_TABLE:
        return "native"
    return "latin" if script_letters(text, "en") > script_letters(text, language) else "native"


def script_share(text: str, code: str) -> float | None:
    """Share of ``text``'s letters (and combining marks, any script) in the script of language ``code``; None when
    it has no letter."""
    total = sum(1 for ch in text if unicodedata.category(ch)[0] in "LM")
    return script_letters(text, code) / total if total else None


def in_script_of(text: str, code: str) -> bool:
    """Whether most of ``text``'s letters are in the script of language ``code`` (True for text without letters:
    a number or a sign is in no script)."""
    share = script_share(text, code)
    return share is None or share >= 0.5
