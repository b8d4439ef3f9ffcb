"""The by-model table: what Compare runs pairs of each answer, one row per response, keyed by model first.

The per-query tables are kept in (dataset, query, model) order (``Store.cluster``), which a one-query read needs; a
read of one or two models then skips no row group, and at 100× the paper's scale reading them (five tables, each
side's rows looked up in the others) was over the page's 300 ms alone. ``model_items`` holds, per response whose
query exists, what ``pipeline/read/compare.py`` pairs — whether it errored, its text's hash (NULL exactly when the
text is), its prompt's hash and run, whether its query has no language, its current lexical scores, Med-CoDE's
P(High) of its current text averaged over critics, and every judge's item scores as parallel lists (``judges``,
sorted, and one list per metric) — keyed (dataset, model_id, query_id), so that ``Store.cluster`` orders it by model
and a side is one read of its own row groups. It is recomputed by key with its sources, like every derived table.
"""

from __future__ import annotations

from pipeline.metrics import METRICS
from pipeline.store.derived import Derived, join_on
from pipeline.store.rows import LEXICAL

BY_MODEL = ("dataset", "model_id", "query_id")


DERIVED = (
    Derived("model_items", key=BY_MODEL, reads=("responses", "queries", "response_facts", "critiques", "item_scores"),
            alias="r", watch=(("queries", ("language",)),), select=(
        "SELECT r.dataset, r.model_id, r.query_id, r.error IS NOT NULL AS failed, r.response_hash, r.prompt_hash, "
        "r.run_id, q.language IS NULL AS no_language, "
        + ", ".join(f"x.{c}" for c in LEXICAL) + ", c.p_high, s.judges, "
        + ", ".join(f"s.{m}" for m in METRICS) + " "
        "FROM responses r {touched} JOIN queries q ON q.dataset = r.dataset AND q.query_id = r.query_id "
        f"LEFT JOIN response_facts x {{touched_x}} ON {join_on('x', 'r')} "
        "LEFT JOIN (SELECT c.dataset, c.query_id, c.model_id, c.response_hash, avg(c.p_high) AS p_high "
        "FROM critiques c {touched_c} WHERE c.p_high IS NOT NULL GROUP BY ALL) c "
        f"ON {join_on('c', 'r')} AND c.response_hash = r.response_hash "
        "LEFT JOIN (SELECT i.dataset, i.query_id, i.model_id, list(i.judge_id ORDER BY i.judge_id) AS judges, "
        + ", ".join(f"list(i.{m}::DOUBLE ORDER BY i.judge_id) AS {m}" for m in METRICS)
        + " FROM item_scores i {touched_i} GROUP BY ALL) s " f"ON {join_on('s', 'r')}")),
)
