"""The Med-CoDE page: disagreement distributions per model, their correlations with the judge and lexical
scores, and a Table-2 analogue.

Only classified critiques of the current text of responses without an error count; judge scores come
from ``item_scores`` and lexical scores from ``response_facts`` (both current only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.metrics import METRICS
from pipeline.read.common import (
    DISAGREEMENT,
    LEXICAL_LABELS,
    Filters,
    current_join,
    df,
    model_pred,
    on_qf,
    queries_cte,
)
from pipeline.store import LEXICAL, SHARED_READERS

MEDCODE_QUANTITIES = {"p_none": "P(None)", "p_high": "P(High)", "expected": "E[disagreement]"}
CORRELATION_ITEMS = 20_000
CLASSIFIED = "c.p_none IS NOT NULL"  # a failed critique is stored with NULL probabilities (and its error)
ACCURACY_METRIC = "FC"  # Med-CoDE's accuracy: the judge's factual-correctness verdict (share of items at 2)


def medcode_view(db: str | Path, f: Filters, judge: str | None) -> dict[str, pd.DataFrame]:
    """The page's ``distribution`` (per dataset, language, model, critic) and ``summary`` (Table 2's columns:
    n, METEOR, ROUGE-L, the judge's accuracy and the mean distribution per model and dataset).

    Both distributions come from one pass over the current critiques (GROUPING SETS).
    """
    qf, p_qf = queries_cte(f)
    preds = {a: model_pred(f, a) for a in ("c", "x", "i")}
    means = ", ".join(f"avg(c.{p}) AS {p}" for p in DISAGREEMENT)
    accuracy = f"avg((i.{ACCURACY_METRIC} = 2)::INTEGER)" if ACCURACY_METRIC in METRICS else "NULL::DOUBLE"
    with SHARED_READERS.cursor(db) as con:
        both = con.execute(
            f"WITH {qf} SELECT grouping(qf.language) AS per_model, c.dataset, qf.language, c.model_id, c.critic_id, "
            f"count(*) AS n, {means} FROM critiques c JOIN qf ON {on_qf(f, 'c')} {current_join(db, 'c')} "
            f"WHERE {CLASSIFIED} AND {preds['c'][0]} "
            "GROUP BY GROUPING SETS ((c.dataset, qf.language, c.model_id, c.critic_id), (c.model_id, c.dataset))",
            [*p_qf, *preds["c"][1]]).df()
        per_model = con.execute(
            f"WITH {qf}, l AS (SELECT x.model_id, x.dataset, avg(x.meteor) AS meteor, avg(x.rouge_l) AS rouge_l "
            f"FROM response_facts x JOIN qf ON {on_qf(f, 'x')} WHERE {preds['x'][0]} GROUP BY ALL), "
            f"fc AS (SELECT i.model_id, i.dataset, {accuracy} AS llm_accuracy FROM item_scores i "
            f"JOIN qf ON {on_qf(f, 'i')} WHERE i.judge_id = ? AND {preds['i'][0]} GROUP BY ALL) "
            "SELECT * FROM l FULL JOIN fc USING (model_id, dataset)",
            [*p_qf, *preds["x"][1], judge or "", *preds["i"][1]]).df()
    distribution = (both[both.per_model == 0].drop(columns=["per_model"])
                    .sort_values(["dataset", "language", "model_id", "critic_id"]).reset_index(drop=True))
    summary = both[both.per_model == 1][["model_id", "dataset", "n", *DISAGREEMENT]]
    summary = (summary.merge(per_model, on=["model_id", "dataset"], how="left").rename(columns={"model_id": "model"})
               [["model", "dataset", "n", "meteor", "rouge_l", "llm_accuracy", *DISAGREEMENT]]
               .sort_values(["model", "dataset"]).reset_index(drop=True))
    return {"distribution": distribution, "summary": summary}


def medcode_correlations(db: str | Path, f: Filters, judge: str | None) -> pd.DataFrame:
    """Pearson r, over items, between Med-CoDE quantities and the judge's metrics and lexical scores.

    Computed over a fixed pseudo-random sample of CORRELATION_ITEMS critiqued items (the same items every
    time; all of them when there are fewer), of which those of the current response text count, so the
    cost stays flat at scale.
    ``attrs``: ``n`` per score (items with both values) and ``items``.
    """
    qf, p_qf = queries_cte(f)
    pred, p_model = model_pred(f, "c")
    targets = [*METRICS, *LEXICAL]
    corr_cols = ", ".join(f"corr({q}, {t}) AS \"{q}|{t}\"" for q in MEDCODE_QUANTITIES for t in targets)
    count_cols = ", ".join(f"count({t}) AS \"n|{t}\"" for t in targets)
    out = df(db, (
        f"WITH {qf}, c AS (SELECT c.dataset, c.query_id, c.model_id, c.p_none, c.p_high, "
        "c.p_low + 2 * c.p_moderate + 3 * c.p_high AS expected FROM (SELECT c.dataset, c.query_id, c.model_id, "
        f"c.p_none, c.p_low, c.p_moderate, c.p_high, c.response_hash FROM critiques c JOIN qf ON {on_qf(f, 'c')} "
        f"WHERE {CLASSIFIED} AND {pred} ORDER BY hash(c.dataset, c.query_id, c.model_id) LIMIT {CORRELATION_ITEMS}) c "
        f"{current_join(db, 'c')}), "
        "joined AS (SELECT c.p_none, c.p_high, c.expected, " + ", ".join(f"i.{m}" for m in METRICS) + ", "
        + ", ".join(f"x.{c}" for c in LEXICAL)
        + " FROM c LEFT JOIN item_scores i ON i.dataset = c.dataset AND i.query_id = c.query_id "
        "AND i.model_id = c.model_id AND i.judge_id = ? "
        "LEFT JOIN response_facts x ON x.dataset = c.dataset AND x.query_id = c.query_id AND x.model_id = c.model_id) "
        f"SELECT {corr_cols}, {count_cols}, count(*) AS items FROM joined"
    ), [*p_qf, *p_model, judge or ""])
    rows: list[dict[str, Any]] = []
    for q, label in MEDCODE_QUANTITIES.items():
        rows.append({"quantity": label, **{t: out[f"{q}|{t}"].iloc[0] for t in targets}})
    table = pd.DataFrame(rows).rename(columns=LEXICAL_LABELS)
    n = {t: int(out[f"n|{t}"].iloc[0]) for t in targets}
    table.attrs["n"] = {LEXICAL_LABELS.get(k, k): v for k, v in n.items()}
    table.attrs["items"] = int(out["items"].iloc[0])
    return table
