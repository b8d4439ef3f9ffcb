"""The read models (pipeline/read) and their cached layer (pages/_data.py): parameters only, read-only and
short-lived connections, pagination, the cache following writes, status without Streamlit, reads never write."""

from __future__ import annotations

import gc
import importlib
import os
import subprocess
import sys
import time
import weakref
from pathlib import Path

import duckdb
import pytest

from pages import _data as data
from pipeline.labels.human_labels import save_label
from pipeline.read import agreement, home
from pipeline.read.common import Filters, upgrade_notice
from pipeline.read.leaderboard import leaderboard_base
from pipeline.read.responses import Browse, browse_count, browse_page, browse_view
from pipeline.store import SCHEMA_VERSION, SHARED_READERS, Store
from pipeline.store.rows import MetaRow, ResponseRow

REPO = Path(__file__).resolve().parent.parent
HOSTILE = ("' OR 1=1 --", '"; DROP TABLE responses; --', "%", "_", "\\", "') UNION SELECT * FROM llm_cache --")


@pytest.fixture(autouse=True)
def fresh_caches():
    data.clear_caches()
    yield
    data.clear_caches()


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
    base = Filters(dataset="synthetic")
    for value in HOSTILE:
        for f in (base.with_(languages=(value,)), base.with_(models=(value,)), base.with_(themes=(value,)),
                  Filters(dataset=value)):
            assert browse_count(db, Browse(f)) == 0
            assert not leaderboard_base(db, f, "openai/gpt-4o")["patterns"]
        assert browse_count(db, Browse(base, search=value)) == 0
    assert counts(db) == before

    # a response that contains the hostile strings is found by them, and only it
    con = duckdb.connect(str(db), read_only=True)
    query_id = con.execute("SELECT query_id FROM queries WHERE dataset = 'synthetic' LIMIT 1").fetchone()[0]
    con.close()
    Store(db).write([ResponseRow(dataset="synthetic", query_id=query_id, model_id=HOSTILE[1], run_id="t",
                                 prompt_hash=None, text=" and ".join(HOSTILE), error=None)])
    for value in HOSTILE:
        page = browse_page(db, Browse(base, search=value), 10, 0)
        assert list(page.model_id) == [HOSTILE[1]], value
    only = browse_page(db, Browse(base.with_(models=(HOSTILE[1],))), 10, 0)
    assert list(only.model_id) == [HOSTILE[1]]
    assert counts(db)["responses"] == before["responses"] + 1


def test_pages_cover_every_match_once(synthetic_db):
    b = Browse(Filters(dataset="synthetic", languages=("en",)), search="eye")
    total = browse_count(synthetic_db, b)
    seen = []
    for offset in range(0, total, 50):
        page = browse_page(synthetic_db, b, 50, offset)
        assert len(page) <= 50
        seen += list(zip(page.query_id, page.model_id, strict=True))
    assert len(seen) == total == len(set(seen)) and total > 50


def test_reads_leave_the_file_free_for_a_writer(pipeline_db, copy_db):
    db = copy_db(pipeline_db)
    home.overview(db)
    home.database_status(db)
    # a second process can take the write lock straight away: no reader holds the file
    code = ("import sys; from pipeline.store import Store; from pipeline.store.rows import MetaRow; "
            "Store(sys.argv[1]).write([MetaRow(key='probe', value='x')])")
    subprocess.run([sys.executable, "-c", code, str(db)], check=True, cwd=REPO, timeout=60)


def test_a_render_shares_one_reader_and_frees_the_file_when_it_ends(pipeline_db, copy_db):
    db = copy_db(pipeline_db)
    take_write_lock = [sys.executable, "-c", "import sys, duckdb; duckdb.connect(sys.argv[1]).close()", str(db)]
    with data.render(db):  # as app.py wraps each run
        home.overview(db)
        home.choices(db)
        assert subprocess.run(take_write_lock, capture_output=True, timeout=60).returncode != 0  # held
        Store(db).write([MetaRow(key="probe", value="written mid-render")])  # closes the shared reader
        with SHARED_READERS.cursor(db) as con:  # reopened, and sees the write
            assert con.execute("SELECT value FROM meta WHERE key = 'probe'").fetchone() == ("written mid-render",)
    subprocess.run(take_write_lock, check=True, timeout=60)  # released when the render ended


def test_a_render_that_loaded_code_freezes_it_after_collecting_its_garbage_and_others_leave_the_collector(
        tmp_path, monkeypatch):
    class Node:
        pass

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(data, "_modules_frozen", len(sys.modules))
    gc.unfreeze()
    try:
        data.freeze_loaded_code()  # nothing new loaded since the last freeze
        assert gc.get_freeze_count() == 0
        (tmp_path / "page_only_module.py").write_text("LOADED = True\n")
        monkeypatch.delitem(sys.modules, "page_only_module", raising=False)
        importlib.import_module("page_only_module")
        cycle = Node()
        cycle.me = cycle
        dead = weakref.ref(cycle)
        del cycle  # garbage only the collector can free
        with pytest.raises(RuntimeError), data.render(tmp_path / "none.duckdb"):
            raise RuntimeError("the page stopped")  # st.stop and errors end a render too
        assert gc.get_freeze_count() > 0
        assert dead() is None  # collected first, not frozen with the living
        frozen = gc.get_freeze_count()
        data.freeze_loaded_code()
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_reads_wait_out_a_writing_pipeline(pipeline_db, copy_db):
    """A writer in another process commits small batches continuously; every read still succeeds."""
    db = copy_db(pipeline_db)
    code = (
        "import sys, time\n"
        "from pipeline.store import Store\n"
        "from pipeline.store.rows import CacheRow\n"
        "store = Store(sys.argv[1]); end = time.time() + 6; i = 0\n"
        "while time.time() < end:\n"
        "    store.write([CacheRow(key=f'k{i}-{j}', model_id='w', request='{}', text='x' * 200, top_logprobs=None, "
        "prompt_tokens=None, completion_tokens=None, latency_s=None) for j in range(200)]); i += 1\n"
        "print(i)\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", code, str(db)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    reads = 0
    deadline = time.time() + 5
    f = Filters(dataset="cataract")
    while time.time() < deadline:
        home.overview(db)
        assert browse_count(db, Browse(f)) == 4
        reads += 1
    out, _ = writer.communicate(timeout=60)
    assert writer.returncode == 0 and int(out) > 1 and reads > 1


def test_cache_follows_writes(synthetic_db, copy_db):
    """The cached layer is keyed by the file's stamp: a label saved without clearing any cache shows at once."""
    db = str(copy_db(synthetic_db))
    f = Filters(dataset="synthetic")
    before = data.agreement_view(db, f, "openai/gpt-4o", "COH")["table"]
    assert before.empty
    con = duckdb.connect(db, read_only=True)
    qid, mid = con.execute("SELECT query_id, model_id FROM item_scores WHERE COH IS NOT NULL LIMIT 1").fetchone()
    con.close()
    save_label(db, dataset="synthetic", query_id=qid, model_id=mid, metric="COH", annotator="t", score=1, comment=" ")
    after = data.agreement_view(db, f, "openai/gpt-4o", "COH")["table"]
    assert after[after.model_id == mid].n.iloc[0] == 1
    assert after.equals(agreement.agreement_view(db, f, "openai/gpt-4o", "COH")["table"])  # the same read model


def test_database_status_counts(pipeline_db):
    runs, models = home.database_status(pipeline_db)
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


def test_status_runs_with_streamlit_not_importable(pipeline_db):
    code = ("import sys; sys.modules['streamlit'] = None; from pipeline.cli import main; "
            "sys.argv = ['pipeline', 'status', '--db', sys.argv[1]]; main()")
    out = subprocess.run([sys.executable, "-c", code, str(pipeline_db)], cwd=REPO, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    assert "responses and scores per model" in out.stdout and "extractive/top-sentences" in out.stdout
    assert "streamlit" not in out.stderr.lower()


def test_pipeline_never_imports_streamlit():
    hits = [str(p.relative_to(REPO)) for p in (REPO / "pipeline").rglob("*.py")
            if "streamlit" in p.read_text(encoding="utf-8")]
    assert not hits, hits


def _fingerprint(db: Path) -> tuple:
    return tuple((p.name, p.read_bytes(), p.stat().st_mtime_ns) for p in (db, Path(f"{db}.wal")) if p.exists())


def test_reads_never_write_and_upgrade_brings_an_old_file_up_to_date(synthetic_db, copy_db, monkeypatch):
    from streamlit.testing.v1 import AppTest

    db = copy_db(synthetic_db)
    con = duckdb.connect(str(db))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION - 1)])
    con.close()
    before = _fingerprint(db)
    c = home.choices(db)
    assert c["schema_version"] == SCHEMA_VERSION - 1 and c["notice"] == upgrade_notice(db, SCHEMA_VERSION - 1)
    assert "written by an older version" in c["notice"] and f"python -m pipeline upgrade --db {db}" in c["notice"]
    f = Filters(dataset="synthetic")
    base = leaderboard_base(db, f, "openai/gpt-4o")
    browse_view(db, Browse(f, judge="openai/gpt-4o", metric="FC"), 10, 0)
    monkeypatch.setenv("PARIKSHA_DB", str(db))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("written by an older version" in w.value.replace("\\", "") for w in at.warning)
    assert _fingerprint(db) == before  # not a byte, not the mtime
    assert not base["table"].empty

    out = subprocess.run([sys.executable, "-m", "pipeline", "upgrade", "--db", str(db)], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    data.clear_caches()
    after = home.choices(db)
    assert after["schema_version"] == SCHEMA_VERSION and after["notice"] is None
    status = subprocess.run([sys.executable, "-m", "pipeline", "status", "--db", str(db)], cwd=REPO,
                            capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert "older version" not in status.stdout


def test_an_old_file_without_a_derived_table_gets_the_upgrade_notice_not_an_error(synthetic_db, copy_db,
                                                                                   monkeypatch):
    from streamlit.testing.v1 import AppTest

    db = copy_db(synthetic_db)
    con = duckdb.connect(str(db))  # as schema 7 left it: no label_pairs
    con.execute("DROP TABLE label_pairs")
    con.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(duckdb.CatalogException, match="label_pairs"):
        home.choices(db)
    monkeypatch.setenv("PARIKSHA_DB", str(db))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("python -m pipeline upgrade" in e.value.replace("\\", "") for e in at.error)
    out = subprocess.run([sys.executable, "-m", "pipeline", "upgrade", "--db", str(db)], cwd=REPO,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    assert "table label_pairs created" in out.stdout and "(upgraded)" in out.stdout, out.stdout
    data.clear_caches()
    assert home.choices(db)["notice"] is None


def test_md_escape_makes_markdown_inert():
    from pages._ui import md_escape

    for text in ("[click](javascript:alert(1))", "<script>x</script>", "**bold** _it_ `code` $x$ :red[c]"):
        escaped = md_escape(text)
        unescaped = [c for i, c in enumerate(escaped) if c in "[]()<>*_`$:" and (i == 0 or escaped[i - 1] != "\\")]
        assert not unescaped, (text, escaped)
    assert md_escape("a\nb") == "a  \nb"


def test_browse_view_agrees_with_count_and_page(synthetic_db):
    db = synthetic_db
    f = Filters(dataset="synthetic")
    for b in (Browse(f), Browse(f, search="after"), Browse(f, judge="openai/gpt-4o", metric="SS",
                                                         score_min=1.0, score_max=2.0, search="eye"),
              Browse(f, judge="openai/gpt-4o", metric="COH", unparsed_only=True)):
        total = browse_count(db, b)
        for offset in (0, 10, total + 10):
            view = browse_view(db, b, 10, offset)
            assert view["total"] == total
            expected = browse_page(db, b, 10, offset if offset < total else 0)
            assert list(zip(view["page"].query_id, view["page"].model_id, strict=True)) == \
                list(zip(expected.query_id, expected.model_id, strict=True))
            assert set(view["details"]["judgments"].query_id) <= set(view["page"].query_id)


def _keys(frame) -> list[tuple[str, str]]:
    return list(zip(frame.query_id, frame.model_id, strict=True))


def test_browse_plain_listing_reads_the_writers_counts(jury_db):
    """Without search or score filter the browser counts from ``response_groups`` and reads the page within its
    language: the same total and page as matching every response, for any offset and sidebar filter."""
    db = jury_db
    with SHARED_READERS.cursor(db) as con:
        languages = [r[0] for r in con.execute("SELECT DISTINCT language FROM queries ORDER BY 1").fetchall()]
        models = [r[0] for r in con.execute("SELECT DISTINCT model_id FROM responses ORDER BY 1").fetchall()]
        themes = [r[0] for r in con.execute("SELECT DISTINCT unnest(themes) FROM queries ORDER BY 1").fetchall()]
    f = Filters(dataset="synthetic")
    for filters in (f, f.with_(languages=tuple(languages[1:3])), f.with_(models=tuple(models[:2])),
                    f.with_(scripts=("latin",)), f.with_(themes=tuple(themes[:1]))):
        b = Browse(filters)
        total = browse_count(db, b)
        assert total > 0
        with SHARED_READERS.cursor(db) as con:  # where the languages meet, and the last page
            per_language = [n for (n,) in con.execute(
                f"SELECT count(*) FROM responses r JOIN queries q ON q.dataset = r.dataset AND q.query_id = "
                f"r.query_id WHERE {filters.sql()[0]} GROUP BY q.language ORDER BY q.language",
                filters.sql()[1]).fetchall()]
        for offset in (0, max(0, per_language[0] - 3), total - 4, total + 5):
            view = browse_view(db, b, 10, offset)
            assert view["total"] == total and view["matches"].complete
            expected = browse_page(db, b, 10, offset if offset < total else 0)
            assert _keys(view["page"]) == _keys(expected)
            assert view["page"].drop(columns=["query_mt", "query_mt_by"]).equals(expected)


def test_browse_search_probes_the_first_queries(synthetic_db, monkeypatch):
    """A search or score filter first matches within the first PROBE_QUERIES queries of the listing's order: a
    page they fill is the page matching every response gives, under a count that says it is a lower bound; a
    page past them is read from every response, with the exact count."""
    from pipeline.read import responses

    monkeypatch.setattr(responses, "PROBE_QUERIES", 20)
    db = synthetic_db
    f = Filters(dataset="synthetic")
    b = Browse(f, judge="openai/gpt-4o", metric="SS", score_min=0.0, score_max=2.0)
    total = browse_count(db, b)
    with SHARED_READERS.cursor(db) as con:
        first = con.execute("SELECT language, query_id FROM queries WHERE dataset = 'synthetic' "
                            "ORDER BY language, query_id LIMIT 20").fetchall()
        n_queries = con.execute("SELECT count(*) FROM queries WHERE dataset = 'synthetic'").fetchone()[0]
        in_probe = con.execute(
            "SELECT count(*) FROM item_scores m JOIN responses r USING (dataset, query_id, model_id) "
            "WHERE m.judge_id = 'openai/gpt-4o' AND m.SS BETWEEN 0 AND 2 AND list_contains(?, m.query_id)",
            [[q for language, q in first if language == first[0][0]]]).fetchone()[0]
    assert 10 < in_probe < total
    view = browse_view(db, b, 10, 0)
    assert view["matches"] == responses.Matches(in_probe, complete=False, queries=20, of=n_queries)
    assert _keys(view["page"]) == _keys(browse_page(db, b, 10, 0))
    deep = browse_view(db, b, 10, in_probe)  # past the probe: every response
    assert deep["matches"] == responses.Matches(total) and _keys(deep["page"]) == _keys(browse_page(db, b, 10,
                                                                                                     in_probe))
    monkeypatch.setattr(responses, "PROBE_QUERIES", n_queries + 1)  # the probe holds every query: exact
    assert browse_view(db, b, 10, 0)["matches"] == responses.Matches(total)
