"""Copying a results database the way the tests need it: the DuckDB file and, beside it, its LanceDB index."""

from __future__ import annotations

import shutil
from pathlib import Path


def copy_results_db(db: Path, target: Path) -> Path:
    """Copy ``db`` (and ``<stem>.lancedb`` beside it, if there is one) to ``target``; returns ``target``."""
    db, target = Path(db), Path(target)
    shutil.copy(db, target)
    index = db.with_name(db.stem + ".lancedb")
    if index.is_dir():
        shutil.copytree(index, target.with_name(target.stem + ".lancedb"))
    return target
