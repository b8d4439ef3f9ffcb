"""The options several CLI commands share, declared once (``pipeline/cli.py``, ``pipeline/cli_arena.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

RESULTS_DB = Path("data/results.duckdb")  # the results database a command reads or writes unless --db names one
DbOption = Annotated[Path, typer.Option(help="DuckDB file")]
CsvDatasetOption = Annotated[str | None, typer.Option(help="dataset name when the CSV has no dataset column")]
