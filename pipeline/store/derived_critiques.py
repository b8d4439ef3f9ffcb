"""The derived Med-CoDE tables: per (dataset, model, query language, query script) what the Med-CoDE page sums.

The page (``pipeline.read.medcode.medcode_view``) grouped every critique and response on every cold render
(bench/README.md measures it). The writer keeps those groups instead, for the keys a batch touched, in the
same transaction (``Derived``: recomputed by key), as it keeps ``score_groups`` / ``response_groups``:

- ``critique_groups`` — per (dataset, model, critic, classifier family — ``logprobs`` for every ``logprobs…`` tag,
  as the page groups them —, query language, query script: 'native' when the query has none) the classified
  critiques (``p_none`` not NULL) of the current text (``response_hash`` of the stored response) of responses
  without an error: ``n``, ``uniform`` (those whose classifier fell back to the uniform distribution:
  ``logprobs:no-label-token``), per probability its sum (``p_none_sum`` …) and its histogram rounded to 2 decimals
  as parallel lists sorted by value: ``p_none_v`` values, ``p_none_k`` counts, ``p_none_s`` sums of the exact
  values of the bin (a NULL probability is in neither: its mean is ``sum ÷ Σ k``). For the correlations' fixed
  sample (``medcode_correlations``: the critiques of the smallest hash(dataset, query, model), current or not, of
  one critic) also every classified critique of a stored query, current or not: ``classified`` and, per top 8
  bits of that hash, ``hash_bucket`` / ``hash_count`` (sorted by bucket). A group of stale critiques only has
  ``n`` = 0 and no histograms.
- ``lexical_groups`` — per (dataset, model, query language, query script) the same histograms of METEOR and
  ROUGE-L (``meteor_v``, ``meteor_k``, ``meteor_s``, …) over ``response_facts`` of responses without an error
  (current lexical scores only), for their bootstrap intervals.

- ``critique_items`` — one row per classified critique of a stored query (current or not: ``cur``), keyed like
  ``critiques`` (dataset, query, model, critic), with its query's language and script, ``h`` =
  hash(dataset, query, model) (the order of the correlations' fixed sample), its four probabilities and
  ``response_hash``, and the lexical scores of the critiqued text: what ``medcode_correlations`` reads of its
  sample without joining ``responses`` and ``response_facts`` (two scans of every row).

The key's classifier column is ``classifier_family``, not ``classifier``: a write to ``critiques`` touches every
group of its (dataset, model, critic), so a critique reclassified under another tag leaves its old group too.
A write to ``queries`` touches its dataset only when a query's language or script changes (``QUERY_LANGUAGE``).
"""

from __future__ import annotations

from pipeline.store.derived import QUERY_LANGUAGE, Derived
from pipeline.store.rows import LEXICAL

GROUP = ("query_language", "query_script")
CRITIQUE_KEY = ("dataset", "model_id", "critic_id", "classifier_family", *GROUP)
LEXICAL_KEY = ("dataset", "model_id", *GROUP)
ITEM_KEY = ("dataset", "query_id", "model_id", "critic_id")
PROBABILITIES = ("p_none", "p_low", "p_moderate", "p_high")
HISTOGRAM_LEXICAL = ("meteor", "rouge_l")
FAMILY = "CASE WHEN c.classifier LIKE 'logprobs%' THEN 'logprobs' ELSE c.classifier END"
NO_LABEL = "logprobs:no-label-token"  # the zero-shot classifier's uniform fallback
_QUERY = "JOIN queries q ON q.dataset = {a}.dataset AND q.query_id = {a}.query_id"



def _lists(measures: tuple[str, ...]) -> str:
    """Per measure its histogram as lists sorted by value, of the bins with a current value (``k`` > 0)."""
    return ", ".join(f"list({part} ORDER BY v) FILTER (WHERE measure = '{m}' AND k > 0) AS {m}_{part}"
                     for m in measures for part in ("v", "k", "s"))


def _bins(key: tuple[str, ...], rows: str, measures: tuple[str, ...]) -> str:
    """Per ``key``, measure and value rounded to 2 decimals of ``rows`` (a subquery with the key columns, the
    measures, ``cur`` and ``uniform_flag``): ``k`` current values and ``s`` their sum, ``u`` of them uniform, and
    ``k_all`` values current or not."""
    return (f"(SELECT {', '.join(key)}, measure, round(value, 2) AS v, count(*) FILTER (WHERE cur)::INTEGER AS k, "
            "sum(value) FILTER (WHERE cur) AS s, sum(uniform_flag) FILTER (WHERE cur) AS u, count(*)::INTEGER AS k_all "
            f"FROM (UNPIVOT {rows} ON {', '.join(measures)} INTO NAME measure VALUE value) GROUP BY ALL)")


# Every classified critique of a stored query, current or not (``cur``): the correlations' sample is drawn before
# the current ones are kept, in the order of hash(dataset, query, model) — ``bucket`` is its top 8 bits.
_CRITIQUES = (
    f"(SELECT c.dataset, c.model_id, c.critic_id, {FAMILY} AS classifier_family, q.language AS query_language, "
    f"coalesce(q.script, 'native') AS query_script, (c.classifier = '{NO_LABEL}')::INTEGER AS uniform_flag, "
    "r.query_id IS NOT NULL AS cur, (hash(c.dataset, c.query_id, c.model_id) >> 56)::DOUBLE AS bucket, "
    f"{', '.join(f'c.{p}' for p in PROBABILITIES)} FROM critiques c {{touched}} {_QUERY.format(a='c')} "
    "LEFT JOIN responses r ON r.dataset = c.dataset AND r.query_id = c.query_id AND r.model_id = c.model_id "
    "AND r.response_hash = c.response_hash AND r.error IS NULL WHERE c.p_none IS NOT NULL)"
)
_FACTS = (
    "(SELECT x.dataset, x.model_id, q.language AS query_language, coalesce(q.script, 'native') AS query_script, "
    f"TRUE AS cur, 0 AS uniform_flag, {', '.join(f'x.{m}' for m in HISTOGRAM_LEXICAL)} FROM response_facts x "
    f"{{touched}} {_QUERY.format(a='x')} WHERE NOT x.failed)"
)
# correlations' buckets: hash_bucket (sorted) and hash_count, every classified critique's (current or not)
_BUCKETS = ("sum(k_all) FILTER (WHERE measure = 'bucket')::INTEGER AS classified, "
            "list(v::INTEGER ORDER BY v) FILTER (WHERE measure = 'bucket') AS hash_bucket, "
            "list(k_all ORDER BY v) FILTER (WHERE measure = 'bucket') AS hash_count")

DERIVED = (
    # n and uniform count the current critiques of the p_none histogram (p_none is never NULL when classified); a
    # group of stale critiques only has n = 0 (its classified ones are in the correlations' buckets)
    Derived("critique_groups", key=CRITIQUE_KEY, reads=("critiques", "responses", "queries"), alias="c",
            watch=QUERY_LANGUAGE, select=(
        f"SELECT {', '.join(CRITIQUE_KEY)}, coalesce(sum(k) FILTER (WHERE measure = 'p_none'), 0)::INTEGER AS n, "
        "coalesce(sum(u) FILTER (WHERE measure = 'p_none'), 0)::INTEGER AS uniform, "
        + "".join(f"sum(s) FILTER (WHERE measure = '{p}') AS {p}_sum, " for p in PROBABILITIES)
        + f"{_lists(PROBABILITIES)}, {_BUCKETS} FROM {_bins(CRITIQUE_KEY, _CRITIQUES, (*PROBABILITIES, 'bucket'))} "
        f"GROUP BY {', '.join(CRITIQUE_KEY)}")),
    Derived("lexical_groups", key=LEXICAL_KEY, reads=("response_facts", "queries"), alias="x", watch=QUERY_LANGUAGE,
            select=(
        f"SELECT {', '.join(LEXICAL_KEY)}, {_lists(HISTOGRAM_LEXICAL)} FROM "
        f"{_bins(LEXICAL_KEY, _FACTS, HISTOGRAM_LEXICAL)} GROUP BY {', '.join(LEXICAL_KEY)}")),
    # one row per classified critique of a stored query, current or not, with what the correlations read of it, in
    # the sample's order: a file written whole (upgrade) keeps row groups of narrow ranges of h, which a read of the
    # sample's first hashes scans alone (rows a later write appends are in ranges of their own, so reads stay right)
    Derived("critique_items", key=ITEM_KEY, reads=("critiques", "responses", "queries", "lexical_scores"), alias="c",
            watch=QUERY_LANGUAGE, select=(
        "SELECT c.dataset, c.query_id, c.model_id, c.critic_id, q.language AS query_language, "
        "coalesce(q.script, 'native') AS query_script, hash(c.dataset, c.query_id, c.model_id) AS h, "
        f"r.query_id IS NOT NULL AS cur, {', '.join(f'c.{p}' for p in PROBABILITIES)}, c.response_hash, "
        f"{', '.join(f'l.{m}' for m in LEXICAL)} FROM critiques c {{touched}} {_QUERY.format(a='c')} "
        "LEFT JOIN responses r ON r.dataset = c.dataset AND r.query_id = c.query_id AND r.model_id = c.model_id "
        "AND r.response_hash = c.response_hash AND r.error IS NULL "
        "LEFT JOIN lexical_scores l ON l.dataset = c.dataset AND l.query_id = c.query_id AND l.model_id = c.model_id "
        "AND l.response_hash = c.response_hash WHERE c.p_none IS NOT NULL ORDER BY h")),
)
