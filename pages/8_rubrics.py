"""Rubric scores (HealthBench): models by rubric score with 95 % CIs, the score per tag (axis, theme), and the
grader against physicians."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages import _data as data
from pages import _ui as ui
from pipeline.models.reference import LABEL as REFERENCE_LABEL
from pipeline.models.reference import is_reference
from pipeline.models.reference import label as model_label

TAG_GROUPS = {"axis": "Axes (axis:)", "theme": "Themes (theme:, dataset themes)", "other": "Other tags"}

ctx = ui.page("Rubric scores (HealthBench)",
              caption="Doctors write, for each question, what a good answer does (each line earns points) and what a "
                      "harmful answer does (each line costs points). A grader model ticks every line for every "
                      "answer; an answer scores the points it earned out of the points a perfect answer earns (below "
                      "0 when it does harmful things), and a model's score is the mean over its answers, kept between "
                      "0 and 1 — exactly as HealthBench scores.")
dataset = ctx.filters.dataset
graders = data.rubric_graders(ctx.db, dataset)
if graders.empty:
    st.info("No rubric grades for this dataset yet. Give its queries a `rubric` (or `rubrics.jsonl`), set "
            "`rubric_grader:` in the run config and run the `rubric` stage:")
    st.code("python -m pipeline run --config configs/full.yaml --stages rubric", language="bash")
    st.stop()
grader_ids = list(graders.grader_id)
if st.session_state.get("rb_grader") not in (None, *grader_ids):
    del st.session_state["rb_grader"]
grader = st.selectbox("Grader", grader_ids, key="rb_grader", bind="query-params",
                      help="The model that decided met / not met for every criterion (`rubric_grader:`).")
if grader.split("/", 1)[0] == "llamacpp" or grader in data.WEAK_JUDGES:
    st.warning(ui.md_escape(f"{grader} runs in process and is far too weak to grade reliably: these rubric scores "
                            "prove the machinery, not the models. Grade with a strong model through an endpoint."),
               icon=":material/warning:")

board = data.rubric_leaderboard(ctx.db, dataset, grader)
if ctx.filters.models:
    board = board[board.model_id.isin(ctx.filters.models)]
if board.empty:
    st.info("No graded response of these models.")
    st.stop()
languages = [lang for lang in dict.fromkeys(board.language)
             if lang == "all" or not ctx.filters.languages or lang in ctx.filters.languages]
language = st.segmented_control("Language", languages, key="rb_lang", bind="query-params", default=languages[0],
                                format_func=lambda c: "all languages" if c == "all" else ui.lang_label(c))
language = language if language in languages else languages[0]
view = board[board.language == language].drop(columns=["language"]).reset_index(drop=True)
has_reference = bool(view.model_id.map(is_reference).any())
view["model_id"] = view.model_id.map(model_label)

st.subheader("Leaderboard")
chart_data = view.dropna(subset=["score"])
base = alt.Chart(chart_data).encode(y=alt.Y("model_id:N", title=None, sort=alt.EncodingSortField("score",
                                                                                                order="descending"),
                                            axis=alt.Axis(labelLimit=420, labelOverlap=False)))
dots = base.mark_point(filled=True, size=70, color="#0f766e").encode(
    x=alt.X("score:Q", scale=alt.Scale(domain=[0, 1]), title="rubric score (clipped mean, 95% CI)"),
    tooltip=["model_id", alt.Tooltip("score:Q", format=".3f"), alt.Tooltip("ci_lo:Q", format=".3f"),
             alt.Tooltip("ci_hi:Q", format=".3f"), "n_scored", "n_unscored"])
bars = base.mark_rule(color="#1f2933", strokeWidth=2).encode(x="ci_lo:Q", x2="ci_hi:Q")
st.altair_chart((bars + dots).properties(height=max(120, 24 * len(chart_data))), width="stretch")
st.dataframe(view, hide_index=True, column_config={
    "score": st.column_config.NumberColumn("score", format="%.3f", help="Mean item score clipped to [0, 1]."),
    "ci_lo": st.column_config.NumberColumn("CI low", format="%.3f"),
    "ci_hi": st.column_config.NumberColumn("CI high", format="%.3f"),
    "bootstrap_std": st.column_config.NumberColumn("bootstrap std", format="%.4f",
                                                   help="HealthBench's bootstrap_std of the clipped mean."),
    "n_items": st.column_config.NumberColumn("items", help="Responses with a current grade."),
    "n_scored": st.column_config.NumberColumn("scored"),
    "n_unscored": st.column_config.NumberColumn("unscored", help="A criterion unparsed or not graded: no score, "
                                                "never 0."),
    "n_unparsed": st.column_config.NumberColumn("unparsed grades", help="Grader outputs that could not be read."),
    "n_ungraded": st.column_config.NumberColumn("ungraded criteria", help="Criteria without a current grade "
                                                "(a stopped run, or a criterion changed since)."),
})
ui.downloads(view, f"rubric-leaderboard-{dataset}-{language}")
st.caption("95% percentile bootstrap interval of the clipped mean. An answer whose grade on any criterion could not "
           "be read is unscored and left out of the mean; it is counted here, never guessed.")
if has_reference:
    st.caption(ui.md_escape(f"{REFERENCE_LABEL}: the dataset's doctor-approved answers graded by the same grader on "
                            "the same rubrics, as HealthBench grades physicians' answers. A reference row to read the "
                            "models against, not a model: it has no rank."))

st.subheader("Score per tag")
tags = data.rubric_tags(ctx.db, dataset, grader)
if ctx.filters.models:
    tags = tags[tags.model_id.isin(ctx.filters.models)]
tags = tags[tags.kind != "overall"]
if tags.empty:
    st.caption("The rubric's criteria carry no tags.")
else:
    group_of = tags.tag.map(lambda t: "axis" if t.startswith("axis:") else
                            "theme" if t.startswith(("theme:", "query_theme:")) else "other")
    present = [g for g in TAG_GROUPS if (group_of == g).any()]
    group = st.segmented_control("Tags", present, key="rb_tags", bind="query-params", default=present[0],
                                 format_func=TAG_GROUPS.get) or present[0]
    shown = tags[group_of == group].assign(label=lambda f: f.tag.str.replace("query_theme:", "dataset theme: "),
                                           model_id=lambda f: f.model_id.map(model_label))
    heat = alt.Chart(shown).mark_rect().encode(
        x=alt.X("label:N", title=None, axis=alt.Axis(orient="top", labelAngle=-30, labelLimit=200)),
        y=alt.Y("model_id:N", title=None, axis=alt.Axis(labelLimit=420, labelOverlap=False)),
        color=alt.Color("score:Q", scale=alt.Scale(domain=[0, 1], scheme="tealblues"), title="score"),
        tooltip=["model_id", "tag", "kind", alt.Tooltip("score:Q", format=".3f"), alt.Tooltip("ci_lo:Q", format=".3f"),
                 alt.Tooltip("ci_hi:Q", format=".3f"), "n_samples"])
    text = heat.mark_text(fontSize=11).encode(text=alt.Text("score:Q", format=".2f"),
                                              color=alt.condition("datum.score > 0.6", alt.value("white"),
                                                                  alt.value("black")))
    st.altair_chart((heat + text).properties(height=max(140, 26 * shown.model_id.nunique())), width="stretch")
    st.caption("An axis tag scores an answer on that tag's criteria only; a theme tag (on every criterion of an "
               "item) and a dataset theme score the items carrying it. Hover a cell for its interval and items.")
    table = shown.drop(columns=["label"]).reset_index(drop=True)
    with st.expander("Table"):
        st.dataframe(table, hide_index=True, column_config={
            c: st.column_config.NumberColumn(format="%.3f") for c in ("score", "ci_lo", "ci_hi", "bootstrap_std")})
        ui.downloads(table, f"rubric-tags-{dataset}-{group}")

st.subheader("Grader vs physicians")
meta = data.grader_meta_eval(ctx.db, dataset, grader)
if meta.empty:
    st.caption("No physician labels of criteria for this grader's grades yet: import them with "
               "`python -m pipeline import-criterion-labels CSV --db …` (item, criterion, met), as HealthBench's "
               "meta-evaluation has them.")
else:
    overall = meta[meta.group == "overall"].iloc[0]
    cols = st.columns(4)
    cols[0].metric("labelled criteria", int(overall.n_criteria))
    cols[1].metric("label pairs", int(overall.n_pairs))
    cols[2].metric("agreement", "–" if pd.isna(overall.agreement) else f"{overall.agreement:.0%}")
    cols[3].metric("macro-F1", "–" if pd.isna(overall.macro_f1) else f"{overall.macro_f1:.2f}")
    per = meta[meta.group != "overall"].melt(id_vars=["group", "category", "n_pairs"],
                                             value_vars=["agreement", "macro_f1"], var_name="figure")
    per = per.dropna(subset=["value"])
    if not per.empty:
        chart = alt.Chart(per).mark_bar().encode(
            x=alt.X("value:Q", scale=alt.Scale(domain=[0, 1]), title=None),
            y=alt.Y("category:N", title=None, axis=alt.Axis(labelLimit=300)),
            color=alt.Color("figure:N", scale=alt.Scale(range=["#0f766e", "#d97706"])),
            yOffset="figure:N", row=alt.Row("group:N", title=None),
            tooltip=["group", "category", "figure", alt.Tooltip("value:Q", format=".2f"), "n_pairs"])
        st.altair_chart(chart.resolve_scale(y="independent"), width="stretch")
    st.dataframe(meta, hide_index=True, column_config={
        c: st.column_config.NumberColumn(format="%.2f") for c in ("agreement", "f1_pos", "f1_neg", "macro_f1")})
    ui.downloads(meta, f"rubric-grader-meta-eval-{dataset}")
    st.caption("As HealthBench's meta-evaluation: every (grader, physician) label pair counts once; macro-F1 is the "
               "mean of the F1 of met and of not met (undefined when a side lacks a class). Unparsed grades are "
               "left out and counted.")
