"""Human labels and their agreement with the LLM judge (Health-Pariksha §4.2, Figure 1–2, Table 7).

- ``import_human_labels_command``: a CSV of human scores into ``human_labels``. The whole file is one
  transaction: if any row is bad (missing field, unknown query or model in the database, metric
  not FC/SS/COH/CON, score not 0/1/2, a row repeated), every bad row is printed with its line and
  reason, nothing is written and the exit code is 1.
- ``agreement_table``: percentage agreement and linearly weighted Cohen's kappa (scikit-learn)
  between human and LLM scores per language and model.
- ``ranking_comparison``: per language, the models ranked by human and by LLM mean, Kendall's tau
  (scipy) and whether the two rankings are identical — Table 7's analysis.
- ``load_table7``: the paper's Table 7 (data/reference/health_pariksha_table7_rankings.csv).

All analysis functions take DataFrames, so the dashboard can call them on SQL results
(``HUMAN_LLM_PAIRS_SQL`` gives the pairs).
"""

from __future__ import annotations

import csv
import io
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.config import METRICS
from pipeline.errors import UserError
from pipeline.store import Store, now

REQUIRED_COLUMNS = ("query_id", "model_id", "metric", "annotator", "score")
OPTIONAL_COLUMNS = ("dataset", "comment")
TABLE7_CSV = Path(__file__).resolve().parent.parent / "data" / "reference" / "health_pariksha_table7_rankings.csv"

# Human label × LLM judgment pairs (sample 0 of each judgment), with the query's language.
# Parameters: dataset, judge_id.
HUMAN_LLM_PAIRS_SQL = """
SELECT h.dataset, h.query_id, h.model_id, h.metric, h.annotator, q.language,
       h.score AS human, j.score AS llm
FROM human_labels h
JOIN queries q ON q.dataset = h.dataset AND q.query_id = h.query_id
JOIN judgments j ON j.dataset = h.dataset AND j.query_id = h.query_id AND j.model_id = h.model_id
                AND j.metric = h.metric AND j.sample = 0
WHERE h.dataset = ? AND j.judge_id = ? AND j.parse_ok
"""


# -- import ------------------------------------------------------------------------------------------
def _known(store: Store, dataset: str | None) -> tuple[set[str], set[tuple[str, str]], set[tuple[str, str, str]]]:
    """Datasets, (dataset, query_id) and (dataset, query_id, model_id) present in the database."""
    if not store.path.exists():
        return set(), set(), set()
    datasets = {r[0] for r in store.fetch("SELECT name FROM datasets")}
    queries = {(d, q) for d, q in store.fetch("SELECT dataset, query_id FROM queries")}
    responses = {(d, q, m) for d, q, m in store.fetch("SELECT dataset, query_id, model_id FROM responses")}
    return datasets, queries, responses


def validate_label_rows(text: str, *, datasets: set[str], queries: set[tuple[str, str]],
                        responses: set[tuple[str, str, str]], dataset: str | None) -> tuple[list[dict], list[str]]:
    """(good rows, problems as 'line N: reason') of a human-label CSV's text."""
    reader = csv.DictReader(io.StringIO(text))
    header = [(h or "").strip().lower() for h in (reader.fieldnames or [])]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        return [], [f"line 1: header lacks column(s) {', '.join(missing)} (need {', '.join(REQUIRED_COLUMNS)})"]
    if "dataset" not in header and dataset is None:
        if len(datasets) == 1:
            dataset = next(iter(datasets))
        else:
            return [], ["line 1: no dataset column; pass --dataset (the database holds "
                        f"{', '.join(sorted(datasets)) or 'no dataset'})"]
    rows, problems, seen = [], [], {}
    for raw in reader:
        line = reader.line_num
        if None in raw:
            problems.append(f"line {line}: more fields than the header has")
            continue
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items()}
        ds = row.get("dataset") or dataset
        empty = [c for c in REQUIRED_COLUMNS if not row.get(c)]
        if empty:
            problems.append(f"line {line}: missing {', '.join(empty)}")
            continue
        if ds not in datasets:
            problems.append(f"line {line}: dataset {ds!r} is not in the database")
            continue
        metric = row["metric"].upper()
        if metric not in METRICS:
            problems.append(f"line {line}: metric {row['metric']!r} is not one of {', '.join(METRICS)}")
            continue
        if row["score"] not in ("0", "1", "2"):
            problems.append(f"line {line}: score {row['score']!r} is not 0, 1 or 2")
            continue
        if (ds, row["query_id"]) not in queries:
            problems.append(f"line {line}: query {row['query_id']!r} is not in dataset {ds!r}")
            continue
        if (ds, row["query_id"], row["model_id"]) not in responses:
            problems.append(f"line {line}: model {row['model_id']!r} has no response to {row['query_id']!r} "
                            "in the database")
            continue
        key = (ds, row["query_id"], row["model_id"], metric, row["annotator"])
        if key in seen:
            problems.append(f"line {line}: repeats line {seen[key]} (same query, model, metric, annotator)")
            continue
        seen[key] = line
        rows.append({"dataset": ds, "query_id": row["query_id"], "model_id": row["model_id"], "metric": metric,
                     "annotator": row["annotator"], "score": int(row["score"]), "comment": row.get("comment") or None})
    return rows, problems


def import_human_labels_command(csv_path: Path, *, db: Path, dataset: str | None = None) -> int:
    """CLI entry of ``import-human-labels``: all rows or nothing; bad rows printed with line and reason."""
    from rich.console import Console

    console = Console(stderr=True)
    csv_path, db = Path(csv_path), Path(db)
    if not csv_path.is_file():
        raise UserError(f"{csv_path}: file not found")
    if not db.exists():
        raise UserError(f"{db}: no results database here (run an evaluation first)")
    try:
        text = csv_path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{csv_path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    store = Store(db)
    datasets, queries, responses = _known(store, dataset)
    rows, problems = validate_label_rows(text, datasets=datasets, queries=queries, responses=responses,
                                         dataset=dataset)
    if problems:
        for p in problems:
            console.print(f"{csv_path}:{p}", highlight=False, soft_wrap=True)
        console.print(f"[bold red]error:[/] {len(problems)} bad row(s); nothing imported", highlight=False)
        return 1
    if not rows:
        raise UserError(f"{csv_path}: no label rows")
    stamp = now()
    store.upsert("human_labels", [{**r, "source": csv_path.name, "created_at": stamp} for r in rows])
    console.print(f"imported {len(rows)} human label(s) from {csv_path} into {db}")
    return 0


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


def agreement_table(pairs: pd.DataFrame, by: tuple[str, ...] = ("language", "model_id")) -> pd.DataFrame:
    """Percentage agreement and weighted kappa per group (default language × model).

    ``pairs`` has columns ``human`` and ``llm`` (0–2) and the grouping columns. A row per language
    with ``model_id = "(all)"`` pools that language's models.
    """
    cols = [*by, "n", "percentage_agreement", "weighted_kappa"]
    if pairs.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    groups = [(list(by), pairs)]
    if "model_id" in by and len(by) > 1:
        pooled = pairs.assign(model_id="(all)")
        groups.append((list(by), pooled))
    for keys, frame in groups:
        for key, g in frame.groupby(keys, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            rows.append({**dict(zip(by, key, strict=True)), "n": len(g),
                         "percentage_agreement": percentage_agreement(g["human"], g["llm"]),
                         "weighted_kappa": weighted_kappa(g["human"], g["llm"])})
    return pd.DataFrame(rows, columns=cols)


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


def model_means(pairs: pd.DataFrame) -> pd.DataFrame:
    """Human and LLM mean score per language and model, from item pairs (for ``ranking_comparison``)."""
    return pairs.groupby(["language", "model_id"], as_index=False).agg(human=("human", "mean"), llm=("llm", "mean"),
                                                                        n=("human", "size"))


def load_table7(path: Path = TABLE7_CSV) -> pd.DataFrame:
    """The paper's Table 7: language, model, human/LLM rank and mean SS (as printed)."""
    return pd.read_csv(path)


def table7_comparison(path: Path = TABLE7_CSV) -> pd.DataFrame:
    """``ranking_comparison`` on the paper's own Table 7 averages."""
    t = load_table7(path)
    return ranking_comparison(t.rename(columns={"human_ss": "human", "llm_ss": "llm"})[
        ["language", "model", "human", "llm"]])
