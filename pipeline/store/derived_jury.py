"""The derived jury table: ``jury_items``, per item (dataset, query, model) what a jury of every judge that scored
it makes of their item scores (``item_scores``: one row per judge), so a jury's leaderboard and its disagreements
read one row per item instead of grouping every judge's rows at each read.

Per registry metric: the judges' ``mean`` and ``median`` (a jury's score, ``pipeline.read.jury``), ``min``, ``max``
and population ``std``, ``n`` judges with a parsed score, and every judge's score (``scores``, in ``judge_set``'s
order: the judge ids sorted, joined by ``SEP``), what agreement between the judges counts; per item its query's
language and script, the ``judges`` that scored it, their summed ``judgments`` and ``unparsed`` outputs and most
``samples``. After ``item_scores``, which a write refreshes first.

Two tables count the rows of ``jury_items`` per (dataset, model, query language and script), so the pages sum a few
thousand patterns instead of grouping an item row per answer (1.8 M at 100× the paper's scale):

- ``jury_groups`` — per jury (``mean`` or ``median``) each distinct pattern of the jury's item scores (the four
  metrics and the item's most ``samples``), with its ``n`` items and their summed ``judgments`` and ``unparsed``
  outputs: what a jury's leaderboard averages and resamples, as ``score_groups`` is for one judge.
- ``jury_patterns`` — per metric each distinct (``judge_set``, ``scores``: every judge's score in the set's order)
  and its ``n`` items: what Krippendorff's α and the pairwise κ count.

Both are *counted* tables (``schema.Derived.counts``): a write adds the touched items' new rows and subtracts their
old ones instead of regrouping every item of a touched model (a batch of a fast judge spans every model). A row's
``pattern`` is its pattern columns as text, so it can be part of the key (DuckDB does not index lists).
"""

from __future__ import annotations

from pipeline.metrics import METRICS

KEY = ("dataset", "query_id", "model_id")
SEP = "\x1f"  # between the judge ids of ``judge_set`` (the unit separator: in no judge id)
STATS = {"mean": "avg", "median": "median", "min": "min", "max": "max", "std": "stddev_pop"}
GROUP = ("dataset", "model_id", "query_language", "query_script")
JURIES = ("mean", "median")  # how a jury aggregates its judges' item scores (``pipeline.read.jury``)
SPECS: dict[str, tuple[tuple[tuple[str, str], ...], tuple[str, ...]]] = {
    "jury_items": ((
        *((c, "VARCHAR") for c in KEY), ("query_language", "VARCHAR"), ("query_script", "VARCHAR"),
        ("judges", "INTEGER"), ("judge_set", "VARCHAR"), *((f"{m}_scores", "DOUBLE[]") for m in METRICS),
        *((f"{m}_{s}", "DOUBLE") for m in METRICS for s in STATS), *((f"{m}_n", "INTEGER") for m in METRICS),
        ("judgments", "INTEGER"), ("unparsed", "INTEGER"), ("samples", "INTEGER"),
    ), KEY),
    "jury_groups": ((
        *((c, "VARCHAR") for c in GROUP), ("jury", "VARCHAR"), ("pattern", "VARCHAR"),
        *((m, "DOUBLE") for m in METRICS), ("samples", "INTEGER"), ("n", "INTEGER"), ("judgments", "INTEGER"),
        ("unparsed", "INTEGER"),
    ), (*GROUP, "jury", "pattern")),
    "jury_patterns": ((
        *((c, "VARCHAR") for c in GROUP), ("metric", "VARCHAR"), ("pattern", "VARCHAR"), ("judge_set", "VARCHAR"),
        ("scores", "DOUBLE[]"), ("n", "INTEGER"),
    ), (*GROUP, "metric", "pattern")),
}
_METRIC_LIST = f"[{', '.join(METRICS)}]"
SELECTS = {
    "jury_items": (
        "SELECT i.dataset, i.query_id, i.model_id, any_value(q.language) AS query_language, "
        "any_value(coalesce(q.script, 'native')) AS query_script, count(*) AS judges, "
        f"string_agg(i.judge_id, chr({ord(SEP)}) ORDER BY i.judge_id) AS judge_set, "
        + ", ".join(f"list(i.{m} ORDER BY i.judge_id) AS {m}_scores" for m in METRICS) + ", "
        + ", ".join(f"{fn}(i.{m}) AS {m}_{s}" for m in METRICS for s, fn in STATS.items()) + ", "
        + ", ".join(f"count(i.{m}) AS {m}_n" for m in METRICS)
        + ", sum(i.judgments) AS judgments, sum(i.unparsed) AS unparsed, max(i.samples) AS samples "
        "FROM item_scores i {touched} JOIN queries q ON q.dataset = i.dataset AND q.query_id = i.query_id "
        "GROUP BY i.dataset, i.query_id, i.model_id"
    ),
    # counted from jury_items (alias j): {touched} restricts it to the items a write touched
    "jury_groups": (
        f"SELECT {', '.join(GROUP)}, jury, "
        f"{_METRIC_LIST}::VARCHAR || '/' || coalesce(samples::VARCHAR, '') AS pattern, "
        f"{', '.join(METRICS)}, samples, count(*) AS n, sum(judgments) AS judgments, sum(unparsed) AS unparsed "
        "FROM (" + " UNION ALL ".join(
            f"SELECT {', '.join(f'j.{c}' for c in GROUP)}, '{how}' AS jury, "
            + ", ".join(f"j.{m}_{how} AS {m}" for m in METRICS) + ", j.samples, j.judgments, j.unparsed "
            "FROM jury_items j {touched}" for how in JURIES)
        + f") GROUP BY {', '.join(GROUP)}, jury, {', '.join(METRICS)}, samples"
    ),
    "jury_patterns": " UNION ALL ".join(
        f"SELECT {', '.join(f'j.{c}' for c in GROUP)}, '{m}' AS metric, "
        f"j.judge_set || chr(30) || j.{m}_scores::VARCHAR AS pattern, j.judge_set, j.{m}_scores AS scores, "
        f"count(*) AS n FROM jury_items j {{touched}} "
        f"GROUP BY {', '.join(f'j.{c}' for c in GROUP)}, j.judge_set, j.{m}_scores" for m in METRICS),
}
SOURCES = ("judgments", "responses", "queries")
ALIASES = {"jury_items": "i", "jury_groups": "j", "jury_patterns": "j"}
WATCH = (("queries", ("language", "script")),)
COUNTS = {"jury_groups": ("jury_items", ("n", "judgments", "unparsed")), "jury_patterns": ("jury_items", ("n",))}
"""Counted table -> (the table whose rows it counts, its summed columns)."""
