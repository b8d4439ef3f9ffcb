"""How far the judge can be trusted, and how uncertain every leaderboard number is.

- Stage ``sanity``: a judge sanity set built from the dataset. For each of up to
  ``judge.sanity_items`` selected queries (spread across languages): the ground truth itself as a
  known-good response; as known-bad, the refusal sentence (answerable queries only) and another
  query's ground truth on a different topic (disjoint ``kb_refs``). An ``out_of_kb`` query's
  ground truth *is* the refusal, so there it is the good response and only the other answer is
  bad. Every variant is judged on every configured metric (table ``judge_sanity``); per judge and
  metric the discrimination AUC (scikit-learn ``roc_auc_score``: good = 1, bad = 0, the score as
  predictor; unparsed outputs left out and counted) goes to ``judge_reliability``.
- ``leaderboard``: metric means with n and bootstrap 95 % CIs per model × language, and AGG with a
  CI from bootstrapping the per-item weighted score; input is a histogram from SQL
  (``LEADERBOARD_ITEMS_SQL``).
- ``self_consistency``: per judge and metric, the spread of scores across self-consistency samples.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from pipeline.analysis.stats import mean_with_ci, normalised_weights
from pipeline.dataset import REFUSAL_SENTENCE, Dataset, Query
from pipeline.metrics import METRICS
from pipeline.models.base import Completion
from pipeline.steps.context import RunContext, stored_chunks
from pipeline.store.schema import ReliabilityRow, SanityRow

# -- the sanity set --------------------------------------------------------------------------------


def spread_across_languages(queries: Sequence[Query], cap: int) -> list[Query]:
    """Up to ``cap`` queries taken round-robin over languages, in dataset order within each."""
    by_lang: dict[str, list[Query]] = {}
    for q in queries:
        by_lang.setdefault(q.language, []).append(q)
    out: list[Query] = []
    while len(out) < cap and any(by_lang.values()):
        for lang in list(by_lang):
            if by_lang[lang] and len(out) < cap:
                out.append(by_lang[lang].pop(0))
    return out


def other_answer(query: Query, dataset: Dataset) -> Query | None:
    """Another answerable query on a different topic (no shared kb_refs), chosen by a stable hash."""
    refs = set(query.kb_refs)
    candidates = [c for c in dataset.queries if c.query_id != query.query_id and "out_of_kb" not in c.themes
                  and c.kb_refs and not refs & set(c.kb_refs) and c.gt_response != query.gt_response]
    if not candidates:
        return None
    return min(candidates, key=lambda c: hashlib.sha256(f"{query.query_id}|{c.query_id}".encode()).hexdigest())


def sanity_variants(query: Query, dataset: Dataset) -> list[tuple[str, str, str]]:
    """(variant, kind, response text) for one query: kind is 'good' or 'bad'."""
    out = [("ground_truth", "good", query.gt_response)]
    if "out_of_kb" not in query.themes and query.gt_response.strip() != REFUSAL_SENTENCE:
        out.append(("refusal", "bad", REFUSAL_SENTENCE))
    other = other_answer(query, dataset)
    if other is not None:
        out.append(("other_answer", "bad", other.gt_response))
    return out


def discrimination_auc(sanity: pd.DataFrame) -> pd.DataFrame:
    """Per judge and metric: AUC of the score separating good (1) from bad (0) responses.

    ``sanity`` has columns ``judge_id``, ``metric``, ``kind`` ('good'/'bad'), ``score`` (NULL when
    unparsed) and ``parse_ok``; every sample is one observation. AUC is NaN unless both kinds have
    parsed scores. 0.5 = no discrimination (e.g. the same score for everything).
    """
    from sklearn.metrics import roc_auc_score

    cols = ["judge_id", "metric", "auc", "n_good", "n_bad", "n_unparsed"]
    rows = []
    for (judge_id, metric), g in sanity.groupby(["judge_id", "metric"], sort=True):
        ok = g[g["parse_ok"].fillna(False).astype(bool) & g["score"].notna()]
        y = (ok["kind"] == "good").astype(int).to_numpy()
        n_good, n_bad = int(y.sum()), int(len(y) - y.sum())
        auc = float(roc_auc_score(y, ok["score"].astype(float))) if n_good and n_bad else float("nan")
        rows.append({"judge_id": judge_id, "metric": metric, "auc": auc, "n_good": n_good, "n_bad": n_bad,
                     "n_unparsed": int(len(g) - len(ok))})
    return pd.DataFrame(rows, columns=cols)


async def step_sanity(ctx: RunContext) -> None:
    """Judge the sanity set on every configured metric; store per-metric discrimination AUC."""
    from pipeline.steps.judge import judge_calls, judgment_result

    jc = ctx.config.judge
    judge = ctx.model(jc.id)
    queries = spread_across_languages(ctx.queries, jc.sanity_items)
    chunks = stored_chunks(ctx, queries, fallback_to_refs=True)
    done = {tuple(r) for r in ctx.store.fetch(
        "SELECT query_id, metric, variant, sample FROM judge_sanity WHERE dataset = ? AND judge_id = ?",
        [ctx.dataset_name, jc.id])}
    todo, skipped = [], 0
    for q in queries:
        raw, updates = chunks[q.query_id]
        for variant, kind, text in sanity_variants(q, ctx.dataset):
            for call in judge_calls(q, text, raw, updates, metrics=jc.metrics, samples=jc.samples,
                                    temperature=jc.temperature, max_tokens=jc.max_tokens):
                if (q.query_id, call.metric, variant, call.sample) in done:
                    skipped += 1
                else:
                    todo.append((q.query_id, variant, kind, call))

    def to_rows(i: int, completion: Completion) -> list[SanityRow]:
        if not completion.ok:
            return []
        query_id, variant, kind, call = todo[i]
        result = judgment_result(call.metric, call.sample, completion)
        return [SanityRow(dataset=ctx.dataset_name, query_id=query_id, judge_id=jc.id, metric=call.metric,
                          variant=variant, kind=kind, sample=call.sample, score=result["score"],
                          parse_ok=result["parse_ok"], raw_output=result["raw_output"])]

    await ctx.drive("sanity", judge, [t[3].request for t in todo], to_rows, label=f"judge sanity {jc.id}",
                    skipped=skipped)
    started = time.perf_counter()
    sanity = ctx.store.fetch_df(
        "SELECT judge_id, metric, kind, score, parse_ok FROM judge_sanity WHERE dataset = ? AND judge_id = ?",
        [ctx.dataset_name, jc.id])
    aucs = discrimination_auc(sanity)
    ctx.write([ReliabilityRow(dataset=ctx.dataset_name, judge_id=r.judge_id, metric=r.metric,
                              auc=None if np.isnan(r.auc) else r.auc, n_good=r.n_good, n_bad=r.n_bad,
                              n_unparsed=r.n_unparsed, run_id=ctx.run_id) for r in aucs.itertuples()])
    ctx.note("sanity-auc", jc.id, items=len(aucs), wall_s=time.perf_counter() - started)


# -- leaderboard with uncertainty --------------------------------------------------------------------
# One row per distinct combination of an item's metric scores (mean over self-consistency samples),
# per model and language, with its count: the histogram ``leaderboard`` takes. Only judgments of the
# response text currently stored count. Parameters: dataset, judge_id.
LEADERBOARD_ITEMS_SQL = """
WITH current AS (
    SELECT j.dataset, j.query_id, j.model_id, j.metric, avg(j.score) AS score
    FROM judgments j
    JOIN responses r ON r.dataset = j.dataset AND r.query_id = j.query_id AND r.model_id = j.model_id
    WHERE j.dataset = ? AND j.judge_id = ? AND j.parse_ok AND r.error IS NULL
      AND j.response_hash = substr(sha256(r.text), 1, 16)
    GROUP BY j.dataset, j.query_id, j.model_id, j.metric
), item AS (
    SELECT c.model_id, q.language, c.query_id,
           max(c.score) FILTER (WHERE c.metric = 'FC') AS FC,
           max(c.score) FILTER (WHERE c.metric = 'SS') AS SS,
           max(c.score) FILTER (WHERE c.metric = 'COH') AS COH,
           max(c.score) FILTER (WHERE c.metric = 'CON') AS CON
    FROM current c JOIN queries q ON q.dataset = c.dataset AND q.query_id = c.query_id
    GROUP BY c.model_id, q.language, c.query_id
)
SELECT model_id, language, round(FC, 4) AS FC, round(SS, 4) AS SS, round(COH, 4) AS COH,
       round(CON, 4) AS CON, count(*) AS n
FROM item GROUP BY ALL ORDER BY model_id, language
"""

# Judgments that could not be parsed, per model, language and metric. Parameters: dataset, judge_id.
LEADERBOARD_UNPARSED_SQL = """
SELECT j.model_id, q.language, j.metric, count(*) AS n_unparsed
FROM judgments j JOIN queries q ON q.dataset = j.dataset AND q.query_id = j.query_id
WHERE j.dataset = ? AND j.judge_id = ? AND NOT j.parse_ok
GROUP BY ALL
"""


def leaderboard(items: pd.DataFrame, weights: Mapping[str, float], *, unparsed: pd.DataFrame | None = None,
                confidence: float = 0.95, n_resamples: int = 2000) -> pd.DataFrame:
    """Per model × language: each metric's mean, n and bootstrap CI, and AGG with its CI.

    ``items`` is the histogram of ``LEADERBOARD_ITEMS_SQL``: columns ``model_id``, ``language``,
    ``FC``, ``SS``, ``COH``, ``CON`` (an item's score, NaN when missing) and ``n``. A metric's
    mean uses the items that have it; AGG is the mean over items that have every weighted metric
    of the item's weighted score (weights normalised to sum 1), its CI from bootstrapping those
    per-item scores. ``unparsed`` (``LEADERBOARD_UNPARSED_SQL``) adds ``<metric>_unparsed`` columns.
    Output columns: ``model_id, language, AGG, AGG_n, AGG_lo, AGG_hi``, then per metric
    ``<m>, <m>_n, <m>_lo, <m>_hi``; sorted by language, then AGG descending.
    """
    w = normalised_weights(weights)
    weighted = [m for m in METRICS if w[m] > 0]
    kw = {"confidence": confidence, "n_resamples": n_resamples}
    rows = []
    for (model_id, language), g in items.groupby(["model_id", "language"], sort=True):
        row: dict = {"model_id": model_id, "language": language}
        complete = g.dropna(subset=weighted)
        agg_values = np.zeros(len(complete))
        for m in weighted:
            agg_values = agg_values + w[m] * complete[m].to_numpy(dtype=float)
        agg_hist = pd.DataFrame({"v": np.round(agg_values, 6), "n": complete["n"].to_numpy()})
        agg_hist = agg_hist.groupby("v", as_index=False)["n"].sum()
        stats = mean_with_ci(agg_hist["v"].to_numpy(), agg_hist["n"].to_numpy(), **kw)
        row.update({"AGG": stats["mean"], "AGG_n": stats["n"], "AGG_lo": stats["lo"], "AGG_hi": stats["hi"]})
        for m in METRICS:
            hist = g.dropna(subset=[m]).groupby(m, as_index=False)["n"].sum()
            stats = mean_with_ci(hist[m].to_numpy(dtype=float), hist["n"].to_numpy(), **kw)
            row.update({m: stats["mean"], f"{m}_n": stats["n"], f"{m}_lo": stats["lo"], f"{m}_hi": stats["hi"]})
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return pd.DataFrame(columns=["model_id", "language", "AGG", "AGG_n", "AGG_lo", "AGG_hi",
                                     *[f"{m}{s}" for m in METRICS for s in ("", "_n", "_lo", "_hi")]])
    if unparsed is not None and not unparsed.empty:
        wide = unparsed.pivot_table(index=["model_id", "language"], columns="metric", values="n_unparsed",
                                    aggfunc="sum", fill_value=0)
        wide.columns = [f"{c}_unparsed" for c in wide.columns]
        out = out.merge(wide.reset_index(), on=["model_id", "language"], how="left")
        for m in METRICS:
            out[f"{m}_unparsed"] = out.get(f"{m}_unparsed", pd.Series(0, index=out.index)).fillna(0).astype(int)
    return out.sort_values(["language", "AGG"], ascending=[True, False], ignore_index=True)


# -- self-consistency --------------------------------------------------------------------------------
SELF_CONSISTENCY_SQL = """
SELECT judge_id, metric, dataset, query_id, model_id, sample, score
FROM judgments WHERE dataset = ?
"""


def self_consistency(judgments: pd.DataFrame) -> pd.DataFrame:
    """Per judge and metric, over items judged at least twice (parsed samples only):

    ``n_items``, ``samples`` (mean parsed samples per item), ``mean_std`` (mean over items of the
    sample standard deviation of the score, ddof=1) and ``flip_rate`` (share of items whose score
    is not the same in every sample). Columns of ``judgments``: judge_id, metric, query_id,
    model_id, sample, score (NULL when unparsed); ``dataset`` optional.
    """
    cols = ["judge_id", "metric", "n_items", "samples", "mean_std", "flip_rate"]
    parsed = judgments[judgments["score"].notna()]
    if parsed.empty:
        return pd.DataFrame(columns=cols)
    keys = ["judge_id", "metric", *[c for c in ("dataset",) if c in parsed.columns], "query_id", "model_id"]
    per_item = parsed.groupby(keys)["score"].agg(count="count", std="std", distinct="nunique").reset_index()
    per_item = per_item[per_item["count"] >= 2]
    if per_item.empty:
        return pd.DataFrame(columns=cols)
    per_item["flip"] = per_item["distinct"] > 1
    out = per_item.groupby(["judge_id", "metric"], as_index=False).agg(
        n_items=("count", "size"), samples=("count", "mean"), mean_std=("std", "mean"), flip_rate=("flip", "mean"))
    return out[cols]
