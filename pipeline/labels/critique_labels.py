"""Human checks of Med-CoDE critiques from a CSV into ``critique_labels`` (§5.1 and Table 1: annotators label the
degree of disagreement and say whether the critique is accurate).

Columns: ``query_id``, ``model_id``, ``annotator`` and at least one of ``label`` (None, Low, Moderate, High;
"Medium" reads as Moderate) and ``critique_accurate`` (yes/no, true/false, 1/0); optional ``dataset`` (else
``--dataset``, or the database's only dataset), ``critique_by`` (the critic id, or the teacher of a labelled
critique; may be left out when the response has one critique), ``critique_kind`` (``critic`` | ``teacher``, when
an id is both) and ``comment``. A label belongs to the critique and response texts stored when it is imported
(their hashes are kept): a critique written again later is not paired with it.

The whole file is one transaction: if any row is bad (a missing field, an unknown dataset, query or model, a
label or yes/no that cannot be read, a response without that critique, a row repeated), every bad row is printed
with its line and reason, nothing is written and the exit code is 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipeline.dataset.label_csv import BadRow, validate_rows
from pipeline.disagreement import LABEL_ALIASES, LABELS
from pipeline.labels.importing import import_command
from pipeline.store import Store
from pipeline.store.rows import TEXT_HASH_SQL, CritiqueLabelRow

REQUIRED_COLUMNS = ("query_id", "model_id", "annotator")
ANSWER_COLUMNS = ("label", "critique_accurate")
YES_NO = {"yes": True, "y": True, "true": True, "1": True, "no": False, "n": False, "false": False, "0": False}
KINDS = ("critic", "teacher")


@dataclass
class Known:
    """What the database holds that a critique label may refer to."""

    datasets: set[str] = field(default_factory=set)
    queries: set[tuple[str, str]] = field(default_factory=set)
    responses: set[tuple[str, str, str]] = field(default_factory=set)  # current, error-free
    # (dataset, query, model) -> [(kind, by, critique_hash, response_hash)] of the current response's critiques
    critiques: dict[tuple[str, str, str], list[tuple[str, str, str, str]]] = field(default_factory=dict)


def known(store: Store) -> Known:
    out = Known(datasets={r[0] for r in store.fetch("SELECT name FROM datasets")},
                queries={(d, q) for d, q in store.fetch("SELECT dataset, query_id FROM queries")})
    out.responses = {(d, q, m) for d, q, m in store.fetch(
        "SELECT dataset, query_id, model_id FROM responses WHERE error IS NULL AND text IS NOT NULL")}
    rows = store.fetch(
        f"SELECT c.dataset, c.query_id, c.model_id, 'critic', c.critic_id, {TEXT_HASH_SQL.format(col='c.critique')}, "
        "c.response_hash FROM critiques c JOIN responses r USING (dataset, query_id, model_id) "
        "WHERE c.error IS NULL AND c.critique <> '' AND r.error IS NULL AND c.response_hash = r.response_hash "
        "UNION ALL SELECT l.dataset, l.query_id, l.model_id, 'teacher', l.source, "
        f"{TEXT_HASH_SQL.format(col='l.critique')}, l.response_hash FROM labelled_critiques l "
        "JOIN responses r USING (dataset, query_id, model_id) WHERE l.critique <> '' AND r.error IS NULL "
        "AND l.response_hash = r.response_hash ORDER BY 1, 2, 3, 4, 5")
    for d, q, m, kind, by, ch, rh in rows:
        out.critiques.setdefault((d, q, m), []).append((kind, by, ch, rh))
    return out


def parse_label(value: str) -> tuple[str | None, str | None]:
    """(label, None) or (None, reason); an empty value is (None, None)."""
    if not value:
        return None, None
    label = LABEL_ALIASES.get(value.strip().lower())
    return (label, None) if label else (None, f"label {value!r} is not one of {', '.join(LABELS)}")


def parse_yes_no(value: str) -> tuple[bool | None, str | None]:
    if not value:
        return None, None
    answer = YES_NO.get(value.strip().lower())
    return (answer, None) if answer is not None else (None, f"critique_accurate {value!r} is not yes or no")


def _critique(row: dict, found: list[tuple[str, str, str, str]], key: tuple) -> tuple[tuple | None, str | None]:
    """The (kind, by, critique_hash, response_hash) a row names, or the reason it names none."""
    by, kind = row.get("critique_by"), row.get("critique_kind")
    if kind and kind not in KINDS:
        return None, f"critique_kind {kind!r} is not critic or teacher"
    matches = [c for c in found if (not by or c[1] == by) and (not kind or c[0] == kind)]
    if len(matches) == 1:
        return matches[0], None
    what = f"model {key[2]!r} on {key[1]!r}"
    if not found:
        return None, f"the current response of {what} has no critique in the database"
    names = ", ".join(f"{k} {b}" for k, b, _, _ in found)
    if not matches:
        return None, f"no critique by {by!r} of {what} (it has: {names})"
    return None, f"{what} has several critiques ({names}); say which in critique_by (and critique_kind)"


def validate_critique_label_rows(text: str, db: Known, *, dataset: str | None,
                                 source: str) -> tuple[list[CritiqueLabelRow], list[str]]:
    """(label rows, problems as 'line N: reason') of a critique-label CSV's text."""

    def parse_row(row: dict[str, str], ds: str) -> tuple[tuple, CritiqueLabelRow]:
        label, bad_label = parse_label(row.get("label", ""))
        accurate, bad_yes_no = parse_yes_no(row.get("critique_accurate", ""))
        key = (ds, row["query_id"], row["model_id"])
        reason = (bad_label or bad_yes_no
                  or ("neither label nor critique_accurate is given" if label is None and accurate is None else None)
                  or (f"query {key[1]!r} is not in dataset {ds!r}" if key[:2] not in db.queries else None)
                  or (f"model {key[2]!r} has no response to {key[1]!r} in the database"
                      if key not in db.responses else None))
        critique = None
        if reason is None:
            critique, reason = _critique(row, db.critiques.get(key, []), key)
        if reason is not None:
            raise BadRow(reason)
        kind, by, critique_hash, response_hash = critique
        return ((*key, kind, by, row["annotator"]),
                CritiqueLabelRow(dataset=ds, query_id=key[1], model_id=key[2], critique_kind=kind, critique_by=by,
                                 annotator=row["annotator"], label=label, critique_accurate=accurate,
                                 critique_hash=critique_hash, response_hash=response_hash,
                                 comment=row.get("comment") or None, source=source))

    return validate_rows(text, required=REQUIRED_COLUMNS, any_of=ANSWER_COLUMNS, datasets=db.datasets,
                         dataset=dataset, parse_row=parse_row, same="same critique, annotator")


def import_critique_labels_command(csv_path: Path, *, db: Path, dataset: str | None = None) -> int:
    """CLI entry of ``import-critique-labels``: all rows or nothing; bad rows printed with line and reason."""

    def validate(text: str, store: Store) -> tuple[list[CritiqueLabelRow], list[str]]:
        with store.connect():  # an older file gains the tables this reads (labelled_critiques, critique_labels)
            pass
        return validate_critique_label_rows(text, known(store), dataset=dataset, source=Path(csv_path).name)

    return import_command(csv_path, db=db, validate=validate, what="critique label", empty="no critique label rows")


def save_critique_label(db: str | Path, *, dataset: str, query_id: str, model_id: str, critique_kind: str,
                        critique_by: str, annotator: str, label: str, critique_accurate: bool,
                        critique_hash: str, response_hash: str, comment: str | None = None,
                        source: str = "app") -> None:
    """Save one check through the Store (the Med-CoDE page's annotation queue; source 'app')."""
    if label not in LABELS or critique_kind not in KINDS or not annotator.strip():
        raise ValueError(f"a critique label needs a label of {', '.join(LABELS)}, a critique kind and an annotator")
    Store(db).write([CritiqueLabelRow(dataset=dataset, query_id=query_id, model_id=model_id,
                                      critique_kind=critique_kind, critique_by=critique_by,
                                      annotator=annotator.strip(), label=label,
                                      critique_accurate=bool(critique_accurate), critique_hash=critique_hash,
                                      response_hash=response_hash, comment=(comment or "").strip() or None,
                                      source=source)])
