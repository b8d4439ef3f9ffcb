"""The style of an answer, as the arena's style control reads it (FastChat's ``add_markdown_info``): its length in
characters (tokenisers differ by script), markdown headers, list items and bold spans. One place owns the features,
their counting and the column names a comparison stores them under; the arena's rows, its derived tables, its fits
and its page all read them here. No pandas: the store imports it."""

from __future__ import annotations

import re

FEATURES = ("length", "headers", "lists", "bold")
_PATTERNS = {"headers": re.compile(r"(?m)^#{1,6}\s"), "lists": re.compile(r"(?m)^\s*(?:[-*+]|\d+[.)])\s"),
             "bold": re.compile(r"\*\*[^*\n]+\*\*")}
SIDES = ("a", "b")
COLUMNS = tuple(f"{feature}_{side}" for feature in FEATURES for side in SIDES)  # how a comparison row stores them
LABELS = {"length": "length", "headers": "headers", "lists": "list items", "bold": "bold"}


def counts(text: str | None) -> dict[str, int]:
    """A response's style elements, by feature."""
    text = text or ""
    return {"length": len(text), **{k: len(p.findall(text)) for k, p in _PATTERNS.items()}}


def of_pair(text_a: str | None, text_b: str | None) -> dict[str, int]:
    """Both responses' counts under their columns (``length_a``, ``length_b``, …)."""
    sides = {"a": counts(text_a), "b": counts(text_b)}
    return {f"{feature}_{side}": sides[side][feature] for feature in FEATURES for side in SIDES}
