"""Physician labels of rubric criteria from a CSV into ``criterion_labels`` (HealthBench's meta-evaluation: the
rubric grader against physicians).

Columns: ``query_id``, ``criterion`` (the criterion's text as in the query's rubric, or its 0-based index),
``annotator``, ``met`` (true/false, 1/0); optional ``dataset`` (else ``--dataset``, or the database's only
dataset) and ``model_id`` (whose response was labelled; may be left out when only one model answered the
query). A label belongs to the response text stored when it is imported (its hash is kept): a regenerated
response is not paired with it.

The whole file is one transaction: if any row is bad (a missing field, an unknown dataset, query or model, a
query without a rubric, a criterion not in it, a ``met`` that is not true/false/1/0, a row repeated), every
bad row is printed with its line and reason, nothing is written and the exit code is 1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.dataset.label_csv import BadRow, validate_rows
from pipeline.labels.importing import import_command
from pipeline.store import Store
from pipeline.store.rows import CriterionLabelRow

REQUIRED_COLUMNS = ("query_id", "criterion", "annotator", "met")
MET_VALUES = {"true": True, "1": True, "false": False, "0": False}


@dataclass
class Known:
    """What the database holds that a label may refer to."""

    datasets: set[str] = field(default_factory=set)
    rubrics: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (dataset, query) -> criterion texts
    responses: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)  # -> model_id: response hash


def known(store: Store) -> Known:
    """Datasets, rubrics and current (error-free) responses in the database."""
    out = Known(datasets={r[0] for r in store.fetch("SELECT name FROM datasets")})
    for ds, qid, rubric in store.fetch("SELECT dataset, query_id, rubric FROM queries WHERE rubric IS NOT NULL"):
        out.rubrics[(ds, qid)] = [c["criterion"] for c in json.loads(rubric)]
    for ds, qid, mid, h in store.fetch("SELECT dataset, query_id, model_id, response_hash FROM responses "
                                       "WHERE error IS NULL AND text IS NOT NULL"):
        out.responses.setdefault((ds, qid), {})[mid] = h
    return out


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _criterion_index(value: str, criteria: list[str]) -> tuple[int | None, str | None]:
    """(index, None) of a criterion given by 0-based index or by text; (None, reason) when it is not one."""
    if value.isdigit():
        index = int(value)
        if index < len(criteria):
            return index, None
        return None, f"criterion index {index} is out of range (the rubric has {len(criteria)}, indexed from 0)"
    matches = [i for i, c in enumerate(criteria) if _norm(c) == _norm(value)]
    if len(matches) == 1:
        return matches[0], None
    if matches:
        return None, f"criterion {value[:60]!r} is in the rubric {len(matches)} times; give its index"
    return None, f"criterion {value[:60]!r} is not in the query's rubric"


def validate_criterion_label_rows(text: str, db: Known, *, dataset: str | None,
                                  source: str) -> tuple[list[CriterionLabelRow], list[str]]:
    """(label rows, problems as 'line N: reason') of a criterion-label CSV's text."""

    def parse_row(row: dict[str, str], ds: str) -> tuple[tuple, CriterionLabelRow]:
        met = MET_VALUES.get(row["met"].lower())
        if met is None:
            raise BadRow(f"met {row['met']!r} is not true, false, 1 or 0")
        qid = row["query_id"]
        if (ds, qid) not in db.rubrics:
            raise BadRow(f"query {qid!r} of dataset {ds!r} has no rubric in the database")
        index, reason = _criterion_index(row["criterion"], db.rubrics[(ds, qid)])
        if reason:
            raise BadRow(reason)
        answered = db.responses.get((ds, qid), {})
        model_id = row.get("model_id")
        if not model_id:
            if len(answered) != 1:
                raise BadRow(f"no model_id, and {len(answered)} models answered {qid!r}; "
                             "say whose response was labelled")
            model_id = next(iter(answered))
        if model_id not in answered:
            raise BadRow(f"model {model_id!r} has no response to {qid!r} in the database")
        return ((ds, qid, model_id, index, row["annotator"]),
                CriterionLabelRow(dataset=ds, query_id=qid, model_id=model_id, criterion_index=index,
                                  criterion=db.rubrics[(ds, qid)][index], annotator=row["annotator"], met=met,
                                  response_hash=answered[model_id], source=source))

    return validate_rows(text, required=REQUIRED_COLUMNS, datasets=db.datasets, dataset=dataset,
                         parse_row=parse_row, same="same query, model, criterion, annotator")


def import_criterion_labels_command(csv_path: Path, *, db: Path, dataset: str | None = None) -> int:
    """CLI entry of ``import-criterion-labels``: all rows or nothing; bad rows printed with line and reason."""
    return import_command(
        csv_path, db=db, what="criterion label",
        validate=lambda text, store: validate_criterion_label_rows(text, known(store), dataset=dataset,
                                                                   source=Path(csv_path).name))
