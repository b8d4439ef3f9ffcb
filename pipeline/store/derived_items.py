"""The per-item derived tables: what every figure of a judged, labelled or checked answer starts from.

- ``item_scores``: one row per judged item (dataset, query, model, judge) with each metric's mean over its parsed
  samples and the item's judgment counts — only judgments whose ``response_hash`` is the stored response's, and
  never of a response that errored; and its query's language and script (``query_language``, ``query_script``:
  'native' when it has none), so what groups items by them (``score_groups``, ``jury_items``, a jury's item scores)
  reads them here instead of joining every item to ``queries`` (a query moved to another language touches its items).
- ``label_pairs``: per human-labelled item, metric and judge the annotators' scores (and their mean) beside the
  judge's item score, with the query's language, script and themes — what every human-vs-judge comparison counts,
  without joining the labels to the judges' items. The metric is ``label_metric``: a judgment of one metric makes
  or drops the item's row of every metric (an item exists once any of its judgments is current), so it must touch
  the item, not the metric.
- ``response_facts``: one row per response with its error flag and its current lexical scores and safety-check
  outcomes.
"""

from __future__ import annotations

from pipeline.metrics import METRICS, SAFETY_CHECKS
from pipeline.store.derived import QUERY_LANGUAGE, RESPONSE, Derived, join_on
from pipeline.store.rows import LEXICAL

DERIVED = (
    Derived("item_scores", key=(*RESPONSE, "judge_id"), reads=("judgments", "responses", "queries"), alias="j",
            watch=QUERY_LANGUAGE, select=(
        "SELECT j.dataset, j.query_id, j.model_id, j.judge_id, "
        + ", ".join(f"avg(j.score) FILTER (WHERE j.metric = '{m}' AND j.parse_ok) AS {m}" for m in METRICS)
        + ", count(*)::INTEGER AS judgments, count(*) FILTER (WHERE NOT j.parse_ok)::INTEGER AS unparsed, "
        "max(j.sample) + 1 AS samples, list_sort(list(DISTINCT coalesce(j.run_id, ''))) AS runs, "
        "any_value(q.language) AS query_language, any_value(coalesce(q.script, 'native')) AS query_script "
        "FROM judgments j {touched} "
        f"JOIN responses r ON {join_on('r', 'j')} AND r.response_hash = j.response_hash AND r.error IS NULL "
        "JOIN queries q ON q.dataset = j.dataset AND q.query_id = j.query_id "
        "GROUP BY j.dataset, j.query_id, j.model_id, j.judge_id")),
    Derived("label_pairs", key=(*RESPONSE, "label_metric", "judge_id"),
            reads=("human_labels", "item_scores", "queries"), alias="p",
            watch=(("queries", ("language", "script", "themes")),), select=(
        "SELECT p.* FROM (SELECT h.dataset, h.query_id, h.model_id, h.metric AS label_metric, i.judge_id, "
        "any_value(q.language) AS query_language, any_value(coalesce(q.script, 'native')) AS query_script, "
        "any_value(q.themes) AS themes, avg(h.score) AS human, list(h.score::DOUBLE ORDER BY h.annotator) AS humans, "
        "list(h.annotator ORDER BY h.annotator) AS annotators, any_value(CASE h.metric "
        + " ".join(f"WHEN '{m}' THEN i.{m}" for m in METRICS) + " END) AS llm "
        "FROM human_labels h {touched_items_h} JOIN item_scores i {touched_items_i} "
        f"ON {join_on('i', 'h')} JOIN queries q ON q.dataset = h.dataset AND q.query_id = h.query_id "
        "WHERE h.score IS NOT NULL GROUP BY h.dataset, h.query_id, h.model_id, h.metric, i.judge_id) p {touched}")),
    Derived("response_facts", key=RESPONSE, reads=("responses", "lexical_scores", "safety_checks"), alias="r", select=(
        "SELECT r.dataset, r.query_id, r.model_id, r.error IS NOT NULL AS failed, l.query_id IS NOT NULL AS lexical, "
        f"{', '.join(f'l.{c}' for c in LEXICAL)}, {', '.join(f's.{c}' for c in SAFETY_CHECKS)} "
        "FROM responses r {touched} "
        f"LEFT JOIN lexical_scores l ON {join_on('l', 'r')} AND l.response_hash = r.response_hash "
        "LEFT JOIN (SELECT s.dataset, s.query_id, s.model_id, s.response_hash, "
        + ", ".join(f"any_value(s.passed) FILTER (WHERE s.check_name = '{c}') AS {c}" for c in SAFETY_CHECKS)
        + f" FROM safety_checks s {{touched_s}} GROUP BY ALL) s ON {join_on('s', 'r')} "
        "AND s.response_hash = r.response_hash")),
)
