"""One rule per LLM stage for what is still to do (``pending``): the run sends exactly the calls it lists, and the
dry run's estimate tallies the same work (its ``calls + done`` per stage and model are the run's pending totals;
its count of LLM calls is the sum of its lines; pairwise is estimated too)."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.catalog import catalog, load_config
from pipeline.config import RunConfig
from pipeline.dataset import load_dataset
from pipeline.estimate import Estimate
from pipeline.runner import execute, parse_stages, print_dry_run, select_queries
from pipeline.steps import STEPS
from pipeline.steps.context import RunContext
from tests.support.datasets import write_config
from tests.support.openai_fixture import FixtureServer

RUBRIC = [{"criterion": "Advises asking the eye team before restarting.", "points": 5, "tags": ["axis:accuracy"]},
          {"criterion": "Tells the patient to stop the drops at once.", "points": -3, "tags": ["axis:accuracy"]}]
ROLES = ("gen-a", "gen-b", "judge", "grader", "critic", "teacher", "checker", "translator")
STAGES = "translate,generate,translate-responses,judge,pairwise,rubric,medcode,medcode-label,accuracy,sanity"
LLM_STAGES = [stage for stage, step in STEPS.items() if step.pending is not None]  # every stage that calls an LLM


def _dataset(folder: Path) -> Path:
    """A closed-book set of English and romanized Hindi queries (the Hindi ones without ``query_en``:
    machine-translated)."""
    folder.mkdir(parents=True)
    rows = [{"query_id": f"q{i}", "language": "hi" if i % 2 else "en",
             # romanized Hindi: the fixture server's echo of it passes the translator's script check (Latin letters),
             # as a real translator's English would; an echo of Devanagari would be re-asked and then refused
             "query": f"Motiyabind operation ke baad main {i} din mein kya kar sakta hoon?" if i % 2
             else f"Question {i}: after my cataract operation, when can I swim again?",
             "gt_response": f"Answer {i}: usually within a week; ask your doctor.", "themes": [], "kb_refs": [],
             "update_sensitive": False, "rubric": RUBRIC} for i in range(6)]
    (folder / "queries.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return folder


def _config(tmp_path: Path, server: FixtureServer, limit: int) -> RunConfig:
    """Every LLM role on the fixture server (its own model id each) over ``limit`` queries, half of them in the
    judge's sanity set."""
    role = {r: {"id": f"openai-compatible/{r}", "base_url": server.base_url, "max_retries": 0} for r in ROLES}
    folder = tmp_path / "qa"
    if not folder.exists():
        _dataset(folder)
    return load_config(write_config(
        tmp_path / "run.yaml", dataset=folder, db=tmp_path / "results.duckdb", limit=limit,
        models=[role["gen-a"], role["gen-b"]],
        judge={**role["judge"], "metrics": ["FC", "COH"], "sanity_items": limit // 2},
        pairwise={}, rubric_grader=role["grader"], llm_accuracy=role["checker"], translator=role["translator"],
        medcode={"critic": role["critic"], "classifier": "logprobs", "teacher": role["teacher"]}))


# The work of the 6-query run after the 2-query one, by hand: (calls left, done before) per stage and model. The
# 2-query run did q0 (en) and q1 (hi); 4 queries are left (q2, q4 en; q3, q5 hi). Two generators, one judge on two
# metrics (FC, COH), each query's rubric two criteria.
EXPECTED_WORK = {
    ("translate", "openai-compatible/translator"): (2, 1),  # Hindi queries without query_en: q3, q5 (q1 done)
    ("generate", "openai-compatible/gen-a"): (4, 2),  # 4 queries left
    ("generate", "openai-compatible/gen-b"): (4, 2),
    ("translate-responses", "openai-compatible/translator"): (4, 2),  # 2 models x the 2 Hindi queries left
    ("judge", "openai-compatible/judge"): (16, 8),  # 2 models x 4 queries x 2 metrics
    ("pairwise", "openai-compatible/judge"): (8, 4),  # 1 pair x 4 queries x both orders
    ("rubric", "openai-compatible/grader"): (16, 8),  # 2 models x 4 queries x 2 criteria
    ("medcode-critique", "openai-compatible/critic"): (8, 4),  # 2 models x 4 queries
    ("medcode-classify", "openai-compatible/critic"): (8, 0),  # each critique written, classified (not "done")
    ("medcode-label", "openai-compatible/teacher"): (8, 4),
    ("llm-accuracy", "openai-compatible/checker"): (8, 4),
    # sanity_items limit // 2: 1 item before, 3 now; each judged as 2 variants (the ground truth, the refusal: no
    # query has kb_refs, so none is another's different topic) on 2 metrics
    ("sanity", "openai-compatible/judge"): (8, 4),
}


def _request(r) -> str:
    return json.dumps({"messages": r.messages, "params": vars(r.params)}, sort_keys=True, default=str)


def _recording_run(config: RunConfig, monkeypatch: pytest.MonkeyPatch):
    """Run every stage; return (per stage: its pending computed right before it ran, the requests each driven
    stage sent first, by (stage, model))."""
    pending: dict[str, list] = {}
    sent: dict[tuple[str, str], list[str]] = defaultdict(list)
    drive = RunContext.drive

    async def recording(self, stage, model, requests, to_rows, **kw):
        sent[(stage, model.id)] += [_request(r) for r in requests]
        return await drive(self, stage, model, requests, to_rows, **kw)

    monkeypatch.setattr(RunContext, "drive", recording)
    with ExitStack() as stack:
        for stage in LLM_STAGES:
            step = STEPS[stage]

            async def wrapped(ctx, stage=stage, step=step):
                pending[stage] = step.pending(ctx)
                await step.run(ctx)

            stack.enter_context(STEPS.replaced(stage, replace(step, run=wrapped)))
        result = execute(config, stages=STAGES, console=Console(file=io.StringIO()))
    monkeypatch.undo()
    return result, pending, sent


def test_the_run_sends_what_pending_lists_and_the_estimate_tallies_the_same(tmp_path, monkeypatch):
    with FixtureServer(latency_s=0.0) as server:
        execute(_config(tmp_path, server, limit=2), stages=STAGES, console=Console(file=io.StringIO()))  # a part
        config = _config(tmp_path, server, limit=6)
        dataset = load_dataset(config.dataset)
        queries, stages = select_queries(dataset, config), parse_stages(STAGES, config)
        estimate = Estimate(config, dataset, queries, stages).run()
        out = io.StringIO()
        print_dry_run(config, dataset, queries, stages, Console(file=out, width=400))
        result, pending, sent = _recording_run(config, monkeypatch)
    assert result.status == "finished"

    # (a) every stage sends exactly the calls its pending lists, in that order, and counts the rest as skipped
    records = {(r.stage, r.model_id): r for r in result.records}
    totals = {}
    for stage in LLM_STAGES:
        assert pending[stage], stage
        for p in pending[stage]:
            assert p.calls and p.done, (stage, p.model.id)  # the partial run finished some, left others
            assert sent[(p.stage, p.model.id)] == [_request(c.request) for c in p.calls], (stage, p.model.id)
            assert records[(p.stage, p.model.id)].skipped == p.done
            totals[(p.stage, p.model.id)] = (len(p.calls), p.done)
            if p.then is not None:  # the critic classifies each critique it wrote
                totals[("medcode-classify", p.model.id)] = (len(sent[("medcode-classify", p.model.id)]), 0)
    assert len(sent) == len(totals)  # nothing was sent beyond the pending calls

    # (b) the estimate before the run: the same work per stage and model (done before, and the calls left)
    lines = {(ln.stage, ln.model_id): (ln.calls, ln.done) for ln in estimate.lines}
    assert lines == totals == EXPECTED_WORK
    assert {"pairwise", "medcode-label", "sanity", "translate"} <= {stage for stage, _ in lines}  # (c)
    # (d) the dry run's count, written out: the stages in run order, each with the calls left
    assert (f"at most {sum(calls for calls, _ in EXPECTED_WORK.values())} LLM calls (translate 2, generate 8, "
            "translate-responses 4, judge 16, pairwise 8, rubric 16, medcode-critique 8, medcode-classify 8, "
            "medcode-label 8, llm-accuracy 8, sanity 8)") in " ".join(out.getvalue().split())


def test_the_estimate_reads_a_missing_table_as_nothing_done_and_raises_any_other_sql_error(tmp_path) -> None:
    """Only an older file's missing table or column means "nothing finished"; a broken query is an error."""
    import duckdb

    from pipeline.store import Store

    db = tmp_path / "r.duckdb"
    folder = Path(__file__).resolve().parent.parent / "data" / "cataract"
    dataset = load_dataset(folder)
    config = catalog().config({"name": "e", "dataset": str(folder), "db": str(db),
                               "models": [{"id": "extractive/top-sentences"}]})
    est = Estimate(config, dataset, dataset.queries[:1], ["generate"])
    assert est.fetch("SELECT 1 FROM responses", []) == []  # no file yet
    with Store(db).connect():
        pass  # the schema, no rows
    assert est.fetch("SELECT 1 FROM no_such_table", []) == []
    assert est.fetch("SELECT no_such_column FROM responses", []) == []
    with pytest.raises(duckdb.ParserException):
        est.fetch("SELEC 1 FROM responses", [])
    with pytest.raises(duckdb.Error):
        est.fetch("SELECT 1 / 'x'::INTEGER FROM (SELECT 1)", [])
