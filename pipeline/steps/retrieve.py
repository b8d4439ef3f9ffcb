"""Retrieval: a LanceDB table of KB chunks, MiniLM vectors + BM25 full-text, fused (hybrid).

Every query is retrieved once and the chunk ids are stored, so every model sees identical
chunks (Health-Pariksha §3.4). Non-English queries search with their English rendering, as the
HealthBot translated before RAG. As the paper (§3.2, §3.4): the top 3 chunks over the whole KB,
then split into raw chunks and KB updates, updates latest first (``RetrievalConfig``); a query sees the KB as it
stood when it was asked (``Dataset.hidden_for``: updates approved strictly before ``asked_on``, never one made from
its own message).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import RetrievalConfig
from pipeline.dataset import Dataset, Query
from pipeline.models.embedder import get_embedder
from pipeline.steps.context import RunContext
from pipeline.steps.spec import Step
from pipeline.store.rows import RetrievalRow


@dataclass(frozen=True)
class Retrieval:
    query_id: str
    search_text: str
    raw_ids: tuple[str, ...]
    update_ids: tuple[str, ...]
    recall: float | None  # share of kb_refs among the retrieved chunks; None when kb_refs is empty


def index_dir_for(db_path: str | Path) -> Path:
    """The LanceDB folder that sits beside a results database."""
    db_path = Path(db_path)
    return db_path.with_name(db_path.stem + ".lancedb")


def table_name(dataset: Dataset) -> str:
    """The LanceDB table of a dataset's KB: ``kb_<name>_<content hash>``, the name cut to the letters LanceDB allows
    in a table name (a folder called ``cataract v2`` or ``o'brien set`` is a valid dataset)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", dataset.name).strip("-.") or "dataset"
    return f"kb_{slug[:60]}_{dataset.content_hash()[:12]}"


class KBIndex:
    """The LanceDB table of one dataset's KB; rebuilt only when the KB's content changes."""

    def __init__(self, index_dir: str | Path, dataset: Dataset):
        # lance's Rust logger warns on every search; lancedb reads LANCEDB_LOG, lance LANCE_LOG
        os.environ.setdefault("LANCEDB_LOG", "error")
        os.environ.setdefault("LANCE_LOG", "error")
        import lancedb

        self.dataset = dataset
        self.chunks = {c.chunk_id: c for c in dataset.chunks}
        self.table_name = table_name(dataset)
        self._db = lancedb.connect(str(index_dir))
        if self.table_name in self._db.list_tables().tables:
            self.table = self._db.open_table(self.table_name)
        else:
            self.table = self._build()

    def _build(self):
        from lancedb.index import FTS

        chunks = self.dataset.chunks
        vectors = get_embedder().encode([f"{c.title}\n{c.text}" for c in chunks])
        rows = [
            {"chunk_id": c.chunk_id, "kind": c.kind, "title": c.title, "text": f"{c.title}\n{c.text}",
             "vector": vectors[i].tolist()}
            for i, c in enumerate(chunks)
        ]
        table = self._db.create_table(self.table_name, rows, mode="overwrite")
        table.create_index("text", config=FTS())
        return table

    def search(self, text: str, *, k: int, kind: str | None = None, hidden: frozenset[str] = frozenset(),
               hybrid: bool = True) -> list[str]:
        """Top-``k`` chunk ids for ``text`` (of ``kind`` if given, never one in ``hidden``): hybrid (vector +
        BM25, fused by reciprocal rank) or vector only."""
        if k <= 0:
            return []
        vector = get_embedder().encode([text])[0].tolist()
        preds = [] if kind is None else [f"kind = {_sql_literal(kind)}"]
        if hidden:
            preds.append(f"chunk_id NOT IN ({', '.join(_sql_literal(c) for c in sorted(hidden))})")
        if hybrid:
            query = self.table.search(query_type="hybrid").vector(vector).text(text)
        else:
            query = self.table.search(vector, query_type="vector")
        if preds:
            query = query.where(" AND ".join(preds), prefilter=True)
        return [r["chunk_id"] for r in query.limit(k).to_list()]

    def retrieve(self, query: Query, settings: RetrievalConfig) -> Retrieval:
        """The query's chunks under ``settings`` (see RetrievalConfig), with the KB as of the query's date;
        raw chunks in rank order, updates latest first."""
        text = query.search_text
        hidden = self.dataset.hidden_for(query)
        if settings.split == "by_kind":
            ranked = self.search(text, k=settings.top_k, hidden=hidden, hybrid=settings.hybrid)
            raw = [c for c in ranked if self.chunks[c].kind == "raw"]
            updates = [c for c in ranked if self.chunks[c].kind == "update"]
        else:
            raw = self.search(text, kind="raw", k=settings.top_k, hidden=hidden, hybrid=settings.hybrid)
            updates = self.search(text, kind="update", k=settings.top_k_updates, hidden=hidden,
                                  hybrid=settings.hybrid)
        updates.sort(key=lambda cid: self.chunks[cid].updated.isoformat() if self.chunks[cid].updated else "",
                     reverse=True)
        refs = set(query.kb_refs)
        recall = len(refs & (set(raw) | set(updates))) / len(refs) if refs else None
        return Retrieval(query.query_id, text, tuple(raw), tuple(updates), recall)


def _sql_literal(value: str) -> str:
    """A string literal for LanceDB's filter SQL (single quotes doubled)."""
    return "'" + value.replace("'", "''") + "'"


# -- the step ---------------------------------------------------------------------------------------
async def step_retrieve(ctx: RunContext) -> None:
    """Retrieve once per query and store the chunk ids with the KB they came from (closed-book datasets skip this).

    A query is retrieved again when its stored retrieval used other settings or another KB (``Dataset.kb_hash``:
    a document added, changed or removed since); generation then asks again where the chunks in the prompt changed
    (its prompt hash), and the scores follow the new answers (their response hash)."""
    if ctx.dataset.closed_book:
        return
    settings = ctx.config.retrieval.model_dump_json()
    kb_hash = ctx.dataset.kb_hash
    stored = {qid: h for qid, h in ctx.store.fetch(
        "SELECT query_id, kb_hash FROM retrievals WHERE dataset = ? AND settings = ?", [ctx.dataset_name, settings])}
    todo = [q for q in ctx.queries if q.query_id not in stored or stored[q.query_id] != kb_hash]
    if older := sorted({stored[q.query_id] or "unrecorded" for q in todo if q.query_id in stored}):
        again = sum(q.query_id in stored for q in todo)
        ctx.console.print(f"retrieve: the knowledge base of {ctx.dataset_name} is now {kb_hash} (was "
                          f"{', '.join(older)} when {again} of these queries were retrieved): retrieving them again; "
                          "answers whose chunks changed are generated and scored again", highlight=False,
                          soft_wrap=True)
    started = time.perf_counter()
    if todo:
        task = ctx.progress.add_task(f"retrieve (LanceDB, {ctx.config.retrieval.split})", total=len(todo))
        index = await asyncio.to_thread(KBIndex, index_dir_for(ctx.store.path), ctx.dataset)
        rows = []
        for q in todo:
            r = await asyncio.to_thread(index.retrieve, q, ctx.config.retrieval)
            rows.append(RetrievalRow(dataset=ctx.dataset_name, query_id=q.query_id, search_text=r.search_text,
                                     raw_ids=list(r.raw_ids), update_ids=list(r.update_ids), recall=r.recall,
                                     settings=settings, kb_hash=kb_hash))
            ctx.progress.advance(task)
        ctx.write(rows)
    ctx.note("retrieve", "lancedb", items=len(todo), skipped=len(ctx.queries) - len(todo),
             wall_s=time.perf_counter() - started)


STEP = Step(run=step_retrieve, rows=(RetrievalRow,), retrieves=True)
