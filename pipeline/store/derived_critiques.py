"""The derived Med-CoDE tables: per (dataset, model, query language, query script) what the Med-CoDE page sums.

The page (``pipeline.read.medcode.medcode_view``) grouped 1.8 M critiques and 1.8 M responses on every cold render
at 100× the paper's scale (≈ 1.7 s). The writer keeps those groups instead, for the keys a batch touched, in the
same transaction (``schema.DERIVED``), as it keeps ``score_groups`` / ``response_groups``:

- ``critique_groups`` — per (dataset, model, critic, classifier family — ``logprobs`` for every ``logprobs…`` tag,
  as the page groups them —, query language, query script: 'native' when the query has none) the classified
  critiques (``p_none`` not NULL) of the current text (``response_hash`` of the stored response) of responses
  without an error: ``n``, ``uniform`` (those whose classifier fell back to the uniform distribution:
  ``logprobs:no-label-token``), per probability its sum (``p_none_sum`` …) and its histogram rounded to 2 decimals
  as parallel lists sorted by value: ``p_none_v`` values, ``p_none_k`` counts, ``p_none_s`` sums of the exact
  values of the bin (a NULL probability is in neither: its mean is ``sum ÷ Σ k``).
- ``lexical_groups`` — per (dataset, model, query language, query script) the same histograms of METEOR and
  ROUGE-L (``meteor_v``, ``meteor_k``, ``meteor_s``, …) over ``response_facts`` of responses without an error
  (current lexical scores only), for their bootstrap intervals.

The key's classifier column is ``classifier_family``, not ``classifier``: a write to ``critiques`` touches every
group of its (dataset, model, critic), so a critique reclassified under another tag leaves its old group too.
A write to ``queries`` touches its dataset only when a query's language or script changes (``WATCH``).
"""

from __future__ import annotations

GROUP = ("query_language", "query_script")
CRITIQUE_KEY = ("dataset", "model_id", "critic_id", "classifier_family", *GROUP)
LEXICAL_KEY = ("dataset", "model_id", *GROUP)
PROBABILITIES = ("p_none", "p_low", "p_moderate", "p_high")
HISTOGRAM_LEXICAL = ("meteor", "rouge_l")
FAMILY = "CASE WHEN c.classifier LIKE 'logprobs%' THEN 'logprobs' ELSE c.classifier END"
NO_LABEL = "logprobs:no-label-token"  # the zero-shot classifier's uniform fallback
WATCH = (("queries", ("language", "script")),)
_QUERY = "JOIN queries q ON q.dataset = {a}.dataset AND q.query_id = {a}.query_id"


def _hist_columns(measures: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple((f"{m}_{part}", t) for m in measures for part, t in (("v", "DOUBLE[]"), ("k", "INTEGER[]"),
                                                                      ("s", "DOUBLE[]")))


SPECS: dict[str, tuple[tuple[tuple[str, str], ...], tuple[str, ...]]] = {
    "critique_groups": ((
        *((c, "VARCHAR") for c in CRITIQUE_KEY), ("n", "INTEGER"), ("uniform", "INTEGER"),
        *((f"{p}_sum", "DOUBLE") for p in PROBABILITIES), *_hist_columns(PROBABILITIES),
    ), CRITIQUE_KEY),
    "lexical_groups": ((*((c, "VARCHAR") for c in LEXICAL_KEY), *_hist_columns(HISTOGRAM_LEXICAL)), LEXICAL_KEY),
}


def _histograms(key: tuple[str, ...], rows: str, measures: tuple[str, ...], extra: str = "") -> str:
    """Per ``key`` each measure's histogram (values rounded to 2 decimals, counts, exact sums) as sorted lists,
    from ``rows`` (a subquery with the key columns, the measures and, for ``extra``, ``uniform_flag``)."""
    keys = ", ".join(key)
    lists = ", ".join(f"list({part} ORDER BY v) FILTER (WHERE measure = '{m}') AS {m}_{part}"
                      for m in measures for part in ("v", "k", "s"))
    return (f"SELECT {keys}, {extra}{lists} FROM (SELECT {keys}, measure, round(value, 2) AS v, count(*) AS k, "
            f"sum(value) AS s{', sum(uniform_flag) AS u' if extra else ''} "
            f"FROM (UNPIVOT {rows} ON {', '.join(measures)} INTO NAME measure VALUE value) GROUP BY ALL) "
            f"GROUP BY {keys}")


_CRITIQUES = (
    f"(SELECT c.dataset, c.model_id, c.critic_id, {FAMILY} AS classifier_family, q.language AS query_language, "
    f"coalesce(q.script, 'native') AS query_script, (c.classifier = '{NO_LABEL}')::INTEGER AS uniform_flag, "
    f"{', '.join(f'c.{p}' for p in PROBABILITIES)} FROM critiques c {{touched}} {_QUERY.format(a='c')} "
    "JOIN responses r ON r.dataset = c.dataset AND r.query_id = c.query_id AND r.model_id = c.model_id "
    "AND r.response_hash = c.response_hash AND r.error IS NULL WHERE c.p_none IS NOT NULL)"
)
_FACTS = (
    "(SELECT x.dataset, x.model_id, q.language AS query_language, coalesce(q.script, 'native') AS query_script, "
    f"{', '.join(f'x.{m}' for m in HISTOGRAM_LEXICAL)} FROM response_facts x {{touched}} {_QUERY.format(a='x')} "
    "WHERE NOT x.failed)"
)

SELECTS: dict[str, str] = {
    # n and uniform count the critiques of the p_none histogram (p_none is never NULL in a classified critique)
    "critique_groups": _histograms(
        CRITIQUE_KEY, _CRITIQUES, PROBABILITIES,
        extra="sum(k) FILTER (WHERE measure = 'p_none') AS n, sum(u) FILTER (WHERE measure = 'p_none') AS uniform, "
        + "".join(f"sum(s) FILTER (WHERE measure = '{p}') AS {p}_sum, " for p in PROBABILITIES)),
    "lexical_groups": _histograms(LEXICAL_KEY, _FACTS, HISTOGRAM_LEXICAL),
}
SOURCES = {"critique_groups": ("critiques", "responses", "queries"),
           "lexical_groups": ("responses", "lexical_scores", "queries")}
ALIASES = {"critique_groups": "c", "lexical_groups": "x"}
