"""The dry run's estimate: the calls, tokens and cost of what a run would do, before anything is spent.

Every LLM stage's pending work is its step's own ``pending`` (declared in its module, ``steps.spec.Step``): the same
requests (so the same cache keys) and the same rule for what is finished, read through this estimate's view of the
inputs (``steps.context.Inputs``). Then per stage and model:

- **calls** — the requests the stage would make, without its finished keys (*done before*); of them,
  those whose cache key the database already holds are *cached* (free); the others would be sent.
- **prompt tokens** (of the calls to send) — exact prompts counted with the model's own tokenizer where
  it can be loaded here (llama.cpp: the GGUF's vocabulary and chat template, ``Llama(vocab_only=True)``),
  else ≈ UTF-8 bytes / 4 + 3 per message (the chars/4 rule, by bytes so Indic scripts are not
  undercounted). A prompt that contains a response not generated yet (judge, critic, checker, grader,
  translator of responses, pairwise judge) is built with an empty response plus the generator's ``max_tokens``:
  an upper bound. Generation prompts are fully known once the query's chunks are; a query without a stored
  retrieval (for these settings) takes its ``kb_refs`` chunks as the stand-in, padded or cut to the
  number of chunks retrieval returns (padding: the KB's median-length chunks) — the dry run says so.
- **completion tokens** — ``max_tokens`` per call: an upper bound, as is the cost built from it (when no
  stand-in chunks make the prompts themselves an estimate).
- **cost** — $ per 1M tokens from the config's ``prices``; 0 for in-process models without a price,
  unknown (—) for API models without one (``pipeline.read.cost.cost_of``). vLLM models are not loaded
  in a dry run, so their cache is not checked (all their calls count as sent).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
from rich.console import Console
from rich.table import Table

from pipeline.catalog import catalog
from pipeline.config import ModelConfig, RunConfig
from pipeline.dataset import Chunk, Dataset, Query
from pipeline.models import backend_class, create_backend, is_exclusive, unavailable_reason
from pipeline.models.base import Backend, PromptTokens, cache_key
from pipeline.read.cost import cost_of
from pipeline.steps.context import Pending, ResponseItem
from pipeline.store import Store, text_hash


@dataclass
class Line:
    """One stage × model of the estimate."""

    stage: str
    model_id: str
    calls: int = 0  # requests left to make (finished keys excluded)
    done: int = 0  # finished keys, not repeated
    cached: int = 0  # served from the LLM cache
    prompt_tokens: int = 0  # of the calls to send
    completion_tokens: int = 0  # upper bound: max_tokens per call to send
    assumed: int = 0  # calls to send whose prompt holds a response not generated yet (assumed max_tokens long)
    counted_by: str = ""
    cost: float | None = None  # upper bound
    reasked: bool = False  # an unparsed output is asked again (``reask``)

    @property
    def to_send(self) -> int:
        return self.calls - self.cached


# -- the estimate ----------------------------------------------------------------------------------
class Estimate:
    """Tallies every stage's pending calls as the run would send them (see the module docstring):
    ``Estimate(config, dataset, queries, stages).run()`` fills ``lines`` and ``notes``; reads, never writes. It is
    the steps' ``Inputs``: what is stored, else what the run would have by then (stand-in chunks, responses not
    generated yet)."""

    def __init__(self, config: RunConfig, dataset: Dataset, queries: list[Query], stages: list[str]):
        self.config, self.dataset, self.queries, self.stages = config, dataset, queries, stages
        self._retrieves = any(catalog().steps[s].retrieves for s in stages)  # a stage that retrieves runs
        self.generator_models = list(config.models)
        self.store = Store(config.db)
        self._chunks: dict[bool, dict[str, tuple[list[Chunk], list[Chunk]]]] = {}
        self._generated: list[ResponseItem] | None = None  # with the generate stage: the responses it would leave
        self.lines: list[Line] = []
        self.notes: list[str] = []
        self._counters: dict[str, PromptTokens] = {}
        self._identities: dict[str, dict | None] = {}
        self._prices = {m: p.model_dump() for m, p in config.prices.items()}
        self.stand_ins: set[str] = set()  # queries whose chunks are the kb_refs stand-in

    def fetch(self, sql: str, params: list) -> list[tuple]:
        """Rows of the database (none when it does not exist yet, or is an older file without the table or column
        asked for); any other error is raised, not taken for "nothing finished"."""
        try:
            return self.store.fetch(sql, params)
        except (duckdb.CatalogException, duckdb.BinderException):  # an older file: nothing of it finished
            return []

    # -- model helpers --
    def identity(self, mc: ModelConfig) -> dict | None:
        """The model's cache identity, or None when its backend cannot be made here without loading it."""
        if mc.id not in self._identities:
            identity = None
            if unavailable_reason(mc) is None and not is_exclusive(mc):
                try:
                    backend = create_backend(mc)
                    identity = backend.cache_identity()
                    backend.close()
                except Exception:  # no identity: the cache is not checked
                    identity = None
            self._identities[mc.id] = identity
        return self._identities[mc.id]

    def tally(self, pending: Pending) -> list[str | None]:
        """Add one line for ``pending``; return per call the cached completion's text (None: it would be sent)."""
        mc, calls = pending.model, pending.calls
        line = Line(pending.stage, mc.id, calls=len(calls), done=pending.done, reasked=pending.unparsed is not None)
        identity = self.identity(mc)
        keys = [cache_key(identity, c.request) if identity is not None and not c.assumed else None for c in calls]
        wanted = sorted({k for k in keys if k})
        hits: dict[str, Any] = {}
        for start in range(0, len(wanted), 2000):
            try:
                hits.update(self.store.cache_get(wanted[start:start + 2000]))
            except duckdb.CatalogException:  # a file without a cache table hits nothing
                break
        if mc.id not in self._counters:
            self._counters[mc.id] = (backend_class(mc.provider) or Backend).prompt_tokens(mc)
        counter = self._counters[mc.id]
        llm = counter.method != "not an LLM"
        texts: list[str | None] = []
        for call, key in zip(calls, keys, strict=True):
            if key in hits:
                line.cached += 1
                texts.append(hits[key]["text"] or "")
                continue
            texts.append(None)
            if llm:
                line.prompt_tokens += counter.count(call.request.messages) + call.assumed
                line.completion_tokens += call.request.params.max_tokens
                line.assumed += call.assumed > 0
        line.counted_by = counter.method
        line.cost = cost_of(mc.id, self._prices, line.prompt_tokens, line.completion_tokens)
        if line.calls or line.done:
            self.lines.append(line)
        if pending.then is not None:
            self.tally(pending.then(texts))
        return texts

    # -- the inputs of the steps' pending work (steps.context.Inputs) --
    def responses(self) -> list[ResponseItem]:
        """The responses the scoring stages would see: those the generate stage would leave (stored, cached, or
        not generated yet), else the stored ones."""
        if self._generated is not None:
            return self._generated
        models = {m.id for m in self.config.models}
        selected = {q.query_id: q for q in self.queries}
        return [ResponseItem(selected[q], m, text, h) for q, m, text, h in self.fetch(
            "SELECT query_id, model_id, text, response_hash FROM responses WHERE dataset = ? AND error IS NULL "
            "AND text IS NOT NULL ORDER BY query_id, model_id", [self.dataset.name]) if q in selected and m in models]

    def chunks(self, queries: Sequence[Query] | None = None, *,
               fallback_to_refs: bool = False) -> dict[str, tuple[list[Chunk], list[Chunk]]]:
        """query_id → (raw, update) chunks as the run would use them (stored, else the kb_refs stand-in)."""
        if fallback_to_refs not in self._chunks:
            self._chunks[fallback_to_refs] = self._all_chunks(fallback_to_refs)
        every = self._chunks[fallback_to_refs]
        return every if queries is None else {q.query_id: every[q.query_id] for q in queries}

    def _all_chunks(self, fallback_to_refs: bool) -> dict[str, tuple[list[Chunk], list[Chunk]]]:
        if self.dataset.closed_book:
            return {q.query_id: ([], []) for q in self.queries}
        same = self._retrieves  # the run retrieves again what was stored under other settings or KB
        stored = {qid: (raw, upd) for qid, raw, upd in self.fetch(
            "SELECT query_id, raw_ids, update_ids FROM retrievals WHERE dataset = ? AND (NOT ? OR (settings = ? "
            "AND kb_hash IS NOT DISTINCT FROM ?))",
            [self.dataset.name, same, self.config.retrieval.model_dump_json(), self.dataset.kb_hash])}
        by_id = {c.chunk_id: c for c in self.dataset.chunks}
        out: dict[str, tuple[list[Chunk], list[Chunk]]] = {}
        for q in self.queries:
            raw, upd = stored.get(q.query_id, (None, None))
            if raw is not None and all(c in by_id for c in (*raw, *upd)):
                out[q.query_id] = ([by_id[c] for c in raw], [by_id[c] for c in upd])
                continue
            refs = [by_id[c] for c in q.kb_refs if c in by_id]
            if fallback_to_refs and not self._retrieves:  # what the sanity step itself does
                out[q.query_id] = ([c for c in refs if c.kind == "raw"], [c for c in refs if c.kind == "update"])
                continue
            self.stand_ins.add(q.query_id)
            out[q.query_id] = self._stand_in(refs)
        return out

    def _stand_in(self, refs: list[Chunk]) -> tuple[list[Chunk], list[Chunk]]:
        s = self.config.retrieval
        median = statistics.median(len(c.text) for c in self.dataset.chunks)
        typical = sorted(self.dataset.chunks, key=lambda c: (abs(len(c.text) - median), c.chunk_id))

        def pad(mine: list[Chunk], pool: list[Chunk], n: int) -> list[Chunk]:
            return (mine + [c for c in pool if c not in mine])[:n]

        if s.split == "separate":
            return (pad([c for c in refs if c.kind == "raw"], [c for c in typical if c.kind == "raw"], s.top_k),
                    pad([c for c in refs if c.kind == "update"], [c for c in typical if c.kind == "update"],
                        s.top_k_updates))
        picked = pad(refs, typical, s.top_k)
        return [c for c in picked if c.kind == "raw"], [c for c in picked if c.kind == "update"]

    # -- stages --
    def run(self) -> Estimate:
        catalog().prepare(self)  # as the run does first: machine renderings of earlier runs
        for stage in self.stages:
            step = catalog().steps[stage]
            if step.pending is None:  # no LLM calls
                continue
            tallied = [(p, self.tally(p)) for p in step.pending(self)]
            if step.answers:  # the later stages see the answers it would leave
                self._generated = self._left_by(tallied)
        kinds = Counter(q.variant.kind for q in self.queries if q.variant is not None)
        if kinds:
            each = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
            self.notes.append(f"{sum(kinds.values())} of the {len(self.queries)} queries are generated variants "
                              f"({each}), counted like any query; their originals' calls are cached when this "
                              "config has run the source dataset")
        if self.stand_ins:
            self.notes.append(f"{len(self.stand_ins)} queries have no stored retrieval for these settings: their "
                              "kb_refs chunks stand in, padded or cut to the retrieval's count with median-length "
                              "chunks")
        skipped = sorted(m for m, identity in self._identities.items() if identity is None)
        if skipped:
            more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
            self.notes.append(f"cache not checked for {', '.join(skipped[:3])}{more} (vLLM is not loaded in a dry "
                              "run; others are unavailable here): their calls all count as sent")
        return self

    def _left_by(self, generated: list[tuple[Pending, list[str | None]]]) -> list[ResponseItem]:
        """The responses after the generate stage: the stored ones it does not redo, then per call its cached text,
        else a response not generated yet (empty, assumed ``max_tokens`` long)."""
        redone = {c.key for p, _ in generated for c in p.calls}
        out = [it for it in self.responses() if it.key not in redone]
        for p, texts in generated:
            for call, text in zip(p.calls, texts, strict=True):
                query = call.item[0]
                out.append(ResponseItem(query, p.model.id, text, text_hash(text)) if text is not None
                           else ResponseItem(query, p.model.id, "", None, p.model.max_tokens))
        return sorted(out, key=lambda it: it.key)


def _money(value: float | None) -> str:
    return "—" if value is None else f"{value:,.4f}"


def estimate_table(est: Estimate) -> Table:
    table = Table(title="estimate before spending anything (≤: an upper bound)")
    for col in ("stage", "model", "calls", "done before", "cached", "to send", "prompt tokens",
                "completion tokens ≤", "cost $", "counted by"):
        table.add_column(col, justify="left" if col in ("stage", "model", "counted by") else "right", overflow="fold")
    for ln in est.lines:
        table.add_row(ln.stage, ln.model_id, *(f"{n:,}" for n in (ln.calls, ln.done, ln.cached, ln.to_send)),
                      f"{ln.prompt_tokens:,}" + (" ≤" if ln.assumed else ""), f"{ln.completion_tokens:,}",
                      _money(ln.cost), ln.counted_by)
    known = sum(ln.cost for ln in est.lines if ln.cost is not None)
    unknown = any(ln.cost is None for ln in est.lines)
    sums = (sum(getattr(ln, k) for ln in est.lines)
            for k in ("calls", "done", "cached", "to_send", "prompt_tokens", "completion_tokens"))
    table.add_row("total", "", *(f"{n:,}" for n in sums), _money(known) + (" + —" if unknown else ""), "",
                  style="bold")
    return table


def print_estimate(est: Estimate, console: Console) -> None:
    console.print(estimate_table(est))
    assumed = sum(ln.assumed for ln in est.lines)
    console.print("prompt tokens: the prompts the run would send, counted by the model's own tokenizer "
                  "('tokenizer') or ≈ UTF-8 bytes / 4 + 3 per message ('bytes/4')"
                  + (f"; {assumed:,} prompts (marked ≤) hold a response not generated yet, assumed max_tokens long"
                     if assumed else "")
                  + ". Completion tokens assume every call writes max_tokens (an upper bound); cost prices these "
                  "figures (an upper bound when no chunks stand in) at the config's prices ($ per 1M tokens); "
                  "in-process models cost 0; — = no price (left out of the total).", highlight=False)
    for note in est.notes:
        console.print(f"note: {note}", highlight=False)
