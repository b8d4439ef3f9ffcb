"""Which option a free-text answer to a multiple-choice item names: a tolerant parser, pure, no I/O.

``parse_choice(text, options)`` returns the option's letter, or ``None`` when the answer names no
option or names several (an unparsed answer is flagged by its caller, never counted right or wrong).
Markdown emphasis is ignored and the text NFKC-normalised (full-width letters read as letters).
The rules, in order; the first that finds something decides:

1. **Statements** — "Answer: B", "The answer is (B)", "correct option is B", "I'd go with B",
   "Option B is correct", "B is the correct answer", "Option 2" (options numbered from 1, unless the
   options are themselves numbers). Two different letters stated, a letter that is not an option,
   or "B or C" / "B and C" / "B, C" right after it → ``None``.
2. **A leading label** — "B", "(B)", "B)", "b)", "B.", "B:", "[B]", "B - …" at the very start. A
   lower-case letter counts only with its punctuation ("b)", "b."); "A"/"I" before a lower-case word
   are English words ("A cataract is…", "I think…"); "E. coli" is not option E unless option E's
   text follows.
3. **An option's text** — the whole answer is one option's text, or the first sentence holds exactly
   one option's text (a shorter option inside a longer one that also appears does not count).
4. **A lone letter** in a short answer (at most 12 words: "Probably C.", "I think it's B."): exactly
   one capital letter standing alone before punctuation or the end, and it is an option ("E. coli"
   and "Type C personality" are not).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

SHORT_ANSWER_WORDS = 12

_END = r"(?=$|[\s.,;:!?)\]\"'—–-])"
_LETTER = r"\(?\[?(?P<letter>[A-Ja-j])(?P<close>[\])]?)"
_PREFIXES = (  # what states an answer, before its letter
    r"(?i:\banswer\s*(?:is|would\s+be|will\s+be|should\s+be|=)?\s*(?:option|choice)?\s*[:=\-—–]?\s*)",
    r"(?i:\bcorrect\s+(?:answer|option|choice|one)\s*(?:is|would\s+be)?\s*(?:option|choice)?\s*[:\-—–]?\s*)",
    r"(?i:\b(?:choose|chose|pick|picked|select|selected|go\s+with|going\s+with)\s+(?:option|choice)?\s*)",
    r"(?i:(?:^|(?<=[.!?\n])\s*)(?:option|choice)\s*)",
)
_STATED = [re.compile(p + _LETTER + _END) for p in _PREFIXES]
_STATED_AFTER = re.compile(  # "Option B is correct", "B is the correct answer" (a letter opening a sentence)
    r"(?:^|(?<=[.!?\n]))\s*(?i:(?:option|choice)\s*)?\(?(?P<letter>[A-J])\)?\s+(?i:is|seems|looks)\s+"
    r"(?i:(?:the|most\s+likely)\s+)?(?i:correct|right|best|answer)\b")
_NUMBERED = re.compile(r"(?i:\b(?:option|choice)\s*(?:no\.?|number|#)?\s*)(?P<number>\d{1,2})\b")
_ALTERNATIVE = re.compile(r"\s*(?:,|/|&|(?i:\bor\b|\band\b))\s*(?i:option\s*)?\(?(?P<letter>[A-J])\)?" + _END)
_LEADING = re.compile(r"\s*(?:\((?P<p>[A-Ja-j])\)|\[(?P<b>[A-Ja-j])\]|(?P<u>[A-J])(?=$|[\s.):\-—–,/&])"
                      r"|(?P<l>[a-j])(?=[.):]))")
_LONE = re.compile(r"(?<![\w'’\-/&])\(?([A-J])\)?(?=\s*(?:$|[.,;:!?]))(?!\.\s+[a-z])")


def _clean(text: str) -> str:
    return re.sub(r"\*\*|__|`", "", unicodedata.normalize("NFKC", text))


def _norm(text: str) -> str:
    text = _clean(text).replace("’", "'").lower()
    return re.sub(r"\s+", " ", re.sub(r"[*\"“”]", "", text)).strip(" .,;:!?")


def _word_follows(text: str, end: int) -> bool:
    """True when a lower-case word follows position ``end`` ("A patient", "I think": English, not a label);
    a conjunction ("A or B") does not count."""
    m = re.match(r"\s+([a-z]+)", text[end:])
    return m is not None and m.group(1) not in ("or", "and", "nor")


def _alternative(text: str, end: int, letters: list[str]) -> bool:
    """True when another option letter follows at ``end`` ("B or C", "B, C", "B/C")."""
    m = _ALTERNATIVE.match(text, end)
    if not m or m.group("letter") not in letters:
        return False
    return not (m.group("letter") in "AI" and _word_follows(text, m.end("letter")))


def _statements(text: str, letters: list[str], numbered: bool) -> set[str | None]:
    """Letters the text states as its answer; ``None`` in the set stands for a non-option or a pair."""
    found: set[str | None] = set()
    for pattern in _STATED:
        for m in pattern.finditer(text):
            letter, after = m.group("letter"), m.end("letter")
            opened = m.start("letter") > 0 and text[m.start("letter") - 1] in "(["
            if letter.islower() and not (opened or text[after:after + 1] in ("", "\n", ".", ")", ":")):
                continue  # "the answer is a cataract": an article
            found.add(None if _alternative(text, m.end(), letters) else (letter.upper() if letter.upper() in letters
                                                                          else None))
    for m in _STATED_AFTER.finditer(text):
        found.add(m.group("letter") if m.group("letter") in letters else None)
    if numbered:
        for m in _NUMBERED.finditer(text):
            n = int(m.group("number"))
            found.add(letters[n - 1] if 1 <= n <= len(letters) else None)
    return found


def _leading(text: str, options: Mapping[str, str]) -> tuple[bool, str | None]:
    """(whether the text opens with a label, its letter or None when the label is not a single option)."""
    m = _LEADING.match(text)
    if not m:
        return False, None
    kind, raw = next((k, v) for k, v in m.groupdict().items() if v)
    letter, end = raw.upper(), m.end()
    if kind == "u" and letter in "AI" and _word_follows(text, end):
        return False, None  # "A cataract is…", "I think…"
    if kind == "u" and text[end:end + 1] == "." and _word_follows(text, end + 1) and letter in options:
        if not _norm(text[end + 1:]).startswith(_norm(options[letter])):
            return False, None  # "E. coli …", "S. aureus …": an abbreviation, not option E
    if letter not in options:
        return True, None
    return True, None if _alternative(text, end, list(options)) else letter


def _by_text(text: str, options: Mapping[str, str]) -> str | None:
    """The one option whose text is the whole answer, or the only one in its first sentence."""
    norms = {k: _norm(v) for k, v in options.items() if _norm(v)}
    whole = _norm(text)
    exact = [k for k, v in norms.items() if v == whole]
    if len(exact) == 1:
        return exact[0]
    first = _norm(re.split(r"(?<=[.!?])\s+|\n", text.strip(), maxsplit=1)[0])
    inside = {k: v for k, v in norms.items() if re.search(r"(?<!\w)" + re.escape(v) + r"(?!\w)", first)}
    kept = [k for k, v in inside.items() if not any(v != w and v in w for w in inside.values())]
    return kept[0] if len(kept) == 1 else None


def _lone(text: str, letters: list[str]) -> str | None:
    if len(text.split()) > SHORT_ANSWER_WORDS:
        return None
    found = {m.group(1) for m in _LONE.finditer(text)}
    return found.pop() if len(found) == 1 and found <= set(letters) else None


def parse_choice(text: str | None, options: Mapping[str, str] | None) -> str | None:
    """The letter of the one option ``text`` names (the rules are in the module docstring), else ``None``."""
    if not text or not text.strip() or not options:
        return None
    text = _clean(text).strip()
    letters = list(options)
    numbered = not any(re.fullmatch(r"\s*\d+(?:\.\d+)?\s*", v or "") for v in options.values())
    stated = _statements(text, letters, numbered)
    if stated:
        return stated.pop() if len(stated) == 1 else None
    labelled, letter = _leading(text, options)
    if labelled:
        return letter
    if not numbered and _NUMBERED.search(text):
        return None  # "Option 2" when the options are numbers: a position or a text?
    return _by_text(text, options) or _lone(text, letters)
