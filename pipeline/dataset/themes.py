"""Automatic theme tagger for queries that arrive without hand labels (Health-Pariksha §3.1, §4.3).

Language comes from the script (a query written in a script belongs to that script's language).
A Latin-script query is given an Indic language when its matrix language is Indic, i.e. romanized
Indic function words outnumber English ones. The five qualitative themes are detected with
transparent rules:

- ``code_mixing``: romanized Hindi/Tamil/Telugu/Kannada words in Latin text; English words in
  Latin letters inside native-script text (transliterated loans like ऑपरेशन are borrowings).
- ``misspelling``: English words unknown to pyspellchecker. Words of the dataset's knowledge
  base, medical and Indian terms and the lexicons below count as known.
- ``cultural``: Indian food, religion, festivals, native place, traditional practice.
- ``patient_specific``: the patient's own conditions, medication or history.
- ``non_native_english``: a few Indian-English constructions ("why to", "is the patient should").

``cultural`` and ``patient_specific`` also look at ``query_en`` (the English rendering), because
their cues are about meaning. The other themes are about the patient's own words, so they look
only at ``query``. ``out_of_kb`` needs retrieval and is not tagged.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pipeline.dataset.format import (
    LANGUAGES,
    THEMES,
    Issue,
    Query,
    find_dataset_files,
    read_records,
    script_counts,
)
from pipeline.errors import UserError

TAGGED_THEMES: tuple[str, ...] = tuple(t for t in THEMES if t != "out_of_kb")

# -- lexicons (data: lexicons.json beside this module) ------------------------------------------------
LEXICONS: dict = json.loads((Path(__file__).with_name("lexicons.json")).read_text(encoding="utf-8"))

# Romanized Indic words as patients type them (several spellings each). A word listed for
# several languages (kannu: eye in Tamil, Telugu and Kannada) votes for each of them.
ROMANIZED_WORDS: dict[str, tuple[str, ...]] = {}
for _lang, _block in LEXICONS["romanized"].items():
    for _w in dict.fromkeys(_block.split()):
        ROMANIZED_WORDS[_w] = (*ROMANIZED_WORDS.get(_w, ()), _lang)

# English function words that mark an English matrix sentence (words that are also common
# romanized Indic words, like "to", "me", "main", are left out).
ENGLISH_FUNCTION_WORDS = frozenset(LEXICONS["english_function_words"].split())
VIRAMAS = "\u094d\u0bcd\u0c4d\u0ccd"  # a native stem is matched without its final virama
CULTURAL_NATIVE = LEXICONS["cultural_native"].split()
SYMPTOMS_RE = re.compile(LEXICONS["symptoms_pattern"], re.IGNORECASE)
PERSONAL_RE = re.compile(LEXICONS["personal_pattern"], re.IGNORECASE)
# Indian-English constructions: (name, pattern). Kept deliberately few and specific.
NON_NATIVE_PATTERNS: list[tuple[str, str]] = [(p["name"], p["pattern"]) for p in LEXICONS["non_native_patterns"]]
# Words pyspellchecker does not know but that are spelled right in this domain.
DOMAIN_TERMS = LEXICONS["domain_terms"].split()

WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)*")


def latin_words(text: str) -> list[str]:
    """Latin-script word tokens (letters/digits, apostrophe contractions kept together), as written."""
    return [w.replace("’", "'") for w in WORD.findall(text)]


def _phrase_regex(words: Iterable[str], phrases: Iterable[str] = ()) -> re.Pattern[str]:
    alternatives = [re.escape(w) for w in sorted(set(words), key=len, reverse=True)] + list(phrases)
    return re.compile(r"(?<![A-Za-z])(?:" + "|".join(alternatives) + r")(?![A-Za-z])", re.IGNORECASE)


CULTURAL_RE = _phrase_regex(LEXICONS["cultural_en"].split(), LEXICONS["cultural_en_patterns"])
CONDITION_RE = _phrase_regex(LEXICONS["conditions_en"].split(), LEXICONS["conditions_en_patterns"])
MEDICATION_RE = _phrase_regex(LEXICONS["medications_en"].split(), LEXICONS["medications_en_patterns"])
NON_NATIVE_RES = [(name, re.compile(p, re.IGNORECASE)) for name, p in NON_NATIVE_PATTERNS]
MEDICINE_CODE_RE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{3,}\d{1,4}(?![A-Za-z0-9])")  # aztolet20, ecosprin75


def _native_hits(text: str, stems: Iterable[str]) -> list[str]:
    return [s for s in stems if s.rstrip(VIRAMAS) and s.rstrip(VIRAMAS) in text]


# -- detectors --------------------------------------------------------------------------------------
def romanized_votes(text: str) -> Counter[str]:
    """Romanized-Indic word votes per language in Latin text (a shared word splits its vote)."""
    votes: Counter[str] = Counter()
    for w in latin_words(text):
        langs = ROMANIZED_WORDS.get(w.lower())
        if langs:
            for lang in langs:
                votes[lang] += 1 / len(langs)
    return votes


def detect_language(text: str) -> str:
    """Language code of a query: the script with the most letters, or for Latin text its matrix language."""
    counts = script_counts(text)
    indic = {code: n for code, n in counts.items() if code != "en"}
    if indic:
        return max(indic, key=indic.__getitem__)
    votes = romanized_votes(text)
    if votes:
        lang, score = votes.most_common(1)[0]
        english = sum(w.lower() in ENGLISH_FUNCTION_WORDS for w in latin_words(text))
        if score >= 2 and score > english:
            return lang
    return "en"


def code_mixing(text: str) -> list[str]:
    """Evidence of code-mixing: romanized Indic words in Latin text, Latin-script words in native-script text.

    English words transliterated into an Indian script (ऑपरेशन, ஆபரேஷன்) are borrowings, not code-mixing.
    """
    counts = script_counts(text)
    native = any(code != "en" for code in counts)
    if native:
        return [w for w in latin_words(text) if any(c.isalpha() for c in w)]
    return [w for w in latin_words(text) if w.lower() in ROMANIZED_WORDS]


def cultural(text: str) -> list[str]:
    """Cultural cues: Indian food, religion, festivals, native place, traditional practice."""
    return [m.group(0) for m in CULTURAL_RE.finditer(text)] + _native_hits(text, CULTURAL_NATIVE)


def patient_specific(text: str) -> list[str]:
    """Cues that the query is about this patient: conditions, medication, personal history, own symptoms."""
    hits = [m.group(0) for m in CONDITION_RE.finditer(text)]
    hits += [m.group(0) for m in MEDICATION_RE.finditer(text)]
    hits += MEDICINE_CODE_RE.findall(text)
    if PERSONAL_RE.search(text):  # a symptom counts when the patient reports it as theirs or as present
        hits += [m.group(0) for m in SYMPTOMS_RE.finditer(text)]
    return hits


def non_native_english(text: str) -> list[str]:
    """Names of the Indian-English constructions found in an English (Latin-script) query."""
    return [name for name, rx in NON_NATIVE_RES if rx.search(text)]


@dataclass
class SpellingDetector:
    """Flags English words unknown to pyspellchecker, with extra known words (the KB's, domain terms)."""

    known: set[str] = field(default_factory=set)

    @cached_property
    def _checker(self):
        from spellchecker import SpellChecker

        checker = SpellChecker()
        checker.word_frequency.load_words(
            [*DOMAIN_TERMS, *ROMANIZED_WORDS, *(w for key in ("cultural_en", "conditions_en", "medications_en")
                                                for w in LEXICONS[key].split()), *self.known]
        )
        return checker

    def __call__(self, text: str) -> list[str]:
        candidates = []
        for i, w in enumerate(latin_words(text)):
            if len(w) < 3 or any(c.isdigit() for c in w) or (w.isupper() and len(w) <= 5):
                continue
            if i > 0 and w[0].isupper() and w[1:].islower():  # a name in mid-sentence
                continue
            candidates.append(w.lower())
        unknown = self._checker.unknown(candidates)
        return [w for w in candidates if w in unknown]


# -- the tagger -----------------------------------------------------------------------------------
@dataclass
class Tagging:
    """What the tagger decided for one query and why."""

    language: str
    themes: list[str]
    evidence: dict[str, list[str]]


class ThemeTagger:
    """Tags language and the five qualitative themes; ``kb_texts`` supply words known to be spelled right."""

    def __init__(self, kb_texts: Iterable[str] = ()):
        known = {w.lower() for text in kb_texts for w in latin_words(text)}
        self.spelling = SpellingDetector(known)

    def tag(self, query: str, query_en: str | None = None) -> Tagging:
        """Tag one query (``query_en`` helps the meaning-based themes of non-English queries)."""
        language = detect_language(query)
        meaning = query if not query_en or query_en == query else f"{query}\n{query_en}"
        latin_only = set(script_counts(query)) <= {"en"}
        evidence = {
            "code_mixing": code_mixing(query),
            "misspelling": self.spelling(query) if language == "en" else [],
            "non_native_english": non_native_english(query) if language == "en" and latin_only else [],
            "cultural": cultural(meaning),
            "patient_specific": patient_specific(meaning),
        }
        themes = [t for t in TAGGED_THEMES if evidence.get(t)]
        return Tagging(language=language, themes=themes, evidence={k: v for k, v in evidence.items() if v})


# -- report -----------------------------------------------------------------------------------------
def theme_report(true: Sequence[Iterable[str]], pred: Sequence[Iterable[str]],
                 themes: Sequence[str] = TAGGED_THEMES):
    """Per-theme precision, recall, F1 and support (scikit-learn) as a DataFrame, one row per theme."""
    import pandas as pd
    from sklearn.metrics import precision_recall_fscore_support
    from sklearn.preprocessing import MultiLabelBinarizer

    binarizer = MultiLabelBinarizer(classes=list(themes))
    y_true = binarizer.fit_transform([[t for t in labels if t in themes] for labels in true])
    y_pred = binarizer.transform([[t for t in labels if t in themes] for labels in pred])
    precision, recall, f1, support = precision_recall_fscore_support(y_true, y_pred, average=None, zero_division=0)
    return pd.DataFrame({"theme": list(themes), "precision": precision, "recall": recall, "f1": f1,
                         "support": support, "predicted": y_pred.sum(axis=0)})


def language_accuracy(true: Sequence[str], pred: Sequence[str]) -> float:
    """Share of queries whose detected language equals the label (scikit-learn accuracy)."""
    from sklearn.metrics import accuracy_score

    return float(accuracy_score(list(true), list(pred)))


def report_markdown(report, n_queries: int, lang_acc: float | None = None) -> str:
    """The per-theme report as a Markdown table (for dataset READMEs)."""
    lines = ["| theme | precision | recall | F1 | support | predicted |", "|---|---:|---:|---:|---:|---:|"]
    for r in report.itertuples():
        lines.append(f"| {r.theme} | {r.precision:.2f} | {r.recall:.2f} | {r.f1:.2f} | {r.support} | {r.predicted} |")
    foot = f"\n\n{n_queries} queries."
    if lang_acc is not None:
        foot += f" Language detected from the text agrees with the label for {lang_acc:.1%} of them."
    return "\n".join(lines) + foot


# -- command ------------------------------------------------------------------------------------------
def _load_for_tagging(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[str], Path]:
    """Raw query records (language and themes may be missing) and the KB texts."""
    issues: list[Issue] = []
    queries_file, kb_file, _ = find_dataset_files(path, issues)
    if queries_file is None:
        raise UserError(str(issues[0]) if issues else f"{path}: no queries file")
    records, read_issues = read_records(queries_file)
    kb_records, kb_issues = read_records(kb_file) if kb_file is not None else ([], [])
    problems = [i for i in [*issues, *read_issues, *kb_issues] if i.severity == "error"]
    for line, rec in records:
        if not isinstance(rec.get("query"), str) or not rec["query"].strip():
            problems.append(Issue(str(queries_file), line, "query", "missing or empty; every record needs a query"))
    if problems:
        more = f" (+{len(problems) - 1} more; run `python -m pipeline validate {path}`)" if len(problems) > 1 else ""
        raise UserError(f"{problems[0]}{more}")
    kb_texts = [f"{r.get('title') or ''} {r.get('text') or ''}" for _, r in kb_records]
    return records, kb_texts, queries_file


def _has_labels(records: list[tuple[int, dict[str, Any]]], key: str) -> bool:
    return any(rec.get(key) not in (None, "", []) for _, rec in records)


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [t.strip() for t in value.split(";") if t.strip()]
    return [str(t) for t in value or []]


def _tagged_record(rec: dict[str, Any], tagging: Tagging) -> dict[str, Any]:
    """The record with the tagger's themes (keeping a hand-labelled out_of_kb) and a language if it had none."""
    out = dict(rec)
    hand = _as_list(rec.get("themes"))
    out["themes"] = tagging.themes + (["out_of_kb"] if "out_of_kb" in hand else [])
    if not out.get("language"):
        out["language"] = tagging.language
    try:
        return Query.model_validate(out).model_dump(mode="json", exclude_none=True)
    except ValueError:
        return out


def tag_themes_command(path: str | Path, output: str | Path | None = None, force: bool = False) -> int:
    """CLI: tag every query; write tagged queries to ``output`` (JSONL; an existing file only with ``force``);
    report against hand labels if any."""
    from rich.table import Table

    from pipeline.console import make_console
    from pipeline.dataset.writing import write_dataset

    console = make_console(highlight=False, soft_wrap=True)
    path = Path(path)
    records, kb_texts, queries_file = _load_for_tagging(path)
    tagger = ThemeTagger(kb_texts)
    taggings = [tagger.tag(rec["query"], rec.get("query_en") if isinstance(rec.get("query_en"), str) else None)
                for _, rec in records]

    counts = Counter(t for tg in taggings for t in tg.themes)
    langs = Counter(tg.language for tg in taggings)
    console.print(f"tagged {len(records)} queries from {queries_file}: "
                  + ", ".join(f"{t} {counts[t]}" for t in TAGGED_THEMES)
                  + "; languages " + ", ".join(f"{c} {langs[c]}" for c in LANGUAGES if langs[c]))

    if output is not None:
        output = Path(output)
        text = "".join(json.dumps(_tagged_record(rec, tg), ensure_ascii=False) + "\n"
                       for (_, rec), tg in zip(records, taggings, strict=True))
        write_dataset(output.parent, {output.name: text}, command="tag-themes", force=force)
        console.print(f"wrote {output}")

    if _has_labels(records, "themes"):
        report = theme_report([_as_list(rec.get("themes")) for _, rec in records], [tg.themes for tg in taggings])
        table = Table(title="tagger vs hand labels")
        for col in ("theme", "precision", "recall", "F1", "support", "predicted"):
            table.add_column(col, justify="left" if col == "theme" else "right")
        for r in report.itertuples():
            table.add_row(r.theme, f"{r.precision:.2f}", f"{r.recall:.2f}", f"{r.f1:.2f}", str(r.support),
                          str(r.predicted))
        console.print(table)
        console.print("out_of_kb is not tagged (it needs retrieval); a hand-labelled out_of_kb is kept in the output")
    else:
        console.print("no hand-labelled themes in the dataset: nothing to compare against")
    if _has_labels(records, "language"):
        labelled = [(str(rec.get("language")), tg.language) for (_, rec), tg in zip(records, taggings, strict=True)
                    if rec.get("language")]
        acc = language_accuracy([t for t, _ in labelled], [p for _, p in labelled])
        console.print(f"language: detected = labelled for {acc:.1%} of {len(labelled)} labelled queries")
    return 0
