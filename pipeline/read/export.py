"""``python -m pipeline export``: every results table as Parquet (or CSV) files, for notebooks and papers.

One file per table of the schema it is given (the catalog's: the store's tables and every step's own; ``llm_cache``
only with ``with_cache``: it holds every prompt and is the largest), each written by DuckDB itself
(``COPY (SELECT …) TO … (FORMAT …)``, rows in key order) from one read-only connection, so every file comes from
the same state of the database. Tables that record a ``run_id`` gain the run's provenance (``run_config_hash``,
``run_code_revision``) and what the run recorded about the model in the row's role (``<role>_provenance``:
weights file, sha256, endpoint, engine; ``<role>_sha256``: the weights file's hash where there is one);
scores of a response gain ``response_prompt_hash``: the prompt hash of the generation they scored (NULL when
the response has been regenerated since). Beside the files: ``manifest.json`` (per table its file, rows,
columns with types, provenance columns and the file's sha256) and ``README.txt`` (what each file is). In CSV
files, text cells a spreadsheet would run as formulas get a leading apostrophe (``pipeline.dataset.csv_cells``).

Everything is written into a temporary folder beside ``out`` and renamed into place at the end, so an
interrupted export leaves no half-written folder. ``force`` replaces an earlier export in ``out``: only the files
its manifest lists; anything the user added to the folder stays. A run writing to the same database waits while the
export holds its read-only connection (up to a minute): export a finished database.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from pipeline.dataset.csv_cells import SQL_FUNCTION
from pipeline.dataset.csv_cells import register as register_csv_cell
from pipeline.errors import UserError
from pipeline.store import open_connection
from pipeline.store.schema import SCHEMA, Schema

FORMATS = ("parquet", "csv")
CACHE_TABLE = "llm_cache"
# table -> (model column, role) whose run-recorded provenance is joined in, for tables with a run_id
ROLES = {"responses": ("model_id", "model"), "judgments": ("judge_id", "judge"), "critiques": ("critic_id", "critic"),
         "answer_checks": ("checker_id", "checker"), "judge_reliability": ("judge_id", "judge"),
         "rubric_grades": ("grader_id", "grader")}
RESPONSE_KEY = ("dataset", "query_id", "model_id")
ABOUT = {
    "datasets": "each dataset loaded: path, closed-book or not, query and chunk counts, content hash, kb_hash (its "
                "knowledge base as the latest run saw it)",
    "queries": "the patient queries: language, text, English rendering, ground truth, themes, kb_refs and the "
               "optional fields (asked_on, script, variant_of, options, answer, rubric, messages as JSON text); a "
               "generated variant's kind and how it was made (variant_kind, variant_made: `pipeline variants`)",
    "kb_chunks": "the knowledge-base chunks (raw and update) every prompt was built from",
    "retrievals": "per query the ordered raw and update chunk ids every model saw, with the retrieval settings and "
                  "kb_hash, the knowledge base they were retrieved from",
    "runs": "every run: its full config (JSON), config hash, code revision, model files, times, status, calls, "
            "cache hits, errors and the per-stage summary (JSON: calls, cache hits, tokens)",
    "responses": "each model's answer to each query: text, error, latency, prompt and completion tokens, "
                 "whether it came from the cache, the hash of the exact prompt, kb_hash (the knowledge base of its "
                 "chunks; empty for closed-book datasets and answers stored before results recorded it)",
    "judgments": "the LLM judge's score (0-2, NULL when unparseable) per response, metric and sample, with its "
                 "justification and raw output; response_hash ties it to the text it judged",
    "lexical_scores": "ROUGE-L, chrF++, BLEU, METEOR and embedding cosine of each response against the ground truth",
    "critiques": "Med-CoDE: the critic's critique of each response and the classifier's disagreement distribution "
                 "(p_none, p_low, p_moderate, p_high) and label",
    "safety_checks": "per response the safety checks (refusal, over-refusal, update adherence, prompt echo)",
    "human_labels": "human scores per response and metric, by annotator",
    "judge_sanity": "the judge's scores of known-good and known-bad answers (its sanity set)",
    "judge_reliability": "per judge and metric the discrimination AUC on the sanity set",
    "translations": "machine renderings into English of queries (model_id '') and of responses (never scored)",
    "annotation_plans": "human-evaluation plans: which items annotators label",
    "answer_checks": "answer accuracy: the parsed option of multiple-choice items, and an LLM checker's verdict",
    "llm_cache": "every LLM call's request and completion, with tokens (content-addressed by key)",
    "meta": "database metadata (schema version)",
    "item_scores": "derived: per judged item (response x judge) each metric's mean over its parsed samples, current "
                   "response texts only, with its query's language and script",
    "response_facts": "derived: per response its error flag and current lexical scores and safety-check outcomes",
}


def _columns(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for table, column in con.execute("SELECT table_name, column_name FROM information_schema.columns "
                                     "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position").fetchall():
        out.setdefault(table, []).append(column)
    return out


def _provenance(table: str, have: dict[str, list[str]]) -> tuple[list[str], list[str], list[str]]:
    """(select items, joins, names) of the provenance columns ``table`` lacks and the database can give."""
    cols = set(have.get(table, ()))
    items: list[tuple[str, str]] = []
    joins: list[str] = []
    runs = set(have.get("runs", ()))
    if "run_id" in cols and {"run_id", "config_hash", "code_revision"} <= runs:
        joins.append("LEFT JOIN runs r ON r.run_id = t.run_id")
        items += [("run_config_hash", "r.config_hash"), ("run_code_revision", "r.code_revision")]
        model_col, role = ROLES.get(table, (None, None))
        if model_col in cols and "model_files" in runs:
            path = f"'$.' || to_json(t.{model_col})"  # a quoted key, quotes and backslashes in the id escaped
            items += [(f"{role}_provenance", f"json_extract(r.model_files, {path})::VARCHAR"),
                      (f"{role}_sha256", f"json_extract_string(r.model_files, {path} || '.sha256')")]
    scored = {*RESPONSE_KEY, "response_hash"}
    if table != "responses" and scored <= cols and scored | {"prompt_hash"} <= set(have.get("responses", ())):
        on = " AND ".join(f"g.{c} = t.{c}" for c in (*RESPONSE_KEY, "response_hash"))
        joins.append(f"LEFT JOIN responses g ON {on}")
        items.append(("response_prompt_hash", "g.prompt_hash"))
    items = [(name, sql) for name, sql in items if name not in cols]
    return [f"{sql} AS {name}" for name, sql in items], joins, [name for name, _ in items]


def _select(table: str, have: dict[str, list[str]], schema: Schema) -> tuple[str, list[str]]:
    items, joins, provenance = _provenance(table, have)
    key = [c for c in schema.tables[table].key if c in have[table]]
    order = f" ORDER BY {', '.join(f't.{c}' for c in key)}" if key else ""
    return f"SELECT {', '.join(['t.*', *items])} FROM {table} t {' '.join(joins)}{order}", provenance


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_tables(tables: str | None, with_cache: bool, schema: Schema = SCHEMA) -> list[str] | None:
    """The ``--tables`` list, checked against ``schema`` (None = every table)."""
    if not tables:
        return None
    wanted = [t.strip() for t in tables.split(",") if t.strip()]
    unknown = [t for t in wanted if t not in schema.tables]
    if unknown:
        raise UserError(f"--tables: unknown table {unknown[0]!r}; choose from {', '.join(schema.tables)}")
    return list(dict.fromkeys(wanted))


def _check_out(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: is a file; give a folder to write the export into")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise UserError(f"--out {out}: already exists and is not empty; choose a new folder, or --force to "
                            "replace an earlier export")
        _written_by_export(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot create its parent folder ({exc.strerror or exc})") from None
    if not os.access(out.parent, os.W_OK):
        raise UserError(f"--out {out}: its parent folder is not writable")


def export(db: str | Path, out: str | Path, *, fmt: str = "parquet", tables: list[str] | None = None,
           with_cache: bool = False, force: bool = False, schema: Schema = SCHEMA) -> dict[str, Any]:
    """Write the tables of ``db`` into the folder ``out``; return the manifest. Raises UserError on bad input.

    ``tables`` limits the export to those tables of ``schema`` (``llm_cache`` included when named); by default every
    table of ``schema`` the database has except ``llm_cache`` unless ``with_cache``.
    """
    db, out = Path(db), Path(out)
    if fmt not in FORMATS:
        raise UserError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    if not db.is_file():
        raise UserError(f"--db {db}: no results database here")
    _check_out(out, force)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        manifest = _write(db, work, fmt, tables, with_cache, schema)
        _move_into_place(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return manifest


def _write(db: Path, work: Path, fmt: str, tables: list[str] | None, with_cache: bool,
           schema: Schema) -> dict[str, Any]:
    try:
        with open_connection(db, read_only=True) as con:
            if fmt == "csv":
                register_csv_cell(con)
            have = _columns(con)
            missing = [t for t in tables or () if t not in have]
            if missing:
                raise UserError(f"--tables: {missing[0]} is not in {db} (written by an older version? "
                                f"run `python -m pipeline upgrade --db {db}`)")
            chosen = tables or [t for t in schema.tables if t in have and (with_cache or t != CACHE_TABLE)]
            if not chosen:
                raise UserError(f"--db {db}: holds none of the results tables")
            version = con.execute("SELECT max(value) FROM meta WHERE key = 'schema_version'").fetchone()[0] \
                if "meta" in have else None
            entries = {table: _copy(con, table, have, work, fmt, schema) for table in chosen}
    except duckdb.Error as exc:
        raise UserError(f"--db {db}: {str(exc).splitlines()[0]}") from None
    manifest = {"database": str(db.resolve()), "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "schema_version": version, "format": fmt, "tables": entries,
                "left_out": {} if with_cache or tables or CACHE_TABLE not in have
                else {CACHE_TABLE: "every prompt and completion; export it with --with-cache"}}
    (work / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    (work / "README.txt").write_text(readme(manifest, schema), encoding="utf-8")
    return manifest


def _copy(con: duckdb.DuckDBPyConnection, table: str, have: dict[str, list[str]], work: Path,
          fmt: str, schema: Schema) -> dict[str, Any]:
    """COPY one table (with its provenance) to its file; its manifest entry."""
    select, provenance = _select(table, have, schema)
    file = work / f"{table}.{fmt}"
    columns = [{"name": c[0], "type": c[1]} for c in con.execute(f"DESCRIBE {select}").fetchall()]
    options = "FORMAT PARQUET, COMPRESSION ZSTD"
    if fmt == "csv":  # text cells a spreadsheet would run as formulas are neutralised; Parquet keeps the raw text
        options = "FORMAT CSV, HEADER"
        text = [c["name"] for c in columns if c["type"] in ("VARCHAR", "JSON")]
        if text:
            replace = ", ".join(f'{SQL_FUNCTION}("{name}") AS "{name}"' for name in text)
            select = f"SELECT * REPLACE ({replace}) FROM ({select})"
    target = str(file).replace("'", "''")
    rows = con.execute(f"COPY ({select}) TO '{target}' ({options})").fetchone()[0]
    return {"file": file.name, "rows": int(rows), "columns": columns, "provenance_columns": provenance,
            "sha256": _sha256(file)}


def _written_by_export(out: Path) -> set[str]:
    """The names an earlier export wrote into ``out``: the files its manifest lists, manifest.json and README.txt."""
    if not (out / "manifest.json").is_file():
        raise UserError(f"--out {out}: not an earlier export (no manifest.json); refusing to replace it")
    try:
        manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
        return {entry["file"] for entry in manifest["tables"].values()} | {"manifest.json", "README.txt"}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise UserError(f"--out {out}: its manifest.json is not an export's manifest; refusing to replace the "
                        "folder") from None


def _move_into_place(work: Path, out: Path) -> None:
    """Rename the finished folder to ``out``. An earlier export there is replaced only after that succeeds, and only
    what it wrote (its manifest's files): anything else the folder holds is moved into the new export."""
    old, kept = None, []
    if out.exists() and any(out.iterdir()):
        written = _written_by_export(out)
        kept = sorted(p.name for p in out.iterdir() if p.name not in written)
        clash = [name for name in kept if (work / name).exists()]
        if clash:
            raise UserError(f"--out {out}: {clash[0]} was not written by the earlier export and this export writes a "
                            "file of that name; move it out of the folder first")
        old = out.with_name(f".{out.name}.replaced-{os.getpid()}")
        os.replace(out, old)
    elif out.exists():
        out.rmdir()
    os.replace(work, out)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(out, 0o777 & ~umask)  # mkdtemp made it private
    if old is not None:
        for name in kept:
            os.replace(old / name, out / name)
        shutil.rmtree(old, ignore_errors=True)


def about(table: str, schema: Schema = SCHEMA) -> str:
    """What a table holds: this module's line, else its row class's docstring."""
    if table in ABOUT:
        return ABOUT[table]
    doc = (getattr(schema.rows.get(table), "__doc__", None) or "").strip()
    return " ".join(doc.split()) if doc and not doc.startswith(f"{schema.rows[table].__name__}(") else f"table {table}"


def readme(manifest: dict[str, Any], schema: Schema = SCHEMA) -> str:
    """README.txt of an export: what each file is and what the provenance columns mean."""
    fmt = manifest["format"]
    lines = [
        "Pariksha Studio results export",
        "",
        f"database:       {manifest['database']}",
        f"exported at:    {manifest['exported_at']} (UTC)",
        f"schema version: {manifest['schema_version']}",
        f"format:         {fmt}" + ("" if fmt == "parquet" else
                                    " (list columns such as themes, kb_refs, raw_ids are written as [a, b] text)"),
        "",
        "manifest.json lists every file with its row count, columns and types, and sha256.",
        "",
        "Files:",
    ]
    for table, entry in manifest["tables"].items():
        lines.append(f"  {entry['file']:<26} {entry['rows']:>10,} rows  {about(table, schema)}")
    lines += [
        "",
        "Provenance columns joined in (where a table lacks them):",
        "  run_config_hash, run_code_revision: the config hash and git revision of the run that wrote the row",
        "  <role>_provenance: what that run recorded about the model in the row's role (model, judge, critic,",
        "      checker): weights path and sha256, chat format, endpoint, engine settings",
        "  <role>_sha256: the weights file's sha256 (NULL for API models)",
        "  response_prompt_hash: the prompt hash of the generation the row scored (NULL when the response has",
        "      been regenerated since)",
        "",
        "Scores are NULL where they could not be parsed, never 0. Judge scores are only as good as the judge:",
        "the embedded default judge is a tiny model that proves the machinery, not a reliable grader.",
    ]
    for table, why in manifest.get("left_out", {}).items():
        lines.append(f"Left out: {table} ({why}).")
    return "\n".join(lines) + "\n"
