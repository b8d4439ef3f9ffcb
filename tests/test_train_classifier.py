"""Med-CoDE classifier training (§4.2): the CSV, the split, the weights, the model card and the checkpoint in use."""

from __future__ import annotations

import asyncio
import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.disagreement import LABELS, PAPER_CLASS_WEIGHTS
from pipeline.errors import UserError
from pipeline.steps import medcode
from pipeline.steps.medcode import classifier_tag, classify_with_checkpoint
from pipeline.train.classifier import (
    PAPER,
    SPLIT,
    ClassifierSettings,
    card_for_tag,
    class_weights_for,
    model_card,
    parse_class_weights,
    read_training_csv,
    train_classifier_command,
)
from pipeline.train.data import grouped_split, question_groups, read_labelled_csv, sha256_file

REPO = Path(__file__).resolve().parent.parent

PHRASES = {
    "None": ["matches the ground truth fully and adds nothing", "agrees with the reference on every point",
             "says the same as the ground truth in other words"],
    "Low": ["is mostly accurate but adds a minor detail", "deviates slightly on the number of days",
            "is correct apart from one small omission"],
    "Moderate": ["mixes correct advice with a wrong claim", "gets half right and contradicts the rest",
                 "misses a key instruction and adds a doubtful one"],
    "High": ["is entirely incorrect and unsafe", "contradicts the ground truth in every aspect",
             "is unrelated to the question and wrong"],
}
TOPICS = ["head bath", "eye drops", "dark glasses", "reading", "cooking", "walking", "sleeping", "television",
          "travel", "prayer"]


def write_csv(path: Path, per_label: int = 10) -> Path:
    """A small stratified training CSV in the bundled data's layout."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["item_id", "kind", "question", "ground_truth", "response", "critique", "label", "source"])
        for label, phrases in PHRASES.items():
            for i in range(per_label):
                topic = TOPICS[i % len(TOPICS)]
                w.writerow([f"t-{label}-{i}", "rag", f"Can I do {topic}?", f"{topic}: after a week.", "Yes.",
                            f"On {topic}, the response {phrases[i % len(phrases)]}.", label, "test"])
    return path


def test_class_weights_in_label_order():
    assert class_weights_for([0, 1], "paper") == list(PAPER_CLASS_WEIGHTS) == [5.96, 1.34, 0.83, 0.52]
    balanced = class_weights_for([0, 0, 0, 1, 2, 3], "balanced")
    assert balanced[0] < balanced[1] == balanced[2] == balanced[3]
    assert class_weights_for([0, 1, 2, 3] * 5, "balanced") == [1.0, 1.0, 1.0, 1.0]
    # the paper's weights are sklearn's balanced weights of its class shares (None rarest, High commonest)
    shares = [1 / (4 * w) for w in PAPER_CLASS_WEIGHTS]
    assert sum(shares) == pytest.approx(1.0, abs=0.02) and shares == sorted(shares)
    with pytest.raises(UserError):
        class_weights_for([0], [1.0, 2.0])
    assert parse_class_weights("1,2,3,4") == (1.0, 2.0, 3.0, 4.0)
    assert parse_class_weights("paper") == "paper"
    with pytest.raises(UserError, match="four positive numbers"):
        parse_class_weights("1,2")
    with pytest.raises(UserError):
        parse_class_weights("heavy")


def test_bad_training_rows_name_their_lines(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text('critique,label\n"fine critique",Low\n,High\n"text",Severe\n"ok",medium\n', encoding="utf-8")
    with pytest.raises(UserError) as err:
        read_training_csv(path)
    msg = str(err.value)
    assert str(path) in msg
    assert "line 3: critique is empty" in msg
    assert "line 4: label 'Severe'" in msg
    assert "line 2" not in msg and "line 5" not in msg  # 'medium' is §3.1's name for Moderate
    path.write_text("text,label\nx,Low\n", encoding="utf-8")
    with pytest.raises(UserError, match="columns critique and label"):
        read_training_csv(path)


def test_split_has_the_papers_proportions():
    # 38,819 critiques, each its own group → the paper's 27,173 / 5,823 / 5,823, no row in two splits
    shares = [1 / (4 * w) for w in PAPER_CLASS_WEIGHTS]
    labels = np.random.default_rng(0).choice(4, size=38_819, p=np.array(shares) / sum(shares)).tolist()
    groups = [f"row:{i}" for i in range(len(labels))]
    train, val, test = grouped_split(labels, groups, SPLIT, seed=0)
    assert (len(train), len(val), len(test)) == tuple(PAPER["split"]) == (27_173, 5_823, 5_823)
    assert not set(train) & set(val) and not set(train) & set(test) and not set(val) & set(test)


def test_grouped_split_keeps_each_question_in_one_split():
    # the bundled critiques: 100 questions × one row per label → 70 / 15 / 15 questions, 280 / 60 / 60 rows,
    # every split exactly balanced, and no question (nor its ground truth) in two splits
    rows = read_labelled_csv(REPO / "data" / "medcode-critiques" / "critiques.csv", ("critique", "label"))
    labels, groups = [r["label_index"] for r in rows], question_groups(rows)
    assert len(set(groups)) == 100
    train, val, test = grouped_split(labels, groups, SPLIT, seed=0)
    assert (len(train), len(val), len(test)) == (280, 60, 60)
    assert sorted(train + val + test) == list(range(400))
    for field in ("question", "ground_truth"):
        seen = [{rows[i][field] for i in ix} for ix in (train, val, test)]
        assert not seen[0] & seen[1] and not seen[0] & seen[2] and not seen[1] & seen[2], field
    assert [sum(labels[i] == c for i in test) for c in range(4)] == [15, 15, 15, 15]
    assert [sum(labels[i] == c for i in val) for c in range(4)] == [15, 15, 15, 15]
    assert grouped_split(labels, groups, SPLIT, seed=0) == (train, val, test)  # seeded
    assert grouped_split(labels, groups, SPLIT, seed=1) != (train, val, test)
    # case and spacing do not make another question; a row without a question is its own group
    assert question_groups([{"question": "Can I  bathe?"}, {"question": "can i bathe?"}, {"line": 9}]) == \
        ["q:can i bathe?", "q:can i bathe?", "row:9"]


def test_grouped_split_stratifies_as_far_as_groups_allow():
    # 60 questions of one row each plus 20 of four rows: the label shares differ by group, and the chosen
    # draw keeps the test split's label counts near the data's shares
    labels, groups = [], []
    for g in range(60):
        labels.append(3 if g % 3 else 0)
        groups.append(f"single-{g}")
    for g in range(20):
        labels += [0, 1, 2, 3]
        groups += [f"four-{g}"] * 4
    train, val, test = grouped_split(labels, groups, SPLIT, seed=0)
    assert not {groups[i] for i in train} & {groups[i] for i in test}
    assert not {groups[i] for i in val} & ({groups[i] for i in train} | {groups[i] for i in test})
    shares = np.bincount(labels, minlength=4) / len(labels)
    counts = np.bincount([labels[i] for i in test], minlength=4)
    assert np.abs(counts - shares * len(labels) * 0.15).sum() <= 4, counts
    with pytest.raises(UserError, match="2 distinct question"):
        grouped_split([0, 1, 2, 3], ["a", "a", "b", "b"], SPLIT, seed=0)
    with pytest.raises(UserError, match=r"critique in the training split .* add rows of the rarest label"):
        grouped_split([0, 1, 2, 3], ["a", "b", "c", "d"], SPLIT, seed=0)  # 2 of the 4 labels go to val/test


def test_defaults_are_documented():
    s = ClassifierSettings()
    # the paper's where they fit: batch, max length, dropout; documented deviations for CPU and balanced data
    assert (s.batch_size, s.max_length, s.dropout) == (PAPER["batch_size"], PAPER["max_length"], PAPER["dropout"])
    assert (s.base_model, s.epochs, s.learning_rate, s.class_weights, s.freeze_encoder) == \
        ("minilm", 8, 1e-4, "balanced", False)
    assert PAPER["epochs"] == 25 and PAPER["learning_rate"] == 1e-3


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """Train the tiny BERT for a few epochs through the CLI entry on a 40-row stratified CSV."""
    folder = tmp_path_factory.mktemp("medcode")
    path = write_csv(folder / "critiques.csv")
    out = folder / "clf"
    settings = ClassifierSettings(base_model="tiny", epochs=3, learning_rate=3e-3, batch_size=8, seed=1)
    assert train_classifier_command(path, output=out, settings=settings) == 0
    return path, out, settings


def test_model_card(tiny_checkpoint):
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

    path, out, settings = tiny_checkpoint
    card = json.loads((out / "medcode.json").read_text())
    assert card == model_card(out)
    assert card["base_model"] == "tiny" and card["labels"] == list(LABELS)
    assert card["hyperparameters"] == settings.as_json()
    assert card["hyperparameters"]["max_length"] == 208 and card["hyperparameters"]["dropout"] == 0.3
    assert card["training_csv"] == {"path": str(path), "sha256": sha256_file(path), "rows": 40}
    split = card["split"]
    # 10 questions, each with one critique per label: 6 / 2 / 2 whole questions
    assert (split["train"], split["validation"], split["test"], split["seed"]) == (24, 8, 8, 1)
    assert split["questions"] == {"train": 6, "validation": 2, "test": 2}
    assert split["grouped_by"] == "question" and split["method"].startswith("grouped by question")
    assert split["label_counts"]["train"] == {label: 6 for label in LABELS}
    assert card["class_weights"] == {"mode": "balanced", "order": list(LABELS), "values": [1.0, 1.0, 1.0, 1.0]}
    assert [h["epoch"] for h in card["history"]] == [1, 2, 3]
    assert all({"train_loss", "val_loss", "val_accuracy", "val_macro_f1"} <= set(h) for h in card["history"])
    best = max(card["history"], key=lambda h: h["val_macro_f1"])
    assert card["best_epoch"] == best["epoch"] and card["validation"]["macro_f1"] == best["val_macro_f1"]

    # the test split's figures are sklearn's, on the saved checkpoint's own predictions of the test rows
    test = card["test"]
    rows = {i + 2: row for i, row in enumerate(csv.DictReader(path.open(encoding="utf-8")))}  # line numbers
    texts = [rows[line]["critique"] for line in split["test_rows"]]
    truth = [LABELS.index(rows[line]["label"]) for line in split["test_rows"]]
    pred = classify_with_checkpoint(str(out), texts).argmax(axis=1).tolist()
    matrix = np.array(test["confusion_matrix"])
    assert matrix.shape == (4, 4) and matrix.sum() == test["n"] == split["test"] == 8
    questions = {line: rows[line]["question"] for line in rows}
    assert {questions[line] for line in split["test_rows"]}.isdisjoint(
        q for line, q in questions.items() if line not in split["test_rows"])  # no test question elsewhere
    assert matrix.tolist() == confusion_matrix(truth, pred, labels=[0, 1, 2, 3]).tolist()
    assert matrix.sum(axis=1).tolist() == [sum(t == c for t in truth) for c in range(4)]  # rows = true label
    assert test["accuracy"] == pytest.approx(accuracy_score(truth, pred))
    assert test["macro_f1"] == pytest.approx(f1_score(truth, pred, average="macro", labels=[0, 1, 2, 3],
                                                      zero_division=0))
    assert set(test["per_class"]) == set(LABELS)
    assert all({"precision", "recall", "support"} <= set(v) for v in test["per_class"].values())


def test_checkpoint_in_use_is_named_by_its_card(tiny_checkpoint, monkeypatch):
    import hashlib

    _, out, _ = tiny_checkpoint
    sha = hashlib.sha256((out / "medcode.json").read_bytes()).hexdigest()[:12]
    tag = classifier_tag(str(out))
    assert tag == f"checkpoint:clf@{sha}"
    assert card_for_tag(tag, [out]) == model_card(out)
    assert card_for_tag("logprobs", [out]) is None and card_for_tag("checkpoint:clf@000000000000", [out]) is None
    probs = classify_with_checkpoint(str(out), ["The response is entirely incorrect.", "Fully aligned."])
    assert probs.shape == (2, 4) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-6)
    # 'trained' is the studio's default checkpoint; missing, the step says how to make it
    monkeypatch.setattr(medcode, "TRAINED_CLASSIFIER", out.parent / "absent")
    with pytest.raises(UserError, match="make classifier"):
        classifier_tag("trained")
    monkeypatch.setattr(medcode, "TRAINED_CLASSIFIER", out)
    assert classifier_tag("trained") == tag
    assert model_card("trained")["test"]["n"] == 8


def test_if_changed_skips_a_current_checkpoint(tiny_checkpoint, capsys):
    path, out, settings = tiny_checkpoint
    before = (out / "medcode.json").read_bytes()
    assert train_classifier_command(path, output=out, settings=settings, if_changed=True) == 0
    assert "up to date" in capsys.readouterr().err
    assert (out / "medcode.json").read_bytes() == before
    # a checkpoint whose card names another split (the row split of earlier cards) is not current
    from pipeline.train.classifier import is_current

    card = json.loads(before)
    card["split"].pop("method")
    (out / "medcode.json").write_text(json.dumps(card))
    try:
        assert not is_current(out, sha256_file(path), settings)
    finally:
        (out / "medcode.json").write_bytes(before)


def test_config_names_trained_as_the_default():
    from pipeline.catalog import load_config
    from pipeline.steps.medcode import MedcodeConfig

    assert MedcodeConfig().classifier == "trained"
    for name in ("default", "full"):
        assert load_config(REPO / "configs" / f"{name}.yaml").section("medcode").classifier == "trained"


def test_cli_train_classifier_rejects_bad_csv(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("critique,label\nok,Low\nbad,Huge\n", encoding="utf-8")
    for args, needle in (([str(bad)], "line 3"), ([str(write_csv(tmp_path / "ok.csv", 2)), "--class-weights", "x"],
                                                   "class weights")):
        proc = subprocess.run([sys.executable, "-m", "pipeline", "medcode", "train-classifier", *args,
                               "--base-model", "tiny", "-o", str(tmp_path / "out")],
                              cwd=REPO, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 1, proc.stderr
        assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_critique_response_with_real_critic_and_trained_checkpoint(tiny_checkpoint):
    """The playground entry: real SmolLM2 critic, then the fine-tuned classifier (and logprobs)."""
    from pipeline.config import ModelConfig
    from pipeline.dataset import load_dataset
    from pipeline.models import Model, create_backend
    from pipeline.steps.medcode import NO_LABEL_TOKEN, critique_response

    _, out, _ = tiny_checkpoint
    q = load_dataset(REPO / "data" / "cataract").query("en-004")
    critic = Model(create_backend(ModelConfig(id="llamacpp/smollm2-135m-instruct", max_tokens=32)))
    for classifier in (str(out), "logprobs"):
        result = asyncio.run(critique_response(critic, query=q, response="Head bath after 15 days.",
                                               classifier=classifier))
        probs = [result["p_none"], result["p_low"], result["p_moderate"], result["p_high"]]
        assert result["critique"]
        assert sum(probs) == pytest.approx(1.0, abs=1e-6)
        assert result["label"] == LABELS[int(np.argmax(probs))]
        if classifier == "logprobs":
            assert result["classifier"] in ("logprobs", NO_LABEL_TOKEN)
        else:
            assert result["classifier"] == classifier_tag(str(out))


@pytest.mark.parametrize("patience", [1, 2])
def test_training_stops_once_validation_stops_improving(tmp_path, patience):
    """Training ends ``patience`` epochs after the best validation epoch (or at ``epochs``), that epoch kept; with
    patience 0 every epoch runs."""
    path = write_csv(tmp_path / "critiques.csv")
    settings = ClassifierSettings(base_model="tiny", epochs=8, learning_rate=3e-3, batch_size=8, seed=1,
                                  patience=patience)
    assert train_classifier_command(path, output=tmp_path / "clf", settings=settings) == 0
    card = model_card(tmp_path / "clf")
    history = card["history"]
    assert card["epochs_run"] == len(history) == min(card["best_epoch"] + patience, 8)
    best = max(history, key=lambda h: (h["val_macro_f1"], -h["epoch"]))  # the first of the best
    assert card["best_epoch"] == best["epoch"]
    assert all(h["val_macro_f1"] <= best["val_macro_f1"] for h in history[best["epoch"]:])
    with pytest.raises(UserError, match="patience"):
        ClassifierSettings(patience=-1).check()
