"""``pipeline variants``: every query of a dataset asked the ways Indian patients write it, as a new dataset.

Each kind is a declared transformation (``KINDS``: its name, what it applies to, its generator) that makes, from
one query, a new query with ``variant_of`` (the original) and ``variant`` (kind, generator, settings) and the
original's ground truth, rubric, themes, KB references and English rendering — so the same question is scored
against the same answer and retrieves from the same English text. Kinds (deterministic and seeded):

- ``romanized`` — a native-script query typed in Latin letters the casual way (``romanize``);
- ``native`` — a romanized query written back in its script (``romanize.native`` with word lists that are not the
  dataset's: Tesseract's language packs and wordfreq, ``lexicon``);
- ``misspelled`` — slips of the keyboard or of the script (``misspell``, nlpaug);
- ``code-mixed`` — content words swapped for the English words patients use (``codemix``, the project's lexicon);
- ``english`` — the query's English rendering (a human ``query_en``, or the translate step's stored one), the
  control.

The model-written kinds (``romanized-llm``, ``native-llm``, ``code-mixed-llm``: ``WRITTEN``) restate a query as
their deterministic namesake does, but in a model's words; they are declared here (what they apply to, the
variant's script) and written above the models layer (``pipeline/rewrite.py``, given to ``variants_command`` as
``writer``): this module only files what it wrote, or the reason it dropped a rewrite.

A query a kind does not apply to, or whose variant fails its check, is dropped and counted with the reason. The new
folder holds the originals (unchanged, with rubrics inline), the variants, the KB and the dataset's own prompts,
and ``variants_report.json`` (what was made, dropped and why, the variants' quality, a sample); it is written all
or nothing (``writing.write_dataset``) and never over the source folder. A rerun makes the same files.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rapidfuzz.distance import Levenshtein

from pipeline.dataset import codemix, lexicon, misspell, romanize
from pipeline.dataset.format import VariantMade
from pipeline.dataset.languages import in_script_of, script_letters
from pipeline.dataset.loader import Dataset, load_dataset
from pipeline.dataset.records import dataset_folder
from pipeline.dataset.writing import foreign_files, validated, write_dataset
from pipeline.errors import UserError

REPORT = "variants_report.json"
COMMAND = "variants"
SAMPLES = 3  # variants shown per kind in the report


class Dropped(Exception):
    """A kind does not apply to a query, or its variant failed the kind's check; the message is the reason."""


@dataclass
class Settings:
    """The settings of every kind (recorded in each variant's ``variant.settings``)."""

    seed: int = 0
    misspell_words: float = 0.3  # share of a query's words mistyped
    misspell_chars: float = 0.2  # per mistyped word, each letter's chance to be the one
    code_mix_rate: float = 1.0  # share of the lexicon's words swapped


@dataclass
class Made:
    text: str
    language: str
    script: str
    settings: dict[str, Any]
    quality: dict[str, float]
    themes: tuple[str, ...] = ()  # themes the variant adds (misspelling, code_mixing)
    english: bool = False  # the variant is the English rendering (no query_en of its own)


Written = dict[tuple[str, str], Made | str]  # (kind, query_id) -> a model-written variant, or why it was dropped


@dataclass
class Context:
    settings: Settings
    translations: dict[str, str]  # query_id -> the translate step's stored English rendering
    word_lists: dict[str, lexicon.Lexicon] = field(default_factory=dict)  # the languages' lists the kinds used
    written: Written = field(default_factory=dict)  # what the model-written kinds' writer made

    def lexicon(self, language: str) -> lexicon.Lexicon:
        self.word_lists[language] = lexicon.lexicon(language)
        return self.word_lists[language]


def _seed(settings: Settings, query_id: str, kind: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{settings.seed}:{query_id}:{kind}".encode()).digest()[:8], "big")


def _indic(q: Any) -> None:
    if q.language == "en":
        raise Dropped("an English query")
    if q.language not in romanize.SCRIPTS:
        raise Dropped(f"no casual romanization of language {q.language!r}")


def _to_latin(q: Any) -> None:
    _indic(q)
    if q.script == "latin":
        raise Dropped("already romanized")


def _to_native(q: Any) -> None:
    _indic(q)
    if q.script != "latin":
        raise Dropped("already in its script")


def _romanized(q: Any, ctx: Context) -> Made:
    _to_latin(q)
    text = romanize.romanize(q.query, q.language)
    back, total = romanize.round_trip(q.query, q.language, ctx.lexicon(q.language), codemix.english_words(),
                                      codemix.common_english)
    return Made(text, q.language, "latin", {"scheme": "casual"},
                {"round_trip_words": back / total if total else 1.0})


def _native(q: Any, ctx: Context) -> Made:
    _to_native(q)
    words = ctx.lexicon(q.language)
    text = romanize.native(q.query, q.language, words, codemix.english_words(), codemix.common_english)
    if script_letters(text, q.language) == 0:
        raise Dropped("no letter of its script came out")
    return Made(text, q.language, "native", {"scheme": "casual", "word_list": words.source},
                {"english_words": codemix.english_share(text, latin=False) or 0.0})


def _misspelled(q: Any, ctx: Context) -> Made:
    s = ctx.settings
    text = misspell.misspell(q.query, seed=_seed(s, q.query_id, "misspelled"), word_rate=s.misspell_words,
                             char_rate=s.misspell_chars)
    if text == q.query:
        raise Dropped("no word long enough to misspell")
    return Made(text, q.language, q.script or "native",
                {"seed": s.seed, "word_rate": s.misspell_words, "char_rate": s.misspell_chars,
                 "script": misspell.script_of(q.query)},
                {"edit_rate": Levenshtein.normalized_distance(q.query, text)}, themes=("misspelling",))


def _code_mixed(q: Any, ctx: Context) -> Made:
    _indic(q)
    s = ctx.settings
    latin = q.script == "latin"
    text, swapped = codemix.code_mix(q.query, q.language, latin=latin, seed=_seed(s, q.query_id, "code-mixed"),
                                     rate=s.code_mix_rate)
    if not swapped:
        raise Dropped("no word the lexicon knows")
    return Made(text, q.language, q.script or "native", {"seed": s.seed, "rate": s.code_mix_rate},
                {"english_words": codemix.english_share(text, latin=latin) or 0.0}, themes=("code_mixing",))


def _english(q: Any, ctx: Context) -> Made:
    if q.language == "en":
        raise Dropped("an English query")
    text, source = (q.query_en, q.query_en_source or "human") if q.query_en else (
        ctx.translations.get(q.query_id), "machine")
    if not text:
        raise Dropped("no English rendering (no query_en; give --db with the translate stage's renderings)")
    if not in_script_of(text, "en"):
        raise Dropped("the English rendering is not in Latin letters")
    return Made(text, "en", "native", {"rendering": source}, {}, english=True)


@dataclass(frozen=True)
class WrittenKind:
    """A kind a model writes: the deterministic kind it restates a query as (its prompt is
    ``pipeline/prompts/rewrite_<as_kind>.txt``), which queries it applies to, and the variant's script."""

    name: str
    as_kind: str
    applies: Callable[[Any], None]  # raises Dropped for a query it does not apply to (asked of no model)
    script: Callable[[Any], Literal["native", "latin"]]
    themes: tuple[str, ...] = ()

    def target(self, q: Any) -> str:
        """The language whose script the rewrite must be written in (``en``: Latin letters)."""
        return "en" if self.script(q) == "latin" else q.language


WRITTEN: dict[str, WrittenKind] = {w.name: w for w in (
    WrittenKind("romanized-llm", "romanized", _to_latin, lambda q: "latin"),
    WrittenKind("native-llm", "native", _to_native, lambda q: "native"),
    WrittenKind("code-mixed-llm", "code-mixed", _indic, lambda q: q.script or "native", themes=("code_mixing",)),
)}
WRITTEN_GENERATOR = ("a model's rewrite (--model; pipeline/prompts/rewrite_<kind>.txt), kept when it is in the "
                     "kind's script and its back-translation by the same model keeps the original's meaning "
                     "(pipeline/rewrite.py)")


def _written(name: str) -> Callable[[Any, Context], Made]:
    def make(q: Any, ctx: Context) -> Made:
        WRITTEN[name].applies(q)
        made = ctx.written.get((name, q.query_id), "not written (no --model)")
        if isinstance(made, str):
            raise Dropped(made)
        return made

    return make


@dataclass(frozen=True)
class Kind:
    name: str
    make: Callable[[Any, Context], Made]
    generator: str
    about: str


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("romanized", _romanized, "indic-transliteration ISO 15919 + casual rules (romanize.py)",
         "a native-script query typed in Latin letters as people type it"),
    Kind("native", _native, "casual Latin -> the word lists' word for it (lexicon.py: Tesseract's language packs, "
                            "wordfreq), else indic-transliteration by rule (romanize.py)",
         "a romanized query written back in its own script"),
    Kind("misspelled", _misspelled, misspell.GENERATOR + " (misspellings.json for Indian scripts)",
         "keyboard and script slips, seeded"),
    Kind("code-mixed", _code_mixed, codemix.GENERATOR,
         "content words swapped for the English words patients use"),
    Kind("english", _english, "the query's English rendering (query_en or the translate step's)",
         "the query in English: the control"),
    *(Kind(w.name, _written(w.name), WRITTEN_GENERATOR, f"{w.as_kind}, written by a model") for w in WRITTEN.values()),
)}


def parse_kinds(text: str) -> list[str]:
    """``--kinds``: comma-separated kind names, each known (UserError naming the unknown ones)."""
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise UserError(f"--kinds {text!r}: unknown kind(s) {', '.join(map(repr, unknown)) or '(none given)'} "
                        f"(known: {', '.join(KINDS)})")
    return list(dict.fromkeys(kinds))


def variant_id(query_id: str, kind: str) -> str:
    return f"{query_id}~{kind}"


@dataclass
class Outcome:
    """What ``make_variants`` made: the variants in order, and per kind the counts, drop reasons and quality."""

    variants: list[Any] = field(default_factory=list)
    made: Counter[str] = field(default_factory=Counter)
    dropped: dict[str, Counter[str]] = field(default_factory=dict)
    quality: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    samples: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    word_lists: dict[str, lexicon.Lexicon] = field(default_factory=dict)  # per language, what native/round trip read

    def report(self) -> dict[str, Any]:
        """Per kind: made, dropped by reason, each quality measure's mean, a sample."""
        kinds = sorted(set(self.made) | set(self.dropped))
        return {k: {"made": self.made[k], "dropped": dict(sorted(self.dropped.get(k, Counter()).items())),
                    "quality": {m: round(sum(v) / len(v), 4) for m, v in sorted(self.quality.get(k, {}).items())
                                if v},
                    "sample": self.samples.get(k, [])} for k in kinds}


def _restatable(q: Any, kind: str, existing: set[str]) -> None:
    """Raise Dropped when no variant of ``kind`` is made of ``q`` whatever the kind does."""
    if q.messages is not None:
        raise Dropped("a multi-turn conversation")
    if variant_id(q.query_id, kind) in existing:
        raise Dropped("the dataset already holds it")


def to_write(dataset: Dataset, kind: str) -> list[Any]:
    """The queries of ``dataset`` a model is asked to restate as the model-written ``kind`` (the rest are dropped
    without a call, for the reason ``make_variants`` counts)."""
    existing = {q.query_id for q in dataset.queries}
    out = []
    for q in dataset.queries:
        try:
            if q.variant is None:
                _restatable(q, kind, existing)
                WRITTEN[kind].applies(q)
                out.append(q)
        except Dropped:
            pass
    return out


def make_variants(dataset: Dataset, kinds: list[str], settings: Settings | None = None,
                  translations: dict[str, str] | None = None, written: Written | None = None) -> Outcome:
    """The variants of every query of ``dataset`` (not of the variants it already holds, nor multi-turn ones) of
    ``kinds``, with what was dropped and why; ``written``: what the model-written kinds' writer made."""
    settings = settings or Settings()
    ctx = Context(settings, translations or {}, written=written or {})
    existing = {q.query_id for q in dataset.queries}
    out = Outcome()
    for kind_name in kinds:
        kind = KINDS[kind_name]
        for q in dataset.queries:
            if q.variant is not None:
                continue
            try:
                _restatable(q, kind.name, existing)
                made = kind.make(q, ctx)
            except Dropped as why:
                out.dropped.setdefault(kind.name, Counter())[str(why)] += 1
                continue
            out.variants.append(_variant_query(q, kind, made))
            out.made[kind.name] += 1
            for m, v in made.quality.items():
                out.quality.setdefault(kind.name, {}).setdefault(m, []).append(v)
            if len(out.samples.setdefault(kind.name, [])) < SAMPLES:
                out.samples[kind.name].append({"query_id": q.query_id, "original": q.query, "variant": made.text})
    out.word_lists = dict(sorted(ctx.word_lists.items()))
    return out


def _variant_query(q: Any, kind: Kind, made: Made) -> Any:
    record = q.content()
    record.update(query_id=variant_id(q.query_id, kind.name), query=made.text, language=made.language,
                  script=made.script, variant_of=q.query_id,
                  themes=list(dict.fromkeys([*q.themes, *made.themes])),
                  variant=VariantMade(kind=kind.name, generator=kind.generator,
                                      settings=made.settings).model_dump(mode="json"))
    if made.english:
        record.update(query_en=None, query_en_source=None)
    elif q.query_en is not None:  # the original's English rendering: the variant retrieves from the same text
        record.update(query_en=q.query_en, query_en_source=q.query_en_source)
    record.pop("messages", None)
    return type(q).model_validate(record)


def _jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def dataset_files(dataset: Dataset, variants: list[Any]) -> dict[str, str]:
    """The new folder's files: the originals and the variants, the KB, the dataset's own prompts."""
    files = {"queries.jsonl": _jsonl([{**q.content(), "script": q.script}  # said, as a romanized one needs
                                      for q in [*dataset.queries, *variants]])}
    if dataset.chunks:
        files["kb.jsonl"] = _jsonl([c.model_dump(mode="json") for c in dataset.chunks])
    folder = dataset_folder(dataset.path)
    prompts = folder / "prompts" if folder is not None else None
    if prompts is not None and prompts.is_dir():
        for path in sorted(prompts.glob("*.txt")):
            files[f"prompts/{path.name}"] = path.read_text(encoding="utf-8")
    return files


Writer = Callable[[Dataset, list[str]], tuple[Written, dict[str, Any]]]  # (made or why, the report's "model")


def variants_command(source: Path, kinds: list[str], out: Path, settings: Settings,
                     translations: dict[str, str] | None = None, *, force: bool = False,
                     echo: Callable[[str], None] = print, writer: Writer | None = None) -> Outcome:
    """Make the variants of ``source`` into the new dataset folder ``out`` (all or nothing); prints a summary.
    ``writer``: writes the model-written kinds among ``kinds`` (``pipeline/rewrite.py``)."""
    src_folder = dataset_folder(source)
    if src_folder is not None and out.resolve() == src_folder.resolve():
        raise UserError(f"--out {out}: is the source dataset; the original is never changed, give a new folder")
    by_model = [k for k in kinds if k in WRITTEN]
    if by_model and writer is None:
        raise UserError(f"--kinds {','.join(by_model)}: model-written kinds; give --model provider/name")
    dataset = load_dataset(source)
    written, model = writer(dataset, by_model) if by_model and writer is not None else ({}, None)
    outcome = make_variants(dataset, kinds, settings, translations, written)
    before: set[str] = set()
    if not foreign_files(out, ["queries.jsonl"], REPORT) and (out / "queries.jsonl").is_file():  # its own earlier
        before = {json.loads(line).get("query_id") for line in (out / "queries.jsonl").read_text(
            encoding="utf-8").splitlines() if line.strip()}
    report = {"source": str(source), "source_hash": dataset.content_hash(), "kinds": kinds,
              "settings": vars(settings), "generators": {k: KINDS[k].generator for k in kinds},
              "word_lists": {lang: w.source for lang, w in outcome.word_lists.items()},
              "per_kind": outcome.report()}
    if model is not None:
        report["model"] = model
    write_dataset(out, dataset_files(dataset, outcome.variants), command=COMMAND, report_name=REPORT,
                  report=report, force=force, check=validated)
    new = sum(1 for v in outcome.variants if v.query_id not in before)
    for k, r in report["per_kind"].items():
        dropped = ", ".join(f"{n} {why}" for why, n in r["dropped"].items()) or "none"
        quality = ", ".join(f"{m} {v:.3f}" for m, v in r["quality"].items())
        echo(f"{k}: {r['made']} made; dropped: {dropped}" + (f"; {quality}" if quality else ""))
    for lang, w in outcome.word_lists.items():
        if w.missing:
            echo(f"{lang} word list: {w.missing}; written with {w.source}, other words by rule")
    echo(f"{out}: {len(dataset.queries)} originals + {len(outcome.variants)} variants ({new} new)")
    return outcome
