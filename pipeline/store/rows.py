"""The results database's rows: one typed row class per written table.

Over 450 lines by design: one dataclass per written table, whose fields are the schema, so every column is read in one
place.

Every written table is a dataclass here: its fields are the table's columns (the DuckDB types follow from the
annotations, ``pipeline/store/schema.py``), ``TABLE`` its name and ``KEY`` its natural key. The writer accepts only
these rows, so a row is built in one place. Their base (``Row``, ``now``, ``text_hash``) is ``row.py``, re-exported
here; the arena's votes and pairwise verdicts are ``arena_rows.py``. The store's schema collects every row class
these two modules define (``pipeline.store.schema.SCHEMA``); a step's own row classes may live in its module
(``Step.rows``: the catalog adds their tables).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Annotated, Any, ClassVar

from pipeline.dataset import Chunk, Dataset, Query
from pipeline.store.row import TEXT_HASH_SQL, Row, now, text_hash  # noqa: F401  (re-exported: the rows' base)

BigInt = Annotated[int, "BIGINT"]


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
    kb_hash: str | None = None  # its knowledge base as the latest run saw it (``Dataset.kb_hash``; NULL: closed-book)

    @classmethod
    def of(cls, dataset: Dataset) -> DatasetRow:
        return cls(name=dataset.name, path=str(dataset.path), closed_book=dataset.closed_book,
                   n_queries=len(dataset.queries), n_chunks=len(dataset.chunks), content_hash=dataset.content_hash(),
                   kb_hash=dataset.kb_hash)


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
    # optional query fields (docs/datasets.md); options, rubric and messages as JSON text
    asked_on: date | None = None
    script: str | None = None
    variant_of: str | None = None
    options: str | None = None
    answer: str | None = None
    rubric: str | None = None
    messages: str | None = None
    query_en_source: str | None = None
    variant_kind: str | None = None  # a generated variant's kind (``pipeline variants``), e.g. ``misspelled``
    variant_made: str | None = None  # its generator and settings as JSON text

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
                   messages=as_json(q.messages), query_en_source=q.query_en_source,
                   variant_kind=q.variant.kind if q.variant else None,
                   variant_made=json.dumps({"generator": q.variant.generator, "settings": q.variant.settings},
                                           ensure_ascii=False, sort_keys=True) if q.variant else None)


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
    kb_hash: str | None = None  # the KB the chunks were retrieved from (``Dataset.kb_hash``); NULL: not recorded


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
    kb_hash: str | None = None  # the KB of the chunks in the prompt (its retrieval's); NULL: closed-book or unrecorded
    engine: str | None = None  # what computed it where a provider has two (llamacpp/: llama-cpp-python or xllamacpp)

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


LEXICAL = ("rouge_l", "chrf", "bleu", "meteor", "cosine")  # LexicalRow's score columns


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
