"""Dataset: how the dataset was built from raw material — its source documents (chunks, pages, tokens, flags),
the knowledge base's growth by update date, the excluded chatbot messages by reason (identifiers masked, as
stored) and the kept queries by language, script and theme (``ingest-kb``, ``curate-queries``)."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from pages import _data as data
from pages import _ui as ui

SHOWN = 100  # excluded messages listed per reason

ctx = ui.page("Dataset",
              caption="Health-Pariksha §3.1–3.2: a KB from the team's documents, chunked to at most 1,000 tokens and "
                      "grown by doctor-approved answers; queries from the chatbot log without duplicates, identifiers "
                      "or non-health messages. Built with `python -m pipeline ingest-kb` and `curate-queries` "
                      "(docs/ingest.md).")
# A dataset is just a folder: the one the results database says the chosen dataset came from, or any folder under
# data/; no results database is needed.
from_db = data.dataset_folder(ctx.db, ctx.filters.dataset) if ctx.exists and ctx.filters.dataset else None
folders = list(dict.fromkeys([*([str(Path(from_db).resolve())] if from_db else []), *data.dataset_folders()]))
if not folders:
    st.info("No dataset folder here: make one with `python -m pipeline ingest-kb` and `curate-queries` "
            "(docs/ingest.md).")
    st.stop()
chosen = st.selectbox("Dataset folder", folders, key=f"ds_folder|{from_db}", format_func=lambda f: Path(f).name,
                      help="The folder of the dataset chosen in the sidebar first, then every dataset folder "
                           "under data/.")
view = data.folder_view(chosen)
if view["folder"] is None:
    st.info(ui.md_escape(f"The folder {chosen} is not on this machine."))
    st.stop()
name = Path(view["folder"]).name
st.caption(ui.md_escape(f"Folder: {view['folder']}"))
tokenizer = view["report"]["ingest"].get("tokenizer")

st.subheader("Source documents")
sources = view["sources"]
if sources.empty:
    st.info("No chunks: a closed-book dataset, or no kb.jsonl.")
else:
    shown = sources.drop(columns=["engine"]) if sources.engine.isna().all() else sources
    # a grid, not st.table: a table's cells are Markdown, and a file's name is the team's text (a link, an image)
    st.dataframe(shown.rename(columns={"max_tokens": "largest chunk"}), hide_index=True)
    ui.downloads(sources, f"sources-{name}")
    flagged = sources[sources["flags"].astype(bool)]
    for row in flagged.itertuples():
        st.warning(ui.md_escape(f"{row.file}: {row.flags}"), icon=":material/flag:")
    if tokenizer:
        max_tokens = view["report"]["ingest"].get("max_tokens")
        st.caption(ui.md_escape(f"Tokens counted by {tokenizer}; at most {max_tokens} per chunk."))
notes = view["page_notes"]
if not notes.empty:
    st.markdown("**Pages read by OCR, converted from a legacy font or flagged** (each with its flag and the engine's "
                "confidence; check these pages against the source before trusting their chunks)")
    ui.dataframe(notes, hide_index=True, name=f"page-notes-{name}", column_config={
        "confidence": st.column_config.NumberColumn("confidence", format="%.2f")})
tokens = view["tokens"]
if not tokens.empty:
    st.altair_chart(alt.Chart(tokens).mark_bar().encode(
        x=alt.X("tokens:Q", bin=alt.Bin(maxbins=20), title="tokens per chunk"),
        y=alt.Y("count():Q", title="chunks"), color=alt.Color("file:N", title="source"),
        tooltip=["file", "count()"]).properties(height=220), width="stretch")

st.subheader("Knowledge-base growth")
growth = view["growth"]
if growth.empty:
    st.caption("No update chunks: the KB is as the documents gave it.")
else:
    st.altair_chart(alt.Chart(growth).mark_line(point=True, interpolate="step-after").encode(
        x=alt.X("date:T", title="update date"), y=alt.Y("kb_chunks:Q", title="KB chunks"),
        tooltip=[alt.Tooltip("date:T"), "updates", "kb_chunks"]).properties(height=200), width="stretch")
    st.caption("A query sees the KB as it stood when it was asked: updates approved strictly before its asked_on, "
               "never the update made from its own message.")

st.subheader("Excluded messages")
excluded = view["excluded"]
curate_report = view["report"]["curate"]
if curate_report:
    st.caption(ui.md_escape(
        f"{curate_report.get('rows', 0)} log rows: {curate_report.get('queries', 0)} queries with an approved "
        f"ground truth, {curate_report.get('without_ground_truth', 0)} kept without one, {len(excluded)} excluded; "
        f"{len(curate_report.get('near_duplicates', []))} near-duplicates flagged (each with the earlier message it "
        f"repeats); identifiers: "
        f"{curate_report.get('pii')}."))
if excluded.empty:
    st.caption("No excluded messages recorded (excluded.jsonl).")
else:
    counts = excluded.groupby(["reason", "detail"], dropna=False).size().reset_index(name="messages")
    c1, c2 = st.columns([1, 2])
    c1.dataframe(counts, hide_index=True)
    reasons = sorted(excluded.reason.dropna().unique())
    chosen = c2.segmented_control("Reason", reasons, key="ds_reason", bind="query-params",
                                 default=reasons[0]) or reasons[0]
    chosen = chosen if chosen in reasons else reasons[0]
    shown = excluded[excluded.reason == chosen]
    c2.caption(f"Messages excluded as {chosen} (identifiers masked as stored; first {SHOWN} of {len(shown)})")
    for row in shown.head(SHOWN).itertuples():
        c2.text(f"row {row.row} · {row.asked_on or 'no date'} · {row.detail}: {row.text or '(empty)'}")

st.subheader("Queries by language, script and theme")
queries = view["queries"]
if queries.empty:
    st.caption("No queries.")
else:
    c1, c2, c3 = st.columns(3)
    by_lang = queries.groupby(["language", "ground_truth"]).size().reset_index(name="queries")
    c1.dataframe(by_lang, hide_index=True)
    c2.dataframe(queries.groupby(["language", "script"]).size().reset_index(name="queries"), hide_index=True)
    themes = queries.explode("themes").dropna(subset=["themes"])
    theme_counts = (themes.assign(theme=themes.themes.map(ui.theme_label)).groupby("theme").size()
                    .reset_index(name="queries") if not themes.empty else pd.DataFrame(columns=["theme", "queries"]))
    c3.dataframe(theme_counts, hide_index=True)
