"""Training data of the Med-CoDE models: labelled-critique CSVs, their hash, and the seeded split both trainers use —
grouped by question and stratified by label as far as the groups allow (``grouped_split``).

The CSV is the one ``data/medcode-critiques/critiques.csv`` ships and ``medcode label`` exports:
``item_id,kind,question,ground_truth,response,critique,label,source``. The classifier needs only
``critique`` and ``label``; the critic needs ``question``, ``ground_truth``, ``response`` and ``critique``.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pipeline.dataset.label_csv import TOO_MANY_FIELDS, csv_rows, read_csv_text
from pipeline.disagreement import LABEL_ALIASES, LABELS
from pipeline.errors import UserError

MAX_PROBLEMS = 20  # bad rows named in one error message


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_labelled_csv(path: Path, required: Sequence[str], *, label_required: bool = True) -> list[dict]:
    """Rows of a labelled-critique CSV as dicts (lower-cased column names, stripped values, ``line``,
    and ``label_index`` into LABELS when the row has a label).

    Every column in ``required`` must be in the header and non-empty in every row; ``label`` must be one
    of None/Low/Moderate/High (Med-CoDE §3.1's "Medium" is read as Moderate). Raises UserError naming the
    file and every bad line and field (at most 20 of them).
    """
    path = Path(path)
    reader = csv.DictReader(io.StringIO(read_csv_text(path)))
    fields = [f.strip().lower() for f in (reader.fieldnames or [])]
    needed = list(required) + (["label"] if label_required and "label" not in required else [])
    missing = [c for c in needed if c not in fields]
    if missing:
        names = ", ".join(needed[:-1]) + " and " + needed[-1] if len(needed) > 1 else needed[0]
        raise UserError(f"{path}: needs a header with columns {names} (missing {', '.join(missing)}; "
                        f"found: {', '.join(fields) or 'none'})")
    rows, problems = [], []
    for line, row in csv_rows(reader):
        if row is None:
            problems.append(f"line {line}: {TOO_MANY_FIELDS}")
            continue
        empty = [c for c in required if c != "label" and not row.get(c)]
        label = row.get("label", "")
        if empty:
            problems.append(f"line {line}: {', '.join(empty)} {'is' if len(empty) == 1 else 'are'} empty")
        elif (label_required or label) and label.lower() not in LABEL_ALIASES:
            problems.append(f"line {line}: label {label!r} is not one of {', '.join(LABELS)}")
        else:
            if label.lower() in LABEL_ALIASES:
                row["label_index"] = LABELS.index(LABEL_ALIASES[label.lower()])
            row["line"] = line
            rows.append(row)
    if problems:
        more = f" (+{len(problems) - MAX_PROBLEMS} more)" if len(problems) > MAX_PROBLEMS else ""
        raise UserError(f"{path}: {len(problems)} bad row(s): " + "; ".join(problems[:MAX_PROBLEMS]) + more)
    if len(rows) < 2:
        raise UserError(f"{path}: needs at least 2 labelled critiques, found {len(rows)}")
    return rows


def question_groups(rows: Sequence[dict]) -> list[str]:
    """The group of each row for ``grouped_split``: its question, case- and whitespace-normalised, so the rows
    that answer one question (its several responses and critiques) stay in one split; a row without a
    question is a group of its own (``row:<line>``)."""
    out = []
    for i, r in enumerate(rows):
        q = " ".join(str(r.get("question") or "").casefold().split())
        out.append(f"q:{q}" if q else f"row:{r.get('line', i)}")
    return out


GROUP_DRAWS = 100  # seeded GroupShuffleSplit draws grouped_split chooses among, per split


def grouped_split(labels: Sequence[int], groups: Sequence[str], fractions: tuple[float, float, float], seed: int,
                  *, source: str = "training data") -> tuple[list[int], list[int], list[int]]:
    """Row indices of train / validation / test such that no group (question) is in two splits.

    Whole groups in the given proportions: test takes ``round(G × test)`` of the G groups, validation
    ``round(G × validation)`` of the rest (at least one each), drawn with scikit-learn ``GroupShuffleSplit``
    (seeded: test off the whole, then validation off the rest). Labels are stratified as far as the groups
    allow: of ``GROUP_DRAWS`` seeded draws, the one whose label counts are closest to the data's label shares
    × the split's target rows (Σ over labels of |count − target|; this also keeps the row count near the
    proportion when groups differ in size) is kept, the first draw on ties — so data whose every question has
    one row per label (the bundled critiques) gets the first draw, exactly balanced. Raises UserError when
    there are fewer than 3 groups or the training split would miss a label."""
    from sklearn.model_selection import GroupShuffleSplit

    n = len(labels)
    if len(groups) != n:
        raise ValueError("grouped_split: one group per label")
    names = list(dict.fromkeys(groups))
    if len(names) < 3:
        raise UserError(f"{source}: cannot split {n} rows by question into train, validation and test: "
                        f"{len(names)} distinct question(s); add rows of other questions")
    _, val_f, test_f = fractions
    shares = np.bincount(np.asarray(labels, dtype=int), minlength=4) / n

    def pick(ix: np.ndarray, n_groups: int, target_rows: float) -> tuple[np.ndarray, np.ndarray]:
        sub_groups = np.asarray([groups[i] for i in ix])
        draws = GroupShuffleSplit(n_splits=GROUP_DRAWS, test_size=n_groups, random_state=seed)
        best, best_score = None, None
        for rest, held in draws.split(ix, groups=sub_groups):
            counts = np.bincount(np.asarray([labels[i] for i in ix[held]], dtype=int), minlength=4)
            score = float(np.abs(counts - shares * target_rows).sum())
            if best_score is None or score < best_score - 1e-9:
                best, best_score = (ix[rest], ix[held]), score
        return best

    n_test_g = max(1, round(len(names) * test_f))
    n_val_g = max(1, round(len(names) * val_f))
    if len(names) - n_test_g - n_val_g < 1:
        n_test_g, n_val_g = 1, 1
    rest, test = pick(np.arange(n), n_test_g, n * test_f)
    train, val = pick(rest, n_val_g, n * val_f)
    missing = sorted(set(labels) - {labels[i] for i in train})
    if missing:
        counts = {LABELS[c]: list(labels).count(c) for c in sorted(set(labels))}
        raise UserError(f"{source}: splitting {n} rows by question ({len(names)} questions) leaves no "
                        f"{', '.join(LABELS[c] for c in missing)} critique in the training split ({counts}); "
                        "add rows of the rarest label")
    assert not ({groups[i] for i in train} & {groups[i] for i in val} or {groups[i] for i in train} &
                {groups[i] for i in test} or {groups[i] for i in val} & {groups[i] for i in test})
    return sorted(train.tolist()), sorted(val.tolist()), sorted(test.tolist())


def questions_per_split(groups: Sequence[str], train: Sequence[int], validation: Sequence[int],
                        test: Sequence[int]) -> dict[str, int]:
    """How many distinct groups (questions) each split of ``grouped_split`` holds, for a model card."""
    return {name: len({groups[i] for i in ix})
            for name, ix in (("train", train), ("validation", validation), ("test", test))}


def label_counts(labels: Sequence[int]) -> dict[str, int]:
    return {label: sum(1 for y in labels if y == i) for i, label in enumerate(LABELS)}
