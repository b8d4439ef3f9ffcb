"""Human checks of Med-CoDE (§4.2 Table 1, §5.1) and the labelled-critique export.

- ``critique_sources`` / ``critique_queue``: the critiques annotators can check (a critic's, from ``critiques``;
  a teacher's, from ``labelled_critiques``) and the next one an annotator has not labelled.
- ``critique_checks``: on the human-labelled items, the accuracy of every classifier present — the fine-tuned
  checkpoint (the paper's Med-CoDE row), the critic's zero-shot ``logprobs`` and a teacher's own label (a
  zero-shot LLM: the paper's GPT-3.5 row) — with Wilson intervals, and critique accuracy (share of critiques the
  annotators call accurate).
- ``export_critiques``: labelled critiques as the training CSV of ``medcode train-classifier`` / ``train-critic``.

A human label belongs to the response text it was given on (``response_hash``); predictions are compared on
that same text. An annotator's label of an item counts once (the latest of their labels of it).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pandas as pd

from pipeline.analysis.medcode import accuracy, proportion
from pipeline.errors import UserError
from pipeline.read.common import REPO_ROOT, Filters, current_hash, items_cte
from pipeline.store import SHARED_READERS
from pipeline.store.rows import TEXT_HASH_SQL

EXPORT_COLUMNS = ("item_id", "kind", "question", "ground_truth", "response", "critique", "label", "source")
BUNDLED_CRITIQUES = REPO_ROOT / "data" / "medcode-critiques" / "critiques.csv"
FAMILY = "CASE WHEN c.classifier LIKE 'logprobs%' THEN 'logprobs' ELSE c.classifier END"
NO_LABEL = "logprobs:no-label-token"  # no label token in the top-k: the classifier gave no answer (unparsed)
KINDS = {"critic": "critic (critiques)", "teacher": "teacher (labelled critiques)"}


def _tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def _crit_cte(have: set[str]) -> str:
    """``crit``: every checkable critique — kind, author, critique text, its hash and the response hash."""
    parts = ["SELECT c.dataset, c.query_id, c.model_id, 'critic' AS kind, c.critic_id AS author, c.critique, "
             f"{TEXT_HASH_SQL.format(col='c.critique')} AS critique_hash, c.response_hash FROM critiques c "
             "WHERE c.error IS NULL AND c.critique <> ''"]
    if "labelled_critiques" in have:
        parts.append("SELECT l.dataset, l.query_id, l.model_id, 'teacher', l.source, l.critique, "
                     f"{TEXT_HASH_SQL.format(col='l.critique')}, l.response_hash FROM labelled_critiques l "
                     "WHERE l.critique <> ''")
    return "crit AS (" + " UNION ALL ".join(parts) + ")"


def critique_sources(db: str | Path, f: Filters) -> pd.DataFrame:
    """The critique sources in the filters' items (current responses): ``kind``, ``author``, ``n``."""
    items, p_items = items_cte(f)
    with SHARED_READERS.cursor(db) as con:
        have = _tables(con)
        return con.execute(
            f"WITH {items}, {_crit_cte(have)} SELECT k.kind, k.author, count(*) AS n FROM crit k JOIN items i "
            "USING (dataset, query_id, model_id) JOIN responses r USING (dataset, query_id, model_id) "
            f"WHERE k.response_hash = {current_hash(db)} GROUP BY ALL ORDER BY k.kind, k.author", p_items).df()


def critique_queue(db: str | Path, f: Filters, annotator: str, kind: str, by: str,
                   skip: tuple[str, ...] = ()) -> tuple[int, int, pd.DataFrame]:
    """(labelled, total, next item) for an annotator checking the critiques of one source.

    Items: current responses in the filters with a critique of that source; labelled = the annotator has a
    ``critique_labels`` row for that very critique text. The next item is the first unlabelled, unskipped one
    in a fixed shuffled order, with its question, ground truth, response and critique.
    """
    items, p_items = items_cte(f)
    with SHARED_READERS.cursor(db) as con:
        have = _tables(con)
        labelled = ("EXISTS (SELECT 1 FROM critique_labels h WHERE h.dataset = k.dataset AND h.query_id = k.query_id "
                    "AND h.model_id = k.model_id AND h.critique_kind = k.kind AND h.critique_by = k.author "
                    "AND h.annotator = ? AND h.critique_hash = k.critique_hash)"
                    if "critique_labels" in have else "(FALSE AND ? IS NULL)")
        base = (f"WITH {items}, {_crit_cte(have)}, todo AS (SELECT k.*, i.language, {labelled} AS done FROM crit k "
                "JOIN items i USING (dataset, query_id, model_id) JOIN responses r "
                f"USING (dataset, query_id, model_id) WHERE k.kind = ? AND k.author = ? "
                f"AND k.response_hash = {current_hash(db)}) ")
        params = [*p_items, annotator, kind, by]
        done, total = con.execute(base + "SELECT count(*) FILTER (WHERE done), count(*) FROM todo", params).fetchone()
        queue = con.execute(
            base + "SELECT t.dataset, t.query_id, t.model_id, t.language, t.kind, t.author, q.query, q.query_en, "
            "q.gt_response, r.text, t.critique, t.critique_hash, t.response_hash FROM todo t "
            "JOIN queries q USING (dataset, query_id) JOIN responses r USING (dataset, query_id, model_id) "
            "WHERE NOT t.done AND NOT list_contains(?::VARCHAR[], t.query_id || '|' || t.model_id) "
            "ORDER BY hash(t.query_id || '|' || t.model_id), t.query_id, t.model_id LIMIT 1",
            [*params, list(skip)]).df()
    return int(done), int(total), queue


def critique_checks(db: str | Path, f: Filters) -> dict[str, pd.DataFrame]:
    """``table1``: per classifier on the human-labelled items — ``classifier`` (critic + classifier tag, or
    teacher), ``kind``, ``n`` (pairs with both labels), ``correct``, ``accuracy``, ``lo``, ``hi`` (Wilson 95 %),
    ``unparsed`` (items the classifier left without a label); ``critique_accuracy``: per critique source
    ``n``, ``accurate``, ``share``, ``lo``, ``hi``; ``pairs``: the (human, predicted) labels compared."""
    items, p_items = items_cte(f)
    with SHARED_READERS.cursor(db) as con:
        have = _tables(con)
        if "critique_labels" not in have:
            return {"table1": _table1(pd.DataFrame()), "critique_accuracy": _critique_accuracy(pd.DataFrame()),
                    "pairs": pd.DataFrame()}
        human = (f"WITH {items}, h AS (SELECT h.dataset, h.query_id, h.model_id, h.annotator, "
                 "arg_max(h.label, h.created_at) AS human, arg_max(h.response_hash, h.created_at) AS response_hash "
                 "FROM critique_labels h JOIN items i USING (dataset, query_id, model_id) WHERE h.label IS NOT NULL "
                 "GROUP BY ALL) ")
        teacher = ("UNION ALL SELECT h.*, 'teacher' AS kind, 'teacher: ' || l.source AS classifier, l.label "
                   "FROM h JOIN labelled_critiques l USING (dataset, query_id, model_id, response_hash) "
                   if "labelled_critiques" in have else "")
        pairs = con.execute(
            human + f"SELECT h.*, {FAMILY} AS kind, c.critic_id || ' · ' || {FAMILY} AS classifier, "
            f"CASE WHEN c.classifier = '{NO_LABEL}' THEN NULL ELSE c.label END AS label "
            "FROM h JOIN critiques c USING (dataset, query_id, model_id, response_hash) " + teacher
            + "ORDER BY classifier, dataset, query_id, model_id, annotator", p_items).df()
        checked = con.execute(
            f"WITH {items}, {_crit_cte(have)} SELECT h.critique_kind AS kind, h.critique_by AS author, "
            "count(*) AS n, count(*) FILTER (WHERE h.critique_accurate) AS accurate FROM critique_labels h "
            "JOIN items i USING (dataset, query_id, model_id) JOIN crit k ON k.dataset = h.dataset "
            "AND k.query_id = h.query_id AND k.model_id = h.model_id AND k.kind = h.critique_kind "
            "AND k.author = h.critique_by AND k.critique_hash = h.critique_hash "
            "WHERE h.critique_accurate IS NOT NULL GROUP BY ALL ORDER BY kind, author", p_items).df()
    return {"table1": _table1(pairs), "critique_accuracy": _critique_accuracy(checked), "pairs": pairs}


def classifier_role(kind: str) -> str:
    if kind == "teacher":
        return "zero-shot LLM: the teacher's own label (the paper's GPT-3.5 row)"
    if kind == "logprobs":
        return "zero-shot: the critic's label-token log-probabilities (not the paper's method)"
    return "fine-tuned classifier (Med-CoDE's row)" if kind.startswith("checkpoint:") else kind


def _table1(pairs: pd.DataFrame) -> pd.DataFrame:
    cols = ["classifier", "kind", "n", "correct", "accuracy", "lo", "hi", "unparsed"]
    if pairs.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for (name, kind), part in pairs.groupby(["classifier", "kind"], sort=True):
        a = accuracy(part.human.tolist(), part.label.tolist())
        rows.append({"classifier": name, "kind": classifier_role(kind), **{c: a[c] for c in cols[2:]}})
    return pd.DataFrame(rows, columns=cols)


def _critique_accuracy(checked: pd.DataFrame) -> pd.DataFrame:
    cols = ["critique_source", "n", "accurate", "share", "lo", "hi"]
    rows = []
    for r in checked.itertuples(index=False):
        p = proportion(int(r.accurate), int(r.n))
        rows.append({"critique_source": f"{KINDS.get(r.kind, r.kind)}: {r.author}", "n": p["n"], "accurate": p["k"],
                     "share": p["value"], "lo": p["lo"], "hi": p["hi"]})
    return pd.DataFrame(rows, columns=cols)


# -- the training CSV ------------------------------------------------------------------------------------
def labelled_rows(db: str | Path, source: str | None = None) -> tuple[pd.DataFrame, dict[str, int]]:
    """Labelled critiques as training rows (``EXPORT_COLUMNS``) and what was left out: ``unparsed`` (label NULL),
    ``empty`` (no critique), ``stale`` (the response was regenerated or removed since it was labelled)."""
    where, params = ("WHERE l.source = ?", [source]) if source else ("", [])
    with SHARED_READERS.cursor(db) as con:
        if "labelled_critiques" not in _tables(con):
            raise UserError(f"{db}: no labelled critiques (run `python -m pipeline medcode label --config F` first)")
        frame = con.execute(
            "SELECT l.dataset, l.query_id, l.model_id, l.source, l.critique, l.label, q.query, q.query_en, "
            "q.gt_response, r.text AS response, d.closed_book, "
            f"r.query_id IS NOT NULL AND r.error IS NULL AND l.response_hash = {current_hash(db)} AS current "
            "FROM labelled_critiques l JOIN queries q USING (dataset, query_id) "
            "LEFT JOIN datasets d ON d.name = l.dataset LEFT JOIN responses r USING (dataset, query_id, model_id) "
            f"{where} ORDER BY l.dataset, l.query_id, l.model_id, l.source", params).df()
    counts = {"labelled": len(frame), "unparsed": int(frame.label.isna().sum())}
    counts["empty"] = int((frame.label.notna() & (frame.critique.fillna("").str.strip() == "")).sum())
    counts["stale"] = int((frame.label.notna() & (frame.critique.fillna("").str.strip() != "") & ~frame.current).sum())
    keep = frame[frame.label.notna() & (frame.critique.fillna("").str.strip() != "") & frame.current]
    question = [q if not isinstance(en, str) or not en else f"{q} (in English: {en})"  # as the critic sees it
                for q, en in zip(keep["query"], keep.query_en, strict=True)]
    out = pd.DataFrame({
        "item_id": keep.dataset + "/" + keep.query_id + "/" + keep.model_id + "@" + keep.source,
        "kind": ["closed_book" if cb else "rag" for cb in keep.closed_book.fillna(False)],
        "question": question, "ground_truth": keep.gt_response, "response": keep.response,
        "critique": keep.critique.str.strip(), "label": keep.label, "source": keep.source}, columns=EXPORT_COLUMNS)
    counts["exported"] = len(out)
    return out.reset_index(drop=True), counts


def export_critiques(db: str | Path, out: str | Path, *, with_bundled: bool = False,
                     source: str | None = None) -> dict[str, int]:
    """Write the training CSV (``EXPORT_COLUMNS``, the bundled file's layout) from ``labelled_critiques``, plus the
    bundled ``data/medcode-critiques`` rows with ``with_bundled``; returns the counts (``labelled_rows``' and
    ``bundled``). Written to a temporary file and renamed into place."""
    db, out = Path(db), Path(out)
    if not db.is_file():
        raise UserError(f"{db}: no results database here")
    rows, counts = labelled_rows(db, source)
    bundled: list[dict[str, str]] = []
    if with_bundled:
        with BUNDLED_CRITIQUES.open(encoding="utf-8-sig", newline="") as fh:
            bundled = [{c: (r.get(c) or "") for c in EXPORT_COLUMNS} for r in csv.DictReader(fh)]
    counts["bundled"] = len(bundled)
    if not len(rows) and not bundled:
        raise UserError(f"{db}: no labelled critique to export ({counts['unparsed']} unparsed, {counts['empty']} "
                        f"empty, {counts['stale']} of regenerated responses)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=EXPORT_COLUMNS)
        writer.writeheader()
        writer.writerows(bundled)
        writer.writerows(rows.to_dict("records"))
    os.replace(tmp, out)
    return counts
