"""Judge reliability from its sanity set: how well its scores separate known-good from known-bad answers."""

from __future__ import annotations

import pandas as pd


def discrimination_auc(sanity: pd.DataFrame) -> pd.DataFrame:
    """Per judge and metric: AUC of the score separating good (1) from bad (0) responses.

    ``sanity`` has columns ``judge_id``, ``metric``, ``kind`` ('good'/'bad'), ``score`` (NULL when
    unparsed) and ``parse_ok``; every sample is one observation. AUC (scikit-learn
    ``roc_auc_score``) is NaN unless both kinds have parsed scores. 0.5 = no discrimination (e.g. the
    same score for everything).
    """
    from sklearn.metrics import roc_auc_score

    cols = ["judge_id", "metric", "auc", "n_good", "n_bad", "n_unparsed"]
    rows = []
    for (judge_id, metric), g in sanity.groupby(["judge_id", "metric"], sort=True):
        ok = g[g["parse_ok"].fillna(False).astype(bool) & g["score"].notna()]
        y = (ok["kind"] == "good").astype(int).to_numpy()
        n_good, n_bad = int(y.sum()), int(len(y) - y.sum())
        auc = float(roc_auc_score(y, ok["score"].astype(float))) if n_good and n_bad else float("nan")
        rows.append({"judge_id": judge_id, "metric": metric, "auc": auc, "n_good": n_good, "n_bad": n_bad,
                     "n_unparsed": int(len(g) - len(ok))})
    return pd.DataFrame(rows, columns=cols)
