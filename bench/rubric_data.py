"""Synthetic HealthBench-style rubrics and grades for ``bench/generate_db.py --rubric-items N``.

HealthBench grades 5,000 conversations against 48,562 physician-written criteria; at 20 models and 10
criteria per item that is ≈ 1 million criterion grades, the size the rubric views are benchmarked at.
Each chosen query gets a rubric of ``criteria`` criteria — ``criteria − 2`` positive ones (1–10 points) and
2 harmful ones (−2 to −8 points) — each with one ``axis:`` tag, the item's ``theme:`` example tag copied onto
every criterion (as the HealthBench importer does) and ``level:example`` or ``level:cluster``. Every
response of the first ``models`` models to such a query is graded: a positive criterion is met with a
probability that rises with the model's quality and the response's latent quality, a harmful one rarely;
0.5 % of the grades are unparsed (``met`` NULL). Physician labels (``criterion_labels``) cover the first
two models on up to 200 items, agreeing with the grader 85 % of the time. Grades are built as Arrow
columns (never a million dicts).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

GRADER = "openai/gpt-4.1"
AXES = ("axis:accuracy", "axis:completeness", "axis:communication", "axis:context_awareness",
        "axis:instruction_following")
THEMES = ("theme:emergency_referrals", "theme:context_seeking", "theme:global_health", "theme:health_data_tasks",
          "theme:communication", "theme:hedging", "theme:complex_responses")
POSITIVE = ("States when the patient must come back to the hospital the same day.",
            "Explains how long to keep using the prescribed eye drops.",
            "Mentions washing hands before touching the eye or the drops.",
            "Advises wearing the protective shield while sleeping.",
            "Says which activities are safe from the next day.",
            "Asks about the patient's other medicines before advising.",
            "Answers in the language the patient wrote in.",
            "Gives the advice in short, plain sentences.",
            "Names the warning signs: pain, redness, falling vision.",
            "Says when the follow-up visit is due.")
HARMFUL = ("Advises stopping the eye drops early.", "Says rubbing the eye is harmless.",
           "Recommends a home remedy instead of the prescribed drops.", "Says blurred vision after a week is normal.")
GRADE_BATCH = 250_000


@dataclass(frozen=True)
class RubricSpec:
    items: int
    criteria: int = 10
    models: int = 20


def attach_rubrics(queries: list[dict[str, Any]], spec: RubricSpec, rng: np.random.Generator) -> list[str]:
    """Give ``spec.items`` of the queries (evenly spread over the list, so every language has some) a rubric,
    as the JSON text ``queries.rubric`` holds; returns their query ids."""
    n = min(spec.items, len(queries))
    chosen = np.unique(np.linspace(0, len(queries) - 1, n).round().astype(int))
    for i in chosen:
        theme = THEMES[int(i) % len(THEMES)]
        rubric = []
        for k in range(spec.criteria):
            harmful = k >= spec.criteria - 2
            text = (HARMFUL if harmful else POSITIVE)[(int(i) + k) % (len(HARMFUL) if harmful else len(POSITIVE))]
            points = -int(rng.integers(2, 9)) if harmful else int(rng.integers(1, 11))
            tags = [AXES[(int(i) + k) % len(AXES)], theme, "level:cluster" if k % 3 == 0 else "level:example"]
            rubric.append({"criterion": f"{text} ({k + 1})", "points": points, "tags": tags})
        queries[int(i)]["rubric"] = json.dumps(rubric, ensure_ascii=False)
    return [queries[int(i)]["query_id"] for i in chosen]


def grade_tables(queries: pd.DataFrame, responses: pd.DataFrame, quality: dict[str, float], rng: np.random.Generator,
                 run_id: str, created_at: datetime) -> tuple[list[pa.Table], pa.Table]:
    """Arrow tables of ``rubric_grades`` (in batches) and ``criterion_labels`` for the graded responses.

    ``queries``: query_id, rubric (JSON); ``responses``: query_id, model_id, response_hash (errored ones left
    out); ``quality``: model → a logit offset (better models meet more positive criteria)."""
    rubrics = {q: json.loads(r) for q, r in zip(queries.query_id, queries.rubric, strict=True)}
    n_crit = responses.query_id.map(lambda q: len(rubrics[q])).to_numpy()
    rows = np.repeat(np.arange(len(responses)), n_crit)
    index = np.concatenate([np.arange(k) for k in n_crit]) if len(n_crit) else np.zeros(0, dtype=int)
    qids = responses.query_id.to_numpy()[rows]
    crit = [rubrics[q][k] for q, k in zip(qids, index, strict=True)]
    points = np.array([c["points"] for c in crit], dtype=float)
    latent = rng.normal(size=len(responses))[rows]
    offset = responses.model_id.map(quality).to_numpy(dtype=float)[rows]
    p_met = np.where(points > 0, 1 / (1 + np.exp(-(offset + 1.1 * latent + 0.4))),
                     1 / (1 + np.exp(-(-2.6 - 0.8 * latent - 0.5 * offset))))
    met = rng.random(len(points)) < p_met
    unparsed = rng.random(len(points)) < 0.005
    met_arr = pa.array(met, mask=unparsed)
    explanation = np.where(met, "The response does this.", "The response does not do this.")
    columns = {
        "dataset": pa.array(np.full(len(points), "synthetic")), "query_id": pa.array(qids),
        "model_id": pa.array(responses.model_id.to_numpy()[rows]), "grader_id": pa.array(np.full(len(points), GRADER)),
        "criterion_index": pa.array(index.astype(np.int32)), "criterion": pa.array([c["criterion"] for c in crit]),
        "points": pa.array(points), "tags": pa.array([c["tags"] for c in crit], type=pa.list_(pa.string())),
        "met": met_arr, "explanation": pa.array(np.where(unparsed, "", explanation)),
        "raw_output": pa.array(np.where(unparsed, "criteria_met: perhaps", np.where(
            met, '{"explanation": "The response does this.", "criteria_met": true}',
            '{"explanation": "The response does not do this.", "criteria_met": false}'))),
        "response_hash": pa.array(responses.response_hash.to_numpy()[rows]),
        "run_id": pa.array(np.full(len(points), run_id)), "cached": pa.array(np.zeros(len(points), dtype=bool)),
        "created_at": pa.array(np.full(len(points), np.datetime64(created_at, "us"))),
    }
    grades = pa.table(columns)
    batches = [grades.slice(start, GRADE_BATCH) for start in range(0, grades.num_rows, GRADE_BATCH)]
    labelled_models = sorted(quality, key=list(quality).index)[:2]
    labelled_items = set(list(rubrics)[:200])
    pick = np.flatnonzero(np.isin(columns["model_id"].to_numpy(zero_copy_only=False), labelled_models)
                          & np.isin(qids, list(labelled_items)) & ~unparsed)
    agree = rng.random(len(pick)) < 0.85
    labels = pa.table({
        "dataset": pa.array(np.full(len(pick), "synthetic")), "query_id": pa.array(qids[pick]),
        "model_id": columns["model_id"].take(pa.array(pick)), "criterion_index": pa.array(index[pick].astype(np.int32)),
        "criterion": columns["criterion"].take(pa.array(pick)),
        "annotator": pa.array(np.where(pick % 2 == 0, "physician-1", "physician-2")),
        "met": pa.array(np.where(agree, met[pick], ~met[pick])),
        "response_hash": columns["response_hash"].take(pa.array(pick)),
        "source": pa.array(np.full(len(pick), "bench/generate_db.py")),
        "created_at": pa.array(np.full(len(pick), np.datetime64(created_at, "us"))),
    })
    return batches, labels
