"""``curate-queries``: a chatbot log (CSV or JSONL, one message a row) becomes a dataset's queries with
Health-Pariksha's exclusion criteria (§3.2): exact duplicates, messages with personal identifiers and messages
that are not health questions are removed, and each removed message is kept in ``excluded.jsonl`` with its row
and reason (identifiers masked there too). Near-duplicates are flagged, each with the earlier message it repeats
(clustered by representative: datasketch MinHash LSH for candidates, the rapidfuzz ratio to decide), not removed.

Kept messages get ``asked_on`` from the timestamp, language (script, or matrix language for romanized text)
and themes from ``pipeline.dataset.themes``. A message keeps the bot's answer as ground truth only where the
log marks it approved unchanged; the others go to ``queries_without_gt.jsonl`` (a query needs a ground truth
to be judged) and are counted. Identifiers in kept text are masked (``--pii mask``) or the message excluded
(``--pii exclude``, the paper's rule); answers are always masked.

The non-health rule: a message is not a health question when it is empty, a media placeholder
(``<Media omitted>``, ``image omitted``, ``This message was deleted``), only emoji/punctuation, or only
greeting, thanks and acknowledgement words (``GREETING_WORDS``).
"""

from __future__ import annotations

import html
import json
import os
import re
import time
import unicodedata
from collections import Counter
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from pipeline.dataset.format import Query, derived_script, message_ref
from pipeline.dataset.ingest import truthy
from pipeline.dataset.records import read_records
from pipeline.dataset.writing import recover, refuse_foreign, validated, write_dataset
from pipeline.errors import UserError

if TYPE_CHECKING:
    from rich.progress import Progress

NEAR_DUPLICATE_SCORE = 90.0  # rapidfuzz ratio (0-100) at or above which two kept messages are flagged
SHINGLE_CHARS = 3  # near-duplicate candidates: MinHash of the normalised text's character 3-grams ...
MINHASH_PERMUTATIONS = 128
LSH_THRESHOLD = 0.5  # ... banded for this Jaccard (datasketch); recall against the exact method in docs/ingest.md
BUCKET_CAP = 32  # representatives a bucket keeps (its latest): templated messages fill buckets, the work stays linear
MAX_CANDIDATES = 48  # representatives a message is compared with at most (those sharing the most bands with it)
MEDIA_RE = re.compile(r"^\s*(?:<\s*media omitted\s*>|<\s*attached:[^>]*>|(?:image|video|audio|sticker|document|gif)"
                      r" omitted|this message was deleted|you deleted this message|null)\s*$", re.IGNORECASE)
GREETING_WORDS = frozenset("""
hi hii hiii hello helo hey hai namaste namaskar namaskaram vanakkam good morning evening afternoon night day
thanks thank thanku thankyou thx tq ty you so much very dhanyavad dhanyavaad shukriya nandri dhanyavadalu
ok okay okk k fine sure yes no great nice welcome sir madam mam maam doctor dr ji bye regards noted got it
""".split())
REPORT_FILE = "curate_report.json"
LOG_EVERY = 20_000  # messages between two progress lines when the console is a log, not a terminal
OUTPUT_FILES = ("queries.jsonl", "queries_without_gt.jsonl", "excluded.jsonl", REPORT_FILE)
IN_PROCESS_BELOW = 2_000  # logs with fewer messages are examined in this process: starting the workers (a fork
# server importing Presidio, then each worker building its recognizers) costs more than spreading them saves
# imported once by the workers' fork server; the guard first: the server ends with the curating process
WORKER_PRELOAD = ("pipeline.dataset.forkserver_guard", "presidio_analyzer", "presidio_anonymizer", "spacy",
                  "pipeline.dataset.pii", "pipeline.dataset.themes", "pipeline.dataset.curate")
CHUNK = 2_000  # messages sent to a worker at a time (and between two advances of the progress bar)


def normalise(text: str) -> str:
    """The text compared for exact duplicates: HTML entities decoded, Unicode NFKC, case folded, spaces collapsed."""
    return " ".join(unicodedata.normalize("NFKC", html.unescape(text)).casefold().split())


def not_health(text: str) -> str | None:
    """Why a message is not a health question (``empty``, ``media``, ``emoji-only``, ``greeting``), else None."""
    if not text.strip():
        return "empty"
    if MEDIA_RE.match(text):
        return "media"
    letters = [ch for ch in text if unicodedata.category(ch)[0] in "LN"]
    if not letters:
        return "emoji-only"
    words = re.findall(r"\w+", normalise(text))
    if all(w in GREETING_WORDS for w in words):
        return "greeting"
    return None


def near_duplicates_exact(texts: list[str], ids: list[str]) -> list[dict[str, Any]]:
    """The reference of ``near_duplicates``: the same clustering by representative with every earlier representative
    compared (quadratic in the representatives: for tests and the bench, not for large logs)."""
    from rapidfuzz import fuzz, process

    leaders: list[int] = []
    pairs = []
    for i, text in enumerate(texts):
        best = process.extractOne(text, [texts[j] for j in leaders], scorer=fuzz.ratio,
                                  score_cutoff=NEAR_DUPLICATE_SCORE)
        if best is None:
            leaders.append(i)
        else:
            pairs.append({"query_id": ids[i], "similar_to": ids[leaders[best[2]]], "score": int(best[1])})
    return pairs


def _shingles(text: str) -> set[bytes]:
    n = SHINGLE_CHARS
    return {text[i:i + n].encode("utf-8") for i in range(max(1, len(text) - n + 1))}


def _band_keys(texts: list[str], progress: Progress | None, task: Any) -> Any:
    """An ``(n, bands)`` array: each text's LSH bucket key in each band (datasketch's MinHash of its character
    3-grams, cut into the bands datasketch's ``MinHashLSH`` chooses for ``LSH_THRESHOLD``), hashed to one integer."""
    import numpy as np
    import xxhash
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=LSH_THRESHOLD, num_perm=MINHASH_PERMUTATIONS)
    bands, rows = lsh.b, lsh.r
    mix = np.random.default_rng(0).integers(1, 2**63, size=rows, dtype=np.uint64) | np.uint64(1)
    keys = np.empty((len(texts), bands), dtype=np.uint64)
    for start in range(0, len(texts), 5000):
        block = MinHash.bulk([_shingles(t) for t in texts[start:start + 5000]], num_perm=MINHASH_PERMUTATIONS,
                             hashfunc=xxhash.xxh32_intdigest)  # datasketch's sha1 default: 3x the time
        values = np.stack([m.hashvalues for m in block]).astype(np.uint64)[:, :bands * rows]
        with np.errstate(over="ignore"):  # a polynomial hash, wrapping modulo 2**64 on purpose
            keys[start:start + len(block)] = (values.reshape(len(block), bands, rows) * mix).sum(axis=2)
        if progress:
            progress.update(task, completed=min(start + 5000, len(texts)))
    return keys


def near_duplicates(texts: list[str], ids: list[str], progress: Progress | None = None,
                    stats: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Near-duplicates clustered by representative, in log order: each message is compared with the earlier
    representatives it shares an LSH bucket with (datasketch MinHash over character 3-grams) and joins the one with
    the best rapidfuzz ratio at or above ``NEAR_DUPLICATE_SCORE`` (``{"query_id", "similar_to", "score"}``), or
    becomes a representative itself. A bucket keeps its latest ``BUCKET_CAP`` representatives and a message is
    compared with at most ``MAX_CANDIDATES`` of them (those sharing the most bands), so the work is linear in the
    log even when templated messages fill a bucket (the all-pairs form was quadratic there). Every reported pair
    scores at least the threshold; a message is missed only when its representative never shared a kept bucket
    with it (recall against ``near_duplicates_exact`` in docs/ingest.md). ``stats``: filled with ``compared``
    (ratios computed) and ``representatives``."""
    from collections import deque

    from rapidfuzz import fuzz, process

    if len(texts) < 2:
        return []
    task = progress.add_task("near-duplicates: signatures", total=len(texts)) if progress else None
    keys = _band_keys(texts, progress, task)
    if progress:
        progress.update(task, description="near-duplicates: clusters", completed=0)
    buckets: list[dict[int, deque[int]]] = [{} for _ in range(keys.shape[1])]
    pairs, compared, leaders = [], 0, 0
    for i, text in enumerate(texts):
        row = keys[i].tolist()
        counts: Counter[int] = Counter()
        for band, key in enumerate(row):
            if (bucket := buckets[band].get(key)) is not None:
                counts.update(bucket)
        candidates = [j for j, _ in counts.most_common(MAX_CANDIDATES)]
        compared += len(candidates)
        best = process.extractOne(text, [texts[j] for j in candidates], scorer=fuzz.ratio,
                                  score_cutoff=NEAR_DUPLICATE_SCORE) if candidates else None
        if best is not None:
            pairs.append((i, candidates[best[2]], int(best[1])))
        else:
            leaders += 1
            for band, key in enumerate(row):
                buckets[band].setdefault(key, deque(maxlen=BUCKET_CAP)).append(i)
        if progress and i % 2000 == 1999:
            progress.update(task, completed=i + 1)
    if progress:
        progress.update(task, completed=len(texts))
    if stats is not None:
        stats.update(compared=compared, representatives=leaders)
    return [{"query_id": ids[i], "similar_to": ids[j], "score": score} for i, j, score in pairs]


def default_workers() -> int:
    """The CPUs this process may run on (``--workers`` default)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


Examined = tuple[str, str | None, str, tuple[str, list[str], str] | None, str | None]
"""One message examined: its masked text (HTML entities decoded), exclusion (``not_health``'s reason, or
``pii:KIND, KIND``), normalised key, tagging (language, themes, script; None when excluded or a repeat of an
earlier message of the same chunk) and the masked answer (None when it is not wanted)."""

_worker_tagger: Any = None  # a worker's ThemeTagger, built once by _start_worker


def _start_worker(kb_texts: list[str]) -> None:
    """A worker's initializer: the theme tagger and Presidio's analyzer built once, not once a chunk."""
    global _worker_tagger
    from pipeline.dataset.pii import find_pii
    from pipeline.dataset.themes import ThemeTagger
    from pipeline.processes import die_with_parent

    die_with_parent()  # the fork server's child: gone with it (and it with the curating process)

    _worker_tagger = ThemeTagger(kb_texts)
    find_pii("warm up 9876543210")


def _examine_chunk(items: list[tuple[Any, str | None]], pii: str) -> list[Examined]:
    """A worker's job: ``_examine`` over one chunk with the worker's tagger."""
    return _examine(items, pii, _worker_tagger, set())


def _examine(items: list[tuple[Any, str | None]], pii: str, tagger: Any, seen: set[str]) -> list[Examined]:
    """Identifiers, the exclusion rules and themes of each ``(message, answer wanted or None)``, in order. ``seen``:
    the keys already examined (a repeat is neither tagged nor its answer masked: it is excluded as a duplicate)."""
    from pipeline.dataset.pii import find_pii, mask

    out: list[Examined] = []
    for value, answer in items:
        text = html.unescape("" if value is None else str(value))
        found = find_pii(text)
        masked = mask(text, found)
        reason = not_health(text)
        if reason is None and found and pii == "exclude":
            reason = "pii:" + ", ".join(sorted({f.kind for f in found}))
        key = normalise(text)
        if reason is not None or key in seen:
            out.append((masked, reason, key, None, None))
            continue
        seen.add(key)
        tagging = tagger.tag(masked)
        script = derived_script(masked, tagging.language)
        out.append((masked, None, key, (tagging.language, tagging.themes, script), mask(answer) if answer else None))
    return out


def _examined(items: list[tuple[Any, str | None]], pii: str, kb_texts: list[str], workers: int,
              advance: Any) -> Any:
    """``_examine`` over every message, in log order: in this process, or in chunks of ``CHUNK`` spread over
    ``workers`` processes when there are at least ``IN_PROCESS_BELOW`` messages. ``advance(n)`` after each chunk."""
    chunks = [items[i:i + CHUNK] for i in range(0, len(items), CHUNK)]
    if workers <= 1 or len(items) < IN_PROCESS_BELOW:
        from pipeline.dataset.themes import ThemeTagger

        tagger, seen = ThemeTagger(kb_texts), set()
        for chunk in chunks:
            yield from _examine(chunk, pii, tagger, seen)
            advance(len(chunk))
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # forkserver: a clean single-threaded server imports Presidio (transformers and torch come with it: ~15 s of
    # CPU) once and forks each worker from it, sharing those pages. Not fork (the parent runs rich's refresh
    # thread: a fork copies its locks mid-use), not spawn (every worker would import it all again); spawn only where
    # forkserver does not exist (Windows)
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(WORKER_PRELOAD))
    else:
        context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(chunks)), mp_context=context,
                             initializer=_start_worker, initargs=(kb_texts,)) as pool:
        for chunk, result in zip(chunks, pool.map(_examine_chunk, chunks, [pii] * len(chunks)), strict=True):
            yield from result
            advance(len(chunk))


def _asked_on(value: Any, where: str) -> date | None:
    if value is None or not str(value).strip():
        return None
    value = str(value).strip()
    if not any(ch.isdigit() for ch in value):  # a parser reads "now", "today" as the current time: not a log date
        raise UserError(f"{where}: {value!r} is not a date or timestamp (use e.g. 2024-01-21 10:15)")
    try:  # ISO first (2024-01-08 09:12); then day-first, as Indian exports write dates (08/01/2024, 09:12)
        return datetime.fromisoformat(value).date()
    except ValueError:
        pass
    from dateutil import parser

    try:  # parsed against two defaults: a part the value lacks (12:00 has no date, Jan 8 no year) would differ
        first, second = (parser.parse(value, dayfirst=True, default=datetime(y, y - 1900, y - 1900))
                         for y in (1901, 1902))
    except (ValueError, OverflowError):
        raise UserError(f"{where}: {value!r} is not a date or timestamp (use e.g. 2024-01-21 10:15)") from None
    if first.date() != second.date():
        missing = [part for part, a, b in (("year", first.year, second.year), ("month", first.month, second.month),
                                           ("day", first.day, second.day)) if a != b]
        raise UserError(f"{where}: {value!r} has no {' or '.join(missing)}; give the full date (e.g. 2024-01-21 "
                        "10:15)")
    return first.date()


def _kb_texts(out_dir: Path) -> list[str]:
    if not (out_dir / "kb.jsonl").is_file():
        return []
    records, _ = read_records(out_dir / "kb.jsonl")
    return [f"{r.get('title') or ''} {r.get('text') or ''}" for _, r in records]


def curate(log: Path, out_dir: Path, *, progress: bool = False, **options: Any) -> dict[str, Any]:
    """Curate ``log`` into ``out_dir`` (queries, queries without ground truth, excluded, report); returns the report,
    with each stage's seconds (``seconds``, not written). ``workers``: processes examining the messages (default
    ``default_workers()``; 1, or a log under ``IN_PROCESS_BELOW`` messages: this process); the files are the same
    for any number. Files in ``out_dir`` that curate-queries did not write are
    refused unless ``force``; the folder is validated with the new files before any is replaced. ``progress``: a
    rich progress bar on stderr in a terminal; written to a log (not a terminal), one line as each stage ends, with
    its seconds, so a long log shows where it is."""
    if not progress:
        return _curate(log, out_dir, bar=None, **options)
    from rich.console import Console

    stderr = Console(stderr=True, highlight=False, soft_wrap=True)
    if not stderr.is_terminal:
        return _curate(log, out_dir, bar=None, say=stderr.print, **options)
    from pipeline.console import progress_bar

    with progress_bar(stderr, transient=True) as bar:
        return _curate(log, out_dir, bar=bar, **options)


def _curate(log: Path, out_dir: Path, *, bar: Progress | None, say: Any = None, text_col: str = "message",
            time_col: str = "timestamp", answer_col: str = "answer", approved_col: str = "approved",
            pii: str = "exclude", force: bool = False, workers: int | None = None) -> dict[str, Any]:
    clock, seconds = time.perf_counter(), {}

    def lap(stage: str) -> None:
        nonlocal clock
        seconds[stage] = round(time.perf_counter() - clock, 2)
        clock = time.perf_counter()
        if say is not None:
            say(f"curate-queries {log.name}: {stage} done in {seconds[stage]:.1f} s")

    if pii not in ("exclude", "mask"):
        raise UserError(f"--pii {pii!r}: use exclude or mask")
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise UserError(f"--workers {workers}: give 1 or more (1: examine the messages in this process)")
    if not log.is_file():
        raise UserError(f"{log}: not found; give the chatbot log (CSV or JSONL)")
    recover(out_dir)  # a write killed between its renames is completed first (pipeline.dataset.writing)
    if not force:  # before any work: a long log is not read only to be refused
        refuse_foreign(out_dir, list(OUTPUT_FILES[:-1]), REPORT_FILE, "curate-queries")
    records, issues = read_records(log)
    if issues:
        raise UserError(str(issues[0]))
    if not records:
        raise UserError(f"{log}: no messages")
    for line, rec in records:
        if text_col not in rec:
            raise UserError(f"{log}:{line}: no {text_col!r} field (columns: {', '.join(map(str, rec))}); "
                            "name the message column with --text-col")
    checked = {line: (_asked_on(rec.get(time_col), f"{log}:{line}: field {time_col}"),
                      approved_col in rec and truthy(rec[approved_col], f"{log}:{line}: field {approved_col}"))
               for line, rec in records}  # every row's date and approval read before any work
    lap("read")
    total, done = len(records), 0
    task = bar.add_task("messages: identifiers, themes", total=total) if bar else None

    def advance(n: int) -> None:
        nonlocal done
        if bar:
            bar.advance(task, n)
        elif say is not None and (done + n) // LOG_EVERY > done // LOG_EVERY:
            say(f"curate-queries {log.name}: messages {(done + n) // LOG_EVERY * LOG_EVERY:,} of {total:,}")
        done += n

    items = [(rec[text_col], str(rec.get(answer_col) or "").strip() if checked[line][1] else None)
             for line, rec in records]
    kept: list[dict[str, Any]] = []
    without_gt: list[dict[str, Any]] = []
    excluded: list[dict[str, Any]] = []
    first_seen: dict[str, str] = {}
    examined = _examined(items, pii, _kb_texts(out_dir), workers, advance)
    for (line, _), (masked, reason, key, tagging, answer) in zip(records, examined, strict=True):
        asked_on = checked[line][0]
        base = {"row": line, "asked_on": asked_on.isoformat() if asked_on else None, "text": masked}
        if reason is not None:
            pii_found = reason.startswith("pii:")
            excluded.append({**base, "reason": "pii" if pii_found else "not_health",
                             "detail": reason[4:] if pii_found else reason})
            continue
        query_id = f"log-{line:05d}"
        if key in first_seen:
            excluded.append({**base, "reason": "duplicate", "detail": "duplicate", "duplicate_of": first_seen[key]})
            continue
        first_seen[key] = query_id
        assert tagging is not None  # a message's first occurrence is always tagged (_examine)
        language, themes, script = tagging
        record: dict[str, Any] = {"query_id": query_id, "language": language, "query": masked,
                                  "script": script, "themes": themes,
                                  "source_message": message_ref(log.name, line)}
        if asked_on:
            record["asked_on"] = asked_on.isoformat()
        if answer:
            record["gt_response"] = answer
            try:
                record = Query.model_validate(record).model_dump(mode="json", exclude_none=True)
            except ValidationError as exc:
                raise UserError(f"{log}:{line}: becomes an invalid query: {exc.errors()[0]['msg']}") from None
            kept.append(record)
        else:
            without_gt.append(record)

    rows = total
    del records, checked, items  # the log's rows are not needed again: the write's validation needs the memory
    lap("messages")
    near = near_duplicates([normalise(r["query"]) for r in kept + without_gt],
                           [r["query_id"] for r in kept + without_gt], bar)
    lap("near_duplicates")
    if not kept:
        raise UserError(f"{log}: no message is left with an approved answer (column {approved_col!r}); nothing "
                        f"to evaluate ({len(excluded)} excluded, {len(without_gt)} without ground truth)")
    reasons = Counter(e["reason"] for e in excluded)
    report = {"log": log.name, "rows": rows, "queries": len(kept), "without_ground_truth": len(without_gt),
              "excluded": dict(sorted(reasons.items())),
              "excluded_detail": dict(sorted(Counter(e["detail"] for e in excluded).items())),
              "near_duplicates": near, "pii": pii,
              "languages": dict(sorted(Counter(r["language"] for r in kept + without_gt).items()))}
    lines = lambda rows: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)  # noqa: E731
    write_dataset(out_dir, {"queries.jsonl": lines(kept), "queries_without_gt.jsonl": lines(without_gt),
                            "excluded.jsonl": lines(excluded)},
                  command="curate-queries", report_name=REPORT_FILE, report=report, force=force, check=validated)
    lap("write")
    report["seconds"] = seconds
    return report


def curate_command(log: Path, out_dir: Path, **options: Any) -> int:
    """CLI: curate, print what was kept and why the rest was excluded, then validate the folder."""
    from rich.console import Console
    from rich.table import Table

    from pipeline.dataset.loader import validate_command

    report = curate(log, out_dir, progress=True, **options)
    console = Console(highlight=False, soft_wrap=True)
    table = Table(title=f"curate-queries {log.name} -> {out_dir}")
    table.add_column("outcome")
    table.add_column("messages", justify="right")
    table.add_row("queries (approved ground truth)", str(report["queries"]))
    table.add_row("kept without ground truth", str(report["without_ground_truth"]))
    for detail, n in report["excluded_detail"].items():
        table.add_row(f"excluded: {detail}", str(n))
    table.add_row("near-duplicates flagged (kept)", str(len(report["near_duplicates"])))
    console.print(table)
    console.print(f"identifiers: {report['pii']}; excluded messages (masked) in {out_dir / 'excluded.jsonl'}")
    return validate_command(out_dir)
