"""CSV cells a spreadsheet will not run: OWASP's rule against CSV (formula) injection, for the CSV files the studio
writes (``export --format csv``, the dashboard's CSV downloads, the human-evaluation plan).

A text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is a formula to Excel,
LibreOffice and Google Sheets (``=cmd|' /C calc'!A0``, ``=HYPERLINK(...)``); model answers and patient queries are
text anyone can make start that way. Such a cell is written with a leading apostrophe, which spreadsheets show as
text. Numbers (``-0.5`` as a number) and every other cell are written as they are; Parquet files keep the raw text.
"""

from __future__ import annotations

import csv
from typing import Any

import duckdb
import pandas as pd

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
SQL_FUNCTION = "csv_cell"


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV cell: text that a spreadsheet would read as a formula gets a leading apostrophe."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_START) else value


def uncell(value: str) -> str:
    """A cell as :func:`csv_cell` wrote it, read back: the apostrophe put before a formula's first character is
    taken off (``'=cmd`` → ``=cmd``); every other text is as it is. (Text that itself began with an apostrophe and
    a formula character cannot be told apart and loses the apostrophe.)"""
    return value[1:] if value.startswith("'") and value[1:].startswith(FORMULA_START) else value


def csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` ready for ``to_csv``: every text cell and column name through :func:`csv_cell`."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(csv_cell)
    out.columns = [csv_cell(c) for c in out.columns]
    return out


def frame_to_csv(frame: pd.DataFrame) -> str:
    """``frame`` as CSV text: cells through :func:`csv_frame`, every text cell quoted (pandas leaves a bare carriage
    return unquoted, which a spreadsheet reads as a new row)."""
    return csv_frame(frame).to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC)


def register(con: duckdb.DuckDBPyConnection) -> None:
    """Make :func:`csv_cell` the SQL function ``csv_cell(VARCHAR)`` of ``con`` (for ``COPY ... (FORMAT CSV)``)."""
    con.create_function(SQL_FUNCTION, csv_cell, [duckdb.sqltype("VARCHAR")], duckdb.sqltype("VARCHAR"))
