"""The papers' published figures in data/reference/: shape, row counts and spot-checked values."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

REF = Path(__file__).resolve().parent.parent / "data" / "reference"
TABLE_LANGUAGE = {2: "en", 3: "hi", 4: "kn", 5: "ta", 6: "te"}
METRICS = ["AGG", "COH", "CON", "FC", "SS"]


@pytest.fixture(scope="module")
def leaderboards() -> pd.DataFrame:
    return pd.read_csv(REF / "health_pariksha_leaderboards.csv")


def test_table1_models():
    t1 = pd.read_csv(REF / "health_pariksha_table1_models.csv")
    assert list(t1.columns) == ["model", "languages_tested", "availability"]
    assert len(t1) == 24
    assert t1.model.is_unique
    assert set(t1.availability) == {"Proprietary", "Open-weights", "Indic"}
    row = t1.set_index("model").loc["Tensoic/Kan-Llama-7B-SFT-v0.5"]
    assert (row.languages_tested, row.availability) == ("En, Ka", "Indic")
    assert t1.set_index("model").loc["GPT-4o"].availability == "Proprietary"
    assert (t1.languages_tested == "All").sum() == 14


def test_leaderboard_row_counts(leaderboards):
    assert list(leaderboards.columns) == ["table", "language", "model", *METRICS]
    counts = leaderboards.groupby("language").size().to_dict()
    assert counts == {"en": 24, "hi": 19, "kn": 13, "ta": 13, "te": 13}
    for table, lang in TABLE_LANGUAGE.items():
        assert set(leaderboards[leaderboards.table == table].language) == {lang}
        assert leaderboards[leaderboards.table == table].model.is_unique


def test_leaderboard_values(leaderboards):
    assert leaderboards[METRICS].min().min() >= 0 and leaderboards[METRICS].max().max() <= 2
    idx = leaderboards.set_index(["language", "model"])[METRICS]
    assert idx.loc[("en", "Qwen2.5-72B-Instruct")].tolist() == [1.46, 1.86, 1.96, 1.62, 1.43]
    assert idx.loc[("en", "telugu-llama-7b-instruct-v0.1")].tolist() == [0.04, 0.00, 0.58, 0.03, 0.00]
    assert idx.loc[("hi", "gpt-4")].tolist() == [1.21, 1.74, 1.79, 1.26, 1.16]
    assert idx.loc[("hi", "Llamavaad")].CON == 0.21
    assert idx.loc[("kn", "Ambari-7B-Instruct-v0.2")].AGG == 0.05
    assert idx.loc[("te", "Telugu-Llama2-7B-v0-Instruct")].tolist() == [0.0] * 5
    assert idx.loc[("te", "gpt-4")].CON == 2.00
    # each table is printed in descending AGG order
    for _, group in leaderboards.groupby("table"):
        assert group.AGG.is_monotonic_decreasing


def test_every_leaderboard_model_is_in_table1(leaderboards):
    t1 = pd.read_csv(REF / "health_pariksha_table1_models.csv")
    short = set(t1.model.str.split("/").str[-1].str.replace("GPT-", "gpt-"))
    assert set(leaderboards.model) <= short


def test_kannada_and_tamil_tables_identical_as_documented(leaderboards):
    kn = leaderboards[leaderboards.table == 4].drop(columns=["table", "language"]).reset_index(drop=True)
    ta = leaderboards[leaderboards.table == 5].drop(columns=["table", "language"]).reset_index(drop=True)
    assert kn.equals(ta)
    assert "Tables 4 (Kannada) and 5 (Tamil) are identical" in (REF / "README.md").read_text()


def test_table7_rankings():
    t7 = pd.read_csv(REF / "health_pariksha_table7_rankings.csv")
    assert list(t7.columns) == ["language", "model", "human_rank", "human_ss", "llm_rank", "llm_ss"]
    assert len(t7) == 25
    assert t7.groupby("language").size().to_dict() == {lang: 5 for lang in ["en", "hi", "kn", "ta", "te"]}
    for _, group in t7.groupby("language"):
        assert sorted(group.human_rank) == [1, 2, 3, 4, 5] and sorted(group.llm_rank) == [1, 2, 3, 4, 5]
    idx = t7.set_index(["language", "model"])
    assert idx.loc[("en", "Phi-3.5-MoE-instruct")].tolist() == [1, 1.30, 1, 1.22]
    assert idx.loc[("en", "gpt-4o")].tolist() == [3, 0.90, 3, 0.87]
    # Telugu is the one language where the rankings differ
    assert idx.loc[("te", "gpt-4o")].tolist() == [4, 0.38, 3, 0.31]
    assert idx.loc[("te", "Indic-gemma-7b-finetuned-sft-Navarasa-2.0")].tolist() == [3, 0.38, 5, 0.08]
    same = t7.groupby("language").apply(lambda g: (g.human_rank == g.llm_rank).all())
    assert same.to_dict() == {"en": True, "hi": True, "kn": True, "ta": True, "te": False}


def test_medcode_table2():
    mc = pd.read_csv(REF / "medcode_table2.csv")
    assert list(mc.columns) == ["model", "dataset", "meteor", "rouge_l", "llm_accuracy",
                                "p_none", "p_low", "p_moderate", "p_high"]
    assert len(mc) == 12
    assert mc.groupby("model").size().to_dict() == {"LLaMA-3": 4, "BioMistral 7B": 4, "Mistral 7B v2.0": 4}
    assert set(mc.dataset) == {"MEDQA USMLE", "MEDMCQA", "PUBMEDQA", "MMLU"}
    idx = mc.set_index(["model", "dataset"])
    assert idx.loc[("LLaMA-3", "MMLU")].tolist() == [0.71, 0.71, 0.70, 0.57, 0.31, 0.09, 0.04]
    assert idx.loc[("Mistral 7B v2.0", "MEDQA USMLE")].p_high == 0.01
    sums = mc[["p_none", "p_low", "p_moderate", "p_high"]].sum(axis=1).round(2)
    off = {f"{m} / {d}" for m, d, s in zip(mc.model, mc.dataset, sums, strict=True) if s != 1.0}
    assert off == {"Mistral 7B v2.0 / MEDQA USMLE", "LLaMA-3 / MEDMCQA", "LLaMA-3 / MMLU",
                   "BioMistral 7B / MMLU", "Mistral 7B v2.0 / MEDMCQA", "Mistral 7B v2.0 / MMLU"}
    readme = (REF / "README.md").read_text()
    assert all(name in readme for name in off)
