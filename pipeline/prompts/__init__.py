"""Prompt and rubric texts, kept as files so researchers can read and change them."""

from __future__ import annotations

import functools
import json
from pathlib import Path

PROMPTS_DIR = Path(__file__).parent


@functools.cache
def load_text(name: str) -> str:
    """The text of ``pipeline/prompts/<name>``, without its trailing newline."""
    return (PROMPTS_DIR / name).read_text(encoding="utf-8").rstrip("\n")


@functools.cache
def load_json(name: str):
    """The parsed JSON of ``pipeline/prompts/<name>``."""
    return json.loads((PROMPTS_DIR / name).read_text(encoding="utf-8"))
