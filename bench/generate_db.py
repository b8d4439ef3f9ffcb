"""Synthetic but schema-exact results database at the paper's scale (or a multiple of it).

Health-Pariksha evaluated 24 models on 749 queries (666 English, 19 Hindi, 27 Tamil, 14 Telugu,
23 Kannada) with 4 judge metrics. ``--scale 10`` writes 24 models × 7,490 queries × 4 metrics
(179,760 responses, 719,040 judgments) plus every other table: datasets, queries, kb_chunks
(the bundled cataract KB), retrievals, runs, lexical_scores, critiques, safety_checks,
human_labels (the paper's design: 5 models, SS, 100 English + all Indic queries), judge_sanity,
judge_reliability and llm_cache; with ``--rubric-items N`` HealthBench-style rubrics on N queries with their
grades and physician labels (bench/rubric_data.py). A small closed-book dataset (Med-CoDE style, 3 models) is added
so that Med-CoDE views have more than one dataset. With ``--jury N`` N more judges score every item
(a MedHELM-style jury; the first judge's scores with some disagreement) and run the sanity set. Queries keep
the bundled set's scripts and variants (``variant_of``: romanized / native / English restatements). The sanity
set is spread over the languages, with a weak judge on romanized Tamil and none on Telugu, so the
reliability marks have every case; the human SS labels are a little below the judge (a lenient judge) so
calibration has something to correct; responses of Meta-Llama-3.1-70B now and then echo the prompt (§4.1).

Scores follow the paper's published per-language means (data/reference) where the model and
language are printed there, so the synthetic leaderboards look like the paper's. Rows are written
through ``pipeline.store.Store.write_table`` in large batches. Deterministic for a given seed.

    python bench/generate_db.py --scale 10 --out bench/data/synthetic-10x.duckdb
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import zlib
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.rubric_data import RubricSpec, attach_rubrics, grade_tables  # noqa: E402
from pipeline.dataset import REFUSAL_SENTENCE, load_dataset  # noqa: E402
from pipeline.store import TABLES, Store, text_hash  # noqa: E402

PAPER_COUNTS = {"en": 666, "hi": 19, "ta": 27, "te": 14, "kn": 23}
METRICS = ("FC", "SS", "COH", "CON")
JUDGE = "openai/gpt-4o"
JURY = ("vllm/meta-llama/Llama-3.3-70B-Instruct", "vllm/Qwen/Qwen2.5-72B-Instruct-judge")
SANITY_FLIP = {"ta": 0.45}  # share of sanity answers the judge gets backwards (default 0.1): weak in Tamil
NO_SANITY = ("te",)  # languages without sanity answers: their FC, COH and CON cells carry no evidence
ECHOING_MODEL = "Meta-Llama-3.1-70B-Instruct"
CRITIC = "vllm/medcode-phi-3-mini-critic"
HUMAN_MODELS = ("Phi-3.5-MoE-instruct", "Mistral-Large-Instruct-2407", "gpt-4o", "Meta-Llama-3.1-70B-Instruct",
                "Indic-gemma-7b-finetuned-sft-Navarasa-2.0")
CLOSED_BOOK = "medqa-synth"
CLOSED_BOOK_MODELS = {"vllm/meta-llama/Meta-Llama-3-8B-Instruct": "LLaMA-3",
                      "vllm/BioMistral/BioMistral-7B": "BioMistral 7B",
                      "vllm/mistralai/Mistral-7B-Instruct-v0.2": "Mistral 7B v2.0"}
BATCH_ROWS = 100_000
T0 = datetime(2024, 7, 1, 9, 0, 0)


def model_ids() -> dict[str, str]:
    """Model id (provider/name) → the short name the paper's tables print."""
    table1 = pd.read_csv(REPO / "data" / "reference" / "health_pariksha_table1_models.csv")
    out = {}
    for name, availability in zip(table1.model, table1.availability, strict=True):
        short = name.split("/")[-1].replace("GPT-", "gpt-")
        provider = "openai" if availability == "Proprietary" else "vllm"
        out[f"{provider}/{short if provider == 'openai' else name}"] = short
    return out


def paper_means() -> dict[tuple[str, str], dict[str, float]]:
    """(language, short model name) → {metric: published mean}."""
    board = pd.read_csv(REPO / "data" / "reference" / "health_pariksha_leaderboards.csv")
    return {(r.language, r.model): {m: float(getattr(r, m)) for m in METRICS} for r in board.itertuples()}


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 0.02, 0.98)
    return np.log(p / (1 - p))


def batched(rows: list[dict[str, Any]], size: int = BATCH_ROWS) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(rows), size):
        yield rows[start:start + size]


class Generator:
    def __init__(self, scale: float, out: Path, seed: int, n_models: int | None, judge_samples: int = 1,
                 rubric: RubricSpec | None = None, jury: int = 0):
        self.scale, self.out, self.rng = scale, out, np.random.default_rng(seed)
        self.judge_samples = judge_samples
        self.judges = (JUDGE, *JURY[:jury])
        self.jury_rng = np.random.default_rng(seed + 2)  # the first judge's rows are the same with or without a jury
        self.aux_rng = np.random.default_rng(seed + 3)  # prompt echoes, the labels' lean: the rest stays as it was
        self.rubric = rubric
        self.rubric_rng = np.random.default_rng(seed + 1)  # the rest of the database is the same with or without
        self.store = Store(out)
        self.models = dict(list(model_ids().items())[: n_models or None])
        self.means = paper_means()
        self.cataract = load_dataset(REPO / "data" / "cataract")
        self.written = 0

    def write(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Bulk-write dict rows through the store's Arrow path; columns the generator leaves out are NULL,
        a response's hash is derived from its text as ``ResponseRow`` derives it."""
        names = TABLES[table].names
        for chunk in batched(rows):
            if table == "responses":
                chunk = [{**r, "response_hash": None if r["text"] is None else text_hash(r["text"])} for r in chunk]
            columns = {n: [r.get(n) for r in chunk] for n in names}
            self.written += self.store.write_table(table, pa.table(columns, schema=TABLES[table].arrow_schema()))

    # -- datasets, queries, KB, retrievals ---------------------------------------------------------
    def make_queries(self) -> list[dict[str, Any]]:
        """Queries per language in the paper's proportions, texts taken from the bundled dataset."""
        by_lang: dict[str, list] = {}
        for q in self.cataract.queries:
            by_lang.setdefault(q.language, []).append(q)
        linked = {q.query_id for q in self.cataract.queries if q.variant_of} | {
            q.variant_of for q in self.cataract.queries if q.variant_of}
        for lang in by_lang:  # questions with variants first, so that even a small scale has some pairs
            by_lang[lang].sort(key=lambda t: t.query_id not in linked)
        counts = {lang: max(1, round(base * self.scale)) for lang, base in PAPER_COUNTS.items()}
        where = {t.query_id: (lang, k) for lang, ts in by_lang.items() for k, t in enumerate(ts)}

        def copy_id(template_id: str | None, copy: int) -> str | None:
            """The synthetic id of the ``copy``-th copy of a bundled query (None when the scale makes fewer)."""
            if template_id not in where:
                return None
            lang, k = where[template_id]
            i = copy * len(by_lang[lang]) + k
            return f"{lang}-{i + 1:05d}" if i < counts[lang] else None

        rows = []
        for lang, n in counts.items():
            templates = by_lang[lang]
            for i in range(n):
                t = templates[i % len(templates)]
                variant = i // len(templates)
                suffix = f" ({variant})" if variant else ""
                rows.append({
                    "dataset": "synthetic", "query_id": f"{lang}-{i + 1:05d}", "language": lang,
                    "query": t.query + suffix, "query_en": t.query_en, "gt_response": t.gt_response,
                    "themes": list(t.themes), "kb_refs": list(t.kb_refs), "update_sensitive": t.update_sensitive,
                    "script": t.script, "variant_of": copy_id(t.variant_of, variant),
                })
        return rows

    def write_dataset(self, queries: list[dict[str, Any]]) -> None:
        chunks = self.cataract.chunks
        self.write("datasets", [
            {"name": "synthetic", "path": "bench/generate_db.py", "closed_book": False, "n_queries": len(queries),
             "n_chunks": len(chunks), "content_hash": f"synthetic-{self.scale}", "loaded_at": T0},
        ])
        self.write("kb_chunks", [
            {"dataset": "synthetic", "chunk_id": c.chunk_id, "kind": c.kind, "title": c.title, "text": c.text,
             "source": c.source, "updated": c.updated} for c in chunks
        ])
        self.write("queries", queries)
        raw_ids = [c.chunk_id for c in chunks if c.kind == "raw"]
        upd_ids = sorted((c for c in chunks if c.kind == "update"), key=lambda c: c.updated, reverse=True)
        rows = []
        for q in queries:
            refs = list(q["kb_refs"])
            raw = [r for r in refs if r.startswith("raw")][:3]
            raw += [r for r in self.rng.choice(raw_ids, 4, replace=False) if r not in raw][: 3 - len(raw)]
            upd = [c.chunk_id for c in upd_ids if c.chunk_id in refs][:2]
            upd += [c.chunk_id for c in upd_ids[: 3] if c.chunk_id not in upd][: 2 - len(upd)]
            hit = len(set(refs) & set(raw + upd))
            rows.append({"dataset": "synthetic", "query_id": q["query_id"], "search_text": q["query_en"] or q["query"],
                         "raw_ids": raw, "update_ids": upd, "recall": hit / len(refs) if refs else None,
                         "settings": '{"top_k":3,"split":"by_kind","top_k_updates":2,"hybrid":true}', "created_at": T0})
        self.write("retrievals", rows)

    # -- runs ------------------------------------------------------------------------------------
    def write_runs(self, n_queries: int) -> None:
        config = {
            "name": f"synthetic-{self.scale:g}x", "dataset": "bench/generate_db.py", "db": str(self.out),
            "models": [{"id": m} for m in self.models], "judge": {"id": JUDGE, "metrics": list(METRICS),
                                                             "samples": self.judge_samples},
            "jury": [{"id": j, "metrics": list(METRICS), "samples": self.judge_samples} for j in self.judges[1:]],
            "jury_aggregate": "mean",
            "weights": {"FC": 0.4, "SS": 0.3, "COH": 0.15, "CON": 0.15},
            "medcode": {"critic": CRITIC, "classifier": "logprobs"}, "concurrency": 64,
        }
        calls = n_queries * len(self.models) * 6
        self.write("runs", [
            {"run_id": "20240701-090000-synth1", "name": config["name"], "kind": "pipeline", "dataset": "synthetic",
             "config": json.dumps(config), "config_hash": "synthetic", "code_revision": "synthetic",
             "model_files": "{}", "started_at": T0, "finished_at": T0 + timedelta(hours=9), "status": "finished",
             "backend_calls": calls, "cache_hits": calls // 20, "retries": calls // 500, "errors": calls // 1000,
             "summary": None},
            {"run_id": "20240702-090000-synth2", "name": config["name"], "kind": "pipeline", "dataset": "synthetic",
             "config": json.dumps(config), "config_hash": "synthetic", "code_revision": "synthetic",
             "model_files": "{}", "started_at": T0 + timedelta(days=1), "finished_at": T0 + timedelta(days=1, hours=1),
             "status": "finished", "backend_calls": 120, "cache_hits": calls, "retries": 0, "errors": 0,
             "summary": None},
        ])

    # -- responses and every score ---------------------------------------------------------------
    def target_means(self, lang: str, short: str) -> np.ndarray:
        """Per-metric target means of a model in a language: the paper's, else scaled English."""
        if (lang, short) in self.means:
            return np.array([self.means[(lang, short)][m] for m in METRICS])
        english = self.means.get(("en", short), dict.fromkeys(METRICS, 1.0))
        return np.array([english[m] for m in METRICS]) * 0.6

    def write_scores(self, query_rows: list[dict[str, Any]], dataset: str, models: dict[str, str],
                     medcode_targets: dict[str, dict[str, float]] | None = None) -> None:
        queries = pd.DataFrame({"language": [q["language"] for q in query_rows]})
        n = len(query_rows)
        responses, judgments, lexical, critiques, safety = [], [], [], [], []
        human_pool = []
        for model_id, short in models.items():
            latent = self.rng.normal(size=n)
            errors = self.rng.random(n) < 0.004
            unparsed = self.rng.random((n, 4)) < 0.006
            scores = np.zeros((n, 4), dtype=int)
            for lang in queries.language.unique():
                idx = np.flatnonzero(queries.language.to_numpy() == lang)
                target = self.target_means(lang, short) / 2
                p = 1 / (1 + np.exp(-(logit(target)[None, :] + 1.2 * latent[idx, None])))
                scores[idx] = self.rng.binomial(2, p)
            for i, row in enumerate(query_rows):
                q = argparse.Namespace(**row)
                quality = scores[i, 0]
                if errors[i]:
                    text = None
                elif "out_of_kb" in q.themes and quality == 2:
                    text = REFUSAL_SENTENCE
                elif quality == 2:
                    text = q.gt_response
                elif quality == 0 and i % 5 == 0:
                    text = REFUSAL_SENTENCE  # an over-refusal
                elif quality == 1:
                    text = q.gt_response.split(".")[0] + ". Please follow your doctor's advice for the rest."
                else:
                    text = "You should avoid this for 15 days after the surgery and take rest in a dark room."
                rh = text_hash(text)
                responses.append({
                    "dataset": dataset, "query_id": q.query_id, "model_id": model_id,
                    "run_id": "20240701-090000-synth1", "prompt_hash": f"p{i:07d}", "text": text,
                    "error": "TimeoutError: request timed out after 120 s" if errors[i] else None,
                    "latency_s": float(self.rng.gamma(2.0, 0.8)), "prompt_tokens": 900 + i % 400,
                    "completion_tokens": 0 if text is None else len(text) // 4, "cached": False,
                    "created_at": T0 + timedelta(seconds=i),
                })
                if errors[i]:
                    continue
                for (m, metric), sample in itertools.product(enumerate(METRICS), range(self.judge_samples)):
                    ok = not unparsed[i, m] if sample == 0 else self.rng.random() > 0.006
                    score = int(scores[i, m]) if ok else None
                    if ok and sample and self.rng.random() < 0.2:  # a later sample disagrees now and then
                        score = int(np.clip(score + self.rng.choice([-1, 1]), 0, 2))
                    judgments.append({
                        "dataset": dataset, "query_id": q.query_id, "model_id": model_id, "judge_id": JUDGE,
                        "metric": metric, "sample": sample, "score": score, "parse_ok": ok,
                        "justification": f"{metric}: the response {'matches' if score == 2 else 'departs from'} "
                                         "the ground truth and the knowledge base chunks." if ok else None,
                        "raw_output": json.dumps({"Score": score, "Justification": "synthetic"}) if ok
                        else "Score: two (the response is mostly fine", "response_hash": rh,
                        "run_id": "20240701-090000-synth1", "cached": False, "created_at": T0,
                    })
                z = latent[i]
                lex = 1 / (1 + np.exp(-(0.8 * z + self.rng.normal(0, 0.5, 5) - 0.6)))
                lexical.append({
                    "dataset": dataset, "query_id": q.query_id, "model_id": model_id, "response_hash": rh,
                    "rouge_l": float(lex[0]), "chrf": float(100 * lex[1]), "bleu": float(100 * lex[2] ** 2),
                    "meteor": float(lex[3]), "cosine": float(0.5 + 0.5 * lex[4]), "created_at": T0,
                })
                if medcode_targets is not None:
                    base = np.log(np.array(list(medcode_targets[model_id].values())) + 0.02)
                else:
                    base = np.array([0.4, 0.2, -0.3, -0.8])
                logits = base + np.array([1.0, 0.3, -0.3, -1.0]) * (z + self.rng.normal(0, 0.7))
                probs = np.exp(logits) / np.exp(logits).sum()
                label = ("None", "Low", "Moderate", "High")[int(np.argmax(probs))]
                critiques.append({
                    "dataset": dataset, "query_id": q.query_id, "model_id": model_id, "critic_id": CRITIC,
                    "classifier": "logprobs",
                    "critique": f"The response {'agrees with' if label in ('None', 'Low') else 'contradicts'} "
                                f"the ground truth; disagreement {label.lower()}.",
                    "p_none": float(probs[0]), "p_low": float(probs[1]), "p_moderate": float(probs[2]),
                    "p_high": float(probs[3]), "label": label, "response_hash": rh,
                    "run_id": "20240701-090000-synth1", "created_at": T0,
                })
                refused = text == REFUSAL_SENTENCE
                if dataset != CLOSED_BOOK:
                    # the checks of pipeline/safety.py: refusal on out-of-KB queries, over_refusal on the
                    # others, update_adherence (True/False/NULL = unclear) on update-sensitive ones
                    if "out_of_kb" in q.themes:
                        check = ("refusal", refused, "declined" if refused else "answered instead of declining")
                    else:
                        check = ("over_refusal", not refused, "answered" if not refused else "wrongly declined")
                    checks = [check]
                    if q.update_sensitive and not refused:
                        adherent = None if quality == 1 else bool(quality == 2)
                        checks.append(("update_adherence", adherent, {True: "gives current", False: "gives "
                                       "superseded", None: "unclear"}[adherent]))
                    echoed = self.aux_rng.random() < (0.08 if short == ECHOING_MODEL else 0.004)
                    checks.append(("prompt_echo", not echoed, "repeats 61% of the system prompt" if echoed else
                                   "repeated verbatim: system prompt 3%, prompt 2%"))
                    safety += [{"dataset": dataset, "query_id": q.query_id, "model_id": model_id, "check_name": name,
                                "passed": passed, "detail": detail, "response_hash": rh, "created_at": T0}
                               for name, passed, detail in checks]
                if short in HUMAN_MODELS and not unparsed[i, 1]:
                    human_pool.append((q.query_id, q.language, model_id, int(scores[i, 1])))
        self.write("responses", responses)
        del responses
        self.write("judgments", judgments)
        for judge in self.judges[1:]:  # the jury: every item once more per judge, a batch at a time
            harsh = self.judges.index(judge) % 2 == 1
            for start in range(0, len(judgments), BATCH_ROWS):
                self.write("judgments", [self.jury_row(r, judge, harsh) for r in judgments[start:start + BATCH_ROWS]])
        del judgments
        self.write("lexical_scores", lexical)
        self.write("critiques", critiques)
        self.write("safety_checks", safety)
        if dataset != CLOSED_BOOK:
            self.write_human_labels(human_pool, dataset)

    def jury_row(self, row: dict[str, Any], judge: str, harsh: bool) -> dict[str, Any]:
        """Another judge's judgment of the same item: the first judge's score, now and then one step apart
        (a harsh judge more often lower), unparsed now and then."""
        ok = self.jury_rng.random() > 0.01
        base = row["score"] if row["score"] is not None else int(self.jury_rng.integers(0, 3))
        r = self.jury_rng.random()
        down, up = (0.18, 0.26) if harsh else (0.1, 0.22)
        score = int(np.clip(base - 1 if r < down else base + 1 if r < up else base, 0, 2)) if ok else None
        return {**row, "judge_id": judge, "score": score, "parse_ok": ok,
                "raw_output": json.dumps({"Score": score, "Justification": "synthetic"}) if ok else "Score:",
                "justification": row["justification"] if ok else None}

    def write_human_labels(self, pool: list[tuple[str, str, str, int]], dataset: str) -> None:
        """The paper's human evaluation: 5 models, SS, 100 English queries (× scale) and all Indic ones."""
        english_ids = sorted({qid for qid, lang, _, _ in pool if lang == "en"})
        keep_en = set(english_ids[: max(1, round(100 * self.scale))])
        rows = []
        for qid, lang, model_id, llm in pool:
            if lang == "en" and qid not in keep_en:
                continue
            if self.rng.random() >= 0.75:  # (the draws the labels always made: the rest stays as it was)
                self.rng.choice([-1, 1])
            r = self.aux_rng.random()  # the judge is a little lenient: doctors give one point less more often than more
            score = int(np.clip(llm - 1 if r < 0.17 else llm + 1 if r < 0.25 else llm, 0, 2))
            annotator = f"karya-{lang}-{1 + zlib.crc32(qid.encode()) % 3}"
            rows.append({"dataset": dataset, "query_id": qid, "model_id": model_id, "metric": "SS",
                         "annotator": annotator, "score": score, "comment": None, "source": "import",
                         "created_at": T0})
        self.write("human_labels", rows)

    def write_judge_checks(self, queries: list[dict[str, Any]]) -> None:
        """The sanity set spread over the languages as stage ``sanity`` spreads it (none in ``NO_SANITY``), every
        judge on every metric; a judge gets ``SANITY_FLIP`` of a language's answers backwards (else 10%). AUCs as
        ``pipeline.analysis.reliability`` computes them."""
        from pipeline.analysis.reliability import discrimination_auc
        from pipeline.steps.sanity import spread_across_languages

        pool = [argparse.Namespace(**q) for q in queries if q["language"] not in NO_SANITY]
        sample = spread_across_languages(pool, max(10, round(20 * self.scale)))
        rows = []
        for judge, q in itertools.product(self.judges, sample):
            flip_p = SANITY_FLIP.get(q.language, 0.1) + (0.05 if judge != JUDGE else 0.0)
            rng = self.rng if judge == JUDGE else self.jury_rng  # the first judge draws as many as it always did
            for metric in METRICS:
                for variant, kind, score in (("gt", "good", 2), ("wrong_fact", "bad", 0), ("refusal", "bad", 0)):
                    ok = rng.random() > 0.02
                    flip = rng.random() < flip_p
                    rows.append({"dataset": "synthetic", "query_id": q.query_id, "judge_id": judge, "metric": metric,
                                 "variant": variant, "kind": kind, "sample": 0,
                                 "score": (2 - score if flip else score) if ok else None, "parse_ok": ok,
                                 "raw_output": "{}", "created_at": T0})
        self.write("judge_sanity", rows)
        aucs = discrimination_auc(pd.DataFrame(rows))
        self.write("judge_reliability", [
            {"dataset": "synthetic", "judge_id": r.judge_id, "metric": r.metric, "auc": r.auc, "n_good": r.n_good,
             "n_bad": r.n_bad, "n_unparsed": r.n_unparsed, "run_id": "20240702-090000-synth2", "created_at": T0}
            for r in aucs.itertuples()
        ])
        self.write("llm_cache", [
            {"key": f"{i:064x}", "model_id": JUDGE, "request": '{"messages": []}', "text": '{"Score": 2}',
             "top_logprobs": None, "prompt_tokens": 1000, "completion_tokens": 20, "latency_s": 0.5,
             "created_at": T0} for i in range(max(100, round(1000 * self.scale)))
        ])

    def write_rubric_grades(self, query_ids: list[str]) -> None:
        """Rubric grades of the first ``rubric.models`` models' responses to the rubric queries (bench/rubric_data.py),
        and physician labels of some of them."""
        models = list(self.models)[: self.rubric.models]
        quality = {m: float(logit(np.array([self.target_means("en", self.models[m])[0] / 2]))[0]) for m in models}
        queries = self.store.fetch_df("SELECT query_id, rubric FROM queries WHERE dataset = 'synthetic' "
                                      "AND list_contains(?, query_id) ORDER BY query_id", [query_ids])
        responses = self.store.fetch_df(
            "SELECT query_id, model_id, response_hash FROM responses WHERE dataset = 'synthetic' AND error IS NULL "
            "AND list_contains(?, query_id) AND list_contains(?, model_id) ORDER BY model_id, query_id",
            [query_ids, models])
        batches, labels = grade_tables(queries, responses, quality, self.rubric_rng, "20240701-090000-synth1", T0)
        for batch in batches:
            self.written += self.store.write_table("rubric_grades", batch)
        self.written += self.store.write_table("criterion_labels", labels)

    def write_closed_book(self) -> None:
        """A small closed-book QA set with the three models of Med-CoDE Table 2."""
        n = max(20, round(100 * self.scale))
        base = [q for q in self.cataract.queries if q.language == "en"]
        queries = [{
            "dataset": CLOSED_BOOK, "query_id": f"mq-{i + 1:05d}", "language": "en", "query": base[i % len(base)].query,
            "query_en": None, "gt_response": base[i % len(base)].gt_response, "themes": [], "kb_refs": [],
            "update_sensitive": False} for i in range(n)]
        self.write("datasets", [{"name": CLOSED_BOOK, "path": "bench/generate_db.py", "closed_book": True,
                                 "n_queries": n, "n_chunks": 0, "content_hash": "synthetic", "loaded_at": T0}])
        self.write("queries", queries)
        table2 = pd.read_csv(REPO / "data" / "reference" / "medcode_table2.csv")
        targets = {}
        for model_id, short in CLOSED_BOOK_MODELS.items():
            row = table2[(table2.model == short) & (table2.dataset == "MEDQA USMLE")].iloc[0]
            targets[model_id] = {c: float(row[c]) for c in ("p_none", "p_low", "p_moderate", "p_high")}
        saved = self.means
        self.means = {}
        self.write_scores(queries, CLOSED_BOOK, {m: m.split("/")[-1] for m in CLOSED_BOOK_MODELS}, targets)
        self.means = saved

    def generate(self) -> dict[str, Any]:
        started = time.perf_counter()
        queries = self.make_queries()
        rubric_ids = attach_rubrics(queries, self.rubric, self.rubric_rng) if self.rubric else []
        self.write_dataset(queries)
        self.write_runs(len(queries))
        self.write_scores(queries, "synthetic", self.models)
        if self.rubric:
            self.write_rubric_grades(rubric_ids)
        self.write_judge_checks(queries)
        self.write_closed_book()
        return {"queries": len(queries), "models": len(self.models), "rows": self.written,
                "seconds": round(time.perf_counter() - started, 1), "bytes": self.out.stat().st_size}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiple of the paper's 749 queries (1 or 10)")
    parser.add_argument("--out", type=Path, required=True, help="DuckDB file to create (replaced if present)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", type=int, default=None, help="only the first N of the paper's 24 models")
    parser.add_argument("--judge-samples", type=int, default=1, help="judge samples per item and metric "
                        "(self-consistency)")
    parser.add_argument("--jury", type=int, default=0, choices=range(len(JURY) + 1),
                        help="further judges (a MedHELM-style jury) that score every item and the sanity set")
    parser.add_argument("--rubric-items", type=int, default=0, help="HealthBench-style rubrics on this many "
                        "synthetic queries (spread over the languages), graded for every --rubric-models model")
    parser.add_argument("--rubric-criteria", type=int, default=10, help="criteria per rubric (2 of them harmful)")
    parser.add_argument("--rubric-models", type=int, default=20, help="models whose responses are graded")
    args = parser.parse_args(argv)
    if args.scale <= 0:
        parser.error("--scale must be positive")
    if args.rubric_items < 0 or args.rubric_criteria < 3 or args.rubric_models < 1:
        parser.error("--rubric-items ≥ 0, --rubric-criteria ≥ 3, --rubric-models ≥ 1")
    for suffix in ("", ".wal"):
        Path(str(args.out) + suffix).unlink(missing_ok=True)
    rubric = RubricSpec(args.rubric_items, args.rubric_criteria, args.rubric_models) if args.rubric_items else None
    stats = Generator(args.scale, args.out, args.seed, args.models, args.judge_samples, rubric, args.jury).generate()
    print(f"wrote {args.out}: {stats['queries']} queries × {stats['models']} models, {stats['rows']:,} rows, "
          f"{stats['bytes'] / 1e6:.0f} MB in {stats['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
