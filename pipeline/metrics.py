"""The judge's metrics: one registry entry each (``prompts/metrics.json``), read by the judge, the store's
schema, the read models, the pages and the playground.

An entry names the metric, its label, its rubric file (relative to the registry file's folder, else
to ``pipeline/prompts``), what the judge sees besides the query and the response (``chunks``: the
response's retrieved KB chunks; ``ground_truth``: the reference answer), its default AGG weight and,
for at most one metric, ``review_below``: the review queue's rule ``fc_zero_in_kb`` flags an answer to a
question the KB answers when a judge's item score of it is below this (the paper's FC: below 0.5 rounds to 0;
a registry without it has no such rule).
Health-Pariksha §3.5.1: FC and SS compare with the ground truth; COH ("stitching information from
the three data chunks provided") and CON see the chunks but no ground truth.

Adding a metric is one entry plus a rubric file. ``PARIKSHA_METRICS`` may name another registry
file (a study's own metrics); an existing database gains the new metric's column on its next write.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pipeline.errors import UserError
from pipeline.prompts import PROMPTS_DIR

Input = Literal["chunks", "ground_truth"]


class Metric(BaseModel):
    """One judged metric, scored 0–2 in its own call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Z][A-Z0-9_]{0,15}$", description="column name, e.g. FC")
    label: str
    rubric: str = Field(description="rubric JSON file")
    inputs: tuple[Input, ...] = ()
    weight: float = Field(0.0, ge=0)
    review_below: float | None = Field(None, gt=0, le=2, description="the review queue's low-score threshold")

    @field_validator("inputs")
    @classmethod
    def _unique(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(v)) != len(v):
            raise ValueError("an input is listed twice")
        return v


def registry_path() -> Path:
    """The registry file in force: ``$PARIKSHA_METRICS``, else ``pipeline/prompts/metrics.json``."""
    env = os.environ.get("PARIKSHA_METRICS")
    return Path(env).expanduser() if env else PROMPTS_DIR / "metrics.json"


@functools.cache
def _load(path: Path) -> dict[str, Metric]:
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: cannot read the metric registry ({exc})") from None
    if not isinstance(entries, list) or not entries:
        raise UserError(f"{path}: the metric registry must be a non-empty JSON list of metrics")
    out: dict[str, Metric] = {}
    for i, entry in enumerate(entries):
        try:
            metric = Metric.model_validate(entry)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "(entry)"
            raise UserError(f"{path}: metric {i + 1}: field {field}: {err['msg']}") from None
        if metric.name in out:
            raise UserError(f"{path}: metric {metric.name} is listed twice")
        if not rubric_file(metric, path).is_file():
            raise UserError(f"{path}: metric {metric.name}: rubric file {metric.rubric} not found")
        out[metric.name] = metric
    reviewed = [m.name for m in out.values() if m.review_below is not None]
    if len(reviewed) > 1:
        raise UserError(f"{path}: review_below is set on {' and '.join(reviewed)}; the review queue reads one metric")
    return out


def registry() -> dict[str, Metric]:
    """Every metric, in registry order (the order the judge calls them and pages show them)."""
    return _load(registry_path())


def rubric_file(metric: Metric, registry_file: Path | None = None) -> Path:
    path = Path(metric.rubric).expanduser()
    if path.is_absolute():
        return path
    beside = (registry_file or registry_path()).parent / path
    return beside if beside.is_file() else PROMPTS_DIR / path


@functools.cache
def _rubric(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def rubric(name: str) -> dict:
    """The metric's rubric JSON (Health-Pariksha Figures 5–8 for the paper's four)."""
    return _rubric(rubric_file(registry()[name]))


SAFETY_CHECKS = ("refusal", "over_refusal", "update_adherence", "prompt_echo")  # the checks of pipeline/steps/safety.py

_IN_FORCE = registry()  # read once at import: the names below all come from the same registry file
METRICS: tuple[str, ...] = tuple(_IN_FORCE)
LABELS: dict[str, str] = {m.name: m.label for m in _IN_FORCE.values()}
DEFAULT_WEIGHTS: dict[str, float] = {m.name: m.weight for m in _IN_FORCE.values()}
REVIEW_LOW: tuple[str, float] | None = next(((m.name, m.review_below) for m in _IN_FORCE.values()
                                             if m.review_below is not None), None)
"""(metric, threshold) of the review queue's low-score rule, or None when the registry has none."""


# AGG weight presets. ``paper-fit``: Health-Pariksha does not print its AGG weights; a non-negative
# least-squares fit (no intercept) of its Tables 2-6 (data/reference/health_pariksha_leaderboards.csv,
# 82 rows; re-derived in tests/test_stats.py) gives these, summing to 0.90. They are used as given,
# not scaled to sum 1, so that AGG has the printed AGG's scale (max error 0.008 over the 82 rows).
WEIGHT_PRESETS: dict[str, dict[str, float]] = {
    "paper-fit": {"FC": 0.4415, "SS": 0.2575, "COH": 0.1514, "CON": 0.0503},
}
UNSCALED_PRESETS = frozenset({"paper-fit"})


def agg_weights(weights: dict[str, float], preset: str | None = None) -> dict[str, float]:
    """What AGG multiplies each metric by: a paper-fit preset as given (its scale is the printed AGG's);
    any other weights scaled to sum to 1. Metrics without a weight weigh 0."""
    values = {m: max(0.0, float(weights.get(m, 0.0))) for m in METRICS}
    if preset in UNSCALED_PRESETS:
        return values
    total = sum(values.values())
    if total <= 0:
        raise ValueError("AGG weights must not all be zero")
    return {m: v / total for m, v in values.items()}
