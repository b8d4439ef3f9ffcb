"""The playground page's reads: a dataset's queries to pick from and where the dataset was loaded from."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pipeline.read.common import df


def dataset_queries(db: str | Path, dataset: str, language: str | None = None, limit: int = 500) -> pd.DataFrame:
    """Queries of a dataset to pick from (optionally one language)."""
    pred, params = ("AND language = ?", [language]) if language else ("", [])
    return df(db, "SELECT query_id, language, query, query_en, gt_response, themes, kb_refs, update_sensitive "
                  f"FROM queries WHERE dataset = ? {pred} ORDER BY language, query_id LIMIT ?",
              [dataset, *params, int(limit)])


def dataset_path(db: str | Path, dataset: str) -> str | None:
    """Where a dataset was loaded from (None if unknown)."""
    out = df(db, "SELECT path FROM datasets WHERE name = ?", [dataset])
    return None if out.empty else out.path.iloc[0]
