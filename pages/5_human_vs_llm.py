"""Human vs LLM: agreement between human labels and the judge, rankings side by side, and annotation."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages import _data as data
from pages import _ui as ui
from pipeline.dataset.human_labels import save_label
from pipeline.metrics import METRICS

SCORE_LABELS = {0: "0 — bad", 1: "1 — medium", 2: "2 — good"}
DEFAULT_METRIC = METRICS.index(data.PAPER_METRIC) if data.PAPER_METRIC in METRICS else 0

ctx = ui.context()
st.title("Human vs LLM judge")
ui.require_data(ctx)
view = st.segmented_control("View", ["Agreement", "Annotate"], default="Agreement", key="hv_view",
                            bind="query-params") or "Agreement"


def agreement_view() -> None:
    ui.judge_banner(ctx)
    if ctx.judge is None:
        return
    metric = st.selectbox("Metric", list(METRICS), index=DEFAULT_METRIC, key="hv_metric", bind="query-params",
                          help="Health-Pariksha compared humans and the judge on Semantic Similarity. "
                          + ui.metric_help())
    view = data.agreement_view(ctx.db, ctx.filters, ctx.judge, metric)
    table = view["table"]
    if table.empty:
        st.info("No human labels for this metric and these filters yet. Import a CSV with "
                "`python -m pipeline import-human-labels`, or label items in the Annotate view.")
        return
    st.caption("Percentage agreement (PA): share of items where the human and the judge gave the same score "
               "(the judge's samples averaged and rounded). Weighted κ: Cohen's kappa with linear weights "
               "(1 = perfect, 0 = chance). The paper found PA above 0.7 on average.")
    table = table.assign(language=table.language.map(ui.lang_label))
    st.dataframe(table, hide_index=True, column_config={
        "agreement": st.column_config.NumberColumn("% agreement", format="percent"),
        "kappa": st.column_config.NumberColumn("weighted κ", format="%.2f")})
    per_model = table[table.model_id != data.ALL_MODELS]
    if not per_model.empty:
        per_model = per_model.assign(label=per_model.language + " · " + per_model.model_id)
        bars = alt.Chart(per_model).mark_bar(color="#0f766e").encode(
            x=alt.X("agreement:Q", scale=alt.Scale(domain=[0, 1]), title="percentage agreement"),
            y=alt.Y("label:N", title=None, sort=None, axis=alt.Axis(labelLimit=460, labelOverlap=False)),
            tooltip=["language", "model_id", "n", alt.Tooltip("agreement:Q", format=".0%"),
                     alt.Tooltip("kappa:Q", format=".2f")])
        rule = alt.Chart(pd.DataFrame({"x": [0.7]})).mark_rule(color="#b91c1c", strokeDash=[4, 3]).encode(x="x:Q")
        st.altair_chart((bars + rule).properties(height=max(120, 20 * len(per_model))), width="stretch")
        st.caption("Dashed line: 0.7, the paper's average agreement.")

    st.subheader("Rankings: human vs judge")
    ranks, summary = view["ranks"], view["summary"]
    paper = data.reference_table("table7")
    for language, group in ranks.groupby("language", sort=False):
        st.markdown(f"**{ui.md_escape(ui.lang_label(language))}**")
        left, right = st.columns(2)
        with left:
            compact = group.assign(model=group.model_id.map(data.short_name))[
                ["model", "human_rank", "human_mean", "llm_rank", "llm_mean", "n"]]
            st.dataframe(compact, hide_index=True, column_config={
                "model": st.column_config.TextColumn("model", help="Last part of the model id."),
                "human_mean": st.column_config.NumberColumn("human mean", format="%.2f"),
                "llm_mean": st.column_config.NumberColumn("judge mean", format="%.2f")})
            row = summary[summary.language == language].iloc[0]
            tau = "" if pd.isna(row.kendall_tau) else f" Kendall's τ = {row.kendall_tau:.2f}."
            st.caption(("Identical rankings." if row.identical else "The rankings differ.") + tau)
        with right:
            ref = paper[paper.language == language].drop(columns=["language"])
            if ref.empty:
                st.caption("No published ranking for this language.")
            else:
                st.dataframe(ref, hide_index=True)
                st.caption("Health-Pariksha Table 7 (Semantic Similarity, GPT-4o judge).")


def annotate_view() -> None:
    st.caption("Score responses yourself; each label is saved at once (source 'app') and the agreement figures "
               "update. Items come in a fixed shuffled order, filtered by the sidebar.")
    c1, c2 = st.columns([2, 1])
    annotator = c1.text_input("Your name", key="hv_annotator", bind="query-params", max_chars=60,
                              placeholder="e.g. dr-rao")
    metric = c2.selectbox("Metric to score", list(METRICS), index=DEFAULT_METRIC, key="hv_ann_metric",
                          bind="query-params", help=ui.metric_help())
    if not annotator or not annotator.strip():
        st.info("Enter your name to get a queue of unlabelled items.")
        return
    annotator = annotator.strip()
    skipped = tuple(st.session_state.setdefault("hv_skipped", []))
    done, total, queue = data.annotation_state(ctx.db, ctx.filters, annotator, metric, skipped)
    st.progress(done / total if total else 0.0,
                text=ui.md_escape(f"{done} of {total} items labelled by {annotator} on {metric}"))
    if queue.empty:
        st.success("Nothing left to label within these filters.")
        return
    item = queue.iloc[0]
    with st.container(border=True):
        st.markdown(f"**{ui.md_escape(item.query_id)}** · {ui.md_escape(ui.lang_label(item.language))} · "
                    f"*{ui.md_escape(item.model_id)}*")
        left, right = st.columns(2)
        with left:
            ui.show_query(item)
        with right:
            ui.show_text("Model response", item.text, empty="(empty response)")
    with st.form("hv_label_form", clear_on_submit=True):
        score = st.radio(f"{ui.metric_label(metric)} score", [0, 1, 2], format_func=SCORE_LABELS.get,
                         horizontal=True, index=None, key="hv_score")
        comment = st.text_area("Comment (optional)", key="hv_comment", max_chars=2000)
        save = st.form_submit_button("Save label", type="primary")
    if st.button("Skip this item"):
        st.session_state["hv_skipped"] = [*skipped, f"{item.query_id}|{item.model_id}"]
        st.rerun()
    if save:
        if score is None:
            st.error("Choose a score first.")
            return
        save_label(ctx.db, dataset=item.dataset, query_id=item.query_id, model_id=item.model_id, metric=metric,
                   annotator=annotator, score=int(score), comment=comment)
        data.clear_caches()
        st.session_state["hv_last_saved"] = f"{item.query_id} · {item.model_id}: {metric} = {score}"
        st.rerun()
    if st.session_state.get("hv_last_saved"):
        st.caption(ui.md_escape(f"Saved: {st.session_state['hv_last_saved']}"))


if view == "Agreement":
    agreement_view()
else:
    annotate_view()
