"""How far a judge's score can be believed here: the reliability matrix, the marks it puts on leaderboard
cells, and the provenance of the scores.

**Reliability matrix** — per metric and stratum (every language, each language's native and romanized
queries, each theme, and everything): the judge's sanity AUC (``judge_sanity``: known-good vs known-bad
answers of the stratum's queries; ``analysis.reliability``'s AUC, every parsed sample one observation) and,
where human labels exist, linearly weighted κ and percentage agreement of the judge's rounded item score
with the human score (``analysis.agreement``), each with its n. A jury's sanity score of a sanity answer is
its judges' mean, as for items.

**Marks** — a leaderboard cell of a language (or script) is marked when that stratum has no evidence (too
few sanity answers and too few labels) or evidence below a threshold (AUC < ``AUC_TRUST``, κ <
``KAPPA_TRUST``), with the reason in words.

**Provenance** — which runs made the judgments in view (judge, run, code revision, config hash, the
judge's settings, weights and preset, retrieval policy), the dataset's content hash, the hashes of the
judge prompt files and rubrics the judge reads (the dataset's own ``prompts/`` first, else the studio's,
as they are on disk now: the code revision pins the studio's), and what in them differs.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.dataset.loader import PROMPTS_SUBDIR
from pipeline.dataset.records import dataset_folder
from pipeline.metrics import METRICS, registry, registry_path, rubric_file
from pipeline.prompts import PROMPTS_DIR
from pipeline.read.common import REPO_ROOT
from pipeline.read.judge_trust import AUC_TRUST
from pipeline.read.jury import is_jury
from pipeline.store import SHARED_READERS

KAPPA_TRUST = 0.4  # below "moderate" (Landis & Koch) the judge and the doctors disagree too often
MIN_SANITY = 5  # parsed good and bad sanity answers each, before an AUC counts as evidence
MIN_LABELS = 20  # human labels before κ counts as evidence
JUDGE_PROMPT_FILES = ("judge_system.txt", "judge_user_head.txt", "judge_user_chunks.txt",
                      "judge_user_ground_truth.txt", "judge_user_metric.txt")
MATRIX_COLUMNS = ["stratum", "language", "script", "theme", "metric", "auc", "n_good", "n_bad", "n_unparsed",
                  "kappa", "agreement", "n_labels", "status", "reason"]
SCRIPT_LABELS = {"native": "native script", "latin": "romanized"}


def _sanity_source(judge: str, members: tuple[str, ...]) -> tuple[str, list[Any]]:
    """judge_sanity rows of the judge (or the jury's mean over its members), parsed or not."""
    if not is_jury(judge):
        return ("(SELECT query_id, metric, variant, kind, sample, score, parse_ok FROM judge_sanity "
                "WHERE dataset = ? AND judge_id = ?)"), [judge]
    return ("(SELECT query_id, metric, variant, kind, sample, avg(score) FILTER (WHERE parse_ok) AS score, "
            "bool_or(parse_ok) AS parse_ok FROM judge_sanity WHERE dataset = ? AND list_contains(?, judge_id) "
            "GROUP BY ALL)"), [list(members)]


def _auc(good: dict[float, int], bad: dict[float, int]) -> float:
    """ROC AUC of a score separating good from bad, from the counts of each score (ties count half): scikit-learn's
    ``roc_auc_score`` with the counts as sample weights (tests/test_reliability.py holds them equal), without its
    per-call validation, which every cell of the matrix would pay twice over (κ too)."""
    n_good, n_bad = sum(good.values()), sum(bad.values())
    if not n_good or not n_bad:
        return float("nan")
    values = sorted(set(good) | set(bad))
    g = np.array([good.get(v, 0) for v in values], dtype=float)
    b = np.array([bad.get(v, 0) for v in values], dtype=float)
    below = np.concatenate([[0.0], np.cumsum(b)[:-1]])
    return float((g * (below + b / 2)).sum() / (n_good * n_bad))


def _strata(rows: list[tuple]) -> Iterator[tuple]:
    """Per-query-kind counts (language, script, themes, metric, *values, n) as the counts of every stratum they
    fall in: (stratum, language, script, theme, metric, *values, n) for everything, the language, the language's
    script and each of the query's themes. Grouping a few hundred rows here is cheaper than GROUPING SETS."""
    for language, script, themes, metric, *rest in rows:
        yield ("all", None, None, None, metric, *rest)
        yield ("language", language, None, None, metric, *rest)
        yield ("script", language, script, None, metric, *rest)
        for theme in themes or ():
            yield ("theme", None, None, theme, metric, *rest)


def reliability_matrix(db: str | Path, dataset: str, judge: str, members: tuple[str, ...] = ()) -> pd.DataFrame:
    """The reliability matrix of ``judge`` (or a jury of ``members``) on ``dataset``: see the module docstring.

    Strata: ``all``; ``language``; ``script`` (a language's native or romanized queries; a query without a
    script is native); ``theme``. ``status``: 'ok', 'weak' (below a threshold), 'none' (too little evidence).
    """
    sanity, p_sanity = _sanity_source(judge, members)
    per_query = "q.language, coalesce(q.script, 'native') AS script, q.themes"
    san_sql = (f"SELECT {per_query}, s.metric, s.kind, s.score, s.parse_ok, count(*) FROM {sanity} s "
               "JOIN queries q ON q.dataset = ? AND q.query_id = s.query_id GROUP BY ALL")
    # each annotator's score beside the judge's item score (a jury's: the mean of its judges'), from ``label_pairs``
    pairs = ("label_pairs" if not is_jury(judge) else
             "(SELECT dataset, query_id, model_id, label_metric, ? AS judge_id, any_value(query_language) AS "
             "query_language, any_value(query_script) AS query_script, any_value(themes) AS themes, any_value(humans) "
             "AS humans, avg(llm) AS llm FROM label_pairs WHERE dataset = ? GROUP BY ALL)")
    label_sql = (f"SELECT p.query_language, p.query_script, p.themes, p.label_metric, u.human, round(p.llm), count(*) "
                 f"FROM {pairs} p, unnest(p.humans) AS u(human) WHERE p.dataset = ? AND p.judge_id = ? "
                 "AND list_contains(?, p.label_metric) AND p.llm IS NOT NULL GROUP BY ALL")
    with SHARED_READERS.cursor(db) as con:
        san = con.execute(san_sql, [dataset, *p_sanity, dataset]).fetchall()
        labels = con.execute(label_sql, [*([judge, dataset] if is_jury(judge) else []), dataset, judge,
                                         list(METRICS)]).fetchall()
    return _cells(_strata(san), _strata(labels))


STRATUM_KEYS = ("all", "language", "script", "theme")


def _linear_kappa(confusion: np.ndarray) -> float:
    """Cohen's κ with linear weights of a 3×3 (0/1/2) confusion table (``analysis.agreement.weighted_kappa``)."""
    total = confusion.sum()
    if total == 0:
        return float("nan")
    idx = np.arange(len(confusion))
    w = np.abs(idx[:, None] - idx[None, :]).astype(float)
    expected = np.outer(confusion.sum(axis=1), confusion.sum(axis=0)) / total
    denominator = (w * expected).sum()
    return float(1 - (w * confusion).sum() / denominator) if denominator > 0 else float("nan")


def _cells(san: Iterable[tuple], labels: Iterable[tuple]) -> pd.DataFrame:
    """The matrix from the grouped counts: (stratum, language, script, theme, metric, kind, score, parse_ok, n)
    sanity rows and (…, metric, human, llm, n) label rows."""
    key = ["stratum", "language", "script", "theme", "metric"]
    cells: dict[tuple, dict[str, Any]] = {}

    def cell(k: tuple) -> dict[str, Any]:
        if k not in cells:
            cells[k] = {"good": {}, "bad": {}, "n_unparsed": 0, "confusion": np.zeros((3, 3))}
        return cells[k]

    for *k, kind, score, parse_ok, n in san:
        c = cell(tuple(k))
        if not parse_ok or score is None:
            c["n_unparsed"] += int(n)
        else:
            side = c["good" if kind == "good" else "bad"]
            side[float(score)] = side.get(float(score), 0) + int(n)
    for *k, human, llm, n in labels:
        c = cell(tuple(k))
        if 0 <= int(human) <= 2 and 0 <= int(llm) <= 2:
            c["confusion"][int(human), int(llm)] += n
    for k in {k[:4] for k in cells}:  # every metric of a stratum seen: a metric without evidence says so
        for metric in METRICS:
            cell((*k, metric))
    rows = []
    for k, c in cells.items():
        n_good, n_bad = sum(c["good"].values()), sum(c["bad"].values())
        auc = _auc(c["good"], c["bad"])
        n_labels = int(c["confusion"].sum())
        kappa = _linear_kappa(c["confusion"]) if n_labels else float("nan")
        agreement = float(np.trace(c["confusion"]) / n_labels) if n_labels else float("nan")
        status, reason = verdict(auc, n_good, n_bad, kappa, n_labels)
        rows.append({**dict(zip(key, k, strict=True)), "auc": auc, "n_good": int(n_good), "n_bad": int(n_bad),
                     "n_unparsed": c["n_unparsed"], "kappa": kappa, "agreement": agreement, "n_labels": n_labels,
                     "status": status, "reason": reason})
    order = {s: i for i, s in enumerate(STRATUM_KEYS)}
    metric_order = {m: i for i, m in enumerate(METRICS)}
    rows.sort(key=lambda r: (order.get(r["stratum"], 9), r["language"] or "", r["script"] or "", r["theme"] or "",
                             metric_order.get(r["metric"], 99)))
    return pd.DataFrame(rows, columns=MATRIX_COLUMNS)


def verdict(auc: float, n_good: int, n_bad: int, kappa: float, n_labels: int) -> tuple[str, str]:
    """('ok' | 'weak' | 'none', the reason in words) for one cell of the matrix."""
    sanity_ok = n_good >= MIN_SANITY and n_bad >= MIN_SANITY and not np.isnan(auc)
    labels_ok = n_labels >= MIN_LABELS and not np.isnan(kappa)
    weak = []
    if sanity_ok and auc < AUC_TRUST:
        weak.append(f"sanity AUC {auc:.2f} < {AUC_TRUST} ({n_good} good, {n_bad} bad answers; 0.5 is chance)")
    if labels_ok and kappa < KAPPA_TRUST:
        weak.append(f"agreement with doctors κ {kappa:.2f} < {KAPPA_TRUST} ({n_labels} labels)")
    if weak:
        return "weak", "; ".join(weak)
    if not sanity_ok and not labels_ok:
        return "none", (f"no reliability evidence: {n_good} good and {n_bad} bad sanity answers (need "
                        f"{MIN_SANITY} each), {n_labels} human labels (need {MIN_LABELS})")
    parts = [f"sanity AUC {auc:.2f} on {n_good + n_bad} answers" if sanity_ok else "too few sanity answers",
             f"κ {kappa:.2f} on {n_labels} labels" if labels_ok else "too few human labels"]
    return "ok", "; ".join(parts)


def stratum_name(language: str | None, scripts: tuple[str, ...] = ()) -> str:
    script = f" ({SCRIPT_LABELS.get(scripts[0], scripts[0])})" if len(scripts) == 1 else ""
    return f"{language}{script}"


def cell_marks(matrix: pd.DataFrame, language: str, scripts: tuple[str, ...] = (),
               weights: dict[str, float] | None = None) -> dict[str, str]:
    """Per metric (and AGG, from its weighted metrics) of one leaderboard view, the reason its cells are
    marked; metrics whose evidence is fine are absent. One script chosen: that script's evidence."""
    if matrix.empty:
        rows = matrix
    elif len(scripts) == 1:
        rows = matrix[(matrix.stratum == "script") & (matrix.language == language) & (matrix.script == scripts[0])]
    else:
        rows = matrix[(matrix.stratum == "language") & (matrix.language == language)]
    where = stratum_name(language, scripts)
    marks: dict[str, str] = {}
    for metric in METRICS:
        row = rows[rows.metric == metric]
        if row.empty:
            marks[metric] = f"{where}: no reliability evidence (no sanity answers, no human labels)"
        elif row.status.iloc[0] != "ok":
            marks[metric] = f"{where}: {row.reason.iloc[0]}"
    used = [m for m in METRICS if (weights or {}).get(m, 1.0) > 0]
    if any(m in marks for m in used):
        marks["AGG"] = "; ".join(f"{m} — {marks[m]}" for m in used if m in marks)
    return marks


# -- provenance ----------------------------------------------------------------------------------------
def _sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    except OSError:
        return None


def _folder(path: str | None) -> Path | None:
    if not path:
        return None
    for base in (Path.cwd(), REPO_ROOT):
        folder = dataset_folder(base / path)
        if folder is not None:
            return folder
    return None


@functools.lru_cache(maxsize=16)
def prompt_hashes(dataset_path: str | None, stamp: int = 0) -> dict[str, Any]:
    """Hashes (sha256, 12 hex) of the judge prompt files (the dataset's own first), the metric registry and
    each metric's rubric file, as on disk now; ``own``: the judge files the dataset supplies itself."""
    folder = _folder(dataset_path)
    files, own = [], []
    for name in JUDGE_PROMPT_FILES:
        mine = folder / PROMPTS_SUBDIR / name if folder is not None else None
        path = mine if mine is not None and mine.is_file() else PROMPTS_DIR / name
        files.append(path)
        own += [name] if path.parent != PROMPTS_DIR else []
    joined = hashlib.sha256(b"".join(f.name.encode() + b"\0" + (f.read_bytes() if f.is_file() else b"") + b"\0"
                                     for f in files)).hexdigest()[:12]
    return {"judge_prompt": joined, "own_files": own, "registry": _sha(registry_path()),
            "rubrics": {m: _sha(rubric_file(registry()[m])) for m in METRICS}}


def _judge_settings(config: dict[str, Any], judge_id: str) -> str:
    judges = [config.get("judge"), *(config.get("jury") or [])]
    for j in judges:
        if isinstance(j, dict) and j.get("id") == judge_id:
            keep = {k: j.get(k) for k in ("metrics", "samples", "temperature", "max_tokens") if k in j}
            return json.dumps(keep, sort_keys=True)
    return ""


def score_provenance(db: str | Path, dataset: str, judge: str, members: tuple[str, ...] = ()) -> dict[str, Any]:
    """Where the judge's (or jury's) scores of ``dataset`` come from, and whether they mix provenance.

    ``runs``: per (judge, run) whose judgments make the scores shown (of the current response texts:
    ``score_groups.runs``): the run's code revision, config hash, start,
    the judge's settings, weights and preset and retrieval policy of its config; ``retrieval``: the stored retrieval
    policies (``retrievals.settings``) and their queries; ``dataset``: name, path, content hash; ``prompts``:
    ``prompt_hashes``; ``mixed``: one sentence per thing that differs between the runs (empty: one provenance);
    ``notes``: caveats that are not a mix (``provenance_notes``).
    """
    judges = list(members) if is_jury(judge) else [judge]
    with SHARED_READERS.cursor(db) as con:  # small results: plain rows, no frame conversion per query
        got = con.execute(
            "WITH j AS (SELECT DISTINCT judge_id, nullif(unnest(runs), '') AS run_id FROM score_groups "
            "WHERE dataset = ? AND list_contains(?, judge_id)) "
            "SELECT j.judge_id, j.run_id, r.code_revision, r.config_hash, r.started_at, r.config FROM j "
            "LEFT JOIN runs r USING (run_id) ORDER BY r.started_at, j.judge_id", [dataset, judges]).fetchall()
        settings = con.execute("SELECT settings, count(*) AS queries FROM retrievals WHERE dataset = ? GROUP BY ALL "
                               "ORDER BY queries DESC", [dataset]).fetchall()
        ds = con.execute("SELECT name, path, content_hash, loaded_at FROM datasets WHERE name = ?",
                         [dataset]).fetchall()
    runs = pd.DataFrame(got, columns=["judge_id", "run_id", "code_revision", "config_hash", "started_at", "config"])
    retrieval = pd.DataFrame(settings, columns=["settings", "queries"])
    configs = [json.loads(c) if isinstance(c, str) and c else {} for c in runs.pop("config")]
    runs["judge_settings"] = [_judge_settings(c, j) for c, j in zip(configs, runs.judge_id, strict=True)]
    runs["weights"] = [json.dumps(c.get("weights"), sort_keys=True) if c.get("weights") else "" for c in configs]
    runs["preset"] = [c.get("weights_preset") or "" for c in configs]
    runs["retrieval_config"] = [json.dumps(c.get("retrieval"), sort_keys=True) if c.get("retrieval") else ""
                                for c in configs]
    info = dict(zip(["name", "path", "content_hash", "loaded_at"], ds[0], strict=True)) if ds else {
        "name": dataset, "path": None, "content_hash": None}
    path = info.get("path")
    folder = _folder(path)
    stamp = max((p.stat().st_mtime_ns for p in (folder / PROMPTS_SUBDIR).glob("*")), default=0) if (
        folder is not None and (folder / PROMPTS_SUBDIR).is_dir()) else 0
    prompts = prompt_hashes(path, stamp)
    return {"runs": runs, "retrieval": retrieval, "dataset": info, "prompts": prompts,
            "mixed": mixed_provenance(runs, retrieval), "notes": provenance_notes(runs)}


def mixed_provenance(runs: pd.DataFrame, retrieval: pd.DataFrame) -> list[str]:
    """What differs between the runs whose judgments a view averages, one plain sentence each."""
    out = []
    revisions = sorted({str(r) for r in runs.code_revision.dropna()})
    if len(revisions) > 1:
        out.append(f"judgments come from {len(revisions)} code revisions ({', '.join(revisions)}): the studio's "
                   "prompts, rubrics or parsing may differ between them")
    for judge_id, g in runs.groupby("judge_id", sort=False):
        settings = sorted({s for s in g.judge_settings if s})
        if len(settings) > 1:
            out.append(f"{judge_id} judged with {len(settings)} different settings ({'; '.join(settings)})")
    if len(retrieval) > 1:
        out.append(f"the queries were retrieved under {len(retrieval)} retrieval policies: models saw chunks chosen "
                   "differently")
    return out


def provenance_notes(runs: pd.DataFrame) -> list[str]:
    """Caveats that are not a mix: a run whose code had uncommitted changes (its revision pins nothing)."""
    dirty = sorted({str(r) for r in runs.code_revision.dropna() if str(r).endswith("-dirty") or str(r) == "unknown"})
    return [f"code revision {r} had uncommitted changes (or none could be read): the prompt files it used are not "
            "pinned by it" for r in dirty]
