"""Prices in the config, cost and tokens per run × stage × model from what runs recorded, and the dry run's
estimate against what an embedded-model run then records."""

from __future__ import annotations

import io
import json
import math
import shutil
import textwrap
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from rich.console import Console

from pipeline.catalog import catalog, load_config
from pipeline.errors import UserError
from pipeline.read.cost import cost_by_model, cost_by_run, cost_of, cost_table
from pipeline.store import Store
from pipeline.store.rows import CacheRow, ResponseRow, RunRow

REPO = Path(__file__).resolve().parent.parent
SMOLLM2 = "llamacpp/smollm2-135m-instruct"
T0 = datetime(2025, 1, 1, 9, 0, 0)


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# -- prices in the config --------------------------------------------------------------------------
def test_prices_are_validated_and_stored_with_the_config_but_not_hashed(tmp_path):
    base = textwrap.dedent(f"""
        name: x
        dataset: {REPO / 'data' / 'cataract'}
        models: [{SMOLLM2}, openai/gpt-4o-mini]
        judge: openai/gpt-4o
    """)
    priced = load_config(write_config(tmp_path, base + "prices: {openai/gpt-4o-mini: {input: 0.15, output: 0.6}, "
                                                       "openai/gpt-4o: {input: 2.5, output: 10}}\n"))
    assert priced.prices["openai/gpt-4o"].output == 10
    assert json.loads(priced.to_json())["prices"]["openai/gpt-4o-mini"] == {"input": 0.15, "output": 0.6}
    assert priced.config_hash() == load_config(write_config(tmp_path, base)).config_hash()  # prices change no result
    with pytest.raises(UserError, match=r"prices: no model of this config is called openai/gpt-5"):
        load_config(write_config(tmp_path, base + "prices: {openai/gpt-5: {input: 1, output: 2}}\n"))
    with pytest.raises(UserError, match=r"field prices\.openai/gpt-4o\.input: .*greater than or equal to 0"):
        load_config(write_config(tmp_path, base + "prices: {openai/gpt-4o: {input: -1, output: 2}}\n"))
    with pytest.raises(UserError, match=r"field prices\.openai/gpt-4o\.output"):
        load_config(write_config(tmp_path, base + "prices: {openai/gpt-4o: {input: 1}}\n"))


def test_cost_of_a_call():
    prices = {"openai/gpt-4o": {"input": 2.5, "output": 10.0}}
    assert cost_of("openai/gpt-4o", prices, 1_000_000, 100_000) == pytest.approx(3.5)
    assert cost_of("openai/gpt-4o-mini", prices, 10, 10) is None  # an API model without a price
    assert cost_of(SMOLLM2, prices, 10, 10) == 0.0  # in process: no bill
    assert cost_of("openai/gpt-4o", prices, None, 10) is None  # tokens not recorded


# -- cost from what runs recorded -------------------------------------------------------------------
def _record(stage: str, model: str, calls: int, cached: int, tokens: tuple[int, int] | None) -> dict:
    rec = {"stage": stage, "model_id": model, "items": calls + cached, "skipped": 0, "errors": 0, "wall_s": 1.0,
           "backend_calls": calls, "cache_hits": cached, "retries": 0}
    return rec if tokens is None else {**rec, "prompt_tokens": tokens[0], "completion_tokens": tokens[1]}


def _run(run_id: str, start: datetime, summary: list | None, prices: dict | None = None) -> RunRow:
    config = {"name": run_id, "dataset": "d", "models": [], **({"prices": prices} if prices else {})}
    return RunRow(run_id=run_id, name=run_id, kind="pipeline", dataset="d", config=json.dumps(config),
                  config_hash="h-" + run_id, code_revision="rev", model_files="{}", started_at=start,
                  finished_at=start + timedelta(minutes=30), status="finished",
                  summary=None if summary is None else json.dumps(summary))


def _response(query: str, model: str, run_id: str, tokens: tuple[int, int], cached: bool = False) -> ResponseRow:
    return ResponseRow(dataset="d", query_id=query, model_id=model, run_id=run_id, prompt_hash="p", text="t",
                       error=None, prompt_tokens=tokens[0], completion_tokens=tokens[1], cached=cached)


def _cache(key: str, model: str, at: datetime, tokens: tuple[int, int]) -> CacheRow:
    return CacheRow(key=key, model_id=model, request="{}", text="t", top_logprobs=None, prompt_tokens=tokens[0],
                    completion_tokens=tokens[1], latency_s=0.1, created_at=at)


@pytest.fixture
def runs_db(tmp_path: Path) -> Path:
    """Three runs: one with token totals in its summary, one from before token accounting (calls in the summary,
    tokens in responses and llm_cache), one without a summary (a synthetic database)."""
    db = tmp_path / "cost.duckdb"
    new, old, bare = T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2)
    prices = {"openai/gpt-4o-mini": {"input": 0.15, "output": 0.6}}
    Store(db).write([
        _run("new", new, [_record("generate", "openai/gpt-4o-mini", 3, 1, (3000, 600)),
                          _record("judge", "openai/gpt-4o", 4, 0, (8000, 400)),
                          _record("generate", SMOLLM2, 2, 0, (900, 48)),
                          _record("sanity-auc", "openai/gpt-4o", 0, 0, (0, 0))], prices),
        _run("old", old, [_record("generate", SMOLLM2, 2, 1, None), _record("judge", SMOLLM2, 4, 0, None)]),
        _run("bare", bare, None),
        _response("q1", SMOLLM2, "old", (100, 10)), _response("q2", SMOLLM2, "old", (120, 12)),
        _response("q3", SMOLLM2, "old", (130, 13), cached=True),  # free: not counted
        *(_cache(f"g{i}", SMOLLM2, old + timedelta(minutes=1), (p, c)) for i, (p, c) in enumerate([(100, 10),
                                                                                                (120, 12)])),
        *(_cache(f"j{i}", SMOLLM2, old + timedelta(minutes=2), (500, 20)) for i in range(4)),
        _cache("later", SMOLLM2, old + timedelta(hours=5), (9999, 9999)),  # outside every run's window
        _response("q1", "openai/gpt-4o", "bare", (50, 5)),
    ])
    return db


def test_cost_table_takes_each_stage_from_the_source_that_recorded_it(runs_db):
    table = cost_table(runs_db).set_index(["run_id", "stage", "model_id"])
    mini = table.loc[("new", "generate", "openai/gpt-4o-mini")]
    assert (mini.calls, mini.cached, mini.prompt_tokens, mini.completion_tokens, mini.source) == (
        3, 1, 3000, 600, "summary")
    assert mini.cost == pytest.approx((3000 * 0.15 + 600 * 0.6) / 1e6)
    assert math.isclose(mini.price_input, 0.15) and math.isclose(mini.price_output, 0.6)
    judge = table.loc[("new", "judge", "openai/gpt-4o")]
    assert judge.prompt_tokens == 8000 and pd.isna(judge.cost)  # an API model without a price: unknown
    assert table.loc[("new", "generate", SMOLLM2)].cost == 0  # in process: free, tokens still shown
    assert ("new", "sanity-auc", "openai/gpt-4o") not in table.index  # not an LLM stage
    old_generate = table.loc[("old", "generate", SMOLLM2)]
    assert (old_generate.calls, old_generate.cached, old_generate.source) == (2, 1, "responses")
    assert (old_generate.prompt_tokens, old_generate.completion_tokens) == (220, 22)
    old_judge = table.loc[("old", "judge", SMOLLM2)]  # the model's cache rows in the window minus generate's
    assert (old_judge.prompt_tokens, old_judge.completion_tokens, old_judge.source) == (2000, 80, "llm_cache")
    bare = table.loc[("bare", "generate", "openai/gpt-4o")]
    assert (bare.calls, bare.prompt_tokens, bare.source) == (1, 50, "responses")


def test_cost_by_model_and_by_run(runs_db):
    by_model = cost_by_model(runs_db).set_index("model_id")
    assert list(by_model.columns) == ["runs", "calls", "cached", "prompt_tokens", "completion_tokens", "cost",
                                      "unpriced_calls"]
    assert by_model.loc[SMOLLM2, "runs"] == 2 and by_model.loc[SMOLLM2, "prompt_tokens"] == 900 + 220 + 2000
    assert by_model.loc[SMOLLM2, "cost"] == 0 and by_model.loc[SMOLLM2, "unpriced_calls"] == 0
    assert pd.isna(by_model.loc["openai/gpt-4o", "cost"])
    assert by_model.loc["openai/gpt-4o", "unpriced_calls"] == 4 + 1
    by_run = cost_by_run(runs_db)
    assert list(by_run.run_id) == ["bare", "old", "new"]  # newest first
    assert by_run.set_index("run_id").loc["new", "cost"] == pytest.approx((3000 * 0.15 + 600 * 0.6) / 1e6)
    assert cost_by_model(runs_db, dataset="other").empty


def test_the_stored_summary_keeps_the_stage_errors_beside_the_usage(tmp_path, monkeypatch):
    """A Med-CoDE stage whose one failed item cost two failed calls (critique and classification): runs.summary
    keeps the stage's errors=1 (the usage's own count is ``usage_errors``), and its calls and tokens still read."""
    from pipeline import runner
    from pipeline.models import UsageStats
    from pipeline.steps.context import StageRecord

    async def one_stage(ctx, stages) -> None:  # what a stage leaves behind, without running one
        ctx.records.append(StageRecord("medcode", "openai/gpt-4o", items=3, errors=1,
                                       usage=UsageStats(backend_calls=6, cache_hits=1, retries=2, errors=2),
                                       prompt_tokens=300, completion_tokens=60))

    monkeypatch.setattr(runner, "_run_stages", one_stage)
    config = catalog().config({"name": "summary", "dataset": str(REPO / "data" / "cataract"),
                               "db": str(tmp_path / "r.duckdb"), "per_language": 1,
                               "models": [{"id": "extractive/top-sentences"}]})
    run_id = runner.run(config, stages="generate", console=Console(file=io.StringIO()))
    (summary, errors), = Store(config.db).fetch("SELECT summary, errors FROM runs WHERE run_id = ?", [run_id])
    (record,) = json.loads(summary)
    assert (record["stage"], record["errors"], record["usage_errors"]) == ("medcode", 1, 2)
    assert (record["backend_calls"], record["cache_hits"], record["retries"]) == (6, 1, 2)
    assert errors == 1  # runs.errors: the stages' errors, as before
    cost = cost_table(config.db).set_index(["run_id", "stage", "model_id"]).loc[(run_id, "medcode", "openai/gpt-4o")]
    assert (cost.calls, cost.cached, cost.prompt_tokens, cost.completion_tokens, cost.source) == (
        6, 1, 300, 60, "summary")


def test_synthetic_database_costs_generation_from_responses(synthetic_db):
    table = cost_table(synthetic_db)
    assert len(table) and set(table.source) == {"responses"}
    vllm = table[table.model_id.str.startswith("vllm/")]
    api = table[table.model_id.str.startswith("openai/")]
    assert (vllm.cost == 0).all() and api.cost.isna().all()
    assert (table.prompt_tokens > 0).all()


# -- the dry run's estimate against the run (embedded model) -------------------------------------------
@pytest.mark.slow
def test_dry_run_estimate_is_within_20_percent_of_what_the_run_records(tmp_path):
    from pipeline.dataset import load_dataset
    from pipeline.estimate import Estimate, print_estimate
    from pipeline.runner import parse_stages, run, select_queries

    config = catalog().config({
        "name": "estimate", "dataset": str(REPO / "data" / "cataract"), "db": str(tmp_path / "r.duckdb"),
        "limit": 2, "retrieval": {"top_k": 1, "split": "separate", "top_k_updates": 1},
        "models": [{"id": SMOLLM2, "max_tokens": 24}],
        "judge": {"id": SMOLLM2, "metrics": ["COH"], "max_tokens": 16},
        "prices": {SMOLLM2: {"input": 1.0, "output": 2.0}},
        "reask": {"times": 0},  # the estimate counts first asks; re-asks of unparsed outputs come on top
    })
    stages = parse_stages("retrieve,generate,judge", config)
    dataset = load_dataset(config.dataset)
    queries = select_queries(dataset, config)

    before = Estimate(config, dataset, queries, stages).run()  # nothing stored yet: kb_refs stand in
    assert not (tmp_path / "r.duckdb").exists()  # the estimate writes nothing
    assert any("kb_refs" in n for n in before.notes)
    out = io.StringIO()
    print_estimate(before, Console(file=out, width=200))
    assert "tokenizer" in out.getvalue()
    estimated = {ln.stage: ln for ln in before.lines}
    assert set(estimated) == {"generate", "judge"}
    assert all(ln.counted_by == "tokenizer" for ln in before.lines)

    run(config, stages="retrieve,generate,judge", console=Console(file=io.StringIO()))
    recorded = cost_table(config.db).set_index("stage")
    for stage, ln in estimated.items():
        r = recorded.loc[stage]
        assert r.source == "summary" and r.calls == ln.calls == ln.to_send == 2
        error = (ln.prompt_tokens - r.prompt_tokens) / r.prompt_tokens
        assert abs(error) <= 0.20, (stage, ln.prompt_tokens, r.prompt_tokens)
        assert r.completion_tokens <= ln.completion_tokens  # max_tokens per call: an upper bound
        assert r.cost == pytest.approx((r.prompt_tokens * 1.0 + r.completion_tokens * 2.0) / 1e6)
        print(f"{stage}: estimated {ln.prompt_tokens} prompt tokens, recorded {r.prompt_tokens} "
              f"({error:+.1%}); completion bound {ln.completion_tokens}, recorded {r.completion_tokens}")

    after = Estimate(config, dataset, queries, stages).run()  # all finished: nothing left to send but the
    with duckdb.connect(str(config.db), read_only=True) as con:  # unreadable judgments a rerun asks again
        unread = con.execute("SELECT count(*) FILTER (WHERE NOT parse_ok) FROM judgments").fetchone()[0]
    assert [(ln.stage, ln.calls, ln.done) for ln in after.lines] == [("generate", 0, 2),
                                                                     ("judge", unread, 2 - unread)]
    # without the stored results but with the cache, every call is a cache hit (the keys are the run's)
    copy = tmp_path / "copy.duckdb"
    shutil.copy(config.db, copy)
    with duckdb.connect(str(copy)) as con:
        con.execute("DELETE FROM responses")
        con.execute("DELETE FROM judgments")
    cached = Estimate(config.model_copy(update={"db": str(copy)}), dataset, queries, stages).run()
    assert [(ln.stage, ln.calls, ln.cached, ln.prompt_tokens) for ln in cached.lines] == [
        ("generate", 2, 2, 0), ("judge", 2, 2, 0)]
