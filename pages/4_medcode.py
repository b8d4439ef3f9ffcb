"""Med-CoDE: the critic's disagreement distribution (None/Low/Moderate/High) per model, Table 2 with n and intervals,
the classifier behind every distribution, the paper's correlation claims, and human checks (Table 1, §5.1)."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages import _data as data
from pages import _ui as ui

CLASS_COLOURS = ["#15803d", "#84cc16", "#f59e0b", "#b91c1c"]
LABELS = list(data.DISAGREEMENT_LABELS.values())
ORDER = "indexof(['None','Low','Moderate','High'], datum['class'])"
NUM = {c: st.column_config.NumberColumn(c, format="%.2f") for c in ("value", "lo", "hi", "r", "accuracy", "share")}

ctx = ui.page("Med-CoDE disagreement",
              caption="A critic writes a critique of each response against the ground truth; a classifier turns it "
                      "into a probability over None, Low, Moderate and High disagreement. Averaged per model: an "
                      "ideal model has the most mass on None and the least on High.")
view = st.segmented_control("View", ["Results", "Human checks", "Annotate"], default="Results", key="mc_view",
                            bind="query-params") or "Results"
all_datasets = st.toggle("All datasets", value=True, key="mc_all", bind="query-params",
                         help="Off: only the dataset chosen in the sidebar.")
scope = ctx.filters.with_(dataset=None) if all_datasets else ctx.filters


def classifier_notes(classifiers: pd.DataFrame) -> None:
    """Name the classifier behind every distribution, its model-card test figures, and flag `logprobs`."""
    st.subheader("Classifiers behind these distributions")
    for r in classifiers.itertuples(index=False):
        who = f"critic {r.critic_id}, classifier {r.classifier}: {r.n} distributions ({r.datasets})"
        if r.classifier.startswith("logprobs"):
            st.warning(ui.md_escape(
                f"{who} came from logprobs: the critic's first-token log-probabilities of the four label words. "
                "This is not the paper's method (Med-CoDE classifies critiques with a fine-tuned BERT); set "
                "`medcode: {classifier: trained}` for that."
                + (f" {r.uniform} of them are uniform: no label word among the critic's top tokens."
                   if r.uniform else "")), icon=":material/warning:")
        elif pd.notna(r.test_accuracy):
            held_out = int(r.test_n) if pd.notna(r.test_n) else "?"
            st.caption(ui.md_escape(
                f"{who} — a fine-tuned classifier (the paper's method), base model {r.base_model}; test accuracy "
                f"{r.test_accuracy:.2f}, macro-F1 {r.test_macro_f1:.2f} on {held_out} held-out critiques "
                f"(model card; trained on {r.trained_on})."))
        else:
            st.warning(ui.md_escape(f"{who}: {r.card}."), icon=":material/help:")
    ui.dataframe(classifiers, hide_index=True, column_config={
        "test_accuracy": st.column_config.NumberColumn("test accuracy", format="%.2f"),
        "test_macro_f1": st.column_config.NumberColumn("test macro-F1", format="%.2f")})


def distribution_charts(dist: pd.DataFrame) -> None:
    long = dist.melt(id_vars=["dataset", "language", "model_id", "critic_id", "classifier", "n"],
                     value_vars=list(data.DISAGREEMENT), var_name="class", value_name="p")
    long["class"] = long["class"].map(data.DISAGREEMENT_LABELS)
    long["language"] = long.language.map(ui.lang_label)
    for dataset, part in long.groupby("dataset", sort=False):
        st.markdown(f"**{ui.md_escape(dataset)}**")
        bars = alt.Chart(part).mark_bar().encode(
            x=alt.X("sum(p):Q", title="mean probability", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("model_id:N", title=None, axis=alt.Axis(labelLimit=300, labelOverlap=False)),
            color=alt.Color("class:N", sort=LABELS, scale=alt.Scale(domain=LABELS, range=CLASS_COLOURS),
                            title="disagreement"),
            order=alt.Order("class_order:Q"),
            tooltip=["language", "model_id", "classifier", "class", alt.Tooltip("p:Q", format=".2f"), "n"],
        ).transform_calculate(class_order=ORDER)
        st.altair_chart(bars.properties(height=max(60, 18 * part.model_id.nunique()),
                                        width=max(110, 620 // max(1, part.language.nunique())))
                        .facet(column=alt.Column("language:N", title=None)), width="content")
    with st.expander("Distribution table"):
        ui.dataframe(dist, hide_index=True, column_config={
            p: st.column_config.NumberColumn(data.DISAGREEMENT_LABELS[p], format="%.2f") for p in data.DISAGREEMENT})


def stacked(table: pd.DataFrame) -> alt.Chart:
    """Stacked disagreement bars, one per (model, dataset) row of a Table-2-like table."""
    long_t = table.dropna(subset=list(data.DISAGREEMENT)).melt(
        id_vars=["model", "dataset"], value_vars=list(data.DISAGREEMENT), var_name="class", value_name="p")
    long_t["class"] = long_t["class"].map(data.DISAGREEMENT_LABELS)
    return alt.Chart(long_t).mark_bar().encode(
        x=alt.X("sum(p):Q", title="mean probability"),
        y=alt.Y("label:N", title=None, axis=alt.Axis(labelLimit=300, labelOverlap=False)),
        color=alt.Color("class:N", sort=LABELS, scale=alt.Scale(domain=LABELS, range=CLASS_COLOURS), legend=None),
        order=alt.Order("class_order:Q"),
        tooltip=["model", "dataset", "class", alt.Tooltip("p:Q", format=".2f")],
    ).transform_calculate(label="datum.model + ' · ' + datum.dataset", class_order=ORDER
                          ).properties(height=max(60, 18 * len(table)))


def table2(view: dict) -> None:
    st.subheader("Beside Med-CoDE Table 2")
    ours, long = view["summary"], view["table2"]
    checkers = sorted({c for c in ours.llm_checker.dropna()})
    st.caption(ui.md_escape(
        "METEOR and ROUGE-L: word overlap with the ground truth (0–1). Exact-match accuracy: multiple-choice items "
        "only, the option the response names against the key. LLM-Accuracy: the paper's — a checker model decides "
        "whether the answer is correct against the ground truth (here: " + (", ".join(checkers) or "no checker run;"
        " set `llm_accuracy:` in the config") + "). None … High: the mean disagreement probabilities. Answers "
        "neither check could read are counted as unparsed, never as right or wrong."))
    fmt = {c: st.column_config.NumberColumn(data.MEASURES.get(c, c), format="%.2f")
           for c in ("meteor", "rouge_l", "exact_match", "llm_accuracy", *data.DISAGREEMENT)}
    left, right = st.columns(2)
    with left:
        st.markdown("**This database**")
        ui.dataframe(ours, hide_index=True, column_config=fmt)
    with right:
        st.markdown("**Med-CoDE, published** (LLaMA-3 as the LLM-Accuracy checker)")
        paper = data.reference_table("medcode_table2")
        ui.dataframe(paper, hide_index=True, column_config=fmt)
        st.caption("Med-CoDE Table 2 as printed (data/reference/medcode_table2.csv); some rows do not sum to 1.")
    st.markdown("**n and 95 % intervals** (percentile bootstrap of the mean; Wilson for the accuracies)")
    ui.dataframe(long, hide_index=True, column_config={**NUM, "measure": None,
                                                      "measure_label": st.column_config.TextColumn("measure")})
    if not ours.dropna(subset=list(data.DISAGREEMENT)).empty:
        left, right = st.columns(2)
        left.altair_chart(stacked(ours), width="stretch")
        right.altair_chart(stacked(paper), width="stretch")


def correlation_view() -> None:
    st.subheader("Correlations (the paper's §5 claims)")
    if ctx.judge is None:
        st.caption("No judge scores yet: the judge's metrics are left out.")
    corr = data.medcode_correlations(ctx.db, scope, ctx.judge)
    critics = corr.attrs.get("critics", [])
    if not critics:
        st.info("No classified critiques in these filters: nothing to correlate.")
        return
    c1, c2 = st.columns(2)
    if len(critics) > 1:
        critic = c2.selectbox("Critic", critics, index=critics.index(corr.attrs["critic"]), key="mc_corr_critic",
                              help="The critiques of one critic at a time (default: the one with the most).")
        corr = data.medcode_correlations(ctx.db, scope, ctx.judge, critic)
    models = [m for m in corr.model.unique() if m != data.POOLED]
    who = c1.selectbox("Items of", [data.POOLED, *models], key="mc_corr_model",
                       help="Pooled over every model, or one model's items.")
    part = corr[corr.model == who]
    matrix = data.pooled_matrix(part.assign(model=data.POOLED))
    heat_data = matrix.reset_index().melt(id_vars="quantity", var_name="score", value_name="r")
    heat = alt.Chart(heat_data).mark_rect().encode(
        x=alt.X("score:N", sort=list(matrix.columns), title=None),
        y=alt.Y("quantity:N", sort=list(matrix.index), title=None),
        color=alt.Color("r:Q", scale=alt.Scale(domain=[-1, 1], scheme="redblue"), title="Pearson r"),
        tooltip=["quantity", "score", alt.Tooltip("r:Q", format=".2f")])
    st.altair_chart((heat + heat.mark_text().encode(text=alt.Text("r:Q", format=".2f"), color=alt.value("black")))
                    .properties(height=170), width="stretch")
    n = part[part.quantity == "p_none"].set_index("score").n
    st.caption(ui.md_escape(
        f"Pearson r over {corr.attrs.get('items', 0)} items critiqued by {corr.attrs.get('critic')} ({who}); "
        "n per score: "
        + ", ".join(f"{data.SCORE_LABELS.get(k, k)} {int(v)}" for k, v in n.items())
        + ". E[disagreement] = 0·None + 1·Low + 2·Moderate + 3·High. LLM-Accuracy and exact match count 1 for "
        "correct and 0 for wrong (unparsed left out)."))
    st.markdown("**What the paper says, and whether these items bear it out**")
    claims = data.paper_claims(corr, who)
    published = data.published_claims()
    shown = claims.assign(published_r=published.r.to_numpy())
    shown["quantity"] = shown.quantity.map(data.QUANTITIES)
    shown["score"] = shown.score.map(data.SCORE_LABELS)
    ui.dataframe(shown.drop(columns=["says"]), hide_index=True, column_config={
        **NUM, "published_r": st.column_config.NumberColumn("r on the paper's Table 2 (12 rows)", format="%.2f")})
    st.caption(ui.md_escape(
        "The claims are quoted from Med-CoDE §5. Ranges: " + data.CLAIM_RANGES + ". consistent = the whole 95 % "
        "interval (Fisher z) lies in the claimed range; contradicted = it lies wholly outside; undecided = it "
        "straddles the edge. The last column computes the same r over the 12 rows of the published Table 2 "
        "(model × dataset means, not items)."))
    with st.expander("Every correlation with n and 95 % interval"):
        table = corr.assign(quantity=corr.quantity.map(data.QUANTITIES), score=corr.score.map(data.SCORE_LABELS))
        ui.dataframe(table, hide_index=True, column_config=NUM)


def results_view() -> None:
    view = data.medcode_view(ctx.db, scope, ctx.judge)
    dist = view["distribution"]
    if dist.empty and view["summary"].empty:
        st.info("No Med-CoDE critiques match the filters: run the `medcode` stage.")
        return
    if not dist.empty:
        classifier_notes(view["classifiers"])
        st.subheader("Distributions")
        distribution_charts(dist)
    table2(view)
    correlation_view()


def human_checks_view() -> None:
    checks = data.critique_checks(ctx.db, scope)
    table1, critique = checks["table1"], checks["critique_accuracy"]
    paper = data.reference_table("medcode_table1")
    st.subheader("Disagreement classification against human labels (Table 1)")
    if table1.empty:
        st.info("No human disagreement labels on these items yet: label critiques in the Annotate view, or import "
                "a CSV with `python -m pipeline import-critique-labels CSV --db P`.")
    else:
        st.caption("Accuracy = share of human-labelled items where the classifier's label equals the annotator's "
                   "(one comparison per item and annotator; an item the classifier left unlabelled is counted as "
                   "unparsed, not as wrong). 95 % Wilson intervals.")
        ui.dataframe(table1, hide_index=True, column_config=NUM)
        if not any(k.startswith("zero-shot") for k in table1.kind):
            st.caption("No zero-shot row yet (the paper's GPT-3.5): run `python -m pipeline medcode label --config "
                       "F` with `medcode: {teacher: MODEL}` on the same responses, or a critic with `classifier: "
                       "logprobs`.")
    ui.dataframe(paper[paper.check.str.startswith("disagreement")], hide_index=True,
                 column_config={"accuracy": st.column_config.NumberColumn("accuracy", format="%.4f")})
    st.caption("Med-CoDE Table 1 as printed (265 human-labelled samples).")
    st.subheader("Critique accuracy (§5.1)")
    if critique.empty:
        st.info("No critique has been checked yet (Annotate view: \"Is the critique accurate?\").")
    else:
        st.caption("Share of the checked critiques that the annotators call accurate, with a 95 % Wilson interval.")
        ui.dataframe(critique, hide_index=True, column_config=NUM)
    st.caption("The paper: about 240 of 265 GPT-4 critiques (≈ 91 %) were accurate.")


def annotate_view() -> None:
    st.caption("Check critiques yourself: say how far the response departs from the ground truth and whether the "
               "critique says so accurately. Each check is saved at once (source 'app'). The classifier's label "
               "is not shown, so it cannot sway you. Items come in a fixed shuffled order, filtered by the sidebar.")
    sources = data.critique_sources(ctx.db, scope)
    if sources.empty:
        st.info("No critiques to check within these filters: run the `medcode` stage or `medcode label`.")
        return
    options = [f"{k}: {b}" for k, b in zip(sources.kind, sources.author, strict=True)]
    c1, c2 = st.columns([1, 2])
    annotator = ui.annotator("mc_annotator", c1)
    pick = c2.selectbox("Critiques of", options, key="mc_source")
    if not annotator:
        st.info("Enter your name to get a queue of critiques to check.")
        return
    kind, author = sources.iloc[options.index(pick)][["kind", "author"]]
    skipped = tuple(st.session_state.setdefault("mc_skipped", []))
    done, total, queue = data.critique_queue(ctx.db, scope, annotator, kind, author, skipped)

    def answer_and_critique(item) -> None:
        ui.show_text("Model response", item.text, empty="(empty response)")
        ui.show_text(f"Critique ({kind} {author})", item.critique)

    item = ui.label_queue_item(queue, done, total, f"critiques checked by {annotator}", answer_and_critique,
                               empty="Nothing left to check within these filters.")
    if item is None:
        return
    with st.form("mc_label_form", clear_on_submit=True):
        label = st.radio("Disagreement between the response and the ground truth", LABELS, horizontal=True,
                         index=None, key="mc_label")
        accurate = st.radio("Is the critique accurate?", ["Yes", "No"], horizontal=True, index=None,
                            key="mc_accurate")
        comment = st.text_area("Comment (optional)", key="mc_comment", max_chars=2000)
        save = st.form_submit_button("Save check", type="primary")
    ui.skip_button(item, "mc_skipped")
    if save:
        if label is None or accurate is None:
            st.error("Choose a disagreement level and whether the critique is accurate first.")
            return
        with ui.saving(ctx.db):
            data.save_critique_label(ctx.db, dataset=item.dataset, query_id=item.query_id, model_id=item.model_id,
                                     critique_kind=kind, critique_by=author, annotator=annotator, label=label,
                                     critique_accurate=accurate == "Yes", critique_hash=item.critique_hash,
                                     response_hash=item.response_hash, comment=comment)
        data.clear_caches()
        st.session_state["mc_last_saved"] = f"{item.query_id} · {item.model_id}: {label}, critique accurate: {accurate}"
        st.rerun()
    if st.session_state.get("mc_last_saved"):
        st.caption(ui.md_escape(f"Saved: {st.session_state['mc_last_saved']}"))


{"Results": results_view, "Human checks": human_checks_view, "Annotate": annotate_view}[view]()
