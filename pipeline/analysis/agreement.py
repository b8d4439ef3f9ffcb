"""Human labels and their agreement with the LLM judge (Health-Pariksha §4.2, Figure 1–2, Table 7).

- ``percentage_agreement`` and ``weighted_kappa`` (linear weights, scikit-learn; from counts too).
- ``ranking_comparison``: per language, the models ranked by human and by LLM mean, Kendall's tau
  (scipy) and whether the two rankings are identical — Table 7's analysis.
- ``load_table7``: the paper's Table 7 (data/reference/health_pariksha_table7_rankings.csv).

Pure functions on arrays and frames; the pairs come from ``pipeline.read.agreement`` (SQL).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

TABLE7_CSV = Path(__file__).resolve().parents[2] / "data" / "reference" / "health_pariksha_table7_rankings.csv"


# -- agreement -----------------------------------------------------------------------------------------
def percentage_agreement(human, llm) -> float:
    """Share of items on which human and LLM gave the same score."""
    h, m = np.asarray(human), np.asarray(llm)
    return float((h == m).mean()) if len(h) else float("nan")


def weighted_kappa(human, llm, counts=None) -> float:
    """Linearly weighted Cohen's kappa (scikit-learn) on the 0/1/2 scale; NaN when undefined.

    ``counts`` weighs each (human, llm) pair, so a confusion table from SQL can be passed as its
    distinct pairs and their counts.
    """
    from sklearn.exceptions import UndefinedMetricWarning
    from sklearn.metrics import cohen_kappa_score

    h, m = np.asarray(human, dtype=int), np.asarray(llm, dtype=int)
    if len(h) == 0:
        return float("nan")
    # undefined (e.g. every label the same on both sides) is NaN by design and shown as "—", not a warning in the log
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        k = cohen_kappa_score(h, m, weights="linear", labels=[0, 1, 2], sample_weight=counts,
                              replace_undefined_by=np.nan)
    return float(k)


# -- rankings (Table 7) --------------------------------------------------------------------------------
def ranking_comparison(means: pd.DataFrame) -> pd.DataFrame:
    """Per language: models ranked by human and by LLM mean, Kendall's tau and whether the rankings match.

    ``means`` has columns ``language``, ``model_id`` (or ``model``), ``human`` and ``llm`` (mean scores).
    Rankings are orders by descending mean (ties broken by model name); ``identical`` compares
    the two orders. Kendall's tau is scipy's tau-b on the means (ties handled), with its p-value.
    """
    from scipy.stats import kendalltau

    model_col = "model_id" if "model_id" in means.columns else "model"
    rows = []
    for language, g in means.groupby("language", sort=False):
        human_order = g.sort_values(["human", model_col], ascending=[False, True])[model_col].tolist()
        llm_order = g.sort_values(["llm", model_col], ascending=[False, True])[model_col].tolist()
        tau = kendalltau(g["human"], g["llm"]) if len(g) > 1 else None
        rows.append({"language": language, "n_models": len(g), "human_ranking": human_order,
                     "llm_ranking": llm_order, "identical": human_order == llm_order,
                     "kendall_tau": float(tau.statistic) if tau is not None else float("nan"),
                     "p_value": float(tau.pvalue) if tau is not None else float("nan")})
    return pd.DataFrame(rows)


def load_table7(path: Path = TABLE7_CSV) -> pd.DataFrame:
    """The paper's Table 7: language, model, human/LLM rank and mean SS (as printed)."""
    return pd.read_csv(path)


def table7_comparison(path: Path = TABLE7_CSV) -> pd.DataFrame:
    """``ranking_comparison`` on the paper's own Table 7 averages."""
    t = load_table7(path)
    return ranking_comparison(t.rename(columns={"human_ss": "human", "llm_ss": "llm"})[
        ["language", "model", "human", "llm"]])
