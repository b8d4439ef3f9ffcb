"""Casual romanization of Indian-language text as people type it ("mujhe aankh me dard hai, kya karun?"), and the
reverse, romanized text back to its native script.

Letters are read with ``indic-transliteration`` (its ISO 15919 scheme, a letter-for-letter reading of every
Indian script); the casual scheme is a small set of rules on top of that reading, per language, as people write
on WhatsApp rather than as ITRANS or ISO do: long vowels doubled inside a word and short at its end ("baad",
"kya"), retroflex and dental letters alike ("t", "d", "n"), both sibilants "sh", "ch" for च, nasal marks as "n";
in Hindi and Marathi the silent inherent vowel dropped ("din", "kitne", not "dina", "kitanē").

Tamil is read through the Devanagari block: the Unicode Indic blocks are laid out in parallel (ISCII), and
``indic-transliteration``'s own Tamil scheme reads Tamil as Sanskrit, guessing voiced letters (க as "gh").

The reverse (``native``) is a guess: casual spelling loses what ISO keeps (long and short vowels at a word's
end, retroflex and dental, which nasal). ``round_trip`` measures how many words come back as they were.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from functools import cache
from typing import Protocol

from indic_transliteration import sanscript

SCRIPTS: dict[str, str] = {  # language code -> indic-transliteration scheme of its script
    "hi": sanscript.DEVANAGARI, "mr": sanscript.DEVANAGARI, "bn": sanscript.BENGALI,
    "ta": sanscript.TAMIL, "te": sanscript.TELUGU, "kn": sanscript.KANNADA,
}
SCHWA_DELETING = {"hi", "mr"}  # languages whose unwritten inherent vowel is silent at a word's end and inside it
TAMIL_SHIFT = 0x0B80 - 0x0900  # the Tamil block parallels the Devanagari block
ISO_VOWELS = "aāiīuūeēoōôê"
CONSONANT = r"(?:kh|gh|ch|jh|ṭh|ḍh|th|dh|ph|bh|ṛh|[kgṅcjñṭḍṇtdnpbmyrlvśṣshḷḻṟṉṛqfzḵġż])"

# ISO 15919 letters -> casual Latin; longest first (applied in order)
_CASUAL = [
    ("r̥", "ri"), ("m̐", "n"), ("ṁ", "n"), ("ḥ", "h"), ("ch", "chh"), ("c", "ch"), ("ṭh", "th"), ("ḍh", "dh"),
    ("ṛh", "dh"), ("ṭ", "t"), ("ḍ", "d"), ("ṛ", "d"), ("ṇ", "n"), ("ṉ", "n"), ("ṅ", "n"), ("ñ", "n"), ("ś", "sh"),
    ("ṣ", "sh"), ("ḷ", "l"), ("ḻ", "zh"), ("ṟ", "r"), ("ē", "e"), ("ō", "o"), ("ô", "o"), ("ê", "e"), ("ḵ", "kh"),
    ("ġ", "gh"), ("ż", "z"), ("ẏ", "y"),
]


def _to_devanagari_block(text: str) -> str:
    return "".join(chr(ord(c) - TAMIL_SHIFT) if 0x0B80 <= ord(c) <= 0x0BFF else c for c in text)


def _from_devanagari_block(text: str) -> str:
    return "".join(chr(ord(c) + TAMIL_SHIFT) if 0x0900 <= ord(c) <= 0x097F and unicodedata.name(
        chr(ord(c) + TAMIL_SHIFT), "") else c for c in text)


def iso_reading(text: str, language: str) -> str:
    """``text``'s letters read in ISO 15919 by indic-transliteration (Latin letters and other characters kept)."""
    if language == "ta":
        return sanscript.transliterate(_to_devanagari_block(text), sanscript.DEVANAGARI, sanscript.ISO)
    return sanscript.transliterate(text, SCRIPTS[language], sanscript.ISO)


def _delete_schwa(word: str) -> str:
    """Hindi's silent inherent vowel: word-final ``a`` after a consonant (in words of two or more syllables), and
    ``a`` between two consonants followed by a vowel, from the right (V C a C V -> V C C V: "kitanē" -> "kitnē")."""
    if re.fullmatch(rf".*[{ISO_VOWELS}].*{CONSONANT}a", word):
        word = word[:-1]
    pattern = re.compile(rf"([{ISO_VOWELS}]{CONSONANT})a({CONSONANT}[{ISO_VOWELS}])")
    while True:
        new = pattern.sub(r"\1\2", word, count=1)
        if new == word:
            return word
        word = new


def _tamil_sounds(word: str) -> str:
    """Tamil letters as they are said and typed: a single stop between vowels or after a nasal is voiced ("piragu",
    "vadiyudhu", "marundhu"), ச is "s" at a word's start and between vowels, the dental த "th" ("thanni")."""
    v = ISO_VOWELS
    for plain, voiced in (("k", "g"), ("c", "s"), ("ṭ", "ḍ"), ("t", "dh"), ("p", "b")):
        word = re.sub(rf"(?<=[{v}]){plain}(?=[{v}])", voiced, word)
    for nasal, stop, voiced in (("ṅ", "k", "g"), ("ñ", "c", "j"), ("ṇ", "ṭ", "ḍ"), ("n", "t", "dh"), ("m", "p", "b")):
        word = word.replace(nasal + stop, nasal + voiced)
    word = re.sub(r"^c", "s", word)
    return re.sub(r"(?<![tṭ])t(?![tṭh])", "th", word)  # a single dental t


def _casual_word(word: str, language: str) -> str:
    if not any(ch in word for ch in ISO_VOWELS + "āīūṁ"):
        return word
    if language == "ta":
        word = _tamil_sounds(word)
    if language in SCHWA_DELETING:
        word = _delete_schwa(word)
        word = re.sub(r"ē(ṁ|m̐)$", r"ei\1", word)  # एं at a word's end typed "ein": "mein", "karein"
    word = re.sub(r"ā(?=ṁ|m̐)?$", "a", word)  # long vowels short at the end of a word: "kyā" -> "kya"
    word = re.sub(r"ī(ṁ|m̐)?$", r"i\1", word)
    word = re.sub(r"ū(ṁ|m̐)?$", r"u\1", word)
    word = word.replace("ā", "aa").replace("ī", "ee").replace("ū", "oo")
    word = re.sub(r"ṁ(?=[pbm])", "m", word)  # the anusvara before p, b, m is said and typed "m" ("kampa")
    if language not in SCHWA_DELETING:
        word = re.sub(r"ṁ$", "m", word)  # and at a Dravidian word's end ("snaanam", "undam")
    for iso, casual in _CASUAL:
        word = word.replace(iso, casual)
    return word


def romanize(text: str, language: str) -> str:
    """``text`` in ``language`` typed in Latin letters the casual way ("मुझे आँख में दर्द है" -> "mujhe aankh mein
    dard hai"); Latin words already in it (code-mixing: "drops", "BP") are kept as written."""
    if language not in SCRIPTS:
        raise ValueError(f"no romanization for language {language!r} (known: {', '.join(SCRIPTS)})")

    def run(m: re.Match[str]) -> str:  # a run of Indian-script letters (no Latin letter in it)
        return _casual(unicodedata.normalize("NFC", iso_reading(m.group(0), language)), language)

    return re.sub(r"[\u0900-\u0DFF\u200C\u200D]+", run, text).replace("।", ".")


def _casual(iso: str, language: str) -> str:
    return re.sub(r"(?:[^\W\d_]|[\u0300-\u036F])+", lambda w: _casual_word(w.group(0), language), iso)


def romanize_words(words: list[str], language: str) -> list[str]:
    """``[romanize(w, language) for w in words]`` for words of ``language``'s script letters alone, read by
    indic-transliteration in one pass (twice as fast on a word list of 250k)."""
    if not words:
        return []
    iso = unicodedata.normalize("NFC", iso_reading("\n".join(words), language)).split("\n")
    if len(iso) != len(words):
        raise ValueError("a word holds a line break")
    return [_casual(w, language) for w in iso]


# -- the reverse: casual Latin -> ISO 15919 guess -> native script -------------------------------------------------
_LATIN_CONSONANTS = [  # casual spelling -> ISO, longest first
    ("chh", "ch"), ("ksh", "kṣ"), ("kh", "kh"), ("gh", "gh"), ("ch", "c"), ("jh", "jh"), ("th", "th"), ("dh", "dh"),
    ("ph", "ph"), ("bh", "bh"), ("sh", "ś"), ("zh", "ḻ"), ("rh", "ṛh"), ("k", "k"), ("g", "g"), ("c", "k"),
    ("j", "j"), ("t", "t"), ("d", "d"), ("n", "n"), ("p", "p"), ("b", "b"), ("m", "m"), ("y", "y"), ("r", "r"),
    ("l", "l"), ("v", "v"), ("w", "v"), ("s", "s"), ("h", "h"), ("f", "ph"), ("z", "j"), ("q", "k"), ("x", "kṣ"),
]
_LATIN_VOWELS = [("aa", "ā"), ("ee", "ī"), ("ii", "ī"), ("oo", "ū"), ("uu", "ū"), ("ai", "ai"), ("au", "au"),
                 ("ei", "ē"), ("ou", "au"), ("a", "a"), ("i", "i"), ("u", "u"), ("e", "ē"), ("o", "ō")]
_TAMIL_PLAIN = {"kh": "k", "g": "k", "gh": "k", "jh": "c", "j": "c", "th": "t", "d": "t", "dh": "t", "ph": "p",
                "b": "p", "bh": "p", "ṛh": "r", "ś": "ṣ", "s": "c"}  # Tamil has no voiced or aspirated letters
_NO_SCHWA_AFTER = {"y", "r", "v"}  # Hindi conjuncts are usual before these (क्या, प्र, स्व)


def _segments(word: str) -> list[tuple[str, str]]:
    """A lower-case Latin word as [(kind, ISO letter)] with kind 'C' or 'V' (other characters as 'O')."""
    out, i = [], 0
    while i < len(word):
        for table, kind in ((_LATIN_VOWELS, "V"), (_LATIN_CONSONANTS, "C")):
            hit = next(((lat, iso) for lat, iso in table if word.startswith(lat, i)), None)
            if hit:
                out.append((kind, hit[1]))
                i += len(hit[0])
                break
        else:
            out.append(("O", word[i]))
            i += 1
    return out


def _iso_guess(word: str, language: str) -> str:
    """A casual romanized word as an ISO 15919 guess in ``language``'s spelling conventions."""
    segs = _segments(word.lower())
    if language == "ta":
        segs = [(k, _TAMIL_PLAIN.get(v, v) if k == "C" else v) for k, v in segs]
    dravidian = language not in SCHWA_DELETING and language != "bn"
    out: list[str] = []
    for i, (kind, letter) in enumerate(segs):
        prev = segs[i - 1] if i else ("O", "")
        nxt = segs[i + 1] if i + 1 < len(segs) else ("O", "")
        last = i == len(segs) - 1 or nxt[0] == "O"
        if kind == "V":
            if last and (i > 0 or len(segs) == 1) and letter in ("a", "i") and language in SCHWA_DELETING:
                letter = {"a": "ā", "i": "ī"}[letter]  # casual spelling shortens a word's last vowel
            elif dravidian and letter in ("ē", "ō") and last:
                letter = letter.replace("ē", "e").replace("ō", "o")  # short at a Dravidian word's end
            out.append(letter)
            continue
        if kind == "O":
            out.append(letter)
            continue
        if (letter in ("n", "m") and prev[0] == "V" and language != "ta"
                and ((nxt[0] == "C" and nxt[1] not in ("n", "m", "y", "r", "l", "v", "h"))
                     or (last and language in SCHWA_DELETING and prev[1] in ("ā", "ī", "ū", "ē", "ai", "ō")))):
            out.append("ṁ")  # a nasal before a stop, or after a long vowel at a Hindi word's end: the anusvara
            continue
        if language in ("te", "kn") and letter == "m" and last and prev[0] == "V":
            out.append("ṁ")  # Telugu and Kannada end a word with the anusvara, not ம்-like m + virama
            continue
        if language == "ta" and letter == "n" and i > 0 and nxt[1] != "t":
            letter = "ṉ"  # Tamil writes ந at a word's start and before த, ன elsewhere
        out.append(letter)
        if language in SCHWA_DELETING and (last or (
                prev[0] == "V" and nxt[0] == "C" and nxt[1] not in _NO_SCHWA_AFTER and nxt[1] != letter
                and i + 2 < len(segs) and segs[i + 2][0] == "V")):
            out.append("a")  # the inherent vowel written but not said (dropped by romanize); no final virama
    return "".join(out)


class WordList(Protocol):
    """What ``native`` looks a romanized word up in: a ``Vocabulary`` or a ``lexicon.Lexicon``."""

    def get(self, romanized: str) -> str | None: ...


class Vocabulary:
    """Native-script words of one language keyed by their casual romanization, as an input method keeps its word
    list: ``native`` writes a romanized word known here as the word it most often stands for, and guesses the
    others by rule. Built from native-script text (``add``): bench/bench_variants.py's comparison with a dataset's
    own queries; the ``native`` kind reads word lists that are not the dataset's (``lexicon.Lexicon``)."""

    def __init__(self, language: str, texts: list[str] = ()):
        self.language = language
        self._by_key: dict[str, Counter[str]] = {}
        for text in texts:
            self.add(text)

    def add(self, text: str, sign: int = 1) -> None:
        """Count (or, with ``sign=-1``, uncount) the native-script words of ``text``."""
        for w in words(text):
            if w.isascii():
                continue
            counts = self._by_key.setdefault(romanize(w, self.language).lower(), Counter())
            counts[w] += sign
            if counts[w] <= 0:
                del counts[w]

    def get(self, romanized: str) -> str | None:
        counts = self._by_key.get(romanized.lower())
        return max(sorted(counts), key=counts.__getitem__) if counts else None


def native(text: str, language: str, vocabulary: WordList | None = None, keep: frozenset[str] = frozenset(),
           english: Callable[[str], bool] | None = None) -> str:
    """Romanized ``text`` in ``language`` written back in its native script: each Latin word as the
    ``vocabulary``'s word for it, else by rule (a guess: see the module's notes). Words in capitals or with a capital
    after their first letter ("TV", "BP", the "C" of "vitamin C", the "N" of "N95") and the lower-case words of
    ``keep`` (English words patients mix in: "drops") stay, and so does a word the ``vocabulary`` lacks that
    ``english`` says is English ("symptoms", "quarantine"), rather than be guessed by rule."""
    if language not in SCRIPTS:
        raise ValueError(f"no native script for language {language!r} (known: {', '.join(SCRIPTS)})")

    def word(m: re.Match[str]) -> str:
        w = m.group(0)
        if w.lower() in keep or w.isupper() or any(ch.isupper() for ch in w[1:]):
            return w
        known = vocabulary.get(w) if vocabulary is not None else None
        if known is not None:
            return known
        if english is not None and english(w.lower()):
            return w
        iso = _iso_guess(w, language)
        if language == "ta":
            return _from_devanagari_block(sanscript.transliterate(iso, sanscript.ISO, sanscript.DEVANAGARI))
        return sanscript.transliterate(iso, sanscript.ISO, SCRIPTS[language])

    return re.sub(r"[A-Za-z]+", word, text)


@cache
def _fold(language: str) -> dict[str, str]:
    """Spelling differences the round trip does not count: chandrabindu and anusvara (both written for a nasal)."""
    return {"ँ": "ं"} if SCRIPTS[language] == sanscript.DEVANAGARI else {}


def words(text: str) -> list[str]:
    """The words of ``text`` (letters and marks of any script, digits), punctuation left out."""
    return re.findall(r"(?:[^\W_]|[\u0900-\u0963\u0966-\u0DFF])+", unicodedata.normalize("NFC", text))


def round_trip(text: str, language: str, vocabulary: WordList | None = None, keep: frozenset[str] = frozenset(),
               english: Callable[[str], bool] | None = None) -> tuple[int, int]:
    """(words that come back, native-script words): ``text`` romanized, then written back in its native script
    (``native`` with ``vocabulary``, ``keep`` and ``english``), compared word by word in order (chandrabindu and
    anusvara counted alike). Latin words are not counted."""
    fold = _fold(language)

    def norm(w: str) -> str:
        return "".join(fold.get(ch, ch) for ch in w)

    before = [norm(w) for w in words(text)]
    after = [norm(w) for w in words(native(romanize(text, language), language, vocabulary, keep, english))]
    own = [i for i, w in enumerate(before) if not w.isascii()]
    if len(before) != len(after):
        return 0, len(own)
    return sum(1 for i in own if before[i] == after[i]), len(own)
