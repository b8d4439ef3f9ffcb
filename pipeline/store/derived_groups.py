"""The derived group tables: per (dataset, model, query language, query script) what a leaderboard sums.

A leaderboard of 24 models × 7,490 queries read ``item_scores`` (180k items a judge) and ``response_facts``
(180k responses) and grouped them on every cold render: two thirds of the page's time at 10× the paper's
scale. The writer keeps those groups instead, for the keys a batch touched, in the same transaction
(``Derived``: recomputed by key), after the per-item tables they read:

- ``score_groups`` — per (dataset, judge, model, query language, query script: 'native' when the query has
  none) each distinct pattern of an item's metric scores (``item_scores``: current texts only, never an
  errored response) as parallel lists: one list per registry metric (NULL: no parsed sample), ``n`` items
  with that pattern, their ``judgments`` and ``unparsed`` outputs and most ``samples``; and ``runs``, the
  runs whose judgments made these scores (the provenance of what the leaderboard averages).
- ``theme_groups`` — per (dataset, judge, model, theme, query language, query script) each metric's sum and count
  of the items' scores (``item_scores``) and the items: a query counts under each of its themes, one without
  any under ``(none)`` (what the themes page averages).
- ``response_groups`` — per (dataset, model, query language, query script) responses, errors, responses
  that echo the prompt (their ``prompt_echo`` check failed), lexically scored responses, and per lexical
  metric and safety check the sum and count of its non-NULL values (a mean is their quotient).
- ``retrieval_groups`` — per (dataset, query language, query script) the sum and count of the retrievals' recall
  (the leaderboard's recall column), instead of joining every query's retrieval to its language at each read.

The key's language and script columns are ``query_language`` / ``query_script``: a write to ``queries``
touches the whole dataset (``watch``: only when a query's language, script or themes change), not the groups of the
new values alone. ``score_groups`` reads them from ``item_scores``, which carries them (no join of every item to
``queries``; a jury's item scores carry them too), and watches ``queries`` through it.
"""

from __future__ import annotations

from pipeline.metrics import METRICS, SAFETY_CHECKS
from pipeline.store.derived import QUERY_LANGUAGE, Derived
from pipeline.store.rows import LEXICAL

GROUP = ("query_language", "query_script")
SCORE_KEY = ("dataset", "judge_id", "model_id", *GROUP)
RESPONSE_KEY = ("dataset", "model_id", *GROUP)
RETRIEVAL_KEY = ("dataset", *GROUP)
WATCH = (("queries", ("language", "script", "themes")),)
NO_THEME = "(none)"  # the theme of a query without one (pipeline.read.themes)
THEME_KEY = ("dataset", "judge_id", "model_id", "theme", *GROUP)
_QUERY = ("JOIN queries q ON q.dataset = {a}.dataset AND q.query_id = {a}.query_id")
_PATTERN_ORDER = ", ".join(METRICS)  # every list of a group in the same order: patterns are distinct, so no ties
# a group's lists: one ordered list of its patterns (one sort per group, not one per list), then each field
_PATTERN_LISTS = (*METRICS, "n", "judgments", "unparsed", "samples")

_SCORE_PATTERNS = (
    "SELECT i.dataset, i.judge_id, i.model_id, i.query_language, i.query_script, "
    + ", ".join(f"i.{m}" for m in METRICS) + ", "
    "count(*)::INTEGER AS n, sum(i.judgments)::INTEGER AS judgments, sum(i.unparsed)::INTEGER AS unparsed, "
    "max(i.samples) AS samples, "
    "list_distinct(flatten(list(i.runs))) AS runs "
    "FROM item_scores i {touched} GROUP BY ALL"  # the item's query's language and script are item_scores' own
)

DERIVED = (
    Derived("score_groups", key=SCORE_KEY, reads=("item_scores",), alias="i", watch=QUERY_LANGUAGE, select=(
        "SELECT dataset, judge_id, model_id, query_language, query_script, "
        + ", ".join(f"list_transform(p, lambda x: x.{c}) AS {c}" for c in _PATTERN_LISTS)
        + ", runs FROM (SELECT dataset, judge_id, model_id, query_language, query_script, "
        f"list(struct_pack({', '.join(f'{c} := {c}' for c in _PATTERN_LISTS)}) ORDER BY {_PATTERN_ORDER}) AS p, "
        f"list_sort(list_distinct(flatten(list(runs)))) AS runs FROM ({_SCORE_PATTERNS}) "
        "GROUP BY dataset, judge_id, model_id, query_language, query_script)")),
    Derived("theme_groups", key=THEME_KEY, reads=("item_scores", "queries"), alias="i", watch=WATCH, select=(
        "SELECT dataset, judge_id, model_id, theme, query_language, query_script, "
        + ", ".join(f"sum({m}) AS {m}_sum, count({m})::INTEGER AS {m}_n" for m in METRICS)
        + ", count(*)::INTEGER AS items "
        "FROM (SELECT i.dataset, i.judge_id, i.model_id, " + ", ".join(f"i.{m}" for m in METRICS) + ", "
        "q.language AS query_language, coalesce(q.script, 'native') AS query_script, "
        f"unnest(CASE WHEN len(q.themes) = 0 THEN ['{NO_THEME}'] ELSE q.themes END) AS theme "
        "FROM item_scores i {touched} " + _QUERY.format(a="i") + ") GROUP BY ALL")),
    Derived("response_groups", key=RESPONSE_KEY, reads=("response_facts", "queries"), alias="x", watch=WATCH, select=(
        "SELECT x.dataset, x.model_id, q.language AS query_language, coalesce(q.script, 'native') AS query_script, "
        "count(*)::INTEGER AS responses, count(*) FILTER (WHERE x.failed)::INTEGER AS errors, "
        + ("count(*) FILTER (WHERE NOT x.prompt_echo)::INTEGER AS prompt_echoes, " if "prompt_echo" in SAFETY_CHECKS
           else "0 AS prompt_echoes, ")
        + "count(*) FILTER (WHERE x.lexical)::INTEGER AS n_lexical, "
        + ", ".join(f"sum(x.{c}) AS {c}_sum, count(x.{c})::INTEGER AS {c}_n" for c in LEXICAL) + ", "
        + ", ".join(f"sum(x.{c}::INTEGER)::DOUBLE AS {c}_sum, count(x.{c})::INTEGER AS {c}_n" for c in SAFETY_CHECKS)
        + " FROM response_facts x {touched} " + _QUERY.format(a="x") + " GROUP BY ALL")),
    Derived("retrieval_groups", key=RETRIEVAL_KEY, reads=("retrievals", "queries"), alias="t", watch=WATCH, select=(
        "SELECT t.dataset, q.language AS query_language, coalesce(q.script, 'native') AS query_script, "
        "sum(t.recall) AS recall_sum, count(t.recall)::INTEGER AS recall_n FROM retrievals t {touched} "
        + _QUERY.format(a="t") + " GROUP BY ALL")),
)
