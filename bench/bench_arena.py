"""Arena benchmark at 100×: one million doctors' votes over 24 models × 5 languages, and the arena's reads.

MedArena ranked 12 models from 1,571 votes; Chatbot Arena's public leaderboards run on millions. This makes a
results database (bench/data/arena-100x.duckdb, made once) with 5 languages × 1,000 queries, a response of every
one of 24 models to each (120,000 texts of 300–1,500 characters with some markdown), one million votes by 300
doctors (unique per doctor, query and pair; outcomes from known Bradley–Terry strengths plus a preference for
length) and about 100,000 pairs (the distinct ones of 100,000 draws) judged in both orders by a judge that is
itself one of the candidates and prefers the first answer a fifth of the time. Rows go through the Store's bulk
path (``Store.write_table``), which also fills the derived arena tables (``pipeline/store/derived_arena.py``).

Then, cold (no Streamlit cache; every repetition one render inside ``SHARED_READERS.held``, as app.py makes it),
REPEATS times each: the arena page's leaderboard (sums of the store's ``arena_pairs``, kept by the writer; the
Bradley–Terry fit and 100 bootstrap refits), the style-controlled one, one language's, the win-rate matrix, the
next pair for a doctor, and the Judge trust page's bias view (position flips, verbosity with its length-controlled
fit, self-preference).
p50 / p95 wall time and the median CPU time are printed and written to bench/results/arena.json with ``uptime``'s
load. Target: the leaderboard and the bias view p95 ≤ 300 ms.

    python bench/bench_arena.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DATA = REPO / "bench" / "data"
DB = DATA / "arena-100x.duckdb"
RESULTS = REPO / "bench" / "results" / "arena.json"
MODELS = [f"bench/model-{i:02d}" for i in range(24)]
LANGUAGES = ("hi", "ta", "te", "kn", "en")
QUERIES_PER_LANGUAGE = 1000
VOTES = 1_000_000
DOCTORS = 300
JUDGED_PAIRS = 100_000
JUDGE = MODELS[5]  # the pairwise judge is also a candidate (self-preference)
TARGET_P95_MS = 300
WORDS = ("rest", "eye", "drops", "doctor", "vision", "shield", "water", "week", "clinic", "infection", "pain",
         "light", "surgery", "follow-up", "lens")


def make_database(path: Path, seed: int = 28) -> None:
    """The synthetic arena database (see the module docstring)."""
    import numpy as np
    import pyarrow as pa

    from pipeline.store import Store
    from pipeline.store.rows import DatasetRow, QueryRow, now, text_hash
    from pipeline.style import counts as style_counts

    rng = np.random.default_rng(seed)
    made = path.with_name(path.stem + ".new.duckdb")
    made.unlink(missing_ok=True)
    store = Store(made)
    n_q = QUERIES_PER_LANGUAGE * len(LANGUAGES)
    qids = [f"{lang}-{k:05d}" for lang in LANGUAGES for k in range(QUERIES_PER_LANGUAGE)]
    store.write([DatasetRow(name="arena", path="bench", closed_book=True, n_queries=n_q, n_chunks=0,
                            content_hash=None)])
    store.write([QueryRow(dataset="arena", query_id=q, language=q[:2], query=f"patient question {q}", query_en=None,
                          gt_response=f"doctor answer {q}", themes=[], kb_refs=[], update_sensitive=False,
                          script="latin" if k % 5 == 0 else "native")
                 for k, q in enumerate(qids)])
    # responses: model i writes longer on average as i grows; a third of them use markdown
    texts, hashes, styles = {}, {}, {}
    rows = {"dataset": [], "query_id": [], "model_id": [], "text": []}
    for m_i, model in enumerate(MODELS):
        lengths = rng.integers(300 + 25 * m_i, 900 + 25 * m_i, n_q)
        for q_i, q in enumerate(qids):
            words = rng.choice(WORDS, int(lengths[q_i]) // 7)
            body = " ".join(words)
            if (q_i + m_i) % 3 == 0:
                body = f"## Advice\n- **{words[0]}** {body[:120]}\n- {body[120:240]}\n{body[240:]}"
            text = f"Reply {m_i} to {q}: {body}"
            texts[(q, model)] = text
            hashes[(q, model)] = text_hash(text)
            styles[(q, model)] = style_counts(text)
            for k, v in (("dataset", "arena"), ("query_id", q), ("model_id", model), ("text", text)):
                rows[k].append(v)
    n_r = len(rows["text"])
    created = now()
    store.write_table("responses", pa.table({
        **rows, "run_id": ["bench"] * n_r, "prompt_hash": [None] * n_r, "error": [None] * n_r,
        "latency_s": [None] * n_r, "prompt_tokens": [None] * n_r, "completion_tokens": [None] * n_r,
        "cached": [False] * n_r, "created_at": [created] * n_r, "kb_hash": [None] * n_r,
        "response_hash": [hashes[(q, m)] for q, m in zip(rows["query_id"], rows["model_id"], strict=True)]}))
    strengths = np.linspace(-300, 300, len(MODELS))
    # votes: a random query, pair and doctor each, unique per (query, pair, doctor)
    draws = int(VOTES * 1.02)
    q_idx = rng.integers(0, n_q, draws)
    i = rng.integers(0, len(MODELS), draws)
    j = (i + rng.integers(1, len(MODELS), draws)) % len(MODELS)
    a, b = np.minimum(i, j), np.maximum(i, j)
    doc = rng.integers(0, DOCTORS, draws)
    key = ((q_idx * len(MODELS) + a) * len(MODELS) + b) * DOCTORS + doc
    _, first = np.unique(key, return_index=True)
    keep = np.sort(first)[:VOTES]
    q_idx, a, b, doc = q_idx[keep], a[keep], b[keep], doc[keep]
    votes = _comparison_columns(qids, q_idx, a, b, texts, hashes, styles)
    la, lb = np.array(votes["length_a"]), np.array(votes["length_b"])
    logit = (strengths[a] - strengths[b]) / 400 * np.log(10) + 2.0 * (la - lb) / (la + lb + 1)
    u = rng.random(len(keep))
    winner = np.where(u < 0.08, "tie", np.where(u < 0.11, "both_bad",
                                                np.where(rng.random(len(keep)) < 1 / (1 + np.exp(-logit)), "a", "b")))
    store.write_table("arena_votes", pa.table({
        **votes, "annotator": [f"dr-{d:03d}" for d in doc], "winner": winner,
        "shown_left": np.where(rng.random(len(keep)) < 0.5, votes["model_a"], votes["model_b"]),
        "tags": [[] for _ in range(len(keep))], "source": ["bench"] * len(keep), "voted_at": [created] * len(keep),
        "shown_at": np.datetime64(created, "us") - rng.integers(8, 120, len(keep)).astype("timedelta64[s]")}))
    # the judge: pairs judged in both orders; it prefers the answer shown first a fifth of the time
    q_idx = rng.integers(0, n_q, JUDGED_PAIRS)
    i = rng.integers(0, len(MODELS), JUDGED_PAIRS)
    j = (i + rng.integers(1, len(MODELS), JUDGED_PAIRS)) % len(MODELS)
    a, b = np.minimum(i, j), np.maximum(i, j)
    _, first = np.unique((q_idx * len(MODELS) + a) * len(MODELS) + b, return_index=True)
    q_idx, a, b = q_idx[first], a[first], b[first]
    pairs = _comparison_columns(qids, q_idx, a, b, texts, hashes, styles)
    self_bonus = np.where(np.array(pairs["model_a"]) == JUDGE, 1.0, np.where(np.array(pairs["model_b"]) == JUDGE,
                                                                               -1.0, 0.0))
    logit = (strengths[a] - strengths[b]) / 400 * np.log(10) + self_bonus
    honest = np.where(rng.random(len(q_idx)) < 1 / (1 + np.exp(-logit)), "a", "b")
    columns: dict[str, list] = {k: [] for k in (*pairs, "first", "verdict")}
    for order in ("a", "b"):
        shown_first = pairs[f"model_{order}"]
        biased = rng.random(len(q_idx)) < 0.2
        verdict = np.where(biased, order, honest)
        for k, v in pairs.items():
            columns[k].extend(v)
        columns["first"].extend(shown_first)
        columns["verdict"].extend(verdict)
    n_v = len(columns["first"])
    store.write_table("pairwise_verdicts", pa.table({
        **columns, "judge_id": [JUDGE] * n_v, "parse_ok": [True] * n_v, "raw_output": ["{}"] * n_v,
        "run_id": ["bench"] * n_v, "cached": [False] * n_v, "created_at": [created] * n_v}))
    os.replace(made, path)


def _comparison_columns(qids: list[str], q_idx, a, b, texts, hashes, styles) -> dict[str, list]:
    """The columns a comparison row shares (``pipeline.store.arena_rows.compared_texts``) for index arrays."""
    out: dict[str, list] = {"dataset": [], "query_id": [], "model_a": [], "model_b": [], "response_hash_a": [],
                            "response_hash_b": [], **{f"{f}_{x}": [] for f in ("length", "headers", "lists", "bold")
                                                      for x in ("a", "b")}}
    for qi, ai, bi in zip(q_idx, a, b, strict=True):
        q, ma, mb = qids[qi], MODELS[ai], MODELS[bi]
        out["dataset"].append("arena")
        out["query_id"].append(q)
        out["model_a"].append(ma)
        out["model_b"].append(mb)
        out["response_hash_a"].append(hashes[(q, ma)])
        out["response_hash_b"].append(hashes[(q, mb)])
        for x, m in (("a", ma), ("b", mb)):
            for f, v in styles[(q, m)].items():
                out[f"{f}_{x}"].append(v)
    return out


def reads(db: str) -> dict[str, Callable[[], Any]]:
    """The arena's reads as the pages make them (pages/_data.py's functions, uncached)."""
    from pipeline.read import arena

    def bias_view() -> Any:
        return (arena.position_flips(db, "arena", JUDGE), arena.verbosity(db, "arena", "judge", JUDGE),
                arena.self_preference(db, "arena", JUDGE))

    board = arena.fit(db, "arena", "hi", rounds=100).table
    return {
        "arena leaderboard (all languages, 100 bootstrap refits)": lambda: arena.fit(db, "arena", rounds=100),
        "arena leaderboard, one language (hi)": lambda: arena.fit(db, "arena", "hi", rounds=100),
        "arena leaderboard, style-controlled (30 refits)": lambda: arena.fit(db, "arena", style_control=True,
                                                                             rounds=arena.STYLE_ROUNDS),
        "judge's leaderboard": lambda: arena.fit(db, "arena", None, "judge", JUDGE, rounds=100),
        "win-rate matrix": lambda: arena.win_matrix(db, "arena"),
        "separation of neighbours": lambda: arena.separation(db, "arena", "hi", board),
        "doctors vs judge (6 languages x 2 fits, tau, kappa)": lambda: arena.doctors_vs_judge(db, "arena", JUDGE),
        "next pair (adaptive, not cached)": lambda: arena.next_pair(db, "arena", "hi", "dr-new", table=board),
        "bias view (flips, verbosity, self-preference)": bias_view,
        "both bad per model and language": lambda: arena.both_bad(db, "arena", by_language=True),
        "voter quality (300 annotators, a held-out fit each)": lambda: arena.annotators(db, "arena", judge=JUDGE),
        "leaderboard without 3 annotators (100 refits)": lambda: arena.fit(db, "arena", rounds=100,
                                                                          exclude=("dr-000", "dr-001", "dr-002")),
        "leaderboard capped at 100 votes per annotator (100 refits)": lambda: arena.fit(db, "arena", rounds=100,
                                                                                       cap=100),
    }


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--only", action="append", default=[],
                        help="time only the reads whose name starts with this (repeatable); their entries replace "
                             "those of the results file, the rest are kept")
    args = parser.parse_args()
    from pipeline.store import SHARED_READERS

    DATA.mkdir(parents=True, exist_ok=True)
    if not DB.exists():
        start = time.perf_counter()
        make_database(DB)
        print(f"made {DB} in {time.perf_counter() - start:.0f} s", flush=True)
    db = str(DB)
    results: dict[str, Any] = {}
    with SHARED_READERS.held(db):
        calls = {k: v for k, v in reads(db).items() if not args.only or k.startswith(tuple(args.only))}
        for name, call in calls.items():
            call()  # one untimed pass: imports and the instance
            walls, cpus = [], []
            for _ in range(args.repeats):
                c0, w0 = time.process_time(), time.perf_counter()
                call()
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
            results[name] = {"p50_ms": round(1000 * statistics.median(walls), 1),
                             "p95_ms": round(1000 * percentile(walls, 0.95), 1),
                             "cpu_median_ms": round(1000 * statistics.median(cpus), 1)}
            print(f"{name:55s} p50 {results[name]['p50_ms']:7.1f} ms  p95 {results[name]['p95_ms']:7.1f} ms  "
                  f"cpu {results[name]['cpu_median_ms']:7.1f} ms", flush=True)
    import duckdb

    with duckdb.connect(db, read_only=True) as con:
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("queries", "responses", "arena_votes", "pairwise_verdicts")}
    if args.only and RESULTS.exists():  # the other reads as measured before
        results = {**json.loads(RESULTS.read_text(encoding="utf-8"))["reads"], **results}
    checked = {k: results[k]["p95_ms"] <= TARGET_P95_MS for k in
               ("arena leaderboard (all languages, 100 bootstrap refits)", "bias view (flips, verbosity, "
                                                                           "self-preference)")}
    out = {"rows": counts, "repeats": args.repeats, "target_p95_ms": TARGET_P95_MS, "within_target": checked,
           "reads": results, "load_average": os.getloadavg(), "cpus": os.cpu_count(), "remeasured": args.only,
           "python": platform.python_version(),
           "measured_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({"rows": counts, "within_target": checked, "load_average": out["load_average"]}))


if __name__ == "__main__":
    main()
