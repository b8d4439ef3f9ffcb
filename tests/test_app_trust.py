"""The trust views under Streamlit's AppTest: reliability marks in the leaderboard's cells, tied groups and
calibrated means on request, the jury, the paper-fit weights and the published tables, provenance, the Judge
trust page and the variants on the themes page.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from pages import _data as data
from pipeline.metrics import METRICS, WEIGHT_PRESETS
from pipeline.read import jury, trust
from pipeline.read.common import Filters

REPO = Path(__file__).resolve().parent.parent
JUDGE = "openai/gpt-4o"
JUDGE2 = "vllm/meta-llama/Llama-3.3-70B-Instruct"
LEADERBOARD, THEMES, TRUST = "pages/1_leaderboards.py", "pages/3_themes.py", "pages/7_judge_trust.py"


def open_app(db: Path, monkeypatch: pytest.MonkeyPatch, page: str, params: dict | None = None) -> AppTest:
    monkeypatch.setenv("PARIKSHA_DB", str(db))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=180)
    at.query_params.update(params or {})
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def board_of(at: AppTest):
    return next(f for f in at.dataframe if "AGG 95% CI" in f.value.columns)


def texts(at: AppTest) -> str:
    parts = [e.value for kind in (at.markdown, at.caption, at.warning, at.info, at.subheader) for e in kind]
    return "\n".join(str(p) for p in parts).replace("\\", "")


@pytest.fixture(autouse=True)
def fresh_caches():
    data.clear_caches()
    yield
    data.clear_caches()


def test_marks_tied_groups_and_calibrated_means_on_the_leaderboard(jury_db, monkeypatch):
    at = open_app(jury_db, monkeypatch, LEADERBOARD)
    at.button_group(key="lb_lang").set_value("te").run()
    board = board_of(at)
    # Telugu has no sanity answers: FC, COH, CON and AGG are marked in every cell, with the reason in the header
    column_config = json.loads(board.proto.columns)
    for metric in ("FC", "COH", "CON", "AGG"):
        assert column_config[metric]["type_config"]["format"].endswith("⚠"), metric
        assert "no reliability evidence" in column_config[metric]["help"]
    assert "Ranks are not established" in texts(at)  # 4 Telugu questions at this scale
    at.button_group(key="lb_lang").set_value("en").run()
    column_config = json.loads(board_of(at).proto.columns)
    marks = trust.cell_marks(trust.reliability_matrix(jury_db, "synthetic", JUDGE), "en")
    for metric in ("AGG", *METRICS):  # the page marks exactly the cells the reliability matrix says
        assert column_config[metric]["type_config"]["format"].endswith("⚠") == (metric in marks), metric
    at.toggle(key="lb_stats").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    board = board_of(at).value
    assert {"group", "SS_cal", "SS_cal_ci", "SS_corr", "worst_of_k"} <= set(board.columns)
    assert board.group.str.len().gt(0).all() and board.group.iloc[0].startswith("a")
    assert board.SS_cal.notna().sum() >= 1 and "minimum detectable difference" in texts(at)
    assert "Provenance: judge openai/gpt-4o" in texts(at)


def test_the_jury_leaderboard_is_the_judges_mean(jury_db, monkeypatch):
    at = open_app(jury_db, monkeypatch, LEADERBOARD)
    at.button_group(key="lb_src").set_value(jury.jury_id("mean")).run()
    board = board_of(at).value.set_index("model_id")
    f = Filters(dataset="synthetic", languages=("en",))
    matrix = jury.judge_matrix(jury_db, f, (JUDGE, JUDGE2), "FC")
    expected = matrix.mean(axis=1).groupby(level="model_id").mean()
    assert np.allclose(board.loc[expected.index, "FC"], expected)
    assert "jury (mean of 2 judges)" in texts(at)


def test_paper_fit_weights_and_the_copied_tamil_table(synthetic_db, copy_db, monkeypatch):
    db = copy_db(synthetic_db)
    con = duckdb.connect(str(db))
    config = json.loads(con.execute("SELECT config FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()[0])
    config |= {"weights": WEIGHT_PRESETS["paper-fit"], "weights_preset": "paper-fit"}
    con.execute("UPDATE runs SET config = ?", [json.dumps(config)])
    con.close()
    at = open_app(db, monkeypatch, LEADERBOARD, {"lb_lang": "en"})
    board = board_of(at).value
    expected = sum(board[m] * WEIGHT_PRESETS["paper-fit"][m] for m in METRICS)
    assert np.allclose(board.AGG, expected)  # the preset as given: the printed AGG's scale
    body = texts(at)
    assert "paper-fit" in body and "comparable" in body
    at.button_group(key="lb_lang").set_value("ta").run()
    assert "copy of the Kannada (kn) one" in texts(at)


def test_judge_trust_page_on_a_jury(jury_db, monkeypatch):
    at = open_app(jury_db, monkeypatch, TRUST)
    frames = [f.value for f in at.dataframe]
    per_judge = next(f for f in frames if "jury (mean of 2 judges)" in f.columns)
    assert {JUDGE, JUDGE2} <= set(per_judge.columns)
    alpha = next(f for f in frames if {"items", *METRICS} <= set(f.columns) and "language" in f.columns)
    assert "all" in set(alpha.language) and alpha[list(METRICS)].notna().all().all()
    worst = next(f for f in frames if "spread" in f.columns)
    assert (worst.spread.diff().dropna() <= 1e-12).all() and worst.open.str.startswith("responses?").all()
    assert any("worst" in f.columns and "k" in f.columns for f in frames)  # two judge samples per item
    assert any("variance" in f.columns for f in frames)
    matrix = next(f for f in frames if "auc" in f.columns and "reason" in f.columns)
    assert set(matrix.status) <= {"ok", "weak", "none"}
    assert "Reliability matrix" in texts(at) and "Provenance" in texts(at)
    at.button_group(key="jt_stratum").set_value("script").run()
    assert not at.exception


def test_judge_trust_page_with_one_weak_judge(pipeline_db, monkeypatch):
    at = open_app(pipeline_db, monkeypatch, TRUST)
    assert "One judge scored this dataset" in texts(at)
    assert any("Do not trust" in w.value.replace("\\", "") for w in at.warning)


def test_themes_page_shows_the_change_between_variants(jury_db, monkeypatch):
    at = open_app(jury_db, monkeypatch, THEMES)
    changes = next(f.value for f in at.dataframe if "change" in f.value.columns)
    assert {"pairs", "base", "variant", "change", "ci"} <= set(changes.columns)
    kinds = at.selectbox(key="th_pair").options
    assert any("vs English" in k for k in kinds) and any("romanized vs native" in k for k in kinds)
    at.selectbox(key="th_pair").set_value(next(k for k in kinds if "romanized vs native" in k)).run()
    assert not at.exception and "paired bootstrap" in texts(at)
