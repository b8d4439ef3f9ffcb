"""The derived group tables: per (dataset, model, query language, query script) what a leaderboard sums.

A leaderboard of 24 models × 7,490 queries read ``item_scores`` (180k items a judge) and ``response_facts``
(180k responses) and grouped them on every cold render: two thirds of the page's time at 10× the paper's
scale. The writer keeps those groups instead, for the keys a batch touched, in the same transaction
(``schema.DERIVED``), after the per-item tables they are made of:

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
new values alone.
"""

from __future__ import annotations

from pipeline.config import SAFETY_CHECKS
from pipeline.metrics import METRICS
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

SPECS: dict[str, tuple[tuple[tuple[str, str], ...], tuple[str, ...]]] = {
    "score_groups": ((
        *((c, "VARCHAR") for c in SCORE_KEY), *((m, "DOUBLE[]") for m in METRICS), ("n", "INTEGER[]"),
        ("judgments", "INTEGER[]"), ("unparsed", "INTEGER[]"), ("samples", "INTEGER[]"), ("runs", "VARCHAR[]"),
    ), SCORE_KEY),
    "theme_groups": ((
        *((c, "VARCHAR") for c in THEME_KEY), *((f"{m}_{part}", "DOUBLE" if part == "sum" else "INTEGER")
                                                for m in METRICS for part in ("sum", "n")), ("items", "INTEGER"),
    ), THEME_KEY),
    "response_groups": ((
        *((c, "VARCHAR") for c in RESPONSE_KEY), ("responses", "INTEGER"), ("errors", "INTEGER"),
        ("prompt_echoes", "INTEGER"), ("n_lexical", "INTEGER"),
        *((f"{c}_{part}", "DOUBLE" if part == "sum" else "INTEGER") for c in (*LEXICAL, *SAFETY_CHECKS)
          for part in ("sum", "n")),
    ), RESPONSE_KEY),
    "retrieval_groups": ((
        *((c, "VARCHAR") for c in RETRIEVAL_KEY), ("recall_sum", "DOUBLE"), ("recall_n", "INTEGER"),
    ), RETRIEVAL_KEY),
}

_SCORE_PATTERNS = (
    "SELECT i.dataset, i.judge_id, i.model_id, q.language AS query_language, "
    "coalesce(q.script, 'native') AS query_script, " + ", ".join(f"i.{m}" for m in METRICS) + ", "
    "count(*) AS n, sum(i.judgments) AS judgments, sum(i.unparsed) AS unparsed, max(i.samples) AS samples, "
    "list_distinct(flatten(list(i.runs))) AS runs "
    "FROM item_scores i {touched} " + _QUERY.format(a="i") + " GROUP BY ALL"
)

SELECTS: dict[str, str] = {
    "score_groups": (
        "SELECT dataset, judge_id, model_id, query_language, query_script, "
        + ", ".join(f"list({c} ORDER BY {_PATTERN_ORDER}) AS {c}" for c in (*METRICS, "n", "judgments", "unparsed",
                                                                             "samples"))
        + f", list_sort(list_distinct(flatten(list(runs)))) AS runs FROM ({_SCORE_PATTERNS}) "
        "GROUP BY dataset, judge_id, model_id, query_language, query_script"
    ),
    "theme_groups": (
        "SELECT dataset, judge_id, model_id, theme, query_language, query_script, "
        + ", ".join(f"sum({m}) AS {m}_sum, count({m}) AS {m}_n" for m in METRICS) + ", count(*) AS items "
        "FROM (SELECT i.dataset, i.judge_id, i.model_id, " + ", ".join(f"i.{m}" for m in METRICS) + ", "
        "q.language AS query_language, coalesce(q.script, 'native') AS query_script, "
        f"unnest(CASE WHEN len(q.themes) = 0 THEN ['{NO_THEME}'] ELSE q.themes END) AS theme "
        "FROM item_scores i {touched} " + _QUERY.format(a="i") + ") GROUP BY ALL"
    ),
    "response_groups": (
        "SELECT x.dataset, x.model_id, q.language AS query_language, coalesce(q.script, 'native') AS query_script, "
        "count(*) AS responses, count(*) FILTER (WHERE x.failed) AS errors, "
        + ("count(*) FILTER (WHERE NOT x.prompt_echo) AS prompt_echoes, " if "prompt_echo" in SAFETY_CHECKS
           else "0 AS prompt_echoes, ")
        + "count(*) FILTER (WHERE x.lexical) AS n_lexical, "
        + ", ".join(f"sum(x.{c}) AS {c}_sum, count(x.{c}) AS {c}_n" for c in LEXICAL) + ", "
        + ", ".join(f"sum(x.{c}::INTEGER) AS {c}_sum, count(x.{c}) AS {c}_n" for c in SAFETY_CHECKS)
        + " FROM response_facts x {touched} " + _QUERY.format(a="x") + " GROUP BY ALL"
    ),
}
SELECTS["retrieval_groups"] = (
    "SELECT t.dataset, q.language AS query_language, coalesce(q.script, 'native') AS query_script, "
    "sum(t.recall) AS recall_sum, count(t.recall) AS recall_n FROM retrievals t {touched} " + _QUERY.format(a="t")
    + " GROUP BY ALL"
)
SOURCES = {"score_groups": ("judgments", "responses", "queries"), "theme_groups": ("judgments", "responses", "queries"),
           "response_groups": ("responses", "lexical_scores", "safety_checks", "queries"),
           "retrieval_groups": ("retrievals", "queries")}
ALIASES = {"score_groups": "i", "theme_groups": "i", "response_groups": "x", "retrieval_groups": "t"}
