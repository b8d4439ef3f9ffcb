"""`medcode label` with the embedded model (the paper's GPT-4 step): a labelled critique per stored response, the
critique stored as parsed from the raw output, unparsed labels kept NULL and counted, reruns free, and an export
that train-classifier's and train-critic's readers accept (unparsed and stale rows left out and counted).

What the tiny teacher writes is never asserted; only what the pipeline guarantees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pipeline.disagreement import LABELS
from pipeline.steps.medcode_label import parse_teacher
from pipeline.store import Store
from pipeline.store.rows import LabelledCritiqueRow, ResponseRow
from pipeline.train.classifier import read_training_csv
from pipeline.train.data import read_labelled_csv
from tests.conftest import SMOLLM2

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env=dict(os.environ))


def fetch(db: Path, sql: str, params=()) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def test_label_and_export(pipeline_db, copy_db, tmp_path):
    db = copy_db(pipeline_db)
    config = tmp_path / "label.yaml"
    config.write_text(json.dumps({  # the pipeline_db fixture's selection, with a teacher
        "name": "label-test", "dataset": str(REPO / "data" / "cataract"), "db": str(db),
        "languages": ["en", "hi"], "per_language": 1,
        "models": [{"id": SMOLLM2, "max_tokens": 24}, {"id": "extractive/top-sentences"}],
        "medcode": {"critic": SMOLLM2, "classifier": "logprobs", "teacher": {"id": SMOLLM2, "max_tokens": 64}}}))
    done = cli("medcode", "label", "--config", str(config))
    assert done.returncode == 0, done.stderr
    responses = set(fetch(db, "SELECT query_id, model_id, response_hash FROM responses WHERE error IS NULL"))
    stored = fetch(db, "SELECT query_id, model_id, response_hash, source, critique, label, raw_output, run_id "
                       "FROM labelled_critiques")
    assert {r[:3] for r in stored} == responses and len(stored) == len(responses)  # one per stored response
    assert {r[3] for r in stored} == {SMOLLM2}
    for *_, critique, label, raw, _run in stored:
        assert label is None or label in LABELS
        assert (critique, label) == parse_teacher(raw)  # stored as read from the raw output, which is kept
    unparsed = sum(r[5] is None for r in stored)
    summary, errors = fetch(db, "SELECT summary, errors FROM runs WHERE run_id = ?", [stored[0][7]])[0]
    assert next(s for s in json.loads(summary) if s["stage"] == "medcode-label")["items"] == len(responses)
    assert errors == unparsed  # unparsed labels are counted as the stage's errors
    said = " ".join(done.stderr.split())
    assert f"{len(stored)} by {SMOLLM2}, {unparsed} with an unparsed label" in said

    again = cli("medcode", "label", "--config", str(config))  # resumable: only unparsed labels are asked again
    assert again.returncode == 0, again.stderr
    calls = fetch(db, "SELECT backend_calls FROM runs ORDER BY started_at DESC LIMIT 1")[0][0]
    assert calls <= 3 * unparsed and (calls == 0) == (unparsed == 0)  # reask: 3 new attempts at most each
    assert fetch(db, "SELECT count(*) FROM labelled_critiques")[0][0] == len(stored)
    stored = fetch(db, "SELECT query_id, model_id, response_hash, source, critique, label, raw_output, run_id "
                       "FROM labelled_critiques")  # a label asked again may read now
    unparsed = sum(r[5] is None for r in stored)

    q, m, h = sorted(responses)[0]
    Store(db).write([  # an annotator's row with no label, and a teacher row of a since-regenerated response
        LabelledCritiqueRow(dataset="cataract", query_id=q, model_id=m, source="dr-x", critique="Unsure.", label=None,
                            response_hash=h, run_id=None),
        LabelledCritiqueRow(dataset="cataract", query_id=q, model_id=m, source="old-teacher", critique="Was fine.",
                            label="None", response_hash="0" * 16, run_id=None)])
    out = tmp_path / "critiques.csv"
    exported = cli("medcode", "export-critiques", "--db", str(db), "--out", str(out), "--with-bundled")
    assert exported.returncode == 0, exported.stderr
    _, labels = read_training_csv(out)  # the reader train-classifier uses
    wanted = sum(1 for r in stored if r[5] is not None and r[4].strip())
    assert len(labels) == 400 + wanted
    rows = read_labelled_csv(out, ("question", "ground_truth", "response", "critique"))  # train-critic's columns
    ours = [r for r in rows if r["source"] == SMOLLM2]
    assert len(ours) == wanted and {r["kind"] for r in ours} == {"rag"}
    by_key = {(r[0], r[1]): r for r in stored}
    for r in ours:
        query_id, model_id = r["item_id"].split("/", 2)[1], r["item_id"].split("/", 2)[2].rsplit("@", 1)[0]
        row = by_key[(query_id, model_id)]
        assert (r["critique"], r["label"]) == (row[4].strip(), row[5])
    assert not any(r["source"] in ("dr-x", "old-teacher") for r in rows)
    said = " ".join(exported.stderr.split())
    assert f"left out: {unparsed + 1} unparsed labels" in said and "1 of regenerated responses" in said

    Store(db).write([LabelledCritiqueRow(dataset="cataract", query_id=q, model_id=m, source="dr-y", critique="Low.",
                                         label="Low", response_hash=h, run_id=None)])
    Store(db).write([ResponseRow(dataset="cataract", query_id=q, model_id=m, run_id="regen", prompt_hash="h",
                                 text="A regenerated answer.", error=None)])
    only = cli("medcode", "export-critiques", "--db", str(db), "--out", str(tmp_path / "only.csv"), "--source", "dr-y")
    assert only.returncode == 1 and not (tmp_path / "only.csv").exists()  # its one critique is of the old text
    assert "no labelled critique to export (0 unparsed, 0 empty, 1 of regenerated responses)" in " ".join(
        only.stderr.split())
