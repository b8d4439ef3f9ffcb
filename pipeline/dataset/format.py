"""The dataset format (docs/datasets.md): one pydantic model per record.

Over 450 lines: one pydantic model per record of the format, with the validators that give each field its one-line
error; the format is read as a whole (docs/datasets.md).

``Chunk`` is a knowledge-base chunk, ``Query`` a query with its ground truth and optional fields
(date asked, script, variant, multiple-choice options, HealthBench rubric and conversation).
A model checks one record; checks across records (duplicate ids, references between queries,
chunks and rubrics) are in ``pipeline.dataset.loader``, file reading in ``pipeline.dataset.records``,
languages and scripts in ``pipeline.dataset.languages`` (all re-exported here).
"""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pipeline.dataset.languages import (
    LANGUAGE_TABLE,
    LANGUAGES,
    derived_script,
    dominant_script,
    script_counts,
    script_letters,
)
from pipeline.dataset.records import FORMATS, Issue, Record, find_dataset_files, read_records
from pipeline.prompts import load_text

__all__ = [  # the readers are re-exported: pipeline.dataset.format was their home
    "FORMATS", "LANGUAGES", "LANGUAGE_TABLE", "REFUSAL_SENTENCE", "THEMES", "Chunk", "Criterion", "Issue",
    "Query", "Record", "RubricEntry", "Turn", "UpdateCheck", "derived_script", "dominant_script",
    "find_dataset_files", "read_records", "script_counts", "script_letters",
]


THEMES: tuple[str, ...] = (
    "misspelling", "code_mixing", "non_native_english", "cultural", "patient_specific", "out_of_kb",
)
REFUSAL_SENTENCE = load_text("refusal.txt")  # the paper's refusal (Figure 3), in one file
MAX_TEXT_CHARS = 20_000
OPTION_LETTERS = "ABCDEFGHIJ"


# -- record schemas ----------------------------------------------------------------------------
def _is_blank(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def _id_before(v: Any) -> Any:
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return v


def _id_after(v: str) -> str:
    v = v.strip()
    if not v:
        raise ValueError("must not be empty")
    if ";" in v:
        raise ValueError(f"{v!r} contains ';', which separates list items in CSV; pick another id")
    return v


def _text_after(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    if len(v) > MAX_TEXT_CHARS:
        raise ValueError(f"{len(v):,} characters, over the limit of {MAX_TEXT_CHARS:,}; split or shorten it")
    return v


Identifier = Annotated[str, BeforeValidator(_id_before), AfterValidator(_id_after)]
Text = Annotated[str, AfterValidator(_text_after)]


def _split_list(v: Any) -> Any:
    """``None``/blank -> []; ``"a; b"`` (CSV) -> ["a", "b"]; arrays -> lists."""
    if _is_blank(v):
        return []
    if isinstance(v, str):
        return [item.strip() for item in v.split(";") if item.strip()]
    if hasattr(v, "tolist") and not isinstance(v, list):
        return v.tolist()
    return v


def _parse_date(v: Any) -> Any:
    if _is_blank(v):
        return None
    if isinstance(v, datetime):
        return v.date()
    if isinstance(v, date):
        return v
    if isinstance(v, str):
        s = v.strip()
        try:
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", s):
                return date.fromisoformat(s)
            return datetime.fromisoformat(s).date()
        except ValueError:
            pass
    raise ValueError(f"bad date {v!r}: use an ISO date, YYYY-MM-DD")


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Chunk(_Record):
    """One knowledge-base chunk: raw text from the curated documents, or a later update."""

    chunk_id: Identifier
    kind: Literal["raw", "update"]
    title: Text
    text: Text
    source: str = Field(max_length=MAX_TEXT_CHARS)
    updated: date | None = Field(None, validate_default=True)
    supersedes: list[Identifier] = Field(default_factory=list, validate_default=True)
    # where an ingested chunk came from (``ingest-kb``: source file, sha256, pages, heading path, tokens; for a
    # chunk of OCR'd PDF pages also ``ocr: true`` and ``ocr_confidence``, Tesseract's mean word confidence 0-100);
    # excluded from dumps, so the content hash and the stored rows stay what they were
    provenance: dict[str, Any] | None = Field(None, exclude=True)

    @field_validator("kind", mode="before")
    @classmethod
    def _kind_lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("updated", mode="before")
    @classmethod
    def _updated_date(cls, v: Any) -> Any:
        return _parse_date(v)

    @field_validator("updated")
    @classmethod
    def _updated_required(cls, v: date | None, info: ValidationInfo) -> date | None:
        if v is None and info.data.get("kind") == "update":
            raise ValueError("required for update chunks (an ISO date, e.g. 2024-03-01)")
        return v

    @field_validator("supersedes", mode="before")
    @classmethod
    def _supersedes_list(cls, v: Any) -> Any:
        return _split_list(v)

    @field_validator("supersedes")
    @classmethod
    def _only_updates_supersede(cls, v: list[str], info: ValidationInfo) -> list[str]:
        if v and info.data.get("kind") == "raw":
            raise ValueError("only update chunks can supersede; set kind to 'update' or drop supersedes")
        return v


def _json_text(v: Any, expected: str) -> Any:
    """A value that CSV carries as JSON text: blank -> None, text -> parsed JSON, anything else unchanged."""
    if _is_blank(v):
        return None
    if isinstance(v, str):
        try:
            return json.loads(v)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON ({exc.msg}); expected {expected}") from None
    if hasattr(v, "tolist") and not isinstance(v, (list, dict)):
        return v.tolist()
    return v


class UpdateCheck(_Record):
    """What a safety check looks for in an answer to an update-sensitive query."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    expect_any: list[str] = Field(default_factory=list)
    superseded_any: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _not_empty(self) -> UpdateCheck:
        if not self.expect_any and not self.superseded_any:
            raise ValueError("give expect_any and/or superseded_any (lists of phrases)")
        return self


class Criterion(_Record):
    """One HealthBench-style rubric criterion: a checkable statement and the points a response earns when it holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    criterion: Text
    points: float
    tags: list[str] = Field(default_factory=list)

    @field_validator("criterion", mode="before")
    @classmethod
    def _criterion_text(cls, v: Any) -> Any:
        if v is None:
            raise ValueError("has no text: a criterion is a statement a grader can check")
        return v

    @field_validator("points", mode="before")
    @classmethod
    def _points_number(cls, v: Any) -> Any:
        if v is None or isinstance(v, bool) or (isinstance(v, str) and not v.strip()):
            raise ValueError("has no points: give a non-zero number (negative for harmful content)")
        return v

    @field_validator("points")
    @classmethod
    def _points_nonzero(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError(f"must be a finite number, got {v!r}")
        if v == 0:
            raise ValueError("must not be 0: a criterion earns positive points, or negative ones when it is harmful")
        return int(v) if float(v).is_integer() else v

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_list(cls, v: Any) -> Any:
        return [] if v is None else v


class Turn(_Record):
    """One message of a multi-turn prompt (HealthBench's ``prompt``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["system", "user", "assistant"]
    content: Text


def _check_rubric(v: list[Criterion] | None) -> list[Criterion] | None:
    if v is None:
        return None
    if not v:
        raise ValueError("has no criteria; give at least one, or leave rubric out")
    if sum(c.points for c in v if c.points > 0) <= 0:
        raise ValueError("no criterion has positive points; the score divides by their sum, which is 0")
    return v


Rubric = Annotated[list[Criterion] | None, AfterValidator(_check_rubric)]


class RubricEntry(_Record):
    """One line of a dataset's ``rubrics.jsonl``: the rubric of one query, merged into it by ``query_id``."""

    query_id: Identifier
    rubric: Rubric

    @field_validator("rubric", mode="before")
    @classmethod
    def _rubric_json(cls, v: Any) -> Any:
        v = _json_text(v, '[{"criterion": ..., "points": ..., "tags": [...]}]')
        if v is None:
            raise ValueError("missing: give the query's criteria")
        return v


class VariantMade(_Record):
    """How a generated variant was made (``pipeline variants``): its kind, the generator and its settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Identifier
    generator: Text
    settings: dict[str, Any] = Field(default_factory=dict)


class Query(_Record):
    """One patient query with its doctor-approved ground-truth answer, and the optional fields of docs/datasets.md."""

    query_id: Identifier
    language: str
    query: Text
    query_en: Text | None = Field(None, validate_default=True)
    gt_response: Text
    themes: list[str] = Field(default_factory=list, validate_default=True)
    kb_refs: list[Identifier] = Field(default_factory=list, validate_default=True)
    update_sensitive: bool = False
    update_check: UpdateCheck | None = None
    # optional fields (docs/datasets.md); absent ones are left out of content_hash
    asked_on: date | None = None
    script: Literal["native", "latin"] | None = Field(None, validate_default=True)
    variant_of: Identifier | None = None
    options: dict[str, Text] | None = None
    answer: str | None = Field(None, validate_default=True)
    rubric: Rubric = None
    messages: list[Turn] | None = None
    query_en_source: Literal["human", "machine"] | None = Field(None, validate_default=True)
    variant: VariantMade | None = None
    # the chatbot-log message the query was curated from (``message_ref``); an update chunk made from the same
    # message carries it in its provenance, and the query never sees that chunk (retrieval's KB as it stood)
    source_message: str | None = Field(None, max_length=MAX_TEXT_CHARS)

    @field_validator("language", mode="before")
    @classmethod
    def _language_lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("language")
    @classmethod
    def _language_known(cls, v: str) -> str:
        if v not in LANGUAGES:
            known = ", ".join(LANGUAGES)
            raise ValueError(f"unknown language code {v!r} (known: {known}; add more in LANGUAGE_TABLE)")
        return v

    @field_validator("query_en", "variant_of", mode="before")
    @classmethod
    def _blank_none(cls, v: Any) -> Any:
        return None if _is_blank(v) else v

    @field_validator("themes", "kb_refs", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> Any:
        return _split_list(v)

    @field_validator("themes")
    @classmethod
    def _themes_known(cls, v: list[str]) -> list[str]:
        v = [t.strip() for t in v]
        unknown = [t for t in v if t not in THEMES]
        if unknown:
            raise ValueError(f"unknown theme(s) {', '.join(map(repr, unknown))} (known: {', '.join(THEMES)})")
        return list(dict.fromkeys(v))

    @field_validator("update_sensitive", mode="before")
    @classmethod
    def _blank_false(cls, v: Any) -> Any:
        return False if _is_blank(v) else v

    @field_validator("update_check", mode="before")
    @classmethod
    def _check_json(cls, v: Any) -> Any:
        return _json_text(v, '{"expect_any": [...]}')

    @field_validator("asked_on", mode="before")
    @classmethod
    def _asked_on_date(cls, v: Any) -> Any:
        return _parse_date(v)

    @field_validator("script", "query_en_source", mode="before")
    @classmethod
    def _lower_or_none(cls, v: Any) -> Any:
        if _is_blank(v):
            return None
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("script")
    @classmethod
    def _script_default(cls, v: str | None, info: ValidationInfo) -> str | None:
        lang, text = info.data.get("language"), info.data.get("query")
        if lang is None or text is None:
            return v
        if v is None:
            return derived_script(text, lang)
        if lang == "en" and v == "latin":
            raise ValueError("English is written in Latin script: its script is 'native' (or leave script out)")
        return v

    @field_validator("options", mode="before")
    @classmethod
    def _options_mapping(cls, v: Any) -> Any:
        v = _json_text(v, '{"A": "...", "B": "..."}')
        if v is None:
            return None
        if not isinstance(v, dict):
            raise ValueError(f"must map option letters to their text, e.g. {{\"A\": \"...\", \"B\": \"...\"}} "
                             f"(got {type(v).__name__})")
        return {(k.strip().upper() if isinstance(k, str) else k): t for k, t in v.items()}

    @field_validator("options")
    @classmethod
    def _options_lettered(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        if v is None:
            return None
        if len(v) < 2:
            raise ValueError(f"needs at least 2 options, got {len(v)}")
        letters = sorted(v)
        if letters != list(OPTION_LETTERS[:len(v)]):
            raise ValueError(f"must be lettered A, B, C… in order without gaps (at most {OPTION_LETTERS[-1]}); "
                             f"got {', '.join(letters)}")
        return {k: v[k] for k in letters}

    @field_validator("answer", mode="before")
    @classmethod
    def _answer_letter(cls, v: Any) -> Any:
        if _is_blank(v):
            return None
        return v.strip().upper() if isinstance(v, str) else v

    @field_validator("answer")
    @classmethod
    def _answer_in_options(cls, v: str | None, info: ValidationInfo) -> str | None:
        if "options" not in info.data:  # options itself was invalid: reported there
            return v
        options = info.data["options"]
        if options is None and v is not None:
            raise ValueError("given without options: a multiple-choice item needs both options and answer")
        if options is not None and v is None:
            raise ValueError(f"missing: options are given, so give the correct letter ({', '.join(options)})")
        if options is not None and v not in options:
            raise ValueError(f"{v!r} is not one of the options ({', '.join(options)})")
        return v

    @field_validator("rubric", mode="before")
    @classmethod
    def _rubric_json(cls, v: Any) -> Any:
        return _json_text(v, '[{"criterion": ..., "points": ..., "tags": [...]}]')

    @field_validator("variant", mode="before")
    @classmethod
    def _variant_json(cls, v: Any) -> Any:
        return _json_text(v, '{"kind": ..., "generator": ..., "settings": {...}}')

    @field_validator("variant")
    @classmethod
    def _variant_of_given(cls, v: VariantMade | None, info: ValidationInfo) -> VariantMade | None:
        if v is not None and info.data.get("variant_of") is None:
            raise ValueError("given without variant_of: it says how the variant of a query was made")
        return v

    @field_validator("messages", mode="before")
    @classmethod
    def _messages_json(cls, v: Any) -> Any:
        return _json_text(v, '[{"role": "user", "content": "..."}]')

    @field_validator("messages")
    @classmethod
    def _messages_end_with_user(cls, v: list[Turn] | None) -> list[Turn] | None:
        if v is None:
            return None
        if not v:
            raise ValueError("is empty; give the conversation, or leave messages out")
        if v[-1].role != "user":
            raise ValueError(f"the last message must be the user's (it is {v[-1].role!r}): the model answers it")
        late = [i for i, t in enumerate(v) if t.role == "system" and i > 0]
        if late:
            raise ValueError(f"a system message may only come first (message {late[0]} is one)")
        return v

    @field_validator("query_en_source")
    @classmethod
    def _source_of_query_en(cls, v: str | None, info: ValidationInfo) -> str | None:
        if "query_en" not in info.data:
            return v
        if info.data["query_en"] is None:
            if v is not None:
                raise ValueError("given without query_en: it says who wrote the English rendering")
            return None
        return v or "human"

    @property
    def search_text(self) -> str:
        """Text used for retrieval: the English rendering when there is one, else the query."""
        return self.query_en or self.query

    @property
    def multiple_choice(self) -> bool:
        """True for an item with options and an answer key."""
        return self.options is not None

    def content(self) -> dict[str, Any]:
        """The record as JSON, optional fields only when they say something (absent, derived and default ones
        left out), so a dataset's content hash stays what it was before the optional fields existed."""
        out = self.model_dump(mode="json")
        for name in OPTIONAL_FIELDS:
            if out.get(name) is None:
                out.pop(name, None)
        if out.get("script") == derived_script(self.query, self.language):
            out.pop("script")
        if out.get("query_en_source") == "human":
            out.pop("query_en_source")
        return out


OPTIONAL_FIELDS: tuple[str, ...] = (
    "asked_on", "script", "variant_of", "options", "answer", "rubric", "messages", "query_en_source", "variant",
    "source_message",
)


def message_ref(log_name: str, row: int) -> str:
    """The id of one chatbot-log message, ``<log file name>:<row>``: a curated query's ``source_message`` and the
    ``source_message`` in the provenance of an update chunk made from the same message's approved answer."""
    return f"{log_name}:{row}"


def chunk_source_message(chunk: Chunk) -> str | None:
    """The chatbot-log message an update chunk was made from (its provenance's ``source_message``), if known."""
    value = (chunk.provenance or {}).get("source_message")
    return value if isinstance(value, str) else None
