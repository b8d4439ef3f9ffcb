"""The human evaluation as Health-Pariksha designed it (§3.5.2): one metric (Semantic Similarity), a few
models, every Indic query plus a seeded, theme-stratified sample of 100 English queries.

``plan`` draws the sample from a results database, stores it (table ``annotation_plans``: the
dashboard's annotation queue follows it) and writes a CSV for annotators working offline: one row
per item and annotator, with the query, its English rendering, the ground truth and the response,
and empty ``score``/``comment`` columns. The filled CSV goes back through ``import-human-labels``;
rows still without a score are skipped, so a half-done file can be imported and finished later.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

from pipeline.dataset.csv_cells import csv_cell
from pipeline.errors import UserError
from pipeline.metrics import METRICS
from pipeline.store import Store
from pipeline.store.rows import PlanRow

CSV_COLUMNS = ("plan_id", "dataset", "query_id", "model_id", "metric", "annotator", "score", "comment",
               "language", "query", "query_en", "gt_response", "response")


def stratified_sample(ids_by_stratum: dict[str, list[str]], n: int, seed: int) -> list[str]:
    """``n`` ids drawn without replacement, each stratum in proportion to its size (largest remainders),
    shuffled within strata by ``seed``; every id when there are at most ``n``."""
    total = sum(len(v) for v in ids_by_stratum.values())
    if total <= n:
        return sorted(i for v in ids_by_stratum.values() for i in v)
    rng = np.random.default_rng(seed)
    strata = sorted(ids_by_stratum)
    exact = {s: n * len(ids_by_stratum[s]) / total for s in strata}
    take = {s: int(exact[s]) for s in strata}
    for s in sorted(strata, key=lambda s: (-(exact[s] - take[s]), s))[: n - sum(take.values())]:
        take[s] += 1
    out = []
    for s in strata:
        ids = sorted(ids_by_stratum[s])
        out += [ids[i] for i in rng.permutation(len(ids))[: take[s]]]
    return sorted(out)


def plan_command(*, db: Path, models: list[str], english: int = 100, metric: str = "SS", annotators: int = 1,
                 seed: int = 0, dataset: str | None = None, out: Path | None = None) -> int:
    """CLI ``human-eval plan``: draw, store and export the paper's human-evaluation sample."""
    from pipeline.console import make_console

    if not db.is_file():
        raise UserError(f"{db}: no results database here")
    if metric not in METRICS:
        raise UserError(f"--metric {metric}: not a registered metric ({', '.join(METRICS)})")
    if english < 0 or annotators < 1:
        raise UserError("--english must be >= 0 and --annotators >= 1")
    store = Store(db)
    datasets = [r[0] for r in store.fetch("SELECT name FROM datasets WHERE name <> 'playground' ORDER BY name")]
    if dataset is None:
        if len(datasets) != 1:
            raise UserError(f"--dataset: the database holds {', '.join(datasets) or 'no dataset'}; name one")
        dataset = datasets[0]
    elif dataset not in datasets:
        raise UserError(f"--dataset {dataset}: not in {db} ({', '.join(datasets)})")
    answered = store.fetch(
        "SELECT r.query_id, r.model_id, q.language, q.themes, q.query, q.query_en, q.gt_response, r.text "
        "FROM responses r JOIN queries q ON q.dataset = r.dataset AND q.query_id = r.query_id "
        "WHERE r.dataset = ? AND r.error IS NULL AND r.text IS NOT NULL AND list_contains(?, r.model_id) "
        "ORDER BY r.query_id, r.model_id", [dataset, models])
    have = {m for _, m, *_ in answered}
    missing = [m for m in models if m not in have]
    if missing:
        raise UserError(f"--models: {', '.join(missing)} answered nothing in {dataset}")
    by_query = {q: (lang, themes) for q, _, lang, themes, *_ in answered}
    indic = sorted(q for q, (lang, _) in by_query.items() if lang != "en")
    strata: dict[str, list[str]] = defaultdict(list)
    for q, (lang, themes) in by_query.items():
        if lang == "en":
            strata[(themes or ["(none)"])[0]].append(q)
    chosen = set(indic) | set(stratified_sample(strata, english, seed))
    plan_id = f"{dataset}-{metric}-{len(models)}m-{english}en-s{seed}"
    items = [row for row in answered if row[0] in chosen]
    store.write([PlanRow(plan_id=plan_id, dataset=dataset, query_id=q, model_id=m, metric=metric, language=lang,
                         annotators=annotators, seed=seed) for q, m, lang, *_ in items])
    out = out or db.with_name(f"{plan_id}.csv")
    tmp = out.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_COLUMNS)
        for q, m, lang, _, query, query_en, gt, text in items:
            for k in range(1, annotators + 1):
                writer.writerow([plan_id, dataset, q, m, metric, f"annotator-{k}", "", "", lang,
                                 *map(csv_cell, (query, query_en or "", gt, text))])
    tmp.replace(out)
    n_en = sum(1 for q in chosen if by_query[q][0] == "en")
    make_console().print(f"plan {plan_id}: {len(chosen)} queries ({len(indic)} Indic, {n_en} English) x "
                    f"{len(models)} models = {len(items)} items, {annotators} annotator(s); queue in the dashboard, "
                    f"CSV for offline annotators: {out}")
    return 0
