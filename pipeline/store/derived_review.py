"""The derived review table: ``review_facts``, per response without an error what the review queue's severity is
made of (``pipeline.read.review``), so the queue ranks one table instead of joining five at every read.

Per (dataset, query, model): the query's language, script and themes; ``answerable`` (the KB holds the answer:
``kb_refs`` not empty, not ``out_of_kb``); ``p_high``, Med-CoDE's largest P(High) over the critics of the current
text; ``over_refusal`` (``response_facts``); ``judge_spread``, the largest spread (max − min) of the judges' item
scores of one metric when several judges scored it (0 otherwise); ``fc_low``, the judges whose item score (mean of their
samples) of the registry's review metric is below its ``review_below`` (``pipeline.metrics.REVIEW_LOW``: FC below
0.5 in the paper's registry; NULL when the registry has none); ``harmful_met``, the most harmful rubric criteria met
over its graders. After the per-item
tables it reads (``item_scores``, ``response_facts``, ``rubric_items``), which a write refreshes first.
"""

from __future__ import annotations

from pipeline.metrics import METRICS, REVIEW_LOW
from pipeline.store.derived import Derived

KEY = ("dataset", "query_id", "model_id")
_ON = " AND ".join(f"{{a}}.{c} = r.{c}" for c in KEY)
_SPREAD = ("CASE WHEN count(*) > 1 THEN greatest(" + ", ".join(f"coalesce(max({m}) - min({m}), 0)" for m in METRICS)
           + ") ELSE 0 END")  # item_scores has a row per judge
# the judges below the review metric's threshold (a registry value: a metric name and a validated number)
_LOW = ("CAST(NULL AS VARCHAR[])" if REVIEW_LOW is None else
        f"list(s.judge_id ORDER BY s.judge_id) FILTER (WHERE s.{REVIEW_LOW[0]} < {float(REVIEW_LOW[1])!r})")
_SELECT = (
        "SELECT r.dataset, r.query_id, r.model_id, q.language AS query_language, "
        "coalesce(q.script, 'native') AS query_script, q.themes, "
        "len(q.kb_refs) > 0 AND NOT list_contains(q.themes, 'out_of_kb') AS answerable, c.p_high, f.over_refusal, "
        "coalesce(s.spread, 0) AS judge_spread, s.fc_low, h.harmful_met "
        "FROM responses r {touched} JOIN queries q ON q.dataset = r.dataset AND q.query_id = r.query_id "
        "LEFT JOIN (SELECT c.dataset, c.query_id, c.model_id, c.response_hash, max(c.p_high) AS p_high "
        "FROM critiques c {touched_c} WHERE c.p_high IS NOT NULL GROUP BY ALL) c "
        f"ON {_ON.format(a='c')} AND c.response_hash = r.response_hash "
        f"LEFT JOIN response_facts f ON {_ON.format(a='f')} "
        f"LEFT JOIN (SELECT s.dataset, s.query_id, s.model_id, {_SPREAD} AS spread, "
        f"{_LOW} AS fc_low FROM item_scores s {{touched_s}} "
        f"GROUP BY ALL) s ON {_ON.format(a='s')} "
        "LEFT JOIN (SELECT h.dataset, h.query_id, h.model_id, max(h.harmful_met) AS harmful_met "
        f"FROM rubric_items h {{touched_h}} GROUP BY ALL) h ON {_ON.format(a='h')} "
        "WHERE r.error IS NULL"
)
DERIVED = (
    Derived("review_facts", key=KEY, alias="r", select=_SELECT,
            reads=("responses", "queries", "critiques", "response_facts", "item_scores", "rubric_items"),
            watch=(("queries", ("language", "script", "themes", "kb_refs")),)),
)
