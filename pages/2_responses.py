"""Response browser (for doctors): each answer with its query, ground truth, chunks, scores and critique.

The page state lives in the URL (every control is bound to a query parameter), so a link reopens
the same view. Items are fetched one page at a time (SQL LIMIT/OFFSET).
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import streamlit as st

from pages import _data as data
from pages import _ui as ui
from pipeline.metrics import METRICS

ctx = ui.page("Response browser", judge="shown")

c1, c2, c3, c4 = st.columns([3, 1.2, 1.6, 1])
search = c1.text_input("Search query, English rendering and response", key="rb_q", bind="query-params",
                       placeholder="e.g. head bath, drops, सर्जरी")
metric = c2.selectbox("Score filter", ["any", *METRICS], key="rb_metric", bind="query-params",
                      disabled=ctx.judge is None, help="Show only responses whose judge score on this metric "
                      "(mean over samples) lies in the range. " + ui.metric_help())
score_range = c3.slider("Score range", 0.0, 2.0, (0.0, 2.0), 0.5, key="rb_range", bind="query-params",
                        disabled=metric == "any")
unparsed = c3.checkbox("Only judge outputs that failed to parse", key="rb_unparsed", bind="query-params",
                       disabled=metric == "any")
page_size = c4.selectbox("Per page", [5, 10, 20], index=1, key="rb_size", bind="query-params")

browse = data.Browse(filters=ctx.filters, judge=ctx.judge, metric=None if metric == "any" else metric,
                  score_min=float(score_range[0]), score_max=float(score_range[1]), unparsed_only=bool(unparsed),
                  search=search or "", grader=st.session_state.get("rb_grader") or st.query_params.get("rb_grader"))
try:  # the page asked for: the widget's value, else the URL's (before the widget is drawn)
    wanted = max(1, int(st.session_state.get("rb_page") or st.query_params.get("rb_page") or 1))
except ValueError:
    wanted = 1
view = data.browse_view(ctx.db, browse, page_size, (wanted - 1) * page_size)
total, items, details, chunks = view["total"], view["page"], view["details"], view["chunks"]
matches = view["matches"]
if not matches.complete and st.session_state.get("rb_count_all"):
    total = data.browse_count(ctx.db, browse)  # what the button below asked for
    matches = data.Matches(total)
n_pages = max(1, math.ceil(total / page_size))
if view["offset"] == 0 and wanted != 1:
    st.session_state["rb_page"] = 1  # past the last page (the filters changed): back to the first
if matches.complete:
    st.caption(f"{total:,} responses match; {n_pages:,} page{'s' * (n_pages != 1)} of {page_size}.")
else:
    c_count, c_button = st.columns([4, 1])
    c_count.caption(f"At least {total:,} responses match: {total:,} among the first {matches.queries:,} of "
                    f"{matches.of:,} queries, which fill {n_pages:,} pages of {page_size}. Counting every match "
                    "reads every response.")
    c_button.toggle("Count all", key="rb_count_all", help="Count every matching response, to page through all.")
if len(view["graders"]) > 1:
    st.selectbox("Rubric grader", view["graders"], index=view["graders"].index(view["grader"]), key="rb_grader",
                 bind="query-params", help="Whose met / not met verdicts the rubric criteria below show.")
st.pagination(n_pages, key="rb_page", bind="query-params", max_visible_pages=9)
if items.empty:
    st.info("No responses match these filters.")
    st.stop()


def _rows(df: pd.DataFrame, query_id: str, model_id: str) -> pd.DataFrame:
    if df.empty:
        return df
    return df[(df.query_id == query_id) & (df.model_id == model_id)]


def show_chunks(query_id: str) -> None:
    mine = chunks[chunks.query_id == query_id]
    if mine.empty:
        st.caption("No stored retrieval (closed-book dataset or not retrieved).")
        return
    recall = mine.recall.iloc[0]
    st.caption(ui.md_escape(f"Searched with: {mine.search_text.iloc[0]}"
                            + ("" if pd.isna(recall) else f" · recall of the ground truth's chunks {recall:.0%}")))
    for row in mine.itertuples():
        dated = f", updated {row.updated:%Y-%m-%d}" if row.slot == "update" and not pd.isna(row.updated) else ""
        head = f"{'KB update' if row.slot == 'update' else 'Raw chunk'} {row.pos}: {row.chunk_id}{dated} — {row.title}"
        st.markdown(f"**{ui.md_escape(head)}**")
        st.text(row.text if isinstance(row.text, str) else "(chunk not in the knowledge base)", width="stretch")


def current(df: pd.DataFrame) -> pd.DataFrame:
    """The rows that scored the response text now stored (older ones never count)."""
    return df[df.current.astype(bool)] if not df.empty else df


def stale_note(df: pd.DataFrame, what: str) -> None:
    stale = len(df) - len(current(df))
    if stale:
        st.caption(f"{stale} {what} of an earlier text of this response not shown (they no longer count).")


def show_scores(query_id: str, model_id: str) -> None:
    every = _rows(details["judgments"], query_id, model_id)
    scores = current(every)
    stale_note(every, "judgments")
    if scores.empty:
        st.caption("Not judged.")
        return
    table = scores.assign(score=scores.score.map(ui.fmt_score))
    ui.dataframe(table[["judge_id", "metric", "sample", "score", "parse_ok", "justification"]], hide_index=True,
                 column_config={"justification": st.column_config.TextColumn(width="large")})
    for row in scores[~scores.parse_ok.astype(bool)].itertuples():
        st.caption(ui.md_escape(f"Raw judge output for {row.metric} (sample {row.sample}), which did not parse:"))
        st.code(row.raw_output or "(empty)", language=None, wrap_lines=True)


def show_critique(query_id: str, model_id: str) -> None:
    every = _rows(details["critiques"], query_id, model_id)
    critiques = current(every)
    stale_note(every, "critiques")
    if critiques.empty:
        st.caption("No Med-CoDE critique.")
        return
    for row in critiques.itertuples():
        st.caption(ui.md_escape(f"Critic {row.critic_id} ({row.classifier}): disagreement {row.label}"))
        st.text(row.critique or f"(no critique: {row.error or 'empty'})", width="stretch")
        dist = pd.DataFrame({"class": [data.DISAGREEMENT_LABELS[p] for p in data.DISAGREEMENT],
                             "p": [getattr(row, p) for p in data.DISAGREEMENT]})
        st.altair_chart(alt.Chart(dist).mark_bar().encode(
            x=alt.X("p:Q", scale=alt.Scale(domain=[0, 1]), title="probability"),
            y=alt.Y("class:N", sort=list(dist["class"]), title=None),
            color=alt.Color("class:N", sort=list(dist["class"]), legend=None,
                            scale=alt.Scale(range=["#15803d", "#84cc16", "#f59e0b", "#b91c1c"])),
            tooltip=["class", alt.Tooltip("p:Q", format=".2f")]).properties(height=110), width="stretch")


def show_rubric(query_id: str, model_id: str) -> None:
    if view["grader"] is None:
        st.caption("No rubric grades for this query.")
        return
    item = data.rubric_item(ctx.db, ctx.filters.dataset, query_id, model_id, view["grader"])
    if item["criteria"].empty:
        st.caption("No rubric grades for this response.")
        return
    table = item["criteria"].assign(tags=[", ".join(t) for t in item["criteria"].tags])
    if item["n_ungraded"] == len(table):
        st.caption(ui.md_escape(f"Not graded by {view['grader']} (or only an earlier text). The rubric's criteria:"))
        ui.dataframe(table[["criterion", "points", "tags"]], hide_index=True,
                     column_config={"criterion": st.column_config.TextColumn(width="large")})
        return
    score = "unscored" if item["score"] is None else f"{item['score']:.2f}"
    st.caption(ui.md_escape(f"Rubric score {score} (grader {view['grader']}): {item['achieved']:g} of "
                            f"{item['possible']:g} positive points" + (f"; {item['n_unparsed']} unparsed" if
                            item["n_unparsed"] else "") + (f"; {item['n_ungraded']} not graded (or graded on "
                            "an earlier text or criterion)" if item["n_ungraded"] else "")
                            + ". Unscored when any criterion lacks a current, parsed grade — never 0."))
    ui.dataframe(table[["criterion", "points", "status", "explanation", "tags"]], hide_index=True,
                 column_config={"criterion": st.column_config.TextColumn(width="large"),
                                "explanation": st.column_config.TextColumn("grader's explanation", width="large")})


def show_prompt(query_id: str, model_id: str) -> None:
    prompts = details["prompts"]
    mine = prompts[(prompts.query_id == query_id) & (prompts.model_id == model_id)]
    if mine.empty:
        return
    row = mine.iloc[0]
    st.caption(ui.md_escape(data.describe_prompt(row)))
    if row.messages:
        label = "as the model was sent it" if row.matches else "as these files and chunks give it now"
        st.caption(ui.md_escape(f"The prompt, {label}:"))
        st.text(data.prompt_text(row.messages), width="stretch")


def echo_flag(query_id: str, model_id: str) -> str | None:
    """The failed prompt-echo check of a response (its detail), or None."""
    safety = _rows(details["safety"], query_id, model_id)
    if safety.empty:
        return None
    echo = safety[(safety.check_name == "prompt_echo") & ~safety.passed.astype("boolean").fillna(True)]
    return None if echo.empty else str(echo.detail.iloc[0])


def show_safety(query_id: str, model_id: str) -> None:
    safety = _rows(details["safety"], query_id, model_id)
    lexical = _rows(details["lexical"], query_id, model_id)
    if safety.empty and lexical.empty:
        st.caption("No safety checks or lexical scores.")
        return
    if not safety.empty:
        ui.dataframe(safety[["check_name", "passed", "detail"]], hide_index=True)
    if not lexical.empty:
        ui.dataframe(lexical[list(data.LEXICAL)].rename(columns=data.LEXICAL_LABELS), hide_index=True)


for item in items.itertuples():
    with st.container(border=True):
        scores = current(_rows(details["judgments"], item.query_id, item.model_id))
        summary = " · ".join(f"{m} {ui.fmt_score(scores[scores.metric == m].score.mean())}"
                             for m in METRICS if not scores[scores.metric == m].empty)
        themes = ", ".join(ui.theme_label(t) for t in (item.themes if item.themes is not None else []))
        st.markdown(f"**{ui.md_escape(item.query_id)}** · {ui.md_escape(ui.lang_label(item.language))} · "
                    f"*{ui.md_escape(item.model_id)}*" + (f" · {ui.md_escape(themes)}" if themes else "")
                    + (f" · {ui.md_escape(summary)}" if summary else ""))
        echo = echo_flag(item.query_id, item.model_id)
        if echo:
            st.warning(ui.md_escape(f"Prompt echo: the response {echo} word for word (Health-Pariksha §4.1)."),
                       icon=":material/content_copy:")
        left, right = st.columns(2)
        with left:
            ui.show_query(item)
        with right:
            if isinstance(item.error, str) and item.error:
                st.error(ui.md_escape(f"Generation failed: {item.error}"))
            else:
                ui.show_text(f"Response of {item.model_id}", item.text, empty="(empty response)")
                renderings = _rows(details["translations"], item.query_id, item.model_id)
                for rendering in current(renderings).itertuples():
                    if isinstance(rendering.error, str) and rendering.error:
                        st.warning(ui.md_escape(f"English rendering by {rendering.translator_id} failed: "
                                                f"{rendering.error}; it wrote: {rendering.text}"))
                    else:
                        ui.show_machine_rendering(rendering.text, rendering.translator_id)
                stale_note(renderings, "English renderings")
        with st.expander("Prompt"):
            show_prompt(item.query_id, item.model_id)
        with st.expander("Retrieved chunks and KB updates"):
            show_chunks(item.query_id)
        with st.expander("Judge scores and justifications"):
            show_scores(item.query_id, item.model_id)
        with st.expander("Med-CoDE critique"):
            show_critique(item.query_id, item.model_id)
        with st.expander("Safety checks and lexical scores"):
            show_safety(item.query_id, item.model_id)
        if item.has_rubric:  # read when opened (on_change="rerun": the expander knows whether it is open)
            rubric = st.expander("Rubric criteria (met / not met)", key=f"rb_rubric|{item.query_id}|{item.model_id}",
                                 on_change="rerun")
            if rubric.open:
                with rubric:
                    show_rubric(item.query_id, item.model_id)

st.divider()
st.subheader("Two models side by side")
query_ids = list(dict.fromkeys(items.query_id))
cq = st.selectbox("Query", query_ids, key="rb_cq", bind="query-params",
                  help="Any query of this page of results.")
pair_view = data.query_view(ctx.db, ctx.filters.dataset, cq)
answers = pair_view["responses"]
preferred = [m for m in ctx.filters.models if m in set(answers.model_id)]
models = preferred + [m for m in answers.model_id if m not in preferred]
if len(models) < 2:
    st.caption("Only one model answered this query.")
else:
    pick_a, pick_b = st.columns(2)
    model_a = pick_a.selectbox("Model A", models, index=0, key="rb_ma", bind="query-params")
    model_b = pick_b.selectbox("Model B", models, index=1, key="rb_mb", bind="query-params")
    query_row = items[items.query_id == cq].iloc[0]
    ui.show_text("Patient query", query_row.query)
    ui.show_text("Ground truth", query_row.gt_response)
    out_a, out_b = st.columns(2)
    for column, model in ((out_a, model_a), (out_b, model_b)):
        with column:
            answer = answers[answers.model_id == model].iloc[0]
            if isinstance(answer.error, str) and answer.error:
                st.error(ui.md_escape(f"Generation failed: {answer.error}"))
            else:
                ui.show_text(model, answer.text, empty="(empty response)")
            js = pair_view["judgments"]
            js = js[(js.model_id == model) & (js.judge_id == ctx.judge)] if not js.empty else js
            if not js.empty:
                ui.dataframe(js.assign(score=js.score.map(ui.fmt_score))[["metric", "score", "justification"]],
                             hide_index=True)
