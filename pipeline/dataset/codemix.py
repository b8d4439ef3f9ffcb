"""Code-mixed variants: a query's content words swapped for the English words Indian patients type in their place
("sugar", "BP", "operation", "drops"), from the lexicon the project keeps (``code_mixing.json``).

Hindi, Marathi and Bengali words are swapped whole; in Tamil, Telugu and Kannada a lexicon key is a stem, and a
word starting with it keeps its case ending after a hyphen ("கண்ணுக்கு" -> "eye-க்கு"), as patients write.
In a romanized query the keys are matched in their casual romanization (``romanize``), spelling choices aside
(``skeleton``). A seeded ``rate`` swaps
that share of the words the lexicon knows (1.0: all of them).
"""

from __future__ import annotations

import json
import random
import re
from functools import cache
from pathlib import Path

from pipeline.dataset.romanize import romanize, words

LEXICON = Path(__file__).with_name("code_mixing.json")
GENERATOR = "lexicon code_mixing.json"
WHOLE_WORDS = {"hi", "mr", "bn"}  # languages whose lexicon keys are whole words (not stems)


_SKELETON = (("aa", "a"), ("ee", "i"), ("ii", "i"), ("oo", "u"), ("uu", "u"), ("w", "v"), ("th", "t"), ("dh", "d"),
             ("ph", "f"), ("sh", "s"), ("z", "j"))


def skeleton(word: str) -> str:
    """A romanized word without the spelling choices people vary ("teeka" and "tika", "snaana" and "snana", "wale"
    and "vaale" alike): lower case, long vowels and aspirates single, doubled letters once."""
    word = word.lower()
    for long, short in _SKELETON:
        word = word.replace(long, short)
    return re.sub(r"(.)\1+", r"\1", word)


@cache
def lexicon(language: str, latin: bool = False) -> dict[str, str]:
    """``{native word or stem: English word}`` of ``language`` (with ``latin``, keyed by the ``skeleton`` of their
    casual romanization); empty if none."""
    table = json.loads(LEXICON.read_text(encoding="utf-8")).get(language, {})
    if latin:
        return {skeleton(romanize(k, language)): v for k, v in table.items()}
    return dict(table)


def english_words() -> frozenset[str]:
    """Every English word of the lexicon (lower case): what a reverse to native script leaves as written. A value's
    part after a hyphen is a case ending of the language as written ("eye-lo": Telugu's "in"), not English."""
    table = json.loads(LEXICON.read_text(encoding="utf-8"))
    return frozenset(w.lower() for lang, entries in table.items() if not lang.startswith("_")
                     for v in entries.values() for w in re.findall(r"[A-Za-z]+", v.split("-", 1)[0]))


# A word at least this common in English (Zipf scale: once per million words, wordfreq's English list) is English
# when the language's word lists lack it: "symptoms", "quarantine", "lockdown" stay in Latin in a reverse to native
# script instead of being guessed letter by letter. Set from the scale's meaning, not fitted to a set.
ENGLISH_ZIPF = 3.0


def common_english(word: str) -> bool:
    """Whether the lower-case ``word`` is a common English word (``ENGLISH_ZIPF``), for ``romanize.native``."""
    from wordfreq import zipf_frequency

    return zipf_frequency(word, "en") >= ENGLISH_ZIPF


def _swap(word: str, table: dict[str, str], stems: bool) -> str | None:
    key = skeleton(word) if word.isascii() else word
    if key in table:
        return table[key]
    if stems:
        stem = max((k for k in table if key.startswith(k) and len(key) > len(k)), key=len, default=None)
        if stem is not None:  # the ending as written (a romanized word's skeleton may be shorter than the word)
            return f"{table[stem]}-{word[len(word) - (len(key) - len(stem)):]}"
    return None


def code_mix(text: str, language: str, *, latin: bool, seed: int, rate: float = 1.0) -> tuple[str, int]:
    """(``text`` with the lexicon's words swapped for English, how many were swapped); ``latin``: the text is
    romanized. Punctuation around a word is kept."""
    table = lexicon(language, latin)
    stems = language not in WHOLE_WORDS
    rng = random.Random(seed)
    swapped = 0

    def one(m: re.Match[str]) -> str:
        nonlocal swapped
        new = _swap(m.group(0), table, stems)
        if new is None or rng.random() >= rate:
            return m.group(0)
        swapped += 1
        return new

    return re.sub(r"(?:[^\W_]|[\u0900-\u0963\u0966-\u0DFF])+", one, text), swapped


def english_share(text: str, *, latin: bool) -> float | None:
    """Share of ``text``'s words that are English (None without words): in native-script text the words in Latin
    letters; in romanized text (``latin``) the lexicon's English words and words in capitals ("BP")."""
    found = words(text)
    if not found:
        return None
    known = english_words()
    english = [w for w in found if (w.lower() in known or w.isupper()) if latin] if latin else [
        w for w in found if w.isascii() and not w.isdigit()]
    return len(english) / len(found)
