"""The derived rubric tables: ``rubric_items`` (per rubric item: dataset, query, model, grader) and
``rubric_tag_items`` (per item and tag), with HealthBench's sums.

HealthBench's item score is Σ points of the met criteria ÷ Σ positive points of the item's rubric
(``pipeline.analysis.rubric.calculate_score``). Summing a million criterion grades on every read is what made
the rubric leaderboard slow (≈ 1.5 s of SQL at HealthBench's size), so the writer keeps the sums per item, for
the keys a batch touched, in the same transaction (``Derived``: recomputed by key), as it keeps ``item_scores``.

Only **current** grades count — the rule of ``pipeline.read.rubric``: a grade of the response text now stored
(``response_hash``; never of an errored response) and of the criterion the query's rubric now has at that index
(same text and points). An item is a row when it has at least one current grade. Columns:

- ``achieved`` Σ points of the met current criteria (negative points included), ``possible`` Σ positive points
  of the query's current rubric, ``n_criteria`` its number of criteria;
- ``graded`` current grades, ``unparsed`` those whose output could not be read (``met`` NULL),
  ``ungraded`` criteria without a current grade (``n_criteria − graded``);
- ``harmful_met`` / ``harmful_points`` harmful (negative-point) criteria met and their points (≤ 0);
- ``score`` = achieved ÷ possible when every criterion has a current, parsed grade and possible > 0, else NULL
  (unscored — never 0).

``rubric_tag_items`` restricts an item to the criteria of its current rubric carrying a tag (HealthBench's
rubric-tag metrics, ``analysis.rubric.item_metrics``): ``achieved``/``possible`` over those criteria,
``missing`` of them without a current parsed grade, ``score`` (NULL when one is missing or possible is 0),
``every`` = the tag is on every criterion and is not an ``axis:``/``level:``/``cluster:`` tag (an *example
tag* in HealthBench's terms: its score is the item's overall score). A row exists when a current grade
carries the tag.

Both read ``rubric_grades`` (the driving table, alias ``g``), ``responses`` (a new text makes old grades stale) and
``queries`` (a changed rubric does: only a change of a query's rubric touches its items, ``WATCH``).
"""

from __future__ import annotations

from pipeline.store.derived import Derived

LEVEL_PREFIXES = ("axis:", "level:", "cluster:")  # criterion-level tags in HealthBench's vocabulary
KEY = ("dataset", "query_id", "model_id", "grader_id")
READS = ("rubric_grades", "responses", "queries")
WATCH = (("queries", ("rubric",)),)  # of a query only its rubric counts: a rewrite with the same rubric touches nothing
_TYPE = '[{{"criterion": "VARCHAR", "points": "DOUBLE", "tags": ["VARCHAR"]}}]'  # {{ }}: str.format escapes
# The touched queries' current rubrics (``{touched_queries_q0}``: only those of the keys a write touched), parsed once
_RUBRICS = (f"(SELECT q0.dataset, q0.query_id, from_json(q0.rubric, '{_TYPE}') AS cs FROM queries q0 "
            "{touched_queries_q0} "
            "WHERE q0.rubric IS NOT NULL)")
_PER_QUERY = (
    "(SELECT dataset, query_id, cs, len(cs)::INTEGER AS n_criteria, "
    "coalesce(list_sum(list_filter(list_transform(cs, lambda c: c.points), lambda p: p > 0)), 0) AS possible "
    f"FROM {_RUBRICS})"
)
# one row per (criterion, distinct tag) of the current rubrics, with the query's criterion count
_CRITERION_TAGS = (
    "(SELECT dataset, query_id, n, idx, c.criterion AS criterion, c.points AS points, "
    "unnest(list_distinct(c.tags)) AS tag FROM (SELECT dataset, query_id, len(cs) AS n, "
    f"unnest(range(len(cs))) AS idx, unnest(cs) AS c FROM {_RUBRICS}))"
)
_PER_TAG = (
    "(SELECT dataset, query_id, tag, count(*) AS n_tag, "
    "coalesce(sum(points) FILTER (WHERE points > 0), 0) AS possible, "
    "count(*) = any_value(n) AND NOT (" + " OR ".join(f"starts_with(any_value(tag), '{p}')" for p in LEVEL_PREFIXES)
    + f") AS every FROM {_CRITERION_TAGS} GROUP BY dataset, query_id, tag)"
)
_CURRENT = ("JOIN responses r ON r.dataset = g.dataset AND r.query_id = g.query_id AND r.model_id = g.model_id "
            "AND r.response_hash = g.response_hash AND r.error IS NULL ")
_ACHIEVED = "coalesce(sum(g.points) FILTER (WHERE g.met), 0)"

DERIVED = (
    Derived("rubric_items", key=KEY, reads=READS, alias="g", watch=WATCH, select=(
        "SELECT g.dataset, g.query_id, g.model_id, g.grader_id, "
        f"{_ACHIEVED} AS achieved, any_value(q.possible) AS possible, any_value(q.n_criteria) AS n_criteria, "
        "count(*)::INTEGER AS graded, count(*) FILTER (WHERE g.met IS NULL)::INTEGER AS unparsed, "
        "(any_value(q.n_criteria) - count(*))::INTEGER AS ungraded, "
        "count(*) FILTER (WHERE g.met AND g.points < 0)::INTEGER AS harmful_met, "
        "coalesce(sum(g.points) FILTER (WHERE g.met AND g.points < 0), 0) AS harmful_points, "
        "CASE WHEN count(*) FILTER (WHERE g.met IS NULL) = 0 AND count(*) = any_value(q.n_criteria) "
        f"AND any_value(q.possible) > 0 THEN {_ACHIEVED} / any_value(q.possible) END AS score "
        "FROM rubric_grades g {touched} " + _CURRENT
        + f"JOIN {_PER_QUERY} q ON q.dataset = g.dataset AND q.query_id = g.query_id "
        "AND g.criterion_index >= 0 AND g.criterion_index < q.n_criteria "
        "AND q.cs[g.criterion_index + 1].criterion = g.criterion AND q.cs[g.criterion_index + 1].points = g.points "
        "GROUP BY g.dataset, g.query_id, g.model_id, g.grader_id")),
    Derived("rubric_tag_items", key=(*KEY, "tag"), reads=READS, alias="g", watch=WATCH, select=(
        "SELECT g.dataset, g.query_id, g.model_id, g.grader_id, t.tag, "
        f"{_ACHIEVED} AS achieved, any_value(t.possible) AS possible, "
        "(any_value(t.n_tag) - count(*) FILTER (WHERE g.met IS NOT NULL))::INTEGER AS missing, "
        "any_value(t.every) AS every, "
        "CASE WHEN count(*) FILTER (WHERE g.met IS NOT NULL) = any_value(t.n_tag) AND any_value(t.possible) > 0 "
        f"THEN {_ACHIEVED} / any_value(t.possible) END AS score "
        "FROM rubric_grades g {touched} " + _CURRENT
        + f"JOIN {_CRITERION_TAGS} c ON c.dataset = g.dataset AND c.query_id = g.query_id "
        "AND c.idx = g.criterion_index AND c.criterion = g.criterion AND c.points = g.points "
        f"JOIN {_PER_TAG} t ON t.dataset = g.dataset AND t.query_id = g.query_id AND t.tag = c.tag "
        "GROUP BY g.dataset, g.query_id, g.model_id, g.grader_id, t.tag")),
)
