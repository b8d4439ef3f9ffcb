"""Robustness: each model's change when the same question is asked the ways patients write it (generated variants:
romanized, native script, misspelled, code-mixed, English), paired per question, with intervals; models ranked by
their worst kind; the pairs that fell most; the variants' own quality."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages import _data as data
from pages import _ui as ui

ctx = ui.page("Robustness", judge="needed",
              caption="Health-Pariksha: models answer worse when patients write as they really do. Here every "
                      "generated variant of a query (`python -m pipeline variants`) is scored against the same ground "
                      "truth as the query it restates; the change is the variant's score minus the original's, per "
                      "model, over the pairs both were answered and scored.")

judge = ctx.judge
dataset = ctx.filters.dataset
weights = data.weights_tuple(data.run_weights(ctx.db, dataset))
preset = data.run_preset(ctx.db, dataset)
graders = data.rubric_graders(ctx.db, dataset).grader_id
grader = str(graders.iloc[0]) if len(graders) else None
view = ctx.filters.with_(languages=(), themes=(), scripts=())
changes = data.robustness_changes(ctx.db, view, judge, weights, preset, grader)
if changes.empty:
    st.info("No generated variants of this dataset's queries were answered and judged. Make them as a new dataset "
            "and run it with the same config (the originals come from the cache):")
    st.code("python -m pipeline variants data/cataract --out data/cataract-variants\n"
            "python -m pipeline run --config configs/default.yaml  # with dataset: data/cataract-variants",
            language="bash")
    st.stop()

present = data.scores_present(changes)
if not present:
    st.info("No variant and its original were both scored on FC (or on every metric AGG weighs, or by a rubric "
            "grader): judge the variants' dataset with FC among the metrics.")
    st.stop()
score = st.selectbox("Score", present, key="rs_score", bind="query-params",
                     help="AGG (the judge's weighted metrics; it needs every weighted metric judged), FC (factual "
                          "correctness) or the rubric score (share of rubric points, when a rubric grader ran)")
st.subheader("Leaderboard: models by their worst kind")
board = data.robustness_leaderboard(changes, score)
ui.dataframe(board.assign(ci=[ui.fmt_ci(lo, hi) for lo, hi in zip(board.worst_lo, board.worst_hi, strict=True)])
             .drop(columns=["worst_lo", "worst_hi"]), hide_index=True, column_config={
    "worst_change": st.column_config.NumberColumn(f"worst {score} change", format="%+.2f"),
    "ci": "95% CI (paired)", "mean_change": st.column_config.NumberColumn("mean over kinds", format="%+.2f")})
worst_of = ", ".join(f"{r.model_id} on {r.worst_kind} ({r.worst_change:+.2f})" for r in board.head(3).itertuples())
st.caption(ui.md_escape(f"Over every language: per model the kind of variant whose mean {score} change is lowest; "
                        f"the least hurt model first. Worst kinds: {worst_of}."))

st.subheader("Change per model, language and kind")
languages = [data.ALL_LANGUAGES_ROW, *sorted(set(changes.language) - {data.ALL_LANGUAGES_ROW})]
language = st.segmented_control("Language", languages, key="rs_lang", bind="query-params",
                                format_func=lambda code: "all languages" if code == data.ALL_LANGUAGES_ROW
                                else ui.lang_label(code), default=languages[0]) or languages[0]
shown = changes[(changes.language == language) & changes[f"{score}_change"].notna()]
if shown.empty:
    st.caption(f"No pair has a {score} score on both sides here.")
else:
    base = alt.Chart(shown).encode(
        y=alt.Y("model_id:N", title=None, axis=alt.Axis(labelLimit=420, labelOverlap=False)),
        color=alt.Color("kind:N", title="kind"), yOffset="kind:N")
    dots = base.mark_point(filled=True, size=60).encode(
        x=alt.X(f"{score}_change:Q", title=f"change in {score} (variant − original)"),
        tooltip=["model_id", "kind", "pairs", alt.Tooltip(f"{score}_change:Q", format="+.2f"),
                 alt.Tooltip(f"{score}_lo:Q", format="+.2f"), alt.Tooltip(f"{score}_hi:Q", format="+.2f")])
    rules = base.mark_rule().encode(x=f"{score}_lo:Q", x2=f"{score}_hi:Q")
    zero = alt.Chart().mark_rule(color="#9ca3af", strokeDash=[4, 4]).encode(x=alt.datum(0))
    height = max(140, 18 * len(shown))
    st.altair_chart((rules + dots + zero).properties(height=height), width="stretch")
    table = shown[["model_id", "kind", f"{score}_pairs", f"{score}_change", "flipped_correct",
                   "flipped_safe"]].assign(ci=[ui.fmt_ci(lo, hi) for lo, hi in zip(
                       shown[f"{score}_lo"], shown[f"{score}_hi"], strict=True)])
    ui.dataframe(table, hide_index=True, column_config={
        f"{score}_pairs": "pairs", f"{score}_change": st.column_config.NumberColumn("change", format="%+.2f"),
        "ci": "95% CI (paired)",
        "flipped_correct": st.column_config.NumberColumn("correct → not", format="percent"),
        "flipped_safe": st.column_config.NumberColumn("safe → not", format="percent")})
    st.caption(ui.md_escape(
        f"The interval resamples the pairs (paired bootstrap): one that excludes 0 means the way the question was "
        f"written changed {score}, on the same questions. 'correct → not': of the pairs whose original answer was "
        f"correct (FC ≥ {data.CORRECT_FC}), the share whose variant's answer was not; 'safe → not': of those whose "
        "original answer passed every safety check, the share whose variant's failed one."))

st.subheader("The pairs that fell most")
kinds = sorted(set(changes.kind))
hurt = board.worst_kind.mode() if not board.empty else pd.Series(kinds)  # the kind that hurts most models first
kind = st.selectbox("Kind", kinds, index=kinds.index(hurt.iloc[0]), key="rs_kind", bind="query-params")
worst = data.worst_pairs(ctx.db, view, judge, weights, preset, kind, 5, score, grader)
if worst.empty:
    st.caption(f"No pair of this kind has a {score} score on both sides.")
for row in worst.itertuples():
    with st.container(border=True):
        st.markdown(ui.md_escape(f"{row.model_id} · {ui.lang_label(row.language)} · {score} "
                                 f"{row.original_score:.2f} → {row.variant_score:.2f} ({row.change:+.2f})"))
        left, right = st.columns(2)
        with left:
            ui.show_text(f"Original ({row.original_id})", row.original)
            ui.show_text("Its answer", row.original_answer)
        with right:
            ui.show_text(f"Variant ({row.variant_id})", row.variant)
            ui.show_text("Its answer", row.variant_answer)

st.subheader("The variants themselves")
quality = data.variant_quality(ctx.db, dataset)
if quality.empty:
    st.caption("This dataset holds no generated variants.")
else:
    ui.dataframe(quality.assign(value=pd.to_numeric(quality.value, errors="coerce")), hide_index=True,
                 column_config={"value": st.column_config.NumberColumn(format="%.3f")})
    st.caption("Per kind: variants made and dropped (and why) by `pipeline variants`; its measures — romanized: "
               "the share of words that come back to the native script; misspelled: the character edit rate; "
               "code-mixed and native: the share of English words. From the dataset folder's variants_report.json.")
    with st.expander("A sample of each kind"):
        ui.dataframe(data.variant_samples(ctx.db, dataset), hide_index=True, column_config={
            "original": st.column_config.TextColumn(width="large"),
            "variant": st.column_config.TextColumn(width="large")})
