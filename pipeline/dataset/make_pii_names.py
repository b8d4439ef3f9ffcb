"""Regenerate ``pii_names.json``: India's commonest first and last names, in Latin letters and in every Indian
script the studio supports, for the name recognizer in ``pii_india.py``.

The names come from names-dataset (``NameDataset().get_top_names(country_alpha2="IN")``, first names of either
gender and last names); those that are common words (``pii_words.json`` ``not_names``, spaCy's English stop
words) or shorter than three letters are left out. Each is transliterated from its English spelling into
Devanagari, Tamil, Telugu, Kannada and Bengali by indic-transliteration (ITRANS in, after spelling rules that turn
English spellings of long vowels into ITRANS: ``ee`` -> ``I``, ``oo`` -> ``U``, a final ``a``/``i`` long; no final
virama in Devanagari and Bengali).
Run: ``python -m pipeline.dataset.make_pii_names`` (needs ``names-dataset``, in requirements-dev.txt; it
takes the top 1,500 first names of each gender and 1,000 last names, and about 2 GB of memory while it loads).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

TOP_FIRST = 1500  # per gender
TOP_LAST = 1000
SCRIPTS = {"deva": "DEVANAGARI", "taml": "TAMIL", "telu": "TELUGU", "knda": "KANNADA", "beng": "BENGALI"}
OUT = Path(__file__).with_name("pii_names.json")


def to_itrans(name: str) -> str:
    """An English spelling of an Indian name, as ITRANS (long vowels written long, ``sh`` kept as ``sh``)."""
    s = name.lower()
    s = s.replace("ee", "I").replace("oo", "U").replace("aa", "A")
    s = re.sub(r"a$", "A", s)
    s = re.sub(r"i$", "I", s)
    return s


def in_script(name: str, code: str, scheme: str) -> str:
    """``name`` written in one Indian script: without the final virama Hindi and Bengali do not write, and with
    ``f``/``z`` as ``ph``/``j`` in Telugu, which has no nukta."""
    from indic_transliteration import sanscript

    itrans = to_itrans(name)
    if code == "telu":
        itrans = itrans.replace("f", "ph").replace("z", "j")
    out = sanscript.transliterate(itrans, sanscript.ITRANS, scheme)
    return out.removesuffix("\u094d") if code == "deva" else out.removesuffix("\u09cd") if code == "beng" else out


def main() -> None:
    from indic_transliteration import sanscript
    from names_dataset import NameDataset
    from spacy.lang.en.stop_words import STOP_WORDS

    words = json.loads(Path(__file__).with_name("pii_words.json").read_text(encoding="utf-8"))
    common = set(words["not_names"].split()) | set(STOP_WORDS)
    dataset = NameDataset()
    first = dataset.get_top_names(n=TOP_FIRST, country_alpha2="IN")["IN"]
    last = dataset.get_top_names(n=TOP_LAST, country_alpha2="IN", use_first_names=False)["IN"]

    def keep(names: list[str]) -> list[str]:
        return sorted({n for n in names if n.isalpha() and n.isascii() and len(n) >= 3 and n.lower() not in common})

    lists = {"first": keep(first["M"] + first["F"]), "last": keep(last)}
    out: dict = {"_about": __doc__.split("\n\n")[1].replace("\n", " ")}
    for part, names in lists.items():
        out[part] = {"latn": names}
        for code, scheme in SCRIPTS.items():
            out[part][code] = [in_script(n, code, getattr(sanscript, scheme)) for n in names]
    OUT.write_text(json.dumps(out, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(lists['first'])} first and {len(lists['last'])} last names in {1 + len(SCRIPTS)} scripts")


if __name__ == "__main__":
    main()
