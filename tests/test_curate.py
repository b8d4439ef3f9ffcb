"""curate-queries: every planted duplicate, identifier, greeting and media placeholder is excluded (or masked)
with its reason, identifiers never reach queries.jsonl or the database, bad logs are one line with nothing
written; the worked example builds and runs end to end (PII detection is measured in tests/test_pii.py)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pipeline.dataset import validate
from pipeline.dataset.curate import curate
from pipeline.dataset.ingest import ingest
from pipeline.dataset.pii import PII_KINDS
from tests.support.browser import ARTIFACTS, main_text, no_exception, serve_app, settle, wait_for_text

REPO = Path(__file__).resolve().parent.parent
PII = {  # planted identifier -> its kind
    "+91 98765 43210": "PHONE", "9840012345": "PHONE", "98450 12345": "PHONE", "sunita.rao72@gmail.com": "EMAIL",
    "4821 7730 1296": "AADHAAR", "BKTPM4821K": "PAN", "Ravi Shankar": "NAME", "Lakshmi Devi": "NAME",
}
EXAMPLE_PII = ["+91 98765 43210", "9840012345", "sunita.rao72@gmail.com", "4821 7730 1296", "BKTPM4821K",
               "Ravi Shankar", "Lakshmi Devi", "सुनीता शर्मा", "९८२६० ७७४१९", "कमला देवी", "2024/41876", "செல்வி",
               "௬௧௨௩ ௪௫௬௭ ௮௯௦௧", "காமராஜர் தெரு, தஞ்சாவூர் 613001", "Rakesh Yadav",
               "73-1190-4482-6650"]  # planted in data/raw-example/chatbot_log.csv
ROWS = [  # (message, answer, approved, expected: reason/detail of exclusion, or "kept"/"no_gt")
    ("Can I take my BP tablet on the morning of surgery?", "Yes, with a sip of water.", "yes", "kept"),
    ("Hi", "", "", "greeting"),
    ("<Media omitted>", "", "", "media"),
    ("🙏🙏 👍", "", "", "emoji-only"),
    ("", "", "", "empty"),
    ("Thank you doctor", "", "", "greeting"),
    ("can i take my BP  tablet on the morning of surgery?", "Yes.", "yes", "duplicate"),
    ("I can&apos;t see clearly after surgery. Is it normal?", "It improves over weeks.", "TRUE", "kept"),
    ("I can't see clearly after surgery. Is it normal?", "", "", "duplicate"),
    ("my number is +91 98765 43210 please call me", "", "", "PHONE"),
    ("call me 9840012345 urgent eye pain", "", "", "PHONE"),
    ("son's whatsapp 98450 12345, when is review", "", "", "PHONE"),
    ("Please send report to sunita.rao72@gmail.com for my mother", "", "", "EMAIL"),
    ("aadhaar 4821 7730 1296 is it needed for free surgery", "", "", "AADHAAR"),
    ("PAN card BKTPM4821K is required for insurance claim?", "", "", "PAN"),
    ("My name is Ravi Shankar, can I get surgery under the scheme?", "", "", "NAME"),
    ("patient Lakshmi Devi bed 12 has pain in the operated eye", "", "", "NAME"),
    ("When will I get new glasses after cataract operation?", "After four to six weeks.", "0", "no_gt"),
    ("Operation ke baad kitne din tak aankh mein paani nahi dalna hai?", "Two weeks.", "1", "kept"),
    ("Can I take my BP tablets on the morning of the surgery?", "Yes.", "yes", "kept"),  # a near-duplicate
]


def write_log(path: Path, rows=ROWS) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["timestamp", "message", "answer", "approved"])
        for i, (message, answer, approved, _) in enumerate(rows):
            out.writerow([f"2024-01-{i % 31 + 1:02d} 09:{i % 60:02d}", message, answer, approved])
    return path


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_planted_noise_is_excluded_with_its_reason_and_pii_never_in_clear(tmp_path):
    out = tmp_path / "ds"
    report = curate(write_log(tmp_path / "log.csv"), out)
    excluded = {e["row"]: e for e in jsonl(out / "excluded.jsonl")}
    queries = {q["query_id"]: q for q in jsonl(out / "queries.jsonl")}
    without = {q["query_id"]: q for q in jsonl(out / "queries_without_gt.jsonl")}
    for i, (_, _, _, expected) in enumerate(ROWS):
        row, qid = i + 2, f"log-{i + 2:05d}"
        if expected == "kept":
            assert qid in queries and queries[qid]["gt_response"], row
        elif expected == "no_gt":
            assert qid in without and "gt_response" not in without[qid]
        else:
            assert row in excluded, (row, expected)
            e = excluded[row]
            assert e["detail"] == expected, e
            assert e["reason"] == ("pii" if expected in PII_KINDS else
                                   "duplicate" if expected == "duplicate" else "not_health")
    assert excluded[8]["duplicate_of"] == "log-00002" and excluded[10]["duplicate_of"] == "log-00009"
    assert queries["log-00009"]["query"] == "I can't see clearly after surgery. Is it normal?"  # entity decoded
    assert queries["log-00009"]["asked_on"] == "2024-01-08"
    assert queries["log-00020"]["language"] == "hi" and queries["log-00020"]["script"] == "latin"
    assert report["queries"] == 4 and report["without_ground_truth"] == 1
    assert {"query_id": "log-00021", "similar_to": "log-00002"} == {
        k: v for k, v in report["near_duplicates"][0].items() if k != "score"}
    for name in ("queries.jsonl", "queries_without_gt.jsonl", "excluded.jsonl", "curate_report.json"):
        text = (out / name).read_text(encoding="utf-8")
        for value in PII:
            assert value not in text, (name, value)
    assert "<PHONE>" in (out / "excluded.jsonl").read_text()
    dataset, issues = validate(out)
    assert dataset is not None, [str(i) for i in issues if i.severity == "error"]


def test_mask_keeps_the_question_with_placeholders(tmp_path):
    out = tmp_path / "ds"
    curate(write_log(tmp_path / "log.csv"), out, pii="mask")
    kept = jsonl(out / "queries.jsonl") + jsonl(out / "queries_without_gt.jsonl")
    texts = " ".join(q["query"] for q in kept)
    for tag in ("<PHONE>", "<EMAIL>", "<AADHAAR>", "<PAN>", "<NAME>"):
        assert tag in texts
    for value in PII:
        assert value not in texts
    assert not [e for e in jsonl(out / "excluded.jsonl") if e["reason"] == "pii"]


@pytest.mark.parametrize(("content", "args", "expected"), [
    ("timestamp,msg\n2024-01-01,hello\n", [], "log.csv:2: no 'message' field"),
    ("timestamp,message,answer,approved\n2024-01-01,Can I bathe?,No,maybe\n", [], "log.csv:2: field approved"),
    ("timestamp,message\nlast tuesday,Can I bathe?\n", [], "log.csv:2: field timestamp"),
])
def test_bad_log_is_one_line_naming_file_and_row(tmp_path, content, args, expected):
    log = tmp_path / "log.csv"
    log.write_text(content, encoding="utf-8")
    out = tmp_path / "ds"
    result = subprocess.run([sys.executable, "-m", "pipeline", "curate-queries", str(log), "--out", str(out), *args],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert expected in lines[0]
    assert not out.exists()


@pytest.fixture(scope="module")
def built_example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The worked example built as docs/ingest.md says (in-process: faster), and a run of the extractive baseline
    on it: (dataset folder, database)."""
    example = REPO / "data" / "raw-example"
    tmp = tmp_path_factory.mktemp("example")
    out, db = tmp / "eyecare-ingested", tmp / "r.duckdb"
    ingest([example / "sources"], out)
    ingest([example / "chatbot_log.csv"], out, kind="update", qa_cols=("message", "answer", "timestamp"))
    curate(example / "chatbot_log.csv", out)
    config = tmp / "config.yaml"
    config.write_text((REPO / "configs" / "eyecare-ingested.yaml").read_text().replace(
        "dataset: data/eyecare-ingested", f"dataset: {out}"))
    result = subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", str(config), "--db", str(db),
                             "--models", "extractive/top-sentences", "--stages", "retrieve,generate", "--limit", "4"],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return out, db


def test_worked_example_builds_validates_and_runs_without_identifiers_in_the_database(built_example):
    out, db = built_example
    committed = REPO / "data" / "eyecare-ingested"
    written = sorted(f.name for f in out.iterdir())  # the committed dataset is what the commands build, byte for byte
    assert written == sorted(f.name for f in committed.iterdir() if f.name != "README.md")  # README: by hand
    for name in written:  # chunks, queries, exclusions and both reports (no time or path in them)
        assert (out / name).read_bytes() == (committed / name).read_bytes(), name
    log = (REPO / "data" / "raw-example" / "chatbot_log.csv").read_text(encoding="utf-8")
    assert all(value in log for value in EXAMPLE_PII)
    with duckdb.connect(str(db), read_only=True) as con:
        responses = "SELECT count(*) FROM responses WHERE model_id = 'extractive/top-sentences'"
        assert con.execute(responses).fetchone()[0] == 4
        assert con.execute("SELECT count(*) FROM queries").fetchone()[0] >= 4
        columns = con.execute("SELECT table_name, column_name FROM information_schema.columns "
                              "WHERE data_type = 'VARCHAR'").fetchall()
        for table, column in columns:
            for value in EXAMPLE_PII:
                hits = con.execute(f'SELECT count(*) FROM "{table}" WHERE "{column}" LIKE ?',  # names from the catalog
                                   [f"%{value}%"]).fetchone()[0]
                assert hits == 0, (table, column, value)


@pytest.mark.browser  # `page` needs the `chromium` fixture: skipped, or failed under PARIKSHA_REQUIRE_BROWSER
def test_dataset_page_shows_sources_and_masked_exclusions(built_example, page):
    _, db = built_example
    with serve_app(db) as url:
        page.goto(f"{url}/dataset")
        settle(page)
        # tables draw after the script, the exclusions' after the sources' (a race); a grid's cells out of its view
        # are in the page but hidden: wait for the visible text the assertions read
        wait_for_text(page, "preop-sop.pdf", "postop-care.docx", "eye-drops-faq.html", "insurance-and-costs.md",
                      "not_health", "pii", "duplicate")
        no_exception(page)
        text = main_text(page)
        for name in ("preop-sop.pdf", "postop-care.docx", "eye-drops-faq.html", "insurance-and-costs.md"):
            assert name in text, text[:3000]
        assert "not_health" in text and "pii" in text and "duplicate" in text
        page.goto(f"{url}/dataset?ds_reason=pii")  # the reason picker is bound to the URL
        settle(page)
        page.get_by_text("<PHONE>").first.wait_for(timeout=120_000)
        no_exception(page)
        text = main_text(page)
        assert "<PHONE>" in text and "<NAME>" in text and "<EMAIL>" in text
        for value in EXAMPLE_PII:
            assert value not in text
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dataset.png"), full_page=True)


def test_validate_after_curating_counts_repeated_warnings_instead_of_a_line_a_message(tmp_path, capsys):
    """A log of Hindi questions has no English renderings: validate's console gives a few examples and a count
    (the 200k-message log printed 33,816 `query_en` lines), and still every error."""
    from pipeline.dataset.curate import curate_command

    questions = [f"ऑपरेशन के {n} दिन बाद क्या मैं सिर धो सकता हूं?" for n in range(2, 42)]
    log = tmp_path / "log.csv"
    with log.open("w", encoding="utf-8", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["timestamp", "message", "answer", "approved"])
        out.writerows([f"2024-02-{1 + n % 28:02d} 10:00", q, "दस दिन बाद।", "yes"] for n, q in enumerate(questions))
    assert curate_command(log, tmp_path / "ds") == 0
    printed = capsys.readouterr().out
    lines = [line for line in printed.splitlines() if "query_en" in line]
    assert len(lines) == 4, printed  # three examples and one count
    assert "37 more like these" in lines[-1] and "queries.jsonl" in lines[-1]


def test_progress_written_to_a_log_is_a_line_per_stage(tmp_path, capsys):
    """Not a terminal (a log, CI): no live bar, but one line as each stage ends, so a long curate shows where it is
    (the 200k-message log printed nothing for 20 minutes)."""
    curate(write_log(tmp_path / "log.csv"), tmp_path / "ds", progress=True)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("curate-queries log.csv")]
    assert [line.split(": ")[1].split(" done")[0] for line in lines] == ["read", "messages", "near_duplicates",
                                                                         "write"]


def test_workers_write_the_same_files_as_one_process(tmp_path, monkeypatch):
    """The messages spread over worker processes (in chunks, recognizers built once a worker) give byte-identical
    files, in the same order, as the in-process path; a log under the threshold never starts a worker."""
    import concurrent.futures

    from pipeline.dataset import curate as curate_module

    pools = []

    class CountedPool(concurrent.futures.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            pools.append(kwargs["max_workers"])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", CountedPool)
    rows = [(f"{m} ({k % 4})" if m and k % 2 else m, a, ok, e) for k in range(4) for m, a, ok, e in ROWS]
    log = write_log(tmp_path / "log.csv", rows)  # 80 messages: repeats within and across chunks
    curate(log, tmp_path / "small", workers=2)
    assert pools == []  # under IN_PROCESS_BELOW: in this process
    monkeypatch.setattr(curate_module, "IN_PROCESS_BELOW", 10)
    monkeypatch.setattr(curate_module, "CHUNK", 7)  # 12 chunks
    one = curate(log, tmp_path / "one", workers=1)
    two = curate(log, tmp_path / "two", workers=2)
    assert two["near_duplicates"] == one["near_duplicates"]
    assert pools == [2]
    assert one["excluded"]["duplicate"] > 10 and one["queries"] > 10
    for name in curate_module.OUTPUT_FILES:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    assert (tmp_path / "small" / "queries.jsonl").read_bytes() == (tmp_path / "one" / "queries.jsonl").read_bytes()


def _cmdline(proc) -> str:
    """``proc``'s command line, or "" once it has exited (a child may end between the listing and the read)."""
    import psutil

    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def test_killing_curate_ends_its_worker_processes(tmp_path):
    """SIGKILL to curate-queries (the OOM killer; no handler of its own can run, as with a plain SIGTERM) ends its
    workers' fork server and the workers too (they lived on, idle, with 400 MB each)."""
    import os
    import signal
    import time

    import psutil

    rows = [(f"Is it normal to see halos at night, {n} days after cataract surgery?", "", "", "kept")
            for n in range(4_000)]
    log = write_log(tmp_path / "log.csv", rows)  # two chunks: the fork server and two workers start
    for signum in (signal.SIGKILL,):  # one start of the workers costs ~15 s: SIGTERM went the same way by hand
        cli = subprocess.Popen([sys.executable, "-m", "pipeline", "curate-queries", str(log), "--out",
                                str(tmp_path / f"ds-{signum}"), "--workers", "2"], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        parent = psutil.Process(cli.pid)
        deadline = time.monotonic() + 120
        workers: list[psutil.Process] = []
        while time.monotonic() < deadline and len(workers) < 2:  # the fork server and a worker at least
            time.sleep(0.5)
            workers = [p for p in parent.children(recursive=True) if "forkserver" in _cmdline(p)]
        assert len(workers) >= 2, "the workers never started"
        os.kill(cli.pid, signum)
        cli.wait(timeout=30)
        _, alive = psutil.wait_procs(workers, timeout=20)
        assert alive == [], f"{signal.Signals(signum).name}: {len(alive)} worker process(es) left running"
