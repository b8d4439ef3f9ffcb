"""The dry run's estimate: the calls, tokens and cost of what a run would do, before anything is spent.

Every stage's requests are built with the stage's own functions (the same prompts, so the same cache
keys), then per stage and model:

- **calls** — the requests the stage would make, without its finished keys (*done before*); of them,
  those whose cache key the database already holds are *cached* (free); the others would be sent.
- **prompt tokens** (of the calls to send) — exact prompts counted with the model's own tokenizer where
  it can be loaded here (llama.cpp: the GGUF's vocabulary and chat template, ``Llama(vocab_only=True)``),
  else ≈ UTF-8 bytes / 4 + 3 per message (the chars/4 rule, by bytes so Indic scripts are not
  undercounted). A prompt that contains a response not generated yet (judge, critic, checker, grader,
  translator of responses) is built with an empty response plus the generator's ``max_tokens``: an
  upper bound. Generation prompts are fully known once the query's chunks are; a query without a stored
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from pipeline.config import ModelConfig, RunConfig
from pipeline.dataset import Chunk, Dataset, Query
from pipeline.models import backend_class, create_backend, is_exclusive, unavailable_reason
from pipeline.models.base import Backend, ChatRequest, GenerateParams, PromptTokens, cache_key
from pipeline.read.cost import cost_of
from pipeline.steps import generate, judge, medcode, translate
from pipeline.steps.context import ResponseItem
from pipeline.store import Store, text_hash

NO_LLM_OR_DONE = ("translate", "retrieve", "generate", "lexical", "safety")  # no LLM calls, or estimated first


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

    @property
    def to_send(self) -> int:
        return self.calls - self.cached


@dataclass
class Call:
    """A request to estimate; ``extra`` > 0 tokens stand for a response not generated yet (then the prompt is
    not known exactly, and its cache key cannot be checked)."""

    request: ChatRequest
    extra: int = 0

    @property
    def known(self) -> bool:
        return self.extra == 0


@dataclass
class Answer:
    """A response the scoring stages would see: its text, or None when it is not generated yet (then prompts
    that hold it assume it is its model's ``max_tokens`` long)."""

    query: Query
    model: ModelConfig
    text: str | None

    def item(self) -> ResponseItem:
        return ResponseItem(self.query, self.model.id, self.text or "", text_hash(self.text or ""))


# -- the estimate ----------------------------------------------------------------------------------
class Estimate:
    """Builds every stage's requests as the run would and tallies them (see the module docstring):
    ``Estimate(config, dataset, queries, stages).run()`` fills ``lines`` and ``notes``; reads, never writes."""

    def __init__(self, config: RunConfig, dataset: Dataset, queries: list[Query], stages: list[str]):
        self.config, self.dataset, self.queries, self.stages = config, dataset, queries, stages
        self.store = Store(config.db)
        self.lines: list[Line] = []
        self.notes: list[str] = []
        self._counters: dict[str, PromptTokens] = {}
        self._identities: dict[str, dict | None] = {}
        self._prices = {m: p.model_dump() for m, p in config.prices.items()}
        self.stand_ins: set[str] = set()  # queries whose chunks are the kb_refs stand-in

    def fetch(self, sql: str, params: list) -> list[tuple]:
        """Rows of the database (none when it does not exist yet or lacks the table)."""
        try:
            return self.store.fetch(sql, params)
        except Exception:  # an older file without the table has nothing finished
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

    def tally(self, stage: str, mc: ModelConfig, calls: Sequence[Call], done: int = 0) -> list[str | None]:
        """Add one line for ``calls``; return per call the cached completion's text (None: it would be sent)."""
        line = Line(stage, mc.id, calls=len(calls), done=done)
        identity = self.identity(mc)
        keys = [cache_key(identity, c.request) if identity is not None and c.known else None for c in calls]
        wanted = sorted({k for k in keys if k})
        hits: dict[str, Any] = {}
        for start in range(0, len(wanted), 2000):
            try:
                hits.update(self.store.cache_get(wanted[start:start + 2000]))
            except Exception:  # an unreadable cache hits nothing
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
                line.prompt_tokens += counter.count(call.request.messages) + call.extra
                line.completion_tokens += call.request.params.max_tokens
                line.assumed += not call.known
        line.counted_by = counter.method
        line.cost = cost_of(mc.id, self._prices, line.prompt_tokens, line.completion_tokens)
        if line.calls or line.done:
            self.lines.append(line)
        return texts

    # -- inputs --
    def chunks(self, *, fallback_to_refs: bool = False) -> dict[str, tuple[list[Chunk], list[Chunk]]]:
        """query_id → (raw, update) chunks as the run would use them (stored, else the kb_refs stand-in)."""
        if self.dataset.closed_book:
            return {q.query_id: ([], []) for q in self.queries}
        same = "retrieve" in self.stages  # the run retrieves again what was stored under other settings
        stored = {qid: (raw, upd) for qid, raw, upd in self.fetch(
            "SELECT query_id, raw_ids, update_ids FROM retrievals WHERE dataset = ? AND (NOT ? OR settings = ?)",
            [self.dataset.name, same, self.config.retrieval.model_dump_json()])}
        by_id = {c.chunk_id: c for c in self.dataset.chunks}
        out: dict[str, tuple[list[Chunk], list[Chunk]]] = {}
        for q in self.queries:
            raw, upd = stored.get(q.query_id, (None, None))
            if raw is not None and all(c in by_id for c in (*raw, *upd)):
                out[q.query_id] = ([by_id[c] for c in raw], [by_id[c] for c in upd])
                continue
            refs = [by_id[c] for c in q.kb_refs if c in by_id]
            if fallback_to_refs and "retrieve" not in self.stages:  # what the sanity step itself does
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
        chunks = self.chunks() if {"generate", "judge"} & set(self.stages) else {}
        if "translate" in self.stages and self.config.translator is not None:
            self._translate()
        answers = self._generate(chunks) if "generate" in self.stages else self._stored_answers()
        steps: dict[str, Callable[[], None]] = {
            "translate-responses": lambda: self._translate_responses(answers),
            "judge": lambda: self._judge(answers, chunks), "rubric": lambda: self._rubric(answers),
            "medcode": lambda: self._medcode(answers), "accuracy": lambda: self._accuracy(answers),
            "sanity": self._sanity}
        for stage in self.stages:
            if stage in steps:
                steps[stage]()
        if other := [s for s in self.stages if s not in steps and s not in NO_LLM_OR_DONE]:
            self.notes.append(f"not estimated: {', '.join(other)} (see the count of calls above)")
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

    def _translate(self) -> None:
        mc = self.config.translator
        stored = {(qid, h) for qid, h in self.fetch(
            "SELECT query_id, source_hash FROM translations WHERE dataset = ? AND model_id = ? AND error IS NULL",
            [self.dataset.name, translate.QUERY])}
        todo = [q for q in self.queries if translate.needs_translation(q)]
        left = [q for q in todo if (q.query_id, text_hash(q.query)) not in stored]
        self.tally("translate", mc, [Call(translate.translation_request(q.query, q.language)) for q in left],
                   done=len(todo) - len(left))

    def _generate(self, chunks) -> list[Answer]:
        stored = {(q, m): (h, t) for q, m, h, t in self.fetch(
            "SELECT query_id, model_id, prompt_hash, text FROM responses WHERE dataset = ? AND error IS NULL",
            [self.dataset.name])}
        answers: list[Answer] = []
        for mc in self.config.models:
            params = GenerateParams(max_tokens=mc.max_tokens, temperature=mc.temperature)
            mine, calls, done = [], [], 0
            for q in self.queries:
                if mc.languages and q.language not in mc.languages:
                    continue
                request = generate.build_request(q, *chunks[q.query_id], params, self.dataset)
                previous = stored.get((q.query_id, mc.id))
                if previous is not None and previous[0] == generate.prompt_hash(request.messages):
                    done += 1
                    answers.append(Answer(q, mc, previous[1]))
                else:
                    mine.append(q)
                    calls.append(Call(request))
            texts = self.tally("generate", mc, calls, done=done)
            answers += [Answer(q, mc, text) for q, text in zip(mine, texts, strict=True)]
        return answers

    def _stored_answers(self) -> list[Answer]:
        models = {m.id: m for m in self.config.models}
        selected = {q.query_id: q for q in self.queries}
        return [Answer(selected[q], models[m], text) for q, m, text in self.fetch(
            "SELECT query_id, model_id, text FROM responses WHERE dataset = ? AND error IS NULL AND text IS NOT NULL "
            "ORDER BY query_id, model_id", [self.dataset.name]) if q in selected and m in models]

    def _finished(self, sql: str, params: list) -> dict[tuple, tuple]:
        """Finished keys → response hash, from a query selecting the key columns, then the hash."""
        return {tuple(r[:-1]): r[-1] for r in self.fetch(sql, params)}

    def _scored(self, stage: str, mc: ModelConfig, answers: list[Answer],
                calls_of: Callable[[Answer], list[tuple[tuple, ChatRequest]]], done: dict[tuple, Any],
                is_current: Callable[[Answer, tuple, Any], bool] | None = None) -> list[tuple[Answer, str | None]]:
        """Tally a scoring stage: per answer its calls ((key, request)); a key finished for the answer's current
        text is done. Returns (answer, cached text or None) per call to make."""
        is_current = is_current or (lambda a, key, d: d == text_hash(a.text))
        calls, owners, n_done = [], [], 0
        for a in answers:
            for key, request in calls_of(a):
                if a.text is not None and key in done and is_current(a, key, done[key]):
                    n_done += 1
                    continue
                calls.append(Call(request, extra=0 if a.text is not None else a.model.max_tokens))
                owners.append(a)
        return list(zip(owners, self.tally(stage, mc, calls, done=n_done), strict=True))

    def _translate_responses(self, answers: list[Answer]) -> None:
        mc = self.config.translator
        done = self._finished("SELECT query_id, model_id, source_hash FROM translations WHERE dataset = ? AND "
                              "translator_id = ? AND model_id <> ?", [self.dataset.name, mc.id, translate.QUERY])
        self._scored("translate-responses", mc, [a for a in answers if a.query.language != "en"],
                     lambda a: [((a.query.query_id, a.model.id), translate.translation_request(
                         a.text or "", a.query.language, of="response"))], done)

    def _judge(self, answers: list[Answer], chunks) -> None:
        for jc in self.config.judges:
            done = self._finished("SELECT query_id, model_id, metric, sample, response_hash FROM judgments "
                                  "WHERE dataset = ? AND judge_id = ?", [self.dataset.name, jc.id])

            def calls_of(a: Answer, jc=jc) -> list[tuple[tuple, ChatRequest]]:
                return [((a.query.query_id, a.model.id, c.metric, c.sample), c.request) for c in judge.judge_calls(
                    a.query, a.text or "", *chunks[a.query.query_id], metrics=jc.metrics, samples=jc.samples,
                    temperature=jc.temperature, max_tokens=jc.max_tokens, prompts=self.dataset.prompt_text)]

            self._scored("judge", self.config.model_config_for(jc.id), answers, calls_of, done)

    def _rubric(self, answers: list[Answer]) -> None:
        from pipeline.steps import rubric

        gc = self.config.rubric_grader  # the stage runs only with a grader configured
        done = {tuple(r[:3]): tuple(r[3:]) for r in self.fetch(
            "SELECT query_id, model_id, criterion_index, response_hash, criterion, points, tags FROM rubric_grades "
            "WHERE dataset = ? AND grader_id = ?", [self.dataset.name, gc.id])}

        def calls_of(a: Answer) -> list[tuple[tuple, ChatRequest]]:
            return [(c.key, c.request) for c in rubric.grade_calls(
                [a.item()], max_tokens=gc.max_tokens, temperature=gc.temperature, prompts=self.dataset.prompt_text)]

        def is_current(a: Answer, key: tuple, d: tuple) -> bool:
            c = a.query.rubric[key[2]]
            return d == (text_hash(a.text), c.criterion, c.points, list(c.tags))

        self._scored("rubric", gc, [a for a in answers if a.query.rubric], calls_of, done, is_current)

    def _medcode(self, answers: list[Answer]) -> None:
        mc = self.config.medcode
        critic = mc.critic if isinstance(mc.critic, ModelConfig) else self.config.model_config_for(mc.critic)
        max_tokens = min(critic.max_tokens, medcode.CRITIQUE_MAX_TOKENS)
        try:
            wanted = medcode.classifier_tag(mc.classifier)
        except Exception:  # no checkpoint yet: nothing counts as finished
            wanted = None
        done = {(q, m): (h, tag) for q, m, h, tag in self.fetch(
            "SELECT query_id, model_id, response_hash, classifier FROM critiques WHERE dataset = ? AND critic_id = ?",
            [self.dataset.name, critic.id])}

        def is_current(a: Answer, key: tuple, d: tuple) -> bool:
            same = wanted is not None and (d[1] == wanted or (wanted == "logprobs" and d[1].startswith("logprobs")))
            return d[0] == text_hash(a.text) and same

        critiques = self._scored(
            "medcode-critique", critic, answers,
            lambda a: [((a.query.query_id, a.model.id), medcode.critique_request(a.query, a.text or "", max_tokens))],
            done, is_current)
        if mc.classifier == "logprobs":
            calls = [Call(medcode.classify_request(text.strip())) if text is not None
                     else Call(medcode.classify_request(""), extra=max_tokens) for _, text in critiques]
            self.tally("medcode-classify", critic, calls)

    def _accuracy(self, answers: list[Answer]) -> None:
        from pipeline.steps import accuracy

        mc = self.config.llm_accuracy
        if mc is None:
            return
        done = self._finished("SELECT query_id, model_id, response_hash FROM answer_checks WHERE dataset = ? AND "
                              "method = 'llm' AND checker_id = ?", [self.dataset.name, mc.id])
        params = GenerateParams(max_tokens=mc.max_tokens, temperature=0.0, json_schema=accuracy.SCHEMA)
        self._scored("llm-accuracy", mc, answers, lambda a: [
            ((a.query.query_id, a.model.id), ChatRequest(messages=accuracy.accuracy_messages(a.item()),
                                                         params=params))], done)

    def _sanity(self) -> None:
        from pipeline.steps import sanity

        chunks = self.chunks(fallback_to_refs=True)
        for jc in self.config.judges:
            queries = sanity.spread_across_languages(self.queries, jc.sanity_items)
            done = {tuple(r) for r in self.fetch("SELECT query_id, metric, variant, sample FROM judge_sanity "
                                                 "WHERE dataset = ? AND judge_id = ?", [self.dataset.name, jc.id])}
            calls, n_done = [], 0
            for q in queries:
                for variant, _, text in sanity.sanity_variants(q, self.dataset):
                    for c in judge.judge_calls(q, text, *chunks[q.query_id], metrics=jc.metrics, samples=jc.samples,
                                               temperature=jc.temperature, max_tokens=jc.max_tokens,
                                               prompts=self.dataset.prompt_text):
                        if (q.query_id, c.metric, variant, c.sample) in done:
                            n_done += 1
                        else:
                            calls.append(Call(c.request))
            self.tally("sanity", self.config.model_config_for(jc.id), calls, done=n_done)


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
