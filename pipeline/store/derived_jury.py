"""The derived jury table: ``jury_items``, per item (dataset, query, model) what a jury of every judge that scored
it makes of their item scores (``item_scores``: one row per judge), so a jury's leaderboard and its disagreements
read one row per item instead of grouping every judge's rows at each read.

Per registry metric: the judges' ``mean`` and ``median`` (a jury's score, ``pipeline.read.jury``), ``min``, ``max``
and population ``std``, and ``n`` judges with a parsed score; per item the ``judges`` that scored it, their summed
``judgments`` and ``unparsed`` outputs and most ``samples``. After ``item_scores``, which a write refreshes first.
"""

from __future__ import annotations

from pipeline.metrics import METRICS

KEY = ("dataset", "query_id", "model_id")
STATS = {"mean": "avg", "median": "median", "min": "min", "max": "max", "std": "stddev_pop"}
SPECS: dict[str, tuple[tuple[tuple[str, str], ...], tuple[str, ...]]] = {
    "jury_items": ((
        *((c, "VARCHAR") for c in KEY), ("judges", "INTEGER"),
        *((f"{m}_{s}", "DOUBLE") for m in METRICS for s in STATS), *((f"{m}_n", "INTEGER") for m in METRICS),
        ("judgments", "INTEGER"), ("unparsed", "INTEGER"), ("samples", "INTEGER"),
    ), KEY),
}
SELECTS = {
    "jury_items": (
        "SELECT i.dataset, i.query_id, i.model_id, count(*) AS judges, "
        + ", ".join(f"{fn}(i.{m}) AS {m}_{s}" for m in METRICS for s, fn in STATS.items()) + ", "
        + ", ".join(f"count(i.{m}) AS {m}_n" for m in METRICS)
        + ", sum(i.judgments) AS judgments, sum(i.unparsed) AS unparsed, max(i.samples) AS samples "
        "FROM item_scores i {touched} GROUP BY i.dataset, i.query_id, i.model_id"
    ),
}
SOURCES = ("judgments", "responses")
ALIAS = "i"
