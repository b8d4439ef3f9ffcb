"""The dataset: its format and validation (``format``), language and theme tagging (``themes``)."""

from pipeline.dataset.format import (
    LANGUAGE_TABLE,
    LANGUAGES,
    REFUSAL_SENTENCE,
    THEMES,
    Chunk,
    Dataset,
    Issue,
    Query,
    find_dataset_files,
    load_dataset,
    read_records,
    script_counts,
    validate,
    validate_command,
)

__all__ = [
    "LANGUAGES", "LANGUAGE_TABLE", "REFUSAL_SENTENCE", "THEMES", "Chunk", "Dataset", "Issue", "Query",
    "find_dataset_files", "load_dataset", "read_records", "script_counts", "validate", "validate_command",
]
