"""Human labels from a CSV into ``human_labels`` (Health-Pariksha §3.5.2: annotators check the judge).

The whole file is one transaction: if any row is bad (missing field, unknown query or model in the
database, metric not a registered metric, score not 0/1/2, a row repeated), every bad row is printed
with its line and reason, nothing is written and the exit code is 1.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.dataset.label_csv import BadRow, validate_rows
from pipeline.labels.importing import import_command
from pipeline.metrics import METRICS
from pipeline.store import Store
from pipeline.store.rows import HumanLabelRow

REQUIRED_COLUMNS = ("query_id", "model_id", "metric", "annotator", "score")


def _known(store: Store) -> tuple[set[str], set[tuple[str, str]], set[tuple[str, str, str]]]:
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

    def parse_row(row: dict[str, str], ds: str) -> tuple[tuple, dict]:
        metric = row["metric"].upper()
        if metric not in METRICS:
            raise BadRow(f"metric {row['metric']!r} is not one of {', '.join(METRICS)}")
        if row["score"] not in ("0", "1", "2"):
            raise BadRow(f"score {row['score']!r} is not 0, 1 or 2")
        if (ds, row["query_id"]) not in queries:
            raise BadRow(f"query {row['query_id']!r} is not in dataset {ds!r}")
        if (ds, row["query_id"], row["model_id"]) not in responses:
            raise BadRow(f"model {row['model_id']!r} has no response to {row['query_id']!r} in the database")
        return ((ds, row["query_id"], row["model_id"], metric, row["annotator"]),
                {"dataset": ds, "query_id": row["query_id"], "model_id": row["model_id"], "metric": metric,
                 "annotator": row["annotator"], "score": int(row["score"]), "comment": row.get("comment") or None})

    # a planned item not labelled yet (human-eval plan's CSV) is skipped: import what is done
    return validate_rows(text, required=REQUIRED_COLUMNS, datasets=datasets, dataset=dataset, parse_row=parse_row,
                         same="same query, model, metric, annotator",
                         skip=lambda row: row.get("plan_id") and not row.get("score"))


def import_human_labels_command(csv_path: Path, *, db: Path, dataset: str | None = None) -> int:
    """CLI entry of ``import-human-labels``: all rows or nothing; bad rows printed with line and reason."""

    def validate(text: str, store: Store) -> tuple[list[HumanLabelRow], list[str]]:
        datasets, queries, responses = _known(store)
        rows, problems = validate_label_rows(text, datasets=datasets, queries=queries, responses=responses,
                                             dataset=dataset)
        return [HumanLabelRow(**r, source=Path(csv_path).name) for r in rows], problems

    return import_command(csv_path, db=db, validate=validate, what="human label")


def save_label(db: str | Path, *, dataset: str, query_id: str, model_id: str, metric: str, annotator: str,
               score: int, comment: str | None, source: str = "app") -> None:
    """Save one label through the Store (the dashboard's annotation view; source 'app')."""
    if metric not in METRICS or score not in (0, 1, 2) or not annotator.strip():
        raise ValueError(f"a label needs a metric of {', '.join(METRICS)}, a score 0–2 and an annotator name")
    Store(db).write([HumanLabelRow(dataset=dataset, query_id=query_id, model_id=model_id, metric=metric,
                                   annotator=annotator.strip(), score=int(score),
                                   comment=(comment or "").strip() or None, source=source)])
