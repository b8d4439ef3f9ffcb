"""A step is its module plus one registry entry, a page its file plus one ``Page`` entry: a toy LLM step written to a
temporary module and registered once is known to the config's validation (its own section), the stage list, the dry
run's estimate and the run (its calls, its own table, resuming), and its table to ``export`` (by default),
``upgrade`` (an older file gains it) and ``status``; a toy page declared by one entry, reading the toy's table
through the cached layer, is routed and drawn by the app — without any other file of the repository changing.

The toy runs in a subprocess, so its registration does not outlive the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.datasets import write_closed_book, write_config
from tests.support.openai_fixture import FixtureServer

REPO = Path(__file__).resolve().parent.parent

TOY_MODULE = '''
"""A toy LLM step: one word from a model about each response, kept in its own table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, field_validator

from pipeline.config import ModelConfig
from pipeline.models.base import ChatRequest, GenerateParams
from pipeline.steps.context import Call, Pending, finished, pending_of
from pipeline.steps.spec import Step
from pipeline.store import SHARED_READERS
from pipeline.store.row import Row


class ToySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    model: ModelConfig
    max_tokens: int = 8

    @field_validator("model", mode="before")
    @classmethod
    def _model_id(cls, v):
        return {"id": v} if isinstance(v, str) else v


@dataclass(slots=True)
class ToyNoteRow(Row):
    TABLE: ClassVar[str] = "toy_notes"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "model_id")
    dataset: str
    query_id: str
    model_id: str
    note: str | None
    response_hash: str | None
    run_id: str


def pending(ctx) -> list[Pending]:
    settings = ctx.config.section("toy")
    params = GenerateParams(max_tokens=settings.max_tokens, temperature=0.0)
    calls = [Call(it.key, ChatRequest(messages=({"role": "user", "content": "One word about: " + it.text},),
                                      params=params), it, it.assumed) for it in ctx.responses()]
    done = finished(ctx, "toy_notes", ("query_id", "model_id"))
    return [pending_of("toy", settings.model, calls, done, lambda c, d: d[0] == c.item.response_hash)]


async def step_toy(ctx) -> None:
    for p in pending(ctx):
        def to_rows(call, c):
            it = call.item
            return [ToyNoteRow(dataset=ctx.dataset_name, query_id=it.query.query_id, model_id=it.model_id,
                               note=c.text, response_hash=it.response_hash, run_id=ctx.run_id)]

        await ctx.send(p, to_rows, label="toy")


def note_counts(db):
    """The toy's read model: notes per model."""
    with SHARED_READERS.cursor(db) as con:
        return con.execute("SELECT model_id, count(*) AS notes FROM toy_notes GROUP BY ALL ORDER BY model_id").df()


STEP = Step(run=step_toy, pending=pending, requires=("toy",),
            models=lambda config: [("toy model", config.section("toy").model)], rows=(ToyNoteRow,),
            section="toy", settings=ToySettings)
'''

SCRIPT = '''
import io, json, os, sys
from pathlib import Path
from rich.console import Console
from typer.testing import CliRunner
from pipeline.catalog import load_config
from pipeline.dataset import load_dataset
from pipeline.errors import UserError
from pipeline.estimate import Estimate
from pipeline.runner import execute, parse_stages, roles, select_queries
from pipeline.read.pages import PAGES, Page, Read
from pipeline.steps import STEPS
from pipeline.store import Store, open_connection
from pipeline.store.rows import MetaRow

STEPS.register("toy", "toy_step:STEP")  # the one registry entry
config_path, bad_path, page_file, work = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
import toy_step

PAGES.register("toy", Page(page_file, "Toy notes", ":material/notes:", "The toy step's notes.",
                           reads=(Read("toy_note_counts", toy_step.note_counts),)))  # the one page entry
out = {}
config = load_config(config_path)
out["section"] = config.section("toy").model_dump(mode="json")
out["default_stages"] = parse_stages(None, config)
out["roles"] = [(role, mc.id) for role, mc in roles(config, ["generate", "toy"])]
try:
    load_config(bad_path)
except UserError as exc:
    out["bad"] = str(exc)
dataset = load_dataset(config.dataset)
queries = select_queries(dataset, config)
before = Estimate(config, dataset, queries, ["generate", "toy"]).run()
out["estimate_before"] = [(ln.stage, ln.model_id, ln.calls, ln.done) for ln in before.lines]
first = execute(config, stages="generate,toy", console=Console(file=io.StringIO()))
out["records"] = [(r.stage, r.model_id, r.items, r.skipped) for r in first.records]
with open_connection(config.db, read_only=True) as con:
    out["rows"] = con.execute("SELECT count(*), count(DISTINCT query_id), bool_and(note IS NOT NULL) "
                              "FROM toy_notes").fetchone()
after = Estimate(config, dataset, queries, ["generate", "toy"]).run()
out["estimate_after"] = [(ln.stage, ln.model_id, ln.calls, ln.done) for ln in after.lines]
second = execute(config, stages="toy", console=Console(file=io.StringIO()))
out["rerun"] = [(r.stage, r.items, r.skipped, r.usage.backend_calls) for r in second.records]

from pipeline.cli import app

cli = CliRunner()
done = cli.invoke(app, ["export", "--db", config.db, "--out", str(work / "export")])  # the default tables
out["export"] = [done.exit_code, json.loads((work / "export" / "manifest.json").read_text())["tables"]
                 .get("toy_notes", {}).get("rows")]
done = cli.invoke(app, ["status", "--db", config.db])
out["status"] = [done.exit_code, [line.split() for line in done.output.splitlines() if "toy_notes" in line]]
older = work / "older.duckdb"  # a file written by the store alone, as before the toy step existed
Store(older).write([MetaRow(key="made_by", value="an older version")])
with open_connection(older, read_only=True) as con:
    out["older_has_toy"] = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'toy_notes'").fetchone()
done = cli.invoke(app, ["upgrade", "--db", str(older)])
with open_connection(older, read_only=True) as con:
    out["upgraded"] = [done.exit_code, con.execute("SELECT count(*) FROM toy_notes").fetchone()[0]]

import logging
logging.disable(logging.WARNING)
from streamlit.testing.v1 import AppTest

os.environ["PARIKSHA_DB"] = config.db
at = AppTest.from_file(os.path.join(os.getcwd(), "app.py"), default_timeout=120)
at.run()
out["home"] = [link.label for link in at.get("page_link")]
at.switch_page(page_file)
at.run()
out["page"] = [[str(e.value) for e in at.exception], [m.value for m in at.markdown]]
print(json.dumps(out))
'''


TOY_PAGE = '''
"""The toy step's page: its notes per model, through the cached layer."""

import streamlit as st

from pages import _data as data
from pages import _ui as ui

ctx = ui.context()
st.title("Toy notes")
ui.require_data(ctx)
notes = data.toy_note_counts(ctx.db)
st.markdown(f"toy notes: {int(notes.notes.sum())} from {len(notes)} model(s)")
'''


def test_a_new_llm_step_is_one_module_and_one_registry_entry(tmp_path: Path) -> None:
    (tmp_path / "toy_step.py").write_text(textwrap.dedent(TOY_MODULE), encoding="utf-8")
    page = tmp_path / "toy_page.py"
    page.write_text(textwrap.dedent(TOY_PAGE), encoding="utf-8")
    dataset = write_closed_book(tmp_path / "qa", 3)
    db = tmp_path / "results.duckdb"
    with FixtureServer(latency_s=0.0) as server:
        models = [{"id": "openai-compatible/gen", "base_url": server.base_url}]
        toy = {"model": {"id": "openai-compatible/toy", "base_url": server.base_url}, "max_tokens": 6}
        config = write_config(tmp_path / "toy.yaml", dataset=dataset, db=db, models=models, toy=toy,
                              prices={"openai-compatible/toy": {"input": 1.0, "output": 2.0}})
        bad = write_config(tmp_path / "bad.yaml", dataset=dataset, db=db, models=models,
                           toy={**toy, "max_tokens": "lots"})
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(config), str(bad), str(page), str(tmp_path)],
                              cwd=REPO, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    # the config validates the toy's own section with its settings model, and refuses a bad value in one line
    assert out["section"]["max_tokens"] == 6 and out["section"]["model"]["id"] == "openai-compatible/toy"
    assert "toy.max_tokens" in out["bad"] and "\n" not in out["bad"]
    # the stage list and the model roles come from its declaration
    assert out["default_stages"][-1] == "toy" and "generate" in out["default_stages"]
    assert ["toy model", "openai-compatible/toy"] in out["roles"]
    # the dry run's estimate tallies its calls before anything ran (3 answers not generated yet) ...
    assert ["toy", "openai-compatible/toy", 3, 0] in out["estimate_before"]
    # ... the run makes them, writes its own table, and the estimate then finds them done
    assert ["toy", "openai-compatible/toy", 3, 0] in out["records"]
    assert out["rows"] == [3, 3, True]
    assert ["toy", "openai-compatible/toy", 0, 3] in out["estimate_after"]
    assert out["rerun"] == [["toy", 0, 3, 0]]  # resumable: nothing asked again
    # export's default tables hold it, status counts it under its stage, upgrade gives an older file its table
    assert out["export"] == [0, 3]
    assert out["status"][0] == 0 and ["toy", "toy_notes", "3"] in [[c for c in row if c.strip("│┃")]
                                                                 for row in out["status"][1]]
    assert out["older_has_toy"] == [0] and out["upgraded"] == [0, 0]
    # the app routes the page of the one Page entry and links it from home; the page reads the toy's table
    assert "Toy notes" in out["home"]
    assert out["page"][0] == [] and "toy notes: 3 from 1 model(s)" in out["page"][1]
