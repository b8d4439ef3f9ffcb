"""The results store: ``rows`` (one row class per table), ``derived`` (what a derived table's declaration is, its
refresh order and refresh), ``derived_*`` (the declarations), ``schema`` (tables, keys, derived tables), ``writer``
(the only writer), ``connections`` (short-lived connections and the read-only instance a dashboard render shares)."""

from pipeline.store.connections import (
    SHARED_READERS,
    SharedReaders,
    is_lock_error,
    open_connection,
    require_database,
)
from pipeline.store.rows import now, text_hash
from pipeline.store.schema import DERIVED, LEXICAL, SCHEMA_VERSION, TABLES
from pipeline.store.writer import Store

__all__ = ["DERIVED", "LEXICAL", "SCHEMA_VERSION", "SHARED_READERS", "TABLES", "SharedReaders", "Store",
           "is_lock_error", "now", "open_connection", "require_database", "text_hash"]
