"""Checks of a page's extracted text, so that garbage never reaches a chunk silently: words that start with a
dependent vowel sign (a reordered Indic vowel sign), replacement or control characters, and text that is mostly
not words. Each check gives a reason a person can act on; ``pipeline/dataset/pdf.py`` puts them in the report."""

from __future__ import annotations

import re
import unicodedata

INDIC_BLOCKS = (0x0900, 0x0DFF)  # Devanagari to Sinhala: the scripts the studio reads, 128 code points each
MOSTLY_NOT_WORDS = 0.5  # a page where fewer than half of the tokens are words is garbage, not text
_EDGE = r"\"'“”‘’()\[\]{}<>.,;:!?।॥\-–—/*•·|"
_JOINERS = "\u200c\u200d"


def _classes() -> tuple[str, list[tuple[str, str]]]:
    """The Indic signs as a regex class, and per Indic block (its letters, its letters and signs)."""
    signs, blocks = [], []
    for start in range(INDIC_BLOCKS[0], INDIC_BLOCKS[1] + 1, 0x80):
        letters, marks = [], []
        for code in range(start, start + 0x80):
            category = unicodedata.category(chr(code))
            if category in ("Mn", "Mc"):
                marks.append(chr(code))
            elif category.startswith(("L", "N")):
                letters.append(chr(code))
        signs += marks
        blocks.append(("".join(letters), "".join(letters + marks) + _JOINERS))
    return "".join(signs), blocks


_SIGNS, _BLOCKS = _classes()
_SIGN_SET = frozenset(_SIGNS)
_SIGN_INITIAL = re.compile(rf"(?<!\S)[{_EDGE}]*([{_SIGNS}]\S*)")
_WORD_CORE = "|".join([r"\d[\d.,]*", r"[A-Za-zÀ-ɏ][A-Za-zÀ-ɏ'’\-]*"]
                      + [f"[{first}][{rest}]*" for first, rest in _BLOCKS if first])
_WORD = re.compile(rf"(?<!\S)[{_EDGE}]*(?:{_WORD_CORE})[{_EDGE}]*(?!\S)")
_CONTROL = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ud800-\udfff\ue000-\uf8ff]")


def is_indic_sign(char: str) -> bool:
    """A dependent sign of an Indic script (vowel sign, virama, anusvara, nukta): it never starts a word."""
    return char in _SIGN_SET


def sign_initial_words(text: str) -> list[str]:
    """Words that start with a dependent vowel sign, as a reordering PDF reader leaves them (``िीमारी``)."""
    return [word.rstrip(_EDGE.replace("\\", "")) for word in _SIGN_INITIAL.findall(text)]


def page_problems(text: str) -> list[str]:
    """Why this page's text looks wrong (empty when it looks like text)."""
    problems = []
    signs = sign_initial_words(text)
    if signs:
        problems.append(f"{len(signs)} word(s) start with a dependent vowel sign (e.g. {', '.join(signs[:3])}): "
                        "the reader reordered the script")
    replacement, control = text.count("\ufffd"), len(_CONTROL.findall(text))
    if replacement or control:
        problems.append(f"{replacement} replacement and {control} control/private-use character(s): "
                        "the font has no Unicode map")
    tokens = len(text.split())
    if tokens:
        words = len(_WORD.findall(text))
        if words / tokens < MOSTLY_NOT_WORDS:
            problems.append(f"mostly not words ({words} of {tokens} tokens are words)")
    return problems
