"""Trust read models feed the statistics the right arrays: tied groups, PPI, Krippendorff's α and κ, disagreements,
the jury's scores, worst-at-k and per-item variance, the reliability matrix, variants, provenance, weight presets.

Each statistic is checked against its reference implementation in tests/test_analysis_*.py; here the arrays are
extracted by SQL in the test and the read model's answer must equal the reference on them.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import krippendorff
import numpy as np
import pandas as pd
import pytest

from pipeline.analysis import jury as jury_stats
from pipeline.analysis.agreement import weighted_kappa
from pipeline.analysis.calibration import ppi_mean
from pipeline.analysis.coincidence import alpha_from_patterns, kappa_from_patterns
from pipeline.analysis.paired import paired_differences
from pipeline.analysis.reliability import discrimination_auc
from pipeline.analysis.significance import paired_bootstrap, tied_groups
from pipeline.analysis.worst_at_k import per_item_variance, worst_at_k
from pipeline.dataset import load_dataset
from pipeline.metrics import DEFAULT_WEIGHTS, METRICS, WEIGHT_PRESETS
from pipeline.read import jury, significance, themes, trust
from pipeline.read import leaderboard as lb
from pipeline.read.common import Filters, model_pred, on_qf, queries_cte, weights_dict, weights_tuple
from pipeline.read.jury import item_source
from pipeline.store import Store
from pipeline.store.rows import JudgmentRow, ResponseRow, RunRow, dataset_rows

REPO = Path(__file__).resolve().parent.parent
JUDGE = "openai/gpt-4o"
JUDGE2 = "vllm/meta-llama/Llama-3.3-70B-Instruct"
W = weights_tuple(DEFAULT_WEIGHTS)


def q(db: Path, sql: str, params=()) -> pd.DataFrame:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, list(params)).df()
    finally:
        con.close()


# -- a database with a known large difference and a known tie ---------------------------------------------------
@pytest.fixture(scope="module")
def tie_db(tmp_path_factory) -> Path:
    """The cataract queries answered by four models: 'best' scores 2 everywhere, 'worst' 0, 'tie_a' and 'tie_b'
    the same random scores — one judge, every metric."""
    db = tmp_path_factory.mktemp("tie") / "tie.duckdb"
    cataract = load_dataset(REPO / "data" / "cataract")
    store = Store(db)
    store.write(dataset_rows(cataract))
    rng = np.random.default_rng(7)
    english = [x.query_id for x in cataract.queries if x.language == "en"]
    shared = rng.integers(0, 3, size=(len(english), len(METRICS)))
    rows = []
    for model in ("m/best", "m/worst", "m/tie_a", "m/tie_b"):
        for i, qid in enumerate(english):
            r = ResponseRow(dataset="cataract", query_id=qid, model_id=model, run_id="r", prompt_hash="h",
                            text=f"{model} on {qid}", error=None)
            rows.append(r)
            for k, metric in enumerate(METRICS):
                score = {"m/best": 2, "m/worst": 0}.get(model, int(shared[i, k]))
                rows.append(JudgmentRow(dataset="cataract", query_id=qid, model_id=model, judge_id="j", metric=metric,
                                        sample=0, score=score, parse_ok=True, justification="", raw_output="",
                                        response_hash=r.response_hash, run_id="r"))
    store.write(rows)
    return db


def test_tied_groups_find_the_large_difference_and_the_tie(tie_db):
    f = Filters(dataset="cataract")
    models = ("m/best", "m/tie_a", "m/tie_b", "m/worst")
    out = significance.significance(tie_db, f, "j", W, "en", models)
    assert out["letters"]["m/best"] == "a" and out["letters"]["m/worst"] == "c"
    assert out["letters"]["m/tie_a"] == out["letters"]["m/tie_b"] == "b"
    assert out["established"] and out["n_items"] == 141
    # the same letters as the reference (scipy's paired bootstrap) on the items × models AGG matrix taken by SQL
    w = weights_dict(W)
    agg = " + ".join(f"{w[m]} * {m}" for m in METRICS)
    long = q(tie_db, f"SELECT i.query_id, i.model_id, {agg} AS agg FROM item_scores i JOIN queries q "
                     "USING (dataset, query_id) WHERE q.language = 'en' AND i.judge_id = 'j'")
    frame = long.pivot(index="query_id", columns="model_id", values="agg")[list(models)]
    reference = paired_bootstrap(frame, n_resamples=2000)
    assert tied_groups(frame.mean(), reference) == out["letters"]
    assert list(reference.significant) == list(out["pairs"].significant)
    assert np.allclose(out["means"].to_numpy(), frame.mean().to_numpy())


def test_the_item_matrix_is_the_sql_pivot(jury_db):
    f = Filters(dataset="synthetic")
    models = tuple(q(jury_db, "SELECT DISTINCT model_id FROM responses WHERE dataset = 'synthetic' ORDER BY 1")
                   .model_id)
    matrix = significance.item_matrix(jury_db, f, JUDGE, "en", models)
    long = q(jury_db, "SELECT i.query_id, i.model_id, i.FC, i.CON FROM item_scores i JOIN queries q "
                      "USING (dataset, query_id) WHERE i.dataset = 'synthetic' AND q.language = 'en' "
                      "AND i.judge_id = ?", [JUDGE])
    for k, metric in ((0, "FC"), (3, "CON")):
        pivot = long.pivot(index="query_id", columns="model_id", values=metric)[list(models)].to_numpy(dtype=float)
        got = matrix[:, :, k]
        assert got.shape == pivot.shape
        # rows are items in some order shared by every model: compare the sorted row tuples
        key = lambda a: sorted(map(tuple, np.nan_to_num(a, nan=-1.0)))  # noqa: E731
        assert key(got) == key(pivot)


def test_calibrated_means_are_ppi_on_the_arrays_sql_gives(jury_db):
    f = Filters(dataset="synthetic")
    cal = significance.calibrated_means(jury_db, f, JUDGE, "en")
    assert not cal.empty and set(cal.metric) == {"SS"} and (cal.method == "PPI++").all()
    items = q(jury_db, "SELECT i.model_id, i.query_id, i.SS AS judge, h.human FROM item_scores i "
                       "JOIN queries q USING (dataset, query_id) LEFT JOIN (SELECT dataset, query_id, model_id, "
                       "avg(score) AS human FROM human_labels WHERE metric = 'SS' GROUP BY ALL) h "
                       "USING (dataset, query_id, model_id) WHERE i.dataset = 'synthetic' AND q.language = 'en' "
                       "AND i.judge_id = ? AND i.SS IS NOT NULL", [JUDGE])
    for row in cal.itertuples():
        g = items[items.model_id == row.model_id]
        labelled, unlabelled = g[g.human.notna()], g[g.human.isna()]
        ref = ppi_mean(labelled.judge.to_numpy(), labelled.human.to_numpy(), unlabelled.judge.to_numpy())
        for k in ("mean", "lo", "hi", "judge_mean", "correction", "n_labelled", "n_unlabelled"):
            assert getattr(row, k) == pytest.approx(ref[k], abs=1e-9), k
    assert (cal.correction < 0).mean() >= 0.5  # the synthetic judge is lenient: doctors score lower


def test_fully_labelled_languages_give_the_human_mean(jury_db):
    cal = significance.calibrated_means(jury_db, Filters(dataset="synthetic"), JUDGE, "hi")
    human = q(jury_db, "SELECT h.model_id, avg(h.score) AS m FROM (SELECT dataset, query_id, model_id, avg(score) "
                       "AS score FROM human_labels WHERE metric = 'SS' GROUP BY ALL) h JOIN queries q "
                       "USING (dataset, query_id) JOIN item_scores i USING (dataset, query_id, model_id) "
                       "WHERE q.language = 'hi' AND i.judge_id = ? AND i.SS IS NOT NULL GROUP BY ALL",
              [JUDGE]).set_index("model_id").m
    for row in cal.itertuples():
        assert row.method.startswith("human") and row.n_unlabelled == 0
        assert row.mean == pytest.approx(human[row.model_id]) and row.lo <= row.mean <= row.hi


def test_alpha_kappa_and_disagreements_equal_their_references(jury_db):
    f = Filters(dataset="synthetic", languages=("en",))
    judges = (JUDGE, JUDGE2)
    agreement = jury.jury_agreement(jury_db, f, judges)
    alpha, kappa = agreement["alpha"], agreement["kappa"]
    for metric in METRICS:
        matrix = jury.judge_matrix(jury_db, f, judges, metric)
        expected = krippendorff.alpha(reliability_data=matrix.T.to_numpy(dtype=float), level_of_measurement="ordinal")
        got = alpha[(alpha.language == "en") & (alpha.metric == metric)].alpha.iloc[0]
        assert got == pytest.approx(expected, abs=1e-12)
        assert got == pytest.approx(jury_stats.krippendorff_alpha(matrix), abs=1e-12)
        # two samples per item make half-point item scores: scikit-learn takes them as classes 0..4
        ref = jury_stats.pairwise_kappa((matrix * 2).round()).iloc[0]
        mine = kappa[(kappa.language == "en") & (kappa.metric == metric)].iloc[0]
        assert mine.kappa == pytest.approx(ref.kappa, abs=1e-12) and mine.n_items == ref.n_items
    matrix = jury.judge_matrix(jury_db, f, judges, "FC")
    ref = jury_stats.disagreements(matrix, top=10)
    got = jury.disagreement_items(jury_db, f, judges, "FC", 10)
    assert list(got.spread) == list(ref.spread) and np.allclose(got["std"], ref["std"])
    for r in got.itertuples():  # each listed item's scores are its judges' scores
        row = matrix.loc[(r.dataset, r.query_id, r.model_id)]
        assert r.spread == pytest.approx(row.max() - row.min())


def test_alpha_from_patterns_is_krippendorffs():
    rng = np.random.default_rng(3)
    base = rng.integers(0, 3, 500).astype(float)
    data = np.stack([np.where(rng.random(500) < 0.7, base, rng.integers(0, 3, 500)) for _ in range(3)], 1)
    data[rng.random(data.shape) < 0.05] = np.nan
    patterns, counts = np.unique(np.nan_to_num(data, nan=-9), axis=0, return_counts=True)
    patterns = np.where(patterns == -9, np.nan, patterns)
    for level in ("nominal", "ordinal", "interval"):
        assert alpha_from_patterns(patterns, counts, level) == pytest.approx(
            krippendorff.alpha(reliability_data=data.T, level_of_measurement=level), abs=1e-12)
    frame = pd.DataFrame(data)
    labels = np.unique(data[~np.isnan(data)])
    for r in jury_stats.pairwise_kappa(frame).itertuples():
        kappa, n = kappa_from_patterns(patterns[:, r.judge_a], patterns[:, r.judge_b], counts, labels)
        assert kappa == pytest.approx(r.kappa, abs=1e-12) and n == r.n_items


def test_paired_differences_match_the_scipy_paired_bootstrap():
    rng = np.random.default_rng(1)
    for n in (40, 600):  # resampled below 200 items, from the cumulants above
        latent = rng.normal(size=n)
        frame = pd.DataFrame({m: np.clip(np.round(1 + 0.25 * k + latent + rng.normal(0, 0.7, n)), 0, 2)
                              for k, m in enumerate("abcd")})
        frame[rng.random(frame.shape) < 0.03] = np.nan
        ref = paired_bootstrap(frame, n_resamples=4000)
        mine = paired_differences(frame, n_resamples=4000)
        assert set(mine.method) == {"resampled" if n < 200 else "expansion"}
        assert np.allclose(mine["diff"], ref["diff"]) and (mine.n_items == ref.n_items).all()
        assert np.abs(mine.ci_lo - ref.ci_lo).max() < 0.04 and np.abs(mine.ci_hi - ref.ci_hi).max() < 0.04
        clear = (ref.p_value < 0.01) | (ref.p_value > 0.2)
        assert (mine.significant[clear] == ref.significant[clear]).all()
    again = paired_differences(frame.iloc[:40], seed=5)
    assert again.equals(paired_differences(frame.iloc[:40], seed=5))  # reproducible for a seed


def test_the_jury_scores_each_item_by_its_judges_mean(jury_db):
    f = Filters(dataset="synthetic")
    board = lb.leaderboard(lb.leaderboard_base(jury_db, f, jury.jury_id("mean")), W, "en").set_index("model_id")
    for metric in ("FC", "SS"):
        matrix = jury.judge_matrix(jury_db, f.with_(languages=("en",)), (JUDGE, JUDGE2), metric)
        per_item = jury_stats.jury_scores(matrix, "mean")
        expected = per_item.groupby(level="model_id").mean()
        assert np.allclose(board.loc[expected.index, metric], expected)
    median = lb.leaderboard(lb.leaderboard_base(jury_db, f, jury.jury_id("median")), W, "en").set_index("model_id")
    assert np.allclose(median.FC, board.loc[median.index].FC)  # two judges: the median is the mean


def test_worst_of_k_and_item_variance_equal_the_references(jury_db):
    f = Filters(dataset="synthetic")
    samples = q(jury_db, "SELECT j.model_id, j.query_id, list(j.score) AS s FROM judgments j JOIN queries q "
                         "USING (dataset, query_id) JOIN responses r USING (dataset, query_id, model_id) "
                         "WHERE j.dataset = 'synthetic' AND q.language = 'en' AND j.judge_id = ? AND j.metric = 'FC' "
                         "AND j.parse_ok "
                         "AND r.error IS NULL AND r.response_hash = j.response_hash GROUP BY ALL", [JUDGE])
    worst = significance.worst_of_k(jury_db, f, JUDGE, W, "en", metric="FC").set_index("model_id")
    assert len(worst) and (worst.k == 2).all() and (worst.worst <= worst["mean"] + 1e-12).all()
    for model, g in samples.groupby("model_id"):
        ref = worst_at_k(dict(zip(g.query_id, g.s, strict=True)), 2)
        assert worst.loc[model, "worst"] == pytest.approx(ref)
    varied = significance.item_variance(jury_db, f, JUDGE, "en", "FC", 25)
    ref = per_item_variance({(m, qid): s for m, qid, s in samples.itertuples(index=False)})
    for r in varied.itertuples():
        assert r.variance == pytest.approx(ref[(r.model_id, r.query_id)])
    assert varied.variance.iloc[0] == pytest.approx(ref.max())
    assert significance.worst_of_k(jury_db, f, jury.jury_id(), W, "en").empty  # a jury has no samples of its own


def test_the_reliability_matrix_is_the_sanity_auc_and_the_human_kappa(jury_db):
    matrix = trust.reliability_matrix(jury_db, "synthetic", JUDGE)
    sanity = q(jury_db, "SELECT s.query_id, s.judge_id, s.metric, s.kind, s.score, s.parse_ok, q.language, "
                        "coalesce(q.script, 'native') AS script FROM judge_sanity s JOIN queries q "
                        "USING (dataset, query_id) WHERE s.judge_id = ?", [JUDGE])
    for (language, script), g in sanity.groupby(["language", "script"]):
        ref = discrimination_auc(g).set_index("metric")
        row = matrix[(matrix.stratum == "script") & (matrix.language == language) & (matrix.script == script)]
        for r in row.itertuples():
            assert r.auc == pytest.approx(ref.loc[r.metric, "auc"], nan_ok=True)
            assert (r.n_good, r.n_bad) == (ref.loc[r.metric, "n_good"], ref.loc[r.metric, "n_bad"])
    pairs = q(jury_db, "SELECT q.language, h.score AS human, round(i.SS) AS llm FROM human_labels h "
                       "JOIN item_scores i USING (dataset, query_id, model_id) "
                       "JOIN queries q USING (dataset, query_id) WHERE h.metric = 'SS' AND i.judge_id = ? "
                       "AND i.SS IS NOT NULL", [JUDGE])
    for language, g in pairs.groupby("language"):
        row = matrix[(matrix.stratum == "language") & (matrix.language == language) & (matrix.metric == "SS")].iloc[0]
        assert row.kappa == pytest.approx(weighted_kappa(g.human, g.llm)) and row.n_labels == len(g)
        assert row.agreement == pytest.approx((g.human == g.llm).mean())
    # Telugu has no sanity answers: its FC, COH, CON cells are marked for want of evidence, SS has labels
    marks = trust.cell_marks(matrix, "te")
    assert {"FC", "COH", "CON", "AGG"} <= set(marks) and "no reliability evidence" in marks["FC"]
    # a stratum of one theme counts each query once per theme it carries
    theme = matrix[(matrix.stratum == "theme") & (matrix.theme == "cultural") & (matrix.metric == "FC")].iloc[0]
    cultural = sanity[sanity.metric == "FC"].merge(q(jury_db, "SELECT query_id FROM queries WHERE "
                                                              "list_contains(themes, 'cultural')"))
    parsed = cultural[cultural.parse_ok & cultural.score.notna()]
    assert theme.n_good + theme.n_bad == len(parsed)


def test_variant_changes_are_the_paired_differences(jury_db):
    f = Filters(dataset="synthetic")
    changes = themes.variant_changes(jury_db, f, JUDGE, W, metric="FC")
    assert len(changes) and changes.kind.str.contains("romanized vs native").any()
    pairs = themes.variant_pairs(jury_db, f, JUDGE, W, metric="FC")
    row = changes[changes.kind == "all languages: romanized vs native script"].iloc[0]
    mine = pairs[(pairs.a_language == pairs.b_language) & (pairs.a_script != pairs.b_script)
                 & (pairs.model_id == row.model_id)]
    latin = np.where(mine.a_script == "latin", mine.a_score, mine.b_score)
    native = np.where(mine.a_script == "latin", mine.b_score, mine.a_score)
    assert row.pairs == len(mine) and row.change == pytest.approx((latin - native).mean())
    assert row.lo <= row.change <= row.hi


def test_provenance_says_when_judgments_come_from_two_code_revisions(synthetic_db, copy_db):
    db = copy_db(synthetic_db)
    prov = trust.score_provenance(db, "synthetic", JUDGE)
    assert prov["mixed"] == [] and len(prov["runs"]) == 1 and prov["prompts"]["judge_prompt"]
    assert set(prov["prompts"]["rubrics"]) == set(METRICS)
    some = q(db, "SELECT * FROM judgments WHERE judge_id = ? LIMIT 3", [JUDGE])
    store = Store(db)
    store.write([RunRow(run_id="later", name="later", kind="pipeline", dataset="synthetic", config="{}",
                        config_hash="other", code_revision="abc123", model_files="{}")])
    store.write([JudgmentRow(**{**{k: r[k] for k in some.columns if k in JudgmentRow.__dataclass_fields__},
                                "run_id": "later", "cached": False}) for r in some.to_dict("records")])
    prov = trust.score_provenance(db, "synthetic", JUDGE)
    assert any("2 code revisions" in line for line in prov["mixed"])


def test_paper_fit_weights_are_used_as_given_and_the_tamil_table_is_a_copy(synthetic_db):
    f = Filters(dataset="synthetic")
    base = lb.leaderboard_base(synthetic_db, f, JUDGE)
    fit = weights_tuple(WEIGHT_PRESETS["paper-fit"])
    board = lb.leaderboard(base, fit, "en", "paper-fit")
    expected = sum(board[m] * WEIGHT_PRESETS["paper-fit"][m] for m in METRICS)
    assert np.allclose(board.AGG, expected)  # not scaled to sum 1
    check = lb.paper_agg_check("hi", fit, "paper-fit")
    assert check.AGG_gap.abs().max() < 0.01  # the paper's own metrics reproduce its printed AGG
    assert lb.paper_agg_check("hi", W).AGG_gap.abs().max() > 0.1
    assert lb.paper_copies() == {"ta": "kn"}


def test_calibration_arrays_count_what_grouping_every_item_counts(jury_db):
    """The calibration arrays take the unlabelled counts from the leaderboard's patterns (the writer's counted groups)
    less the labelled items; they must equal counting every item's (judge score, human score) in SQL, for a judge and
    both juries, in every language and in views the groups cannot answer (a theme) or narrow (models)."""
    with duckdb.connect(str(jury_db), read_only=True) as con:
        theme = con.execute("SELECT min(t) FROM (SELECT unnest(themes) AS t FROM queries)").fetchall()[0][0]
        models = [m for (m,) in con.execute("SELECT DISTINCT model_id FROM human_labels ORDER BY 1").fetchall()]
        languages = [x for (x,) in con.execute("SELECT DISTINCT language FROM queries ORDER BY 1").fetchall()]
    f = Filters(dataset="synthetic")
    views = [f, f.with_(themes=(theme,)), f.with_(models=(models[0], "x")), f.with_(scripts=("latin",))]
    checked = 0
    for judge in (JUDGE, "jury:mean", "jury:median"):
        for view in views:
            for language in languages:
                lf = view.with_(languages=(language,))
                qf, p_qf = queries_cte(lf)
                pred, p_model = model_pred(lf, "i")
                source, p_source = item_source(lf, judge)
                h_pred, p_h = model_pred(lf, "h")
                expected = q(jury_db, (
                    f"WITH {qf}, h AS (SELECT h.dataset, h.query_id, h.model_id, h.metric, avg(h.score) AS human "
                    f"FROM human_labels h JOIN qf ON {on_qf(lf, 'h')} WHERE h.score IS NOT NULL AND {h_pred} "
                    "AND list_contains(?, h.metric) GROUP BY ALL), "
                    f"x AS (SELECT i.dataset, i.query_id, i.model_id, {', '.join(f'i.{m}' for m in METRICS)} "
                    f"FROM {source} i JOIN qf ON {on_qf(lf, 'i')} WHERE i.judge_id = ? AND {pred} "
                    "AND i.model_id IN (SELECT model_id FROM h)), "
                    f"u AS (UNPIVOT x ON {', '.join(METRICS)} INTO NAME metric VALUE judge) "
                    "SELECT u.model_id, u.metric, u.judge, h.human, count(*) AS n FROM u LEFT JOIN h "
                    "USING (dataset, query_id, model_id, metric) WHERE (u.model_id, u.metric) IN "
                    "(SELECT model_id, metric FROM h) GROUP BY ALL ORDER BY ALL"
                ), [*p_qf, *p_h, list(METRICS), *p_source, judge, *p_model])
                got = significance.calibration_arrays(jury_db, view, judge, language)
                pd.testing.assert_frame_equal(got, expected, check_dtype=False)
                checked += len(got) > 0
    assert checked >= 12
