"""How far to trust the judge: the warning shown wherever judge scores are, and its self-consistency.

Self-consistency (a judge asked several times per item): per item and metric the population
standard deviation of its parsed sample scores and whether they differ at all (a flip), over items
with at least two parsed samples of the current response text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.metrics import METRICS
from pipeline.read.common import Filters, current_join, df, model_pred, on_qf, queries_cte

# docs/design.md (known facts): it scores a right, a wrong and a refusal alike
WEAK_JUDGES = ("llamacpp/smollm2-135m-instruct",)
AUC_TRUST = 0.75
CONSISTENCY_COLUMNS = ["language", "model_id", "metric", "multi_items", "parsed_samples", "mean_std", "flip_rate"]


def judge_warning(judge: str | None, reliability: pd.DataFrame) -> str | None:
    """A plain warning when the judge's scores should not be trusted, else None.

    ``reliability`` has ``judge_id``, ``metric`` and ``auc`` (``home.judge_summary``'s reliability).
    """
    if judge is None:
        return None
    reasons = []
    if judge in WEAK_JUDGES:
        reasons.append(f"{judge} is a 135M-parameter model kept to prove the machinery: as a judge it gave "
                       "Score 0 to a correct, a wrong and a refusing answer alike")
    rel = reliability[reliability.judge_id == judge] if not reliability.empty else reliability
    weak = rel[rel.auc < AUC_TRUST] if not rel.empty else rel
    if not weak.empty:
        listed = ", ".join(f"{r.metric} {r.auc:.2f}" for r in weak.itertuples())
        reasons.append(f"its sanity-check AUC is below {AUC_TRUST} for {listed} (0.5 is chance)")
    if rel.empty and judge not in WEAK_JUDGES:
        reasons.append("it has no sanity check yet (run the `sanity` stage)")
        return "Judge reliability unknown: " + "; ".join(reasons) + "."
    if not reasons:
        return None
    return "Do not trust these judge scores: " + "; ".join(reasons) + ". Point `judge:` at a strong model."


def consistency_sql(db: str | Path, f: Filters, judge: str) -> tuple[str, list[Any]]:
    """Self-consistency per (language, model, metric): items with ≥2 parsed samples, their parsed samples,
    the mean population std and the flip rate. Current response texts only."""
    qf, p_qf = queries_cte(f)
    pred, p_model = model_pred(f, "j")
    per_item = ("SELECT qf.language, j.model_id, j.metric, stddev_pop(j.score) AS sd, count(*) AS n_parsed, "
                f"min(j.score) <> max(j.score) AS flipped FROM judgments j JOIN qf ON {on_qf(f, 'j')} "
                f"{current_join(db, 'j')} WHERE j.judge_id = ? AND j.parse_ok AND list_contains(?, j.metric) "
                f"AND {pred} GROUP BY qf.language, j.model_id, j.metric, j.dataset, j.query_id")
    return (f"WITH {qf}, per_item AS ({per_item}) SELECT language, model_id, metric, count(*) AS multi_items, "
            "sum(n_parsed) AS parsed_samples, avg(sd) AS mean_std, avg(flipped::INTEGER) AS flip_rate "
            "FROM per_item WHERE n_parsed >= 2 GROUP BY ALL ORDER BY ALL"), [*p_qf, judge, list(METRICS), *p_model]


def pool_consistency(rows: pd.DataFrame, by: str) -> pd.DataFrame:
    """``consistency_sql`` rows pooled per ``by`` (``model_id`` or ``metric``), weighted by their items."""
    if rows.empty:
        return pd.DataFrame(columns=[by, "multi_items", "samples", "mean_std", "flip_rate"])
    out = rows.assign(std_w=rows.mean_std * rows.multi_items, flip_w=rows.flip_rate * rows.multi_items)
    out = out.groupby(by, sort=False)[["multi_items", "parsed_samples", "std_w", "flip_w"]].sum()
    return pd.DataFrame({"multi_items": out.multi_items, "samples": out.parsed_samples / out.multi_items,
                         "mean_std": out.std_w / out.multi_items,
                         "flip_rate": out.flip_w / out.multi_items}).reset_index()


def judge_consistency(db: str | Path, f: Filters, judge: str) -> pd.DataFrame:
    """Per metric (registry order): items judged at least twice, mean parsed samples, mean std, flip rate.

    Empty when the judge took one sample per item.
    """
    per = pool_consistency(df(db, *consistency_sql(db, f, judge)), "metric")
    order = {m: i for i, m in enumerate(METRICS)}
    return per.sort_values("metric", key=lambda s: s.map(order)).reset_index(drop=True)
