"""Themes: how models fare on misspelled, code-mixed, non-native, cultural, patient-specific, out-of-KB queries."""

from __future__ import annotations

import altair as alt
import streamlit as st

from pages import _data as data
from pages import _ui as ui
from pipeline.dataset import THEMES
from pipeline.metrics import METRICS

ctx = ui.context()
st.title("Themes")
st.caption("Health-Pariksha §4.3: code-mixed and culturally relevant queries challenged the models; misspellings "
           "more so. Scores per theme and model; a query may carry several themes.")
ui.require_data(ctx)
ui.judge_banner(ctx)
if ctx.judge is None:
    st.stop()

c1, c2 = st.columns([1, 3])
metric = c1.selectbox("Score", ui.metric_options(), key="th_metric", bind="query-params",
                      help=ui.metric_help())
weights = data.weights_tuple(data.run_weights(ctx.db, ctx.filters.dataset))
scores = data.theme_table(data.theme_scores(ctx.db, ctx.filters, ctx.judge), weights)
if scores.empty:
    st.info("No judged responses match the filters.")
    st.stop()
languages = [lang for lang in ui.languages_in_view(ctx) if lang in set(scores.language)]
language = c2.segmented_control("Language", languages, key="th_lang",
                                bind="query-params", default=languages[0]) or languages[0]
view = scores[scores.language == language]
chart = alt.Chart(view.assign(theme=view.theme.map(ui.theme_label))).mark_rect().encode(
    x=alt.X("theme:N", title=None, axis=alt.Axis(orient="top", labelAngle=0)),
    y=alt.Y("model_id:N", title=None, sort=alt.EncodingSortField(metric, op="mean", order="descending"),
            axis=alt.Axis(labelLimit=420, labelOverlap=False)),
    color=alt.Color(f"{metric}:Q", scale=alt.Scale(domain=[0, 2], scheme="tealblues"), title=metric),
    tooltip=["model_id", "theme", alt.Tooltip(f"{metric}:Q", format=".2f"), "n"],
)
text = chart.mark_text(fontSize=11).encode(text=alt.Text(f"{metric}:Q", format=".2f"),
                                           color=alt.condition(f"datum.{metric} > 1.2", alt.value("white"),
                                                               alt.value("black")))
st.altair_chart((chart + text).properties(height=max(160, 22 * view.model_id.nunique())), width="stretch")
counts = view.groupby("theme")["n"].max()
per_theme = ", ".join(f"{ui.theme_label(t)} {n}" for t, n in counts.items())
st.caption(ui.md_escape(f"Scored queries per theme: {per_theme}"))
with st.expander("Table"):
    st.dataframe(view.drop(columns=["language"]), hide_index=True,
                 column_config={m: st.column_config.NumberColumn(format="%.2f") for m in ("AGG", *METRICS)})

st.subheader("Examples")
present = set(view.theme)
themes = [t for t in THEMES if t in present] + (["(none)"] if "(none)" in present else [])
theme = st.selectbox("Theme", themes, key="th_theme", bind="query-params")
page = st.number_input("Example page", min_value=1, value=1, step=1, key="th_page", bind="query-params")
examples = data.theme_examples(ctx.db, ctx.filters.with_(languages=(language,)), ctx.judge, theme, 3,
                            (int(page) - 1) * 3)
if examples.empty:
    st.info("No more examples of this theme.")
for query_id, group in examples.groupby("query_id", sort=False):
    first = group.iloc[0]
    with st.container(border=True):
        st.markdown(f"**{ui.md_escape(query_id)}** · {ui.md_escape(ui.lang_label(first.language))}")
        left, right = st.columns(2)
        with left:
            ui.show_text("Patient query", first.query)
        with right:
            if isinstance(first.query_en, str) and first.query_en:
                ui.show_text("English rendering", first.query_en)
        ui.show_text("Ground truth", first.gt_response)
        answers = group[["model_id", "text", *METRICS]].rename(columns={"text": "response"})
        st.dataframe(answers, hide_index=True, height=min(36 * (len(answers) + 1) + 3, 900), column_config={
            "response": st.column_config.TextColumn(width="large"),
            **{m: st.column_config.NumberColumn(format="%.1f", width="small") for m in METRICS}})
