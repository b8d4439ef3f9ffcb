"""Human labels and agreement: import all-or-nothing, kappa/tau from the libraries, the paper's Table 7.
(Agreement per language and model as the dashboard computes it: test_read_models.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau
from sklearn.metrics import cohen_kappa_score

from pipeline.analysis.agreement import (
    load_table7,
    percentage_agreement,
    ranking_comparison,
    table7_comparison,
    weighted_kappa,
)
from pipeline.dataset import load_dataset
from pipeline.labels.human_labels import import_human_labels_command
from pipeline.runner import save_dataset
from pipeline.store import Store
from pipeline.store.rows import ResponseRow

REPO = Path(__file__).resolve().parent.parent


def test_kappa_and_tau_equal_the_libraries():
    rng = np.random.default_rng(0)
    human = rng.integers(0, 3, 200)
    llm = np.where(rng.random(200) < 0.7, human, rng.integers(0, 3, 200))
    assert weighted_kappa(human, llm) == pytest.approx(cohen_kappa_score(human, llm, weights="linear"))
    assert percentage_agreement(human, llm) == pytest.approx(np.mean(human == llm))
    means = pd.DataFrame({"language": ["en"] * 6, "model_id": list("abcdef"),
                          "human": [1.3, 1.1, 0.9, 0.8, 0.8, 0.2], "llm": [1.0, 1.2, 0.7, 0.9, 0.3, 0.1]})
    out = ranking_comparison(means).iloc[0]
    ref = kendalltau(means["human"], means["llm"])
    assert out.kendall_tau == pytest.approx(ref.statistic) and out.p_value == pytest.approx(ref.pvalue)
    assert not out.identical


def test_table7_rankings_identical_except_telugu():
    t7 = load_table7()
    assert len(t7) == 25 and set(t7.language) == {"en", "hi", "kn", "ta", "te"}
    out = table7_comparison().set_index("language")
    for lang in ("en", "hi", "kn", "ta"):
        assert out.loc[lang, "identical"], lang
        assert out.loc[lang, "kendall_tau"] == pytest.approx(1.0)
    assert not out.loc["te", "identical"]
    assert out.loc["te", "kendall_tau"] < 1.0
    assert out.loc["te", "human_ranking"][0] == out.loc["te", "llm_ranking"][0] == "Mistral-Large-Instruct-2407"
    # the printed rank columns agree with the order of the printed means
    for lang, g in t7.groupby("language"):
        assert out.loc[lang, "llm_ranking"] == g.sort_values("llm_rank")["model"].tolist()


# -- import ----------------------------------------------------------------------------------------
@pytest.fixture()
def db(tmp_path):
    dataset = load_dataset(REPO / "data" / "cataract")
    store = Store(tmp_path / "r.duckdb")
    save_dataset(store, dataset)
    store.write([ResponseRow(dataset="cataract", query_id=q, model_id=m, run_id="r", prompt_hash="h", text="t",
                             error=None) for q in ("en-001", "en-002") for m in ("model-a", "model-b")])
    return tmp_path / "r.duckdb"


def _count(db: Path) -> int:
    return Store(db).fetch("SELECT count(*) FROM human_labels")[0][0]


def test_import_good_file(db, tmp_path):
    csv = tmp_path / "labels.csv"
    csv.write_text("query_id,model_id,metric,annotator,score,comment\n"
                   "en-001,model-a,SS,ann1,2,fine\n"
                   "en-001,model-b,ss,ann1,0,\n"
                   "en-002,model-a,FC,ann2,1,\n", encoding="utf-8")
    assert import_human_labels_command(csv, db=db) == 0  # one dataset in the DB: no --dataset needed
    rows = Store(db).fetch("SELECT query_id, model_id, metric, score, comment FROM human_labels ORDER BY 1, 2")
    assert rows[0] == ("en-001", "model-a", "SS", 2, "fine")
    assert rows[1][2] == "SS" and len(rows) == 3
    assert import_human_labels_command(csv, db=db) == 0  # idempotent
    assert _count(db) == 3


def test_bad_rows_reject_the_whole_file_with_line_numbers(db, tmp_path, capsys):
    csv = tmp_path / "labels.csv"
    csv.write_text("query_id,model_id,metric,annotator,score\n"
                   "en-001,model-a,SS,ann1,2\n"        # line 2: good
                   "en-999,model-a,SS,ann1,2\n"        # 3: unknown query
                   "en-001,model-z,SS,ann1,2\n"        # 4: model without a response
                   "en-001,model-a,XX,ann1,2\n"        # 5: bad metric
                   "en-001,model-a,FC,ann1,3\n"        # 6: bad score
                   "en-001,model-a,FC,,1\n"            # 7: missing annotator
                   "en-001,model-a,SS,ann1,1\n",       # 8: repeats line 2
                   encoding="utf-8")
    assert import_human_labels_command(csv, db=db, dataset="cataract") == 1
    err = capsys.readouterr().err
    for line, reason in [(3, "en-999"), (4, "model-z"), (5, "XX"), (6, "'3'"), (7, "annotator"), (8, "repeats line 2")]:
        assert f"labels.csv:line {line}:" in err, line
        assert reason in err
    assert "line 2:" not in err
    assert "nothing imported" in err
    assert _count(db) == 0


def test_missing_columns_and_unknown_dataset(db, tmp_path, capsys):
    csv = tmp_path / "labels.csv"
    csv.write_text("query_id,model_id,score\nen-001,model-a,2\n", encoding="utf-8")
    assert import_human_labels_command(csv, db=db) == 1
    assert "metric" in capsys.readouterr().err
    csv.write_text("query_id,model_id,metric,annotator,score,dataset\nen-001,model-a,SS,a,2,other\n",
                   encoding="utf-8")
    assert import_human_labels_command(csv, db=db) == 1
    assert "dataset 'other'" in capsys.readouterr().err
