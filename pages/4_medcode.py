"""Med-CoDE: the critic's disagreement distribution (None/Low/Moderate/High) per model, by language and dataset."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages import _data as data
from pages import _ui as ui

CLASS_COLOURS = ["#15803d", "#84cc16", "#f59e0b", "#b91c1c"]

ctx = ui.context()
st.title("Med-CoDE disagreement")
st.caption("A critic writes a critique of each response against the ground truth; a classifier turns it into a "
           "probability over None, Low, Moderate and High disagreement. Averaged per model: an ideal model has "
           "the most mass on None and the least on High.")
ui.require_data(ctx)

all_datasets = st.toggle("All datasets", value=True, key="mc_all", bind="query-params",
                         help="Off: only the dataset chosen in the sidebar.")
scope = ctx.filters.with_(dataset=None) if all_datasets else ctx.filters
view = data.medcode_view(ctx.db, scope, ctx.judge)
dist = view["distribution"]
if dist.empty:
    st.info("No Med-CoDE critiques match the filters: run the `medcode` stage.")
    st.stop()

long = dist.melt(id_vars=["dataset", "language", "model_id", "critic_id", "n"], value_vars=list(data.DISAGREEMENT),
                 var_name="class", value_name="p")
long["class"] = long["class"].map(data.DISAGREEMENT_LABELS)
long["language"] = long.language.map(ui.lang_label)
order = list(data.DISAGREEMENT_LABELS.values())
for dataset, part in long.groupby("dataset", sort=False):
    st.markdown(f"**{ui.md_escape(dataset)}**")
    n_languages = part.language.nunique()
    bars = alt.Chart(part).mark_bar().encode(
        x=alt.X("sum(p):Q", title="mean probability", scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("model_id:N", title=None, axis=alt.Axis(labelLimit=300, labelOverlap=False)),
        color=alt.Color("class:N", sort=order, scale=alt.Scale(domain=order, range=CLASS_COLOURS),
                        title="disagreement"),
        order=alt.Order("class_order:Q"),
        tooltip=["language", "model_id", "class", alt.Tooltip("p:Q", format=".2f"), "n"],
    ).transform_calculate(class_order="indexof(['None','Low','Moderate','High'], datum['class'])")
    st.altair_chart(bars.properties(height=max(60, 18 * part.model_id.nunique()),
                                    width=max(110, 620 // max(1, n_languages)))
                    .facet(column=alt.Column("language:N", title=None)), width="content")
with st.expander("Distribution table"):
    st.dataframe(dist, hide_index=True, column_config={
        p: st.column_config.NumberColumn(data.DISAGREEMENT_LABELS[p], format="%.2f") for p in data.DISAGREEMENT})

st.subheader("Correlation with the judge and lexical scores")
if ctx.judge is None:
    st.caption("No judge scores yet; correlations with lexical scores only.")
corr = data.medcode_correlations(ctx.db, ctx.filters, ctx.judge)
long_corr = corr.melt(id_vars=["quantity"], var_name="score", value_name="r")
heat = alt.Chart(long_corr).mark_rect().encode(
    x=alt.X("score:N", sort=list(corr.columns[1:]), title=None),
    y=alt.Y("quantity:N", title=None),
    color=alt.Color("r:Q", scale=alt.Scale(domain=[-1, 1], scheme="redblue"), title="Pearson r"),
    tooltip=["quantity", "score", alt.Tooltip("r:Q", format=".2f")],
)
st.altair_chart((heat + heat.mark_text().encode(text=alt.Text("r:Q", format=".2f"), color=alt.value("black")))
                .properties(height=140), width="stretch")
st.caption("Pearson r over items of the sidebar's dataset and filters (n per score: "
           + ", ".join(f"{k} {v}" for k, v in corr.attrs.get("n", {}).items())
           + "). E[disagreement] = 0·None + 1·Low + 2·Moderate + 3·High. Med-CoDE reports P(None) rising with "
           "accuracy and a positive link between METEOR and P(Low).")

st.subheader("Beside Med-CoDE Table 2")
ours = view["summary"]
left, right = st.columns(2)
fmt = {c: st.column_config.NumberColumn(format="%.2f")
       for c in ("meteor", "rouge_l", "llm_accuracy", *data.DISAGREEMENT)}
with left:
    st.markdown(f"**This database** (judge accuracy = share of items with {data.ACCURACY_METRIC} = 2)")
    st.dataframe(ours, hide_index=True, column_config=fmt)
with right:
    st.markdown("**Med-CoDE, published** (LLaMA-3 as the accuracy judge)")
    paper = data.reference_table("medcode_table2")
    st.dataframe(paper, hide_index=True, column_config=fmt)
    st.caption("Med-CoDE Table 2 as printed (data/reference/medcode_table2.csv); some rows do not sum to 1.")


def stacked(table: pd.DataFrame) -> alt.Chart:
    """Stacked disagreement bars, one per (model, dataset) row of a Table-2-like table."""
    long_t = table.melt(id_vars=["model", "dataset"], value_vars=list(data.DISAGREEMENT), var_name="class",
                        value_name="p")
    long_t["class"] = long_t["class"].map(data.DISAGREEMENT_LABELS)
    return alt.Chart(long_t).mark_bar().encode(
        x=alt.X("sum(p):Q", title="mean probability"),
        y=alt.Y("label:N", title=None, axis=alt.Axis(labelLimit=300, labelOverlap=False)),
        color=alt.Color("class:N", sort=order, scale=alt.Scale(domain=order, range=CLASS_COLOURS), legend=None),
        order=alt.Order("class_order:Q"),
        tooltip=["model", "dataset", "class", alt.Tooltip("p:Q", format=".2f")],
    ).transform_calculate(label="datum.model + ' · ' + datum.dataset",
                          class_order="indexof(['None','Low','Moderate','High'], datum['class'])"
                          ).properties(height=max(60, 18 * len(table)))


if not ours.empty:
    left, right = st.columns(2)
    left.altair_chart(stacked(ours), width="stretch")
    right.altair_chart(stacked(paper), width="stretch")
