"""The themes page: scores per (language, theme, model), example queries of a theme with every answer, and
the change of a model's score between variants of the same question (another script or language).

Scores are ``item_scores``' (each metric's mean over the item's parsed samples, current response
texts only; or a jury's, ``jury.item_source``); queries without a theme count as ``(none)``.

Variants: a query may name the query it restates (``variant_of``), e.g. the same question in native script,
romanized and English. Each such pair is oriented the same way — romanized minus native script within a
language, the Indic query minus its English restatement across languages — and the per-pair differences of a
model's scores give a mean change with a paired bootstrap CI (resampling pairs), so script and code-mixing
effects are measured on the same question rather than across different ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.analysis.stats import bootstrap_mean_cis
from pipeline.dataset import LANGUAGES
from pipeline.metrics import METRICS
from pipeline.read.common import Filters, df, group_pred, group_source, model_pred, weights_dict
from pipeline.read.jury import is_jury, item_source
from pipeline.store import SHARED_READERS
from pipeline.store.derived_groups import NO_THEME

CI_RESAMPLES = 1000  # as the leaderboard's intervals



def theme_scores(db: str | Path, f: Filters, judge: str) -> pd.DataFrame:
    """Per (language, theme, model): each metric's mean item score and n.

    With a theme filter only those themes are shown. Unparsed judgments are excluded; with several
    samples an item's score is the mean of its parsed samples. Summed from the writer's ``theme_groups`` (the theme
    filter is on its key); for a jury from the same table's definition over the jury's item scores
    (``jury.item_source`` bound as ``item_scores``) of the filtered queries.
    """
    every_theme = f.with_(themes=())  # the theme filter is on the key (a query without any is under ``(none)``)
    source, p_source = ("theme_groups", []) if not is_jury(judge) else group_source(
        "theme_groups", every_theme, inputs=[("item_scores", *item_source(f, judge))])
    pred, p_group = group_pred(every_theme, "g")
    theme_pred, p_theme = ("list_contains(?, g.theme)", [list(f.themes)]) if f.themes else ("TRUE", [])
    means = ", ".join(f"sum(g.{m}_sum) / nullif(sum(g.{m}_n), 0) AS {m}, sum(g.{m}_n)::BIGINT AS n_{m}"
                      for m in METRICS)
    out = df(db, f"SELECT g.query_language AS language, g.theme, g.model_id, {means} FROM {source} g "
                 f"WHERE g.judge_id = ? AND {pred} AND {theme_pred} GROUP BY ALL ORDER BY ALL",
             [*p_source, judge, *p_group, *p_theme])
    out["n"] = out[[f"n_{m}" for m in METRICS]].max(axis=1)
    return out[["language", "theme", "model_id", "n", *METRICS, *(f"n_{m}" for m in METRICS)]]


def theme_table(scores: pd.DataFrame, weights: tuple[float, ...], preset: str | None = None) -> pd.DataFrame:
    """``theme_scores`` with AGG (the weighted mean of the metric means; a preset's weights as given) added."""
    if scores.empty:
        return pd.DataFrame(columns=["language", "theme", "model_id", "AGG", *METRICS, "n"])
    w = weights_dict(weights, preset)
    used = [m for m in METRICS if w[m] > 0]
    out = scores.copy()
    out["AGG"] = sum(out[m].astype(float) * w[m] for m in used) if used else np.nan
    return out[["language", "theme", "model_id", "AGG", *METRICS, "n"]]


def theme_examples(db: str | Path, f: Filters, judge: str | None, theme: str, limit: int = 5,
                   offset: int = 0) -> pd.DataFrame:
    """Example queries of a theme and every (filtered) model's answer with its metric scores (NULL: unscored)."""
    where_q, p_q = f.with_(themes=()).sql(r=None)
    theme_pred = "len(q.themes) = 0" if theme == NO_THEME else "list_contains(q.themes, ?)"
    p_theme = [] if theme == NO_THEME else [theme]
    pred, p_model = ("list_contains(?, r.model_id)", [list(f.models)]) if f.models else ("TRUE", [])
    return df(db, (
        f"WITH ex AS (SELECT q.dataset, q.query_id FROM queries q WHERE {where_q} AND {theme_pred} "
        "ORDER BY q.language, q.query_id LIMIT ? OFFSET ?) "
        "SELECT q.query_id, q.language, q.query, q.query_en, q.gt_response, r.model_id, r.text, r.error, "
        + ", ".join(f"i.{m}" for m in METRICS)
        + " FROM ex JOIN queries q ON q.dataset = ex.dataset AND q.query_id = ex.query_id "
        "JOIN responses r ON r.dataset = ex.dataset AND r.query_id = ex.query_id "
        "LEFT JOIN item_scores i ON i.dataset = r.dataset AND i.query_id = r.query_id AND i.model_id = r.model_id "
        f"AND i.judge_id = ? WHERE {pred} ORDER BY q.language, q.query_id, r.model_id"
    ), [*p_q, *p_theme, int(limit), int(offset), judge, *p_model])


VARIANT_COLUMNS = ["kind", "model_id", "pairs", "base", "variant", "change", "lo", "hi"]
ALL_LANGUAGES = "all languages"


def _side(language: str, script: str) -> str:
    name = LANGUAGES.get(language, language)
    return name if language == "en" else f"{name} ({'romanized' if script == 'latin' else 'native script'})"


def orient(a: tuple[str, str], b: tuple[str, str]) -> tuple[list[str], bool]:
    """The kinds a (language, script) pair of variants counts under, and whether ``a`` is the variant side.

    Within a language: romanized vs native script (the romanized one is the variant). Across languages: the
    Indic query vs its English restatement (the Indic one is the variant); otherwise alphabetical.
    """
    (la, sa), (lb, sb) = a, b
    if la == lb:
        if sa == sb:
            return [f"{_side(la, sa)}: restated"], True
        name = LANGUAGES.get(la, la)
        return [f"{name}: romanized vs native script", f"{ALL_LANGUAGES}: romanized vs native script"], sa == "latin"
    if "en" in (la, lb):
        indic, script = (la, sa) if lb == "en" else (lb, sb)
        return [f"{_side(indic, script)} vs English", f"{ALL_LANGUAGES}: Indic vs English"], lb == "en"
    first = min((_side(la, sa), True), (_side(lb, sb), False))
    other = _side(lb, sb) if first[1] else _side(la, sa)
    return [f"{first[0]} vs {other}"], first[1]


def _pairs_sql(f: Filters, judge: str, weights: tuple[float, ...], preset: str | None,
               metric: str) -> tuple[str, list[Any]]:
    w = weights_dict(weights, preset)
    used = [m for m in METRICS if w[m] > 0] if metric == "AGG" else [metric]

    def score(a: str) -> str:
        return " + ".join(f"{w[m]!r} * {a}.{m}" for m in used) if metric == "AGG" else f"{a}.{metric}"

    dataset_pred, p_dataset = ("v.dataset = ?", [f.dataset]) if f.dataset is not None else ("TRUE", [])
    pred, p_model = model_pred(f.with_(dataset=None), "ia")
    source, p_source = item_source(f, judge)
    return (
        "WITH pairs AS (SELECT v.dataset, v.query_id AS a_id, v.variant_of AS b_id, v.language AS a_language, "
        "coalesce(v.script, 'native') AS a_script, o.language AS b_language, coalesce(o.script, 'native') AS b_script "
        "FROM queries v JOIN queries o ON o.dataset = v.dataset AND o.query_id = v.variant_of "
        f"WHERE v.variant_of IS NOT NULL AND v.variant_of <> v.query_id AND {dataset_pred}), "
        # only the items of paired queries (a few thousand of millions) reach the two joins below
        f"src AS (SELECT * FROM {source} i WHERE i.judge_id = ? AND i.query_id IN (SELECT a_id FROM pairs "
        "UNION SELECT b_id FROM pairs)) "
        f"SELECT p.*, ia.model_id, {score('ia')} AS a_score, {score('ib')} AS b_score FROM pairs p "
        "JOIN src ia ON ia.dataset = p.dataset AND ia.query_id = p.a_id "
        "JOIN src ib ON ib.dataset = p.dataset AND ib.query_id = p.b_id AND ib.model_id = ia.model_id "
        f"WHERE {pred} AND {score('ia')} IS NOT NULL AND {score('ib')} IS NOT NULL"), [*p_dataset, *p_source, judge,
                                                                                       *p_model]


def variant_pairs(db: str | Path, f: Filters, judge: str, weights: tuple[float, ...], preset: str | None = None,
                  metric: str = "AGG") -> pd.DataFrame:
    """Every (variant, the query it restates) pair with both answered and scored by a model: the two queries'
    languages and scripts and the model's two scores (AGG with these weights, or ``metric``)."""
    sql, params = _pairs_sql(f, judge, weights, preset, metric)
    return df(db, f"{sql} ORDER BY p.dataset, p.a_id, ia.model_id", params)


def variant_changes(db: str | Path, f: Filters, judge: str, weights: tuple[float, ...], preset: str | None = None,
                    metric: str = "AGG", kind: str | None = None) -> pd.DataFrame:
    """Per kind of variant pair (``orient``) and model: the pairs, the mean score of the base and the variant side,
    the mean change (variant − base) and its 95 % paired bootstrap CI (the pairs resampled, ``bootstrap_mean_cis``
    on the per-pair differences binned to 0.01) — for every kind, or only for ``kind`` (the others' CIs NaN:
    the page shows one kind at a time). Counted in SQL: per (language and script of both sides, model, difference)."""
    sql, params = _pairs_sql(f, judge, weights, preset, metric)
    with SHARED_READERS.cursor(db) as con:
        rows = con.execute(f"WITH x AS ({sql}) SELECT a_language, a_script, b_language, b_script, model_id, "
                           "round(a_score - b_score, 2) AS d, count(*) AS n, sum(a_score) AS sum_a, "
                           "sum(b_score) AS sum_b FROM x GROUP BY ALL ORDER BY ALL", params).fetchall()
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    oriented: dict[tuple[str, str, str, str], tuple[list[str], bool]] = {}  # a few pairs of sides, many rows
    for a_lang, a_script, b_lang, b_script, model, d, n, sum_a, sum_b in rows:
        sides = (a_lang, a_script, b_lang, b_script)
        if sides not in oriented:
            oriented[sides] = orient((a_lang, a_script), (b_lang, b_script))
        kinds, a_is_variant = oriented[sides]
        change = round((1.0 if a_is_variant else -1.0) * d, 2)
        variant, base = (sum_a, sum_b) if a_is_variant else (sum_b, sum_a)
        for k in kinds:
            g = groups.get((k, model))
            if g is None:
                g = groups[(k, model)] = {"n": 0, "base": 0.0, "variant": 0.0, "hist": {}}
            g["n"] += n
            g["base"] += base
            g["variant"] += variant
            g["hist"][change] = g["hist"].get(change, 0) + n
    if not groups:
        return pd.DataFrame(columns=VARIANT_COLUMNS)
    keys = sorted(groups)
    out = pd.DataFrame({"kind": [k for k, _ in keys], "model_id": [m for _, m in keys],
                        "pairs": [groups[k]["n"] for k in keys],
                        "base": [groups[k]["base"] / groups[k]["n"] for k in keys],
                        "variant": [groups[k]["variant"] / groups[k]["n"] for k in keys]})
    out["change"] = out.variant - out.base
    lo, hi = np.full(len(keys), np.nan), np.full(len(keys), np.nan)
    chosen = [i for i, (k, _) in enumerate(keys) if kind is None or k == kind]
    if chosen:
        group = np.concatenate([np.full(len(groups[keys[i]]["hist"]), j) for j, i in enumerate(chosen)])
        values = np.concatenate([list(groups[keys[i]]["hist"]) for i in chosen]).astype(float)
        counts = np.concatenate([list(groups[keys[i]]["hist"].values()) for i in chosen]).astype(np.int64)
        got_lo, got_hi = bootstrap_mean_cis(group, values, counts, len(chosen), n_resamples=CI_RESAMPLES)
        lo[chosen], hi[chosen] = got_lo, got_hi
    return out.assign(lo=lo, hi=hi)[VARIANT_COLUMNS]
