"""Stage ``sanity``: how far the judge can be trusted.

For each of up to ``judge.sanity_items`` selected queries (spread across languages): the ground
truth itself as a known-good response; as known-bad, the refusal sentence (answerable queries only)
and another query's ground truth on a different topic (disjoint ``kb_refs``). An ``out_of_kb``
query's ground truth *is* the refusal, so there it is the good response and only the other answer
is bad. Every variant is judged on every configured metric (table ``judge_sanity``); per judge and
metric the discrimination AUC (``pipeline.analysis.reliability``: good = 1, bad = 0, the score as
predictor; unparsed outputs left out and counted) goes to ``judge_reliability``, which the
dashboard reads through ``pipeline.read.judge_trust``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence

import numpy as np

from pipeline.analysis.reliability import discrimination_auc
from pipeline.dataset import REFUSAL_SENTENCE, Dataset, Query
from pipeline.models.base import Completion
from pipeline.steps.context import Call, Inputs, Pending, RunContext, pending_of
from pipeline.steps.judge import judges
from pipeline.steps.spec import Step
from pipeline.store.rows import ReliabilityRow, SanityRow

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


def pending(ctx: Inputs) -> list[Pending]:
    """Per judge: its calls for every variant of its sanity set on every metric and sample not judged yet (the
    item: query id, variant, kind and the judge call). The chunks are the stored ones, else the query's kb_refs."""
    from pipeline.steps.judge import judge_calls

    out = []
    for jc in ctx.config.judges:
        queries = spread_across_languages(ctx.queries, jc.sanity_items)
        chunks = ctx.chunks(queries, fallback_to_refs=True)
        done = {tuple(r): () for r in ctx.fetch(
            "SELECT query_id, metric, variant, sample FROM judge_sanity WHERE dataset = ? AND judge_id = ?",
            [ctx.dataset.name, jc.id])}
        calls = [Call((q.query_id, c.metric, variant, c.sample), c.request, (q.query_id, variant, kind, c))
                 for q in queries for variant, kind, text in sanity_variants(q, ctx.dataset)
                 for c in judge_calls(q, text, *chunks[q.query_id], metrics=jc.metrics, samples=jc.samples,
                                      temperature=jc.temperature, max_tokens=jc.max_tokens,
                                      prompts=ctx.dataset.prompt_text)]
        out.append(pending_of("sanity", ctx.config.model_config_for(jc.id), calls, done, lambda c, d: True))
    return out


async def step_sanity(ctx: RunContext) -> None:
    """Judge the sanity set on every configured metric; store per-metric discrimination AUC."""
    for p in pending(ctx):
        await _sanity_of(ctx, p)


async def _sanity_of(ctx: RunContext, p: Pending) -> None:
    from pipeline.steps.judge import judgment_result

    judge_id = p.model.id

    def to_rows(call: Call, completion: Completion) -> list[SanityRow]:
        if not completion.ok:
            return []
        query_id, variant, kind, jcall = call.item
        result = judgment_result(jcall.metric, jcall.sample, completion)
        return [SanityRow(dataset=ctx.dataset_name, query_id=query_id, judge_id=judge_id, metric=jcall.metric,
                          variant=variant, kind=kind, sample=jcall.sample, score=result["score"],
                          parse_ok=result["parse_ok"], raw_output=result["raw_output"])]

    await ctx.send(p, to_rows, label=f"judge sanity {judge_id}")
    started = time.perf_counter()
    sanity = ctx.store.fetch_df(
        "SELECT judge_id, metric, kind, score, parse_ok FROM judge_sanity WHERE dataset = ? AND judge_id = ?",
        [ctx.dataset_name, judge_id])
    aucs = discrimination_auc(sanity)
    ctx.write([ReliabilityRow(dataset=ctx.dataset_name, judge_id=r.judge_id, metric=r.metric,
                              auc=None if np.isnan(r.auc) else r.auc, n_good=r.n_good, n_bad=r.n_bad,
                              n_unparsed=r.n_unparsed, run_id=ctx.run_id) for r in aucs.itertuples()])
    ctx.note("sanity-auc", judge_id, items=len(aucs), wall_s=time.perf_counter() - started)


STEP = Step(run=step_sanity, pending=pending, requires=("judge",), models=judges, rows=(SanityRow, ReliabilityRow))
