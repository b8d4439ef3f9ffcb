"""Rubric scores (HealthBench): the leaderboard by rubric score, per-tag breakdowns, one response's criteria, and
the grader against physicians.

Every number comes from ``pipeline.analysis.rubric`` (HealthBench's ``calculate_score``, clipped mean and
bootstrap, tag metrics, meta-eval agreement); this module only selects the grades that count, in DuckDB.

A grade counts when it is **current**: it graded the response text now stored (its ``response_hash``; never an
errored response) and the criterion the query's rubric now has at its index (same text and points). An item
(query × model) that has any current grade is an item of the board; it is **scored** when every criterion of
its rubric has a current, parsed grade. A criterion whose grader output could not be read (``met`` NULL) is
*unparsed*: its item has no score — never 0, never counted as met or not met. An item still missing grades
(a run stopped halfway, a criterion changed since) is unscored likewise.

Tags: a criterion's tags (``axis:accuracy``, ``theme:hygiene`` …) restrict an item to those criteria, as
HealthBench's rubric tags do. A tag that every criterion of an item carries (other than ``axis:``, ``level:``
and ``cluster:`` tags) is that item's *example tag*, as HealthBench's ``example_tags`` (the HealthBench
importer copies them onto every criterion), and selects items; the query's dataset themes select items as
``query_theme:<theme>``. (Restricting an item to all its criteria gives its overall score, so either
reading of such a tag gives the same number.)
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from pipeline.analysis.rubric import (
    OVERALL,
    calculate_score,
    clipped_stats_moments,
    needs_histogram,
    pair_agreement,
)
from pipeline.models.reference import is_reference
from pipeline.read.common import current_hash, db_stamp
from pipeline.store import DERIVED, SHARED_READERS
from pipeline.store.derived_rubric import DERIVED as DERIVED_RUBRIC

ALL_LANGUAGES = "all"
RUBRIC_LEVEL_PREFIXES = ("axis:", "level:", "cluster:")  # criterion-level tags in HealthBench's vocabulary
QUERY_THEME = "query_theme:"
CI_RESAMPLES = 1000
STAT_COLUMNS = ["score", "ci_lo", "ci_hi", "bootstrap_std"]
LEADERBOARD_COLUMNS = ["model_id", "language", "rank", *STAT_COLUMNS, "n_items", "n_scored", "n_unscored",
                       "n_unparsed", "n_ungraded"]
TAG_COLUMNS = ["model_id", "tag", "kind", "score", "ci_lo", "ci_hi", "bootstrap_std", "n_samples"]
ITEM_COLUMNS = ["criterion_index", "criterion", "points", "tags", "status", "met", "explanation", "raw_output",
                "stale"]
META_COLUMNS = ["group", "category", "n_criteria", "n_pairs", "agreement", "f1_pos", "f1_neg", "macro_f1",
                "n_unparsed"]
_RUBRIC_TYPE = '[{"criterion": "VARCHAR", "points": "DOUBLE", "tags": ["VARCHAR"]}]'


def _rubric_cte(alias: str = "rub", query_pred: str = "TRUE") -> str:
    """``rub``: one row per criterion of the dataset's current rubrics (0-based ``idx``), with the query's language
    and themes. Parameter: the dataset (then whatever ``query_pred`` takes)."""
    return (f"{alias} AS (SELECT query_id, language, themes, unnest(range(len(cs))) AS idx, unnest(cs) AS c FROM "
            f"(SELECT query_id, language, themes, from_json(rubric, '{_RUBRIC_TYPE}') AS cs FROM queries "
            f"WHERE dataset = ? AND rubric IS NOT NULL AND {query_pred}))")


def _current_cte(db: str | Path) -> str:
    """``cur``: the grader's current grades (module docstring). Parameters: dataset, grader (after ``rub``'s)."""
    return ("cur AS (SELECT g.query_id, g.model_id, g.criterion_index AS idx, g.met, rub.language, rub.themes, "
            "rub.c.points AS points, rub.c.tags AS tags FROM rubric_grades g "
            "JOIN responses r ON r.dataset = g.dataset AND r.query_id = g.query_id AND r.model_id = g.model_id "
            f"AND r.error IS NULL AND g.response_hash = {current_hash(db, 'r')} "
            "JOIN rub ON rub.query_id = g.query_id AND rub.idx = g.criterion_index AND rub.c.criterion = g.criterion "
            "AND rub.c.points = g.points WHERE g.dataset = ? AND g.grader_id = ?)")


def _as_list(value: Any) -> list[str]:
    """A DuckDB list cell (a numpy array, a list or None) as a list."""
    return [] if value is None else list(value)


def _read(db: str | Path, sql: str, params: list[Any]) -> pd.DataFrame | None:
    """One read-only query; None when the file predates the rubric tables (nothing graded there yet)."""
    with SHARED_READERS.cursor(db) as con:
        try:
            return con.execute(sql, params).df()
        except duckdb.CatalogException:
            if {"rubric_grades", "criterion_labels"} <= {r[0] for r in con.execute(
                    "SELECT table_name FROM duckdb_tables()").fetchall()}:
                raise
            return None


def rubric_graders(db: str | Path, dataset: str) -> pd.DataFrame:
    """The graders that graded this dataset: ``grader_id``, ``grades``, ``unparsed`` (most grades first)."""
    graders = _read(db, "SELECT grader_id, count(*) AS grades, count(*) FILTER (WHERE met IS NULL) AS unparsed "
                    "FROM rubric_grades WHERE dataset = ? GROUP BY grader_id ORDER BY grades DESC, grader_id",
                    [dataset])
    return pd.DataFrame(columns=["grader_id", "grades", "unparsed"]) if graders is None else graders


@functools.lru_cache(maxsize=32)
def _has_derived(db: str, stamp: tuple[int, ...]) -> bool:
    with SHARED_READERS.cursor(db) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    return {d.name for d in DERIVED_RUBRIC} <= tables


def derived(db: str | Path) -> bool:
    """True when the file has the store's per-item rubric tables (``pipeline/store/derived_rubric.py``); a file
    written before them is read through their definitions (the same figures, slower)."""
    return _has_derived(str(db), db_stamp(db))


def _source(db: str | Path, table: str) -> str:
    """``table`` (``rubric_items``, ``rubric_tag_items``) for a FROM clause: the table, or its definition — the SELECT
    the writer keeps it by — in a file without it."""
    return table if derived(db) else f"({DERIVED[table].definition()})"


ITEM_SUMS_COLUMNS = ["model_id", "query_id", "language", "achieved", "possible", "unparsed", "ungraded", "score"]


def item_sums(db: str | Path, dataset: str, grader: str) -> pd.DataFrame:
    """Per item (query × model with a current grade): ``language``, ``achieved`` (Σ points of met criteria),
    ``possible`` (Σ positive points), ``unparsed`` and ``ungraded`` criteria, and ``score`` (NaN = unscored)."""
    sums = _read(db, "SELECT i.model_id, i.query_id, q.language, i.achieved, i.possible, i.unparsed, i.ungraded, "
                 f"i.score FROM {_source(db, 'rubric_items')} i JOIN queries q ON q.dataset = i.dataset "
                 "AND q.query_id = i.query_id WHERE i.dataset = ? AND i.grader_id = ? ORDER BY i.model_id, i.query_id",
                 [dataset, grader])
    return pd.DataFrame(columns=ITEM_SUMS_COLUMNS) if sums is None else sums


_POWER = ("count(score) AS n, coalesce(sum(score), 0) AS s1, coalesce(sum(score * score), 0) AS s2, "
          "coalesce(sum(score * score * score), 0) AS s3, coalesce(sum(score * score * score * score), 0) AS s4, "
          "min(score) AS lowest, max(score) AS highest")
_SUMS = ["n", "s1", "s2", "s3", "s4"]
_SEP = chr(31)  # joins a group's key values in SQL (list_contains over the groups that need a histogram)


def _with_stats(groups: pd.DataFrame, keys: list[str], histograms: Any, n_bootstrap: int, seed: int) -> pd.DataFrame:
    """``groups`` (one row per group: ``keys``, ``n`` scored items, power sums ``s1``..``s4`` of their exact scores,
    ``lowest``, ``highest``) with HealthBench's clipped ``score``, ``ci_lo``, ``ci_hi``, ``bootstrap_std``
    (``analysis.rubric.clipped_stats_moments``). ``histograms(needed)`` gives (``keys``, ``v`` = score binned to
    0.01, ``c`` items) for the groups that must be resampled (few items or a skewed mean), and is called only then."""
    groups = groups.sort_values(keys, ignore_index=True)  # resamples drawn in one order, whatever the source's
    n = groups["n"].to_numpy(dtype=float)
    sums = groups[["s1", "s2", "s3", "s4"]].to_numpy(dtype=float)
    lowest, highest = (groups[c].to_numpy(dtype=float) for c in ("lowest", "highest"))
    need = needs_histogram(n, sums, lowest, highest)
    histogram = None
    if need.any():
        hist = histograms(groups.loc[need, keys])
        ids = pd.Series(np.arange(len(groups)), index=pd.MultiIndex.from_frame(groups[keys]))
        at = ids.reindex(pd.MultiIndex.from_frame(hist[keys])).to_numpy()
        hist = hist.assign(at=at)[~np.isnan(at)].sort_values(["at", "v"])  # resamples independent of row order
        histogram = (hist["at"].to_numpy(dtype=np.int64), hist["v"].to_numpy(dtype=float),
                     hist["c"].to_numpy(dtype=np.int64))
    stats = clipped_stats_moments(n, sums, lowest, highest, histogram, n_bootstrap=n_bootstrap, seed=seed)
    return groups.assign(score=stats["mean"], ci_lo=stats["ci_lo"], ci_hi=stats["ci_hi"],
                         bootstrap_std=stats["bootstrap_std"])


def _round2(x: np.ndarray) -> np.ndarray:
    """DuckDB's ``round(x, 2)`` (half away from zero), for a histogram made outside SQL."""
    return np.sign(x) * np.floor(np.abs(x) * 100 + 0.5) / 100


def _overall(frame: pd.DataFrame, by: list[str], sums: list[str]) -> pd.DataFrame:
    """``frame``'s groups summed over languages (``language`` = all): sums added, ranges widened."""
    agg: dict[str, Any] = {c: "sum" for c in sums}
    if "lowest" in frame:
        agg.update(lowest="min", highest="max")
    out = frame.groupby(by, sort=False, dropna=False).agg(agg).reset_index().assign(language=ALL_LANGUAGES)
    return pd.concat([frame, out], ignore_index=True)


_BOARD = ("FROM {items} i JOIN queries q ON q.dataset = i.dataset AND q.query_id = i.query_id "
          "WHERE i.dataset = ? AND i.grader_id = ?")


def _board_groups(db: str | Path, dataset: str, grader: str) -> tuple[pd.DataFrame | None, Any]:
    """Per (model, language), then per model over all languages: ``items``, ``unparsed``, ``ungraded`` and the
    scored items' sums (``_with_stats``) — one GROUP BY over ``rubric_items`` — and the histogram reader
    ``_with_stats`` calls when it must resample."""
    counts = ["items", "unparsed", "ungraded", *_SUMS]
    board = _BOARD.format(items=_source(db, "rubric_items"))
    groups = _read(db, f"SELECT model_id, language, count(*) AS items, sum(unparsed) AS unparsed, "
                   f"sum(ungraded) AS ungraded, {_POWER} FROM (SELECT i.model_id, q.language, i.score, "
                   f"i.unparsed, i.ungraded {board}) GROUP BY ALL", [dataset, grader])

    def histograms(needed: pd.DataFrame) -> pd.DataFrame:
        hist = _read(db, "SELECT i.model_id, q.language, round(i.score, 2) AS v, count(*) AS c "
                     f"{board} AND i.score IS NOT NULL AND list_contains(?, i.model_id) GROUP BY ALL",
                     [dataset, grader, sorted(set(needed["model_id"]))])
        return _overall(hist, ["model_id", "v"], ["c"])

    if groups is None or groups.empty:
        return None, None
    return _overall(groups, ["model_id"], counts), histograms


def rubric_leaderboard(db: str | Path, dataset: str, grader: str, *, n_bootstrap: int = CI_RESAMPLES,
                       seed: int = 0) -> pd.DataFrame:
    """Models by rubric score (HealthBench): per model over all languages (``language`` = ``all``), then per
    (model, language).

    ``score`` = the mean of the scored items' scores clipped to [0, 1] (item score = Σ points of met criteria ÷
    Σ positive points, negative when harmful criteria are met); ``ci_lo``/``ci_hi`` its 95 % percentile bootstrap
    interval and ``bootstrap_std`` HealthBench's bootstrap std; ``rank`` within the language (1 = best; none for
    the doctors' approved answers, ``reference/approved``: a reference row, not a model);
    ``n_items`` items graded, ``n_scored``, ``n_unscored`` (an unparsed or missing grade), ``n_unparsed``
    criterion grades that could not be read, ``n_ungraded`` criteria without a current grade.

    The score is exact (the mean of the item scores in SQL, then clipped). The interval and the std come from a
    histogram of the item scores binned to 0.01 (``analysis.rubric.clipped_stats_binned``: a cost that does not
    grow with the items; the interval is the percentile interval of the clipped resampled means; the std is the
    std of the clipped resampled means as HealthBench's ``bootstrap_std``, in its exact limit where clipping
    cannot bind, else from ``n_bootstrap`` resamples).
    """
    groups, histograms = _board_groups(db, dataset, grader)
    if groups is None:
        return pd.DataFrame(columns=LEADERBOARD_COLUMNS)
    board = _with_stats(groups, ["model_id", "language"], histograms, n_bootstrap, seed).rename(columns={
        "items": "n_items", "n": "n_scored", "unparsed": "n_unparsed", "ungraded": "n_ungraded"})
    board["n_unscored"] = board["n_items"] - board["n_scored"]
    for col in ("n_items", "n_scored", "n_unscored", "n_unparsed", "n_ungraded"):
        board[col] = board[col].astype(int)
    models = board["model_id"].map(is_reference).eq(False)  # the doctors' answers: a reference row, never ranked
    board["rank"] = board["score"].where(models).groupby(board["language"]).rank(ascending=False, method="min")
    board["rank"] = board["rank"].astype("Int64")
    board["order"] = board["language"] != ALL_LANGUAGES
    board = board.sort_values(["order", "language", "score", "model_id"], ascending=[True, True, False, True],
                              na_position="last")
    return board[LEADERBOARD_COLUMNS].reset_index(drop=True)


def example_tags(criteria_tags: list[list[str]], themes: list[str] | None = ()) -> list[str]:
    """An item's example tags: the tags on every one of its criteria that are not criterion-level (``axis:``,
    ``level:``, ``cluster:``), then its dataset themes as ``query_theme:<theme>``."""
    shared = [t for t in dict.fromkeys(criteria_tags[0] if criteria_tags else ())
              if not t.startswith(RUBRIC_LEVEL_PREFIXES) and all(t in tags for tags in criteria_tags[1:])]
    return [*shared, *(QUERY_THEME + t for t in (themes or ()))]


def grades_frame(db: str | Path, dataset: str, grader: str) -> pd.DataFrame:
    """The long frame ``pipeline.analysis.rubric`` reads, for every item with a current grade: one row per
    criterion of its current rubric (``criteria_met`` None where unparsed or not graded), ``item_id`` the
    query, ``tags`` the criterion's own tags, ``example_tags`` the item's (``example_tags``); plus ``model_id``."""
    sql = (f"WITH {_rubric_cte()}, {_current_cte(db)}, items AS (SELECT DISTINCT query_id, model_id FROM cur) "
           "SELECT i.model_id, rub.query_id AS item_id, rub.idx, rub.c.points AS points, rub.c.tags AS tags, "
           "cur.met AS criteria_met, rub.themes FROM items i JOIN rub ON rub.query_id = i.query_id "
           "LEFT JOIN cur ON cur.query_id = i.query_id AND cur.model_id = i.model_id AND cur.idx = rub.idx "
           "ORDER BY i.model_id, rub.query_id, rub.idx")
    grades = _read(db, sql, [dataset, dataset, grader])
    if grades is None:
        return pd.DataFrame(columns=["model_id", "item_id", "idx", "points", "tags", "criteria_met", "example_tags"])
    grades["tags"] = [_as_list(t) for t in grades["tags"]]
    shared: dict[str, list[str]] = {}
    for item_id, rows in grades.groupby("item_id", sort=False):
        first = rows[rows["model_id"] == rows["model_id"].iloc[0]]
        shared[item_id] = example_tags(list(first["tags"]), _as_list(rows["themes"].iloc[0]))
    grades["example_tags"] = grades["item_id"].map(shared)
    grades["tags"] = [[t for t in tags if t not in ex] for tags, ex in zip(grades["tags"], grades["example_tags"],
                                                                            strict=True)]
    grades["criteria_met"] = grades["criteria_met"].astype("boolean")
    return grades.drop(columns="themes")


def rubric_tags(db: str | Path, dataset: str, grader: str, *, n_bootstrap: int = CI_RESAMPLES,
                seed: int = 0) -> pd.DataFrame:
    """Per model and tag, the score as HealthBench aggregates it (``pipeline.analysis.rubric.tag_breakdown``):
    ``tag`` (``overall_score`` first), ``kind`` (overall / example / rubric), ``score`` (clipped mean), ``ci_lo``,
    ``ci_hi``, ``bootstrap_std``, ``n_samples`` (items counted)."""
    return _rubric_tags_derived(db, dataset, grader, n_bootstrap, seed)


_TAG_VALUES = (
    "items AS {inline}(SELECT * FROM {items} WHERE dataset = ? AND grader_id = ? AND score IS NOT NULL), "
    "vals AS (SELECT model_id, '" + OVERALL + "' AS tag, 0 AS kind_order, score FROM items "
    "UNION ALL SELECT i.model_id, '" + QUERY_THEME + "' || unnest(q.themes) AS tag, 1 AS kind_order, i.score "
    "FROM items i JOIN queries q ON q.dataset = i.dataset AND q.query_id = i.query_id "
    "UNION ALL SELECT model_id, tag, CASE WHEN every THEN 1 ELSE 2 END AS kind_order, score FROM {tag_items} "
    "WHERE dataset = ? AND grader_id = ? AND score IS NOT NULL)"
)


def _rubric_tags_derived(db: str | Path, dataset: str, grader: str, n_bootstrap: int, seed: int) -> pd.DataFrame:
    """``rubric_tags`` from the store's per-item tables: per (model, tag) the item values HealthBench averages —
    the overall score (``overall_score``, and for the items' dataset themes), the score restricted to the tag's
    criteria (``rubric_tag_items``; for an example tag, on every criterion, that is the overall score) — as a
    histogram, and ``clipped_stats_binned``. ``kind`` is example when the tag is an example tag of every item it
    tags (HealthBench's importer copies an item's example tags onto all its criteria), else rubric."""
    params = [dataset, grader] * 2
    items = _source(db, "rubric_items")
    # the stored table's rows are read where used (a filtered scan costs less than keeping them for two readers);
    # its definition, in a file without it, is computed once
    values = _TAG_VALUES.format(items=items, tag_items=_source(db, "rubric_tag_items"),
                                inline="NOT MATERIALIZED " if items == "rubric_items" else "")
    groups = _read(db, f"WITH {values} SELECT model_id, tag, max(kind_order) AS kind_order, {_POWER} FROM vals "
                   "GROUP BY ALL", params)
    if groups is None or groups.empty:
        return pd.DataFrame(columns=TAG_COLUMNS)

    def histograms(needed: pd.DataFrame) -> pd.DataFrame:
        wanted = [f"{m}{_SEP}{t}" for m, t in zip(needed["model_id"], needed["tag"], strict=True)]
        return _read(db, f"WITH {values} SELECT model_id, tag, round(score, 2) AS v, count(*) AS c FROM vals "
                     f"WHERE list_contains(?, model_id || chr(31) || tag) GROUP BY ALL", [*params, wanted])

    table = _with_stats(groups, ["model_id", "tag"], histograms, n_bootstrap, seed)
    table = table.rename(columns={"n": "n_samples"})
    table["kind"] = table["kind_order"].map({0: "overall", 1: "example", 2: "rubric"})
    table = table.sort_values(["model_id", "kind_order", "tag"], ignore_index=True)
    return table[TAG_COLUMNS]


def rubric_item(db: str | Path, dataset: str, query_id: str, model_id: str, grader: str) -> dict[str, Any]:
    """One response's criteria for the response browser.

    ``criteria``: per criterion of the query's current rubric ``criterion_index`` (0-based), ``criterion``,
    ``points``, ``tags``, ``status`` (met / not met / unparsed / not graded), ``met`` (True/False, None unless
    graded and parsed), the grader's ``explanation`` and ``raw_output``, and ``stale`` (a grade exists but of an
    older response text or criterion: shown as not graded). ``score``: the item's score (None when unscored),
    ``achieved``, ``possible``, ``n_unparsed``, ``n_ungraded``.
    """
    sql = (f"WITH {_rubric_cte(query_pred='query_id = ?')} SELECT rub.idx AS criterion_index, "
           "rub.c.criterion AS criterion, rub.c.points AS points, rub.c.tags AS tags, g.met, g.explanation, "
           f"g.raw_output, g.criterion_index IS NOT NULL AS graded, g.criterion_index IS NOT NULL AND NOT coalesce("
           f"g.response_hash = {current_hash(db, 'r')} AND r.error IS NULL "
           "AND g.criterion = rub.c.criterion AND g.points = rub.c.points, false) AS stale FROM rub "
           "LEFT JOIN rubric_grades g ON g.dataset = ? AND g.query_id = rub.query_id AND g.model_id = ? "
           "AND g.grader_id = ? AND g.criterion_index = rub.idx "
           "LEFT JOIN responses r ON r.dataset = ? AND r.query_id = rub.query_id AND r.model_id = ? "
           "ORDER BY rub.idx")
    empty = {"criteria": pd.DataFrame(columns=ITEM_COLUMNS), "score": None, "achieved": None, "possible": None,
             "n_unparsed": 0, "n_ungraded": 0}
    rows = _read(db, sql, [dataset, query_id, dataset, model_id, grader, dataset, model_id])
    if rows is None or rows.empty:
        return empty
    current = rows["graded"] & ~rows["stale"]
    rows["met"] = rows["met"].astype("boolean").where(current, pd.NA)
    met = rows["met"].fillna(False).to_numpy(dtype=bool)
    rows["status"] = np.select([~current.to_numpy(dtype=bool), rows["met"].isna().to_numpy(), met],
                               ["not graded", "unparsed", "met"], "not met")
    rows["tags"] = [_as_list(t) for t in rows["tags"]]
    for col in ("explanation", "raw_output"):
        rows[col] = rows[col].where(rows["graded"], None)
    n_unparsed, n_ungraded = int((rows["status"] == "unparsed").sum()), int((~current).sum())
    points = rows["points"].to_numpy(dtype=float)
    possible = float(points[points > 0].sum())
    achieved = float(points[met].sum())
    score = None
    if n_unparsed == 0 and n_ungraded == 0:
        score = calculate_score(rows[["points"]].to_dict("records"), [bool(m) for m in rows["met"]])
    return {"criteria": rows[ITEM_COLUMNS].reset_index(drop=True), "score": score, "achieved": achieved,
            "possible": possible, "n_unparsed": n_unparsed, "n_ungraded": n_ungraded}


def label_pairs(db: str | Path, dataset: str, grader: str) -> pd.DataFrame:
    """Physician criterion labels beside the grader's grade of the same response text and criterion: one row per
    labelled criterion (``query_id``, ``model_id``, ``criterion_index``, ``language``, ``tags``, the grader's
    ``met`` (None = unparsed) and the physicians' ``labels`` list)."""
    sql = ("SELECT l.query_id, l.model_id, l.criterion_index, any_value(q.language) AS language, "
           "any_value(g.tags) AS tags, any_value(g.met) AS met, list(l.met ORDER BY l.annotator) AS labels "
           "FROM criterion_labels l JOIN rubric_grades g ON g.dataset = l.dataset AND g.query_id = l.query_id "
           "AND g.model_id = l.model_id AND g.criterion_index = l.criterion_index AND g.grader_id = ? "
           "AND g.response_hash = l.response_hash AND g.criterion = l.criterion "
           "JOIN queries q ON q.dataset = l.dataset AND q.query_id = l.query_id WHERE l.dataset = ? "
           "GROUP BY l.query_id, l.model_id, l.criterion_index ORDER BY ALL")
    pairs = _read(db, sql, [grader, dataset])
    if pairs is None:
        return pd.DataFrame(columns=["query_id", "model_id", "criterion_index", "language", "tags", "met", "labels"])
    return pairs


def _meta_row(group: str, category: str, rows: np.ndarray, pairs: dict[str, np.ndarray]) -> dict[str, Any]:
    """One meta-eval row over the labelled criteria ``rows`` (a mask) of ``pairs`` (``parsed``: the grade could be
    read; ``at``: each (grader, physician) label pair's criterion; ``grader``/``physician``: the pairs' labels)."""
    parsed = rows & pairs["parsed"]
    figures: dict[str, Any] = {"n_criteria": int(parsed.sum()), "n_pairs": 0, **dict.fromkeys(
        ("agreement", "f1_pos", "f1_neg", "macro_f1"), float("nan"))}
    if parsed.any():
        mine = parsed[pairs["at"]]
        result = pair_agreement(pairs["grader"][mine], pairs["physician"][mine])
        figures.update({k: result[k] for k in ("n_pairs", "agreement", "f1_pos", "f1_neg", "macro_f1")})
    return {"group": group, "category": category, **figures, "n_unparsed": int((rows & ~pairs["parsed"]).sum())}


def grader_meta_eval(db: str | Path, dataset: str, grader: str) -> pd.DataFrame:
    """The grader against physicians, as HealthBench's meta-eval scores it (``analysis.rubric.grader_agreement``):
    one row overall, then per ``language`` and per criterion ``tag`` (``group``, ``category``): ``n_criteria``
    labelled criteria with a parsed grade, ``n_pairs`` (grader, physician) label pairs, ``agreement`` (share of
    agreeing pairs), ``f1_pos``/``f1_neg`` and ``macro_f1`` (NaN when a side lacks a class), ``n_unparsed``
    labelled criteria whose grade could not be read (left out)."""
    pairs = label_pairs(db, dataset, grader)
    if pairs.empty:
        return pd.DataFrame(columns=META_COLUMNS)
    tags = [_as_list(t) for t in pairs["tags"]]
    met = pairs["met"].astype("boolean")
    parsed = met.notna().to_numpy(dtype=bool)
    labels = [np.asarray(_as_list(x), dtype=bool) for x in pairs["labels"]]
    counts = np.array([len(x) for x in labels])
    at = np.repeat(np.arange(len(pairs)), counts)  # every (grader, physician) label pair once, by its criterion
    exploded = {"parsed": parsed, "at": at, "grader": np.repeat(met.fillna(False).to_numpy(dtype=bool), counts),
                "physician": np.concatenate(labels) if labels else np.zeros(0, dtype=bool)}
    everything = np.ones(len(pairs), dtype=bool)
    language = pairs["language"].to_numpy()
    rows = [_meta_row("overall", OVERALL, everything, exploded)]
    rows += [_meta_row("language", lang, language == lang, exploded) for lang in sorted(set(language))]
    rows += [_meta_row("tag", tag, np.array([tag in t for t in tags]), exploded)
             for tag in sorted({t for ts in tags for t in ts})]
    return pd.DataFrame(rows, columns=META_COLUMNS)
