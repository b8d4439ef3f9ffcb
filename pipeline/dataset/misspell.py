"""Misspelled variants, seeded: Latin text gets nlpaug's keyboard slips (a key's neighbours on a QWERTY keyboard),
Indian scripts the confusions people make when typing them (``misspellings.json``: short and long vowel signs,
nasal marks, the virama dropped, similar consonants), drawn by the same nlpaug augmenter from that table.

nlpaug draws from Python's and numpy's global random generators; ``misspell`` seeds both for each call (and
restores them after), so a query's misspelling depends only on its text, the seed and the rates.
"""

from __future__ import annotations

import json
import random
import tempfile
from functools import cache
from pathlib import Path

import numpy as np

from pipeline.dataset.languages import LANGUAGE_TABLE, script_counts
from pipeline.dataset.writing import sha256_of

CONFUSIONS = Path(__file__).with_name("misspellings.json")
GENERATOR = "nlpaug KeyboardAug"


def confusions() -> dict[str, dict[str, list[str]]]:
    """``{script name: {letter or sign: what it is mistyped as}}`` ('' = dropped)."""
    table = json.loads(CONFUSIONS.read_text(encoding="utf-8"))
    return {k: v for k, v in table.items() if not k.startswith("_")}


@cache
def _model_file(script: str) -> str:
    """nlpaug reads a keyboard model from a file: the script's confusions, written once per process."""
    text = json.dumps(confusions()[script], ensure_ascii=False)
    path = Path(tempfile.gettempdir()) / f"pariksha-misspellings-{script}-{sha256_of(text.encode())[:12]}.json"
    if not path.exists():
        path.write_text(text, encoding="utf-8")
    return str(path)


@cache
def _augmenter(script: str, word_rate: float, char_rate: float):  # nlpaug.augmenter.char.KeyboardAug
    import nlpaug.augmenter.char as nac

    common = dict(aug_word_p=word_rate, aug_char_p=char_rate, aug_char_max=1, aug_word_max=1000, min_char=2,
                  tokenizer=str.split, reverse_tokenizer=" ".join, include_numeric=False, include_upper_case=False)
    if script == "Latin":
        return nac.KeyboardAug(lang="en", include_special_char=False, **common)
    return nac.KeyboardAug(model_path=_model_file(script), include_special_char=True, **common)


def script_of(text: str) -> str:
    """The script name most of ``text``'s letters are in (``Latin`` when none are Indian)."""
    counts = script_counts(text)
    return LANGUAGE_TABLE[counts.most_common(1)[0][0]].script if counts else "Latin"


def misspell(text: str, *, seed: int, word_rate: float = 0.3, char_rate: float = 0.2) -> str:
    """``text`` with about ``word_rate`` of its words mistyped, one letter or sign each (``char_rate``: the
    chance of each letter to be the one), in the slips of its script; the same seed gives the same text."""
    script = script_of(text)
    if script != "Latin" and script not in confusions():
        raise ValueError(f"no misspellings known for the {script} script (add them to {CONFUSIONS.name})")
    state, np_state = random.getstate(), np.random.get_state()
    try:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        out = _augmenter(script, word_rate, char_rate).augment(text)
    finally:
        random.setstate(state)
        np.random.set_state(np_state)
    return out[0] if isinstance(out, list) else out
