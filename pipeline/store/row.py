"""The base of the results database's rows (``pipeline/store/rows.py``): ``Row``, the time a row is written, and the
hash that ties a score to the exact text it scored."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import ClassVar


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def text_hash(text: str | None) -> str:
    """Short content hash used to tie a score to the exact response text it scored."""
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()[:16]


# SQL of text_hash, for backfills of databases written before a hash column existed
TEXT_HASH_SQL = "substr(sha256(coalesce({col}, '')), 1, 16)"


class Row:
    """Base of the row classes: ``TABLE`` names the table, ``KEY`` its primary key."""

    TABLE: ClassVar[str]
    KEY: ClassVar[tuple[str, ...]]
