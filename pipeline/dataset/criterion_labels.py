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

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import UserError
from pipeline.store import Store
from pipeline.store.schema import CriterionLabelRow

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
    reader = csv.DictReader(io.StringIO(text))
    header = [(h or "").strip().lower() for h in (reader.fieldnames or [])]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        return [], [f"line 1: header lacks column(s) {', '.join(missing)} (need {', '.join(REQUIRED_COLUMNS)})"]
    if "dataset" not in header and dataset is None:
        if len(db.datasets) != 1:
            return [], ["line 1: no dataset column; pass --dataset (the database holds "
                        f"{', '.join(sorted(db.datasets)) or 'no dataset'})"]
        dataset = next(iter(db.datasets))
    rows: list[CriterionLabelRow] = []
    problems: list[str] = []
    seen: dict[tuple, int] = {}
    for raw in reader:
        line = reader.line_num
        if None in raw:
            problems.append(f"line {line}: more fields than the header has")
            continue
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items()}
        if not any(row.values()):
            continue
        ds = row.get("dataset") or dataset
        empty = [c for c in REQUIRED_COLUMNS if not row.get(c)]
        if empty:
            problems.append(f"line {line}: missing {', '.join(empty)}")
            continue
        if ds not in db.datasets:
            problems.append(f"line {line}: dataset {ds!r} is not in the database")
            continue
        met = MET_VALUES.get(row["met"].lower())
        if met is None:
            problems.append(f"line {line}: met {row['met']!r} is not true, false, 1 or 0")
            continue
        qid = row["query_id"]
        if (ds, qid) not in db.rubrics:
            problems.append(f"line {line}: query {qid!r} of dataset {ds!r} has no rubric in the database")
            continue
        index, reason = _criterion_index(row["criterion"], db.rubrics[(ds, qid)])
        if reason:
            problems.append(f"line {line}: {reason}")
            continue
        answered = db.responses.get((ds, qid), {})
        model_id = row.get("model_id")
        if not model_id:
            if len(answered) != 1:
                problems.append(f"line {line}: no model_id, and {len(answered)} models answered {qid!r}; "
                                "say whose response was labelled")
                continue
            model_id = next(iter(answered))
        if model_id not in answered:
            problems.append(f"line {line}: model {model_id!r} has no response to {qid!r} in the database")
            continue
        key = (ds, qid, model_id, index, row["annotator"])
        if key in seen:
            problems.append(f"line {line}: repeats line {seen[key]} (same query, model, criterion, annotator)")
            continue
        seen[key] = line
        rows.append(CriterionLabelRow(dataset=ds, query_id=qid, model_id=model_id, criterion_index=index,
                                      criterion=db.rubrics[(ds, qid)][index], annotator=row["annotator"], met=met,
                                      response_hash=answered[model_id], source=source))
    return rows, problems


def import_criterion_labels_command(csv_path: Path, *, db: Path, dataset: str | None = None) -> int:
    """CLI entry of ``import-criterion-labels``: all rows or nothing; bad rows printed with line and reason."""
    from rich.console import Console

    console = Console(stderr=True)
    csv_path, db = Path(csv_path), Path(db)
    if not csv_path.is_file():
        raise UserError(f"{csv_path}: file not found")
    if not db.is_file():
        raise UserError(f"{db}: no results database here (run an evaluation first)")
    try:
        text = csv_path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{csv_path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    store = Store(db)
    rows, problems = validate_criterion_label_rows(text, known(store), dataset=dataset, source=csv_path.name)
    if problems:
        for p in problems:
            console.print(f"{csv_path}:{p}", highlight=False, soft_wrap=True)
        console.print(f"[bold red]error:[/] {len(problems)} bad row(s); nothing imported", highlight=False)
        return 1
    if not rows:
        raise UserError(f"{csv_path}: no label rows")
    store.write(rows)
    console.print(f"imported {len(rows)} criterion label(s) from {csv_path} into {db}")
    return 0
