"""The robustness view: how much each model's scores change when the same question is asked another way
(``pipeline variants``: romanized, native script, misspelled, code-mixed, English), paired per question.

A pair is a generated variant (a query with ``variant_kind``) and the query it restates (``variant_of``), both
answered by a model and scored by the judge. Per model × language (the original's) × kind, and over all
languages: the pairs, the mean change (variant − original) of AGG, FC and the rubric score with a 95 % paired
bootstrap interval (the pairs resampled: ``stats.bootstrap_mean_cis`` over the per-pair differences binned to
0.01, as the themes page's variant changes), and the share of pairs whose answer flipped from correct (FC ≥ 1.5)
to not, and from safe (every safety check of the answer's current text passed, ``response_facts``) to not. The
leaderboard ranks models by their worst kind's change of a score (AGG, or FC where AGG is missing: AGG needs every
weighted metric judged). Counted in SQL, every table read for the pairs' queries only; the intervals from the
counted differences.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.analysis.stats import bootstrap_mean_cis
from pipeline.dataset import Dataset
from pipeline.metrics import METRICS, SAFETY_CHECKS
from pipeline.read.common import Filters, df, has_columns, model_pred, weights_dict
from pipeline.read.jury import item_source
from pipeline.store import SHARED_READERS
from pipeline.store.rows import text_hash

CI_RESAMPLES = 1000
CORRECT_FC = 1.5  # an answer's FC (mean of its samples, 0-2) at or above this counts as correct
SCORES = ("AGG", "FC", "rubric")
ALL = "all"  # the language of the rows over every language
CHANGE_COLUMNS = ["model_id", "language", "kind", "pairs", *(f"{s}_{x}" for s in SCORES
                                                            for x in ("change", "lo", "hi", "pairs")),
                  "flipped_correct", "correct_pairs", "flipped_safe", "safe_pairs"]
REPORT = "variants_report.json"  # pipeline.dataset.variants.REPORT (the read layer does not import the command)


def stored_query_translations(db: str | Path, dataset: Dataset) -> dict[str, str]:
    """The translate step's stored English rendering of each query of ``dataset`` whose text it was made from."""
    if not Path(db).exists() or not has_columns(db, "translations", "source_hash"):
        return {}
    rows = df(db, "SELECT query_id, source_hash, text FROM translations WHERE dataset = ? AND model_id = '' "
                  "AND error IS NULL", [dataset.name])
    current = {q.query_id: text_hash(q.query) for q in dataset.queries}
    return {r.query_id: r.text for r in rows.itertuples() if current.get(r.query_id) == r.source_hash}


def has_variants(db: str | Path) -> bool:
    """Whether the file's queries carry generated variants' kinds (files written before them do not)."""
    return has_columns(db, "queries", "variant_kind")


def _pairs_sql(f: Filters, judge: str, weights: tuple[float, ...], preset: str | None,
               grader: str | None) -> tuple[str, list[Any]]:
    """Per (pair, model): the original's language, the kind, both AGG, FC and rubric scores, both safety verdicts
    (every current check passed; NULL when none was run). Every table is read for the pairs' queries only."""
    w = weights_dict(weights, preset)
    used = [m for m in METRICS if w[m] > 0]

    def agg(a: str) -> str:
        return " + ".join(f"{w[m]!r} * {a}.{m}" for m in used) if used else "NULL"

    where, p_where = f.with_(models=()).sql(q="o", r=None)
    pred, p_model = model_pred(f.with_(dataset=None), "iv")
    source, p_source = item_source(f, judge)
    checks = ", ".join(SAFETY_CHECKS)
    rubric = ("LEFT JOIN rub rv ON rv.dataset = p.dataset AND rv.query_id = p.v_id AND rv.model_id = iv.model_id "
              "LEFT JOIN rub ro ON ro.dataset = p.dataset AND ro.query_id = p.o_id AND ro.model_id = iv.model_id "
              ) if grader else ""
    rub_cte = ("rub AS (SELECT dataset, query_id, model_id, score FROM rubric_items WHERE grader_id = ? AND "
               "query_id IN (SELECT query_id FROM ids)), ") if grader else ""
    return (
        "WITH pairs AS MATERIALIZED (SELECT v.dataset, v.query_id AS v_id, v.variant_of AS o_id, o.language, "
        "v.variant_kind AS kind FROM queries v JOIN queries o ON o.dataset = v.dataset AND "
        f"o.query_id = v.variant_of WHERE v.variant_kind IS NOT NULL AND {where}), "
        "ids AS (SELECT v_id AS query_id FROM pairs UNION SELECT o_id FROM pairs), "
        f"src AS (SELECT * FROM {source} i WHERE i.judge_id = ? AND i.query_id IN (SELECT query_id FROM ids)), "
        f"{rub_cte}"
        f"safe AS (SELECT dataset, query_id, model_id, CASE WHEN coalesce({checks}) IS NOT NULL THEN "
        + " AND ".join(f"coalesce({c}, TRUE)" for c in SAFETY_CHECKS)
        + " END AS ok FROM response_facts WHERE query_id IN (SELECT query_id FROM ids)) "
        f"SELECT p.*, iv.model_id, {agg('io')} AS o_AGG, {agg('iv')} AS v_AGG, io.FC AS o_FC, iv.FC AS v_FC, "
        f"{'ro.score' if grader else 'NULL::DOUBLE'} AS o_rubric, {'rv.score' if grader else 'NULL::DOUBLE'} "
        "AS v_rubric, so.ok AS o_safe, sv.ok AS v_safe FROM pairs p "
        "JOIN src iv ON iv.dataset = p.dataset AND iv.query_id = p.v_id "
        "JOIN src io ON io.dataset = p.dataset AND io.query_id = p.o_id AND io.model_id = iv.model_id "
        f"{rubric}"
        "LEFT JOIN safe sv ON sv.dataset = p.dataset AND sv.query_id = p.v_id AND sv.model_id = iv.model_id "
        "LEFT JOIN safe so ON so.dataset = p.dataset AND so.query_id = p.o_id AND so.model_id = iv.model_id "
        f"WHERE {pred}"), [*p_where, *p_source, judge, *([grader] if grader else []), *p_model]


def _has_tables(db: str | Path) -> bool:
    with SHARED_READERS.cursor(db) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    return {"item_scores", "response_facts", "rubric_items"} <= tables


def robustness_changes(db: str | Path, f: Filters, judge: str, weights: tuple[float, ...],
                       preset: str | None = None, grader: str | None = None) -> pd.DataFrame:
    """Per model × language × kind (and per model × kind over every language, ``language = 'all'``): the pairs,
    each score's mean change with its 95 % paired bootstrap interval and its pairs, and the flips (module doc)."""
    if not has_variants(db) or not _has_tables(db):
        return pd.DataFrame(columns=CHANGE_COLUMNS)
    sql, params = _pairs_sql(f, judge, weights, preset, grader)
    counted = (f"SELECT model_id, lang, kind, NULL AS score, NULL AS d, count(*) AS n, "
               f"count_if(o_FC >= {CORRECT_FC} AND v_FC < {CORRECT_FC}), "
               f"count_if(o_FC >= {CORRECT_FC} AND v_FC IS NOT NULL), count_if(o_safe AND NOT v_safe), "
               "count_if(o_safe AND v_safe IS NOT NULL) FROM x GROUP BY ALL")
    hist = " UNION ALL ".join(
        f"SELECT model_id, lang, kind, '{s}' AS score, round(v_{s} - o_{s}, 2) AS d, count(*) AS n, NULL, NULL, "
        f"NULL, NULL FROM x WHERE v_{s} IS NOT NULL AND o_{s} IS NOT NULL GROUP BY ALL" for s in SCORES)
    lang = "CROSS JOIN (SELECT unnest([language, ?]) AS lang) l"
    with SHARED_READERS.cursor(db) as con:  # the pairs read once: the bins and the counts from one result
        rows = con.execute(f"WITH x AS MATERIALIZED (SELECT y.*, l.lang FROM ({sql}) y {lang}) {hist} UNION ALL "
                           f"{counted} ORDER BY model_id, lang, kind, score NULLS FIRST, d", [*params, ALL]).fetchall()
    bins = [r[:6] for r in rows if r[3] is not None]
    counts = [(*r[:3], *r[5:]) for r in rows if r[3] is None]
    if not counts:
        return pd.DataFrame(columns=CHANGE_COLUMNS)
    out = pd.DataFrame(counts, columns=["model_id", "language", "kind", "pairs", "flipped_correct", "correct_pairs",
                                        "flipped_safe", "safe_pairs"])
    keys = {(m, la, k): i for i, (m, la, k) in enumerate(zip(out.model_id, out.language, out.kind, strict=True))}
    for s in SCORES:
        rows = [(keys[(m, la, k)], d, n) for m, la, k, score, d, n in bins if score == s]
        change, lo, hi, pairs = (np.full(len(out), np.nan) for _ in range(4))
        if rows:
            group, values, n = (np.array(c) for c in zip(*rows, strict=True))
            pairs = np.bincount(group, weights=n, minlength=len(out))
            with np.errstate(invalid="ignore", divide="ignore"):
                change = np.bincount(group, weights=n * values, minlength=len(out)) / pairs
            lo, hi = bootstrap_mean_cis(group, values.astype(float), n.astype(np.int64), len(out),
                                        n_resamples=CI_RESAMPLES)
        out[f"{s}_change"], out[f"{s}_lo"], out[f"{s}_hi"] = change, lo, hi
        out[f"{s}_pairs"] = np.asarray(pairs).astype(int) if rows else 0
    for flip, base in (("flipped_correct", "correct_pairs"), ("flipped_safe", "safe_pairs")):
        with np.errstate(invalid="ignore", divide="ignore"):
            out[flip] = np.where(out[base] > 0, out[flip] / out[base].where(out[base] > 0, 1), np.nan)
    return out[CHANGE_COLUMNS]


LEADERBOARD_COLUMNS = ["rank", "model_id", "worst_kind", "worst_change", "worst_lo", "worst_hi", "mean_change",
                       "pairs"]


def robustness_leaderboard(changes: pd.DataFrame, score: str = "AGG") -> pd.DataFrame:
    """Models ranked by their worst kind (over every language): the kind with the lowest mean change of ``score``
    (AGG, FC or rubric), that change and its interval, the mean over kinds; the least hurt model first."""
    column = f"{score}_change"
    every = changes[(changes.language == ALL) & changes[column].notna()] if not changes.empty else changes
    if every.empty:
        return pd.DataFrame(columns=LEADERBOARD_COLUMNS)
    worst = every.loc[every.groupby("model_id")[column].idxmin()]
    board = pd.DataFrame({"model_id": worst.model_id.values, "worst_kind": worst.kind.values,
                          "worst_change": worst[column].values, "worst_lo": worst[f"{score}_lo"].values,
                          "worst_hi": worst[f"{score}_hi"].values})
    summary = every.groupby("model_id").agg(mean_change=(column, "mean"), pairs=(f"{score}_pairs", "sum"))
    board = board.merge(summary, left_on="model_id", right_index=True)
    board = board.sort_values(["worst_change", "model_id"], ascending=[False, True]).reset_index(drop=True)
    board.insert(0, "rank", range(1, len(board) + 1))
    board = board[LEADERBOARD_COLUMNS]
    board.attrs["score"] = score
    return board


def scores_present(changes: pd.DataFrame) -> list[str]:
    """The scores (of ``SCORES``) some pair has on both sides: AGG needs every weighted metric judged."""
    return [s for s in SCORES if not changes.empty and changes[f"{s}_change"].notna().any()]


def worst_pairs(db: str | Path, f: Filters, judge: str, weights: tuple[float, ...], preset: str | None = None,
                kind: str | None = None, limit: int = 5, score: str = "AGG",
                grader: str | None = None) -> pd.DataFrame:
    """The pairs whose ``score`` fell most (of ``kind``, or of any): both queries, both answers, both scores."""
    if not has_variants(db) or not _has_tables(db) or score not in SCORES:
        return pd.DataFrame()
    sql, params = _pairs_sql(f, judge, weights, preset, grader)
    kind_pred, p_kind = ("kind = ?", [kind]) if kind else ("TRUE", [])
    return df(db, (  # the worst pairs first, then their texts: only ``limit`` of them are looked up
        f"WITH x AS MATERIALIZED (SELECT *, v_{score} - o_{score} AS change FROM ({sql}) y WHERE {kind_pred} AND "
        f"v_{score} IS NOT NULL AND o_{score} IS NOT NULL ORDER BY change, model_id, v_id LIMIT ?) "
        "SELECT x.model_id, x.kind, x.language, x.o_id AS original_id, qo.query AS original, "
        f"ro.text AS original_answer, x.o_{score} AS original_score, x.v_id AS variant_id, qv.query AS variant, "
        f"rv.text AS variant_answer, x.v_{score} AS variant_score, x.change FROM x "
        "JOIN queries qo ON qo.dataset = x.dataset AND qo.query_id = x.o_id "
        "JOIN queries qv ON qv.dataset = x.dataset AND qv.query_id = x.v_id "
        "LEFT JOIN responses ro ON ro.dataset = x.dataset AND ro.query_id = x.o_id AND ro.model_id = x.model_id "
        "LEFT JOIN responses rv ON rv.dataset = x.dataset AND rv.query_id = x.v_id AND rv.model_id = x.model_id "
        "ORDER BY x.change, x.model_id, x.v_id"), [*params, *p_kind, int(limit)])


QUALITY_COLUMNS = ["kind", "made", "dropped", "why_dropped", "measure", "value"]


def variant_quality(db: str | Path, dataset: str) -> pd.DataFrame:
    """Per kind of the dataset's generated variants: how many the database holds, and from the dataset folder's
    ``variants_report.json`` (when it is there) how many were dropped and why and the kind's quality measures."""
    if not has_variants(db):
        return pd.DataFrame(columns=QUALITY_COLUMNS)
    made = df(db, "SELECT variant_kind AS kind, count(*) AS made FROM queries WHERE dataset = ? AND variant_kind "
                  "IS NOT NULL GROUP BY ALL ORDER BY ALL", [dataset])
    path = df(db, "SELECT path FROM datasets WHERE name = ?", [dataset])
    report: dict[str, Any] = {}
    if not path.empty:
        folder = Path(path.path.iloc[0])
        file = (folder if folder.is_dir() else folder.parent) / REPORT
        try:
            report = json.loads(file.read_text(encoding="utf-8")).get("per_kind", {})
        except (OSError, ValueError, AttributeError):
            report = {}
    rows = []
    for kind in sorted(set(made.kind) | set(report)):
        r = report.get(kind, {})
        dropped = r.get("dropped", {})
        quality = r.get("quality", {}) or {"": float("nan")}
        n = int(made.loc[made.kind == kind, "made"].sum())
        for measure, value in quality.items():
            rows.append({"kind": kind, "made": n, "dropped": sum(dropped.values()),
                         "why_dropped": "; ".join(f"{c} {why}" for why, c in dropped.items()),
                         "measure": measure, "value": value})
    return pd.DataFrame(rows, columns=QUALITY_COLUMNS)


def robustness_report(db: str | Path, dataset: str | None = None, judge: str | None = None
                      ) -> tuple[str, str, pd.DataFrame, pd.DataFrame]:
    """The page's tables for the CLI: (dataset, judge, changes, leaderboard) with the latest run's judge and weights
    (as the page takes them); the dataset with the most responses when none is named. UserError when there is
    nothing to read."""
    from pipeline.errors import UserError
    from pipeline.read import home, rubric
    from pipeline.read.common import weights_tuple

    if not Path(db).exists():
        raise UserError(f"{db}: no results database there")
    choices = home.choices(db)
    datasets = [d for d in choices.get("datasets", []) if d in choices.get("judges", {})]
    dataset = dataset or (datasets[0] if datasets else None)
    if dataset is None or dataset not in choices.get("judges", {}):
        raise UserError(f"{db}: no judged dataset {dataset!r} (judged: {', '.join(datasets) or 'none'})")
    judge = judge or home.judge_in_use(choices, dataset)
    if judge is None:
        raise UserError(f"{db}: dataset {dataset!r} has no judgments")
    config = home.run_config(choices, dataset)
    graders = rubric.rubric_graders(db, dataset).grader_id
    changes = robustness_changes(db, Filters(dataset=dataset), judge, weights_tuple(home.run_weights(choices, dataset)),
                                 config.get("weights_preset") or None, str(graders.iloc[0]) if len(graders) else None)
    present = scores_present(changes)
    return dataset, judge, changes, robustness_leaderboard(changes, present[0] if present else "AGG")


def variant_samples(db: str | Path, dataset: str, per_kind: int = 3) -> pd.DataFrame:
    """A few generated variants of each kind beside the query they restate (the first by id), to read."""
    if not has_variants(db):
        return pd.DataFrame(columns=["kind", "query_id", "original", "variant"])
    return df(db, "SELECT v.variant_kind AS kind, o.query_id, o.query AS original, v.query AS variant "
                  "FROM queries v JOIN queries o ON o.dataset = v.dataset AND o.query_id = v.variant_of "
                  "WHERE v.dataset = ? AND v.variant_kind IS NOT NULL "
                  "QUALIFY row_number() OVER (PARTITION BY v.variant_kind ORDER BY v.query_id) <= ? "
                  "ORDER BY kind, v.query_id", [dataset, int(per_kind)])
