"""The paper's human-evaluation design: every Indic query plus a seeded stratified English sample, a queue
and a CSV; the filled CSV imports back (unfilled rows wait)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import duckdb

from pipeline.labels.human_eval import stratified_sample

REPO = Path(__file__).resolve().parent.parent


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def test_stratified_sample_is_proportional_and_seeded():
    strata = {"a": [f"a{i}" for i in range(60)], "b": [f"b{i}" for i in range(30)], "c": ["c0", "c1"]}
    one = stratified_sample(strata, 20, seed=3)
    assert one == stratified_sample(strata, 20, seed=3) != stratified_sample(strata, 20, seed=4)
    counts = {k: sum(x.startswith(k) for x in one) for k in strata}
    assert counts == {"a": 13, "b": 7, "c": 0} and len(set(one)) == 20
    assert stratified_sample(strata, 500, seed=0) == sorted(x for v in strata.values() for x in v)


def test_plan_draws_every_indic_query_and_the_english_sample(synthetic_db, copy_db, tmp_path):
    db = copy_db(synthetic_db)
    with duckdb.connect(str(db), read_only=True) as con:
        models = [r[0] for r in con.execute("SELECT DISTINCT model_id FROM responses WHERE dataset = 'synthetic' "
                                            "ORDER BY 1 LIMIT 2").fetchall()]
        indic = {r[0] for r in con.execute("SELECT query_id FROM queries WHERE dataset = 'synthetic' "
                                           "AND language <> 'en'").fetchall()}
    out = tmp_path / "plan.csv"
    args = ["human-eval", "plan", "--db", str(db), "--dataset", "synthetic", "--models", ",".join(models),
            "--english", "10", "--metric", "SS", "--seed", "7", "--out", str(out)]
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    again = cli(*args)
    assert again.returncode == 0 and list(csv.DictReader(out.open(encoding="utf-8"))) == rows  # reproducible
    queries = {r["query_id"] for r in rows}
    assert indic <= queries and len(queries - indic) == 10
    assert {r["metric"] for r in rows} == {"SS"} and all(r["score"] == "" for r in rows)
    with duckdb.connect(str(db), read_only=True) as con:
        planned = con.execute("SELECT count(*) FROM annotation_plans").fetchone()[0]
    assert planned == len(rows)

    half = len(rows) // 2
    for i, r in enumerate(rows[:half]):
        r["score"] = str(i % 3)
    with out.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    imported = cli("import-human-labels", str(out), "--db", str(db))
    assert imported.returncode == 0, imported.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        n = con.execute("SELECT count(*) FROM human_labels WHERE annotator = 'annotator-1' AND metric = 'SS' "
                        "AND source = 'plan.csv'").fetchone()[0]
    assert n == half


def test_plan_rejects_a_model_without_answers(synthetic_db, copy_db):
    result = cli("human-eval", "plan", "--db", str(copy_db(synthetic_db)), "--dataset", "synthetic",
                 "--models", "nobody/none")
    assert result.returncode == 1 and "nobody/none answered nothing" in result.stderr
    assert len([x for x in result.stderr.splitlines() if x.strip()]) == 1
