"""The results database's schema: every table with its key, and the derived tables the writer keeps in step.

Two tables are derived, and the writer keeps them in step with their sources: after a batch is
written, the rows of every key it touched are recomputed in the same transaction, so they never
disagree. ``item_scores``: one row per judged item (dataset, query, model, judge) with each
metric's mean over its parsed samples and the item's judgment counts. ``response_facts``: one
row per response with its error flag, lexical scores and safety-check outcomes. The leaderboard
reads them instead of regrouping four judgment rows per item and scanning three tables.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import NamedTuple

from pipeline.config import SAFETY_CHECKS
from pipeline.metrics import METRICS

SCHEMA_VERSION = 3  # 2: item_scores; 3: response_facts
LEXICAL = ("rouge_l", "chrf", "bleu", "meteor", "cosine")  # lexical_scores' score columns

# table -> (DDL columns, primary key). Identifiers in SQL come only from this fixed map.
TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "datasets": (
        "name VARCHAR, path VARCHAR, closed_book BOOLEAN, n_queries INTEGER, n_chunks INTEGER, "
        "content_hash VARCHAR, loaded_at TIMESTAMP",
        ("name",),
    ),
    "queries": (
        "dataset VARCHAR, query_id VARCHAR, language VARCHAR, query VARCHAR, query_en VARCHAR, "
        "gt_response VARCHAR, themes VARCHAR[], kb_refs VARCHAR[], update_sensitive BOOLEAN",
        ("dataset", "query_id"),
    ),
    "kb_chunks": (
        "dataset VARCHAR, chunk_id VARCHAR, kind VARCHAR, title VARCHAR, text VARCHAR, "
        "source VARCHAR, updated DATE",
        ("dataset", "chunk_id"),
    ),
    "retrievals": (
        "dataset VARCHAR, query_id VARCHAR, search_text VARCHAR, raw_ids VARCHAR[], "
        "update_ids VARCHAR[], recall DOUBLE, settings VARCHAR, created_at TIMESTAMP",
        ("dataset", "query_id"),
    ),
    "runs": (
        "run_id VARCHAR, name VARCHAR, kind VARCHAR, dataset VARCHAR, config VARCHAR, "
        "config_hash VARCHAR, code_revision VARCHAR, model_files VARCHAR, started_at TIMESTAMP, "
        "finished_at TIMESTAMP, status VARCHAR, backend_calls BIGINT, cache_hits BIGINT, "
        "retries BIGINT, errors BIGINT, summary VARCHAR",
        ("run_id",),
    ),
    "responses": (
        "dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, run_id VARCHAR, prompt_hash VARCHAR, "
        "text VARCHAR, error VARCHAR, latency_s DOUBLE, prompt_tokens INTEGER, "
        "completion_tokens INTEGER, cached BOOLEAN, created_at TIMESTAMP",
        ("dataset", "query_id", "model_id"),
    ),
    "judgments": (
        "dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, judge_id VARCHAR, metric VARCHAR, "
        "sample INTEGER, score INTEGER, parse_ok BOOLEAN, justification VARCHAR, raw_output VARCHAR, "
        "response_hash VARCHAR, run_id VARCHAR, cached BOOLEAN, created_at TIMESTAMP",
        ("dataset", "query_id", "model_id", "judge_id", "metric", "sample"),
    ),
    "lexical_scores": (
        "dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, response_hash VARCHAR, "
        f"{', '.join(f'{c} DOUBLE' for c in LEXICAL)}, created_at TIMESTAMP",
        ("dataset", "query_id", "model_id"),
    ),
    "critiques": (
        "dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, critic_id VARCHAR, classifier VARCHAR, "
        "critique VARCHAR, p_none DOUBLE, p_low DOUBLE, p_moderate DOUBLE, p_high DOUBLE, "
        "label VARCHAR, response_hash VARCHAR, run_id VARCHAR, created_at TIMESTAMP",
        ("dataset", "query_id", "model_id", "critic_id"),
    ),
    "safety_checks": (
        "dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, check_name VARCHAR, passed BOOLEAN, "
        "detail VARCHAR, response_hash VARCHAR, created_at TIMESTAMP",
        ("dataset", "query_id", "model_id", "check_name"),
    ),
    "human_labels": (
        "dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, metric VARCHAR, annotator VARCHAR, "
        "score INTEGER, comment VARCHAR, source VARCHAR, created_at TIMESTAMP",
        ("dataset", "query_id", "model_id", "metric", "annotator"),
    ),
    "judge_sanity": (
        "dataset VARCHAR, query_id VARCHAR, judge_id VARCHAR, metric VARCHAR, variant VARCHAR, "
        "kind VARCHAR, sample INTEGER, score INTEGER, parse_ok BOOLEAN, raw_output VARCHAR, "
        "created_at TIMESTAMP",
        ("dataset", "query_id", "judge_id", "metric", "variant", "sample"),
    ),
    "judge_reliability": (
        "dataset VARCHAR, judge_id VARCHAR, metric VARCHAR, auc DOUBLE, n_good INTEGER, "
        "n_bad INTEGER, n_unparsed INTEGER, run_id VARCHAR, created_at TIMESTAMP",
        ("dataset", "judge_id", "metric"),
    ),
    "llm_cache": (
        "key VARCHAR, model_id VARCHAR, request VARCHAR, text VARCHAR, top_logprobs VARCHAR, "
        "prompt_tokens INTEGER, completion_tokens INTEGER, latency_s DOUBLE, created_at TIMESTAMP",
        ("key",),
    ),
    "meta": ("key VARCHAR, value VARCHAR", ("key",)),
    # derived (see the module docstring); never written directly
    "item_scores": (
        f"dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, judge_id VARCHAR, "
        f"{', '.join(f'{m} DOUBLE' for m in METRICS)}, judgments INTEGER, unparsed INTEGER, samples INTEGER",
        ("dataset", "query_id", "model_id", "judge_id"),
    ),
    "response_facts": (
        f"dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, failed BOOLEAN, lexical BOOLEAN, "
        f"{', '.join(f'{c} DOUBLE' for c in LEXICAL)}, {', '.join(f'{c} BOOLEAN' for c in SAFETY_CHECKS)}",
        ("dataset", "query_id", "model_id"),
    ),
}


def _on(a: str, b: str, columns: tuple[str, ...]) -> str:
    return " AND ".join(f"{a}.{c} = {b}.{c}" for c in columns)


class Derived(NamedTuple):
    """A derived table: the tables it follows, its key, and the SELECT of its rows (alias ``alias``
    for the driving table; ``{touched}`` and ``{touched_s}`` join the touched keys ``k``)."""

    sources: tuple[str, ...]
    key: tuple[str, ...]
    alias: str
    select: str


_RESPONSE = ("dataset", "query_id", "model_id")
DERIVED: dict[str, Derived] = {
    "item_scores": Derived(("judgments",), (*_RESPONSE, "judge_id"), "j", (
        "SELECT j.dataset, j.query_id, j.model_id, j.judge_id, "
        + ", ".join(f"avg(j.score) FILTER (WHERE j.metric = '{m}' AND j.parse_ok) AS {m}" for m in METRICS)
        + ", count(*) AS judgments, count(*) FILTER (WHERE NOT j.parse_ok) AS unparsed, max(j.sample) + 1 AS samples "
        "FROM judgments j {touched} GROUP BY j.dataset, j.query_id, j.model_id, j.judge_id")),
    "response_facts": Derived(("responses", "lexical_scores", "safety_checks"), _RESPONSE, "r", (
        "SELECT r.dataset, r.query_id, r.model_id, r.error IS NOT NULL AS failed, l.query_id IS NOT NULL AS lexical, "
        f"{', '.join(f'l.{c}' for c in LEXICAL)}, {', '.join(f's.{c}' for c in SAFETY_CHECKS)} "
        "FROM responses r {touched} "
        f"LEFT JOIN lexical_scores l ON {_on('l', 'r', _RESPONSE)} "
        "LEFT JOIN (SELECT s.dataset, s.query_id, s.model_id, "
        + ", ".join(f"any_value(s.passed) FILTER (WHERE s.check_name = '{c}') AS {c}" for c in SAFETY_CHECKS)
        + f" FROM safety_checks s {{touched_s}} GROUP BY ALL) s ON {_on('s', 'r', _RESPONSE)}")),
}


def _refresh_sql(derived: str, keys_from: str | None) -> str:
    """INSERT OR REPLACE the rows of ``derived`` for the keys in relation ``keys_from`` (every row if None)."""
    d = DERIVED[derived]

    def touched(alias: str) -> str:
        return "" if keys_from is None else (
            f"JOIN (SELECT DISTINCT {', '.join(d.key)} FROM {keys_from}) k ON {_on('k', alias, d.key)}")

    return f"INSERT OR REPLACE INTO {derived} " + d.select.format(touched=touched(d.alias), touched_s=touched("s"))


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def text_hash(text: str | None) -> str:
    """Short content hash used to tie a score to the exact response text it scored."""
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()[:16]


