"""The learned person-name recognizer: a linear-chain CRF (CRFsuite, through python-crfsuite) over the words of a
message, beside the rules of ``pii_india``; it finds names with no cue ("সুমিতার জ্বর কমছে না", "అనిల్ భరద్వాజ్
వచ్చారు"). ``pii_india.find_names`` keeps a name it proposes only when a word of it is a listed name by some key.

Its features are the word and its neighbours (lower case, prefixes and suffixes, script, capitals), whether each
word is a listed first or last name (``pii_names.json`` by the rules' phonetic and strict keys, case endings
stripped), a common or function word, and the cue phrase before it (``pii_words.json``). Labels are ``B``/``I``
(a person's name) and ``O``. The weights, ``pii_names_crf.bin``, are a derived artifact: trained by
``python -m pipeline.train.pii_names train`` from public NER corpora that stay outside the repository (their
sources, licences, splits and figures are in ``pii_names_crf.json``, the model card, and in docs/ingest.md). Nothing
is downloaded at run time; without the weights file the rules work alone.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from pipeline.dataset import pii_india
from pipeline.dataset.pii_india import Token

MODEL = Path(__file__).with_name("pii_names_crf.bin")
CARD = Path(__file__).with_name("pii_names_crf.json")


@cache
def _lookups():
    keys = pii_india.name_keys()
    return keys, pii_india.function_words(), pii_india.common_words()


@cache
def _word_features(word: str, script: str) -> tuple[str, ...]:
    """The features of one word alone (cached: a log repeats its words)."""
    keys, function, common = _lookups()
    lower = word.lower()
    out = [f"w={lower}", f"sc={script}", f"s2={lower[-2:]}", f"s3={lower[-3:]}", f"p2={lower[:2]}",
           f"p3={lower[:3]}", f"len={min(len(word), 8)}"]
    if script == "latn":
        out.append("up" if word.isupper() else "title" if word[0].isupper() else "low")
        listed = keys["exact"]
        found = [n for n in (0, 1) if lower in listed[n]]
        loose = [n for n in (0, 1) if pii_india.phonetic_key(word, "latn") in keys["latn"][n]]
    else:
        strict = keys[f"{script}-strict"]
        found = [n for n in (0, 1) if any(pii_india.strict_key(s, script) in strict[n]
                                          for s in pii_india.stems(word, script))]
        loose = [n for n in (0, 1) if any(k in keys[script][n] for k in pii_india.stem_keys(word, script))]
        if len(pii_india.stems(word, script)) > 1:
            out.append("ending")
    out += [f"list={n}" for n in found] + [f"key={n}" for n in loose]
    if lower in function:
        out.append("function")
    elif lower in common:
        out.append("common")
    return tuple(out)


def features(toks: list[Token], text: str) -> list[list[str]]:
    """CRFsuite's items for ``toks``: each word's features, its neighbours' (prefixed -1/+1/-2/+2) and cues."""
    cue_after, _ = pii_india._roles(toks, text)
    own = [_word_features(t.text, t.script) for t in toks]
    out = []
    for k in range(len(toks)):
        row = list(own[k])
        if k in cue_after:
            row.append(f"cue={cue_after[k]}")
        for d in (-2, -1, 1, 2):
            j = k + d
            if 0 <= j < len(toks):
                row += [f"{d}{f}" for f in own[j] if f.startswith(("w=", "list", "key", "title", "low", "function",
                                                                   "common", "s3="))]
                if j in cue_after and d == -1:
                    row.append(f"-1cue={cue_after[j]}")
            else:
                row.append(f"{d}edge")
        out.append(row)
    return out


@cache
def tagger():
    """The CRFsuite tagger with the committed weights, or None when the file is absent."""
    if not MODEL.exists():
        return None
    import pycrfsuite

    t = pycrfsuite.Tagger()
    t.open(str(MODEL))
    return t


def tag(toks: list[Token], text: str) -> list[str]:
    """``B``/``I``/``O`` per token (all ``O`` without a model)."""
    model = tagger()
    if model is None or not toks:
        return ["O"] * len(toks)
    return model.tag(features(toks, text))


def spans(labels: list[str]) -> list[tuple[int, int]]:
    """Token ranges ``[start, end)`` of the names in a ``B``/``I``/``O`` sequence (an ``I`` after ``O`` starts one)."""
    out: list[tuple[int, int]] = []
    start = None
    for k, label in enumerate([*labels, "O"]):
        if label != "I" and start is not None:
            out.append((start, k))
            start = None
        if label == "B" or (label == "I" and start is None):
            start = k
    return out
