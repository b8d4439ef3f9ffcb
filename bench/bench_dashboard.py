"""Dashboard benchmark: each page's reads (pages/_data.py over pipeline/read) at 1× and 10× the paper's scale.

For every page, the queries it makes on a first visit are run with caches cleared (cold: the SQL,
the bootstrap and the pandas work each time), REPEATS times, and likewise its other views and the reads it makes
beyond them (a row each); p50 and p95 of the wall time are
reported, with the median CPU time of the process (all threads: the work itself, which contention
from other processes does not inflate) and one warm (cached) call. Then the app itself renders
every page under Streamlit's AppTest in a fresh process on the 10× database, and that process's
peak RSS and each page's render time are recorded.

The calls come from the page catalog (``PAGES`` and ``HOME`` in pipeline/read/pages.py): each read declares how the
bench calls it (``Read.bench``: its arguments from what ``bench_context`` finds in the database, the row it is timed
in, the pages/_data.py function the page reaches it through), a page its calls of functions that are no read of it
(``Page.bench``); ``page_calls`` lays them out in rows, and the bench stops with one line when a page declares a
cached read without one (tests/test_bench_dashboard.py checks the same).

Databases come from bench/generate_db.py (made here if missing, with HealthBench-style rubrics: at 10×
5,000 rubric items × 20 models × 10 criteria, ≈ 1 M criterion grades). Targets at 10×: leaderboard
≤ 100 ms, response browser ≤ 200 ms (p95), rubric leaderboard p95 ≤ 150 ms, peak RSS ≤ 600 MB, every page
rendered within 2 s.

    python bench/bench_dashboard.py [--repeats 15] [--scales 1,10]

Writes bench/results/dashboard.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline.catalog import catalog  # noqa: E402  (the repo is on the path from here)
from pipeline.read.pages import HOME, OTHER, SIDEBAR, Bench, BenchContext, Page  # noqa: E402

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


Calls = list[tuple[str, list[tuple[str, Bench]]]]  # a row: (label, [(function of pages/_data.py, its call)]) in order


def page_calls(pages: Mapping[str, Page]) -> dict[str, Calls]:
    """Every row the bench times, from the pages' declarations (``Read.bench``, ``Page.bench``): row name (the page's
    URL name and the view's words; the sidebar's) → its calls in the order the page declares its reads, its own
    ``bench`` calls last. Per page its first visit first and its other reads (``OTHER``) last. Raises ValueError
    when a page has a cached read without a call (``unbenched``), a call names a page that does not declare its read,
    or one label stands in two places of a row."""
    missing = unbenched(pages)
    if missing:
        raise ValueError(f"no bench call for {', '.join(missing)}: give the read Bench(...) arguments "
                         "(pipeline/read/pages.py)")
    rows: dict[str, Calls] = {}
    for url, page in {"home": HOME, **pages}.items():
        made = [(b.via or read.name, b) for read in page.reads for b in read.bench if not b.pages or url in b.pages]
        made += [(b.via, b) for b in page.bench]
        views = sorted(dict.fromkeys(b.view for _, b in made), key=lambda v: (v != SIDEBAR, v != "", v == OTHER))
        for view in views:
            row = rows.setdefault(view if view == SIDEBAR else url + view, [])
            for fn, b in (call for call in made if call[1].view == view):
                label = b.label or fn
                if row and row[-1][0] == label:
                    row[-1][1].append((fn, b))
                elif any(label == seen for seen, _ in row):
                    raise ValueError(f"bench row {url + view!r}: {label!r} in two places; declare its calls together")
                else:
                    row.append((label, [(fn, b)]))
    return rows


def unbenched(pages: Mapping[str, Page]) -> list[str]:
    """'page: read' for every cached read a page declares that no ``Bench`` of it calls on that page, 'page: no
    call' for a page the bench would not call at all, and 'page: read (…)' for a ``Bench.pages`` naming a page that
    does not declare the read."""
    out = []
    pages = {"home": HOME, **pages}
    for url, page in pages.items():
        if not page.bench and not any(not b.pages or url in b.pages for read in page.reads for b in read.bench):
            out.append(f"{url}: no call")
        for read in page.reads:
            if read.cached and not any(not b.pages or url in b.pages for b in read.bench):
                out.append(f"{url}: {read.name}")
            out += [f"{name}: {read.name} (named by its bench, not declared there)" for b in read.bench
                    for name in b.pages if name not in pages or read not in pages[name].reads]
    return list(dict.fromkeys(out))


def bench_context(db: str) -> BenchContext:
    """What the pages' controls hold on a first visit to the synthetic dataset (sidebar filters at their defaults)."""
    from pages import _data as data

    dataset, judge = "synthetic", "openai/gpt-4o"
    f = data.Filters(dataset=dataset)
    weights = data.weights_tuple(data.run_weights(db, dataset))
    graders = data.rubric_graders(db, dataset).grader_id
    plans = data.plans(db, dataset).plan_id
    return BenchContext(db=db, dataset=dataset, f=f, judge=judge, weights=weights, preset=data.run_preset(db, dataset),
                        members=data.jury_members(db, dataset), jury=data.jury_of(db, dataset) or judge,
                        models=tuple(data.leaderboard(db, f, judge, weights, "en").model_id),
                        grader=graders.iloc[0] if len(graders) else "", plan=plans.iloc[0] if len(plans) else None)


def runner(ctx: BenchContext, label: str, calls: list[tuple[str, Bench]],
           made_log: list[Bench] | None = None) -> Callable[[], Any]:
    """One row's line as one call: each of its reads through pages/_data.py with the arguments its ``Bench`` makes
    (none where it makes None), then what the page does with the result; results kept in ``ctx.kept``, each
    ``Bench`` that made a call appended to ``made_log``."""
    from pages import _data as data

    def run() -> Any:
        result = None
        for fn, b in calls:
            made = b.args(ctx)
            for call in made if isinstance(made, list) else [] if made is None else [made]:
                result = getattr(data, fn)(*call.args, **call.kwargs)
                if made_log is not None:
                    made_log.append(b)
                ctx.kept[fn] = result
                if b.then is not None:
                    result = b.then(result, ctx)
            if made is None:
                ctx.kept[fn] = None
        return result

    run.__name__ = label
    return run


Lines = list[tuple[str, Callable[[], Any]]]  # a row's lines: (label, its calls as one)


def timed_rows(ctx: BenchContext, made_log: list[Bench] | None = None) -> dict[str, Lines]:
    """Row name → its lines as (label, call), as the catalog's pages declare them (``page_calls``)."""
    return {row: [(label, runner(ctx, label, calls, made_log)) for label, calls in lines]
            for row, lines in page_calls(catalog().pages).items()}


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
    ctx = bench_context(str(db))
    try:
        groups = timed_rows(ctx)
    except ValueError as exc:  # a page added to the dashboard, or a read added to a page, must be measured too
        raise SystemExit(f"bench_dashboard: {exc}") from None
    sidebar = groups[SIDEBAR]
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
                ctx.kept.clear()
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
import json, os, sys, time, logging
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
# the high-water mark of this process's own memory (/proc: VmHWM). Not getrusage's ru_maxrss: Linux carries that
# across exec from the parent's address space, so it reported the benchmark's own peak (2 GB at 100x), not the app's
hwm_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"render_s": times, "peak_rss_mb": hwm_kb / 1024, "errors": errors}))
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
