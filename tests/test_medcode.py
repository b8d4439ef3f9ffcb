"""Med-CoDE: label-token classification, and what the dry run and the run say about the classifier checkpoint
(the training path and the checkpoint in use: tests/test_train_*.py)."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.catalog import catalog
from pipeline.config import RunConfig
from pipeline.dataset import load_dataset
from pipeline.errors import UserError
from pipeline.runner import print_dry_run, run, select_queries
from pipeline.steps import medcode
from pipeline.steps.medcode import NO_LABEL_TOKEN, distribution_from_logprobs, label_for_token

REPO = Path(__file__).resolve().parent.parent
SMOLLM2 = "llamacpp/smollm2-135m-instruct"


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


# -- the trained classifier's checkpoint in the dry run and the run -------------------------------------------
def _config(tmp_path: Path, classifier: str) -> RunConfig:
    return catalog().config({
        "name": "t", "dataset": str(REPO / "data" / "cataract"), "db": str(tmp_path / "r.duckdb"), "limit": 3,
        "models": [{"id": "extractive/top-sentences"}], "medcode": {"critic": SMOLLM2, "classifier": classifier}})


def _dry_run(config: RunConfig) -> str:
    dataset = load_dataset(config.dataset)
    out = io.StringIO()
    assert print_dry_run(config, dataset, select_queries(dataset, config), ["generate", "medcode"],
                         Console(file=out, width=100)) == 0
    return out.getvalue()


def test_dry_run_names_a_missing_trained_checkpoint_and_counts_the_critique_only(tmp_path, monkeypatch):
    monkeypatch.setattr(medcode, "TRAINED_CLASSIFIER", tmp_path / "absent")
    text = _dry_run(_config(tmp_path, "trained"))
    missing = [line for line in text.splitlines() if "make classifier" in line]
    assert len(missing) == 1 and missing[0].startswith("missing: medcode classifier 'trained'"), text
    assert str(tmp_path / "absent") in missing[0]  # one line, however narrow the console
    # a trained classifier runs in process: 3 answers → 3 critic calls (generate: 3 more, extractive, no LLM)
    assert "at most 6 LLM calls (generate 3, medcode-critique 3)" in " ".join(text.split())
    assert "medcode-classify" not in text
    # a path without a checkpoint is named too; logprobs needs none and costs a second call per answer
    text = _dry_run(_config(tmp_path, str(tmp_path / "elsewhere")))
    assert sum("missing: medcode classifier" in line and "train-classifier" in line for line in text.splitlines()) == 1
    text = _dry_run(_config(tmp_path, "logprobs"))
    assert "at most 9 LLM calls (generate 3, medcode-critique 3, medcode-classify 3)" in " ".join(text.split())
    assert "missing: medcode" not in text


def test_dry_run_counts_a_present_checkpoint_as_ready(tmp_path, monkeypatch):
    folder = tmp_path / "medcode-classifier"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    monkeypatch.setattr(medcode, "TRAINED_CLASSIFIER", folder)
    text = _dry_run(_config(tmp_path, "trained"))
    assert "missing: medcode" not in text and "medcode-critique 3)" in text


def test_run_without_the_trained_checkpoint_stops_before_any_call(tmp_path, monkeypatch):
    monkeypatch.setattr(medcode, "TRAINED_CLASSIFIER", tmp_path / "absent")
    config = _config(tmp_path, "trained")
    with pytest.raises(UserError, match="make classifier") as err:
        run(config, stages="generate,medcode", console=Console(file=io.StringIO()))
    assert "\n" not in str(err.value)
    assert not Path(config.db).exists()  # no run started, nothing generated
    # without the medcode stage the checkpoint is not needed
    run(config, stages="retrieve,generate", console=Console(file=io.StringIO()))
    assert Path(config.db).exists()


def test_the_stored_distribution_columns_are_the_one_definition():
    """The critiques table's probability columns are ``pipeline.disagreement.PROB_COLUMNS``, in label order."""
    import dataclasses

    from pipeline.disagreement import LABELS, PROB_COLUMNS
    from pipeline.store.rows import CritiqueRow

    assert tuple(f.name for f in dataclasses.fields(CritiqueRow) if f.name.startswith("p_")) == PROB_COLUMNS
    assert PROB_COLUMNS == tuple(f"p_{label.lower()}" for label in LABELS)
