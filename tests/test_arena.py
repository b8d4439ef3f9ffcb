"""The doctors' arena: Bradley–Terry from known strengths (order, interval coverage, the reference implementation),
style control on length-only preferences, the CLI against the read model, and import-votes' bad rows."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from pipeline.analysis.arena import (
    BASE,
    INIT,
    LEADERBOARD_COLUMNS,
    SCALE,
    bradley_terry,
    votes_to_separate,
    win_rates,
)
from pipeline.cli import app
from pipeline.read import arena
from pipeline.store import Store
from pipeline.store.arena_rows import ArenaVoteRow
from pipeline.store.rows import DatasetRow, QueryRow, ResponseRow, text_hash
from pipeline.style import counts as style_counts

MODELS = [f"org/model-{i}" for i in range(6)]
TRUE = np.array([-240.0, -140.0, -50.0, 40.0, 130.0, 230.0])  # Elo-scale strengths, mean 0


def draw_votes(rng: np.random.Generator, n: int, strengths: np.ndarray = TRUE, ties: float = 0.0) -> pd.DataFrame:
    """``n`` comparisons of random pairs under Bradley–Terry with ``strengths``: a tie with share ``ties``, else a
    win drawn from the BT probability; grouped as (model_a, model_b, outcome, n)."""
    i = rng.integers(0, len(strengths), n)
    j = (i + rng.integers(1, len(strengths), n)) % len(strengths)
    a, b = np.minimum(i, j), np.maximum(i, j)
    p = 1 / (1 + BASE ** ((strengths[b] - strengths[a]) / SCALE))
    u = rng.random(n)
    outcome = np.where(u < ties, "tie", np.where(rng.random(n) < p, "a", "b"))
    votes = pd.DataFrame({"model_a": np.array(MODELS)[a], "model_b": np.array(MODELS)[b], "outcome": outcome})
    return votes.value_counts().rename("n").reset_index()


def test_bradley_terry_recovers_known_strengths_and_agrees_with_choix():
    import choix

    rows = draw_votes(np.random.default_rng(7), 3000, ties=0.1)
    fit = bradley_terry(rows, rounds=200, seed=1)
    assert list(fit.table.model) == MODELS[::-1]  # best first: the true order
    assert fit.table.votes.sum() == 2 * 3000
    assert (fit.table.lower < fit.table.strength).all() and (fit.table.strength < fit.table.upper).all()
    # choix's maximum-likelihood BT on the same comparisons (a win twice its winner's, a tie once each way, as
    # Chatbot Arena counts them): the same strengths, in its units (natural log-strengths, mean 0)
    index = {m: k for k, m in enumerate(MODELS)}
    data = []
    for r in rows.itertuples():
        a, b = index[r.model_a], index[r.model_b]
        wins = {"a": [(a, b)] * 2, "b": [(b, a)] * 2, "tie": [(a, b), (b, a)]}[r.outcome]
        data += wins * int(r.n)
    reference = choix.opt_pairwise(len(MODELS), data, alpha=0.0)
    ours = fit.table.set_index("model").strength.reindex(MODELS).to_numpy()
    ours = (ours - INIT) * np.log(BASE) / SCALE
    np.testing.assert_allclose(ours, reference - reference.mean(), atol=2e-3)


def test_bootstrap_intervals_cover_the_true_strengths_near_the_nominal_rate():
    rng = np.random.default_rng(11)
    covered, total = 0, 0
    for draw in range(40):
        fit = bradley_terry(draw_votes(rng, 3000), rounds=60, seed=draw).table.set_index("model").reindex(MODELS)
        truth = pd.Series(TRUE + INIT, index=MODELS)
        covered += int(((fit.lower <= truth) & (truth <= fit.upper)).sum())
        total += len(MODELS)
    assert 0.86 <= covered / total <= 1.0, f"coverage {covered / total:.3f} of 240 intervals (nominal 0.95)"


def test_style_counts():
    text = "# Care\n\n- **Rest** for a week\n- wear the shield\n2. use drops\nplain line"
    assert style_counts(text) == {"length": len(text), "headers": 1, "lists": 3, "bold": 1}


def test_win_rates_and_votes_to_separate():
    rows = pd.DataFrame({"model_a": ["x", "x", "x"], "model_b": ["y", "y", "y"], "outcome": ["a", "b", "both_bad"],
                         "n": [3, 1, 2]})
    matrix = win_rates(rows)
    assert matrix.loc["x", "y"] == pytest.approx((3 + 1) / 6) and matrix.loc["y", "x"] == pytest.approx(2 / 6)
    assert votes_to_separate(0.0, 10) is None
    assert votes_to_separate(100.0, 0) > votes_to_separate(200.0, 0) > 0
    assert votes_to_separate(100.0, 10_000) == 0


# -- a real results database ------------------------------------------------------------------------------
def build_db(path: Path, *, lengths: dict[str, tuple[int, int]] | None = None, queries: int = 40,
             languages: tuple[str, ...] = ("hi", "ta"), seed: int = 0) -> Path:
    """A results database with ``queries`` queries per language and a response of every model to each (length
    drawn from ``lengths[model]`` = (low, high) characters)."""
    rng = np.random.default_rng(seed)
    store = Store(path)
    rows: list = [DatasetRow(name="ds", path="data/ds", closed_book=True, n_queries=queries * len(languages),
                             n_chunks=0, content_hash=None)]
    for lang in languages:
        for k in range(queries):
            qid = f"{lang}-{k:03d}"
            rows.append(QueryRow(dataset="ds", query_id=qid, language=lang, query=f"patient question {qid}",
                                 query_en=None, gt_response=f"doctor answer {qid}", themes=[], kb_refs=[],
                                 update_sensitive=False))
            for number, m in enumerate(MODELS):  # the text never names the model (the arena hides names)
                low, high = (lengths or {}).get(m, (80, 120))
                text = f"Reply {number} to {qid}. " + "Drink water and rest. " * int(rng.integers(low, high + 1) // 22)
                rows.append(ResponseRow(dataset="ds", query_id=qid, model_id=m, run_id=None, prompt_hash=None,
                                        text=text, error=None))
    store.write(rows)
    return path


def current_texts(db: Path) -> dict[tuple[str, str], str]:
    return {(q, m): t for q, m, t in Store(db).fetch("SELECT query_id, model_id, text FROM responses")}


def test_style_control_removes_a_length_only_preference(tmp_path: Path):
    # models differ only in how long they write; doctors prefer the longer answer, by the length difference alone
    lengths = {m: (100 + 100 * i, 600 + 100 * i) for i, m in enumerate(MODELS[:4])}
    db = build_db(tmp_path / "style.duckdb", lengths=lengths, queries=150, languages=("hi",))
    texts = current_texts(db)
    rng = np.random.default_rng(3)
    votes = []
    qids = sorted({q for q, _ in texts})
    for annotator in ("dr-a", "dr-b", "dr-c", "dr-d"):
        for qid in qids:
            a, b = sorted(rng.choice(MODELS[:4], 2, replace=False))
            ta, tb = texts[(qid, a)], texts[(qid, b)]
            la, lb = len(ta), len(tb)
            p = 1 / (1 + np.exp(-6 * (la - lb) / (la + lb)))
            votes.append(ArenaVoteRow.of(dataset="ds", query_id=qid, model_a=a, model_b=b,
                                         winner="a" if rng.random() < p else "b", annotator=annotator,
                                         shown_left=a, tags=[], text_a=ta, text_b=tb, source="test"))
    Store(db).write(votes)
    raw = arena.fit(db, "ds", rounds=100)
    styled = arena.fit(db, "ds", style_control=True, rounds=100)
    longest, shortest = MODELS[3], MODELS[0]
    raw_t = raw.table.set_index("model")
    assert list(raw.table.model) == MODELS[:4][::-1]
    assert raw_t.lower[longest] > raw_t.upper[shortest]  # raw: the longest writer is clearly first
    diff = styled.boot[longest] - styled.boot[shortest]
    assert diff.quantile(0.025) < 0 < diff.quantile(0.975)  # style-controlled: no difference left
    coef = styled.style.set_index("feature")
    assert coef.lower["length"] > 0  # the preference went to the length covariate


@pytest.fixture
def voted_db(tmp_path: Path) -> Path:
    db = build_db(tmp_path / "votes.duckdb", queries=25)
    texts = current_texts(db)
    rng = np.random.default_rng(5)
    votes = []
    for qid in sorted({q for q, _ in texts}):
        for annotator in ("dr-rao", "dr-iyer"):
            a, b = sorted(rng.choice(MODELS, 2, replace=False))
            ia, ib = MODELS.index(a), MODELS.index(b)
            p = 1 / (1 + BASE ** ((TRUE[ib] - TRUE[ia]) / SCALE))
            votes.append(ArenaVoteRow.of(dataset="ds", query_id=qid, model_a=a, model_b=b,
                                         winner="a" if rng.random() < p else "b", annotator=annotator,
                                         shown_left=b, tags=["too long"], text_a=texts[(qid, a)],
                                         text_b=texts[(qid, b)], source="app"))
    Store(db).write(votes)
    return db


# Votes whose Bradley–Terry strengths are known in closed form: the three models' odds are 1 : 2 : 4 and every pair's
# wins follow them exactly (B beats A 2 to 1, C beats B 2 to 1, C beats A 4 to 1), so the maximum-likelihood strengths
# are 400·log10 of the odds, centred on 1000: 1000 ∓ 400·log10(2) and 1000. Each vote counts for both its models.
KNOWN_WINS = {(MODELS[0], MODELS[1]): (10, 20), (MODELS[1], MODELS[2]): (10, 20), (MODELS[0], MODELS[2]): (10, 40)}
STEP = 400 * np.log10(2)
KNOWN = pd.DataFrame({"model": [MODELS[2], MODELS[1], MODELS[0]], "strength": [1000 + STEP, 1000.0, 1000 - STEP],
                      "votes": [80, 60, 80], "rank": [1, 2, 3]})


@pytest.fixture
def known_db(tmp_path: Path) -> Path:
    """:data:`KNOWN_WINS` as doctors' votes, each on its own query and annotator pair."""
    db = build_db(tmp_path / "known.duckdb", queries=40)
    texts = current_texts(db)
    qids = iter(sorted({q for q, _ in texts}) * 2)
    votes = []
    for (a, b), (wins_a, wins_b) in KNOWN_WINS.items():
        for winner in ["a"] * wins_a + ["b"] * wins_b:
            qid = next(qids)
            annotator = "dr-rao" if len(votes) < 80 else "dr-iyer"
            votes.append(ArenaVoteRow.of(dataset="ds", query_id=qid, model_a=a, model_b=b, winner=winner,
                                         annotator=annotator, shown_left=a, tags=[], text_a=texts[(qid, a)],
                                         text_b=texts[(qid, b)], source="app"))
    Store(db).write(votes)
    return db


def same_as_known(table: pd.DataFrame) -> None:
    """``table`` (a leaderboard) holds the :data:`KNOWN` strengths (to 0.5 Elo: the fit is regularised), votes and
    ranks (where it shows them), best first."""
    assert list(table.model) == list(KNOWN.model)
    np.testing.assert_allclose(table.strength.to_numpy(dtype=float), KNOWN.strength.to_numpy(), atol=0.5)
    assert list(table.votes) == list(KNOWN.votes)
    assert "rank" not in table or list(table["rank"]) == list(KNOWN["rank"])


def test_cli_leaderboard_prints_the_known_strengths(known_db: Path):
    result = CliRunner().invoke(app, ["arena", "leaderboard", "--db", str(known_db), "--dataset", "ds", "--format",
                                      "csv"])
    assert result.exit_code == 0, result.output
    printed = pd.read_csv(io.StringIO(result.stdout))
    same_as_known(printed)
    assert list(printed.both_bad_rate) == [0.0] * 3  # no vote said both were bad


def test_export_votes_round_trips(voted_db: Path, tmp_path: Path):
    runner = CliRunner()
    out = tmp_path / "votes.csv"
    result = runner.invoke(app, ["arena", "export-votes", "--db", str(voted_db), "--out", str(out)])
    assert result.exit_code == 0, result.output
    exported = pd.read_csv(out)
    assert len(exported) == 2 * 50 and set(exported.tags) == {"too long"}
    # re-importing the export changes nothing (the same keys, the same winners)
    before = arena.export_votes(voted_db)
    result = runner.invoke(app, ["arena", "import-votes", str(out), "--db", str(voted_db)])
    assert result.exit_code == 0, result.output
    after = arena.export_votes(voted_db)
    pd.testing.assert_frame_equal(before.drop(columns=["voted_at"]), after.drop(columns=["voted_at"]))


def test_exported_votes_neutralise_a_cell_a_spreadsheet_would_run(voted_db: Path, tmp_path: Path):
    """An annotator typed as a formula is written as text (OWASP's rule, as every CSV the studio writes)."""
    rows = Store(voted_db).fetch("SELECT query_id, model_a, model_b FROM arena_votes LIMIT 1")
    (qid, a, b), = rows
    texts = current_texts(voted_db)
    Store(voted_db).write([ArenaVoteRow.of(dataset="ds", query_id=qid, model_a=a, model_b=b, winner="tie",
                                           annotator="=HYPERLINK(\"http://x\")", shown_left=a, tags=[],
                                           text_a=texts[(qid, a)], text_b=texts[(qid, b)], source="app")])
    out = tmp_path / "votes.csv"
    assert CliRunner().invoke(app, ["arena", "export-votes", "--db", str(voted_db), "--out", str(out)]).exit_code == 0
    cells = set(pd.read_csv(out).annotator)
    assert "'=HYPERLINK(\"http://x\")" in cells and not any(c.startswith("=") for c in cells)


def test_import_votes_rejects_a_bad_csv_naming_the_line_and_writes_nothing(voted_db: Path, tmp_path: Path):
    before = len(arena.export_votes(voted_db))
    bad = tmp_path / "bad.csv"
    bad.write_text("dataset,query_id,model_a,model_b,winner,annotator\n"
                   f"ds,hi-000,{MODELS[0]},{MODELS[1]},a,dr-new\n"
                   f"ds,hi-001,{MODELS[0]},{MODELS[1]},left,dr-new\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["arena", "import-votes", str(bad), "--db", str(voted_db)])
    assert result.exit_code == 1
    assert f"{bad}:line 3: winner 'left' is not one of a, b, tie, both_bad" in result.output
    assert len(arena.export_votes(voted_db)) == before


def test_a_file_without_the_arena_tables_reads_the_same_figures(voted_db: Path, tmp_path: Path):
    """A file the writer has not opened since the derived arena tables were added: the reads compute them from their
    definitions (reads never write) and show the same leaderboards and counts."""
    import shutil

    import duckdb

    old = tmp_path / "old.duckdb"
    shutil.copy(voted_db, old)
    with duckdb.connect(str(old)) as con:
        for table in arena.ARENA_DERIVED:
            con.execute(f"DROP TABLE {table}")
    for language, style in ((None, False), ("hi", False), (None, True)):
        pd.testing.assert_frame_equal(arena.leaderboard(old, "ds", language, style_control=style, rounds=20),
                                      arena.leaderboard(voted_db, "ds", language, style_control=style, rounds=20))
    pd.testing.assert_frame_equal(arena.win_matrix(old, "ds"), arena.win_matrix(voted_db, "ds"))
    assert arena.verbosity(old, "ds", "doctors")["decided"] == arena.verbosity(voted_db, "ds", "doctors")["decided"] > 0


def test_a_regenerated_response_no_longer_counts(voted_db: Path):
    before = arena.leaderboard(voted_db, "ds", rounds=0).votes.sum()
    (qid, model), = Store(voted_db).fetch("SELECT query_id, model_a FROM arena_votes ORDER BY query_id LIMIT 1")
    Store(voted_db).write([ResponseRow(dataset="ds", query_id=qid, model_id=model, run_id=None, prompt_hash=None,
                                       text="a regenerated answer", error=None)])
    after = arena.leaderboard(voted_db, "ds", rounds=0).votes.sum()
    stale = Store(voted_db).fetch("SELECT count(*) FROM arena_votes WHERE query_id = ? AND ? IN (model_a, model_b)",
                                  [qid, model])[0][0]
    assert before - after == 2 * stale and stale > 0


def test_next_pair_never_repeats_a_query_and_pair_for_an_annotator(voted_db: Path):
    texts = current_texts(voted_db)
    seen = set()
    for _ in range(12):
        table = arena.leaderboard(voted_db, "ds", "ta", rounds=20)
        item = arena.next_pair(voted_db, "ds", "ta", "dr-new", table=table)
        key = (item["query_id"], item["model_a"], item["model_b"])
        assert key not in seen and item["model_a"] < item["model_b"]
        assert item["text_a"] == texts[(item["query_id"], item["model_a"])]
        assert item["hash_a"] == text_hash(item["text_a"])
        seen.add(key)
        Store(voted_db).write([ArenaVoteRow.of(dataset="ds", query_id=item["query_id"], model_a=item["model_a"],
                                               model_b=item["model_b"], winner="tie", annotator="dr-new",
                                               shown_left=item["model_a"], tags=[], text_a=item["text_a"],
                                               text_b=item["text_b"], source="app")])
    assert arena.annotator_votes(voted_db, "ds", "dr-new") == 12


def test_pages_show_the_arena_read_models(known_db: Path, monkeypatch: pytest.MonkeyPatch):
    from streamlit.testing.v1 import AppTest

    from pages import _data as data
    from pipeline.store.arena_rows import PairwiseVerdictRow
    from pipeline.store.rows import JudgmentRow

    judge = MODELS[5]  # a candidate that also judges: self-preference is shown
    texts = current_texts(known_db)
    rows: list = []
    for k, qid in enumerate(sorted({q for q, _ in texts})[:10]):
        a, b = MODELS[k % 5], MODELS[5]
        for first in (a, b):  # always prefers itself, except on even queries where it prefers the first shown
            verdict = ("a" if first == a else "b") if k % 2 == 0 else "b"
            rows.append(PairwiseVerdictRow.of(dataset="ds", query_id=qid, judge_id=judge, model_a=a, model_b=b,
                                              text_a=texts[(qid, a)], text_b=texts[(qid, b)], first=first,
                                              verdict=verdict, parse_ok=True, raw_output="{}", run_id=None))
        rows += [JudgmentRow(dataset="ds", query_id=qid, model_id=m, judge_id=judge, metric="SS", sample=0, score=1,
                             parse_ok=True, justification="", raw_output="", response_hash=text_hash(texts[(qid, m)]),
                             run_id=None) for m in MODELS]
    Store(known_db).write(rows)
    monkeypatch.setenv("PARIKSHA_DB", str(known_db))
    data.clear_caches()

    def render(page: str, **params: str) -> AppTest:
        at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=180)
        at.query_params.update(params)
        at.run()
        at.switch_page(page)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    at = render("pages/12_arena.py", ar_view="Leaderboard")
    shown = at.dataframe[0].value[LEADERBOARD_COLUMNS]
    same_as_known(shown.reset_index(drop=True))  # the doctors' votes; the judge's verdicts are another source
    at = render("pages/7_judge_trust.py")
    flips = next(f.value for f in at.dataframe if "flip_rate" in f.value.columns)
    assert flips.comparisons.sum() == 10 and flips.flips.sum() == 5 and flips.flip_rate.iloc[0] == 0.5
    selfish = next(f.value for f in at.dataframe if "self_judged" in f.value.columns)
    assert selfish[selfish.self_judged].win_rate.iloc[0] == pytest.approx(0.75)  # 5 wins, 5 flips (ties)
    at = render("pages/1_leaderboards.py")
    assert any("Doctors' pairwise preferences" in s.value for s in at.subheader)
