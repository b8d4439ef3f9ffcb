"""The pages' only data source: the read models of ``pipeline.read``, cached per filter set.

The functions here are made from the pages' declarations (``pipeline.read.pages``: each ``Page``'s ``reads``, and
the home page's and sidebar's, as the catalog carries them): a read declared cached is wrapped in ``st.cache_data``,
keyed by its arguments and the database file's stamp (size and modification time of the file and its WAL), so a
write — a pipeline batch, a human label — shows on the next rerun; the others are called as they are. Written here
by hand: only what composes reads (the run's weights and judge from ``choices``, a jury's or a language's
leaderboard, the comparison of two files) and the constants the pages show. ``clear_caches()`` backs the Refresh
button and follows the app's own writes. No SQL here.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

import pandas as pd
import streamlit as st

from pipeline.analysis.medcode import CLAIM_RANGES  # noqa: F401
from pipeline.analysis.stats import EXPANSION_MIN_N  # noqa: F401
from pipeline.catalog import catalog
from pipeline.labels.arena_votes import REASON_TAGS, save_vote  # noqa: F401  (the arena page's votes)
from pipeline.labels.critique_labels import save_critique_label  # noqa: F401  (the Med-CoDE page's queue)
from pipeline.labels.human_labels import save_label  # noqa: F401  (the review queue's verdicts)
from pipeline.read import arena as arena_read
from pipeline.read import compare as compare_read
from pipeline.read import home, trust
from pipeline.read import jury as jury_read
from pipeline.read import leaderboard as leaderboard_read
from pipeline.read import review as review_read
from pipeline.read.agreement import ALL_MODELS, PAPER_METRIC  # noqa: F401
from pipeline.read.common import (  # noqa: F401  (re-exported for the pages)
    DISAGREEMENT,
    DISAGREEMENT_LABELS,
    LEXICAL_LABELS,
    PLAYGROUND,
    Filters,
    db_exists,
    db_path,
    db_stamp,
    outdated,
    reference_table,
    weights_tuple,
)
from pipeline.read.judge_trust import AUC_TRUST, WEAK_JUDGES, judge_warning  # noqa: F401
from pipeline.read.jury import is_jury, jury_label  # noqa: F401
from pipeline.read.leaderboard import CI_RESAMPLES, paper_leaderboard, short_name  # noqa: F401
from pipeline.read.medcode import (  # noqa: F401  (re-exported for the Med-CoDE page)
    MEASURES,
    POOLED,
    QUANTITIES,
    SCORE_LABELS,
    paper_claims,
    pooled_matrix,
    published_claims,
)
from pipeline.read.pages import HOME, Page, Read
from pipeline.read.provenance import describe as describe_prompt  # noqa: F401
from pipeline.read.provenance import messages_text as prompt_text  # noqa: F401
from pipeline.read.responses import Browse, Matches  # noqa: F401
from pipeline.read.robustness import ALL as ALL_LANGUAGES_ROW  # noqa: F401
from pipeline.read.robustness import (  # noqa: F401  (the leaderboard is computed on the cached changes)
    CORRECT_FC,
    SCORES,
    robustness_leaderboard,
    scores_present,
)
from pipeline.read.significance import MIN_PPI_LABELS  # noqa: F401
from pipeline.read.themes import theme_table  # noqa: F401
from pipeline.read.trust import KAPPA_TRUST, MIN_LABELS, MIN_SANITY, SCRIPT_LABELS  # noqa: F401
from pipeline.store import LEXICAL, SHARED_READERS  # noqa: F401
from pipeline.store.connections import on_lock_wait  # noqa: F401  (a save that waits says so: _ui.saving)
from pipeline.store.runlock import lock_holder  # noqa: F401  (which run a waiting save waits for)

CACHE_TTL_S = 600
F = TypeVar("F", bound=Callable[..., Any])
_CACHED: list[Any] = []


def cached(fn: F) -> F:
    """``fn(db, ...)`` through ``st.cache_data``, keyed by its arguments and the database's stamp."""

    def inner(db: str, stamp: tuple, *args: Any, **kwargs: Any) -> Any:
        return fn(db, *args, **kwargs)

    inner.__module__, inner.__qualname__, inner.__name__ = fn.__module__, fn.__qualname__, fn.__name__
    cache = st.cache_data(ttl=CACHE_TTL_S, max_entries=64, show_spinner=False)(inner)

    @functools.wraps(fn)
    def wrapper(db: str | Path, *args: Any, **kwargs: Any) -> Any:
        return cache(str(db), db_stamp(db), *args, **kwargs)

    _CACHED.append(cache)
    return wrapper  # type: ignore[return-value]


@contextlib.contextmanager
def render(db: str | Path) -> Iterator[None]:
    """One render of the app (app.py wraps each run): its reads share one read-only DuckDB instance; after it, the
    code it loaded is frozen (``freeze_loaded_code``)."""
    try:
        with SHARED_READERS.held(db):
            yield
    finally:
        freeze_loaded_code()


_modules_frozen = 0  # len(sys.modules) at the last freeze


def freeze_loaded_code() -> None:
    """After a render that imported modules: take every object alive now out of the garbage collector's
    generations (``gc.freeze``), the render's young garbage collected first.

    The libraries a page loads (streamlit, pandas, altair, plotly, scipy, scikit-learn: about 200,000 modules,
    classes and functions) live as long as the server, and a full collection, which Python starts on its own
    every so often, walks them all and stalls whichever render it strikes. Frozen, they are skipped; what a
    later render allocates is collected as before. Renders that load nothing new leave it as it is."""
    global _modules_frozen
    if len(sys.modules) == _modules_frozen:
        return
    gc.collect(1)
    gc.freeze()
    _modules_frozen = len(sys.modules)


def clear_caches() -> None:
    """Forget every cached result (the Refresh button; after the app writes)."""
    for cache in _CACHED:
        cache.clear()


# -- the pages' reads: one function each, cached or not as its page declares it (pipeline.read.pages) ---------------
def _functions(pages: Iterable[Page]) -> dict[str, Callable[..., Any]]:
    """Name → the function the pages call: each declared read through ``cached`` (or as it is, when declared not
    cached). A name declared twice must mean the same read the same way."""
    declared: dict[str, Read] = {}
    for read in (r for page in pages for r in page.reads):
        if declared.setdefault(read.name, read) != read:
            raise ValueError(f"pages/_data.py: read {read.name!r} is declared two ways ({declared[read.name]}, {read})")
    return {name: cached(read.fn) if read.cached else read.fn for name, read in declared.items()}


READS = SimpleNamespace(**_functions([HOME, *catalog().pages.values()]))
globals().update(vars(READS))  # the pages call them as data.<name>
kb_notes = home.kb_notes  # lines about answers from another KB, from overview's models frame
cell_marks = trust.cell_marks


def run_config(db: str | Path, dataset: str | None) -> dict[str, Any]:
    return home.run_config(READS.choices(db), dataset)


def run_weights(db: str | Path, dataset: str | None) -> dict[str, float]:
    return home.run_weights(READS.choices(db), dataset)


def judge_in_use(db: str | Path, dataset: str | None) -> str | None:
    return home.judge_in_use(READS.choices(db), dataset)


def model_means(db: str | Path, f: Filters, judge: str, weights: tuple[float, ...],
                preset: str | None = None) -> pd.DataFrame:
    """The heatmap's per (language, model) means and AGG (``read.leaderboard.model_means``); a jury's from its
    judges' counted scores (``read.leaderboard.jury_base``: no item patterns needed)."""
    base = READS.jury_base(db, f, judge) if is_jury(judge) else READS.leaderboard_base(db, f, judge)
    return leaderboard_read.model_means(base, weights, preset)


@cached
def leaderboard(db: str, f: Filters, judge: str, weights: tuple[float, ...], language: str,
                preset: str | None = None) -> pd.DataFrame:
    """One language's leaderboard with CIs (``read.leaderboard.leaderboard`` over the cached base). A jury's base is
    of that language's queries only: its patterns are ``score_groups``' definition over its item scores, and no other
    view shares that base (the heatmap reads ``jury_base``), so the other languages are computed when shown."""
    if is_jury(judge) and (not f.languages or language in f.languages):
        f = f.with_(languages=(language,))
    return leaderboard_read.leaderboard(READS.leaderboard_base(db, f, judge), weights, language, preset)


def run_preset(db: str | Path, dataset: str | None) -> str | None:
    """The weights preset the latest run's config named (``paper-fit``), else None."""
    return run_config(db, dataset).get("weights_preset") or None


def jury_members(db: str | Path, dataset: str | None) -> tuple[str, ...]:
    """Every judge that scored the dataset: the jury."""
    return tuple(READS.choices(db)["judges"].get(dataset, [])) if dataset else ()


def jury_of(db: str | Path, dataset: str | None) -> str | None:
    """The jury's name (``jury:mean`` or the config's ``jury_aggregate``) when two or more judges scored the dataset."""
    if len(jury_members(db, dataset)) < 2:
        return None
    return jury_read.jury_id(run_config(db, dataset).get("jury_aggregate") or "mean")


def query_responses(db: str | Path, dataset: str, query_id: str) -> pd.DataFrame:
    return READS.query_view(db, dataset, query_id)["responses"]


REVIEW_RULES, REVIEW_SOURCE = review_read.RULES, review_read.REVIEW_SOURCE
Side = compare_read.Side
MIN_ITEMS_FOR_RANKS = compare_read.MIN_ITEMS
results_dir, result_files, RESULTS_DIR_ENV = compare_read.results_dir, compare_read.result_files, \
    compare_read.RESULTS_DIR_ENV


@st.cache_data(ttl=CACHE_TTL_S, max_entries=16, show_spinner=False)
def _compare_runs(a: compare_read.Side, b: compare_read.Side, weights: tuple[float, ...], metric: str,
                  n_changed: int, stamps: tuple) -> dict[str, Any]:
    return compare_read.compare(a, b, weights, metric=metric, n_changed=n_changed)


_CACHED.append(_compare_runs)


def compare_runs(a: compare_read.Side, b: compare_read.Side, weights: tuple[float, ...], metric: str = "AGG",
                 n_changed: int = 10) -> dict[str, Any]:
    """``read.compare.compare``, cached by both databases' stamps (either side may be another file)."""
    return _compare_runs(a, b, weights, metric, n_changed, (db_stamp(a.db), db_stamp(b.db)))


# -- the doctors' arena (pages/12_arena.py; sections of the leaderboards and judge trust pages) ----------------
ARENA_SOURCES = arena_read.SOURCES
ARENA_ROUNDS, ARENA_STYLE_ROUNDS = arena_read.ROUNDS, arena_read.STYLE_ROUNDS  # bootstrap resamples of a board
