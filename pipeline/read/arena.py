"""The doctors' arena: pairwise votes and the pairwise judge's verdicts, grouped in SQL, fitted by
``pipeline.analysis.arena`` (Bradley–Terry, style control, agreement), and the next pair to show.

Over 450 lines: the arena page's read models (boards, biases, the vote queue, exports) share its SQL helpers
(``_where``, ``_relation``, ``grouped_sql``); a split by view would export them.

Only comparisons of the response texts stored now count: a vote or verdict whose ``response_hash_a`` / ``_b`` is not
its model's current response hash (or whose response now has an error) is left out. A vote of "both bad" is a tie.
A judge's comparison is its two orders together: the same verdict in both is that verdict, different verdicts are
a tie and a position flip; a pair with an order unparsed or missing is not a comparison. The store keeps these
comparisons and their counts (``pipeline.store.derived_arena``: ``arena_comparisons``, counted into ``arena_pairs``
per pair, outcome, language and script, and ``arena_styles`` per style bin), so a read sums a few thousand grouped
rows instead of checking a million votes' texts, and a fit works on them.

The voter-quality table (``annotators``, ``pipeline.analysis.annotators``), a leaderboard without some annotators or
with each one's votes capped, and the "both bad" rates (``both_bad``) read the doctors' current comparisons one by
one (``arena_comparisons`` joined to their votes) instead.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline import style
from pipeline.analysis.arena import (
    STYLE_FEATURES,
    Z95,
    BTFit,
    adjacent_pairs,
    bradley_terry,
    elo_points,
    rank_agreement,
    win_rates,
)
from pipeline.models.reference import is_reference
from pipeline.read.common import df, has_columns
from pipeline.store import DERIVED, SHARED_READERS, derived_arena
from pipeline.store.derived_arena import STYLE_BINS

SOURCES = ("doctors", "judge")
ROUNDS = 100  # bootstrap rounds of a leaderboard
STYLE_ROUNDS = 30  # of a style-controlled one (thousands of style groups at a million votes: each refit costs more)
VERBOSITY_ROUNDS = 0  # of the length-only fit behind the bias view's length effect: its point estimate only (the
# style-controlled leaderboard gives every style coefficient's interval)
# STYLE_BINS (the store's): a normalised style difference in [-1, 1] is grouped to 1/STYLE_BINS: a rounding error of
# sd 0.03, small beside the differences' spread (≈ 0.2), so the style coefficients are hardly attenuated
ARENA_TABLES = ("arena_votes", "pairwise_verdicts")
ARENA_DERIVED = tuple(d.name for d in derived_arena.DERIVED)  # declared once, in pipeline.store.derived_arena
EXPORT_COLUMNS = ["dataset", "query_id", "model_a", "model_b", "winner", "annotator", "shown_left", "tags",
                  "shown_at", "voted_at"]


_VOTE_COLUMNS = ("dataset", "query_id", "model_a", "model_b", "annotator", "winner", "response_hash_a",
                 "response_hash_b")
NO_VOTES = ("(SELECT * FROM (VALUES (" + ", ".join(["NULL::VARCHAR"] * len(_VOTE_COLUMNS) + ["NULL::INTEGER"] * 8)
            + ")) AS t(" + ", ".join([*_VOTE_COLUMNS, *style.COLUMNS])
            + ") WHERE FALSE)")  # arena_votes of a file written before the arena


def has_arena(db: str | Path) -> bool:
    """Whether the file has the arena's tables (a database written before them has neither)."""
    with SHARED_READERS.cursor(db) as con:
        return con.execute("SELECT count(*) FROM duckdb_tables() WHERE list_contains(?, table_name)",
                           [list(ARENA_TABLES)]).fetchone()[0] == len(ARENA_TABLES)


# -- SQL pieces ------------------------------------------------------------------------------------------
def _shown_at(db: str | Path, alias: str = "") -> str:
    """The votes' ``shown_at`` column, or NULL in a file the writer has not upgraded to it (schema 11)."""
    column = f"{alias + '.' if alias else ''}shown_at"
    return column if has_columns(db, "arena_votes", "shown_at") else "NULL::TIMESTAMP"


def _relation(db: str | Path, name: str) -> str:
    """A FROM relation of the derived arena table ``name`` (``pipeline.store.derived_arena``): the table, or its
    definition for a file the writer has not opened since the table was added (reads never write)."""
    with SHARED_READERS.cursor(db) as con:
        present = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE list_contains(?, "
                                             "table_name)", [list(ARENA_DERIVED)]).fetchall()}
    if name in present:
        return name
    d = DERIVED[name]
    if d.counts is None:
        return f"({d.definition()})"
    return f"({d.select.format(rows=_relation(db, d.counts.parent) + ' ')})"


def _where(source: str, dataset: str | None, language: str | None, judge: str | None,
           alias: str = "") -> tuple[str, list[Any]]:
    """WHERE predicate of the arena tables: ``source``'s complete comparisons (a judge's: ``judge``'s) of the dataset
    and language (None: all)."""
    if source not in SOURCES:
        raise ValueError(f"source {source!r} is not one of {', '.join(SOURCES)}")
    p = f"{alias}." if alias else ""
    preds, params = [f"{p}origin = ?", f"{p}judge = ?"], [source, judge if source == "judge" else ""]
    for column, value in (("dataset", dataset), ("language", language)):
        if value is not None:
            preds.append(f"{p}{column} = ?")
            params.append(value)
    return " AND ".join(preds), params


def _doctors_where(dataset: str | None, language: str | None, alias: str = "c") -> tuple[str, list[Any]]:
    """WHERE predicate of ``arena_comparisons`` (alias ``alias``): the doctors' votes of the dataset and language."""
    preds, params = [f"{alias}.origin = 'doctors'"], []
    for column, value in (("dataset", dataset), ("language", language)):
        if value is not None:
            preds.append(f"{alias}.{column} = ?")
            params.append(value)
    return " AND ".join(preds), params


def _counts(db: str | Path, source: str, dataset: str | None, language: str | None, judge: str | None,
            select: str, group: str = "", complete: bool = True) -> pd.DataFrame:
    """``select`` over ``arena_pairs``' rows of ``source`` (``_where``; only complete comparisons by default)."""
    where, params = _where(source, dataset, language, judge)
    return df(db, f"SELECT {select} FROM {_relation(db, 'arena_pairs')} WHERE {where}"
              + (" AND complete" if complete else "") + (f" GROUP BY {group}" if group else ""), params)


def grouped_sql(db: str | Path, source: str, dataset: str | None, language: str | None, judge: str | None, *,
                style: bool, features: tuple[str, ...] = STYLE_FEATURES, exclude: tuple[str, ...] = (),
                cap: int | None = None) -> tuple[str, list[Any]]:
    """(model_a, model_b, outcome, n) per group; with ``style`` also each style feature's (of ``features``)
    normalised difference (a − b) / (a + b + 1), binned to 1/``STYLE_BINS`` — sums of the store's counted tables
    ``arena_pairs`` / ``arena_styles``. The doctors' votes without the annotators ``exclude`` and only each
    annotator's first ``cap`` votes (by vote time) are counted from ``arena_comparisons`` instead."""
    unknown = set(features) - set(STYLE_FEATURES)
    if unknown:
        raise ValueError(f"unknown style feature(s) {sorted(unknown)}")
    bins = ", ".join(f"{f} / {STYLE_BINS} AS {f}" for f in features)
    if exclude or cap is not None:
        if source != "doctors":
            raise ValueError("excluding annotators or capping their votes applies to the doctors' votes")
        where, params = _doctors_where(dataset, language)
        comparisons = _relation(db, "arena_comparisons")
        capped = ("" if cap is None else " QUALIFY row_number() OVER (PARTITION BY c.rater ORDER BY v.voted_at, "
                  "c.query_id, c.model_a, c.model_b) <= ?")
        return (f"SELECT model_a, model_b, outcome, {bins + ', ' if style else ''}count(*)::BIGINT AS n FROM "
                f"(SELECT c.* FROM {comparisons} c JOIN arena_votes v ON v.dataset = c.dataset AND v.query_id = "
                "c.query_id AND v.model_a = c.model_a AND v.model_b = c.model_b AND v.annotator = c.rater "
                f"WHERE {where} AND NOT list_contains(?, c.rater){capped}) GROUP BY ALL"), \
            [*params, list(exclude), *([cap] if cap is not None else [])]
    where, params = _where(source, dataset, language, judge)
    if not style:
        return (f"SELECT model_a, model_b, outcome, sum(n)::BIGINT AS n FROM {_relation(db, 'arena_pairs')} "
                f"WHERE {where} AND complete GROUP BY ALL"), params
    return (f"SELECT model_a, model_b, outcome, {bins}, sum(n)::BIGINT AS n FROM {_relation(db, 'arena_styles')} "
            f"WHERE {where} GROUP BY ALL"), params


def _pair_counts(db: str | Path, dataset: str | None, language: str | None) -> dict[tuple[str, str], int]:
    """The doctors' current comparisons per pair."""
    rows = _counts(db, "doctors", dataset, language, None, "model_a, model_b, sum(n)::BIGINT AS n", "ALL")
    return {(a, b): int(n) for a, b, n in rows.itertuples(index=False)}


# -- read models -------------------------------------------------------------------------------------------
def comparisons(db: str | Path, dataset: str | None, language: str | None = None, source: str = "doctors",
                judge: str | None = None, *, style: bool = False, features: tuple[str, ...] = STYLE_FEATURES,
                exclude: tuple[str, ...] = (), cap: int | None = None) -> pd.DataFrame:
    """The grouped comparisons a leaderboard fits (``grouped_sql``)."""
    return df(db, *grouped_sql(db, source, dataset, language, judge, style=style, features=features,
                               exclude=exclude, cap=cap))


def fit(db: str | Path, dataset: str | None, language: str | None = None, source: str = "doctors",
        judge: str | None = None, *, style_control: bool = False, rounds: int = ROUNDS, seed: int = 0,
        features: tuple[str, ...] = STYLE_FEATURES, anchor: str | None = None, exclude: tuple[str, ...] = (),
        cap: int | None = None) -> BTFit:
    """The Bradley–Terry leaderboard (and the coefficients of the style ``features``) of one source, dataset and
    language (None: all); strengths anchored at ``anchor`` (1000) when given and it has comparisons here, else
    centred; the doctors' votes without ``exclude``'s annotators and capped at ``cap`` per annotator."""
    rows = comparisons(db, dataset, language, source, judge, style=style_control, features=features,
                       exclude=exclude, cap=cap)
    if anchor is not None and not (rows.model_a.eq(anchor).any() or rows.model_b.eq(anchor).any()):
        anchor = None  # not compared here: centred
    result = bradley_terry(rows, style=features if style_control else (), rounds=rounds, seed=seed,
                           anchor=anchor)
    return replace(result, table=reference_unranked(result.table))


def reference_unranked(table: pd.DataFrame) -> pd.DataFrame:
    """A leaderboard (best first) whose doctors' approved answers (``reference/approved``) keep their strength and
    interval but no rank: a reference row, the models ranked 1.. without it. Unchanged without a reference row."""
    is_ref = table.model.map(is_reference).to_numpy(dtype=bool) if len(table) else np.zeros(0, dtype=bool)
    if not is_ref.any():
        return table
    rank = pd.array([pd.NA] * len(table), dtype="Int64")
    rank[~is_ref] = np.arange(1, int((~is_ref).sum()) + 1)
    return table.assign(rank=rank)


def leaderboard(db: str | Path, dataset: str | None, language: str | None = None, source: str = "doctors",
                judge: str | None = None, *, style_control: bool = False, rounds: int = ROUNDS,
                seed: int = 0, anchor: str | None = None) -> pd.DataFrame:
    """model, strength, lower, upper (bootstrap 95 %), votes, rank, note; best first. What the CLI prints and the
    page shows."""
    return fit(db, dataset, language, source, judge, style_control=style_control, rounds=rounds, seed=seed,
               anchor=anchor).table


def win_matrix(db: str | Path, dataset: str | None, language: str | None = None, source: str = "doctors",
               judge: str | None = None) -> pd.DataFrame:
    """Row model's win rate against the column model (ties half)."""
    rows = comparisons(db, dataset, language, source, judge)
    return win_rates(rows) if len(rows) else pd.DataFrame()


def languages(db: str | Path, dataset: str) -> list[str]:
    """The dataset's query languages, in order."""
    return [r[0] for r in df(db, "SELECT DISTINCT language FROM queries WHERE dataset = ? ORDER BY 1",
                             [dataset]).itertuples(index=False)]


def doctors_vs_judge(db: str | Path, dataset: str | None, judge: str, *, rounds: int = 0) -> pd.DataFrame:
    """Per language (and 'all'): comparisons of each source, Kendall's τ between the two leaderboards, and the
    agreement (share and Cohen's κ over a / b / tie) on the comparisons both made of the same texts."""
    lang_sql = "SELECT DISTINCT language FROM queries" + (" WHERE dataset = ?" if dataset is not None else "")
    langs = [None, *sorted(df(db, lang_sql, [dataset] if dataset is not None else []).language)]
    out = []
    for language in langs:
        doctors = fit(db, dataset, language, "doctors", rounds=rounds).table
        judged = fit(db, dataset, language, "judge", judge, rounds=rounds).table
        d_where, d_params = _where("doctors", dataset, language, None, "d")
        j_where, j_params = _where("judge", dataset, language, judge, "j")
        table = _relation(db, "arena_comparisons")  # both current: the same two texts
        shared = df(db, f"SELECT d.outcome AS doctor, j.outcome AS judge, count(*) AS n FROM "
                    f"(SELECT *, '' AS judge FROM {table}) d JOIN (SELECT *, rater AS judge FROM {table}) j USING "
                    f"(dataset, query_id, model_a, model_b) WHERE {d_where} AND {j_where} AND j.complete GROUP BY ALL",
                    [*d_params, *j_params])
        agreement = rank_agreement(doctors, judged, shared)
        out.append({"language": language or "all", "doctor_votes": int(doctors.votes.sum() / 2),
                    "judge_comparisons": int(judged.votes.sum() / 2), "shared": agreement["shared"],
                    "agreement": agreement["agreement"], "kappa": agreement["kappa"], "kendall_tau": agreement["tau"],
                    "ranks": agreement["ranks"]})
    return pd.DataFrame(out)


# -- the judge's biases --------------------------------------------------------------------------------------
def position_flips(db: str | Path, dataset: str | None, judge: str) -> pd.DataFrame:
    """Per language and script: the judge's comparisons, how many flipped with the order, the flip rate, and the
    share of its decided (non-tie) single-order verdicts that preferred the response shown first (0.5 = none)."""
    return _counts(db, "judge", dataset, None, judge, "language, script, (sum(n) FILTER (complete))::BIGINT AS "
                   "comparisons, coalesce(sum(n) FILTER (complete AND flipped), 0)::BIGINT AS flips, "
                   "flips / comparisons AS flip_rate, sum(first_wins) / nullif(sum(first_decided), 0) AS first_wins",
                   "ALL HAVING comparisons > 0 ORDER BY language, script", complete=False)


def verbosity(db: str | Path, dataset: str | None, source: str = "judge", judge: str | None = None, *,
              rounds: int = VERBOSITY_ROUNDS) -> dict:
    """How much the source prefers the longer response: the share of decided comparisons the longer one won,
    and the length coefficient of a fit with the length difference as the one style covariate (Elo points per
    typical normalised length difference; with ``rounds`` a bootstrap interval, else NaN)."""
    decided = "outcome <> 'tie' AND longer <> 0"
    longer = _counts(db, source, dataset, None, judge, f"sum(n) FILTER ({decided} AND (longer > 0) = (outcome = 'a'))"
                     f" / sum(n) FILTER ({decided}) AS longer_wins, coalesce(sum(n) FILTER ({decided}), 0) AS "
                     "decided").iloc[0]
    styled = fit(db, dataset, None, source, judge, style_control=True, rounds=rounds, features=("length",)).style
    length = styled[styled.feature == "length"]
    coef = length.iloc[0] if len(length) else None
    return {"longer_wins": float(longer.longer_wins) if pd.notna(longer.longer_wins) else float("nan"),
            "decided": int(longer.decided),
            **{f"length_{k}": elo_points(float(getattr(coef, k))) if coef is not None else float("nan")
               for k in ("coef", "lower", "upper")}}


def self_preference(db: str | Path, dataset: str | None, judge: str) -> pd.DataFrame:
    """When the judge is also a candidate model: its win rate (ties half) judged by itself, by the doctors and by
    each other pairwise judge, over the comparisons each made of it."""
    score = "CASE WHEN outcome = 'tie' THEN 0.5 WHEN (outcome = 'a') = (model_a = ?) THEN 1.0 ELSE 0.0 END"
    where, params = ("AND dataset = ?", [dataset]) if dataset is not None else ("", [])
    table = df(db, f"SELECT CASE origin WHEN 'doctors' THEN 'doctors' ELSE judge END AS rater, sum({score} * n) / "
               f"sum(n) AS win_rate, sum(n)::BIGINT AS comparisons FROM {_relation(db, 'arena_pairs')} WHERE complete "
               f"AND ? IN (model_a, model_b) {where} GROUP BY origin, judge ORDER BY origin = 'judge', judge",
               [judge, judge, *params])
    table = table[table.comparisons > 0].reset_index(drop=True)
    return table.assign(self_judged=table.rater == judge)


def direct_verbosity(db: str | Path, dataset: str | None, judge: str, metric: str) -> dict:
    """For the direct judge's scores of ``metric``: how much its item score rises per doubling of the response's
    length (``slope_judge``), and how much of that the doctors' labels do not explain (``slope_beyond``: the slope
    of judge − doctor, with its 95 % interval), over the labelled items (the writer's ``label_pairs``); scipy's
    least-squares line. NaN with fewer than 3 labelled items of different lengths."""
    from scipy.stats import linregress

    where, params = ("AND l.dataset = ?", [dataset]) if dataset is not None else ("", [])
    rows = df(db, "SELECT l.llm, l.human, length(r.text) AS length FROM label_pairs l JOIN responses r ON "
              "r.dataset = l.dataset AND r.query_id = l.query_id AND r.model_id = l.model_id WHERE l.judge_id = ? "
              f"AND l.label_metric = ? AND l.llm IS NOT NULL AND l.human IS NOT NULL AND r.text <> '' {where}",
              [judge, metric, *params])
    nan = float("nan")
    out = {"items": len(rows), "slope_judge": nan, "slope_beyond": nan, "beyond_lower": nan, "beyond_upper": nan}
    if len(rows) < 3 or rows.length.nunique() < 2:
        return out
    doublings = np.log2(rows.length.to_numpy(dtype=float))
    beyond = linregress(doublings, rows.llm - rows.human)
    half = Z95 * beyond.stderr
    return {**out, "slope_judge": float(linregress(doublings, rows.llm).slope), "slope_beyond": float(beyond.slope),
            "beyond_lower": float(beyond.slope - half), "beyond_upper": float(beyond.slope + half)}


# -- which pair next -------------------------------------------------------------------------------------------
def _pick_query(con: Any, dataset: str, language: str | None, annotator: str, a: str, b: str,
                seed: str, votes: str) -> str | None:
    """A query both models answered (current, no error) that ``annotator`` has not voted on for this pair:
    the one with the fewest votes on this pair, then a seeded shuffle."""
    lang = " AND q.language = ?" if language is not None else ""
    row = con.execute(
        "SELECT q.query_id FROM queries q JOIN responses ra ON ra.dataset = q.dataset AND ra.query_id = q.query_id "
        "AND ra.model_id = ? AND ra.error IS NULL AND ra.text IS NOT NULL JOIN responses rb ON rb.dataset = q.dataset "
        "AND rb.query_id = q.query_id AND rb.model_id = ? AND rb.error IS NULL AND rb.text IS NOT NULL "
        f"WHERE q.dataset = ?{lang} AND NOT EXISTS (SELECT 1 FROM {votes} v WHERE v.dataset = q.dataset AND "
        "v.query_id = q.query_id AND v.model_a = ? AND v.model_b = ? AND v.annotator = ?) "
        f"ORDER BY (SELECT count(*) FROM {votes} v WHERE v.dataset = q.dataset AND v.query_id = q.query_id "
        "AND v.model_a = ? AND v.model_b = ?), md5(q.query_id || ?) LIMIT 1",
        [a, b, dataset, *([language] if language is not None else []), a, b, annotator, a, b, seed]).fetchone()
    return None if row is None else row[0]


def pair_order(table: pd.DataFrame, models: list[str], counts: dict[tuple[str, str], int], *, adaptive: bool,
               seed: str) -> list[tuple[str, str]]:
    """Every pair of ``models`` (a < b) in the order to offer them. Adaptive: first pairs with a model not on the
    leaderboard yet, then adjacent models by ``adjacent_pairs``' priority (overlapping intervals, few direct
    comparisons), then every other pair by its comparisons so far; uniform: a seeded shuffle."""

    def shuffled(p: tuple[str, str]) -> str:
        return hashlib.sha256(f"{seed}|{p[0]}|{p[1]}".encode()).hexdigest()

    pairs = [(a, b) for i, a in enumerate(sorted(models)) for b in sorted(models)[i + 1:]]
    if not adaptive:
        return sorted(pairs, key=shuffled)
    ranked = set(table.model) if len(table) else set()
    adjacent = adjacent_pairs(table, counts) if len(table) > 1 else pd.DataFrame(columns=["higher", "lower",
                                                                                        "priority"])
    priority = {tuple(sorted((r.higher, r.lower))): r.priority for r in adjacent.itertuples()}

    def key(p: tuple[str, str]) -> tuple:
        unseen = len({*p} - ranked)
        return (-unseen, -priority.get(p, -1.0), counts.get(p, 0), shuffled(p))

    return sorted(pairs, key=key)


def next_pair(db: str | Path, dataset: str, language: str | None, annotator: str, *, adaptive: bool = True,
              table: pd.DataFrame | None = None, seed: str = "") -> dict[str, Any] | None:
    """The next comparison for ``annotator``: ``query_id``, ``model_a`` < ``model_b``, and the texts shown (query,
    ground truth, both responses and their hashes, the retrieved chunks; with the reference answer in the pair, no
    ground truth and no chunk holding the reference's text, counted in ``withheld_chunks``: ``_blind``); None when
    every pair of every query has been voted on by them. ``table`` is the current doctors' leaderboard (adaptive
    choice)."""
    voted = has_arena(db)
    counts = _pair_counts(db, dataset, language) if voted else {}
    with SHARED_READERS.cursor(db) as con:
        lang = " AND q.language = ?" if language is not None else ""
        models = [r[0] for r in con.execute(
            "SELECT DISTINCT r.model_id FROM responses r JOIN queries q ON q.dataset = r.dataset AND q.query_id = "
            f"r.query_id WHERE r.dataset = ?{lang} AND r.error IS NULL AND r.text IS NOT NULL ORDER BY 1",
            [dataset, *([language] if language is not None else [])]).fetchall()]
        votes = "arena_votes" if voted else NO_VOTES
        table = table if table is not None else pd.DataFrame(columns=["model", "strength", "lower", "upper"])
        for a, b in pair_order(table, models, counts, adaptive=adaptive, seed=seed + annotator):
            query_id = _pick_query(con, dataset, language, annotator, a, b, seed, votes)
            if query_id is not None:
                return _item(con, dataset, query_id, a, b)
    return None


def _item(con: Any, dataset: str, query_id: str, a: str, b: str) -> dict[str, Any]:
    q = con.execute("SELECT query, query_en, gt_response, language FROM queries WHERE dataset = ? AND query_id = ?",
                    [dataset, query_id]).fetchone()
    texts = dict(((m, (t, h)) for m, t, h in con.execute(
        "SELECT model_id, text, response_hash FROM responses WHERE dataset = ? AND query_id = ? AND "
        "list_contains(?, model_id)", [dataset, query_id, [a, b]]).fetchall()))
    chunks = con.execute(
        "SELECT k.kind, k.title, k.text FROM retrievals r, unnest(list_concat(r.raw_ids, r.update_ids)) AS u(id) "
        "JOIN kb_chunks k ON k.dataset = r.dataset AND k.chunk_id = u.id WHERE r.dataset = ? AND r.query_id = ?",
        [dataset, query_id]).fetchall()
    shown, gt, withheld = _blind([{"kind": k, "title": t, "text": x} for k, t, x in chunks], q[2],
                                 [texts[m][0] for m in (a, b) if is_reference(m)])
    return {"dataset": dataset, "query_id": query_id, "query": q[0], "query_en": q[1], "gt_response": gt,
            "language": q[3], "model_a": a, "model_b": b, "text_a": texts[a][0], "text_b": texts[b][0],
            "hash_a": texts[a][1], "hash_b": texts[b][1], "chunks": shown, "withheld_chunks": withheld}


def _blind(chunks: list[dict[str, str]], gt: str | None, references: list[str]) -> tuple[list[dict], str | None, int]:
    """What may be shown beside a blind pair: with the doctors' reference answer in the pair (``references``, its
    texts) neither the ground truth nor a retrieved chunk holding the reference's text (an update made from that
    answer) is shown, since either would tell which answer is the reference. Returns (chunks shown, ground truth
    or None, chunks withheld)."""
    if not references:
        return chunks, gt, 0
    needles = {n for n in (_folded(t) for t in [*references, gt or ""]) if len(n) >= 20}
    shown = [c for c in chunks if not any(n in _folded(c["text"]) for n in needles)]
    return shown, None, len(chunks) - len(shown)


def _folded(text: str | None) -> str:
    return " ".join((text or "").casefold().split())


def separation(db: str | Path, dataset: str | None, language: str | None, table: pd.DataFrame) -> pd.DataFrame:
    """Adjacent models of the doctors' leaderboard ``table``: their difference, whether their intervals overlap,
    their direct comparisons and how many more would separate them (``adjacent_pairs``)."""
    table = table[table["rank"].notna()] if len(table) else table  # the reference row is no model to separate
    return adjacent_pairs(table, _pair_counts(db, dataset, language)) if len(table) > 1 else pd.DataFrame()


def annotator_votes(db: str | Path, dataset: str, annotator: str) -> int:
    """How many votes ``annotator`` has given on ``dataset``."""
    if not has_arena(db):
        return 0
    return int(df(db, "SELECT count(*) AS n FROM arena_votes WHERE dataset = ? AND annotator = ?",
                  [dataset, annotator]).n.iloc[0])


def export_votes(db: str | Path, dataset: str | None = None) -> pd.DataFrame:
    """Every stored vote (current or not) in ``import-votes``' columns, tags joined by ';'."""
    where, params = ("WHERE dataset = ?", [dataset]) if dataset is not None else ("", [])
    return df(db, "SELECT dataset, query_id, model_a, model_b, winner, annotator, shown_left, "
              f"array_to_string(tags, ';') AS tags, {_shown_at(db)} AS shown_at, voted_at FROM arena_votes {where} "
              "ORDER BY dataset, query_id, model_a, model_b, annotator", params)


def judges(db: str | Path) -> list[str]:
    """The pairwise judges with stored verdicts."""
    return list(df(db, "SELECT DISTINCT judge_id FROM pairwise_verdicts ORDER BY 1").judge_id)


# -- voters and "both bad" ----------------------------------------------------------------------------------
def datasets(db: str | Path) -> list[str]:
    """The datasets of the file."""
    return list(df(db, "SELECT name FROM datasets ORDER BY 1").name)


def all_languages(db: str | Path, dataset: str | None) -> list[str]:
    """The query languages of ``dataset`` (None: of every dataset)."""
    where, params = ("WHERE dataset = ?", [dataset]) if dataset is not None else ("", [])
    return list(df(db, f"SELECT DISTINCT language FROM queries {where} ORDER BY 1", params).language)


def _current_votes(db: str | Path, dataset: str | None, language: str | None, select: str, extra: str = "",
                   params: list[Any] | None = None, sql_only: bool = False) -> Any:
    """``select`` over the doctors' current votes (``arena_comparisons`` c joined to their ``arena_votes`` v and
    ``extra``): the frame, or with ``sql_only`` the (SQL, parameters)."""
    where, where_params = _doctors_where(dataset, language)
    sql = (f"SELECT {select} FROM {_relation(db, 'arena_comparisons')} c JOIN arena_votes v ON "
           "v.dataset = c.dataset AND v.query_id = c.query_id AND v.model_a = c.model_a AND v.model_b = c.model_b "
           f"AND v.annotator = c.rater {extra} WHERE {where}")
    params = [*(params or []), *where_params]
    return (sql, params) if sql_only else df(db, sql, params)


def vote_rows(db: str | Path, dataset: str | None, language: str | None = None,
              judge: str | None = None) -> pd.DataFrame:
    """One row per current doctors' vote: annotator, model_a, model_b, outcome (both bad a tie), left (which of
    'a' / 'b' was shown on the left, None when unknown), seconds (vote time − shown time, NaN when unknown),
    voted_at and judge_outcome (``judge``'s complete comparison of the same texts; None without ``judge``)."""
    judged = (f"LEFT JOIN (SELECT dataset, query_id, model_a, model_b, outcome FROM "
              f"{_relation(db, 'arena_comparisons')} WHERE origin = 'judge' AND complete AND rater = ?) j ON "
              "j.dataset = c.dataset AND j.query_id = c.query_id AND j.model_a = c.model_a AND j.model_b = c.model_b")
    return _current_votes(
        db, dataset, language,
        "c.rater AS annotator, c.model_a, c.model_b, c.outcome, CASE v.shown_left WHEN c.model_a THEN 'a' "
        f"WHEN c.model_b THEN 'b' END AS \"left\", epoch(v.voted_at) - epoch({_shown_at(db, 'v')}) AS seconds, "
        "v.voted_at, "
        "j.outcome AS judge_outcome", judged, [judge or ""])


def annotators(db: str | Path, dataset: str | None, language: str | None = None,
               judge: str | None = None) -> pd.DataFrame:
    """The voter-quality table (``pipeline.analysis.annotators``): annotator, votes, median_seconds, left_share,
    consensus_agreement (and what it is expected to be), judge_agreement with ``judge`` (default: the first
    pairwise judge), flagged, reason."""
    from pipeline.analysis.annotators import annotator_quality

    if judge is None:
        known = judges(db)
        judge = known[0] if known else None
    return annotator_quality(vote_rows(db, dataset, language, judge))


def flagged(db: str | Path, dataset: str | None, language: str | None = None) -> tuple[str, ...]:
    """The annotators flagged in the voter-quality table of this dataset and language."""
    table = annotators(db, dataset, language)
    return tuple(table.annotator[table.flagged])


def both_bad(db: str | Path, dataset: str | None, language: str | None = None, *,
             by_language: bool = False) -> pd.DataFrame:
    """Per model (and language with ``by_language``): its current doctors' votes, how many were "both bad" and that
    rate with its 95 % Wilson interval (statsmodels) — the one absolute signal of the arena, which BT folds into
    ties."""
    from statsmodels.stats.proportion import proportion_confint

    lang = ", language" if by_language else ""
    where, where_params = _where("doctors", dataset, language, None)
    pairs = f"(SELECT * FROM {_relation(db, 'arena_pairs')} WHERE {where} AND complete)"
    total = df(db, f"SELECT model{lang}, sum(n)::BIGINT AS votes FROM (SELECT model_a AS model, language, n FROM "
               f"{pairs} UNION ALL SELECT model_b, language, n FROM {pairs}) GROUP BY ALL",
               [*where_params, *where_params])
    bad_sql, params = _current_votes(db, dataset, language, "c.model_a, c.model_b, c.language",
                                     extra="AND v.winner = 'both_bad'", sql_only=True)  # the few: joined alone
    bad = df(db, f"SELECT model{lang}, count(*)::BIGINT AS both_bad FROM (SELECT model_a AS model, language FROM "
             f"({bad_sql}) UNION ALL SELECT model_b, language FROM ({bad_sql})) GROUP BY ALL", [*params, *params])
    keys = ["model", "language"] if by_language else ["model"]
    rows = total.merge(bad, on=keys, how="left").fillna({"both_bad": 0}).astype({"both_bad": "int64"})
    rows = rows[rows.votes > 0].sort_values(keys).reset_index(drop=True)
    lower, upper = proportion_confint(rows.both_bad, rows.votes, alpha=0.05, method="wilson")
    return rows.assign(both_bad_rate=rows.both_bad / rows.votes, both_bad_lower=lower, both_bad_upper=upper)
