"""pipeline/queries.py: parameters only, read-only and short-lived connections, pagination, status."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from pipeline import queries as q
from pipeline.store import SHARED_READERS, Store, now

REPO = Path(__file__).resolve().parent.parent
HOSTILE = ("' OR 1=1 --", '"; DROP TABLE responses; --', "%", "_", "\\", "') UNION SELECT * FROM llm_cache --")


@pytest.fixture(autouse=True)
def fresh_caches():
    q.clear_caches()
    yield
    q.clear_caches()


def counts(db: Path) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("responses", "queries", "judgments", "human_labels")}
    finally:
        con.close()


def test_hostile_filter_values_are_only_values(synthetic_db, copy_db):
    db = copy_db(synthetic_db)
    before = counts(db)
    base = q.Filters(dataset="synthetic")
    for value in HOSTILE:
        for f in (base.with_(languages=(value,)), base.with_(models=(value,)), base.with_(themes=(value,)),
                  q.Filters(dataset=value)):
            assert q.browse_count.uncached(str(db), q.Browse(f)) == 0
            assert not q.leaderboard_base.uncached(str(db), f, "openai/gpt-4o")["patterns"]
        assert q.browse_count.uncached(str(db), q.Browse(base, search=value)) == 0
    assert counts(db) == before

    # a response that contains the hostile strings is found by them, and only it
    con = duckdb.connect(str(db), read_only=True)
    query_id = con.execute("SELECT query_id FROM queries WHERE dataset = 'synthetic' LIMIT 1").fetchone()[0]
    con.close()
    Store(db).upsert("responses", [{"dataset": "synthetic", "query_id": query_id, "model_id": HOSTILE[1],
                                    "run_id": "t", "text": " and ".join(HOSTILE), "created_at": now()}])
    for value in HOSTILE:
        page = q.browse_page.uncached(str(db), q.Browse(base, search=value), 10, 0)
        assert list(page.model_id) == [HOSTILE[1]], value
    only = q.browse_page.uncached(str(db), q.Browse(base.with_(models=(HOSTILE[1],))), 10, 0)
    assert list(only.model_id) == [HOSTILE[1]]
    assert counts(db)["responses"] == before["responses"] + 1


def test_pages_cover_every_match_once(synthetic_db):
    b = q.Browse(q.Filters(dataset="synthetic", languages=("en",)), search="eye")
    total = q.browse_count(str(synthetic_db), b)
    seen = []
    for offset in range(0, total, 50):
        page = q.browse_page(str(synthetic_db), b, 50, offset)
        assert len(page) <= 50
        seen += list(zip(page.query_id, page.model_id, strict=True))
    assert len(seen) == total == len(set(seen)) and total > 50


def test_reads_leave_the_file_free_for_a_writer(pipeline_db, copy_db):
    db = copy_db(pipeline_db)
    q.overview.uncached(str(db))
    q.database_status(db)
    # a second process can take the write lock straight away: no reader holds the file
    code = ("import sys; from pipeline.store import Store, now; Store(sys.argv[1]).upsert('meta', "
            "[{'key': 'probe', 'value': str(now())}])")
    subprocess.run([sys.executable, "-c", code, str(db)], check=True, cwd=REPO, timeout=60)


def test_a_render_shares_one_reader_and_frees_the_file_when_it_ends(pipeline_db, copy_db):
    db = copy_db(pipeline_db)
    take_write_lock = [sys.executable, "-c", "import sys, duckdb; duckdb.connect(sys.argv[1]).close()", str(db)]
    with SHARED_READERS.held(db):
        q.overview.uncached(str(db))
        q.choices.uncached(str(db))
        assert subprocess.run(take_write_lock, capture_output=True, timeout=60).returncode != 0  # held
        Store(db).upsert("meta", [{"key": "probe", "value": "written mid-render"}])  # closes the shared reader
        with SHARED_READERS.cursor(db) as con:  # reopened, and sees the write
            assert con.execute("SELECT value FROM meta WHERE key = 'probe'").fetchone() == ("written mid-render",)
    subprocess.run(take_write_lock, check=True, timeout=60)  # released when the render ended


def test_reads_wait_out_a_writing_pipeline(pipeline_db, copy_db):
    """A writer in another process commits small batches continuously; every read still succeeds."""
    db = copy_db(pipeline_db)
    code = (
        "import sys, time\n"
        "from pipeline.store import Store, now\n"
        "store = Store(sys.argv[1]); end = time.time() + 6; i = 0\n"
        "while time.time() < end:\n"
        "    store.write_batch({'llm_cache': [{'key': f'k{i}-{j}', 'model_id': 'w', 'text': 'x' * 200, "
        "'created_at': now()} for j in range(200)]}); i += 1\n"
        "print(i)\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", code, str(db)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    reads = 0
    deadline = time.time() + 5
    f = q.Filters(dataset="cataract")
    while time.time() < deadline:
        q.overview.uncached(str(db))
        assert q.browse_count.uncached(str(db), q.Browse(f)) == 4
        reads += 1
    out, _ = writer.communicate(timeout=60)
    assert writer.returncode == 0 and int(out) > 1 and reads > 1


def test_cache_follows_writes(synthetic_db, copy_db):
    db = str(copy_db(synthetic_db))
    f = q.Filters(dataset="synthetic")
    before = q.agreement(db, f, "openai/gpt-4o", "COH")
    assert before.empty
    con = duckdb.connect(db, read_only=True)
    qid, mid = con.execute("SELECT query_id, model_id FROM judgments WHERE metric = 'COH' AND parse_ok "
                           "LIMIT 1").fetchone()
    con.close()
    q.save_human_label(db, dataset="synthetic", query_id=qid, model_id=mid, metric="COH", annotator="t", score=1,
                       comment=" ")
    after = q.agreement(db, f, "openai/gpt-4o", "COH")
    assert after[after.model_id == mid].n.iloc[0] == 1


def test_database_status_counts(pipeline_db):
    runs, models = q.database_status(pipeline_db)
    assert list(runs.status) == ["finished"] and runs.backend_calls.iloc[0] > 0
    con = duckdb.connect(str(pipeline_db), read_only=True)
    expected = con.execute("SELECT model_id, count(*) FROM judgments GROUP BY 1").fetchall()
    critiques = con.execute("SELECT count(*) FROM critiques").fetchone()[0]
    con.close()
    assert dict(expected) == dict(zip(models.model_id, models.judgments, strict=True))
    assert models.responses.sum() == 4 and models.critiques.sum() == critiques
    assert (models.parse_failures <= models.judgments).all()


def test_status_command_prints_tables(pipeline_db):
    out = subprocess.run([sys.executable, "-m", "pipeline", "status", "--db", str(pipeline_db)], cwd=REPO,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    assert "responses and scores per model" in out.stdout and "extractive/top-sentences" in out.stdout


def test_md_escape_makes_markdown_inert():
    from pages._ui import md_escape

    for text in ("[click](javascript:alert(1))", "<script>x</script>", "**bold** _it_ `code` $x$ :red[c]"):
        escaped = md_escape(text)
        unescaped = [c for i, c in enumerate(escaped) if c in "[]()<>*_`$:" and (i == 0 or escaped[i - 1] != "\\")]
        assert not unescaped, (text, escaped)
    assert md_escape("a\nb") == "a  \nb"


def test_browse_view_agrees_with_count_and_page(synthetic_db):
    db = str(synthetic_db)
    f = q.Filters(dataset="synthetic")
    for b in (q.Browse(f), q.Browse(f, search="after"), q.Browse(f, judge="openai/gpt-4o", metric="SS",
                                                                   score_min=1.0, score_max=2.0, search="eye"),
              q.Browse(f, judge="openai/gpt-4o", metric="COH", unparsed_only=True)):
        total = q.browse_count(db, b)
        for offset in (0, 10, total + 10):
            view = q.browse_view(db, b, 10, offset)
            assert view["total"] == total
            expected = q.browse_page(db, b, 10, offset if offset < total else 0)
            assert list(zip(view["page"].query_id, view["page"].model_id, strict=True)) == \
                list(zip(expected.query_id, expected.model_id, strict=True))
            assert set(view["details"]["judgments"].query_id) <= set(view["page"].query_id)
