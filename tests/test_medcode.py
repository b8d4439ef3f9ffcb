"""Med-CoDE: label-token classification (the training path and the checkpoint in use: tests/test_train_*.py)."""

from __future__ import annotations

import math

import pytest

from pipeline.steps.medcode import NO_LABEL_TOKEN, distribution_from_logprobs, label_for_token


def test_label_for_token():
    assert label_for_token("None") == "None"
    assert label_for_token(" high") == "High"
    assert label_for_token("Mod") == "Moderate"
    assert label_for_token("Moderately") is None
    assert label_for_token("No") is None  # too short to stand for None
    assert label_for_token("The") is None
    assert label_for_token("") is None


def test_distribution_from_logprobs_renormalises_over_the_labels():
    top = {"The": math.log(0.5), "High": math.log(0.2), " high": math.log(0.1), "None": math.log(0.1),
           "Mod": math.log(0.05), "A": math.log(0.05)}
    probs, tag = distribution_from_logprobs(top)
    assert tag == "logprobs"
    assert sum(probs) == pytest.approx(1.0, abs=1e-9)
    assert probs == pytest.approx([0.1 / 0.45, 0.0, 0.05 / 0.45, 0.3 / 0.45])


def test_no_label_token_is_flagged_not_invented():
    probs, tag = distribution_from_logprobs({"The": -0.1, "A": -2.0})
    assert probs == [0.25] * 4 and tag == NO_LABEL_TOKEN
    assert distribution_from_logprobs(None) == ([0.25] * 4, NO_LABEL_TOKEN)
