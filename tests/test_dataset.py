"""Dataset validation: a small valid fixture, corrupted copies of it through the CLI, other formats, bundled data."""

from __future__ import annotations

import copy
import csv
import hashlib
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
                if isinstance(v, list) and any(isinstance(i, dict) for i in v):
                    v = json.dumps(v)
                elif isinstance(v, list):
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
    # optional fields (docs/datasets.md)
    ("bad-asked-on", _set("q", 0, asked_on="2024-13-01"), "queries.jsonl", 1, "asked_on", "bad date"),
    ("asked-before-update", _set("q", 1, asked_on="2024-02-01"), "queries.jsonl", 2, "kb_refs", "after asked_on"),
    ("unknown-script", _set("q", 0, script="roman"), "queries.jsonl", 1, "script", "'native' or 'latin'"),
    ("english-latin-script", _set("q", 0, script="latin"), "queries.jsonl", 1, "script", "English is written"),
    ("native-but-romanized", _set("q", 2, query="Operation ke baad drops kitni baar?", script="native"),
     "queries.jsonl", 3, "script", "no Devanagari letters"),
    ("latin-but-native", _set("q", 2, script="latin"), "queries.jsonl", 3, "script", "mostly Devanagari"),
    ("variant-missing", _set("q", 2, variant_of="q-zz"), "queries.jsonl", 3, "variant_of", "'q-zz', which is not"),
    ("variant-self", _set("q", 2, variant_of="q-hi-1"), "queries.jsonl", 3, "variant_of", "the query itself"),
    ("one-option", _set("q", 0, options={"A": "Yes"}, answer="A"), "queries.jsonl", 1, "options", "at least 2"),
    ("option-gap", _set("q", 0, options={"A": "Yes", "C": "No"}, answer="A"), "queries.jsonl", 1, "options",
     "without gaps"),
    ("option-k", _set("q", 0, options={c: c for c in "ABCDEFGHIJK"}, answer="A"), "queries.jsonl", 1, "options",
     "at most J"),
    ("option-blank", _set("q", 0, options={"A": " ", "B": "No"}, answer="B"), "queries.jsonl", 1, "options.A",
     "must not be empty"),
    ("answer-not-an-option", _set("q", 0, options={"A": "Yes", "B": "No"}, answer="C"), "queries.jsonl", 1, "answer",
     "not one of the options"),
    ("answer-without-options", _set("q", 0, answer="A"), "queries.jsonl", 1, "answer", "without options"),
    ("options-without-answer", _set("q", 0, options={"A": "Yes", "B": "No"}), "queries.jsonl", 1, "answer",
     "missing: options are given"),
    ("criterion-without-text", _set("q", 0, rubric=[{"points": 5, "tags": []}]), "queries.jsonl", 1,
     "rubric[0].criterion", "needs its text"),
    ("criterion-blank-text", _set("q", 0, rubric=[{"criterion": " ", "points": 5}]), "queries.jsonl", 1,
     "rubric[0].criterion", "must not be empty"),
    ("criterion-without-points", _set("q", 0, rubric=[{"criterion": "Says a light breakfast.", "points": 4},
                                                      {"criterion": "Says fasting.", "tags": []}]),
     "queries.jsonl", 1, "rubric[1].points", "needs its points"),
    ("criterion-null-points", _set("q", 0, rubric=[{"criterion": "Says a light breakfast.", "points": None}]),
     "queries.jsonl", 1, "rubric[0].points", "has no points"),
    ("criterion-zero-points", _set("q", 0, rubric=[{"criterion": "Says a light breakfast.", "points": 0}]),
     "queries.jsonl", 1, "rubric[0].points", "must not be 0"),
    ("rubric-no-positive", _set("q", 0, rubric=[{"criterion": "Says fasting.", "points": -5}]), "queries.jsonl", 1,
     "rubric", "no criterion has positive points"),
    ("rubric-empty", _set("q", 0, rubric=[]), "queries.jsonl", 1, "rubric", "has no criteria"),
    ("criterion-unknown-key", _set("q", 0, rubric=[{"criterion": "Says a light breakfast.", "points": 4,
                                                    "weight": 2}]),
     "queries.jsonl", 1, "rubric[0].weight", "unknown key (expected criterion, points, tags)"),
    ("messages-end-with-assistant", _set("q", 0, messages=[{"role": "user", "content": "Hi"},
                                                          {"role": "assistant", "content": "Hello"}]),
     "queries.jsonl", 1, "messages", "last message must be the user's"),
    ("message-bad-role", _set("q", 0, messages=[{"role": "doctor", "content": "Hi"}]), "queries.jsonl", 1,
     "messages[0].role", "'system', 'user' or 'assistant'"),
    ("message-late-system", _set("q", 0, messages=[{"role": "user", "content": "Hi"},
                                                  {"role": "system", "content": "Be brief"},
                                                  {"role": "user", "content": "Hi"}]),
     "queries.jsonl", 1, "messages", "only come first"),
    ("query-en-source-alone", _set("q", 0, query_en_source="machine"), "queries.jsonl", 1, "query_en_source",
     "without query_en"),
    ("query-en-source-unknown", _set("q", 2, query_en_source="google"), "queries.jsonl", 3, "query_en_source",
     "'human' or 'machine'"),
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
    queries[2]["themes"] = ["spelling"]
    ds = make_dataset(tmp_path / "csvbad", queries=queries, fmt="csv")
    res = run_validate(ds)
    assert res.returncode == 1
    assert f"{ds / 'queries.csv'}:4: field themes: " in res.stdout


def test_a_non_english_query_without_english_rendering_is_a_warning_for_the_translator(tmp_path):
    queries = copy.deepcopy(QUERIES)
    queries[4]["query_en"] = None
    res = run_validate(make_dataset(tmp_path / "noen", queries=queries))
    assert res.returncode == 0
    assert "queries.jsonl:5: field query_en: missing" in res.stdout and "translator" in res.stdout


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


# -- optional query fields ------------------------------------------------------------------------
RUBRIC = [{"criterion": "Says a light breakfast two hours before surgery.", "points": 6, "tags": ["axis:accuracy"]},
          {"criterion": "Tells the patient to fast from the night before.", "points": -4, "tags": ["axis:accuracy"]},
          {"criterion": "Answers in one or two sentences.", "points": 1.5, "tags": []}]
MESSAGES = [{"role": "user", "content": "My father has his operation tomorrow."},
            {"role": "assistant", "content": "I can help. What would you like to know?"},
            {"role": "user", "content": "Can he take chapati, Puri etc on the day of surgery?"}]


def _with_optional_fields() -> list[dict]:
    queries = copy.deepcopy(QUERIES)
    queries[0].update(asked_on="2024-04-02", options={"a": "Yes, a light breakfast", "b": "No, nothing at all"},
                      answer="a", rubric=RUBRIC, messages=MESSAGES)
    queries[1].update(asked_on="2024-03-05")
    queries[2].update(query_en_source="machine", script="native")
    queries.append({"query_id": "q-hi-rom", "language": "hi", "query": "Operation ke baad drops kitni baar dalni hai?",
                    "query_en": "How many times should I put the drops after the operation?",
                    "gt_response": "Use the prescribed eye drops four times a day for a month.",
                    "themes": ["code_mixing"], "kb_refs": ["sop-drops"], "script": "latin", "variant_of": "q-hi-1"})
    return queries


def test_optional_fields_load(tmp_path):
    ds = make_dataset(tmp_path / "opt", queries=_with_optional_fields())
    res = run_validate(ds)
    assert res.returncode == 0 and "warning" not in res.stdout, res.stdout
    assert "[1 multiple-choice, 1 with a rubric, 1 multi-turn]" in res.stdout
    loaded = load_dataset(ds)
    q = loaded.query("q-en-1")
    assert str(q.asked_on) == "2024-04-02" and q.multiple_choice
    assert q.options == {"A": "Yes, a light breakfast", "B": "No, nothing at all"} and q.answer == "A"
    assert [c.points for c in q.rubric] == [6, -4, 1.5] and isinstance(q.rubric[0].points, int)
    assert q.rubric[1].tags == ["axis:accuracy"]
    assert [t.role for t in q.messages] == ["user", "assistant", "user"] and q.messages[-1].content == q.query
    assert q.script == "native" and q.query_en_source is None
    assert loaded.query("q-hi-1").query_en_source == "machine"
    assert loaded.query("q-ta-1").query_en_source == "human"  # the default when query_en is given
    rom = loaded.query("q-hi-rom")
    assert rom.script == "latin" and rom.variant_of == "q-hi-1"
    assert not loaded.query("q-en-2").multiple_choice and loaded.query("q-en-2").rubric is None


def test_script_is_derived_when_absent(tmp_path):
    queries = _with_optional_fields()
    del queries[-1]["script"]
    ds = make_dataset(tmp_path / "derived", queries=queries)
    dataset, issues = validate(ds)
    assert dataset.query("q-hi-rom").script == "latin" and dataset.query("q-hi-1").script == "native"
    assert dataset.query("q-kn-1").script == "native" and dataset.query("q-en-1").script == "native"
    # romanized without saying so is worth a look; saying script: latin (previous test) silences it
    assert [(i.line, i.field, i.severity) for i in issues] == [(7, "query", "warning")]
    assert "script: latin" in issues[0].message


def test_content_hash_ignores_absent_and_derived_fields(tmp_path):
    """A dataset without the optional fields hashes as it did before they existed (its LanceDB index is kept)."""
    legacy = ("query_id", "language", "query", "query_en", "gt_response", "themes", "kb_refs", "update_sensitive",
              "update_check")
    ds = load_dataset(make_dataset(tmp_path / "legacy"))
    payload = {"chunks": [c.model_dump(mode="json") for c in ds.chunks],
               "queries": [{k: q.model_dump(mode="json")[k] for k in legacy} for q in ds.queries]}
    old = hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
    assert ds.content_hash() == old
    queries = copy.deepcopy(QUERIES)
    queries[2]["script"] = "native"  # the derived value, written out: same content
    queries[3]["query_en_source"] = "human"  # the default, written out
    assert load_dataset(make_dataset(tmp_path / "explicit", queries=queries)).content_hash() == old
    queries[0]["asked_on"] = "2024-04-02"
    assert load_dataset(make_dataset(tmp_path / "dated", queries=queries)).content_hash() != old


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_optional_fields_in_csv_and_parquet(tmp_path, fmt):
    queries = _with_optional_fields()
    reference = load_dataset(make_dataset(tmp_path / "jsonl", queries=queries))
    if fmt == "parquet":  # a Parquet column holds one type: JSON text for the nested fields, as in CSV
        for q in queries:
            for key in ("options", "rubric", "messages"):
                if key in q:
                    q[key] = json.dumps(q[key])
    other = load_dataset(make_dataset(tmp_path / fmt, queries=queries, fmt=fmt))
    assert other.queries == reference.queries
    assert other.content_hash() == reference.content_hash()


def test_options_as_bad_json_text_names_the_field(tmp_path):
    queries = copy.deepcopy(QUERIES)
    queries[0]["options"] = '{"A": "Yes", "B": '
    queries[0]["answer"] = "A"
    _, issues = validate(make_dataset(tmp_path / "badjson", queries=queries))
    assert any(i.field == "options" and "not valid JSON" in i.message for i in issues), issues


def test_messages_that_disagree_with_the_query_warn(tmp_path):
    queries = copy.deepcopy(QUERIES)
    queries[0]["messages"] = [{"role": "user", "content": "Something else entirely?"}]
    _, issues = validate(make_dataset(tmp_path / "msg", queries=queries))
    assert [(i.line, i.field, i.severity) for i in issues] == [(1, "query", "warning")]


# -- rubrics.jsonl beside the queries ----------------------------------------------------------------
def test_rubrics_file_is_merged_by_query_id(tmp_path):
    ds = make_dataset(tmp_path / "rub")
    write_jsonl(ds / "rubrics.jsonl", [{"query_id": "q-en-1", "rubric": RUBRIC},
                                       {"query_id": "q-kn-1", "rubric": RUBRIC[:1]}])
    res = run_validate(ds)
    assert res.returncode == 0 and "warning" not in res.stdout, res.stdout
    loaded = load_dataset(ds)
    assert [c.points for c in loaded.query("q-en-1").rubric] == [6, -4, 1.5]
    assert len(loaded.query("q-kn-1").rubric) == 1 and loaded.query("q-en-2").rubric is None
    assert load_dataset(ds / "queries.jsonl").queries == loaded.queries  # the queries file means the folder


RUBRIC_FILE_ERRORS = [
    ("unknown-query", [{"query_id": "q-nope", "rubric": RUBRIC}], 1, "query_id", "'q-nope', which is not"),
    ("duplicate", [{"query_id": "q-en-1", "rubric": RUBRIC}, {"query_id": "q-en-1", "rubric": RUBRIC}], 2,
     "query_id", "duplicate"),
    ("no-points", [{"query_id": "q-en-1", "rubric": [{"criterion": "Says a light breakfast."}]}], 1,
     "rubric[0].points", "needs its points"),
    ("no-positive", [{"query_id": "q-en-1", "rubric": [{"criterion": "Says fasting.", "points": -2}]}], 1,
     "rubric", "no criterion has positive points"),
    ("no-rubric", [{"query_id": "q-en-1"}], 1, "rubric", "missing"),
    ("also-inline", [{"query_id": "q-en-2", "rubric": RUBRIC}], 1, "query_id", "has its own rubric"),
]


@pytest.mark.parametrize("name,rows,line,field,fragment", RUBRIC_FILE_ERRORS, ids=[e[0] for e in RUBRIC_FILE_ERRORS])
def test_rubrics_file_errors_name_file_line_field(tmp_path, name, rows, line, field, fragment):
    queries = copy.deepcopy(QUERIES)
    queries[1]["rubric"] = RUBRIC
    ds = make_dataset(tmp_path / name, queries=queries)
    write_jsonl(ds / "rubrics.jsonl", rows)
    dataset, issues = validate(ds)
    assert dataset is None
    hits = [i for i in issues if i.file == str(ds / "rubrics.jsonl") and i.line == line and i.field == field]
    assert hits and any(fragment in i.message for i in hits), issues


# -- a dataset's own prompts --------------------------------------------------------------------------
def test_dataset_prompt_files_are_checked(tmp_path):
    ds = make_dataset(tmp_path / "prompts")
    (ds / "prompts").mkdir()
    (ds / "prompts" / "generation_system.txt").write_text("Answer in {response_lang}. {refusal}\n", encoding="utf-8")
    assert validate(ds)[1] == []
    (ds / "prompts" / "generation_user.txt").write_text("{query}\n{kb}\n", encoding="utf-8")
    (ds / "prompts" / "notes.txt").write_text("to do\n", encoding="utf-8")
    dataset, issues = validate(ds)
    assert dataset is None
    by_file = {Path(i.file).name: i for i in issues}
    assert by_file["generation_user.txt"].severity == "error" and "{kb}" in by_file["generation_user.txt"].message
    assert by_file["notes.txt"].severity == "warning" and "not a prompt file" in by_file["notes.txt"].message


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
    """Native-script Indic queries are written in their script; romanized ones say script: latin."""
    def own_letters(q) -> bool:
        lo, hi = SCRIPT_BLOCKS[q.language]
        return any(lo <= ord(ch) <= hi and ch.isalpha() for ch in q.query)

    indic = [q for q in cataract.queries if q.language in SCRIPT_BLOCKS]
    assert [q.query_id for q in indic if q.script == "native" and not own_letters(q)] == []
    assert [q.query_id for q in indic if q.script == "latin" and own_letters(q)] == []


@needs_cataract
def test_cataract_references_and_dates(cataract):
    ids = {c.chunk_id for c in cataract.chunks}
    assert all(ref in ids for q in cataract.queries for ref in q.kb_refs)
    assert all(c.updated is not None for c in cataract.update_chunks)
    assert all(cataract.chunk(s).kind == "raw" for c in cataract.update_chunks for s in c.supersedes)


@needs_cataract
def test_cataract_rubrics_are_merged(cataract):
    lines = (CATARACT / "rubrics.jsonl").read_text(encoding="utf-8").splitlines()
    with_rubric = [q for q in cataract.queries if q.rubric is not None]
    assert len(with_rubric) == len([ln for ln in lines if ln.strip()]) >= 40
    assert all(4 <= len(q.rubric) <= 10 for q in with_rubric)
    assert any(c.points < 0 for q in with_rubric for c in q.rubric)


@pytest.mark.parametrize("name", ["cataract", "eyecare-qa"])
def test_bundled_datasets_validate_without_warnings(name):
    res = run_validate(ROOT / "data" / name)
    assert res.returncode == 0 and "warning" not in res.stdout, res.stdout[-3000:]


def test_eyecare_qa_keeps_options_and_answers():
    ds = load_dataset(ROOT / "data" / "eyecare-qa")
    mc = [q for q in ds.queries if q.multiple_choice]
    assert ds.closed_book and len(mc) >= 40
    assert all(q.answer in q.options and len(q.options) >= 2 for q in mc)
    assert all(q.gt_response.startswith(f"{q.answer}. ") for q in mc)
