"""The Dataset page's read model: how a dataset folder was built from raw material (``ingest-kb``,
``curate-queries``): its source documents with chunks, pages, tokens and flags, the KB's growth by update
date, the excluded messages by reason (as stored: identifiers masked), and the queries by language, script
and theme, and the pages ingest read by OCR or converted (``page_notes``). A dataset is just a folder: the one the
database says a dataset was loaded from, or any dataset folder under ``data/``, no results database needed.
Nothing here writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.dataset.curate import OUTPUT_FILES
from pipeline.dataset.ingest import REPORT_FILE
from pipeline.dataset.records import read_records
from pipeline.read.common import REPO_ROOT
from pipeline.read.playground import dataset_path

SOURCE_COLUMNS = ["file", "kind", "engine", "pages", "characters", "chunks", "tokens", "max_tokens", "flags"]
PAGE_NOTE_COLUMNS = ["file", "page", "kind", "detail", "confidence", "encoding", "language"]
FOLDER_FILES = (REPORT_FILE, "kb.jsonl", *OUTPUT_FILES)  # what makes a folder a dataset
EXCLUDED_COLUMNS = ["row", "asked_on", "reason", "detail", "text"]


def dataset_folder(db: str | Path, dataset: str) -> Path | None:
    """The folder ``dataset`` was loaded from (relative paths are the repository's), if it still exists."""
    path = dataset_path(db, dataset)
    if not path:
        return None
    folder = Path(path)
    if not folder.is_absolute() and not folder.exists():
        folder = REPO_ROOT / folder
    folder = folder if folder.is_dir() else folder.parent
    return folder if folder.is_dir() else None


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    records, _ = read_records(path)
    return [rec for _, rec in records]


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def dataset_folders(root: str | Path | None = None) -> list[str]:
    """The dataset folders under ``root`` (the repository's ``data/``): each one holding any of :data:`FOLDER_FILES`,
    by name; a dataset is just a folder, no results database needed."""
    base = Path(root) if root is not None else REPO_ROOT / "data"
    if not base.is_dir():
        return []
    return sorted(str(d.resolve()) for d in base.iterdir()  # hidden: a command's staging folder, never a dataset
                  if d.is_dir() and not d.name.startswith(".") and any((d / f).is_file() for f in FOLDER_FILES))


def folder_view(folder: str | Path | None) -> dict[str, Any]:
    """Everything the Dataset page shows of a dataset folder, as frames: ``sources``, ``page_notes`` (the pages
    ingest OCR'd, converted or flagged), ``tokens`` (one row per chunk), ``growth``, ``excluded``, ``queries``;
    ``report`` (ingest and curation summaries) and ``folder`` (None when unknown or not a folder)."""
    folder = Path(folder) if folder is not None else None
    if folder is None or not folder.is_dir():
        return {"folder": None, "sources": pd.DataFrame(columns=SOURCE_COLUMNS),
                "page_notes": pd.DataFrame(columns=PAGE_NOTE_COLUMNS), "tokens": pd.DataFrame(),
                "growth": pd.DataFrame(), "excluded": pd.DataFrame(columns=EXCLUDED_COLUMNS),
                "queries": pd.DataFrame(), "report": {}}
    kb = _rows(folder / "kb.jsonl")
    ingest_report, curate_report = _json(folder / REPORT_FILE), _json(folder / OUTPUT_FILES[-1])
    return {"folder": str(folder), "sources": _sources(ingest_report, kb), "page_notes": _page_notes(ingest_report),
            "tokens": _tokens(kb), "growth": _growth(kb), "excluded": _excluded(folder), "queries": _queries(folder),
            "report": {"ingest": {k: v for k, v in ingest_report.items() if k != "files"}, "curate": curate_report}}


def _files(report: dict[str, Any]) -> list[dict[str, Any]]:
    files = report.get("files")
    return [f for f in files if isinstance(f, dict)] if isinstance(files, list) else []


def _sources(report: dict[str, Any], kb: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per source file: from ``ingest_report.json``, else from the chunks' provenance."""
    rows = []
    for r in _files(report):
        tokens = r.get("tokens") or []
        rows.append({"file": r.get("file"), "kind": r.get("kind"), "engine": r.get("engine"), "pages": r.get("pages"),
                     "characters": r.get("characters"), "chunks": r.get("chunks"), "tokens": sum(tokens),
                     "max_tokens": max(tokens, default=0), "flags": "; ".join(r.get("flags") or [])})
    if not rows:
        frame = pd.DataFrame([{"file": c.get("source") or "", "tokens": (c.get("provenance") or {}).get("tokens")}
                              for c in kb])
        if frame.empty:
            return pd.DataFrame(columns=SOURCE_COLUMNS)
        rows = [{"file": f, "kind": "", "engine": None, "pages": None, "characters": None, "chunks": len(g),
                 "tokens": g.tokens.sum(), "max_tokens": g.tokens.max(), "flags": ""}
                for f, g in frame.groupby("file", sort=True)]
    return pd.DataFrame(rows, columns=SOURCE_COLUMNS)


def _page_notes(report: dict[str, Any]) -> pd.DataFrame:
    """The pages ingest noted (``page_notes`` of each file: OCR'd, converted from a legacy font, blank, image only,
    suspect text), with their confidence, encoding and language; empty when the report has none."""
    rows = [{"file": f.get("file"), **{k: n.get(k) for k in PAGE_NOTE_COLUMNS[1:]}}
            for f in _files(report) for n in (f.get("page_notes") or []) if isinstance(n, dict)]
    return pd.DataFrame(rows, columns=PAGE_NOTE_COLUMNS)


def _tokens(kb: list[dict[str, Any]]) -> pd.DataFrame:
    rows = [{"file": (c.get("provenance") or {}).get("source_file", c.get("source")), "chunk_id": c["chunk_id"],
             "kind": c.get("kind"), "tokens": (c.get("provenance") or {}).get("tokens")} for c in kb]
    return pd.DataFrame(rows, columns=["file", "chunk_id", "kind", "tokens"]).dropna(subset=["tokens"])


def _growth(kb: list[dict[str, Any]]) -> pd.DataFrame:
    """KB size by date: the raw chunks, then each update date's additions (cumulative)."""
    raw = sum(1 for c in kb if c.get("kind") == "raw")
    dates = pd.Series([str(c.get("updated"))[:10] for c in kb if c.get("kind") == "update" and c.get("updated")])
    if dates.empty:
        return pd.DataFrame(columns=["date", "updates", "kb_chunks"])
    per_day = dates.value_counts().sort_index()
    return pd.DataFrame({"date": pd.to_datetime(per_day.index), "updates": per_day.values,
                         "kb_chunks": raw + per_day.cumsum().values})


def _excluded(folder: Path) -> pd.DataFrame:
    rows = _rows(folder / "excluded.jsonl")
    return pd.DataFrame(rows).reindex(columns=EXCLUDED_COLUMNS) if rows else pd.DataFrame(columns=EXCLUDED_COLUMNS)


def _queries(folder: Path) -> pd.DataFrame:
    """Kept queries with language, script, themes and whether they carry a ground truth."""
    rows = []
    for name, has_gt in (("queries.jsonl", True), ("queries_without_gt.jsonl", False)):
        for q in _rows(folder / name):
            themes = q.get("themes") or []
            rows.append({"query_id": q.get("query_id"), "language": q.get("language"),
                         "script": q.get("script") or "native", "ground_truth": has_gt,
                         "themes": themes if isinstance(themes, list) else str(themes).split(";")})
    return pd.DataFrame(rows, columns=["query_id", "language", "script", "ground_truth", "themes"])
