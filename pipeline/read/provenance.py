"""Which prompt a stored response came from: the dataset's own prompt files or the studio's, and its hash.

A response stores the hash of the exact messages its model was sent (``responses.prompt_hash``,
``pipeline.steps.generate.prompt_hash``). Here the prompt is rebuilt from what the store holds —
the query, its stored retrieval's chunks — with the prompt files the dataset folder has now
(``Dataset.prompt_text``: its own ``prompts/<file>`` first, else the studio's). When the rebuilt hash
equals the stored one, the rebuilt messages are exactly what the model saw; when it differs, a prompt
file or the chunks changed since the response was generated (a rerun regenerates it).

Playground answers (dataset ``playground``) were answered with another dataset's knowledge base and
prompt; they are not rebuilt. Nothing here writes; files are only read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.dataset import Chunk, Dataset, Query
from pipeline.dataset.format import Turn
from pipeline.dataset.loader import PROMPTS_SUBDIR
from pipeline.dataset.records import dataset_folder
from pipeline.prompts import PROMPTS_DIR
from pipeline.read.common import REPO_ROOT
from pipeline.store.schema import PLAYGROUND

COLUMNS = ["query_id", "model_id", "prompt_hash", "rebuilt_hash", "matches", "own_files", "studio_files",
           "folder", "messages", "note"]


@dataclass(frozen=True)
class _Prompts:
    """What ``build_messages`` reads of a dataset: its prompt files and whether it is closed-book."""

    dataset: Dataset
    closed_book: bool

    def prompt_text(self, name: str) -> str:
        return self.dataset.prompt_text(name)

    def prompt_path(self, name: str) -> Path:
        return self.dataset.prompt_path(name)


def find_folder(path: str | None) -> Path | None:
    """The dataset folder a stored ``datasets.path`` names, relative to the cwd or this repository."""
    if not path:
        return None
    for base in (Path.cwd(), REPO_ROOT):
        folder = dataset_folder(base / path)
        if folder is not None:
            return folder.resolve()
    return None


def prompt_files(closed_book: bool, *, options: bool, messages: bool) -> list[str]:
    """The prompt files a generation request of such an item reads (``pipeline.steps.generate.build_messages``)."""
    files = ["closed_book_system.txt"] if closed_book else ["generation_system.txt"]
    if not closed_book:
        files.append("generation_user.txt")
    elif not messages:
        files.append("closed_book_user.txt")
    if options:
        files.append("multiple_choice.txt")
    return files


def _as_date(value: Any) -> Any:
    return None if value is None or pd.isna(value) else pd.Timestamp(value).date()


def _chunks(rows: pd.DataFrame, slot: str) -> list[Chunk]:
    mine = rows[rows.slot == slot].sort_values("pos")
    return [Chunk.model_construct(chunk_id=r.chunk_id, kind=r.kind, title=r.title, text=r.text, source=r.source,
                                  updated=_as_date(r.updated)) for r in mine.itertuples()]


def _query(item: Any) -> Query:
    """The stored query as ``build_messages`` reads it (no validation: it was validated when loaded)."""
    options = json.loads(item.options) if isinstance(item.options, str) and item.options else None
    turns = json.loads(item.messages) if isinstance(item.messages, str) and item.messages else None
    messages = [Turn.model_construct(**t) for t in turns] if turns else None
    return Query.model_construct(query_id=item.query_id, language=item.language, query=item.query,
                                 options=options, messages=messages)


def prompt_provenance(dataset: str, source: tuple[str | None, bool] | None, page: pd.DataFrame,
                      chunks: pd.DataFrame) -> pd.DataFrame:
    """Per response of ``page`` (query_id, model_id, language, query, options, messages, prompt_hash): the prompt
    files it used (``own_files`` from the dataset's ``prompts/`` folder, ``studio_files``), the rebuilt
    ``messages`` and their hash, and whether it ``matches`` the stored one (None when not rebuilt; ``note`` says
    why). ``source``: the dataset's stored (path, closed_book); ``chunks``: its queries' retrieved chunks
    (``responses._retrieved_chunks``)."""
    from pipeline.steps.generate import build_messages, prompt_hash, sent_as_is

    rows: list[dict[str, Any]] = []
    path, closed_book = source if source is not None else (None, False)
    folder = find_folder(path) if dataset != PLAYGROUND else None
    prompts = _Prompts(Dataset(name=dataset, path=folder), bool(closed_book)) if folder is not None else None
    for item in page.itertuples():
        stored = item.prompt_hash if isinstance(item.prompt_hash, str) and item.prompt_hash else None
        files = [] if prompts is not None and sent_as_is(_query(item), prompts) else prompt_files(
            bool(closed_book), options=isinstance(item.options, str) and bool(item.options),
            messages=isinstance(item.messages, str) and bool(item.messages))
        row: dict[str, Any] = {"query_id": item.query_id, "model_id": item.model_id, "prompt_hash": stored,
                               "rebuilt_hash": None, "matches": None, "own_files": [], "studio_files": files,
                               "folder": None, "messages": None, "note": ""}
        if dataset == PLAYGROUND:
            row.update(studio_files=[], note="a playground answer: the prompt of the knowledge base it was asked "
                                             "against (its files are not recorded here)")
        elif prompts is None:
            row.update(studio_files=[], note=f"{path!r} is not a dataset folder on this machine: which prompt "
                                             "files it had cannot be told")
        else:
            own_dir = folder / PROMPTS_SUBDIR
            own = [f for f in files if prompts.dataset.prompt_path(f).parent != PROMPTS_DIR]
            row.update(own_files=own, studio_files=[f for f in files if f not in own],
                       folder=str(own_dir) if own else str(PROMPTS_DIR))
            mine = chunks[chunks.query_id == item.query_id] if not chunks.empty else chunks
            try:
                messages = build_messages(_query(item), _chunks(mine, "raw"), _chunks(mine, "update"), prompts)
            except (KeyError, ValueError, TypeError, IndexError, OSError) as exc:
                row["note"] = f"the prompt could not be rebuilt: {type(exc).__name__}: {exc}"
            else:
                rebuilt = prompt_hash(messages)
                row.update(rebuilt_hash=rebuilt, messages=list(messages),
                           matches=None if stored is None else rebuilt == stored)
                if stored is None:
                    row["note"] = "no prompt hash stored with this response"
                elif rebuilt != stored:
                    row["note"] = ("the prompt these files and chunks give now differs from the one the model was "
                                   "sent: a prompt file or the retrieval changed since (a rerun regenerates it)")
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def describe(row: Any) -> str:
    """One line for a page: the prompt's hash and where its files came from."""
    stored = row.prompt_hash or "(none stored)"
    parts = [f"Prompt {stored}"]
    if row.own_files:
        parts.append(f"the dataset's own {', '.join(row.own_files)} ({row.folder})")
    if row.studio_files:
        parts.append(f"the studio's {', '.join(row.studio_files)}")
    if row.folder is not None and not row.own_files and not row.studio_files:
        parts.append("the item's own conversation, sent as it is (no prompt file)")
    line = " · ".join(parts)
    if row.matches:
        line += " · matches the prompt these files give now"
    return line + (f" · {row.note}" if row.note else "")


def messages_text(messages: Sequence[dict[str, str]] | None) -> str:
    """Prompt messages as plain text, one block per turn."""
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages or ())
