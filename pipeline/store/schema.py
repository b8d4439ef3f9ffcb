"""The results database's schema: one typed row class per table, and the derived tables kept in step.

Every written table is a dataclass here: its fields are the table's columns (the DuckDB types follow
from the annotations), ``KEY`` its natural key. The writer accepts only these rows, so a row is built
in one place. ``Store`` creates missing tables and adds missing columns to an existing database
(a new metric, a new field), backfilling what can be derived (``BACKFILL``).

Four tables are derived, and the writer keeps them in step with their sources: after a batch is
written, the rows of every key it touched are deleted and recomputed in the same transaction, so
they never disagree. Both count only what belongs to the response text now stored:

- ``item_scores``: one row per judged item (dataset, query, model, judge) with each metric's mean
  over its parsed samples and the item's judgment counts — only judgments whose ``response_hash``
  is the stored response's, and never of a response that errored.
- ``response_facts``: one row per response with its error flag and its current lexical scores and
  safety-check outcomes.

- ``rubric_items`` and ``rubric_tag_items``: per rubric item (dataset, query, model, grader), and per item and
  tag, HealthBench's sums over its current criterion grades and its score (``pipeline/store/derived_rubric.py``).

The leaderboard reads them instead of regrouping four judgment rows per item and scanning three tables.
"""

from __future__ import annotations

import dataclasses
import hashlib
import types
import typing
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Annotated, Any, ClassVar, NamedTuple

import pyarrow as pa

from pipeline.config import SAFETY_CHECKS
from pipeline.dataset import Chunk, Dataset, Query
from pipeline.metrics import METRICS
from pipeline.store import derived_rubric

SCHEMA_VERSION = 4  # 2: item_scores; 3: response_facts; 4: responses.response_hash, derived = current only
LEXICAL = ("rouge_l", "chrf", "bleu", "meteor", "cosine")  # lexical_scores' score columns
BigInt = Annotated[int, "BIGINT"]
PLAYGROUND = "playground"  # the dataset that holds the playground's saved answers


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def text_hash(text: str | None) -> str:
    """Short content hash used to tie a score to the exact response text it scored."""
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()[:16]


# SQL of text_hash, for backfills of databases written before a hash column existed
TEXT_HASH_SQL = "substr(sha256(coalesce({col}, '')), 1, 16)"


class Row:
    """Base of the row classes: ``TABLE`` names the table, ``KEY`` its primary key."""

    TABLE: ClassVar[str]
    KEY: ClassVar[tuple[str, ...]]


@dataclass(slots=True)
class DatasetRow(Row):
    TABLE: ClassVar[str] = "datasets"
    KEY: ClassVar[tuple[str, ...]] = ("name",)
    name: str
    path: str
    closed_book: bool
    n_queries: int | None
    n_chunks: int | None
    content_hash: str | None
    loaded_at: datetime = field(default_factory=now)

    @classmethod
    def of(cls, dataset: Dataset) -> DatasetRow:
        return cls(name=dataset.name, path=str(dataset.path), closed_book=dataset.closed_book,
                   n_queries=len(dataset.queries), n_chunks=len(dataset.chunks), content_hash=dataset.content_hash())


@dataclass(slots=True)
class QueryRow(Row):
    TABLE: ClassVar[str] = "queries"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id")
    dataset: str
    query_id: str
    language: str
    query: str
    query_en: str | None
    gt_response: str
    themes: list[str]
    kb_refs: list[str]
    update_sensitive: bool
    # optional query fields (DESIGN.md); options, rubric and messages as JSON text
    asked_on: date | None = None
    script: str | None = None
    variant_of: str | None = None
    options: str | None = None
    answer: str | None = None
    rubric: str | None = None
    messages: str | None = None
    query_en_source: str | None = None

    @classmethod
    def of(cls, dataset: str, q: Query) -> QueryRow:
        import json

        def as_json(value: Any) -> str | None:
            if value is None:
                return None
            if isinstance(value, list):
                value = [v.model_dump(mode="json") for v in value]
            return json.dumps(value, ensure_ascii=False)

        return cls(dataset=dataset, query_id=q.query_id, language=q.language, query=q.query, query_en=q.query_en,
                   gt_response=q.gt_response, themes=list(q.themes), kb_refs=list(q.kb_refs),
                   update_sensitive=q.update_sensitive, asked_on=q.asked_on, script=q.script,
                   variant_of=q.variant_of, options=as_json(q.options), answer=q.answer, rubric=as_json(q.rubric),
                   messages=as_json(q.messages), query_en_source=q.query_en_source)


@dataclass(slots=True)
class ChunkRow(Row):
    TABLE: ClassVar[str] = "kb_chunks"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "chunk_id")
    dataset: str
    chunk_id: str
    kind: str
    title: str
    text: str
    source: str
    updated: date | None

    @classmethod
    def of(cls, dataset: str, c: Chunk, *, prefix: str = "") -> ChunkRow:
        return cls(dataset=dataset, chunk_id=prefix + c.chunk_id, kind=c.kind, title=c.title, text=c.text,
                   source=c.source, updated=c.updated)


@dataclass(slots=True)
class RetrievalRow(Row):
    TABLE: ClassVar[str] = "retrievals"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id")
    dataset: str
    query_id: str
    search_text: str
    raw_ids: list[str]
    update_ids: list[str]
    recall: float | None
    settings: str
    created_at: datetime = field(default_factory=now)


@dataclass(slots=True)
class RunRow(Row):
    TABLE: ClassVar[str] = "runs"
    KEY: ClassVar[tuple[str, ...]] = ("run_id",)
    run_id: str
    name: str
    kind: str
    dataset: str
    config: str
    config_hash: str
    code_revision: str
    model_files: str
    started_at: datetime = field(default_factory=now)
    finished_at: datetime | None = None
    status: str = "running"
    backend_calls: BigInt = 0
    cache_hits: BigInt = 0
    retries: BigInt = 0
    errors: BigInt = 0
    summary: str | None = None


@dataclass(slots=True)
class ResponseRow(Row):
    """A model's answer to a query; ``response_hash`` is derived from the text (``text_hash``)."""

    TABLE: ClassVar[str] = "responses"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "model_id")
    dataset: str
    query_id: str
    model_id: str
    run_id: str | None
    prompt_hash: str | None
    text: str | None
    error: str | None
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached: bool = False
    created_at: datetime = field(default_factory=now)
    response_hash: str | None = None

    def __post_init__(self) -> None:
        self.response_hash = None if self.text is None else text_hash(self.text)


@dataclass(slots=True)
class JudgmentRow(Row):
    TABLE: ClassVar[str] = "judgments"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "model_id", "judge_id", "metric", "sample")
    dataset: str
    query_id: str
    model_id: str
    judge_id: str
    metric: str
    sample: int
    score: int | None
    parse_ok: bool
    justification: str
    raw_output: str
    response_hash: str
    run_id: str | None
    cached: bool = False
    created_at: datetime = field(default_factory=now)


@dataclass(slots=True)
class LexicalRow(Row):
    TABLE: ClassVar[str] = "lexical_scores"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "model_id")
    dataset: str
    query_id: str
    model_id: str
    response_hash: str
    rouge_l: float | None
    chrf: float | None
    bleu: float | None
    meteor: float | None
    cosine: float | None
    created_at: datetime = field(default_factory=now)


@dataclass(slots=True)
class CritiqueRow(Row):
    """A Med-CoDE critique and its disagreement distribution (NULLs and ``error`` when it failed)."""

    TABLE: ClassVar[str] = "critiques"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "model_id", "critic_id")
    dataset: str
    query_id: str
    model_id: str
    critic_id: str
    classifier: str
    critique: str
    p_none: float | None
    p_low: float | None
    p_moderate: float | None
    p_high: float | None
    label: str | None
    response_hash: str
    run_id: str | None
    created_at: datetime = field(default_factory=now)
    error: str | None = None


@dataclass(slots=True)
class SafetyCheckRow(Row):
    TABLE: ClassVar[str] = "safety_checks"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "model_id", "check_name")
    dataset: str
    query_id: str
    model_id: str
    check_name: str
    passed: bool | None
    detail: str
    response_hash: str
    created_at: datetime = field(default_factory=now)


@dataclass(slots=True)
class HumanLabelRow(Row):
    TABLE: ClassVar[str] = "human_labels"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "model_id", "metric", "annotator")
    dataset: str
    query_id: str
    model_id: str
    metric: str
    annotator: str
    score: int | None
    comment: str | None
    source: str
    created_at: datetime = field(default_factory=now)


@dataclass(slots=True)
class SanityRow(Row):
    TABLE: ClassVar[str] = "judge_sanity"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "judge_id", "metric", "variant", "sample")
    dataset: str
    query_id: str
    judge_id: str
    metric: str
    variant: str
    kind: str
    sample: int
    score: int | None
    parse_ok: bool
    raw_output: str
    created_at: datetime = field(default_factory=now)


@dataclass(slots=True)
class ReliabilityRow(Row):
    TABLE: ClassVar[str] = "judge_reliability"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "judge_id", "metric")
    dataset: str
    judge_id: str
    metric: str
    auc: float | None
    n_good: int
    n_bad: int
    n_unparsed: int
    run_id: str | None
    created_at: datetime = field(default_factory=now)


@dataclass(slots=True)
class CacheRow(Row):
    TABLE: ClassVar[str] = "llm_cache"
    KEY: ClassVar[tuple[str, ...]] = ("key",)
    key: str
    model_id: str
    request: str
    text: str | None
    top_logprobs: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float | None
    created_at: datetime = field(default_factory=now)


@dataclass(slots=True)
class AnswerCheckRow(Row):
    """Whether a response is correct: ``choice`` (the parsed option against the key) or ``llm`` (a checker
    model's verdict, Med-CoDE's LLM-Accuracy). ``correct`` NULL = could not be decided (unparsed)."""

    TABLE: ClassVar[str] = "answer_checks"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "model_id", "method", "checker_id")
    dataset: str
    query_id: str
    model_id: str
    method: str
    checker_id: str
    correct: bool | None
    parsed: str | None
    raw_output: str
    response_hash: str
    run_id: str | None
    created_at: datetime = field(default_factory=now)


@dataclass(slots=True)
class PlanRow(Row):
    """An item of a human-evaluation plan (``python -m pipeline human-eval plan``): what annotators label."""

    TABLE: ClassVar[str] = "annotation_plans"
    KEY: ClassVar[tuple[str, ...]] = ("plan_id", "dataset", "query_id", "model_id", "metric")
    plan_id: str
    dataset: str
    query_id: str
    model_id: str
    metric: str
    language: str
    annotators: int
    seed: int
    created_at: datetime = field(default_factory=now)


@dataclass(slots=True)
class TranslationRow(Row):
    """A machine rendering into English: of a query (``model_id`` '') for retrieval, or of a model's
    response for readers (never scored). ``source_hash`` ties it to the text it renders."""

    TABLE: ClassVar[str] = "translations"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "model_id", "translator_id")
    dataset: str
    query_id: str
    model_id: str
    translator_id: str
    source_hash: str
    text: str
    error: str | None = None
    created_at: datetime = field(default_factory=now)


@dataclass(slots=True)
class RubricGradeRow(Row):
    """A grader's verdict on one rubric criterion of one response (HealthBench): ``met`` NULL = unparsed, never
    counted as met or not met. ``criterion``, ``points`` and ``tags`` are the criterion as graded."""

    TABLE: ClassVar[str] = "rubric_grades"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "model_id", "grader_id", "criterion_index")
    dataset: str
    query_id: str
    model_id: str
    grader_id: str
    criterion_index: int
    criterion: str
    points: float
    tags: list[str]
    met: bool | None
    explanation: str
    raw_output: str
    response_hash: str
    run_id: str | None
    cached: bool = False
    created_at: datetime = field(default_factory=now)


@dataclass(slots=True)
class CriterionLabelRow(Row):
    """A physician's met / not met for one rubric criterion of one response (``import-criterion-labels``): what the
    rubric grader is meta-evaluated against. ``response_hash`` is the response labelled."""

    TABLE: ClassVar[str] = "criterion_labels"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "model_id", "criterion_index", "annotator")
    dataset: str
    query_id: str
    model_id: str
    criterion_index: int
    criterion: str
    annotator: str
    met: bool
    response_hash: str
    source: str
    created_at: datetime = field(default_factory=now)


@dataclass(slots=True)
class LabelledCritiqueRow(Row):
    """A critique with its disagreement label (Med-CoDE §3.1's GPT-4 step, ``medcode label``): training data of the
    critic and the classifier. ``source`` is the teacher's model id or an annotator's name; ``label`` NULL = the
    teacher's label could not be read (kept, counted, never exported); ``raw_output`` is what the teacher wrote."""

    TABLE: ClassVar[str] = "labelled_critiques"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "model_id", "source")
    dataset: str
    query_id: str
    model_id: str
    source: str
    critique: str
    label: str | None
    response_hash: str
    run_id: str | None
    created_at: datetime = field(default_factory=now)
    raw_output: str | None = None


@dataclass(slots=True)
class CritiqueLabelRow(Row):
    """An annotator's check of one Med-CoDE critique (§5.1, Table 1): the disagreement level they see between the
    response and the ground truth (``label``) and whether the critique is accurate (``critique_accurate``); either
    may be NULL (not given). The critique is a critic's (``critique_kind`` 'critic', ``critique_by`` its critic_id)
    or a teacher's labelled critique ('teacher', its source); ``critique_hash`` and ``response_hash`` are the texts
    labelled."""

    TABLE: ClassVar[str] = "critique_labels"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "model_id", "critique_kind", "critique_by", "annotator")
    dataset: str
    query_id: str
    model_id: str
    critique_kind: str
    critique_by: str
    annotator: str
    label: str | None
    critique_accurate: bool | None
    critique_hash: str
    response_hash: str
    comment: str | None
    source: str
    created_at: datetime = field(default_factory=now)


@dataclass(slots=True)
class MetaRow(Row):
    TABLE: ClassVar[str] = "meta"
    KEY: ClassVar[tuple[str, ...]] = ("key",)
    key: str
    value: str


def dataset_rows(dataset: Dataset) -> list[Row]:
    """The rows that store a dataset: itself, its queries and its chunks."""
    return [DatasetRow.of(dataset), *(QueryRow.of(dataset.name, q) for q in dataset.queries),
            *(ChunkRow.of(dataset.name, c) for c in dataset.chunks)]


ROW_CLASSES: tuple[type[Row], ...] = (
    DatasetRow, QueryRow, ChunkRow, RetrievalRow, RunRow, ResponseRow, JudgmentRow, LexicalRow, CritiqueRow,
    SafetyCheckRow, HumanLabelRow, SanityRow, ReliabilityRow, TranslationRow, PlanRow, AnswerCheckRow,
    CacheRow, MetaRow, RubricGradeRow, CriterionLabelRow, LabelledCritiqueRow, CritiqueLabelRow,
)
ROWS: dict[str, type[Row]] = {c.TABLE: c for c in ROW_CLASSES}


# -- column types --------------------------------------------------------------------------------------
_SQL_TYPES: dict[Any, str] = {str: "VARCHAR", int: "INTEGER", float: "DOUBLE", bool: "BOOLEAN",
                              datetime: "TIMESTAMP", date: "DATE"}
_ARROW_TYPES: dict[str, pa.DataType] = {
    "VARCHAR": pa.string(), "INTEGER": pa.int32(), "BIGINT": pa.int64(), "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(), "TIMESTAMP": pa.timestamp("us"), "DATE": pa.date32(), "VARCHAR[]": pa.list_(pa.string()),
}


def _sql_type(hint: Any) -> str:
    if typing.get_origin(hint) is Annotated:
        return typing.get_args(hint)[1]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return _sql_type(inner)
    if typing.get_origin(hint) is list:
        return _sql_type(typing.get_args(hint)[0]) + "[]"
    return _SQL_TYPES[hint]


def _columns(cls: type[Row]) -> tuple[tuple[str, str], ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return tuple((f.name, _sql_type(hints[f.name])) for f in dataclasses.fields(cls))


class TableSpec(NamedTuple):
    """A table's columns ((name, DuckDB type), in order) and primary key."""

    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([(name, _ARROW_TYPES[t]) for name, t in self.columns])


_RESPONSE = ("dataset", "query_id", "model_id")

# table -> spec. Identifiers in SQL come only from this fixed map.
TABLES: dict[str, TableSpec] = {
    **{c.TABLE: TableSpec(_columns(c), c.KEY) for c in ROW_CLASSES},
    # derived (see the module docstring); never written directly
    "item_scores": TableSpec((
        *((c, "VARCHAR") for c in (*_RESPONSE, "judge_id")), *((m, "DOUBLE") for m in METRICS),
        ("judgments", "INTEGER"), ("unparsed", "INTEGER"), ("samples", "INTEGER"),
    ), (*_RESPONSE, "judge_id")),
    "response_facts": TableSpec((
        *((c, "VARCHAR") for c in _RESPONSE), ("failed", "BOOLEAN"), ("lexical", "BOOLEAN"),
        *((c, "DOUBLE") for c in LEXICAL), *((c, "BOOLEAN") for c in SAFETY_CHECKS),
    ), _RESPONSE),
    **{t: TableSpec(columns, key) for t, (columns, key) in derived_rubric.SPECS.items()},
}

# Columns added after a table first shipped, and how to fill them in an older database.
BACKFILL: dict[tuple[str, str], str] = {
    ("responses", "response_hash"): f"CASE WHEN text IS NULL THEN NULL ELSE {TEXT_HASH_SQL.format(col='text')} END",
}


def _on(a: str, b: str, columns: tuple[str, ...]) -> str:
    return " AND ".join(f"{a}.{c} = {b}.{c}" for c in columns)


class Derived(NamedTuple):
    """A derived table: the tables it follows and the SELECT of its rows (alias ``alias`` for the
    driving table; ``{touched}`` and ``{touched_s}`` join the touched keys ``k``). ``watch`` names, per
    source, the columns it depends on: a write to that source touches only the keys whose values of
    those columns change (a run rewrites every query; only a changed rubric matters to the rubric tables)."""

    sources: tuple[str, ...]
    alias: str
    select: str
    watch: tuple[tuple[str, tuple[str, ...]], ...] = ()


DERIVED: dict[str, Derived] = {
    "item_scores": Derived(("judgments", "responses"), "j", (
        "SELECT j.dataset, j.query_id, j.model_id, j.judge_id, "
        + ", ".join(f"avg(j.score) FILTER (WHERE j.metric = '{m}' AND j.parse_ok) AS {m}" for m in METRICS)
        + ", count(*) AS judgments, count(*) FILTER (WHERE NOT j.parse_ok) AS unparsed, max(j.sample) + 1 AS samples "
        "FROM judgments j {touched} "
        f"JOIN responses r ON {_on('r', 'j', _RESPONSE)} AND r.response_hash = j.response_hash AND r.error IS NULL "
        "GROUP BY j.dataset, j.query_id, j.model_id, j.judge_id")),
    "response_facts": Derived(("responses", "lexical_scores", "safety_checks"), "r", (
        "SELECT r.dataset, r.query_id, r.model_id, r.error IS NOT NULL AS failed, l.query_id IS NOT NULL AS lexical, "
        f"{', '.join(f'l.{c}' for c in LEXICAL)}, {', '.join(f's.{c}' for c in SAFETY_CHECKS)} "
        "FROM responses r {touched} "
        f"LEFT JOIN lexical_scores l ON {_on('l', 'r', _RESPONSE)} AND l.response_hash = r.response_hash "
        "LEFT JOIN (SELECT s.dataset, s.query_id, s.model_id, s.response_hash, "
        + ", ".join(f"any_value(s.passed) FILTER (WHERE s.check_name = '{c}') AS {c}" for c in SAFETY_CHECKS)
        + f" FROM safety_checks s {{touched_s}} GROUP BY ALL) s ON {_on('s', 'r', _RESPONSE)} "
        "AND s.response_hash = r.response_hash")),
    # per rubric item, and per item and tag: HealthBench's sums over current grades (pipeline/store/derived_rubric.py)
    **{t: Derived(derived_rubric.SOURCES, derived_rubric.ALIAS, sql, derived_rubric.WATCH)
       for t, sql in derived_rubric.SELECTS.items()},
}


def refresh_sql(derived: str, keys_from: str | None = None, key_columns: tuple[str, ...] = ()) -> list[str]:
    """Statements that recompute ``derived`` for the keys in relation ``keys_from`` (all rows if None).

    ``key_columns`` are the columns of the derived key that ``keys_from`` has (a response key for a
    write to ``responses``, the whole key for ``judgments``). Rows of touched keys are deleted first,
    so a key whose sources no longer qualify (a regenerated response) loses its derived row. Rows are
    inserted BY NAME: a column added to an older database (a new metric) sits last in the table.
    """
    d = DERIVED[derived]
    if keys_from is None:
        return [f"DELETE FROM {derived}", f"INSERT INTO {derived} BY NAME "
                + d.select.format(touched="", touched_s="", touched_q="")]
    cols = ", ".join(key_columns)
    keys = f"(SELECT DISTINCT {cols} FROM {keys_from})"

    def touched(alias: str, columns: tuple[str, ...] = key_columns) -> str:
        return f"JOIN (SELECT DISTINCT {', '.join(columns)} FROM {keys_from}) k ON {_on('k', alias, columns)}"

    # ``{touched_q}``: the touched queries (alias q0), for a SELECT that reads per-query data (a rubric)
    per_query = ("dataset", "query_id")
    touched_q = touched("q0", per_query) if set(per_query) <= set(key_columns) else ""
    return [f"DELETE FROM {derived} USING {keys} k WHERE {_on('k', derived, key_columns)}",
            f"INSERT INTO {derived} BY NAME " + d.select.format(touched=touched(d.alias), touched_s=touched("s"),
                                                                touched_q=touched_q)]
