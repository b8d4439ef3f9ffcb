"""Checks of a page's extracted text, so that garbage never reaches a chunk silently: words that start with a
dependent vowel sign (a reordered Indic vowel sign), replacement or control characters, and text that is mostly
not words. Each check gives a reason a person can act on; ``pipeline/dataset/pdf.py`` puts them in the report."""

from __future__ import annotations

import re
import unicodedata

INDIC_BLOCKS = (0x0900, 0x0DFF)  # Devanagari to Sinhala: the scripts the studio reads
MOSTLY_NOT_WORDS = 0.5  # a page where fewer than half of the tokens are words is garbage, not text
_TOKEN = re.compile(r"\S+")
_EDGE_PUNCTUATION = "\"'“”‘’()[]{}<>.,;:!?।॥-–—/*•·|"


def is_indic_sign(char: str) -> bool:
    """A dependent sign of an Indic script (vowel sign, virama, anusvara, nukta): it never starts a word."""
    return INDIC_BLOCKS[0] <= ord(char) <= INDIC_BLOCKS[1] and unicodedata.category(char) in ("Mn", "Mc")


def _is_word(token: str) -> bool:
    """Letters (with their signs) of one script, digits, or a number: what a real word looks like."""
    core = token.strip(_EDGE_PUNCTUATION)
    if not core:
        return False
    if core.replace(",", "").replace(".", "").isdigit():
        return True
    if is_indic_sign(core[0]) or not all(c.isalnum() or is_indic_sign(c) or c in "'’-\u200c\u200d" for c in core):
        return False
    scripts = {unicodedata.name(c, "?").split()[0] for c in core if c.isalpha()}
    return len(scripts) <= 1


def sign_initial_words(text: str) -> list[str]:
    """Words that start with a dependent vowel sign, as a reordering PDF reader leaves them (``िीमारी``)."""
    return [t for t in (tok.strip(_EDGE_PUNCTUATION) for tok in _TOKEN.findall(text)) if t and is_indic_sign(t[0])]


def page_problems(text: str) -> list[str]:
    """Why this page's text looks wrong (empty when it looks like text)."""
    problems = []
    signs = sign_initial_words(text)
    if signs:
        problems.append(f"{len(signs)} word(s) start with a dependent vowel sign (e.g. {', '.join(signs[:3])}): "
                        "the reader reordered the script")
    replacement = text.count("\ufffd")
    control = sum(1 for c in text if unicodedata.category(c) in ("Cc", "Co", "Cs") and c not in "\n\r\t\f")
    if replacement or control:
        problems.append(f"{replacement} replacement and {control} control/private-use character(s): "
                        "the font has no Unicode map")
    tokens = _TOKEN.findall(text)
    if tokens:
        words = sum(_is_word(t) for t in tokens)
        if words / len(tokens) < MOSTLY_NOT_WORDS:
            problems.append(f"mostly not words ({words} of {len(tokens)} tokens are words)")
    return problems
