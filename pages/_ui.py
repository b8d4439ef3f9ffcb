"""Shared pieces of the dashboard pages: the sidebar filters, safe text, formatting, the labelling widgets; the login
(``pages/_login.py``) and the tables' downloads (``pages/_downloads.py``) are their own modules, re-exported here.

No SQL here: data comes from ``pages/_data.py`` (the cached read models). Model output and dataset text are shown with
``st.text`` (no Markdown, no HTML) or in dataframes; anything that must pass through Markdown
(labels, captions) is escaped with :func:`md_escape` first.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import duckdb
import pandas as pd
import streamlit as st

from pages import _data as data
from pages._downloads import _TABLES, dataframe, downloads, table_bytes  # noqa: F401  (re-exported for the pages)
from pages._login import (  # noqa: F401  (re-exported for the pages)
    TEAM_ENV,
    UNVERIFIED_ENV,
    email_verified,
    identity,
    require_login,
    team_mode,
)
from pipeline.dataset import LANGUAGES, THEMES
from pipeline.metrics import LABELS, METRICS

ROOT = Path(__file__).resolve().parent.parent  # page scripts' paths in the catalog are from here

AGG_LABEL = "Aggregate (weighted)"
FILL_COMMAND = "python -m pipeline run --config configs/default.yaml"
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~=:$&\"'^])")


@dataclass(frozen=True)
class Context:
    """What every page needs: the database, the sidebar's filters and the judge."""

    db: str
    exists: bool
    filters: data.Filters
    judge: str | None
    choices: dict[str, Any]


def md_escape(text: Any) -> str:
    """Text made inert for Markdown: every special character backslash-escaped, newlines kept."""
    escaped = _MD_SPECIAL.sub(r"\\\1", "" if text is None else str(text))
    return escaped.replace("\n", "  \n")


def lang_label(code: str) -> str:
    return f"{LANGUAGES.get(code, code)} ({code})"


def theme_label(theme: str) -> str:
    return theme.replace("_", " ")


def _sanitise(key: str, options: list[str], *, multi: bool) -> None:
    """Drop a widget's remembered value(s) that are not among its current options."""
    if key not in st.session_state:
        return
    value = st.session_state[key]
    if multi:
        kept = [v for v in (value or []) if v in options]
        if kept != list(value or []):
            st.session_state[key] = kept
    elif value is not None and value not in options:
        del st.session_state[key]


def annotator(key: str, where: Any = st, *, bind: bool = False) -> str:
    """The name a label, vote or review is saved under ('' until there is one): in team mode the logged-in
    identity (``st.user``), otherwise what the user types in a "Your name" box (``key``; ``bind`` to the URL)."""
    if team_mode():
        name = identity()
        where.caption(md_escape(f"Saved as {name} (logged in)"))
        return name
    typed = where.text_input("Your name", key=key, max_chars=60, placeholder="e.g. dr-rao",
                             **({"bind": "query-params"} if bind else {}))
    return (typed or "").strip()


@contextmanager
def saving(db: str) -> Iterator[None]:
    """A save of a label, vote or answer: when it has to wait for another process's write (a running evaluation
    saves its results in short transactions; DuckDB lets one process write at a time), a running status says
    what it waits for until the save goes through, then how long it waited."""
    started = time.monotonic()
    shown: list[Any] = []  # the status box, once a wait began

    def waiting(waited_s: float) -> None:
        if not shown:
            holder = data.lock_holder(db)
            writer = f"run {holder}" if holder else "a run" if holder == "" else "another process"
            box = st.status(f"Waiting to save: {writer} is writing to the results database (one writer at a time); "
                            "your input is saved as soon as its write ends", state="running")
            shown.extend([box, writer])
        shown[0].update(label=f"Waiting to save: {shown[1]} is writing to the results database ({waited_s:.0f} s "
                              "so far); your input is saved as soon as its write ends")

    with data.on_lock_wait(waiting):
        yield
    if shown:
        shown[0].update(label=f"Saved after waiting {time.monotonic() - started:.0f} s for {shown[1]}'s write",
                        state="complete")


def sidebar() -> Context:
    """Draw the shared filters (kept in session state and bound to the URL) and return the context."""
    db = str(data.db_path())
    exists = data.db_exists(db)
    st.sidebar.title("Pariksha Studio")
    if team_mode() and st.user.is_logged_in:
        st.sidebar.caption(md_escape(f"Logged in as {identity()}"))
        st.sidebar.button("Log out", on_click=st.logout, icon=":material/logout:")
    if not exists:
        if data.setup_status(db) is not None:
            st.sidebar.info("Results are being prepared (`make run`).")
        else:
            st.sidebar.warning("No results database yet.")
        st.sidebar.caption(f"Database: {md_escape(db)}")
        return Context(db, False, data.Filters(), None, {"datasets": [], "languages": {}, "models": {}, "judges": {}})
    try:
        choices = data.choices(db)
    except duckdb.Error as exc:  # not a results database (or one too old to read)
        try:
            notice = data.outdated(db)
        except duckdb.Error:
            notice = None
        st.sidebar.error(md_escape(notice or f"Cannot read {db}: {exc}"))
        return Context(db, False, data.Filters(), None, {"datasets": [], "languages": {}, "models": {}, "judges": {}})
    datasets = choices["datasets"]
    if not datasets:
        st.sidebar.info("The database holds no dataset yet.")
        return Context(db, True, data.Filters(), None, choices)
    _sanitise("dataset", datasets, multi=False)
    dataset = st.sidebar.selectbox("Dataset", datasets, key="dataset", bind="query-params")
    languages = choices["languages"].get(dataset, [])
    models = choices["models"].get(dataset, [])
    judges = choices["judges"].get(dataset, [])
    for key, options in (("lang", languages), ("model", models), ("theme", list(THEMES))):
        _sanitise(key, options, multi=True)
    langs = st.sidebar.multiselect("Languages", languages, key="lang", bind="query-params",
                                   placeholder="all languages",
                                   help=", ".join(f"{c} {LANGUAGES.get(c, c)}" for c in languages))
    chosen_models = st.sidebar.multiselect("Models", models, key="model", bind="query-params",
                                           placeholder="all models")
    themes = st.sidebar.multiselect("Themes", list(THEMES), key="theme", bind="query-params",
                                    placeholder="any theme",
                                    help="Queries tagged with any of these themes (Health-Pariksha §3.1).")
    judge = data.judge_in_use(db, dataset)
    if len(judges) > 1:
        _sanitise("judge", judges, multi=False)
        judge = st.sidebar.selectbox("Judge", judges, index=judges.index(judge) if judge in judges else 0,
                                     key="judge", bind="query-params")
    elif judges:
        st.sidebar.caption(f"Judge: {md_escape(judges[0])}")
    if st.sidebar.button("Refresh", icon=":material/refresh:", help="Re-read the database now (clears caches)."):
        data.clear_caches()
        st.rerun()
    st.sidebar.caption(f"Database: {md_escape(db)}")
    filters = data.Filters(dataset=dataset, languages=tuple(langs), models=tuple(chosen_models), themes=tuple(themes))
    return Context(db, True, filters, judge, choices)


def _routed_by_folder() -> bool:
    """True when Streamlit routed this run by the ``pages/`` folder instead of app.py's ``st.navigation``.

    Streamlit treats an app with a ``pages/`` folder as a folder-routed multipage app until
    ``st.navigation`` has run once in the server process (AppTest resets that on every run).
    """
    from streamlit.runtime.pages_manager import PagesManager

    return bool(PagesManager.uses_pages_directory)


def ensure_navigation() -> None:
    """On a session's first run, route through app.py's ``st.navigation`` even on a fresh server.

    Otherwise a deep link opened first after the server starts runs the page file alone, with the
    folder's page list in the sidebar. Switch the routing and rerun (a fresh session has no clicks
    to lose).
    """
    from streamlit.runtime.pages_manager import PagesManager

    if _routed_by_folder() and "_ctx" not in st.session_state:
        PagesManager.uses_pages_directory = False
        st.rerun()


def context() -> Context:
    """The context the entry file computed for this run, or the sidebar drawn here if it did not run."""
    ensure_navigation()
    st.session_state[_TABLES] = 0  # tables drawn by ``dataframe`` in this run (their download keys)
    if _routed_by_folder() or "_ctx" not in st.session_state:
        st.session_state["_ctx"] = sidebar()
    return st.session_state["_ctx"]


def require_data(ctx: Context) -> None:
    """Stop the page with a clear message when there is nothing to show yet; say so when the file is old."""
    if ctx.exists and ctx.choices.get("notice"):
        st.warning(md_escape(ctx.choices["notice"]), icon=":material/update:")
    if (not ctx.exists or ctx.filters.dataset is None) and preparing(ctx.db):
        rerun_when_written(ctx.db)
        st.stop()
    if not ctx.exists:
        st.info(f"No results database at `{ctx.db}` yet. Fill it with:")
        st.code(FILL_COMMAND, language="bash")
        st.caption("Or point the app at another file with the environment variable PARIKSHA_DB. This page shows "
                   "the results as soon as a run writes them (`make run` starts one).")
        rerun_when_written(ctx.db)
        st.stop()
    if ctx.filters.dataset is None:
        st.info("The database holds no dataset yet. Run the pipeline to fill it:")
        st.code(FILL_COMMAND, language="bash")
        rerun_when_written(ctx.db)
        st.stop()


def duration(seconds: float | None) -> str:
    """Seconds as m:ss (h:mm:ss from an hour); a dash when unknown."""
    if seconds is None or seconds != seconds:  # None or NaN
        return "–"
    minutes, secs = divmod(round(float(seconds)), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}" if minutes >= 60 else f"{minutes}:{secs:02d}"


def preparing(db: str) -> bool:
    """Say what `make run` is preparing for ``db`` (``read.setup``), if it is; True when it said so."""
    setup = data.setup_status(db)
    if setup is None:
        return False
    if setup["failed"]:
        st.warning(f"`make run`'s set-up stopped: {md_escape(setup['failed'])} failed; its terminal says why. The "
                   "dashboard shows what is stored.", icon=":material/error:")
        return True
    doing = md_escape(setup["current"] or "between two phases")
    soon = setup["results_in_s"]
    st.info(f"Results are being prepared: `make run` is {doing} ({duration(setup['elapsed_s'])} since it started). "
            + (f"The first results should land in about {duration(soon)}; " if soon else "")
            + "this page shows them as soon as they are written; the home page lists the set-up's phases.",
            icon=":material/hourglass_top:")
    return True


WATCH_EVERY_S = 3.0


@st.fragment(run_every=WATCH_EVERY_S)
def rerun_when_written(db: str) -> None:
    """Rerun the page when the database file is created or written (an empty page waiting for a run's results), or
    when `make run`'s set-up moves on."""
    key = f"_stamp_{db}"
    stamp = (data.db_stamp(db), data.launch_stamp(db))  # results written, or `make run` moved to its next phase
    if st.session_state.setdefault(key, stamp) != stamp:
        del st.session_state[key]
        st.rerun()


def judge_banner(ctx: Context) -> None:
    """A plain warning wherever judge scores are shown, when the judge is too weak to trust."""
    if ctx.judge is None:
        st.info("No judgments yet: run the `judge` stage to score responses.")
        return
    reliability = data.judge_summary(ctx.db)["reliability"]
    warning = data.judge_warning(ctx.judge, reliability)
    if warning:
        st.warning(md_escape(warning), icon=":material/warning:")


def page(title: str, caption: str = "", *, judge: Literal["none", "shown", "needed"] = "none") -> Context:
    """A page's opening, the same on every page: the sidebar's context, the title and the caption (Markdown); a
    page whose spec needs results (``Page.needs_results``, found by the calling script's file) stops, saying how to
    fill the database, while there is nothing to show (``require_data``); ``judge`` "shown" draws the judge
    banner, "needed" also stops the page when no judge scored the dataset."""
    ctx = context()
    st.title(title)
    if caption:
        st.caption(caption)
    if _needs_results(Path(sys._getframe(1).f_code.co_filename)):
        require_data(ctx)
    if judge != "none":
        judge_banner(ctx)
    if judge == "needed" and ctx.judge is None:
        st.stop()
    return ctx


def _needs_results(script: Path) -> bool:
    """Whether the page whose script is ``script`` needs a results database (its spec in the catalog; a script no
    spec names: yes)."""
    from pipeline.catalog import catalog

    here = script.resolve()
    return next((p.needs_results for p in catalog().pages.values() if (ROOT / p.file).resolve() == here), True)


def languages_in_view(ctx: Context) -> list[str]:
    """The filtered languages, or every language of the dataset."""
    return list(ctx.filters.languages) or ctx.choices["languages"].get(ctx.filters.dataset, [])


def fmt_ci(low: float | None, high: float | None) -> str:
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return ""
    return f"[{low:.2f}, {high:.2f}]"


def fmt_score(value: Any) -> str:
    """A score for display: integers as they are, means to two decimals, missing as a dash."""
    if value is None or pd.isna(value):
        return "–"
    value = float(value)
    return str(int(value)) if value.is_integer() else f"{value:.2f}"


def show_text(label: str, text: Any, *, empty: str = "(none)") -> None:
    """A caption and the text itself, rendered as plain text (never Markdown or HTML)."""
    st.caption(md_escape(label))
    st.text(empty if text is None or (isinstance(text, float) and pd.isna(text)) or text == "" else str(text),
            width="stretch")


MACHINE_NOTE = "machine-made, not checked by a person"


def show_query(item: Any) -> None:
    """The patient query, its English rendering (when there is one) and the ground truth of a row.

    A rendering the dataset marks machine-made (``query_en_source``), or the pipeline's own translation of the
    query (``query_mt`` by ``query_mt_by``, used for retrieval), is labelled as such."""
    show_text("Patient query", item.query)
    if isinstance(item.query_en, str) and item.query_en:
        machine = getattr(item, "query_en_source", None) == "machine"
        by = getattr(item, "query_mt_by", None)
        label = f"English rendering{f' by {by}' if isinstance(by, str) and by else ''} ({MACHINE_NOTE})"
        show_text(label if machine else "English rendering", item.query_en)
    elif isinstance(getattr(item, "query_mt", None), str) and item.query_mt:
        show_text(f"English rendering by {item.query_mt_by}, used for retrieval ({MACHINE_NOTE})", item.query_mt)
    show_text("Ground truth (doctor-approved)", item.gt_response)


def scores_by(ctx: Context, key: str, *, help: str | None = None) -> tuple[str, tuple[str, ...]]:
    """Whose scores the page shows — the sidebar's judge, or the dataset's jury when it has one (a choice bound to
    the URL under ``key``) — and the jury's members when the jury is chosen (else none)."""
    members = data.jury_members(ctx.db, ctx.filters.dataset)
    jury = data.jury_of(ctx.db, ctx.filters.dataset)
    judge = ctx.judge
    if jury:
        labels = {ctx.judge: ctx.judge, jury: data.jury_label(jury, len(members))}
        judge = st.segmented_control("Scores by", list(labels), format_func=labels.get, key=key,
                                     bind="query-params", default=ctx.judge, help=help) or ctx.judge
        if judge not in labels:
            judge = ctx.judge
    return judge, (members if data.is_jury(judge) else ())


def label_queue_item(queue: pd.DataFrame, done: int, total: int, progress: str, show_answer: Any, *,
                     empty: str) -> Any:
    """The labelling card of a queue: progress (``done`` of ``total``, then ``progress``) and the first item's query
    beside its answer (``show_answer(item)`` draws the right column). Returns the item, or None when the queue is
    empty (``empty`` said on the page)."""
    st.progress(done / total if total else 0.0, text=md_escape(f"{done} of {total} {progress}"))
    if queue.empty:
        st.success(empty)
        return None
    item = queue.iloc[0]
    with st.container(border=True):
        st.markdown(f"**{md_escape(item.query_id)}** · {md_escape(lang_label(item.language))} · "
                    f"*{md_escape(item.model_id)}*")
        left, right = st.columns(2)
        with left:
            show_query(item)
        with right:
            show_answer(item)
    return item


def skip_button(item: Any, skipped_key: str) -> None:
    """"Skip this item": set the item aside for this session and show the next."""
    if st.button("Skip this item"):
        st.session_state[skipped_key] = [*st.session_state.get(skipped_key, []), f"{item.query_id}|{item.model_id}"]
        st.rerun()


def show_machine_rendering(text: str, translator: str) -> None:
    """A machine English rendering of a response, for readers: marked machine-made and never a score."""
    show_text(f"English rendering for readers by {translator} ({MACHINE_NOTE}; never scored)", text)


def metric_label(metric: str) -> str:
    """A metric's label from the registry (AGG: the weighted aggregate)."""
    return AGG_LABEL if metric == "AGG" else LABELS.get(metric, metric)


def metric_help() -> str:
    return "; ".join(f"{m}: {metric_label(m)}" for m in (*METRICS, "AGG")) + "."


def metric_options(with_agg: bool = True) -> list[str]:
    return (["AGG"] if with_agg else []) + list(METRICS)
