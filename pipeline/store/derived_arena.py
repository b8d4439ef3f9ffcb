"""The derived arena tables: what the arena's leaderboards and the judge's bias view group, kept by the store so a
read sums a few thousand grouped rows instead of checking and regrouping a million votes (issue 28).

- ``arena_comparisons``: one row per *current* comparison — a doctor's vote (``origin`` 'doctors', ``rater`` the
  annotator) or a pairwise judge's pair (``origin`` 'judge', ``rater`` the judge; its orders together) — whose two
  responses are the ones stored now without an error (a regenerated response drops its comparisons). Per row: the
  query's language and script ('' when a vote's query is not stored), ``outcome`` ('a' / 'b' / 'tie'; "both bad" is
  a tie; a judge's two orders disagreeing are a tie and ``flipped``), ``complete`` (a judge's pair has both orders
  parsed: only then is it a comparison; a vote always), ``longer`` (the sign of length_a − length_b), each style
  feature's normalised difference (a − b) / (a + b + 1) binned to 1/``STYLE_BINS`` (an integer: the bin × 10), and
  of the judge's parsed single orders the ``first_decided`` (not a tie) and ``first_wins`` (the one shown first won).
  Recomputed by key (dataset, query, pair): a write to the votes, the verdicts, the responses or a query's language
  touches the comparisons of those queries (and pairs).
- ``arena_pairs``: ``arena_comparisons`` counted per (dataset, origin, judge ('' for doctors), language, script,
  complete, pair, outcome, flipped, longer): ``n`` and the first-position sums — the raw leaderboards, win rates,
  vote counts, position flips, the longer answer's wins and self-preference.
- ``arena_styles``: the complete comparisons counted per (dataset, origin, judge, language, pair, outcome, style
  bins) — the style-controlled fits.

Both rollups are *counted* tables (``Counts``): a write adds the touched comparisons' new rows and subtracts their
old ones.
"""

from __future__ import annotations

from pipeline import style
from pipeline.store.derived import QUERY_LANGUAGE, Counts, Derived

KEY = ("dataset", "query_id", "model_a", "model_b", "origin", "rater")
STYLE_BINS = 10  # a normalised style difference in [-1, 1] is grouped to 1/STYLE_BINS (stored as the bin number)


def _bins(alias: str, aggregate: str = "") -> str:
    """Each style feature's binned normalised difference of a comparison row ``alias``."""
    def col(name: str) -> str:
        return f"{aggregate}({alias}.{name})" if aggregate else f"{alias}.{name}"
    return ", ".join(f"round(({col(f + '_a')} - {col(f + '_b')}) / ({col(f + '_a')} + {col(f + '_b')} + 1) * "
                     f"{STYLE_BINS})::INTEGER AS {f}" for f in style.FEATURES)


def _current(alias: str) -> str:
    """Joins requiring both responses of comparison ``alias`` to be the stored ones, without an error."""
    return "".join(f" JOIN responses r{s} ON r{s}.dataset = {alias}.dataset AND "
                   f"r{s}.query_id = {alias}.query_id AND r{s}.model_id = {alias}.model_{s} AND "
                   f"r{s}.response_hash = {alias}.response_hash_{s} AND r{s}.error IS NULL" for s in ("a", "b"))


_VOTES = ("SELECT v.dataset, v.query_id, v.model_a, v.model_b, 'doctors' AS origin, v.annotator AS rater, "
          "coalesce(q.language, '') AS language, coalesce(q.script, CASE WHEN q.query_id IS NULL THEN '' ELSE "
          "'native' END) AS script, TRUE AS complete, CASE WHEN v.winner = 'both_bad' THEN 'tie' ELSE v.winner END "
          "AS outcome, FALSE AS flipped, sign(v.length_a - v.length_b)::INTEGER AS longer, " + _bins("v")
          + ", 0 AS first_wins, 0 AS first_decided FROM arena_votes v {touched} LEFT JOIN queries q ON "
          "q.dataset = v.dataset AND q.query_id = v.query_id" + _current("v"))
_VERDICTS = ("SELECT p.dataset, p.query_id, p.model_a, p.model_b, 'judge' AS origin, p.judge_id AS rater, "
             "any_value(q.language) AS language, any_value(coalesce(q.script, 'native')) AS script, "
             "count(*) = 2 AS complete, CASE WHEN min(p.verdict) <> max(p.verdict) THEN 'tie' ELSE min(p.verdict) "
             "END AS outcome, min(p.verdict) <> max(p.verdict) AS flipped, "
             "sign(any_value(p.length_a) - any_value(p.length_b))::INTEGER AS longer, " + _bins("p", "any_value")
             + ", count(*) FILTER (p.verdict <> 'tie' AND (CASE p.verdict WHEN 'a' THEN p.model_a ELSE p.model_b "
             "END) = p.first) AS first_wins, count(*) FILTER (p.verdict <> 'tie') AS first_decided "
             "FROM pairwise_verdicts p {touched_p} JOIN queries q ON q.dataset = p.dataset AND "
             "q.query_id = p.query_id" + _current("p")
             + " WHERE p.parse_ok GROUP BY p.dataset, p.query_id, p.model_a, p.model_b, p.judge_id")
# Only the votes and verdicts are restricted to the touched keys (a placeholder in both parts restricts each part's
# own alias): a join of the few touched rows to the whole responses and queries by equality is cheaper than
# restricting those too (docs/arena.md measures it). A pair's two orders are both
# current, so they compared the same two texts: their lengths and styles are equal.

PAIR_GROUP = ("dataset", "origin", "judge", "language", "script", "complete", "model_a", "model_b", "outcome",
              "flipped", "longer")
STYLE_GROUP = ("dataset", "origin", "judge", "language", "model_a", "model_b", "outcome", *style.FEATURES)
_JUDGE = "CASE WHEN c.origin = 'judge' THEN c.rater ELSE '' END AS judge"

DERIVED = (
    Derived("arena_comparisons", key=KEY, reads=("arena_votes", "pairwise_verdicts", "responses", "queries"),
            alias="v", watch=QUERY_LANGUAGE, select=(
        "SELECT dataset, query_id, model_a, model_b, origin, rater, language, script, complete, outcome, flipped, "
        f"longer, {', '.join(style.FEATURES)}, first_wins::INTEGER AS first_wins, "
        f"first_decided::INTEGER AS first_decided FROM ({_VOTES} UNION ALL {_VERDICTS})")),
    Derived("arena_pairs", key=PAIR_GROUP, reads=("arena_comparisons",), alias="c",
            counts=Counts("arena_comparisons", ("n", "first_wins", "first_decided")), select=(
        f"SELECT c.dataset, c.origin, {_JUDGE}, c.language, c.script, c.complete, c.model_a, c.model_b, c.outcome, "
        "c.flipped, c.longer, count(*)::INTEGER AS n, sum(c.first_wins)::INTEGER AS first_wins, "
        "sum(c.first_decided)::INTEGER AS first_decided FROM {rows} c GROUP BY ALL")),
    Derived("arena_styles", key=STYLE_GROUP, reads=("arena_comparisons",), alias="c",
            counts=Counts("arena_comparisons", ("n",)), select=(
        f"SELECT c.dataset, c.origin, {_JUDGE}, c.language, c.model_a, c.model_b, c.outcome, "
        f"{', '.join('c.' + f for f in style.FEATURES)}, count(*)::INTEGER AS n FROM {{rows}} c WHERE c.complete "
        "GROUP BY ALL")),
)
