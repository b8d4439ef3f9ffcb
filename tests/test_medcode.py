"""Med-CoDE: label-token classification, the training path on a tiny BERT, and the checkpoint in use."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.errors import UserError
from pipeline.steps.medcode import (
    LABELS,
    NO_LABEL_TOKEN,
    PAPER_CLASS_WEIGHTS,
    classify_with_checkpoint,
    distribution_from_logprobs,
    label_for_token,
)
from pipeline.train.classifier import class_weights_for, read_training_csv, train_classifier_command

REPO = Path(__file__).resolve().parent.parent

EXAMPLES = {
    "None": ["The response matches the ground truth fully and adds nothing extra.",
             "Fully aligned with the ground truth; every fact is the same."],
    "Low": ["Mostly accurate but adds a minor detail not in the ground truth.",
            "Slight deviation: says 6 days instead of one week, otherwise correct."],
    "Moderate": ["Mixes correct advice with a wrong claim about eye drops; significant deviation.",
                 "Half of the answer is right, the other half contradicts the ground truth."],
    "High": ["Entirely incorrect: it allows a head bath on day one, the ground truth says 7 days.",
             "The response is unrelated to the question and wrong in every aspect."],
}


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


def test_class_weights():
    assert class_weights_for([0, 1], "paper") == list(PAPER_CLASS_WEIGHTS)
    balanced = class_weights_for([0, 0, 0, 1, 2, 3], "balanced")
    assert balanced[0] < balanced[1] == balanced[2] == balanced[3]
    with pytest.raises(UserError):
        class_weights_for([0], [1.0, 2.0])


def test_bad_training_rows_name_their_lines(tmp_path):
    csv = tmp_path / "c.csv"
    csv.write_text('critique,label\n"fine critique",Low\n,High\n"text",Severe\n"ok",medium\n', encoding="utf-8")
    with pytest.raises(UserError) as err:
        read_training_csv(csv)
    msg = str(err.value)
    assert "line 3: critique is empty" in msg
    assert "line 4: label 'Severe'" in msg
    assert "line 2" not in msg and "line 5" not in msg  # 'medium' is §3.1's name for Moderate
    csv.write_text("text,label\nx,Low\n", encoding="utf-8")
    with pytest.raises(UserError, match="columns critique and label"):
        read_training_csv(csv)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """Train the tiny BERT through the CLI entry (Med-CoDE hyper-parameters except epochs/lr)."""
    folder = tmp_path_factory.mktemp("medcode")
    csv = folder / "critiques.csv"
    lines = ["critique,label"] + [f'"{text}",{label}' for label, texts in EXAMPLES.items() for text in texts]
    csv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = folder / "clf"
    assert train_classifier_command(csv, output=out, base_model="tiny", epochs=60, learning_rate=3e-3,
                                    batch_size=8, max_length=208, dropout=0.3, class_weights="balanced") == 0
    return out


def test_tiny_training_saves_a_usable_checkpoint(tiny_checkpoint):
    import json

    report = json.loads((tiny_checkpoint / "medcode.json").read_text())
    # balanced data → equal weights (the paper's [5.96, 1.34, 0.83, 0.52] fit its own skewed classes and,
    # on balanced data, let the model ignore High: it is the default only because the paper used it)
    assert report["class_weights"] == pytest.approx([1.0, 1.0, 1.0, 1.0])
    assert report["max_length"] == 208 and report["dropout"] == 0.3 and report["batch_size"] == 8
    assert report["loss"][-1] < 0.75 * report["loss"][0]  # it learned something
    texts = [t for texts in EXAMPLES.values() for t in texts]
    probs = classify_with_checkpoint(str(tiny_checkpoint), texts)
    assert probs.shape == (8, 4)
    assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-6)
    truth = [LABELS.index(label) for label, ts in EXAMPLES.items() for _ in ts]
    assert (probs.argmax(axis=1) == np.array(truth)).mean() >= 0.5  # twice chance on its own training data


def test_training_defaults_are_the_papers():
    import inspect

    params = inspect.signature(train_classifier_command).parameters
    defaults = {k: params[k].default for k in ("epochs", "learning_rate", "batch_size", "max_length", "dropout",
                                                "class_weights")}
    assert defaults == {"epochs": 25, "learning_rate": 1e-3, "batch_size": 16, "max_length": 208, "dropout": 0.3,
                        "class_weights": "paper"}


def test_cli_train_classifier_rejects_bad_csv(tmp_path):
    csv = tmp_path / "bad.csv"
    csv.write_text("critique,label\nok,Low\nbad,Huge\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "pipeline", "medcode", "train-classifier", str(csv),
                           "--base-model", "tiny", "-o", str(tmp_path / "out")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert "line 3" in proc.stderr and "Huge" in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_critique_response_with_real_critic_and_trained_checkpoint(tiny_checkpoint):
    """The playground entry: real SmolLM2 critic, then the fine-tuned classifier (and logprobs)."""
    from pipeline.config import ModelConfig
    from pipeline.dataset import load_dataset
    from pipeline.models import Model, create_backend
    from pipeline.steps.medcode import critique_response

    q = load_dataset(REPO / "data" / "cataract").query("en-004")
    critic = Model(create_backend(ModelConfig(id="llamacpp/smollm2-135m-instruct", max_tokens=32)))
    for classifier in (str(tiny_checkpoint), "logprobs"):
        out = asyncio.run(critique_response(critic, query=q, response="Head bath after 15 days.",
                                            classifier=classifier))
        probs = [out["p_none"], out["p_low"], out["p_moderate"], out["p_high"]]
        assert out["critique"]
        assert sum(probs) == pytest.approx(1.0, abs=1e-6)
        assert out["label"] == LABELS[int(np.argmax(probs))]
        if classifier == "logprobs":
            assert out["classifier"] in ("logprobs", NO_LABEL_TOKEN)
        else:
            assert out["classifier"] == "checkpoint:clf"
