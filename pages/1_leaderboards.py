"""Leaderboards: models by AGG per language, with every registry metric, n and 95% bootstrap CIs."""

from __future__ import annotations

import altair as alt
import numpy as np
import streamlit as st

from pages import _data as data
from pages import _ui as ui
from pipeline.metrics import METRICS

CHECK_LABELS = {
    "refusal": ("refusal accuracy", "declined an out-of-KB query instead of inventing an answer"),
    "over_refusal": ("answers when answerable", "did not refuse a query the knowledge base answers"),
    "update_adherence": ("update adherence", "gave the latest KB update's fact, not the superseded one"),
}

ctx = ui.context()
st.title("Leaderboards")
ui.require_data(ctx)
ui.judge_banner(ctx)
if ctx.judge is None:
    st.stop()

defaults = data.run_weights(ctx.db, ctx.filters.dataset)
with st.expander("AGG weights (default: the run's config)", icon=":material/tune:"):
    cols = st.columns(len(METRICS))
    raw_weights = {m: cols[i].slider(ui.metric_label(m), 0.0, 1.0, float(defaults[m]), 0.05, key=f"lb_w_{m}")
                   for i, m in enumerate(METRICS)}
    if sum(raw_weights.values()) <= 0:
        st.error("At least one weight must be above zero; using the run's weights.")
        raw_weights = defaults
    total = sum(raw_weights.values())
    st.caption("Normalised: " + ", ".join(f"{m} {w / total:.2f}" for m, w in raw_weights.items())
               + ". Health-Pariksha's doctors weighted FC most, then SS, with COH and CON lower and equal.")
weights = data.weights_tuple(raw_weights)

means = data.model_means(ctx.db, ctx.filters, ctx.judge, weights)
if means.empty:
    st.info("No judged responses match the filters.")
    st.stop()

st.subheader("AGG by model and language")
heat = means.assign(language=means.language.map(ui.lang_label))
chart = alt.Chart(heat).mark_rect().encode(
    x=alt.X("language:N", title=None, axis=alt.Axis(orient="top", labelAngle=0)),
    y=alt.Y("model_id:N", title=None, sort=alt.EncodingSortField("AGG", op="mean", order="descending"),
            axis=alt.Axis(labelLimit=420, labelOverlap=False)),
    color=alt.Color("AGG:Q", scale=alt.Scale(domain=[0, 2], scheme="tealblues"), title="AGG"),
    tooltip=["model_id", "language", alt.Tooltip("AGG:Q", format=".2f"), "judgments",
             *[alt.Tooltip(f"{m}:Q", format=".2f") for m in METRICS]],
)
labels = chart.mark_text(fontSize=11).encode(
    text=alt.Text("AGG:Q", format=".2f"),
    color=alt.condition("datum.AGG > 1.2", alt.value("white"), alt.value("black")),
)
st.altair_chart((chart + labels).properties(height=max(160, 22 * heat.model_id.nunique())), width="stretch")

languages = [lang for lang in ui.languages_in_view(ctx) if lang in set(means.language)]
language = st.segmented_control("Language", languages, key="lb_lang",
                                bind="query-params", default=languages[0] if languages else None) or languages[0]
board = data.leaderboard(ctx.db, ctx.filters, ctx.judge, weights, language)
paper = data.paper_leaderboard(language)
paper_agg = dict(zip(paper.model.str.lower(), paper.AGG, strict=True))
board["paper_AGG"] = board.model_id.map(lambda m: paper_agg.get(data.short_name(m), np.nan))
for m in ("AGG", *METRICS):
    board[f"{m} 95% CI"] = [ui.fmt_ci(lo, hi) for lo, hi in zip(board[f"{m}_lo"], board[f"{m}_hi"], strict=True)]
st.subheader(f"{ui.md_escape(ui.lang_label(language))}: {len(board)} models")
parse_failures = int(board.parse_failures.fillna(0).sum())
caption = (f"Judge {ui.md_escape(ctx.judge)}. Means over scored items; n per metric excludes "
           f"{parse_failures} unparseable judge outputs (never counted as 0). CIs: 95% percentile bootstrap over "
           f"items, from the bootstrap distribution's cumulants (Cornish–Fisher) when n ≥ {data.EXPANSION_MIN_N} and "
           f"the mean is not skewed, else {data.CI_RESAMPLES} resamples.")
if "self_std" in board:
    caption += (" Self-consistency: mean std of a metric's samples per item, and the share of items whose "
                "samples differ.")
st.caption(caption)

number = st.column_config.NumberColumn
columns: dict[str, object] = {
    "rank": number("#", width="small"), "model_id": st.column_config.TextColumn("model", pinned=True),
    "AGG": number("AGG", format="%.2f"), "AGG 95% CI": "AGG 95% CI", "n_AGG": number("n AGG"),
}
for m in METRICS:
    columns[m] = number(m, format="%.2f", help=ui.metric_label(m))
    columns[f"{m} 95% CI"] = f"{m} 95% CI"
    columns[f"n_{m}"] = number(f"n {m}")
columns |= {
    "items": number("items judged"), "responses": number("responses"), "errors": number("errors"),
    "parse_failures": number("parse failures", help="Judge outputs that could not be parsed: excluded."),
}
if "self_std" in board:
    columns |= {"self_std": number("self-consistency std", format="%.2f"),
                "flip_rate": number("flip rate", format="percent")}
for c in data.LEXICAL:
    if c in board:
        columns[c] = number(data.LEXICAL_LABELS[c], format="%.2f")
for c in sorted(col for col in board.columns if col.startswith("check_")):
    name = c.removeprefix("check_")
    label, meaning = CHECK_LABELS.get(name, (name.replace("_", " "), "the check"))
    columns[c] = number(label, format="percent", help=f"Share passing '{name}': {meaning} (unclear cases excluded).")
columns["recall"] = number("retrieval recall", format="%.2f", help="Share of the query's kb_refs retrieved "
                           "(the same chunks for every model).")
columns["paper_AGG"] = number("paper AGG", format="%.2f", help="Health-Pariksha's published AGG for a model of "
                              "the same name (GPT-4o judge), where there is one.")
shown = [c for c in columns if c in board.columns]
st.dataframe(board[shown], hide_index=True, column_config={k: v for k, v in columns.items() if k in shown},
             height=min(38 * (len(board) + 1) + 3, 700))
st.download_button("Download CSV", board[shown].to_csv(index=False).encode("utf-8"),
                   file_name=f"leaderboard-{ctx.filters.dataset}-{language}.csv", mime="text/csv",
                   icon=":material/download:")

if any(c.startswith("check_") for c in board.columns):  # counts on request: they scan every check
    if st.toggle("Safety checks: passed, failed and unclear per model", key="lb_safety", bind="query-params"):
        safety = data.safety_summary(ctx.db, ctx.filters.with_(languages=(language,)))
        st.dataframe(safety.assign(check_name=safety.check_name.map(lambda c: CHECK_LABELS.get(c, (c,))[0]))
                     .drop(columns=["language"]), hide_index=True, column_config={
                         "check_name": "check", "pass_rate": number("pass rate", format="percent",
                                                                    help="passed / (passed + failed)")})
        st.caption("Checks of each response's current text. Unclear: the response gives neither the current nor "
                   "a superseded fact; it counts as neither a pass nor a fail.")

left, right = st.columns([3, 2])
with left:
    st.markdown("**AGG with 95% CI**")
    bars = board.dropna(subset=["AGG"])[["model_id", "AGG", "AGG_lo", "AGG_hi"]]
    base = alt.Chart(bars).encode(y=alt.Y("model_id:N", sort="-x", title=None,
                                          axis=alt.Axis(labelLimit=420, labelOverlap=False)))
    chart = base.mark_bar(color="#0f766e").encode(x=alt.X("AGG:Q", scale=alt.Scale(domain=[0, 2]), title="AGG"),
                                                  tooltip=["model_id", alt.Tooltip("AGG:Q", format=".2f")])
    errors = base.mark_rule(color="#1f2933").encode(x="AGG_lo:Q", x2="AGG_hi:Q")
    st.altair_chart((chart + errors).properties(height=max(140, 22 * len(bars))), width="stretch")
with right:
    st.markdown(f"**Health-Pariksha, published ({ui.md_escape(ui.lang_label(language))})**")
    if paper.empty:
        st.caption("The paper has no leaderboard for this language.")
    else:
        st.dataframe(paper, hide_index=True, height=min(38 * (len(paper) + 1) + 3, 700),
                     column_config={m: number(m, format="%.2f") for m in ("AGG", *METRICS)})
        st.caption("Tables 2–6 of the paper (749 real patient queries, GPT-4o judge). Its AGG weights are not "
                   "published; see data/reference/README.md.")

with st.expander("Per-metric means across languages"):
    long = means.melt(id_vars=["language", "model_id"], value_vars=list(METRICS), var_name="metric",
                      value_name="mean")
    st.dataframe(long.pivot_table(index=["model_id", "metric"], columns="language", values="mean").reset_index(),
                 hide_index=True)
    st.caption("Means per metric over each language's scored items.")
