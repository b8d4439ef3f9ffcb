"""The dataset: its format (``format``), file reading (``records``), validation and loading (``loader``),
importers of public QA sets (``importers``), language and theme tagging (``themes``), raw material in: documents to
KB chunks (``ingest``), a chatbot log to queries (``curate``) with identifiers found and masked (``pii``)."""

from pipeline.dataset.format import (
    LANGUAGE_TABLE,
    LANGUAGES,
    REFUSAL_SENTENCE,
    THEMES,
    Chunk,
    Criterion,
    Query,
    Turn,
    script_counts,
)
from pipeline.dataset.loader import Dataset, load_dataset, validate, validate_command
from pipeline.dataset.records import Issue, find_dataset_files, read_records

__all__ = [
    "LANGUAGES", "LANGUAGE_TABLE", "REFUSAL_SENTENCE", "THEMES", "Chunk", "Criterion", "Dataset", "Issue", "Query",
    "Turn", "find_dataset_files", "load_dataset", "read_records", "script_counts", "validate", "validate_command",
]
