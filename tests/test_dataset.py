"""Dataset validation: a small valid fixture, corrupted copies of it through the CLI, other formats, bundled data."""

from __future__ import annotations

import copy
import csv
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from pipeline.dataset import (
    LANGUAGE_TABLE,
    LANGUAGES,
    REFUSAL_SENTENCE,
    THEMES,
    Dataset,
    load_dataset,
    validate,
)
from pipeline.errors import UserError

ROOT = Path(__file__).resolve().parent.parent

CHUNKS = [
    {"chunk_id": "sop-diet", "kind": "raw", "title": "Diet before surgery",
     "text": "Eat a light breakfast two hours before the surgery.", "source": "SOP manual p.3"},
    {"chunk_id": "sop-bath", "kind": "raw", "title": "Bathing",
     "text": "Do not take a head bath for 15 days after cataract surgery.", "source": "FAQ p.1"},
    {"chunk_id": "sop-drops", "kind": "raw", "title": "Eye drops",
     "text": "Use the prescribed eye drops four times a day for a month.", "source": "Discharge sheet"},
    {"chunk_id": "upd-bath", "kind": "update", "title": "Bathing (doctor update)",
     "text": "A head bath is allowed 7 days after surgery if the eye is closed.", "source": "Doctor Q&A",
     "updated": "2024-03-01", "supersedes": ["sop-bath"]},
]
QUERIES = [
    {"query_id": "q-en-1", "language": "en", "query": "Can he take chapati, Puri etc on the day of surgery?",
     "gt_response": "Eat a light breakfast two hours before the surgery.", "themes": ["cultural"],
     "kb_refs": ["sop-diet"], "update_sensitive": False},
    {"query_id": "q-en-2", "language": "en", "query": "When can I take head bath?",
     "gt_response": "A head bath is allowed 7 days after surgery.", "themes": ["non_native_english"],
     "kb_refs": ["upd-bath"], "update_sensitive": True,
     "update_check": {"expect_any": ["7 days"], "superseded_any": ["15 days"]}},
    {"query_id": "q-hi-1", "language": "hi", "query": "ऑपरेशन के बाद आँख में दवा कितनी बार डालनी है?",
     "query_en": "How many times should I put medicine in the eye after the operation?",
     "gt_response": "Use the prescribed eye drops four times a day for a month.", "themes": [],
     "kb_refs": ["sop-drops"], "update_sensitive": False},
    {"query_id": "q-ta-1", "language": "ta", "query": "அறுவை சிகிச்சைக்கு முன் சாப்பிடலாமா?",
     "query_en": "Can I eat before the surgery?", "gt_response": "Eat a light breakfast two hours before.",
     "themes": [], "kb_refs": ["sop-diet"], "update_sensitive": False},
    {"query_id": "q-te-1", "language": "te", "query": "ఆపరేషన్ తర్వాత తలస్నానం ఎప్పుడు చేయవచ్చు?",
     "query_en": "When can I wash my hair after the operation?", "gt_response": "After 7 days.",
     "themes": ["code_mixing"], "kb_refs": ["upd-bath"], "update_sensitive": True},
    {"query_id": "q-kn-1", "language": "kn", "query": "ನಾನು ಮಧುಮೇಹಿ, ಆಪರೇಷನ್ ಮಾಡಬಹುದೇ?",
     "query_en": "I am diabetic, can the operation be done?", "gt_response": REFUSAL_SENTENCE,
     "themes": ["patient_specific", "out_of_kb"], "kb_refs": [], "update_sensitive": False},
]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def write_csv(path: Path, rows: list[dict]) -> None:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for r in rows:
            out = {}
            for k in columns:
                v = r.get(k)
                if isinstance(v, list):
                    v = ";".join(v)
                elif isinstance(v, bool):
                    v = "true" if v else "false"
                elif isinstance(v, dict):
                    v = json.dumps(v)
                out[k] = "" if v is None else v
            writer.writerow(out)


def make_dataset(root: Path, chunks: list[dict] | None = CHUNKS, queries: list[dict] = QUERIES,
                 fmt: str = "jsonl") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    files = {"kb": chunks, "queries": queries}
    for stem, rows in files.items():
        if rows is None:
            continue
        if fmt == "jsonl":
            write_jsonl(root / f"{stem}.jsonl", rows)
        elif fmt == "csv":
            write_csv(root / f"{stem}.csv", rows)
        else:
            pd.DataFrame(rows).to_parquet(root / f"{stem}.parquet")
    return root


def run_validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", "validate", str(path)], check=False,
                          capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def listing(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


# -- the clean fixture -------------------------------------------------------------------------
def test_clean_fixture_exits_0_with_counts(tmp_path):
    ds = make_dataset(tmp_path / "clean")
    res = run_validate(ds)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "error" not in res.stdout
    assert "6 queries (en 2, hi 1, ta 1, te 1, kn 1); 4 chunks (3 raw, 1 update)" in res.stdout


def test_clean_fixture_loads(tmp_path):
    ds = load_dataset(make_dataset(tmp_path / "clean"))
    assert isinstance(ds, Dataset) and ds.name == "clean" and not ds.closed_book
    assert [c.chunk_id for c in ds.raw_chunks] == ["sop-diet", "sop-bath", "sop-drops"]
    assert [c.chunk_id for c in ds.update_chunks] == ["upd-bath"]
    assert ds.chunk("upd-bath").supersedes == ["sop-bath"]
    assert str(ds.chunk("upd-bath").updated) == "2024-03-01"
    with pytest.raises(KeyError, match="nope"):
        ds.chunk("nope")
    q = ds.query("q-hi-1")
    assert q.search_text == q.query_en and ds.query("q-en-1").search_text == ds.query("q-en-1").query
    assert ds.query("q-en-2").update_check.superseded_any == ["15 days"]
    assert ds.query("q-kn-1").themes == ["patient_specific", "out_of_kb"]


def test_content_hash_is_stable_and_sensitive(tmp_path):
    a = load_dataset(make_dataset(tmp_path / "a"))
    b = load_dataset(make_dataset(tmp_path / "b"))
    assert a.content_hash() == b.content_hash() and len(a.content_hash()) == 64
    changed = copy.deepcopy(QUERIES)
    changed[0]["gt_response"] += " Avoid oily food."
    c = load_dataset(make_dataset(tmp_path / "c", queries=changed))
    assert c.content_hash() != a.content_hash()


def test_languages_table_is_one_source():
    assert LANGUAGES == {code: lang.name for code, lang in LANGUAGE_TABLE.items()}
    assert {"en", "hi", "ta", "te", "kn"} <= set(LANGUAGES) and LANGUAGES["kn"] == "Kannada"
    assert "out_of_kb" in THEMES and len(THEMES) == 6


# -- corrupted copies: each must exit 1 naming file, line and field ----------------------------
Mutation = Callable[[list[dict], list[dict]], None]


def _set(rows_key: str, index: int, **changes) -> Mutation:
    def mutate(chunks: list[dict], queries: list[dict]) -> None:
        row = (chunks if rows_key == "kb" else queries)[index]
        for k, v in changes.items():
            if v is _DELETE:
                row.pop(k, None)
            else:
                row[k] = v
    return mutate


_DELETE = object()

# (id, mutation, file, line, field, message fragment)
CORRUPTIONS: list[tuple[str, Mutation, str, int, str, str]] = [
    ("missing-gt", _set("q", 1, gt_response=_DELETE), "queries.jsonl", 2, "gt_response", "missing"),
    ("missing-chunk-text", _set("kb", 2, text=_DELETE), "kb.jsonl", 3, "text", "missing"),
    ("unknown-language", _set("q", 2, language="xx"), "queries.jsonl", 3, "language", "unknown language code 'xx'"),
    ("duplicate-query-id", _set("q", 4, query_id="q-en-1"), "queries.jsonl", 5, "query_id", "duplicate"),
    ("duplicate-chunk-id", _set("kb", 2, chunk_id="sop-diet"), "kb.jsonl", 3, "chunk_id", "duplicate"),
    ("empty-query", _set("q", 3, query="   "), "queries.jsonl", 4, "query", "must not be empty"),
    ("empty-gt", _set("q", 0, gt_response=""), "queries.jsonl", 1, "gt_response", "must not be empty"),
    ("empty-chunk-text", _set("kb", 0, text=""), "kb.jsonl", 1, "text", "must not be empty"),
    ("empty-title", _set("kb", 1, title=" "), "kb.jsonl", 2, "title", "must not be empty"),
    ("missing-kb-ref", _set("q", 2, kb_refs=["sop-drops", "sop-nothing"]), "queries.jsonl", 3, "kb_refs",
     "sop-nothing"),
    ("update-without-date", _set("kb", 3, updated=_DELETE), "kb.jsonl", 4, "updated", "required for update"),
    ("bad-date", _set("kb", 3, updated="2024-02-30"), "kb.jsonl", 4, "updated", "bad date"),
    ("query-en-missing", _set("q", 4, query_en=_DELETE), "queries.jsonl", 5, "query_en",
     "required when language is 'te'"),
    ("text-too-long", _set("kb", 1, text="word " * 4001), "kb.jsonl", 2, "text", "20,000"),
    ("query-too-long", _set("q", 0, query="x" * 20_001), "queries.jsonl", 1, "query", "20,000"),
    ("unknown-theme", _set("q", 1, themes=["cultural", "spelling"]), "queries.jsonl", 2, "themes", "'spelling'"),
    ("unknown-kind", _set("kb", 0, kind="faq"), "kb.jsonl", 1, "kind", "'raw' or 'update'"),
    ("supersedes-missing", _set("kb", 3, supersedes=["sop-gone"]), "kb.jsonl", 4, "supersedes", "sop-gone"),
    ("supersedes-update", _set("kb", 3, supersedes=["upd-bath"]), "kb.jsonl", 4, "supersedes", "not a raw chunk"),
    ("raw-supersedes", _set("kb", 0, supersedes=["sop-bath"]), "kb.jsonl", 1, "supersedes", "only update chunks"),
    ("bad-boolean", _set("q", 0, update_sensitive="perhaps"), "queries.jsonl", 1, "update_sensitive", "boolean"),
    ("out-of-kb-with-refs", _set("q", 5, kb_refs=["sop-diet"]), "queries.jsonl", 6, "kb_refs", "out_of_kb"),
    ("bad-update-check", _set("q", 1, update_check={"expect": ["7 days"]}), "queries.jsonl", 2,
     "update_check.expect", "unknown key"),
    ("id-not-string", _set("q", 0, query_id=["a"]), "queries.jsonl", 1, "query_id", "valid string"),
]


@pytest.mark.parametrize("name,mutate,file,line,field,fragment", CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_corrupted_dataset_fails_naming_file_line_field(tmp_path, name, mutate, file, line, field, fragment):
    chunks, queries = copy.deepcopy(CHUNKS), copy.deepcopy(QUERIES)
    mutate(chunks, queries)
    ds = make_dataset(tmp_path / name, chunks, queries)
    res = run_validate(ds)
    assert res.returncode == 1, res.stdout
    expected = f"{ds / file}:{line}: field {field}: "
    matching = [ln for ln in res.stdout.splitlines() if expected in ln]
    assert matching, f"no line containing {expected!r} in:\n{res.stdout}"
    assert any(fragment in ln for ln in matching), res.stdout
    assert "invalid:" in res.stdout


def _append_line(file: str, raw: bytes) -> Callable[[Path], None]:
    def corrupt(root: Path) -> None:
        with (root / file).open("ab") as fh:
            fh.write(raw)
    return corrupt


# (id, corrupt(root), file, line or None, fragment) for errors that have no field
LINE_CORRUPTIONS: list[tuple[str, Callable[[Path], None], str, int | None, str]] = [
    ("invalid-utf8", _append_line("queries.jsonl", b'{"query_id": "q9", "query": "caf\xe9"}\n'), "queries.jsonl", 7,
     "invalid UTF-8"),
    ("malformed-json", _append_line("queries.jsonl", b'{"query_id": "q9",\n'), "queries.jsonl", 7, "not valid JSON"),
    ("array-line", _append_line("kb.jsonl", b'["sop-x", "raw"]\n'), "kb.jsonl", 5, "got an array"),
    ("number-line", _append_line("queries.jsonl", b"\n42\n"), "queries.jsonl", 8, "got a number"),
    ("missing-queries-file", lambda root: (root / "queries.jsonl").unlink(), "queries.jsonl", None,
     "needs queries.jsonl"),
    ("two-queries-files", lambda root: (root / "queries.csv").write_text("query_id\n"), "queries.jsonl", None,
     "keep only one"),
    ("unreadable-parquet", lambda root: ((root / "kb.jsonl").unlink(), (root / "kb.parquet").write_bytes(b"PAR1xx")),
     "kb.parquet", None, "unreadable Parquet"),
    ("unreadable-csv", lambda root: ((root / "queries.jsonl").unlink(),
                                     (root / "queries.csv").write_text('query_id,query\nq1,"unclosed\n')),
     "queries.csv", 2, "unreadable CSV"),
]


@pytest.mark.parametrize("name,corrupt,file,line,fragment", LINE_CORRUPTIONS, ids=[c[0] for c in LINE_CORRUPTIONS])
def test_corrupted_file_fails_naming_file_and_line(tmp_path, name, corrupt, file, line, fragment):
    ds = make_dataset(tmp_path / name)
    corrupt(ds)
    res = run_validate(ds)
    assert res.returncode == 1, res.stdout
    expected = f"{ds / file}:{line}: " if line is not None else f"{ds / file}: "
    matching = [ln for ln in res.stdout.splitlines() if expected in ln]
    assert matching and any(fragment in ln for ln in matching), f"{expected!r} / {fragment!r} not in:\n{res.stdout}"


def test_all_errors_are_reported_not_just_the_first(tmp_path):
    chunks, queries = copy.deepcopy(CHUNKS), copy.deepcopy(QUERIES)
    queries[0]["language"] = "fr"
    queries[3]["gt_response"] = ""
    chunks[3].pop("updated")
    ds = make_dataset(tmp_path / "many", chunks, queries)
    (ds / "queries.jsonl").open("a").write("not json\n")
    res = run_validate(ds)
    assert res.returncode == 1
    for fragment in ["queries.jsonl:1: field language", "queries.jsonl:4: field gt_response",
                     "kb.jsonl:4: field updated", "queries.jsonl:7: not valid JSON"]:
        assert fragment in res.stdout, res.stdout
    assert "invalid: 4 errors" in res.stdout
    _, issues = validate(ds)
    assert sum(i.severity == "error" for i in issues) == 4


def test_load_dataset_raises_first_error_with_count(tmp_path):
    queries = copy.deepcopy(QUERIES)
    queries[1]["language"] = "xx"
    queries[2]["gt_response"] = ""
    ds = make_dataset(tmp_path / "bad", queries=queries)
    with pytest.raises(UserError) as exc:
        load_dataset(ds)
    msg = str(exc.value)
    assert msg.startswith(f"{ds / 'queries.jsonl'}:2: field language")
    assert "(+1 more; run `python -m pipeline validate" in msg


# -- other formats, closed-book, warnings, no writes ---------------------------------------------
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_csv_and_parquet_load_identically(tmp_path, fmt):
    reference = load_dataset(make_dataset(tmp_path / "jsonl"))
    other_path = make_dataset(tmp_path / fmt, fmt=fmt)
    assert not list(other_path.glob("*.jsonl"))
    other = load_dataset(other_path)
    assert other.chunks == reference.chunks
    assert other.queries == reference.queries
    assert other.content_hash() == reference.content_hash()
    assert run_validate(other_path).returncode == 0


def test_csv_row_numbers_count_header_as_line_1(tmp_path):
    queries = copy.deepcopy(QUERIES)
    queries[2]["query_en"] = None
    ds = make_dataset(tmp_path / "csvbad", queries=queries, fmt="csv")
    res = run_validate(ds)
    assert res.returncode == 1
    assert f"{ds / 'queries.csv'}:4: field query_en: required when language is 'hi'" in res.stdout


def test_csv_booleans_and_lists(tmp_path):
    ds = make_dataset(tmp_path / "csv", fmt="csv")
    text = (ds / "queries.csv").read_text().replace(",true,", ",1,").replace(",false,", ",0,")
    (ds / "queries.csv").write_text(text)
    loaded = load_dataset(ds)
    assert loaded.query("q-en-2").update_sensitive is True and loaded.query("q-en-1").update_sensitive is False
    assert loaded.query("q-kn-1").themes == ["patient_specific", "out_of_kb"]
    assert loaded.chunk("upd-bath").supersedes == ["sop-bath"]


def test_closed_book_folder_and_single_file_are_valid(tmp_path):
    queries = [{k: v for k, v in q.items() if k not in ("kb_refs", "update_sensitive", "update_check")}
               for q in QUERIES]
    ds = make_dataset(tmp_path / "medqa", chunks=None, queries=queries)
    res = run_validate(ds)
    assert res.returncode == 0, res.stdout
    assert "closed-book" in res.stdout
    loaded = load_dataset(ds)
    assert loaded.closed_book and loaded.chunks == [] and len(loaded.queries) == 6
    single = load_dataset(ds / "queries.jsonl")
    assert single.closed_book and single.name == "medqa" and single.queries == loaded.queries
    assert run_validate(ds / "queries.jsonl").returncode == 0
    (ds / "queries.jsonl").rename(tmp_path / "pubmedqa.jsonl")
    other = load_dataset(tmp_path / "pubmedqa.jsonl")
    assert other.closed_book and other.name == "pubmedqa" and len(other.queries) == 6


def test_queries_file_beside_a_kb_means_the_folder(tmp_path):
    ds = make_dataset(tmp_path / "full")
    assert load_dataset(ds / "queries.jsonl").content_hash() == load_dataset(ds).content_hash()


def test_closed_book_rejects_kb_refs(tmp_path):
    ds = make_dataset(tmp_path / "cb", chunks=None)
    res = run_validate(ds)
    assert res.returncode == 1
    assert f"{ds / 'queries.jsonl'}:1: field kb_refs: must be empty" in res.stdout


def test_romanized_hindi_is_a_warning_not_an_error(tmp_path):
    queries = copy.deepcopy(QUERIES)
    queries.append({"query_id": "q-hi-rom", "language": "hi",
                    "query": "Agar operation ke baad pain ho raha hai, to kya karna hai?",
                    "query_en": "If there is pain after the surgery, what should I do?",
                    "gt_response": "Take the prescribed painkiller.", "themes": ["code_mixing"],
                    "kb_refs": ["sop-drops"], "update_sensitive": False})
    ds = make_dataset(tmp_path / "rom", queries=queries)
    res = run_validate(ds)
    assert res.returncode == 0, res.stdout
    warnings = [ln for ln in res.stdout.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and f"{ds / 'queries.jsonl'}:7: field query" in warnings[0]
    assert "Devanagari" in warnings[0] and "1 warning" in res.stdout


def test_wrong_script_for_language_warns(tmp_path):
    queries = copy.deepcopy(QUERIES)
    queries[3]["language"] = "kn"  # the text is Tamil
    _, issues = validate(make_dataset(tmp_path / "script", queries=queries))
    assert [(i.line, i.severity) for i in issues] == [(4, "warning")]
    assert "Kannada" in issues[0].message


@pytest.mark.parametrize("clean", [True, False])
def test_validation_writes_nothing(tmp_path, clean):
    queries = copy.deepcopy(QUERIES)
    if not clean:
        queries[0]["language"] = "xx"
    ds = make_dataset(tmp_path / "ro", queries=queries)
    for fmt in ("csv", "parquet"):
        make_dataset(tmp_path / f"ro-{fmt}", queries=queries, fmt=fmt)
    before = listing(tmp_path)
    for path in [ds, ds / "queries.jsonl", tmp_path / "ro-csv", tmp_path / "ro-parquet"]:
        assert run_validate(path).returncode == (0 if clean else 1)
    validate(ds)
    assert listing(tmp_path) == before


def test_missing_path_is_an_error(tmp_path):
    res = run_validate(tmp_path / "nowhere")
    assert res.returncode == 1 and "not found" in res.stdout


# -- the bundled cataract dataset ------------------------------------------------------------------
CATARACT = ROOT / "data" / "cataract"


def _cataract_complete() -> bool:
    q = CATARACT / "queries.jsonl"
    return (CATARACT / "kb.jsonl").is_file() and q.is_file() and len(q.read_text(encoding="utf-8").splitlines()) >= 150


needs_cataract = pytest.mark.skipif(not _cataract_complete(), reason="data/cataract is not complete yet")


@pytest.fixture(scope="module")
def cataract() -> Dataset:
    return load_dataset(CATARACT)


@needs_cataract
def test_cataract_validates():
    res = run_validate(CATARACT)
    assert res.returncode == 0, res.stdout[-3000:]
    assert "ok " in res.stdout


@needs_cataract
def test_cataract_minimum_counts(cataract):
    langs = Counter(q.language for q in cataract.queries)
    themes = Counter(t for q in cataract.queries for t in q.themes)
    assert len(cataract.raw_chunks) >= 60
    assert len(cataract.update_chunks) >= 12
    assert len(cataract.queries) >= 150
    assert langs["en"] >= 80
    for code in ("hi", "ta", "te", "kn"):
        assert langs[code] >= 15, (code, langs)
    assert themes["out_of_kb"] >= 10
    assert sum(q.update_sensitive for q in cataract.queries) >= 8


SCRIPT_BLOCKS = {"hi": (0x0900, 0x097F), "ta": (0x0B80, 0x0BFF), "te": (0x0C00, 0x0C7F), "kn": (0x0C80, 0x0CFF)}


@needs_cataract
def test_cataract_indic_queries_use_their_script(cataract):
    wrong = [q.query_id for q in cataract.queries if q.language in SCRIPT_BLOCKS
             and not any(SCRIPT_BLOCKS[q.language][0] <= ord(ch) <= SCRIPT_BLOCKS[q.language][1]
                         and ch.isalpha() for ch in q.query)]
    assert wrong == []


@needs_cataract
def test_cataract_references_and_dates(cataract):
    ids = {c.chunk_id for c in cataract.chunks}
    assert all(ref in ids for q in cataract.queries for ref in q.kb_refs)
    assert all(c.updated is not None for c in cataract.update_chunks)
    assert all(cataract.chunk(s).kind == "raw" for c in cataract.update_chunks for s in c.supersedes)
