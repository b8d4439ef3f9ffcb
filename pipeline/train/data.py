"""Training data of the Med-CoDE models: labelled-critique CSVs, their hash, and seeded stratified splits.

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

from pipeline.errors import UserError
from pipeline.steps.medcode import LABEL_ALIASES, LABELS

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
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    reader = csv.DictReader(io.StringIO(text))
    fields = [f.strip().lower() for f in (reader.fieldnames or [])]
    needed = list(required) + (["label"] if label_required and "label" not in required else [])
    missing = [c for c in needed if c not in fields]
    if missing:
        names = ", ".join(needed[:-1]) + " and " + needed[-1] if len(needed) > 1 else needed[0]
        raise UserError(f"{path}: needs a header with columns {names} (missing {', '.join(missing)}; "
                        f"found: {', '.join(fields) or 'none'})")
    rows, problems = [], []
    for raw in reader:
        line = reader.line_num
        if None in raw:
            problems.append(f"line {line}: more fields than the header has")
            continue
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items()}
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


def stratified_split(labels: Sequence[int] | None, n: int, fractions: tuple[float, float, float], seed: int,
                     *, source: str = "training data") -> tuple[list[int], list[int], list[int]]:
    """Row indices of train / validation / test in the given proportions (rounded to whole rows), seeded,
    stratified on ``labels`` when given (scikit-learn ``train_test_split(stratify=...)`` twice: test off the
    whole, then validation off the rest). Raises UserError when a split would miss a class (too few rows)."""
    from sklearn.model_selection import train_test_split

    _, val_f, test_f = fractions
    n_val, n_test = max(1, round(n * val_f)), max(1, round(n * test_f))  # whole rows: 15 % of 400 is 60, not 61
    every = list(range(n))
    strat = list(labels) if labels is not None else None
    try:
        rest, test = train_test_split(every, test_size=n_test, random_state=seed, stratify=strat)
        rest_labels = [strat[i] for i in rest] if strat is not None else None
        train, val = train_test_split(rest, test_size=n_val, random_state=seed, stratify=rest_labels)
    except ValueError as exc:
        counts = ({LABELS[c]: strat.count(c) for c in sorted(set(strat))} if strat is not None else {"rows": n})
        raise UserError(f"{source}: cannot split {n} rows {fractions} stratified by label ({counts}): {exc}; "
                        "add rows of the rarest label") from None
    return sorted(train), sorted(val), sorted(test)


def label_counts(labels: Sequence[int]) -> dict[str, int]:
    return {label: sum(1 for y in labels if y == i) for i, label in enumerate(LABELS)}
