"""Downloads of the tables a page shows: every ``dataframe`` drawn through ``_ui`` gets CSV and Parquet buttons
(spreadsheet-safe CSV cells). ``pages/_ui.py`` re-exports it for the pages."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from pipeline.dataset.csv_cells import frame_to_csv

_TABLES = "_ui_tables"  # the count of tables drawn in this run (their download keys)


def _arrow_ready(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with any column pyarrow cannot type (mixed objects) as text, and a plain index."""
    import pyarrow as pa

    out = frame.reset_index(drop=True)
    for col in out.columns:
        if out[col].dtype == object:
            try:
                pa.array(out[col], from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
                out[col] = out[col].map(lambda v: None if v is None else str(v))
    out.columns = [str(c) for c in out.columns]
    return out


def table_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    """A table as a CSV (UTF-8) or Parquet (pyarrow) file's bytes, its columns and rows as given; in CSV, text a
    spreadsheet would run as a formula gets a leading apostrophe (``frame_to_csv``), Parquet keeps the raw text."""
    if fmt == "csv":
        return frame_to_csv(frame).encode("utf-8")
    if fmt == "parquet":
        buffer = io.BytesIO()
        _arrow_ready(frame).to_parquet(buffer, index=False, engine="pyarrow")
        return buffer.getvalue()
    raise ValueError(f"unknown format {fmt!r}")


def downloads(frame: pd.DataFrame, name: str, *, key: str | None = None) -> None:
    """CSV and Parquet downloads of a table the page shows (the file is made when a button is clicked)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "table"
    key = key or f"dl|{stem}"
    shown = frame.copy()
    with st.container(horizontal=True):
        st.download_button("CSV", data=lambda: table_bytes(shown, "csv"), file_name=f"{stem}.csv", mime="text/csv",
                           key=f"{key}|csv", on_click="ignore", icon=":material/download:",
                           help="This table as CSV (UTF-8).")
        st.download_button("Parquet", data=lambda: table_bytes(shown, "parquet"), file_name=f"{stem}.parquet",
                           mime="application/vnd.apache.parquet", key=f"{key}|parquet", on_click="ignore",
                           icon=":material/download:", help="This table as Parquet (pandas + pyarrow).")


def dataframe(frame: Any, *args: Any, name: str | None = None, **kwargs: Any) -> Any:
    """``st.dataframe`` with the CSV and Parquet downloads of the same table below it (``downloads``). Without a
    ``name`` the files are named after the page and the table's place on it (``leaderboards-3.csv``)."""
    out = st.dataframe(frame, *args, **kwargs)
    table = getattr(frame, "data", frame) if not isinstance(frame, pd.DataFrame) else frame  # a Styler's frame
    if isinstance(table, pd.DataFrame) and not table.empty:
        n = st.session_state.get(_TABLES, 0) + 1
        st.session_state[_TABLES] = n
        page = Path(sys._getframe(1).f_code.co_filename).stem.split("_", 1)[-1]
        downloads(table, name or f"{page}-{n}", key=f"dl|{page}|{n}")
    return out
