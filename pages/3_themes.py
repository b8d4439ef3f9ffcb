"""Themes: how models fare on misspelled, code-mixed, non-native, cultural, patient-specific, out-of-KB queries,
and how a model's score changes between variants of the same question (romanized vs native script, Indic vs
English)."""

from __future__ import annotations

import altair as alt
import streamlit as st

from pages import _data as data
from pages import _ui as ui
from pipeline.dataset import THEMES
from pipeline.metrics import METRICS

ctx = ui.page("Themes", judge="needed",
              caption="Health-Pariksha §4.3: code-mixed and culturally relevant queries challenged the models; "
                      "misspellings more so. Scores per theme and model; a query may carry several themes.")

judge = ctx.judge
jury = data.jury_of(ctx.db, ctx.filters.dataset)
if jury:
    labels = {ctx.judge: ctx.judge, jury: data.jury_label(jury, len(data.jury_members(ctx.db, ctx.filters.dataset)))}
    judge = st.segmented_control("Scores by", list(labels), format_func=labels.get, key="th_src",
                                 bind="query-params", default=ctx.judge) or ctx.judge
    judge = judge if judge in labels else ctx.judge
c1, c2 = st.columns([1, 3])
metric = c1.selectbox("Score", ui.metric_options(), key="th_metric", bind="query-params",
                      help=ui.metric_help())
weights = data.weights_tuple(data.run_weights(ctx.db, ctx.filters.dataset))
preset = data.run_preset(ctx.db, ctx.filters.dataset)
scores = data.theme_table(data.theme_scores(ctx.db, ctx.filters, judge), weights, preset)
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
    ui.dataframe(view.drop(columns=["language"]), hide_index=True,
                 column_config={m: st.column_config.NumberColumn(format="%.2f") for m in ("AGG", *METRICS)})

prov = data.score_provenance(ctx.db, ctx.filters.dataset, judge,
                             data.jury_members(ctx.db, ctx.filters.dataset) if data.is_jury(judge) else ())
for line in prov["mixed"]:
    st.warning(ui.md_escape(f"These scores mix provenance: {line}."), icon=":material/call_split:")
st.caption(ui.md_escape(
    f"Provenance: judge {judge} · judge prompt {prov['prompts']['judge_prompt']} · weights "
    + ", ".join(f"{m} {w:.2f}" for m, w in zip(METRICS, weights, strict=True)) + (f" ({preset})" if preset else "")
    + f" · dataset {prov['dataset'].get('content_hash') or 'unknown'} · code "
    + (", ".join(sorted({str(r) for r in prov["runs"].code_revision.dropna()})) or "unknown")
    + " (the Judge trust page has the full provenance)."))

st.subheader("Variants of the same question")
wanted = st.session_state.get("th_pair") or st.query_params.get("th_pair")  # CIs of the kind shown only
variants_view = ctx.filters.with_(languages=(), themes=())
changes = data.variant_changes(ctx.db, variants_view, judge, weights, preset, metric, wanted)
if changes.empty:
    st.caption("No query of this dataset names a variant it restates (`variant_of`), or no model answered both.")
else:
    kinds = sorted(dict.fromkeys(changes.kind), key=lambda k: (not k.startswith("all languages"), k))
    kind = st.selectbox("Pair", kinds, key="th_pair", bind="query-params",
                        help="Romanized vs native script within a language, or an Indic query vs its English "
                             "restatement: the same question asked two ways.")
    if kind != wanted:
        changes = data.variant_changes(ctx.db, variants_view, judge, weights, preset, metric, kind)
    shown = changes[changes.kind == kind].sort_values("change")
    bars = alt.Chart(shown).encode(y=alt.Y("model_id:N", sort=alt.EncodingSortField("change", order="ascending"),
                                           title=None, axis=alt.Axis(labelLimit=420, labelOverlap=False)))
    dots = bars.mark_point(filled=True, color="#0f766e", size=60).encode(
        x=alt.X("change:Q", title=f"change in {metric} (variant − base)"),
        tooltip=["model_id", "pairs", alt.Tooltip("base:Q", format=".2f"), alt.Tooltip("variant:Q", format=".2f"),
                 alt.Tooltip("change:Q", format="+.2f"), alt.Tooltip("lo:Q", format="+.2f"),
                 alt.Tooltip("hi:Q", format="+.2f")])
    rules = bars.mark_rule(color="#1f2933").encode(x="lo:Q", x2="hi:Q")
    zero = alt.Chart().mark_rule(color="#9ca3af", strokeDash=[4, 4]).encode(x=alt.datum(0))
    st.altair_chart((rules + dots + zero).properties(height=max(120, 22 * len(shown))), width="stretch")
    ui.dataframe(shown.drop(columns=["kind"]).assign(ci=[ui.fmt_ci(lo, hi) for lo, hi in
                                                         zip(shown.lo, shown.hi, strict=True)]).drop(
        columns=["lo", "hi"]), hide_index=True, column_config={
        "base": st.column_config.NumberColumn(format="%.2f"), "variant": st.column_config.NumberColumn(format="%.2f"),
        "change": st.column_config.NumberColumn("change", format="%+.2f"), "ci": "95% CI (paired)"})
    st.caption(ui.md_escape(
        f"{kind}: per model the mean of {metric} on the variants minus on the questions they restate, over the pairs "
        "both were answered; the interval resamples the pairs (paired bootstrap). An interval that excludes 0 means "
        "the way the question was written changed the score, on the same question."))

st.subheader("Examples")
present = set(view.theme)
themes = [t for t in THEMES if t in present] + (["(none)"] if "(none)" in present else [])
theme = st.selectbox("Theme", themes, key="th_theme", bind="query-params")
page = st.number_input("Example page", min_value=1, value=1, step=1, key="th_page", bind="query-params")
examples = data.theme_examples(ctx.db, ctx.filters.with_(languages=(language,)), judge, theme, 3,
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
        ui.dataframe(answers, hide_index=True, height=min(36 * (len(answers) + 1) + 3, 900), column_config={
            "response": st.column_config.TextColumn(width="large"),
            **{m: st.column_config.NumberColumn(format="%.1f", width="small") for m in METRICS}})
