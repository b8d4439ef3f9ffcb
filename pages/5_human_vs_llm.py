"""Human vs LLM: agreement between human labels and the judge, rankings side by side, and annotation."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages import _data as data
from pages import _ui as ui
from pipeline.labels.human_labels import save_label
from pipeline.metrics import METRICS

SCORE_LABELS = {0: "0 — bad", 1: "1 — medium", 2: "2 — good"}
DEFAULT_METRIC = METRICS.index(data.PAPER_METRIC) if data.PAPER_METRIC in METRICS else 0

NO_PLAN = "(no plan: every label)"

ctx = ui.page("Human vs LLM judge")
top_left, top_right = st.columns([1, 2])
view = top_left.segmented_control("View", ["Agreement", "Annotate"], default="Agreement", key="hv_view",
                                  bind="query-params") or "Agreement"
plans = data.plans(ctx.db, ctx.filters.dataset)
plan_ids = [NO_PLAN, *plans.plan_id]
if st.session_state.get("hv_plan") not in (None, *plan_ids):
    del st.session_state["hv_plan"]  # a plan of another dataset (the sidebar changed)
plan_id = top_right.selectbox(
    "Human-evaluation plan", plan_ids, key="hv_plan", bind="query-params",
    help="A sample drawn by `python -m pipeline human-eval plan` (Health-Pariksha §3.5.2: every Indic query plus a "
         "seeded stratified sample of English ones). With a plan, agreement, rankings and the annotation queue use "
         "exactly its items and its metric; the sidebar's language, model and theme filters do not apply.")
plan = None if plan_id in (None, NO_PLAN) else plans[plans.plan_id == plan_id].iloc[0]


def plan_summary() -> None:
    """The plan's design and how complete it is, per language."""
    progress = data.plan_progress(ctx.db, plan.plan_id, ctx.judge)
    overall = progress[progress.language == "all"].iloc[0]
    st.caption(ui.md_escape(
        f"Plan {plan.plan_id}: {plan['items']} items ({plan.queries} queries × {plan.models} models), metric "
        f"{plan.metric}, {plan.annotators} annotator(s) per item, seed {plan.seed}. Figures below are computed "
        "on exactly this sample."))
    st.progress(float(overall.complete or 0.0), text=ui.md_escape(
        f"{int(overall.labels)} of {int(overall.labels_planned)} planned labels given "
        f"({int(overall.labelled)} of {int(overall['items'])} items labelled)"))
    shown = progress.assign(language=[("all languages" if c == "all" else ui.lang_label(c))
                                      for c in progress.language])
    ui.dataframe(shown, hide_index=True, column_config={
        "items": st.column_config.NumberColumn("items planned"),
        "labelled": st.column_config.NumberColumn("items labelled"),
        "labels": st.column_config.NumberColumn("labels given"),
        "labels_planned": st.column_config.NumberColumn("labels planned"),
        "judged": st.column_config.NumberColumn("judge scored", help="Items the judge scored on the plan's metric "
                                                "(a label pairs only with a scored item)."),
        "complete": st.column_config.ProgressColumn("complete", min_value=0.0, max_value=1.0, format="percent")})


def agreement_view() -> None:
    ui.judge_banner(ctx)
    if ctx.judge is None:
        return
    if plan is not None:
        plan_summary()
        metric = plan.metric
    else:
        metric = st.selectbox("Metric", list(METRICS), index=DEFAULT_METRIC, key="hv_metric", bind="query-params",
                              help="Health-Pariksha compared humans and the judge on Semantic Similarity. "
                              + ui.metric_help())
    view = data.agreement_view(ctx.db, ctx.filters, ctx.judge, metric, None if plan is None else plan.plan_id)
    table = view["table"]
    if table.empty:
        st.info("No human labels of this plan's items yet. Import its filled CSV with "
                "`python -m pipeline import-human-labels`, or label them in the Annotate view." if plan is not None
                else "No human labels for this metric and these filters yet. Import a CSV with "
                "`python -m pipeline import-human-labels`, or label items in the Annotate view.")
        return
    st.caption("Percentage agreement (PA): share of items where the human and the judge gave the same score "
               "(the judge's samples averaged and rounded). Weighted κ: Cohen's kappa with linear weights "
               "(1 = perfect, 0 = chance). The paper found PA above 0.7 on average.")
    table = table.assign(language=table.language.map(ui.lang_label))
    ui.dataframe(table, hide_index=True, column_config={
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
            ui.dataframe(compact, hide_index=True, column_config={
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
                ui.dataframe(ref, hide_index=True)
                st.caption("Health-Pariksha Table 7 (Semantic Similarity, GPT-4o judge).")


def annotate_view() -> None:
    st.caption("Score responses yourself; each label is saved at once (source 'app') and the agreement figures "
               "update. Items come in a fixed shuffled order, " + ("the items of the plan." if plan is not None
                                                                    else "filtered by the sidebar."))
    c1, c2 = st.columns([2, 1])
    annotator = ui.annotator("hv_annotator", c1, bind=True)
    if plan is not None:
        metric = plan.metric
        c2.caption(ui.md_escape(f"Metric to score: {metric} ({ui.metric_label(metric)}), the plan's."))
    else:
        metric = c2.selectbox("Metric to score", list(METRICS), index=DEFAULT_METRIC, key="hv_ann_metric",
                              bind="query-params", help=ui.metric_help())
    if not annotator:
        st.info("Enter your name to get a queue of unlabelled items.")
        return
    skipped = tuple(st.session_state.setdefault("hv_skipped", []))
    done, total, queue = data.annotation_state(ctx.db, ctx.filters, annotator, metric, skipped,
                                               None if plan is None else plan.plan_id)

    def answer(item) -> None:
        ui.show_text("Model response", item.text, empty="(empty response)")
        if isinstance(item.rendering, str) and item.rendering:
            ui.show_machine_rendering(item.rendering, item.rendering_by)

    item = ui.label_queue_item(queue, done, total, f"items labelled by {annotator} on {metric}", answer,
                               empty="Nothing left to label within these filters.")
    if item is None:
        return
    with st.form("hv_label_form", clear_on_submit=True):
        score = st.radio(f"{ui.metric_label(metric)} score", [0, 1, 2], format_func=SCORE_LABELS.get,
                         horizontal=True, index=None, key="hv_score")
        comment = st.text_area("Comment (optional)", key="hv_comment", max_chars=2000)
        save = st.form_submit_button("Save label", type="primary")
    ui.skip_button(item, "hv_skipped")
    if save:
        if score is None:
            st.error("Choose a score first.")
            return
        with ui.saving(ctx.db):
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
