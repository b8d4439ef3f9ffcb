"""Word lists that write a romanized word back in its script (``romanize.native``), none of them the dataset's.

Per language, the native-script words of

- **Tesseract's language pack** (Debian's ``tesseract-ocr-hin`` … ``-ben``, Apache-2.0, installed by ``make setup``
  and CI): its LSTM word list, read out with Tesseract's own tools (``combine_tessdata -e``, ``dawg2wordlist``).
  Telugu 221k words, Kannada 241k, Tamil 252k, Marathi 161k, Bengali 42k, Hindi only 12.7k. No frequencies. Words
  that end a virama with a zero-width non-joiner (Tamil mostly) have it removed: the project's words never hold it;
- **wordfreq** (``wordfreq`` on PyPI; data CC BY-SA 4.0) where it has the language (Hindi, Tamil, Bengali): words with
  their frequency in web, subtitle and Wikipedia text.

are indexed by their casual romanization (``romanize.romanize_words``), so a romanized word maps back to a native
word. Several native words share a romanization (casual spelling merges long and short vowels at a word's end,
retroflex and dental, ண/ன/ந): the one written is the most frequent by wordfreq; among words wordfreq does not rank,
the one more words of the lists begin with (a productive stem rather than a stray spelling), then the likelier
letter sequence under a character trigram model of the lists (add-one smoothing), then Unicode order. A word in no
list is guessed by rule (``romanize.native``).

The index is built once per process and cached in ``.cache/lexicons/`` (JSON, keyed by the lists' contents, the
rules' source and wordfreq's version; one file per language, the last built), so a rerun reads it rather than
romanizing 250k words again.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
import os
import shutil
import subprocess
import tempfile
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
from pathlib import Path

import wordfreq

from pipeline.dataset import romanize
from pipeline.dataset.languages import script_letters

TESSERACT_LANGS = {"hi": "hin", "mr": "mar", "bn": "ben", "ta": "tam", "te": "tel", "kn": "kan"}
TESSDATA_DIRS = ("/usr/share/tesseract-ocr/5/tessdata", "/usr/share/tesseract-ocr/4.00/tessdata",
                 "/usr/share/tessdata")
WORDFREQ_LIST = "best"  # wordfreq's largest list of the language (small for Hindi and Tamil, large for Bengali)
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "lexicons"
_FORMAT = "\u200c\u200d"  # zero-width non-joiner and joiner
_NGRAM = 3


@dataclass(frozen=True)
class Lexicon:
    """One language's word lists indexed by casual romanization; ``source`` names the lists (the variants'
    provenance), ``missing`` says which list could not be read and why."""

    language: str
    source: str
    words: dict[str, str]
    missing: str = ""

    def get(self, romanized: str) -> str | None:
        return self.words.get(romanized.lower())


def tessdata(language: str) -> Path | None:
    """The Tesseract language pack of ``language`` installed on this machine (``TESSDATA_PREFIX`` first)."""
    code = TESSERACT_LANGS.get(language)
    if code is None:
        return None
    dirs = [os.environ["TESSDATA_PREFIX"]] if os.environ.get("TESSDATA_PREFIX") else []
    return next((p for d in [*dirs, *TESSDATA_DIRS] if (p := Path(d) / f"{code}.traineddata").is_file()), None)


def tesseract_words(path: Path) -> list[str]:
    """The words of a Tesseract pack's LSTM word list, NFC, format characters removed (RuntimeError if its tools
    cannot read it)."""
    tools = [shutil.which(t) for t in ("combine_tessdata", "dawg2wordlist")]
    if not all(tools):
        raise RuntimeError("Tesseract's combine_tessdata and dawg2wordlist are not installed")
    with tempfile.TemporaryDirectory() as tmp:
        parts = [str(Path(tmp) / f"x.{c}") for c in ("lstm-unicharset", "lstm-word-dawg")]
        out = Path(tmp) / "x.words"
        for cmd in ([tools[0], "-e", str(path), *parts], [tools[1], *parts, str(out)]):
            run = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if run.returncode != 0 or not Path(cmd[-1]).is_file():
                raise RuntimeError(f"{Path(cmd[0]).name} could not read {path}: {run.stderr.strip()[-200:]}")
        text = out.read_text(encoding="utf-8")
    table = str.maketrans("", "", _FORMAT)
    return [w for line in text.splitlines() if (w := unicodedata.normalize("NFC", line.strip().translate(table)))]


def ranked(language: str) -> bool:
    """Whether wordfreq has ``language``'s own list (for another it answers with a "nearest" one: English)."""
    return language in wordfreq.available_languages(WORDFREQ_LIST)


def frequencies(language: str) -> dict[str, float]:
    """wordfreq's words of ``language`` (NFC) and their frequencies; empty where it has no list of its own."""
    if not ranked(language):
        return {}
    return {unicodedata.normalize("NFC", w): f
            for w, f in wordfreq.get_frequency_dict(language, wordlist=WORDFREQ_LIST).items()}


def _own(words: list[str], language: str) -> list[str]:
    """The words wholly of ``language``'s script letters (no digit, Latin letter or punctuation)."""
    return sorted({w for w in words if romanize.words(w) == [w] and script_letters(w, language) == len(w)})


class _Trigrams:
    """A character trigram model of a word list (add-one smoothing), for words no frequency ranks."""

    def __init__(self, words: list[str]):
        self.grams: Counter[str] = Counter()
        self.contexts: Counter[str] = Counter()
        for w in words:
            s = "^" * (_NGRAM - 1) + w + "$"
            for i in range(_NGRAM - 1, len(s)):
                self.grams[s[i - _NGRAM + 1:i + 1]] += 1
                self.contexts[s[i - _NGRAM + 1:i]] += 1
        self.letters = len({c for w in words for c in w}) + 1

    def logprob(self, word: str) -> float:
        s = "^" * (_NGRAM - 1) + word + "$"
        return sum(math.log((self.grams[s[i - _NGRAM + 1:i + 1]] + 1) / (self.contexts[s[i - _NGRAM + 1:i]]
                                                                       + self.letters))
                   for i in range(_NGRAM - 1, len(s)))


def build(language: str, words: list[str], freq: dict[str, float]) -> dict[str, str]:
    """Casual romanization -> the native word written for it, from ``words`` and ``freq``'s words (see the module's
    notes for how one of several is chosen)."""
    every = _own([*words, *freq], language)
    keys = romanize.romanize_words(every, language)
    by_key: dict[str, list[str]] = {}
    for key, w in zip(keys, every, strict=True):
        by_key.setdefault(key.lower(), []).append(w)
    trigrams = _Trigrams(every)

    def stems(w: str) -> int:  # how many words of the lists begin with w
        return bisect.bisect_left(every, w + "\U0010ffff") - bisect.bisect_left(every, w)

    out = {}
    for key, ws in by_key.items():
        out[key] = ws[0] if len(ws) == 1 else max(ws, key=lambda w: (freq.get(w, 0.0), stems(w),
                                                                    trigrams.logprob(w)))  # ws sorted: first wins
    return out


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()[:16]


@cache
def lexicon(language: str) -> Lexicon:
    """``language``'s word lists indexed by casual romanization (cached in ``.cache/lexicons/``); with no list
    readable, an empty one whose ``missing`` says why (``native`` then writes every word by rule)."""
    pack = tessdata(language)
    pack_bytes = pack.read_bytes() if pack is not None else b""
    wanted = f"wordfreq {version('wordfreq')} {WORDFREQ_LIST} {language}" if ranked(language) else ""
    rules = Path(romanize.__file__).read_bytes() + Path(__file__).read_bytes()
    path = CACHE / f"{language}-{_digest(pack_bytes, wanted.encode(), rules)}.json"
    if path.is_file():
        cached = json.loads(path.read_text(encoding="utf-8"))
        return Lexicon(language, cached["source"], cached["words"], cached["missing"])
    sources, words, missing = [], [], ""
    if pack is None:
        missing = (f"no Tesseract language pack for {language!r} (Debian: tesseract-ocr-"
                   f"{TESSERACT_LANGS.get(language, language)})")
    else:
        try:
            words = tesseract_words(pack)
            sources.append(f"Tesseract {pack.name} (sha256 {hashlib.sha256(pack_bytes).hexdigest()[:12]})")
        except RuntimeError as why:
            missing = str(why)
    sources += [wanted] if wanted else []
    freq = frequencies(language)
    out = Lexicon(language, " + ".join(sources) or "none (rules only)", build(language, words, freq), missing)
    if pack is None or words:  # a pack its tools could not read is tried again next time
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=CACHE, suffix=".tmp", delete=False) as f:
            json.dump({"source": out.source, "missing": out.missing, "words": out.words}, f, ensure_ascii=False,
                      sort_keys=True)
        os.replace(f.name, path)
        for old in CACHE.glob(f"{language}-*.json"):  # earlier rules' or packs' indices
            if old != path:
                old.unlink(missing_ok=True)
    return out
