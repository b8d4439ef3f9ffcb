"""The dashboard benchmark's calls come from the page catalog (issue 46): every cached read every page declares
carries its bench arguments (``Read.bench`` in ``pipeline/read/pages.py``) and the benchmark calls it; a read or a
page added without them stops the benchmark; and the calls it derives run on a small results database."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bench import bench_dashboard as bench
from pipeline.catalog import catalog
from pipeline.read.pages import HOME, Bench, Page, Read, at

# reads whose every call this small database gives no arguments for, as the pages would not make them there: the
# arena's board below an empty board and the pairwise judge's bias views (no votes, no pairwise verdicts), a
# plan's progress (no human-evaluation plan)
SKIPPED_HERE = {"arena_both_bad", "arena_separation", "arena_win_matrix", "arena_doctors_vs_judge",
                "arena_position_flips", "arena_verbosity", "arena_self_preference", "plan_progress"}


def everywhere() -> dict[str, Page]:
    return {"home": HOME, **catalog().pages}


def benches_on(url: str, page: Page, rows: dict) -> set[int]:
    """The ids of the ``Bench``es the bench's rows call for ``page``."""
    names = [row for row in rows if row == url or row.startswith((url + " ", url + ","))]
    if url == "home":
        names.append("sidebar (every page)")
    return {id(b) for row in names for _, calls in rows[row] for _, b in calls}


def test_every_cached_read_of_every_page_is_called_by_the_bench() -> None:
    rows = bench.page_calls(catalog().pages)
    assert bench.unbenched(catalog().pages) == []
    for url, page in everywhere().items():
        called = benches_on(url, page, rows)
        assert called, f"the bench times nothing of page {url}"
        for read in page.reads:
            if read.cached:
                assert any(id(b) in called for b in read.bench), f"{url}: {read.name} has no call in the bench"


def test_a_read_or_page_without_bench_arguments_stops_the_bench() -> None:
    def toy_counts(db: str) -> int:
        return 0

    unbenched = {**catalog().pages, "toy": Page("pages/toy.py", "Toy", ":material/notes:", "A toy page.",
                                                reads=(Read("toy_counts", toy_counts),))}
    assert bench.unbenched(unbenched) == ["toy: no call", "toy: toy_counts"]
    with pytest.raises(ValueError, match="toy: toy_counts"):
        bench.page_calls(unbenched)
    benched = {**catalog().pages, "toy": Page("pages/toy.py", "Toy", ":material/notes:", "A toy page.",
                                              reads=(Read("toy_counts", toy_counts,
                                                          bench=(Bench(lambda c: at(c.db)),)),))}
    assert bench.unbenched(benched) == []
    assert bench.page_calls(benched)["toy"] == [("toy_counts", [("toy_counts", benched["toy"].reads[0].bench[0])])]
    wrong = {**catalog().pages, "toy": Page("pages/toy.py", "Toy", ":material/notes:", "A toy page.",
                                            reads=(Read("toy_counts", toy_counts,
                                                        bench=(Bench(lambda c: at(c.db), pages=("toy", "tyo")),)),))}
    assert bench.unbenched(wrong) == ["tyo: toy_counts (named by its bench, not declared there)"]


def test_every_call_names_a_function_of_the_cached_layer() -> None:
    logging.disable(logging.WARNING)
    from pages import _data as data

    for lines in bench.page_calls(catalog().pages).values():
        for _, calls in lines:
            for fn, _ in calls:
                assert callable(getattr(data, fn, None)), f"pages/_data.py has no {fn}"


def test_the_derived_calls_run_on_a_small_database(jury_db: Path) -> None:
    """Each row's calls once, as the benchmark makes them; every cached read of every page is called but those
    this database gives no arguments for (``SKIPPED_HERE``)."""
    logging.disable(logging.WARNING)
    from pages import _data as data

    ctx = bench.bench_context(str(jury_db))
    assert len(ctx.members) == 2 and ctx.jury != ctx.judge and len(ctx.models) >= 2
    made: list[Bench] = []
    rows = bench.timed_rows(ctx, made)
    for lines in rows.values():
        with data.render(jury_db):
            data.clear_caches()
            ctx.kept.clear()
            for _, call in lines:
                call()
    made_ids = {id(b) for b in made}
    for url, page in everywhere().items():
        for read in page.reads:
            if read.cached and read.name not in SKIPPED_HERE:
                assert any(id(b) in made_ids for b in read.bench), f"{url}: {read.name} was not called"
    skipped = {read.name for page in everywhere().values() for read in page.reads
               if read.bench and not any(id(b) in made_ids for b in read.bench)}
    assert skipped == SKIPPED_HERE
