"""Train and evaluate the learned person-name recognizer (``pipeline/dataset/pii_model.py``) on public Indian NER
corpora, which a developer clones into one folder (they never enter the repository; only the weights do):

    git clone https://github.com/SankalpBahad/IL-NER DIR/IL-NER              # CC-BY-4.0: Hindi, Telugu
    git clone https://github.com/Rifat1493/Bengali-NER DIR/Bengali-NER      # MIT: Bengali
    git clone https://github.com/Sudharshan14/Kannada-NER DIR/Kannada-NER   # MIT: Kannada
    python -m pipeline.train.pii_names train DIR       # writes pii_names_crf.bin and its card
    python -m pipeline.train.pii_names evaluate DIR    # the figures docs/ingest.md reports

Splits: a corpus's train split trains, its dev split tunes (the CRF's regularisation is chosen on it), its official
test split is held out: scored once per model and never trained or tuned on. Bengali-NER has no dev split: every
tenth training sentence is its dev split. Kannada-NER's test sentences that also appear in its train or dev file
are dropped from the test split. Every Indian-script training sentence is also trained on once more in Latin
letters (IAST with the marks dropped, lower case; in half of them names, the first word and one word in ten
capitalised), so romanized messages are
covered by the same corpora.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline.dataset import pii_india, pii_model

Sentence = list[tuple[str, str]]  # (word, "B" | "I" | "O" for persons)


@dataclass(frozen=True)
class Corpus:
    """One language of one public corpus: where its splits are and which tags mark a person."""

    lang: str
    script: str
    source: str
    licence: str
    files: dict[str, str]  # split -> path under the corpora folder
    person: tuple[str, ...]


CORPORA = (
    Corpus("hi", "deva", "https://github.com/SankalpBahad/IL-NER", "CC-BY-4.0",
           {"train": "IL-NER/Datasets/Hindi/Hindi-train.txt", "dev": "IL-NER/Datasets/Hindi/Hindi-dev.txt",
            "test": "IL-NER/Datasets/Hindi/Hindi-test.txt"}, ("NEP",)),
    Corpus("te", "telu", "https://github.com/SankalpBahad/IL-NER", "CC-BY-4.0",
           {"train": "IL-NER/Datasets/Telugu/Telugu-train.txt", "dev": "IL-NER/Datasets/Telugu/Telugu-dev.txt",
            "test": "IL-NER/Datasets/Telugu/Telugu-test.txt"}, ("NEP",)),
    Corpus("bn", "beng", "https://github.com/Rifat1493/Bengali-NER", "MIT",
           {"train": "Bengali-NER/Input/train_data.txt", "test": "Bengali-NER/Input/test_data.txt"}, ("PER",)),
    Corpus("kn", "knda", "https://github.com/Sudharshan14/Kannada-NER", "MIT",
           {"train": "Kannada-NER/DATA/train.txt", "dev": "Kannada-NER/DATA/validate.txt",
            "test": "Kannada-NER/DATA/Kannada-test.txt"}, ("PER",)),
)


def read_conll(path: Path, person: tuple[str, ...]) -> list[Sentence]:
    """Sentences of a tab-separated NER file: the word first (its first space-separated piece), the tag last."""
    out: list[Sentence] = []
    sentence: Sentence = []
    for line in path.read_text(encoding="utf-8-sig").splitlines():
        cells = line.split("\t")
        if not line.strip() or len(cells) < 2 or not cells[0].strip():
            if sentence:
                out.append(sentence)
            sentence = []
            continue
        word, tag = cells[0].split()[0], cells[-1].strip()
        kind = tag.split("-", 1)[-1].strip()
        label = "O" if kind not in person else "I" if tag.startswith("I-") else "B"
        sentence.append((word, label))
    if sentence:
        out.append(sentence)
    return out


def splits(corpus: Corpus, folder: Path) -> dict[str, list[Sentence]]:
    """The corpus's train, dev and test sentences (see the module's doc for Bengali's dev and Kannada's test)."""
    data = {split: read_conll(folder / path, corpus.person) for split, path in corpus.files.items()}
    if "dev" not in data:
        data["dev"] = data["train"][9::10]
        data["train"] = [s for i, s in enumerate(data["train"]) if i % 10 != 9]
    seen = {tuple(w for w, _ in s) for split in ("train", "dev") for s in data[split]}
    data["test"] = [s for s in data["test"] if tuple(w for w, _ in s) not in seen]
    return data


def romanized(sentence: Sentence, script: str, rng: random.Random) -> Sentence:
    """The sentence in plain Latin letters (IAST, marks and a final unspoken ``a`` dropped, anusvara as ``n``, lower
    case; half the sentences with capitals: names, the first word and one word in ten)."""
    from indic_transliteration import sanscript

    title = rng.random() < 0.5
    out = []
    for k, (word, label) in enumerate(sentence):
        if pii_india.script_of(word) == script:
            latin = pii_india._anusvara(sanscript.transliterate(word, pii_india.SANSCRIPT[script], sanscript.IAST))
            latin = "".join(c for c in unicodedata.normalize("NFKD", latin) if c.isascii()).lower()
            if script in ("deva", "beng") and unicodedata.category(word[-1]) == "Lo" and latin.endswith("a"):
                latin = latin[:-1]  # the final inherent vowel is not said: "अनिल" is "anil"
            word = latin or word
            # written with capitals: names and the sentence's first word, and now and then another word (a drug's,
            # a place's), so a capital alone does not make a name
            word = word.capitalize() if title and (label != "O" or k == 0 or rng.random() < 0.1) else word
        out.append((word, label))
    return out


def encoded(sentence: Sentence) -> tuple[str, list[tuple[int, int]]]:
    """The sentence as text (words joined by spaces) and its persons' character spans."""
    text, persons, start = "", [], None
    for word, label in [*sentence, ("", "O")]:
        if label != "I" and start is not None:
            persons.append((start, len(text.rstrip())))
            start = None
        if label == "B" or (label == "I" and start is None):
            start = len(text)
        text += word + " "
    return text.rstrip(), persons


def items(sentence: Sentence) -> tuple[list[list[str]], list[str]]:
    """CRFsuite's features and labels for a sentence, on the words the recognizer sees (``pii_india.tokens``)."""
    text, persons = encoded(sentence)
    toks = pii_india.tokens(text)
    labels = []
    for t in toks:
        inside = next(((s, e) for s, e in persons if s <= t.start < e), None)
        labels.append("O" if inside is None else "B" if not any(inside[0] <= u.start < t.start for u in toks)
                      else "I")
    return pii_model.features(toks, text), labels


def training_items(folder: Path, split: str, seed: int = 13) -> Iterator[tuple[list[list[str]], list[str]]]:
    """Every corpus's ``split``, native script and romanized."""
    rng = random.Random(seed)
    for corpus in CORPORA:
        for sentence in splits(corpus, folder)[split]:
            for variant in (sentence, romanized(sentence, corpus.script, rng)):
                xs, ys = items(variant)
                if xs:
                    yield xs, ys


def train(folder: Path, out: Path, c1: float, c2: float, iterations: int) -> None:
    """Train the CRF on every corpus's train split and write the weights to ``out``."""
    import pycrfsuite

    trainer = pycrfsuite.Trainer(verbose=False)
    for xs, ys in training_items(folder, "train"):
        trainer.append(xs, ys)
    trainer.set_params({"c1": c1, "c2": c2, "max_iterations": iterations, "feature.minfreq": 2,
                        "feature.possible_transitions": True})
    trainer.train(str(out))


def score(sentences: list[tuple[str, list[tuple[int, int]]]], find) -> dict[str, float]:
    """Whole-name recall (a person's every word inside a find) and precision (finds that overlap a person)."""
    gold = whole = found = right = 0
    for text, persons in sentences:
        spans = find(text)
        gold += len(persons)
        letters = {t.start: t.end for t in pii_india.tokens(text)}
        for s, e in persons:
            starts = [k for k in letters if s <= k < e]
            whole += bool(starts) and all(any(a <= k and letters[k] <= b for a, b in spans) for k in starts)
        found += len(spans)
        right += sum(any(a < e and s < b for s, e in persons) for a, b in spans)
    return {"persons": gold, "finds": found, "recall": round(whole / gold, 3) if gold else None,
            "precision": round(right / found, 3) if found else None}


def evaluate(folder: Path, splits_to_score: tuple[str, ...] = ("dev", "test")) -> dict:
    """Per language and split: the rules alone, the rules with the learned recognizer; and their speed."""
    rules_only = lambda toks, text: ["O"] * len(toks)  # noqa: E731
    learned_tag = pii_model.tag
    report: dict = {}
    for corpus in CORPORA:
        data = splits(corpus, folder)
        for split in splits_to_score:
            rng = random.Random(f"{corpus.lang}/{split}")  # each split romanized the same whatever else is scored
            for form in ("native", "romanized"):
                sentences = [encoded(s if form == "native" else romanized(s, corpus.script, rng))
                             for s in data[split]]
                row = {}
                for name, tagger in (("rules", rules_only), ("rules+crf", learned_tag)):
                    pii_model.tag = tagger
                    started = time.perf_counter()
                    row[name] = score(sentences, pii_india.find_names)
                    row[name]["sentences_per_s"] = round(len(sentences) / (time.perf_counter() - started))
                pii_model.tag = learned_tag
                report[f"{corpus.lang}/{split}/{form}"] = row
                print(corpus.lang, split, form, json.dumps(row), flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.train.pii_names", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["train", "evaluate"])
    parser.add_argument("corpora", type=Path, help="the folder the corpora were cloned into")
    parser.add_argument("--c1", type=float, default=0.1)
    parser.add_argument("--c2", type=float, default=0.01)
    parser.add_argument("--iterations", type=int, default=150)
    parser.add_argument("--out", type=Path, default=pii_model.MODEL)
    parser.add_argument("--split", action="append", help="splits to score (dev, test); default both")
    args = parser.parse_args(argv)
    for corpus in CORPORA:
        for path in corpus.files.values():
            if not (args.corpora / path).is_file():
                print(f"{args.corpora / path}: missing; clone {corpus.source} into {args.corpora}", file=sys.stderr)
                return 1
    card = args.out.with_suffix(".json")
    if args.command == "train":
        started = time.perf_counter()
        train(args.corpora, args.out, args.c1, args.c2, args.iterations)
        seconds = time.perf_counter() - started
        print(f"{args.out}: {args.out.stat().st_size / 1e6:.1f} MB in {seconds:.0f} s")
        card.write_text(json.dumps(model_card(args.corpora, args, seconds), indent=1, ensure_ascii=False) + "\n",
                        encoding="utf-8")
        return 0
    pii_model.MODEL = args.out  # the weights scored: --out (by default the committed ones)
    pii_model.tagger.cache_clear()
    report = evaluate(args.corpora, tuple(args.split or ("dev", "test")))
    if card.exists():
        written = json.loads(card.read_text(encoding="utf-8"))
        written["figures"] = report
        card.write_text(json.dumps(written, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=1))
    return 0


def model_card(folder: Path, args: argparse.Namespace, seconds: float) -> dict:
    """What the weights are and where they come from: corpora, licences, sentences and persons per split."""
    corpora = []
    for corpus in CORPORA:
        data = splits(corpus, folder)
        corpora.append({"language": corpus.lang, "script": corpus.script, "source": corpus.source,
                        "licence": corpus.licence, "files": corpus.files,
                        "splits": {split: {"sentences": len(rows), "persons": sum(label == "B" for s in rows
                                                                                   for _, label in s)}
                                   for split, rows in data.items()}})
    return {"model": "linear-chain CRF (CRFsuite via python-crfsuite), labels B/I/O for persons",
            "derived_artifact": "trained by `python -m pipeline.train.pii_names train DIR` from the corpora below; "
                                "their text is not in the repository",
            "training": {"splits": "train only (native script and romanized copies)", "c1": args.c1, "c2": args.c2,
                         "max_iterations": args.iterations, "feature_minfreq": 2, "seconds": round(seconds)},
            "tuning": "dev splits", "held_out": "official test splits, never trained or tuned on",
            "corpora": corpora}


if __name__ == "__main__":
    raise SystemExit(main())

