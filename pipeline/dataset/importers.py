"""Importers: public medical QA sets, in their published layouts, into the dataset format.

``python -m pipeline import-qa FORMAT FILE OUT_DIR`` writes ``OUT_DIR/queries.jsonl`` (and, for
PubMedQA with ``--contexts``, ``OUT_DIR/kb.jsonl``). A new format is one function and one entry in
``IMPORTERS``: it turns the file into dataset records, each with the input line it came from.

Layouts, as their sources publish them:

- ``medqa`` — MedQA (jind11/MedQA, ``data_clean/questions/US/*.jsonl``): a JSON object a line,
  ``question``, ``options`` {"A": …}, ``answer`` (the option's text), ``answer_idx`` (its letter),
  ``meta_info`` ("step1", "step2&3"; dropped). Query ids: ``medqa-<line>``.
- ``medmcqa`` — MedMCQA (medmcqa/medmcqa; ``train.json``/``dev.json`` are JSON lines despite the
  name): ``id``, ``question``, ``opa``–``opd``, ``cop``, ``exp``, ``subject_name``, ``topic_name``,
  ``choice_type``. ``cop`` is **1-based in the original files** (1 = ``opa``, as the repository's
  README example shows and HELM's scenario reads it); the Hugging Face copy is 0-based (its loader
  subtracts 1), so pass ``cop_base=0`` (``--cop-base 0``) for a file exported from it. The test split
  has no ``cop`` (its answers are not public) and is refused. Query ids: ``medmcqa-<id>``.
- ``pubmedqa`` — PubMedQA PQA-L/PQA-A (pubmedqa/pubmedqa ``data/ori_pqal.json``): one JSON object,
  PMID → {``QUESTION``, ``CONTEXTS`` [], ``LABELS`` [], ``MESHES``, ``YEAR``, ``final_decision``
  (yes/no/maybe), ``LONG_ANSWER``, …}. Closed-book as Med-CoDE ran it: the question with options
  A yes / B no / C maybe, the answer the letter of ``final_decision``, the ground truth the long
  answer; ``contexts=True`` also writes each abstract's contexts as raw KB chunks cited by the query.
  Query ids: ``pubmedqa-<pmid>``.
- ``mmlu`` — MMLU (hendrycks/test ``data/test/<subject>_test.csv``): CSV without a header,
  question, options A–D, answer letter. Query ids: ``mmlu-<subject>-<row>``.
- ``healthbench`` — HealthBench (openai/simple-evals ``healthbench_eval.py``): a JSON object a line,
  ``prompt`` (the conversation: [{role, content}], the user's last), ``rubrics``
  [{criterion, points, tags}], ``example_tags``, ``ideal_completions_data`` ({ideal_completion, …}
  or null), ``prompt_id``. The conversation is kept in ``messages``, ``query`` is its last user
  message; the example tags are added to every criterion's tags (so a per-tag breakdown of the
  criteria gives HealthBench's example-tag scores too), and those that name one of our themes map
  to it (``EXAMPLE_TAG_THEMES``). The ground truth is the ideal completion, or ``NO_IDEAL`` when
  there is none. Query ids: ``healthbench-<prompt_id>``.

Every query is English (``language`` en). An ``OUT_DIR`` that already holds a dataset file is refused unless
``--force``. A bad input file stops the import with one line naming
file, line and problem, and nothing is written: the files are built in a temporary folder beside
``OUT_DIR``, validated, then renamed into place.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipeline.dataset.format import Chunk, Query
from pipeline.dataset.loader import _pydantic_issues
from pipeline.dataset.records import UnreadableCsv, csv_records
from pipeline.dataset.writing import validated, write_dataset
from pipeline.errors import UserError
from pipeline.registry import Registry

NO_IDEAL = "(HealthBench gives no ideal completion for this conversation; grade the response with its rubric.)"
EXAMPLE_TAG_THEMES = {"theme:global_health": "cultural"}  # HealthBench example tag -> our theme, where one fits
PUBMEDQA_OPTIONS = {"A": "yes", "B": "no", "C": "maybe"}


@dataclass
class Options:
    """What an importer may be told: keep PubMedQA contexts, MedMCQA's ``cop`` base, how many items."""

    contexts: bool = False
    cop_base: int = 1
    limit: int | None = None


@dataclass
class Imported:
    """Dataset records made from one file: queries (with their input lines) and KB chunks."""

    queries: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    chunks: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


class BadInput(Exception):
    """A problem at one line of the input file."""

    def __init__(self, line: int | None, message: str):
        super().__init__(message)
        self.line = line


# -- reading the published files ----------------------------------------------------------------
def _json_lines(path: Path, what: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for line, text in enumerate(_read(path).split("\n"), 1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadInput(line, f"not valid JSON ({exc.msg} at column {exc.colno}); a {what} file has one "
                                 "JSON object a line") from None
        if not isinstance(obj, dict):
            raise BadInput(line, f"expected a JSON object, got {type(obj).__name__}")
        yield line, obj


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInput(None, f"invalid UTF-8 (byte {exc.start}); re-save the file as UTF-8") from None
    except OSError as exc:
        raise BadInput(None, f"cannot read the file ({exc.strerror})") from None


def _get(obj: dict[str, Any], key: str, line: int, kind: type | tuple[type, ...] = str, layout: str = "") -> Any:
    if key not in obj or obj[key] is None:
        raise BadInput(line, f"missing field {key!r}" + (f" ({layout})" if layout else ""))
    if not isinstance(obj[key], kind) or (isinstance(obj[key], bool) and kind is not bool):
        raise BadInput(line, f"field {key!r} should be {getattr(kind, '__name__', 'a ' + str(kind))}, "
                             f"got {type(obj[key]).__name__}")
    return obj[key]


def _choice_record(qid: str, question: str, options: dict[str, str], answer: str, note: str = "") -> dict[str, Any]:
    gt = f"{answer}. {options[answer]}" + (f" — {note.strip()}" if note and note.strip() else "")
    return {"query_id": qid, "language": "en", "query": question, "gt_response": gt, "options": options,
            "answer": answer}


# -- one function per format ----------------------------------------------------------------------
MEDQA_LAYOUT = "a MedQA line has question, options, answer and answer_idx"


def medqa(path: Path, opts: Options) -> Imported:
    out = Imported()
    for line, obj in _json_lines(path, "MedQA"):
        options = _get(obj, "options", line, dict, MEDQA_LAYOUT)
        if not all(isinstance(v, str) for v in options.values()):
            raise BadInput(line, "every option should be text")
        idx = _get(obj, "answer_idx", line, str, MEDQA_LAYOUT).strip()
        if idx not in options:
            raise BadInput(line, f"answer_idx {idx!r} is not one of the options ({', '.join(options)})")
        answer = obj.get("answer")
        if isinstance(answer, str) and answer.strip() != options[idx].strip():
            raise BadInput(line, f"answer {answer!r} is not the text of option {idx} ({options[idx]!r})")
        out.queries.append((line, _choice_record(f"medqa-{line:05d}", _get(obj, "question", line, str), options, idx)))
    return out


MEDMCQA_LAYOUT = "a MedMCQA line has id, question, opa-opd and cop"


def medmcqa(path: Path, opts: Options) -> Imported:
    if opts.cop_base not in (0, 1):
        raise BadInput(None, f"cop base must be 1 (the original files) or 0 (the Hugging Face copy), "
                             f"not {opts.cop_base}")
    out = Imported()
    for line, obj in _json_lines(path, "MedMCQA"):
        rid = _get(obj, "id", line, (str, int), MEDMCQA_LAYOUT)
        options = {letter: _get(obj, f"op{letter.lower()}", line, str, MEDMCQA_LAYOUT) for letter in "ABCD"}
        cop = obj.get("cop")
        if cop is None or cop == -1 or cop == "":
            raise BadInput(line, "no cop (correct option): MedMCQA's test split has no public answers; "
                                 "import train.json or dev.json")
        try:
            cop = int(cop)
        except (TypeError, ValueError):
            raise BadInput(line, f"cop should be a number, got {cop!r}") from None
        index = cop - opts.cop_base
        if not 0 <= index < 4:
            hint = ("; this looks like the 0-based Hugging Face copy: rerun with --cop-base 0"
                    if cop == 0 and opts.cop_base == 1 else "")
            numbering = "the original files" if opts.cop_base == 1 else "--cop-base 0"
            raise BadInput(line, f"cop {cop} is not an option (with {numbering}, cop runs "
                                 f"{opts.cop_base}-{opts.cop_base + 3}, {opts.cop_base} = opa){hint}")
        exp = obj.get("exp") if isinstance(obj.get("exp"), str) else ""
        out.queries.append((line, _choice_record(f"medmcqa-{rid}", _get(obj, "question", line, str), options,
                                                 "ABCD"[index], exp)))
    return out


PUBMEDQA_LAYOUT = "a PubMedQA entry has QUESTION, CONTEXTS, final_decision and LONG_ANSWER"


def pubmedqa(path: Path, opts: Options) -> Imported:
    text = _read(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(exc.lineno, f"not valid JSON ({exc.msg} at column {exc.colno}); ori_pqal.json is one "
                                   "JSON object, PMID -> entry") from None
    if not isinstance(data, dict):
        raise BadInput(1, f"expected one JSON object (PMID -> entry), got {type(data).__name__}")
    out = Imported()
    for pmid, entry in data.items():
        found = text.find(json.dumps(pmid) + ":")
        line = text.count("\n", 0, found) + 1 if found >= 0 else None
        if not isinstance(entry, dict):
            raise BadInput(line, f"PMID {pmid}: expected an entry object ({PUBMEDQA_LAYOUT}), got "
                                 f"{type(entry).__name__} (is this test_ground_truth.json?)")
        decision = entry.get("final_decision")
        if decision is None:
            raise BadInput(line, f"PMID {pmid}: no final_decision (PQA-U is unlabelled; import ori_pqal.json or "
                                 "ori_pqaa.json)")
        answer = {v: k for k, v in PUBMEDQA_OPTIONS.items()}.get(str(decision).strip().lower())
        if answer is None:
            raise BadInput(line, f"PMID {pmid}: final_decision {decision!r} is not yes, no or maybe")
        qid = f"pubmedqa-{pmid}"
        record = {"query_id": qid, "language": "en", "query": _get(entry, "QUESTION", line, str, PUBMEDQA_LAYOUT),
                  "gt_response": _get(entry, "LONG_ANSWER", line, str, PUBMEDQA_LAYOUT),
                  "options": dict(PUBMEDQA_OPTIONS), "answer": answer}
        if opts.contexts:
            contexts = _get(entry, "CONTEXTS", line, list, PUBMEDQA_LAYOUT)
            labels = entry.get("LABELS") if isinstance(entry.get("LABELS"), list) else []
            year = f", {entry['YEAR']}" if entry.get("YEAR") else ""
            refs = []
            for i, context in enumerate(contexts):
                if not isinstance(context, str):
                    raise BadInput(line, f"PMID {pmid}: CONTEXTS[{i}] should be text")
                label = labels[i] if i < len(labels) and isinstance(labels[i], str) else f"context {i + 1}"
                chunk_id = f"pmid{pmid}-{i + 1}"
                refs.append(chunk_id)
                out.chunks.append((line, {"chunk_id": chunk_id, "kind": "raw", "title": f"PMID {pmid}: "
                                          f"{label.capitalize()}", "text": context,
                                          "source": f"PubMed abstract {pmid}{year} (PubMedQA)"}))
            record["kb_refs"] = refs
        out.queries.append((line, record))
    return out


def mmlu(path: Path, opts: Options) -> Imported:
    subject = re.sub(r"_(test|dev|val)$", "", path.stem) or "mmlu"
    out = Imported()
    for line, row in csv_records(_read(path)):  # a record it cannot read: UnreadableCsv, reported as BadInput
        if not any(c.strip() for c in row):
            continue
        if len(row) < 4:
            raise BadInput(line, f"{len(row)} fields; an MMLU row is question, options A-D, answer letter "
                                 "(no header)")
        question, texts, answer = row[0], row[1:-1], row[-1].strip().upper()
        options = dict(zip("ABCDEFGHIJ", texts, strict=False))
        if answer not in options:
            header = " (a header row? MMLU's files have none)" if line == 1 else ""
            raise BadInput(line, f"answer {row[-1]!r} is not one of the option letters ({', '.join(options)}){header}")
        out.queries.append((line, _choice_record(f"mmlu-{subject}-{len(out.queries) + 1:04d}", question, options,
                                                 answer)))
    return out


HEALTHBENCH_LAYOUT = "a HealthBench line has prompt_id, prompt, rubrics and example_tags"


def healthbench(path: Path, opts: Options) -> Imported:
    out = Imported()
    for line, obj in _json_lines(path, "HealthBench"):
        prompt = _get(obj, "prompt", line, list, HEALTHBENCH_LAYOUT)
        if not prompt or not all(isinstance(m, dict) for m in prompt):
            raise BadInput(line, "prompt should be a non-empty list of {role, content} messages")
        if prompt[-1].get("role") != "user":
            raise BadInput(line, f"the prompt's last message is {prompt[-1].get('role')!r}, not the user's")
        example_tags = obj.get("example_tags") or []
        if not isinstance(example_tags, list) or not all(isinstance(t, str) for t in example_tags):
            raise BadInput(line, "example_tags should be a list of strings")
        rubric = []
        for i, item in enumerate(_get(obj, "rubrics", line, list, HEALTHBENCH_LAYOUT)):
            if not isinstance(item, dict):
                raise BadInput(line, f"rubrics[{i}] should be an object {{criterion, points, tags}}")
            tags = item.get("tags") or []
            rubric.append({"criterion": item.get("criterion"), "points": item.get("points"),
                           "tags": list(dict.fromkeys([*tags, *example_tags])) if isinstance(tags, list) else tags})
        ideal = obj.get("ideal_completions_data")
        completion = ideal.get("ideal_completion") if isinstance(ideal, dict) else None
        themes = list(dict.fromkeys(EXAMPLE_TAG_THEMES[t] for t in example_tags if t in EXAMPLE_TAG_THEMES))
        out.queries.append((line, {
            "query_id": f"healthbench-{_get(obj, 'prompt_id', line, str, HEALTHBENCH_LAYOUT)}", "language": "en",
            "query": prompt[-1].get("content"), "messages": prompt, "rubric": rubric, "themes": themes,
            "gt_response": completion if isinstance(completion, str) and completion.strip() else NO_IDEAL,
        }))
    return out


IMPORTERS = Registry("format", {  # name → its reader: (file, options) → Imported
    name: f"pipeline.dataset.importers:{name}" for name in ("medqa", "medmcqa", "pubmedqa", "mmlu", "healthbench")})


# -- writing ------------------------------------------------------------------------------------------
def _check_records(path: Path, imported: Imported) -> None:
    """Each record against its model, ids unique: the first problem as one line naming the input line."""
    for records, model, key in ((imported.chunks, Chunk, "chunk_id"), (imported.queries, Query, "query_id")):
        seen: dict[str, int] = {}
        for line, rec in records:
            try:
                model.model_validate(rec)
            except ValidationError as exc:
                issue = _pydantic_issues(str(path), line, exc)[0]
                raise BadInput(line, f"becomes an invalid {model.__name__.lower()}: "
                                     f"{issue.field + ': ' if issue.field else ''}{issue.message}") from None
            if rec[key] in seen:
                raise BadInput(line, f"duplicate {key} {rec[key]!r} (first at line {seen[rec[key]]})")
            seen[rec[key]] = line


def _jsonl(records: list[tuple[int, dict[str, Any]]]) -> str:
    return "".join(json.dumps(rec, ensure_ascii=False) + "\n" for _, rec in records)


def import_qa(fmt: str, path: str | Path, out_dir: str | Path, opts: Options | None = None, *,
              force: bool = False) -> tuple[Path, int, int]:
    """Import ``path`` (format ``fmt``) into ``out_dir``; (queries file, queries, chunks). UserError on bad input,
    and when ``out_dir`` already holds a dataset file unless ``force`` (then its ``queries.jsonl``/``kb.jsonl``
    are replaced)."""
    path, out_dir, opts = Path(path), Path(out_dir), opts or Options()
    reader = IMPORTERS.lookup(fmt)
    if not path.is_file():
        raise UserError(f"{path}: not found; give the {fmt} file")
    if opts.contexts and fmt != "pubmedqa":
        raise UserError("--contexts is for PubMedQA only (its abstracts become KB chunks)")
    try:
        imported = reader(path, opts)
        if opts.limit is not None:
            imported.queries = imported.queries[:opts.limit]
            cited = {ref for _, q in imported.queries for ref in q.get("kb_refs", [])}
            imported.chunks = [(line, c) for line, c in imported.chunks if c["chunk_id"] in cited]
        if not imported.queries:
            raise BadInput(None, f"no items found; is this a {fmt} file?")
        _check_records(path, imported)
    except (BadInput, UnreadableCsv) as exc:
        raise UserError(f"{path}:{exc.line}: {exc}" if exc.line is not None else f"{path}: {exc}") from None
    existing = sorted(p.name for stem in ("queries", "kb", "rubrics") for p in out_dir.glob(f"{stem}.*"))
    stale = [name for name in existing if name not in ("queries.jsonl", "kb.jsonl")
             or (name == "kb.jsonl" and not imported.chunks)]
    if stale:
        raise UserError(f"{out_dir}: already holds {', '.join(stale)}, which this import would not replace; "
                        "remove it or choose another folder")
    if existing and not force:
        raise UserError(f"{out_dir}: already holds {', '.join(existing)}; choose a new folder, or --force to "
                        "replace it")
    files = {"queries.jsonl": _jsonl(imported.queries)}
    if imported.chunks:
        files["kb.jsonl"] = _jsonl(imported.chunks)
    write_dataset(out_dir, files, command="import-qa", force=True, check=validated)  # existing files refused above
    return out_dir / "queries.jsonl", len(imported.queries), len(imported.chunks)


def import_qa_command(fmt: str, path: Path, out_dir: Path, *, contexts: bool = False, cop_base: int = 1,
                      limit: int | None = None, force: bool = False) -> int:
    """CLI: import, then say what was written and how it validates."""
    from pipeline.dataset.loader import validate_command

    queries_file, n_queries, n_chunks = import_qa(fmt, path, out_dir, Options(contexts, cop_base, limit),
                                                   force=force)
    kb = f" and {n_chunks} KB chunks to {out_dir / 'kb.jsonl'}" if n_chunks else " (closed-book)"
    print(f"imported {n_queries} {fmt} items to {queries_file}{kb}")
    return validate_command(out_dir)
