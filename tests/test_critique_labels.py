"""Human checks of Med-CoDE critiques: the CSV import (all or nothing, bad rows named by line) and the statistics
behind Table 1, critique accuracy and the paper's correlation claims."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from scipy.stats import pearsonr
from sklearn.metrics import accuracy_score
from statsmodels.stats.proportion import proportion_confint

from pipeline.analysis.medcode import PAPER_CLAIMS, accuracy, fisher_ci, verdict, wilson_ci
from pipeline.labels.critique_labels import import_critique_labels_command
from pipeline.store import Store, text_hash
from pipeline.store.rows import LabelledCritiqueRow, ResponseRow

CRITIC = "vllm/medcode-phi-3-mini-critic"
DATASET = "medqa-synth"


def rows(db, sql, params=()):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


@pytest.fixture
def db(synthetic_db, copy_db):
    return copy_db(synthetic_db)


def items(db, n):
    return rows(db, "SELECT c.query_id, c.model_id, c.critique FROM critiques c JOIN responses r "
                    "USING (dataset, query_id, model_id) WHERE c.dataset = ? AND c.error IS NULL "
                    "AND r.response_hash = c.response_hash ORDER BY 1, 2 LIMIT ?", [DATASET, n])


def test_import_writes_every_row_tied_to_the_critique_and_response(db, tmp_path):
    (a, m1, crit1), (b, m2, _) = items(db, 2)
    csv = tmp_path / "checks.csv"
    csv.write_text("dataset,query_id,model_id,annotator,label,critique_accurate,comment\n"
                   f"{DATASET},{a},{m1},dr-a,Medium,yes,fine\n"
                   f"{DATASET},{b},{m2},dr-a,,no,\n"
                   f"{DATASET},{a},{m1},dr-b,high,,\n")
    assert import_critique_labels_command(csv, db=db) == 0
    got = rows(db, "SELECT query_id, annotator, label, critique_accurate, critique_kind, critique_by, critique_hash, "
                   "response_hash, source FROM critique_labels ORDER BY query_id, annotator")
    assert {(g[0], g[1], g[2], g[3]) for g in got} == {(a, "dr-a", "Moderate", True), (b, "dr-a", None, False),
                                                       (a, "dr-b", "High", None)}
    assert {(g[4], g[5], g[8]) for g in got} == {("critic", CRITIC, "checks.csv")}
    first = next(g for g in got if g[0] == a)
    current = rows(db, "SELECT response_hash FROM responses WHERE dataset = ? AND query_id = ? AND model_id = ?",
                   [DATASET, a, m1])[0][0]
    assert first[6] == text_hash(crit1) and first[7] == current


def test_bad_rows_are_named_by_line_and_nothing_is_written(db, tmp_path, capsys):
    (a, m1, _), (b, m2, _), (c, m3, _) = items(db, 3)
    Store(db).write([  # a second critique of c (a teacher's), so c needs critique_by
        LabelledCritiqueRow(dataset=DATASET, query_id=c, model_id=m3, source="openai/gpt-4", critique="Teacher.",
                            label="Low", response_hash=rows(db, "SELECT response_hash FROM responses WHERE dataset = ? "
                                                                "AND query_id = ? AND model_id = ?",
                                                            [DATASET, c, m3])[0][0], run_id=None)])
    csv = tmp_path / "bad.csv"
    csv.write_text("dataset,query_id,model_id,annotator,label,critique_accurate,critique_by\n"
                   f"{DATASET},{a},{m1},dr-a,Low,yes,\n"          # 2: good
                   f"nowhere,{a},{m1},dr-a,Low,yes,\n"            # 3
                   f"{DATASET},{a},{m1},dr-a,Big,yes,\n"          # 4
                   f"{DATASET},{a},{m1},dr-a,Low,maybe,\n"        # 5
                   f"{DATASET},{a},{m1},dr-a,,,\n"                # 6
                   f"{DATASET},no-such,{m1},dr-a,Low,yes,\n"      # 7
                   f"{DATASET},{a},no/model,dr-a,Low,yes,\n"      # 8
                   f"{DATASET},{b},{m2},dr-a,Low,yes,other/critic\n"  # 9
                   f"{DATASET},{c},{m3},dr-a,Low,yes,\n"          # 10: two critiques, none named
                   f"{DATASET},{a},{m1},dr-a,High,no,\n"          # 11: repeats line 2
                   f"{DATASET},{a},{m1},,Low,yes,\n")             # 12
    assert import_critique_labels_command(csv, db=db) == 1
    err = " ".join(capsys.readouterr().err.split())
    said = {int(part.split(":")[0].removeprefix("line ")): part for part in err.split("bad.csv:")[1:]}
    for line, reason in [(3, "dataset 'nowhere' is not in the database"), (4, "label 'Big' is not one of"),
                         (5, "critique_accurate 'maybe' is not yes or no"), (6, "neither label nor critique_accurate"),
                         (7, "query 'no-such' is not in dataset"), (8, "model 'no/model' has no response"),
                         (9, "no critique by 'other/critic'"), (10, "has several critiques"), (11, "repeats line 2"),
                         (12, "missing annotator")]:
        assert reason in said[line], (line, reason)
    assert sorted(said) == list(range(3, 13)) and "10 bad row(s); nothing imported" in err
    assert rows(db, "SELECT count(*) FROM critique_labels")[0][0] == 0


def test_a_regenerated_response_loses_its_critique(db, tmp_path):
    (a, m1, _), = items(db, 1)
    Store(db).write([ResponseRow(dataset=DATASET, query_id=a, model_id=m1, run_id="regen", prompt_hash="h",
                                 text="A new answer, not critiqued.", error=None)])
    csv = tmp_path / "late.csv"
    csv.write_text(f"query_id,model_id,annotator,label\n{a},{m1},dr-a,Low\n")
    assert import_critique_labels_command(csv, db=db, dataset=DATASET) == 1
    assert rows(db, "SELECT count(*) FROM critique_labels")[0][0] == 0


def test_accuracy_and_intervals_match_scikit_learn_statsmodels_and_scipy():
    rng = np.random.default_rng(4)
    labels = np.array(["None", "Low", "Moderate", "High"])
    truth = rng.choice(labels, 120)
    pred = np.where(rng.random(120) < 0.7, truth, rng.choice(labels, 120)).astype(object)
    pred[::13] = None  # unparsed: neither right nor wrong
    out = accuracy(truth.tolist(), pred.tolist())
    known = [i for i, p in enumerate(pred) if p is not None]
    assert out["accuracy"] == pytest.approx(accuracy_score(truth[known], pred[known].astype(str)))
    assert (out["n"], out["unparsed"]) == (len(known), 120 - len(known))
    assert (out["lo"], out["hi"]) == tuple(pytest.approx(v) for v in proportion_confint(out["correct"], out["n"],
                                                                                         method="wilson"))
    assert np.isnan(wilson_ci(0, 0)).all()
    x = rng.normal(size=40)
    y = 0.4 * x + rng.normal(size=40)
    r = pearsonr(x, y)
    assert fisher_ci(r.statistic, 40) == tuple(pytest.approx(v) for v in r.confidence_interval())


def test_claim_verdicts():
    strong, positive, low = PAPER_CLAIMS
    assert verdict(strong, 0.7, 0.55, 0.8, 100) == "consistent"
    assert verdict(strong, 0.4, 0.2, 0.6, 100) == "undecided"
    assert verdict(strong, 0.1, -0.1, 0.3, 100) == "contradicted"
    assert verdict(positive, 0.2, 0.05, 0.35, 100) == "consistent"
    assert verdict(low, 0.15, 0.05, 0.25, 100) == "consistent"
    assert verdict(low, 0.5, 0.35, 0.6, 100) == "contradicted"
    assert verdict(low, 0.5, 0.35, 0.6, 5) == "too few items"
