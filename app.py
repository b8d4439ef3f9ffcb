"""Pariksha Studio dashboard: the entry file routes the pages, draws the shared filters and is the home page.

Run with ``streamlit run app.py``; the database is ``$PARIKSHA_DB`` or ``data/results.duckdb``.
"""

from __future__ import annotations

import time

import streamlit as st

from pages import _data as data
from pages import _ui as ui
from pipeline.catalog import catalog

ui.ensure_navigation()
st.set_page_config(page_title="Pariksha Studio", page_icon=":material/health_and_safety:", layout="wide")


def home() -> None:
    """What the database holds, the judge in use and how far to trust it, and the way to each page."""
    ctx = ui.context()
    st.title("Pariksha Studio")
    st.caption("Which LLM may answer patients' health questions in India's languages? Health-Pariksha leaderboards, "
               "Med-CoDE disagreement, human checks of the judge, and a playground.")
    setup_panel(ctx)
    ui.require_data(ctx)
    live_run(ctx.db)
    overview = data.overview(ctx.db)
    for note in data.kb_notes(overview["models"]):  # answers from another knowledge base than the latest run's
        st.warning(ui.md_escape(note), icon=":material/library_books:")
    per_language = overview["per_language"]
    cols = st.columns(5)
    cols[0].metric("Datasets", len(overview["datasets"]))
    cols[1].metric("Queries", int(per_language.groupby("dataset").queries.sum().sum()) if len(per_language) else 0)
    cols[2].metric("Responses", int(overview["models"].responses.sum()) if len(overview["models"]) else 0)
    cols[3].metric("Models", overview["models"].model_id.nunique() if len(overview["models"]) else 0)
    cols[4].metric("Runs", len(overview["runs"]))

    st.subheader("Judge in use and its reliability")
    summary = data.judge_summary(ctx.db)
    if ctx.judge is None:
        st.info("No judge has scored this dataset yet: run the `judge` stage (and `sanity` for its reliability).")
    else:
        st.markdown(f"Judge: **{ui.md_escape(ctx.judge)}** on dataset **{ui.md_escape(ctx.filters.dataset)}**")
        ui.judge_banner(ctx)
    left, right = st.columns(2)
    with left:
        st.markdown("**Sanity AUC per metric** (a good answer must outscore a corrupted one; 0.5 is chance)")
        rel = summary["reliability"]
        rel = rel[rel.judge_id == ctx.judge] if ctx.judge else rel
        if rel.empty:
            st.caption("No sanity check stored for this judge (run the `sanity` stage).")
        else:
            ui.dataframe(rel[["dataset", "metric", "auc", "n_good", "n_bad", "n_unparsed"]], hide_index=True,
                         column_config={"auc": st.column_config.NumberColumn("AUC", format="%.2f")})
    with right:
        st.markdown("**Human agreement** (labels vs the judge's score on the same items)")
        agr = summary["agreement"]
        agr = agr[agr.judge_id == ctx.judge] if ctx.judge and not agr.empty else agr
        if agr.empty:
            st.caption("No human labels yet: import them (`python -m pipeline import-human-labels`) or annotate "
                       "on the Human vs LLM page.")
        else:
            ui.dataframe(agr, hide_index=True, column_config={
                "agreement": st.column_config.NumberColumn("% agreement", format="percent"),
                "kappa": st.column_config.NumberColumn("weighted κ", format="%.2f")})
    judges = summary["judges"]
    mine = judges[(judges.judge_id == ctx.judge) & (judges.dataset == ctx.filters.dataset)]
    if not mine.empty and mine.samples.max() > 1:
        st.markdown("**Self-consistency** (the judge asked several times per item: the mean standard deviation "
                    "of an item's scores, and the share of items whose samples differ)")
        ui.dataframe(data.judge_consistency(ctx.db, ctx.filters, ctx.judge), hide_index=True, column_config={
            "multi_items": st.column_config.NumberColumn("items sampled ≥ 2×"),
            "samples": st.column_config.NumberColumn("mean samples", format="%.1f"),
            "mean_std": st.column_config.NumberColumn("mean std", format="%.2f"),
            "flip_rate": st.column_config.NumberColumn("flip rate", format="percent")})
    if not judges.empty:
        ui.dataframe(judges, hide_index=True, column_config={
            "parse_failures": st.column_config.NumberColumn("parse failures", help="Unparseable judge outputs: "
                                                            "stored unscored (NULL), never as 0.")})

    st.subheader("Runs")
    ui.dataframe(overview["runs"], hide_index=True, column_config={
        "seconds": st.column_config.NumberColumn("time (s)"),
        "backend_calls": st.column_config.NumberColumn("backend calls"),
        "cache_hits": st.column_config.NumberColumn("cache hits")})
    left, right = st.columns(2)
    with left:
        st.markdown("**Queries and responses per language**")
        ui.dataframe(per_language.assign(language=per_language.language.map(ui.lang_label)), hide_index=True)
    with right:
        st.markdown("**Models**")
        ui.dataframe(overview["models"], hide_index=True)

    costs(ctx)

    st.subheader("Pages")
    for page, spec in zip(PAGES, catalog().pages.values(), strict=True):
        st.page_link(page, label=page.title, icon=page.icon)
        st.caption(spec.text)


LIVE_EVERY_S = 2.0  # the live run's panel reads its progress this often
PAGE_EVERY_S = 15.0  # and redraws the whole page this often while results land (and when a stage ends)


def live_run(db: str) -> None:
    """The run going on now, if any: its panel refreshes itself, the page follows as results land."""
    run = data.live_run(db)
    if run is None:  # none now: the page reruns when the database is written (a run starting, results landing)
        ui.rerun_when_written(db)
        return
    st.session_state["_live_page"] = (run["run_id"], int((~run["stages"].live).sum()), time.monotonic())
    live_panel(db)


@st.fragment(run_every=LIVE_EVERY_S)
def live_panel(db: str) -> None:
    """Stage, items done of total, errors, elapsed and time left of the running run (``read.home.live_run``)."""
    run = data.live_run(db)
    finished = None if run is None else int((~run["stages"].live).sum())
    run_id, seen, drawn = st.session_state.get("_live_page", (None, None, 0.0))
    if run is None or (run["run_id"], finished) != (run_id, seen) or time.monotonic() - drawn > PAGE_EVERY_S:
        st.rerun()  # the run ended, a stage ended or results have been landing: the whole page, fresh
    stages = run["stages"]
    live = stages[stages.live]
    st.subheader("Run in progress")
    st.caption(f"{ui.md_escape(run['name'])} on {ui.md_escape(run['dataset'])} (run {ui.md_escape(run['run_id'])}); "
               f"this panel refreshes every {LIVE_EVERY_S:g} s and the page as results land.")
    cols = st.columns(5)
    cols[0].metric("Stage", ", ".join(dict.fromkeys(live.stage)) if len(live) else "between stages")
    cols[1].metric("Items done", f"{int(live.done.sum())} of {int(live['items'].sum())}" if len(live) else "–")
    cols[2].metric("Errors", run["errors"])
    cols[3].metric("Elapsed", ui.duration(run["elapsed_s"]))
    cols[4].metric("Stage time left", ui.duration(live.eta_s.max() if len(live) else None),
                   help="At the pace of the stage's items so far; later stages are not counted.")
    for r in live.itertuples():
        st.progress(min(1.0, r.done / r.items) if r.items else 1.0,
                    text=f"{r.stage} · {r.model_id}: {int(r.done)} of {int(r.items)} items, {int(r.errors)} errors")
    if run["stale"]:
        st.warning(f"No progress reported for {ui.duration(run['quiet_s'])}: the run may have stopped without "
                   "saying so (a rerun resumes it).", icon=":material/hourglass_disabled:")
    done = stages[~stages.live]
    if len(done):
        st.caption("Stages finished: " + "; ".join(f"{r.stage} · {r.model_id} ({int(r.done)} items, "
                                                   f"{int(r.errors)} errors)" for r in done.itertuples()))


def setup_panel(ctx: ui.Context) -> None:
    """`make run`'s set-up while no run is active: its phases, what each took or should take, the time left."""
    if data.setup_status(ctx.db) is None or (ctx.exists and data.live_run(ctx.db) is not None):
        return
    setup_phases(ctx.db, ctx.exists)


@st.fragment(run_every=LIVE_EVERY_S)
def setup_phases(db: str, readable: bool) -> None:
    """The set-up's panel, refreshed every ``LIVE_EVERY_S``; the whole page once it is over or a run begins."""
    setup = data.setup_status(db)
    if setup is None or data.db_exists(db) != readable or (readable and data.live_run(db) is not None):
        st.rerun()
    st.subheader("Setting up")
    st.caption("`make run` serves this dashboard first and prepares the rest behind it; the estimates are this "
               "folder's last launch, else typical figures on 2 cores (docs/make-run.md).")
    now = f"stopped: {setup['failed']} failed" if setup["failed"] else (setup["current"] or "between phases")
    st.markdown(f"**Now:** {ui.md_escape(now)}")
    cols = st.columns(3)
    cols[0].metric("Elapsed", ui.duration(setup["elapsed_s"]))
    cols[1].metric("Set-up time left", ui.duration(setup["left_s"]),
                   help="The running phase's expected rest plus the phases still waiting (an estimate).")
    cols[2].metric("Next results in", ui.duration(setup["results_in_s"]),
                   help="Until the next phase that writes results ends (an estimate): the first results without a "
                        "local model, then the evaluation's.")
    st.dataframe(setup["phases"], hide_index=True, column_config={
        "took_s": st.column_config.NumberColumn("took (s)", format="%.0f", help="So far, for the running phase."),
        "expected_s": st.column_config.NumberColumn("expected (s)", format="%.0f")})


COST_COLUMNS = {
    "calls": st.column_config.NumberColumn("backend calls", help="Calls the backend made (retries included)."),
    "cached": st.column_config.NumberColumn("from cache", help="Answered from the LLM cache: free."),
    "prompt_tokens": st.column_config.NumberColumn("prompt tokens"),
    "completion_tokens": st.column_config.NumberColumn("completion tokens"),
    "price_input": st.column_config.NumberColumn("$ / 1M in", format="%.2f"),
    "price_output": st.column_config.NumberColumn("$ / 1M out", format="%.2f"),
    "cost": st.column_config.NumberColumn("cost ($)", format="%.4f", help="Empty when unknown: an API model "
                                          "without a price in the config, or tokens not recorded."),
    "unpriced_calls": st.column_config.NumberColumn("calls of unknown cost"),
}


def costs(ctx: ui.Context) -> None:
    """Cost and tokens per model, stage and run (``pipeline.read.cost``; prices from each run's config)."""
    st.subheader("Cost and tokens")
    dataset = ctx.filters.dataset
    table = data.cost_table(ctx.db)
    table = table[table.dataset == dataset] if dataset else table
    if table.empty:
        st.caption("No run has recorded LLM calls for this dataset yet.")
        return
    known = table.cost.dropna()
    cols = st.columns(4)
    cols[0].metric("Cost (known)", f"${float(known.sum()):.2f}" if len(known) else "–")
    cols[1].metric("Backend calls", int(table.calls.sum()))
    cols[2].metric("From cache", int(table.cached.sum()))
    cols[3].metric("Tokens in / out", f"{int(table.prompt_tokens.fillna(0).sum()):,} / "
                                      f"{int(table.completion_tokens.fillna(0).sum()):,}")
    st.caption("Prices come from each run's config (`prices:`, $ per 1M tokens in and out); cached calls are free; "
               "in-process models (llama.cpp, vLLM offline, extractive) cost 0; an API model without a price is "
               "counted as calls of unknown cost, never as 0.")
    tabs = st.tabs(["By model", "By stage", "By run", "Run × stage × model"])
    frames = [data.cost_by_model(ctx.db, dataset), data.cost_by_stage(ctx.db, dataset),
              data.cost_by_run(ctx.db, dataset), table]
    for tab, frame, name in zip(tabs, frames, ("model", "stage", "run", "run-stage-model"), strict=True):
        with tab:
            st.dataframe(frame, hide_index=True, column_config=COST_COLUMNS)
            ui.downloads(frame, f"cost-by-{name}-{dataset or 'all'}")


PAGES = [st.Page(p.file, title=p.title, icon=p.icon, url_path=url) for url, p in catalog().pages.items()]

navigation = st.navigation([st.Page(home, title="Home", icon=":material/home:", url_path="home", default=True),
                            *PAGES])
ui.require_login()  # serving a team: nothing but a login until the user has one
with data.render(data.db_path()):  # the render's reads share one DuckDB instance; then its code frozen
    st.session_state["_ctx"] = ui.sidebar()
    navigation.run()
