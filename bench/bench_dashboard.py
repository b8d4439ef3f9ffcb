"""Dashboard benchmark: each page's reads (pages/_data.py over pipeline/read) at 1× and 10× the paper's scale.

For every page, the queries it makes on a first visit are run with caches cleared (cold: the SQL,
the bootstrap and the pandas work each time), REPEATS times; p50 and p95 of the wall time are
reported, with the median CPU time of the process (all threads: the work itself, which contention
from other processes does not inflate) and one warm (cached) call. Then the app itself renders
every page under Streamlit's AppTest in a fresh process on the 10× database, and that process's
peak RSS and each page's render time are recorded.

Databases come from bench/generate_db.py (made here if missing, with HealthBench-style rubrics: at 10×
5,000 rubric items × 20 models × 10 criteria, ≈ 1 M criterion grades). Targets at 10×: leaderboard
≤ 100 ms, response browser ≤ 200 ms (p95), rubric leaderboard p95 ≤ 150 ms, peak RSS ≤ 600 MB, every page
rendered within 2 s.

    python bench/bench_dashboard.py [--repeats 15] [--scales 1,10]

Writes bench/results/dashboard.json and prints a table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline.catalog import catalog  # noqa: E402  (the repo is on the path from here)

DATA = REPO / "bench" / "data"
RESULTS = REPO / "bench" / "results" / "dashboard.json"
TARGETS_MS = {"leaderboards": 100, "responses": 200}  # p50 at 10×
TARGET_RSS_MB = {10: 600, 100: 1000}  # peak RSS of the app rendering every page, by the scale it renders
TARGET_RENDER_S = {10: 2.0, 100: 3.0}  # every page's first render
# issue 16, at 100×: p95 of the leaderboard, of the browser (with search and score filter too), of every other page
# and of the sidebar
TARGETS_P95_100X_MS = {"leaderboards": 150, "responses": 250}
TARGET_P95_100X_OTHERS_MS = 300
PAGE_FILES = {url: page.file for url, page in catalog().pages.items()}  # every page of the dashboard, by its URL path
JURY = 1  # further judges in the synthetic databases (bench/generate_db.py --jury): the jury views have data
# HealthBench-style rubric items (bench/generate_db.py --rubric-items; 20 models × 10 criteria each): at 10× the
# size of HealthBench (5,000 items, ≈ 1 M criterion grades), where the rubric leaderboard's p95 must be ≤ 150 ms
RUBRIC_ITEMS = {1: 500, 10: 5000}
TARGETS_P95_MS = {"rubrics": 150, "responses": 200}  # issue 15: p95 at HealthBench's size (10×)


def database(scale: int) -> Path:
    path = DATA / f"synthetic-{scale}x.duckdb"
    if not path.exists() or not _has_rubric_items(path):
        made = path.with_name(path.stem + ".new.duckdb")  # replaced at once: a reader of the old file is not cut off
        subprocess.run([sys.executable, str(REPO / "bench" / "generate_db.py"), "--scale", str(scale), "--jury",
                        str(JURY), "--rubric-items", str(RUBRIC_ITEMS.get(scale, 500)), "--out", str(made)],
                       check=True)
        # as a user would after runs this large: the per-query tables in key order (`pipeline cluster`; no-op at 1×)
        subprocess.run([sys.executable, "-m", "pipeline", "cluster", "--db", str(made)], check=True, cwd=REPO)
        os.replace(made, path)
    return path


def _has_rubric_items(path: Path) -> bool:
    """Whether a database made earlier has the rubric items (an older one is made again)."""
    import duckdb

    with duckdb.connect(str(path), read_only=True) as con:
        return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'rubric_items'").fetchone()[0]
                    and con.execute("SELECT count(*) FROM rubric_items").fetchone()[0])


def page_queries(db: str) -> dict[str, list[tuple[str, Callable[[], Any]]]]:
    """What each page asks pages/_data.py on a first visit (sidebar filters at their defaults)."""
    from pages import _data as data
    from pipeline.read import leaderboard as lb

    dataset = "synthetic"
    f = data.Filters(dataset=dataset)
    judge = "openai/gpt-4o"
    weights = data.weights_tuple(data.run_weights(db, dataset))
    preset = data.run_preset(db, dataset)
    members = data.jury_members(db, dataset)
    jury = data.jury_of(db, dataset) or judge
    models = tuple(data.leaderboard(db, f, judge, weights, "en").model_id)
    browse = data.Browse(filters=f, judge=judge)
    graders = data.rubric_graders(db, dataset).grader_id
    grader = graders.iloc[0] if len(graders) else ""
    searched = data.Browse(filters=f, judge=judge, metric="FC", score_min=0.0, score_max=1.0, search="after")

    arena = ArenaReads(db, dataset)

    return {
        "sidebar (every page)": [("choices", lambda: data.choices(db)),
                                 ("judge_in_use", lambda: data.judge_in_use(db, dataset)),
                                 ("judge_summary", lambda: data.judge_summary(db))],
        "home": [("overview", lambda: data.overview(db)), ("judge_summary", lambda: data.judge_summary(db))],
        "leaderboards": [("run_weights", lambda: data.run_weights(db, dataset)),
                         ("model_means (heatmap: leaderboard_base's SQL)",
                          lambda: data.model_means(db, f, judge, weights)),
                         ("leaderboard en (CIs)", lambda: data.leaderboard(db, f, judge, weights, "en")),
                         ("  of which 120 CIs + table (SQL cached)",
                          lambda: lb.leaderboard(data.leaderboard_base(db, f, judge), weights, "en")),
                         ("language_scripts", lambda: data.language_scripts(db, dataset)),
                         ("reliability_matrix (cell marks)", lambda: data.reliability_matrix(db, dataset, judge, ())),
                         ("score_provenance", lambda: data.score_provenance(db, dataset, judge, ())),
                         ("paper_agg_check", lambda: data.paper_agg_check("en", weights, preset))],
        "leaderboards + tied groups, calibrated means (toggle)": [
            ("significance en (paired bootstrap, letters)",
             lambda: data.significance(db, f, judge, weights, "en", models, preset)),
            ("calibrated_means en (PPI)", lambda: data.calibrated_means(db, f, judge, "en"))],
        "leaderboards, jury (first visit)": [
            ("model_means (jury)", lambda: data.model_means(db, f, jury, weights)),
            ("leaderboard en (jury)", lambda: data.leaderboard(db, f, jury, weights, "en")),
            ("reliability_matrix (jury)", lambda: data.reliability_matrix(db, dataset, jury, members)),
            ("score_provenance (jury)", lambda: data.score_provenance(db, dataset, jury, members))],
        "judge_trust": [("reliability_matrix", lambda: data.reliability_matrix(db, dataset, judge, ())),
                        ("model_means per judge and jury",
                         lambda: [data.model_means(db, f, j, weights, preset) for j in (*members, jury)]),
                        ("jury_agreement (α, κ)", lambda: data.jury_agreement(db, f, members)),
                        ("disagreement_items FC", lambda: data.disagreement_items(db, f, members, "FC", 20)),
                        ("calibrated_means en", lambda: data.calibrated_means(db, f, judge, "en")),
                        ("score_provenance", lambda: data.score_provenance(db, dataset, judge, ()))],
        "responses": [("browse_view (count, page, details, chunks)", lambda: data.browse_view(db, browse, 10, 0)),
                      ("query_view (side by side)", lambda: data.query_view(db, dataset, "en-00001"))],
        "responses (search + score filter, page 50)": [
            ("browse_view", lambda: data.browse_view(db, searched, 10, 490))],
        "themes": [("theme_scores", lambda: data.theme_table(data.theme_scores(db, f, judge), weights)),
                   ("variant_changes (paired CIs of the pair shown)",
                    lambda: data.variant_changes(db, f, judge, weights, preset, "AGG",
                                                 "all languages: Indic vs English")),
                   ("theme_examples",
                    lambda: data.theme_examples(db, f.with_(languages=("en",)), judge, "cultural", 3, 0))],
        # the synthetic files hold hand-written variant pairs only (no generated kinds): the robustness page reads
        # its changes, finds none and says how to make them
        "robustness": [("robustness_changes (paired CIs per model, language, kind)",
                        lambda: data.robustness_changes(db, f, judge, weights, preset, grader or None))],
        "medcode": [("medcode_view (distribution, Table 2)",
                     lambda: data.medcode_view(db, f.with_(dataset=None), judge)),
                    ("medcode_correlations", lambda: data.medcode_correlations(db, f, judge)),
                    ("reference", lambda: data.reference_table("medcode_table2"))],
        "human_vs_llm": [("agreement_view", lambda: data.agreement_view(db, f, judge, "SS")),
                         ("annotation_state (not cached)", lambda: data.annotation_state(db, f, "bench", "SS"))],
        "playground": [("dataset_queries", lambda: data.dataset_queries(db, dataset, None)),
                       ("dataset_path", lambda: data.dataset_path(db, dataset))],
        "rubrics": [("rubric_graders", lambda: data.rubric_graders(db, dataset)),
                               ("rubric_leaderboard (CIs, all + per language)",
                                lambda: data.rubric_leaderboard(db, dataset, grader))],
        "rubrics (tags, meta-eval)": [("rubric_tags", lambda: data.rubric_tags(db, dataset, grader)),
                                      ("grader_meta_eval", lambda: data.grader_meta_eval(db, dataset, grader))],
        "compare_runs (two models, one file)": [
            ("compare_runs", lambda: data.compare_runs(data.Side(db, dataset, models[0], judge),
                                                       data.Side(db, dataset, models[1], judge), weights))],
        "review_queue": [("review_queue (not cached)", lambda: data.review_queue(db, f, judge, "bench", "FC")),
                         ("review_item", lambda: data.review_item(db, dataset, "en-00001", models[0]))],
        # pages/12_arena.py opens on its Vote view, which before a name is entered reads only the languages; the
        # synthetic files hold no votes (the arena at a million votes is bench/bench_arena.py)
        "arena (first visit: vote view)": [("arena_languages", lambda: data.arena_languages(db, dataset))],
        "arena (vote view, a name given)": [
            ("arena_languages", lambda: data.arena_languages(db, dataset)),
            ("arena_fit (doctors' board, for the adaptive pair)", lambda: arena.step("fit", arena.board)),
            ("arena_next_pair (not cached)", lambda: data.arena_next_pair(
                db, dataset, None, "bench", adaptive=True, table=arena.get("fit", "table"))),
            ("arena_votes_by (not cached)", lambda: data.arena_votes_by(db, dataset, "bench"))],
        "arena (leaderboard view)": [
            ("arena_languages", lambda: data.arena_languages(db, dataset)),
            ("arena_judges", lambda: arena.step("judges", lambda: data.arena_judges(db))),
            ("arena_fit (doctors, all languages)", lambda: arena.step("fit", arena.board)),
            ("arena_both_bad (per model; per model and language)", arena.both_bad),
            ("arena_separation", lambda: arena.shown() and data.arena_separation(db, dataset, None,
                                                                                  arena.get("fit", "table"))),
            ("arena_win_matrix", lambda: arena.shown() and data.arena_win_matrix(db, dataset, None, "doctors", None)),
            ("arena_doctors_vs_judge (first judge)", lambda: arena.shown() and arena.get("judges") and
             data.arena_doctors_vs_judge(db, dataset, arena.get("judges")[0]))],
        # pages/11_dataset.py: a dataset is a folder (no database needed); the synthetic datasets have none on disk,
        # so the page reads the first bundled folder under data/
        "dataset": [("dataset_folder", lambda: data.dataset_folder(db, dataset)),
                    ("dataset_folders (data/)", lambda: data.dataset_folders()),
                    ("folder_view (sources, page notes, chunks, growth, exclusions)",
                     lambda: data.folder_view(data.dataset_folders()[0]))],
    }


class ArenaReads:
    """The arena page's reads in its own order and conditions (pages/12_arena.py): nothing but the languages without
    the arena's tables, nothing below the board when it is empty; each step keeps what the next one reads."""

    def __init__(self, db: str, dataset: str) -> None:
        self.db, self.dataset = db, dataset
        self.kept: dict[str, Any] = {}

    def step(self, name: str, read: Callable[[], Any]) -> Any:
        self.kept[name] = read() if self._has_arena() else None
        return self.kept[name]

    def get(self, name: str, attribute: str | None = None) -> Any:
        value = self.kept.get(name)
        return getattr(value, attribute) if value is not None and attribute else value

    def _has_arena(self) -> bool:
        from pages import _data as data

        return data.has_arena(self.db)

    def board(self) -> Any:
        """The doctors' Bradley–Terry board as current_board() asks it (all languages, no style control)."""
        from pages import _data as data

        return data.arena_fit(self.db, self.dataset, None, "doctors", None, style_control=False,
                              rounds=data.ARENA_ROUNDS, anchor=None, exclude=(), cap=None)

    def shown(self) -> bool:
        """Whether the page draws below the board (it stops at an empty one)."""
        fit = self.kept.get("fit")
        return fit is not None and not fit.table.empty

    def both_bad(self) -> Any:
        """The "both bad" columns merged into the board, and the per-language table, as the page reads them."""
        from pages import _data as data

        if not self.shown():
            return None
        bad = data.arena_both_bad(self.db, self.dataset, None)[["model", "both_bad_rate", "both_bad_lower",
                                                                 "both_bad_upper"]]
        self.kept["fit"] = dataclasses.replace(self.kept["fit"], table=self.kept["fit"].table.merge(
            bad, on="model", how="left"))
        return data.arena_both_bad(self.db, self.dataset, None, by_language=True)


def open_instance_ms(db: Path, repeats: int) -> dict[str, float]:
    """Opening and closing the file read-only (a new DuckDB instance): what a render's first read pays."""
    import duckdb

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        duckdb.connect(str(db), read_only=True).close()
        times.append(time.perf_counter() - start)
    return {"p50_ms": round(1000 * statistics.median(times), 1), "p95_ms": round(1000 * percentile(times, 0.95), 1)}


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def time_queries(db: Path, repeats: int, only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Cold p50/p95 per page (all its own queries together) and per query; one warm call per page.

    Each cold repetition is one render, as app.py makes it: inside ``data.render`` (the render's reads
    share one DuckDB instance; after it, the code it loaded is frozen out of the garbage collector's
    generations), caches cleared, the sidebar's queries (drawn on every
    page before it, and measured as their own row, which pays for opening the instance) run untimed
    first, as they would have been.
    """
    from pages import _data as data

    out: dict[str, Any] = {}
    groups = page_queries(str(db))
    unmeasured = [url for url in PAGE_FILES if not any(name.split(" ")[0] == url for name in groups)]
    if unmeasured:  # a page added to the dashboard must be measured too
        raise SystemExit(f"bench_dashboard: no reads listed in page_queries for page(s) {', '.join(unmeasured)}")
    sidebar = groups["sidebar (every page)"]
    for page, calls in groups.items():
        if only and not page.startswith(only):
            continue
        totals, per_query = [], {name: [] for name, _ in calls}
        for _, call in calls:  # one untimed pass: imports (scipy, altair…) happen once per process
            call()
        cpu_totals = []
        for _ in range(repeats):
            with data.render(db):  # as app.py: shared reads, then the code it loaded frozen
                data.clear_caches()
                if calls is not sidebar:  # the sidebar ran first on every page and cached its queries
                    for _, call in sidebar:
                        call()
                total = 0.0
                cpu_start = time.process_time()
                for name, call in calls:
                    start = time.perf_counter()
                    call()
                    elapsed = time.perf_counter() - start
                    per_query[name].append(elapsed)
                    if not name.lstrip().startswith("of which"):  # a breakdown, already in the total
                        total += elapsed
                totals.append(total)
                cpu_totals.append(time.process_time() - cpu_start)
        start = time.perf_counter()  # warm: straight from st.cache_data
        for name, call in calls:
            if not name.lstrip().startswith("of which"):
                call()
        warm = time.perf_counter() - start
        out[page] = {
            "p50_ms": round(1000 * statistics.median(totals), 1), "p95_ms": round(1000 * percentile(totals, 0.95), 1),
            "cpu_p50_ms": round(1000 * statistics.median(cpu_totals), 1),
            "warm_ms": round(1000 * warm, 2),
            "queries": {name: {"p50_ms": round(1000 * statistics.median(v), 1),
                               "p95_ms": round(1000 * percentile(v, 0.95), 1)} for name, v in per_query.items()},
        }
    return out


RENDER_SCRIPT = r"""
import json, os, resource, sys, time, logging
logging.disable(logging.WARNING)
from streamlit.testing.v1 import AppTest
pages = json.loads(sys.argv[1])
at = AppTest.from_file(os.path.join(sys.argv[2], "app.py"), default_timeout=300)
times = {}
start = time.perf_counter(); at.run(); times["home"] = time.perf_counter() - start
errors = [str(e.value) for e in at.exception]
for name, path in pages.items():
    at.switch_page(path)
    start = time.perf_counter(); at.run(); times[name] = time.perf_counter() - start
    errors += [f"{name}: {e.value}" for e in at.exception]
print(json.dumps({"render_s": times, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "errors": errors}))
"""


def render_pages(db: Path) -> dict[str, Any]:
    """Render every page once in a fresh process (cold caches); its peak RSS and per-page render time."""
    env = {**os.environ, "PARIKSHA_DB": str(db)}
    done = subprocess.run([sys.executable, "-c", RENDER_SCRIPT, json.dumps(PAGE_FILES), str(REPO)], env=env,
                          capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(done.stdout.strip().splitlines()[-1])


def page_targets(scale: str, page: str) -> tuple[int | None, int | None]:
    """(p50 target, p95 target) in ms of a page's row at a scale; None where there is none."""
    first = page.split(" ")[0]
    if scale == "10x":
        plain = "(" not in page
        return (TARGETS_MS.get(first) if plain else None), (TARGETS_P95_MS.get(first) if plain else None)
    if scale == "100x":
        if page.startswith("responses") or "(" not in page:  # the toggles and the jury are on request
            return None, TARGETS_P95_100X_MS.get(first, TARGET_P95_100X_OTHERS_MS)
    return None, None


def query_rows(results: dict[str, Any]) -> list[str]:
    """The timing table's rows: per scale and page, then per query."""
    lines = [f"{'page':<44} {'scale':>5} {'p50 ms':>9} {'p95 ms':>9} {'cpu ms':>8} {'warm ms':>8} {'target':>9}"]
    for scale, pages in results["queries"].items():
        for page, r in pages.items():
            target, p95 = page_targets(scale, page)
            mark = "" if target is None else (f"≤{target} " + ("ok" if r["p50_ms"] <= target else "MISS"))
            if p95 is not None:
                mark = (mark + " " if mark else "") + f"p95≤{p95} " + ("ok" if r["p95_ms"] <= p95 else "MISS")
            lines.append(f"{page:<44} {scale:>5} {r['p50_ms']:>9.1f} {r['p95_ms']:>9.1f} {r['cpu_p50_ms']:>8.1f} "
                         f"{r['warm_ms']:>8.2f} {mark:>9}")
            for name, qr in r["queries"].items():
                lines.append(f"  {name:<42} {'':>5} {qr['p50_ms']:>9.1f} {qr['p95_ms']:>9.1f}")
    for scale, info in results["databases"].items():
        lines.append(f"{'opening the database (per render, in sidebar)':<44} {scale:>5} "
                     f"{info['open_instance']['p50_ms']:>9.1f} {info['open_instance']['p95_ms']:>9.1f}")
    return lines


def table(results: dict[str, Any]) -> str:
    lines = query_rows(results)
    scale = results["render"]["scale"]
    render, rss, limit = results["render"], TARGET_RSS_MB.get(scale), TARGET_RENDER_S.get(scale)
    lines.append("")
    lines.append(f"AppTest render at {scale}× (fresh process, cold caches), peak RSS {render['peak_rss_mb']:.0f} MB "
                 f"(target ≤ {rss}):")
    for page, seconds in render["render_s"].items():
        over = limit is not None and seconds > limit
        lines.append(f"  {page:<42} {seconds:>7.2f} s" + (f"  > {limit} s" if over else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--scales", default="1,10", help="comma-separated; the app renders at the largest")
    parser.add_argument("--pages", default="", help="comma-separated page-name prefixes: time only these, render "
                        "nothing, write no file (for working on a page)")
    args = parser.parse_args(argv)
    only = tuple(p for p in args.pages.split(",") if p)
    logging.disable(logging.WARNING)  # st.cache_data outside a Streamlit server says so on every call
    scales = [int(s) for s in args.scales.split(",")]
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_at_start": [round(x, 2) for x in os.getloadavg()]},
        "repeats": args.repeats, "targets": {"ms_at_10x": TARGETS_MS, "p95_ms_at_10x": TARGETS_P95_MS,
                                             "p95_ms_at_100x": {**TARGETS_P95_100X_MS,
                                                                "other pages and sidebar": TARGET_P95_100X_OTHERS_MS},
                                             "peak_rss_mb": TARGET_RSS_MB, "page_render_s": TARGET_RENDER_S},
        "databases": {}, "queries": {},
    }
    for scale in scales:
        db = database(scale)
        import duckdb

        con = duckdb.connect(str(db), read_only=True)
        results["databases"][f"{scale}x"] = {
            "path": str(db.relative_to(REPO)), "mb": round(db.stat().st_size / 1e6),
            **{t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
               for t in ("queries", "responses", "judgments", "critiques", "lexical_scores", "safety_checks",
                         "rubric_grades", "rubric_items")},
        }
        con.close()
        results["databases"][f"{scale}x"]["open_instance"] = open_instance_ms(db, args.repeats)
        results["queries"][f"{scale}x"] = time_queries(db, args.repeats, only)
    if only:
        print("\n".join(query_rows(results)))
        return 0
    results["render"] = {"scale": max(scales), **render_pages(database(max(scales)))}
    results["machine"]["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    # the default scales keep dashboard.json; others get their own file (dashboard-100x.json)
    out = RESULTS if scales == [1, 10] else RESULTS.with_name(f"dashboard-{'-'.join(f'{s}x' for s in scales)}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    print(f"\nwrote {out.relative_to(REPO)}; load average {results['machine']['load_avg_at_start']} → "
          f"{results['machine']['load_avg_at_end']} on {results['machine']['cpus']} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
