"""A run's stored config (``runs.config``, ``RunConfig.to_json``) and its ``config_hash`` stay the same for the same
YAML, whatever changes in how the config is read: the dashboard compares runs by them, and a rerun of a finished
config must find its cached calls (0 backend calls).

The expectations are independent of the code under test: the hashes below and ``tests/fixtures/stored_configs.json``
were computed ONCE, on 2026-12-07 at commit 86d7351 (before config sections were declared by the steps), by
loading each case below with that commit's ``load_config`` (``pipeline.config.load_config`` with the catalog's
steps, plus the toy step for the last case) and writing ``config.config_hash()`` and ``config.to_json()``; they
are literals here, never recomputed by the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.catalog import catalog
from pipeline.config import ModelConfig, RunConfig
from pipeline.config import load_config as read_config
from pipeline.errors import UserError
from pipeline.steps.spec import Step

REPO = Path(__file__).resolve().parent.parent
STORED = json.loads((REPO / "tests" / "fixtures" / "stored_configs.json").read_text(encoding="utf-8"))

SMOL = "llamacpp/smollm2-135m-instruct"
# configs written as tests write them (tests/conftest.py's app-tests run; every step section in each of its forms)
WRITTEN = {
    "app-tests": {
        "name": "app-tests", "dataset": "data/cataract", "db": "data/app-tests.duckdb",
        "languages": ["en", "hi"], "per_language": 1,
        "retrieval": {"top_k": 1, "split": "separate", "top_k_updates": 1},
        "models": [{"id": SMOL, "max_tokens": 24}, {"id": "extractive/top-sentences"}],
        "judge": {"id": SMOL, "max_tokens": 24},
        "medcode": {"critic": SMOL, "classifier": "logprobs"},
        "concurrency": 4,
    },
    "every-section-by-id": {
        "name": "ids", "dataset": "data/cataract", "db": "data/ids.duckdb", "models": [SMOL, "extractive/x"],
        "judge": [SMOL, "openai/gpt-4o-mini"], "jury_aggregate": "median", "weights": "paper-fit",
        "medcode": {"critic": SMOL, "teacher": "openai/gpt-4o", "classifier": "logprobs"},
        "pairwise": {"pairs": "sample", "per_language": 5, "seed": 3},
        "llm_accuracy": "openai/gpt-4o-mini", "rubric_grader": SMOL, "translator": SMOL,
        "reask": {"times": 1}, "limit": 7, "languages": ["en"],
        "prices": {"openai/gpt-4o-mini": {"input": 0.15, "output": 0.6}},
    },
    "every-section-by-options": {
        "name": "options", "dataset": "data/cataract", "db": "data/options.duckdb",
        "models": [{"id": "openai-compatible/m", "base_url": "http://localhost:1/v1", "languages": ["hi"]}],
        "judge": {"id": SMOL, "metrics": ["FC", "SS"], "samples": 3, "temperature": 0.7},
        "medcode": {"critic": {"id": SMOL, "max_tokens": 40}, "teacher": {"id": "openai/gpt-4o", "max_tokens": 90}},
        "pairwise": {"max_tokens": 50},
        "llm_accuracy": {"id": "openai/gpt-4o-mini", "max_tokens": 8},
        "rubric_grader": {"id": SMOL, "max_tokens": 64, "temperature": 0.2},
        "translator": {"id": "openai-compatible/tr", "base_url": "http://localhost:2/v1"},
        "per_language": 2,
    },
    "a-new-step": {
        "name": "toy", "dataset": "data/cataract", "db": "data/toy.duckdb", "models": [SMOL],
        "toy": {"model": {"id": "openai-compatible/toy", "base_url": "http://localhost:3/v1"}, "max_tokens": 6},
    },
}
EXPECTED_HASH = {
    "configs/default-closed-book.yaml": "ca70d6a36643e8b9",
    "configs/default.yaml": "fb2468126ebdd61d",
    "configs/eyecare-ingested.yaml": "63945e5fb5cbdd69",
    "configs/full.yaml": "10f50fec356cbc87",
    "configs/health-pariksha-24.yaml": "126f21695a0b6fa0",
    "app-tests": "d3bb17ccaa6b1970",
    "every-section-by-id": "08b0299ed224ee31",
    "every-section-by-options": "feeeb23521d34011",
    "a-new-step": "ffe3979c430b6531",
}


class ToySettings(BaseModel):
    """A new step's own section (as tests/test_step_spec.py's toy declares it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    model: ModelConfig
    max_tokens: int = 8


TOY = Step(run=None, requires=("toy",), models=lambda config: [("toy model", config.section("toy").model)],  # type: ignore[arg-type]
           section="toy", settings=ToySettings)


def load(case: str, tmp_path: Path):
    """The config of ``case`` as a run stores it: a YAML of configs/, or one written from ``WRITTEN``."""
    steps = tuple(catalog().steps.values())
    if case.startswith("configs/"):
        return read_config(REPO / case, steps=steps)
    path = tmp_path / f"{case}.yaml"
    path.write_text(yaml.safe_dump(WRITTEN[case], sort_keys=False), encoding="utf-8")
    return read_config(path, steps=(*steps, TOY) if case == "a-new-step" else steps)


def test_the_cases_cover_every_bundled_config() -> None:
    assert {p for p in EXPECTED_HASH if p.startswith("configs/")} == {
        f"configs/{p.name}" for p in (REPO / "configs").glob("*.yaml")}


@pytest.mark.parametrize("case", list(EXPECTED_HASH))
def test_a_stored_config_and_its_hash_do_not_change(case: str, tmp_path: Path) -> None:
    config = load(case, tmp_path)
    assert config.to_json() == STORED[case]
    assert config.config_hash() == EXPECTED_HASH[case]


@pytest.mark.parametrize("case", list(EXPECTED_HASH))
def test_a_stored_config_reads_back_as_the_config_it_was(case: str, tmp_path: Path) -> None:
    config = load(case, tmp_path)
    steps = (*catalog().steps.values(), TOY) if case == "a-new-step" else tuple(catalog().steps.values())
    back = RunConfig.model_validate_json(STORED[case], context={"steps": steps})
    assert back == config and back.models_by_role() == config.models_by_role()


def test_every_step_section_is_its_steps_settings_model(tmp_path: Path) -> None:
    """Built-in or new, a step's section is read the same way: ``section(name)`` is its ``settings`` model."""
    for case in ("every-section-by-id", "every-section-by-options"):
        config = load(case, tmp_path)
        for step in catalog().steps.values():
            if step.section:
                assert type(config.section(step.section)) is step.settings, (case, step.section)
    toy = load("a-new-step", tmp_path).section("toy")
    assert type(toy) is ToySettings and toy.max_tokens == 6


@pytest.mark.parametrize(("section", "value", "says"), [
    ("medcode", {"classifier": ""}, "field medcode.classifier: String should have at least 1 character"),
    ("medcode", {"teacher": "gpt-4o"}, "field medcode.teacher.id: Value error, model id 'gpt-4o' must look like"),
    ("pairwise", {"pairs": "some"}, "field pairwise.pairs: Input should be 'all' or 'sample'"),
    ("translator", "nonsense", "field translator.id: Value error, model id 'nonsense' must look like"),
    ("rubric_grader", {"id": SMOL, "max_tokens": 0}, "field rubric_grader.max_tokens: Input should be greater"),
    ("llm_accuracy", {"idd": 1}, "field llm_accuracy.id: Field required (+1 more)"),
    ("toy", {"model": SMOL, "max_tokens": "lots"}, "field toy.max_tokens: Input should be a valid integer"),
])
def test_a_bad_section_is_refused_in_one_line_naming_its_field(section, value, says, tmp_path: Path) -> None:
    """The built-in sections' lines are the ones 86d7351 wrote (checked by hand on that commit); the toy's is alike."""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**WRITTEN["a-new-step"], "toy": None, section: value}), encoding="utf-8")
    with pytest.raises(UserError) as exc:
        read_config(path, steps=(*catalog().steps.values(), TOY))
    assert f"{path}: {says}" in str(exc.value) and "\n" not in str(exc.value)


def test_a_config_validated_without_steps_refuses_a_section_and_reads_back_one_without() -> None:
    with pytest.raises(ValidationError, match="medcode: no step given to this validation declares this section"):
        RunConfig.model_validate(json.loads(STORED["configs/default.yaml"]))
    plain = {**json.loads(STORED["configs/default-closed-book.yaml"]), "medcode": None, "llm_accuracy": None}
    assert RunConfig.model_validate(plain).sections == {}
