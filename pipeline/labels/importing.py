"""A label-import CLI command: a label CSV read and checked row by row (``pipeline.dataset.label_csv``), then written
through the store, all rows or nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pipeline.dataset.label_csv import read_csv_text
from pipeline.errors import UserError
from pipeline.store import Store


def import_command(csv_path: Path, *, db: Path, validate: Callable[[str, Store], tuple[list, list[str]]],
                   what: str, empty: str = "no label rows", nothing_new: Callable[[], bool] | None = None) -> int:
    """A label-import CLI command: ``validate(text, store)`` gives (store rows, problems); all rows or nothing.

    Every problem is printed as ``file:line N: reason`` and the exit code is 1; a file with no rows is a
    :class:`UserError` (``empty``) unless ``nothing_new()`` says the rows were all left out as already stored
    (then exit 0); else the rows are written and 'imported N {what}(s)' said.
    """
    from pipeline.console import make_console

    console = make_console(stderr=True)
    csv_path, db = Path(csv_path), Path(db)
    if not csv_path.is_file():
        raise UserError(f"{csv_path}: file not found")
    if not db.is_file():
        raise UserError(f"{db}: no results database here (run an evaluation first)")
    text = read_csv_text(csv_path)
    store = Store(db)
    rows, problems = validate(text, store)
    if problems:
        for p in problems:
            console.print(f"{csv_path}:{p}", highlight=False, soft_wrap=True)
        console.print(f"[bold red]error:[/] {len(problems)} bad row(s); nothing imported", highlight=False)
        return 1
    if not rows:
        if nothing_new is not None and nothing_new():  # every row was already stored (e.g. repeats kept out)
            console.print(f"imported 0 {what}s from {csv_path}: nothing new", highlight=False)
            return 0
        raise UserError(f"{csv_path}: {empty}")
    store.write(rows)
    console.print(f"imported {len(rows)} {what}(s) from {csv_path} into {db}", highlight=False)
    return 0
