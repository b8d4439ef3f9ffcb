"""Synthetic datasets and configs for load, fault and security tests (no model needed to make them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

TOPICS = ("eye drops", "bathing", "reading", "driving", "sleeping on my side", "cooking", "prayer at the temple",
          "watching TV", "bending to pick things up", "travelling by bus")


def write_closed_book(folder: Path, n: int, *, prefix: str = "q", rubric: list[dict[str, Any]] | None = None) -> Path:
    """A closed-book dataset (``queries.jsonl`` only) of ``n`` distinct English queries, each with ``rubric``
    (HealthBench criteria: criterion, points, tags) when given; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(n):
            topic = TOPICS[i % len(TOPICS)]
            fh.write(json.dumps({
                "query_id": f"{prefix}{i:05d}", "language": "en",
                "query": f"Question {i}: after my cataract operation, when can I start {topic} again?",
                "query_en": None,
                "gt_response": f"You can usually resume {topic} within a week; ask your doctor at the follow-up.",
                "themes": [], "kb_refs": [], "update_sensitive": False, **({"rubric": rubric} if rubric else {}),
            }) + "\n")
    return folder


def write_config(path: Path, *, dataset: Path, db: Path, models: list[dict[str, Any]], **fields: Any) -> Path:
    """A run configuration YAML for ``models`` on ``dataset`` into ``db``; returns its path."""
    config = {"name": path.stem, "dataset": str(dataset), "db": str(db), "models": models, **fields}
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def answered_db(folder: Path, n: int = 3, *, name: str = "results.duckdb") -> Path:
    """A results database in ``folder`` with ``n`` answers of an OpenAI-compatible endpoint (the fixture server)
    to a closed-book dataset ``qa``, stored by the pipeline's generate stage."""
    import io

    from rich.console import Console

    from pipeline.config import load_config
    from pipeline.runner import run
    from tests.support.openai_fixture import FixtureServer

    dataset = write_closed_book(folder / "qa", n)
    db = folder / name
    with FixtureServer(latency_s=0.01) as server:
        config = write_config(folder / "run.yaml", dataset=dataset, db=db, models=[
            {"id": "openai-compatible/fixture", "base_url": server.base_url, "timeout": 5.0, "max_retries": 0}])
        run(load_config(config), stages="generate", console=Console(file=io.StringIO()))
    return db
