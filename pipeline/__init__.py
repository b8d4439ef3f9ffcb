"""Pariksha Studio backend: dataset → retrieve → generate → score → store (DuckDB)."""

__version__ = "0.1.0"
