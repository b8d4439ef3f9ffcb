"""The run: one config drives every stage into DuckDB, resumably.

Stages (``--stages``) run in the order of the catalog's steps (``pipeline.catalog``: ``pipeline.steps.STEPS``);
what each requires, calls and writes is its step's declaration (``steps.spec.Step``); opt-in stages run only when
named. Each stage skips the items it already finished (its key exists with the same inputs), sends the rest through
the model wrapper (cache, concurrency, retries) and saves results as they complete, in small transactions together
with their cache rows; so kill -9 loses at most the last second of work and a rerun continues where it stopped.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pipeline.catalog import catalog
from pipeline.config import ModelConfig, RunConfig
from pipeline.console import make_console, progress_bar
from pipeline.dataset import Dataset, Query, load_dataset
from pipeline.dataset.records import dataset_folder
from pipeline.errors import UserError
from pipeline.models import UsageStats, backend_class, unavailable_reason
from pipeline.steps.context import RunContext, StageRecord
from pipeline.store import Store, now
from pipeline.store.rows import dataset_rows
from pipeline.store.runlock import RunLock

REPO_ROOT = Path(__file__).resolve().parent.parent


def code_revision() -> str:
    """The git commit of this code, with ``-dirty`` when the working tree has changes."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def select_queries(dataset: Dataset, config: RunConfig) -> list[Query]:
    """The queries a run evaluates: optional language filter, per-language cap, then overall limit, on the queries
    the dataset was given; a generated variant (``pipeline variants``) follows the query it restates, so every pair
    is whole (an English control of a Hindi query is kept with it whatever the language filter)."""
    generated = [q for q in dataset.queries if q.variant is not None]
    queries = [q for q in dataset.queries
               if q.variant is None and (not config.languages or q.language in config.languages)]
    if config.per_language:
        seen: dict[str, int] = {}
        kept = []
        for q in queries:
            seen[q.language] = seen.get(q.language, 0) + 1
            if seen[q.language] <= config.per_language:
                kept.append(q)
        queries = kept
    queries = queries[: config.limit] if config.limit else queries
    chosen = {q.query_id for q in queries}
    return queries + [v for v in generated if v.variant_of in chosen]


def parse_stages(stages: str | None, config: RunConfig) -> list[str]:
    """Stages to run, in flow order. By default every stage whose required config sections are there, except the
    opt-in ones (``medcode-label``: the teacher's labelled critiques, training data, not an evaluation); a stage
    named without its section is refused in one line. Each step says what it requires (``steps.spec.Step``).
    Names each preceded by ``-`` (``--stages=-medcode``) leave those out of the default stages (``make run`` runs
    Med-CoDE's stage last, after its classifier's training)."""
    steps = catalog().steps
    defaults = [s for s, step in steps.items() if step.missing(config) is None and not step.opt_in]
    if not stages:
        return defaults
    names = [s.strip() for s in stages.split(",") if s.strip()]
    left_out = {n[1:] for n in names if n.startswith("-")}
    if left_out:
        if len(left_out) < len(names):
            raise UserError(f"--stages {stages}: either stages to run or stages to leave out (each with -), not both")
        for stage in sorted(left_out):
            catalog().step(stage, "--stages: ")
        return [s for s in defaults if s not in left_out]
    wanted = set(names)
    for stage in sorted(wanted):
        step = catalog().step(stage, "--stages: ")
        if section := step.missing(config):
            raise UserError(f"--stages {stage}: the config has no `{section}:` section")
    return [s for s in steps if s in wanted]


def roles(config: RunConfig, stages: list[str]) -> list[tuple[str, ModelConfig]]:
    """Every model the stages call, with its role (a model in two roles, or called by two stages, listed once per
    role), in flow order: what the dry run lists and what is checked before a run starts."""
    seen: dict[tuple[str, str], ModelConfig] = {}
    for stage in stages:
        for role, mc in catalog().steps[stage].roles(config):
            seen.setdefault((role, mc.id), mc)
    return [(role, mc) for (role, _), mc in seen.items()]


def answering_roles(config: RunConfig, stages: list[str]) -> set[str]:
    """The roles of the models under evaluation (a step that ``answers``): skipped when they cannot run here, each
    given only its languages."""
    steps = catalog().steps
    return {role for stage in stages if steps[stage].answers for role, _ in steps[stage].models(config)}


def cannot_run(config: RunConfig, stages: list[str]) -> str | None:
    """The first stage's reason it cannot run here (its ``check``), one line; None when every stage can."""
    steps = catalog().steps
    return next((reason for stage in stages if (check := steps[stage].check) and (reason := check(config))), None)


def print_dry_run(config: RunConfig, dataset: Dataset, queries: list[Query], stages: list[str],
                  console: Console) -> int:
    """List every model with its role, languages and what it needs that is missing (key, endpoint, vLLM, GPUs),
    how many LLM calls the run would make at most (the sum of the estimate's lines: the calls not finished yet)
    and the estimate of its calls, tokens and cost (``pipeline.estimate``); calls nothing, writes nothing."""
    table = Table(title=f"dry run: {config.name} on {dataset.name} ({len(queries)} queries)")
    for col in ("role", "model", "provider", "languages", "queries", "needs", "status"):
        table.add_column(col, overflow="fold", no_wrap=col == "model")  # a model id stays whole (copy-paste)
    languages = sorted({q.language for q in queries})
    answering = answering_roles(config, stages)
    for role, mc in roles(config, stages):
        reason = unavailable_reason(mc)
        langs = [lang for lang in languages if not mc.languages or lang in mc.languages] if role in answering \
            else languages
        n = sum(1 for q in queries if q.language in langs)
        backend = backend_class(mc.provider)
        table.add_row(role, mc.id, mc.provider, ", ".join(langs), str(n), backend.needs(mc) if backend else "",
                      f"[red]missing: {reason}[/]" if reason else "[green]ready[/]")
    console.print(table)
    if reason := cannot_run(config, stages):
        console.print(f"[red]missing:[/] {reason}", highlight=False, soft_wrap=True)
    from pipeline.estimate import Estimate, print_estimate

    est = Estimate(config, dataset, queries, stages).run()
    calls: dict[str, int] = {}
    for ln in est.lines:
        calls[ln.stage] = calls.get(ln.stage, 0) + ln.calls
    reasked = sorted({ln.stage for ln in est.lines if ln.reasked})
    again = (f"; an unparsed output of {', '.join(reasked)} is asked again up to {config.reask.times} more "
             "time(s)" if reasked and config.reask.times else "")
    console.print(f"stages: {', '.join(stages)}; at most {sum(calls.values())} LLM calls "
                  f"({', '.join(f'{k} {v}' for k, v in calls.items())}); cached calls are not repeated{again}")
    print_estimate(est, console)
    return 0


async def _run_stages(ctx: RunContext, stages: list[str]) -> None:
    try:
        catalog().prepare(ctx)  # every step's preparation, whichever stages run
        for stage in stages:
            await catalog().steps[stage].run(ctx)
    finally:
        await asyncio.gather(*(m.aclose() for m in ctx.models_in_use().values()), return_exceptions=True)


def summary_table(records: list[StageRecord], title: str) -> Table:
    table = Table(title=title)
    for col in ("stage", "model", "items", "done before", "errors", "cached", "calls", "retries", "secs"):
        table.add_column(col, justify="left" if col in ("stage", "model") else "right", overflow="fold")
    for r in records:
        table.add_row(r.stage, r.model_id, str(r.items), str(r.skipped), str(r.errors), str(r.usage.cache_hits),
                      str(r.usage.backend_calls), str(r.usage.retries), f"{r.wall_s:.1f}")
    return table


@dataclass
class RunResult:
    """How a run ended: its id, status, what each stage did and the endpoints taken as down."""

    run_id: str
    status: str
    records: list[StageRecord]
    down: dict[str, str] = field(default_factory=dict)

    @property
    def unanswered(self) -> int:
        """Items whose backend call failed for good: after its retries, or not made while its endpoint was down."""
        return sum(r.usage.errors for r in self.records)

    @property
    def exit_code(self) -> int:
        """The CLI's exit code: 1 when any item got no answer (a rerun retries them), else 0. Outputs that stayed
        unparsed are counted as errors in the summary but are answers: they do not fail the run."""
        return 1 if self.unanswered else 0

    def closing_line(self) -> str | None:
        """One line saying what got no answer and how to resume; None when everything was answered."""
        if not self.unanswered:
            return None
        called = sum(r.items for r in self.records if r.usage != UsageStats())
        parts = ", ".join(f"{r.stage} {r.model_id} {r.usage.errors}" for r in self.records if r.usage.errors)
        down = "".join(f"; endpoint down: {line.split(';')[0]}" for line in self.down.values())
        every = "every backend call failed: " if self.unanswered >= called else ""
        return (f"run {self.run_id} {self.status}: {every}{self.unanswered} item(s) got no answer ({parts}){down}; "
                "rerun the same command to retry them")


def run(config: RunConfig, *, models: list[str] | None = None, stages: str | None = None,
        console: Console | None = None) -> str:
    """Run an evaluation and return its run id. Raises UserError on bad input or setup."""
    return execute(config, models=models, stages=stages, console=console).run_id


def execute(config: RunConfig, *, models: list[str] | None = None, stages: str | None = None,
            console: Console | None = None) -> RunResult:
    """Run an evaluation and say how it ended. Raises UserError on bad input or setup.

    The run holds its database's lock (``pipeline.store.runlock``) from before its row is written to the end; a
    second run on the same database raises UserError naming the first. Status: ``finished`` (every item answered),
    ``incomplete`` (some items got no answer: a call failed after its retries or its endpoint was down), ``failed``
    (an exception stopped it), ``interrupted`` (Ctrl-C; a run killed hard is shown so by readers, its lock being
    free, and recorded so by the next run).
    """
    console = console or make_console(stderr=True)
    dataset = load_dataset(config.dataset)
    queries = select_queries(dataset, config)
    if not queries:
        raise UserError(f"{config.dataset}: no queries selected (check languages/limit in the config)")
    wanted_stages = parse_stages(stages, config)
    evaluated_models = list(config.models)
    if models:
        known = {m.id for m in config.models}
        unknown = [m for m in models if m not in known]
        if unknown:
            raise UserError(f"--models: {unknown[0]} is not in the config's models ({', '.join(sorted(known))})")
        evaluated_models = [m for m in config.models if m.id in models]
    runnable = []
    for mc in evaluated_models:
        reason = unavailable_reason(mc)
        if reason:
            console.print(f"[yellow]warning:[/] skipping {mc.id}: {reason}")
        else:
            runnable.append(mc)
    answering = answering_roles(config, wanted_stages)  # checked above: one that cannot run here is skipped
    for role, mc in roles(config, wanted_stages):
        if role not in answering and (reason := unavailable_reason(mc)):
            raise UserError(f"{role} {mc.id}: {reason}")
    if reason := cannot_run(config, wanted_stages):
        raise UserError(reason)  # before the run starts: no generation is spent on a step that cannot finish
    if answering and not runnable:
        raise UserError("no model in the config can run here (see the warnings above)")

    lock = RunLock(config.db).acquire()  # one run at a time per database: a second one stops here, naming this one
    try:
        return _execute_locked(config, dataset, queries, wanted_stages, runnable, console, lock)
    finally:
        lock.release()


def _execute_locked(config: RunConfig, dataset: Dataset, queries: list[Query], wanted_stages: list[str],
                    runnable: list[ModelConfig], console: Console, lock: RunLock) -> RunResult:
    store = Store(config.db, catalog().schema)  # the store's tables and every step's own (Step.rows)
    check_identity(store, dataset)  # before the run row: a refused run leaves nothing behind
    run_id = store.start_run(name=config.name, kind="pipeline", dataset=dataset.name, config_json=config.to_json(),
                             config_hash=config.config_hash(), code_revision=code_revision(), model_files={})
    lock.claim(run_id)
    # we hold the lock, so a run still recorded as running was killed before it could say so
    for (stale,) in store.fetch("SELECT run_id FROM runs WHERE status = 'running' AND kind = 'pipeline' "
                                "AND run_id <> ?", [run_id]):
        store.update_run(stale, status="interrupted")
    save_dataset(store, dataset)
    progress = progress_bar(console)
    ctx = RunContext(config, store, dataset, queries, run_id, runnable, progress, console)
    status = "failed"
    try:
        with progress:
            asyncio.run(_run_stages(ctx, wanted_stages))
        status = "incomplete" if any(r.usage.errors for r in ctx.records) else "finished"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        totals = UsageStats()
        for r in ctx.records:
            totals.add(r.usage)
        model_files = {**ctx.released_provenance,
                       **{mid: m.backend.provenance() for mid, m in ctx.models_in_use().items()}}
        store.update_run(
            run_id, finished_at=now(), status=status, backend_calls=totals.backend_calls,
            cache_hits=totals.cache_hits, retries=totals.retries, errors=sum(r.errors for r in ctx.records),
            model_files=json.dumps(model_files, sort_keys=True),
            summary=[r.summary() for r in ctx.records],
        )
        for m in ctx.models_in_use().values():
            m.close()
    console.print(summary_table(ctx.records, f"run {run_id} ({config.name}) {status}"))
    result = RunResult(run_id, status, ctx.records, ctx.down)
    if line := result.closing_line():
        console.print(f"[bold red]{line}[/]", highlight=False, soft_wrap=True)
    return result


def check_identity(store: Store, dataset: Dataset) -> None:
    """Refuse in one line a dataset whose name is already in the database for another dataset. A results database
    keys a dataset by its folder's name, so two folders of one name would share one row and their answers; the
    stored one is this dataset when its content is the same (a folder moved or copied) or its stored path resolves
    to this folder (a dataset that changed: the KB's change is then followed, running.md)."""
    from pipeline.read.provenance import find_folder

    stored = store.fetch("SELECT path, content_hash FROM datasets WHERE name = ?", [dataset.name])
    if not stored:
        return
    path, content_hash = stored[0]
    if content_hash == dataset.content_hash():
        return
    here = dataset_folder(dataset.path)
    there = find_folder(path)
    if here is not None and there is not None and there == here.resolve():
        return
    raise UserError(f"{store.path}: dataset {dataset.name!r} in this database is another folder ({path}, other "
                    f"content) than {dataset.path}; their results would be mixed under one name: rename this folder "
                    "or use another --db")


def save_dataset(store: Store, dataset: Dataset) -> None:
    """Store the dataset's queries and chunks (upsert: reruns change nothing)."""
    store.write(dataset_rows(dataset))


def run_command(config_path: Path, *, db: Path | None, limit: int | None, models: list[str] | None,
                stages: str | None, dry_run: bool) -> int:
    """CLI entry of ``run``."""
    console = make_console(stderr=True)
    config = catalog().load_config(config_path, db=str(db) if db else None, limit=limit)
    if dry_run:
        dataset = load_dataset(config.dataset)
        return print_dry_run(config, dataset, select_queries(dataset, config), parse_stages(stages, config), console)
    return execute(config, models=models, stages=stages, console=console).exit_code
