"""The derived jury table: ``jury_items``, per item (dataset, query, model) what a jury of every judge that scored
it makes of their item scores (``item_scores``: one row per judge), so a jury's leaderboard and its disagreements
read one row per item instead of grouping every judge's rows at each read.

Per registry metric: the judges' ``mean`` and ``median`` (a jury's score, ``pipeline.read.jury``), ``min``, ``max``
and population ``std``, ``n`` judges with a parsed score, and every judge's score (``scores``, in ``judge_set``'s
order: the judge ids sorted, joined by ``SEP``), what agreement between the judges counts; per item its query's
language and script, the ``judges`` that scored it, their summed ``judgments`` and ``unparsed`` outputs and most
``samples``. After ``item_scores``, which a write refreshes first.

``jury_patterns`` counts the rows of ``jury_items`` per (dataset, model, query language and script): per metric each
distinct (``judge_set``, ``scores``: every judge's score in the set's order) and its ``n`` items — what Krippendorff's
α and the pairwise κ count, and a jury's mean or median of each metric (the mean or median of a tuple) — so the pages
sum a few thousand patterns instead of an item row per answer. It is a *counted*
table (``Derived.counts``): a write adds the touched items' new rows and subtracts their old ones instead of
regrouping every item of a touched model (a batch of a fast judge spans every model). A row's ``pattern`` is its
judge set and scores as text, so it can be part of the key (DuckDB does not index lists).
"""

from __future__ import annotations

from pipeline.metrics import METRICS
from pipeline.store.derived import QUERY_LANGUAGE, Counts, Derived

KEY = ("dataset", "query_id", "model_id")
SEP = "\x1f"  # between the judge ids of ``judge_set`` (the unit separator: in no judge id)
STATS = {"mean": "avg", "median": "median", "min": "min", "max": "max", "std": "stddev_pop"}
GROUP = ("dataset", "model_id", "query_language", "query_script")
DERIVED = (
    Derived("jury_items", key=KEY, reads=("item_scores",), alias="i", watch=QUERY_LANGUAGE, select=(
        "SELECT i.dataset, i.query_id, i.model_id, any_value(i.query_language) AS query_language, "
        "any_value(i.query_script) AS query_script, count(*)::INTEGER AS judges, "
        f"string_agg(i.judge_id, chr({ord(SEP)}) ORDER BY i.judge_id) AS judge_set, "
        + ", ".join(f"list(i.{m} ORDER BY i.judge_id) AS {m}_scores" for m in METRICS) + ", "
        + ", ".join(f"{fn}(i.{m}) AS {m}_{s}" for m in METRICS for s, fn in STATS.items()) + ", "
        + ", ".join(f"count(i.{m})::INTEGER AS {m}_n" for m in METRICS)
        + ", sum(i.judgments)::INTEGER AS judgments, sum(i.unparsed)::INTEGER AS unparsed, max(i.samples) AS samples "
        "FROM item_scores i {touched} GROUP BY i.dataset, i.query_id, i.model_id")),
    # counted from {rows}: jury_items, or the rows of the items a write touched (``Counts``)
    Derived("jury_patterns", key=(*GROUP, "metric", "pattern"), reads=("jury_items",), alias="j",
            counts=Counts("jury_items", ("n",)), select=" UNION ALL ".join(
        f"SELECT {', '.join(f'j.{c}' for c in GROUP)}, '{m}' AS metric, "
        f"j.judge_set || chr(30) || j.{m}_scores::VARCHAR AS pattern, j.judge_set, j.{m}_scores AS scores, "
        f"count(*)::INTEGER AS n FROM {{rows}} j "
        f"GROUP BY {', '.join(f'j.{c}' for c in GROUP)}, j.judge_set, j.{m}_scores" for m in METRICS)),
)
