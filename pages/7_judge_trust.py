"""Judge trust: can the judge be believed here? Reliability per language, script and theme; the jury's agreement
and where its judges disagree; doctor-calibrated means; repeated judging; provenance of every score."""

from __future__ import annotations

from urllib.parse import urlencode

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from pages import _data as data
from pages import _ui as ui
from pipeline.metrics import METRICS

STRATA = {"language": "language", "script": "language × script", "theme": "theme", "all": "everything"}
STATUS = {"ok": "✓ sufficient", "weak": "⚠ below threshold", "none": "○ no evidence"}

ctx = ui.page("Judge trust", judge="needed",
              caption="How far the judge's scores can be believed, per language, script (native or romanized) and "
                      "theme; whether several judges agree; how human labels correct the judge; where each score came "
                      "from.")
dataset = ctx.filters.dataset
members = data.jury_members(ctx.db, dataset)
judge, jury_members = ui.scores_by(ctx, "jt_src")
weights = data.weights_tuple(data.run_weights(ctx.db, dataset))
preset = data.run_preset(ctx.db, dataset)
languages = ui.languages_in_view(ctx)

# -- reliability matrix -------------------------------------------------------------------------------------
st.subheader("Reliability matrix")
matrix = data.reliability_matrix(ctx.db, dataset, judge, jury_members)
stratum = st.segmented_control("Per", list(STRATA), format_func=STRATA.get, key="jt_stratum", bind="query-params",
                               default="language") or "language"
part = matrix[matrix.stratum == stratum].copy()
if stratum in ("language", "script") and ctx.filters.languages:
    part = part[part.language.isin(ctx.filters.languages)]
if part.empty:
    st.info("No sanity answers and no human labels for this judge yet: run the `sanity` stage, import or make "
            "human labels.")
else:
    keys = {"language": ["language"], "script": ["language", "script"], "theme": ["theme"], "all": []}[stratum]
    part["where"] = (part[keys].astype(str).agg(" · ".join, axis=1) if keys else "all queries")
    if stratum == "script":
        part["where"] = part.language + " · " + part.script.map(data.SCRIPT_LABELS)
    part["shown"] = [f"{a:.2f}" if not np.isnan(a) else "–" for a in part.auc]
    part["verdict"] = part.status.map(STATUS)
    heat = alt.Chart(part).mark_rect().encode(
        x=alt.X("metric:N", sort=list(METRICS), title=None, axis=alt.Axis(orient="top", labelAngle=0)),
        y=alt.Y("where:N", title=None, axis=alt.Axis(labelLimit=300)),
        color=alt.Color("status:N", scale=alt.Scale(domain=["ok", "weak", "none"],
                                                   range=["#99d8c9", "#fdae6b", "#e5e7eb"]), title="evidence"),
        tooltip=["where", "metric", alt.Tooltip("auc:Q", format=".2f", title="sanity AUC"), "n_good", "n_bad",
                 alt.Tooltip("kappa:Q", format=".2f", title="human κ"), "n_labels", "verdict", "reason"])
    text = heat.mark_text(fontSize=11).encode(text="shown:N", color=alt.value("black"))
    st.altair_chart((heat + text).properties(height=max(120, 26 * part["where"].nunique())), width="stretch")
    st.caption(f"Cell: the judge's sanity AUC (a known-good answer must outscore a wrong one; 0.5 is chance). "
               f"Colour: sufficient when AUC ≥ {data.AUC_TRUST} on at least {data.MIN_SANITY} good and "
               f"{data.MIN_SANITY} bad answers and, where there are at least {data.MIN_LABELS} human labels, "
               f"agreement κ ≥ {data.KAPPA_TRUST}; grey: too little evidence to say. The leaderboard marks cells of "
               "languages (and scripts) that are not sufficient.")
    with st.expander("The matrix as a table (with human agreement)"):
        ui.dataframe(part.drop(columns=["stratum", "shown", "where"]), hide_index=True, column_config={
            "auc": st.column_config.NumberColumn("sanity AUC", format="%.2f"),
            "kappa": st.column_config.NumberColumn("human κ (weighted)", format="%.2f"),
            "agreement": st.column_config.NumberColumn("% agreement", format="percent"),
            "reason": st.column_config.TextColumn(width="large")})

# -- jury ----------------------------------------------------------------------------------------------------
st.subheader("Jury")
if len(members) < 2:
    st.caption("One judge scored this dataset. Give `judge:` a list of judges in the run's config to form a jury "
               "(MedHELM): every judge scores every answer, and the jury's score is their mean.")
else:
    st.markdown(f"**{len(members)} judges:** " + ", ".join(ui.md_escape(m) for m in members))
    first = languages[0] if languages else None
    language = st.segmented_control("Language", languages, key="jt_lang", bind="query-params", default=first) or first
    boards = []
    for j in (*members, data.jury_of(ctx.db, dataset)):
        means = data.model_means(ctx.db, ctx.filters, j, weights, preset)
        means = means[means.language == language]
        boards.append(means.set_index("model_id").AGG.rename(data.jury_label(j, len(members)) if data.is_jury(j)
                                                                 else j))
    per_judge = pd.concat(boards, axis=1).sort_values(boards[-1].name, ascending=False).reset_index()
    st.markdown(f"**AGG per judge and by the jury, {ui.md_escape(ui.lang_label(language or ''))}**")
    ui.dataframe(per_judge, hide_index=True,
                 column_config={c: st.column_config.NumberColumn(format="%.2f") for c in per_judge.columns[1:]})
    agreement = data.jury_agreement(ctx.db, ctx.filters, members)
    alpha = agreement["alpha"]
    left, right = st.columns(2)
    with left:
        st.markdown("**Krippendorff's α per metric and language** (1 = the judges always agree, 0 = chance)")
        table = alpha.pivot(index="language", columns="metric", values="alpha").reindex(columns=list(METRICS))
        items = alpha.pivot(index="language", columns="metric", values="items").reindex(columns=list(METRICS))
        table.insert(0, "items", items.max(axis=1).astype(int))
        ui.dataframe(table.reset_index(), hide_index=True,
                     column_config={m: st.column_config.NumberColumn(format="%.2f") for m in METRICS})
    with right:
        st.markdown("**Pairwise weighted κ per metric** (all languages)")
        kappa = agreement["kappa"]
        ui.dataframe(kappa[kappa.language == "all"].drop(columns=["language"]), hide_index=True,
                     column_config={"kappa": st.column_config.NumberColumn("κ (linear)", format="%.2f")})
    st.markdown("**Where the judges disagree most**")
    metric = st.selectbox("Metric", list(METRICS), key="jt_metric", bind="query-params", help=ui.metric_help())
    worst = data.disagreement_items(ctx.db, ctx.filters, members, metric, 20)
    if worst.empty:
        st.caption("No item was scored by these judges on this metric.")
    else:
        worst["open"] = [
            "responses?" + urlencode({"dataset": dataset, "model": r.model_id, "lang": r.language,
                                      "rb_q": str(r.query)[:80]}) for r in worst.itertuples()]
        ui.dataframe(worst[["query_id", "open", "language", "model_id", *members, "spread", "std", "mean", "query"]],
                     hide_index=True, column_config={
                         **{m: st.column_config.NumberColumn(m, format="%.2f") for m in members},
                         "spread": st.column_config.NumberColumn("spread (max − min)", format="%.2f"),
                         "std": st.column_config.NumberColumn(format="%.2f"),
                         "mean": st.column_config.NumberColumn("jury mean", format="%.2f"),
                         "query": st.column_config.TextColumn(width="large"),
                         "open": st.column_config.LinkColumn("response browser", display_text="open")})
        st.caption("Items by the spread of the judges' scores, then their standard deviation. Open one to read the "
                   "answer, the judges' justifications and the ground truth side by side.")

# -- calibrated means -----------------------------------------------------------------------------------------
st.subheader("Judge means calibrated by human labels")
cal_lang = st.segmented_control("Language ", languages, key="jt_cal_lang", bind="query-params",
                                default=languages[0] if languages else None) or (languages[0] if languages else None)
cal = data.calibrated_means(ctx.db, ctx.filters, judge, cal_lang) if cal_lang else pd.DataFrame()
if cal.empty:
    st.caption(f"No model has {data.MIN_PPI_LABELS} or more human-labelled answers in this language.")
else:
    ui.dataframe(cal.assign(ci=[ui.fmt_ci(lo, hi) for lo, hi in zip(cal.lo, cal.hi, strict=True)])[
        ["model_id", "metric", "judge_mean", "mean", "ci", "correction", "n_labelled", "n_unlabelled", "method"]],
        hide_index=True, column_config={
            "judge_mean": st.column_config.NumberColumn("judge mean", format="%.2f"),
            "mean": st.column_config.NumberColumn("calibrated mean", format="%.2f"),
            "ci": "95% CI", "correction": st.column_config.NumberColumn("correction", format="%+.2f")})
    st.caption("Prediction-powered inference (ppi-python, PPI++): the judge's scores of every answer and the human "
               "scores of the labelled few give a mean that stays valid when the judge is biased; the correction is "
               "how far the judge's own mean is off.")

# -- repeated judging ---------------------------------------------------------------------------------------
summary = data.judge_summary(ctx.db)["judges"]
mine = summary[(summary.dataset == dataset) & (summary.judge_id.isin(jury_members or (judge,)))]
if not mine.empty and mine.samples.max() > 1 and not data.is_jury(judge):
    st.subheader("Repeated judging: worst of k and the items that vary most")
    rep_lang = st.segmented_control("Language  ", languages, key="jt_rep_lang", bind="query-params",
                                    default=languages[0] if languages else None) or languages[0]
    worst_k = data.worst_of_k(ctx.db, ctx.filters, judge, weights, rep_lang, preset)
    ui.dataframe(worst_k, hide_index=True, column_config={
        "worst": st.column_config.NumberColumn("worst of k (AGG)", format="%.2f"),
        "mean": st.column_config.NumberColumn("mean of the samples", format="%.2f")})
    st.caption("Worst of k (HealthBench): the expected lowest of the judge's k scores of the same answer, averaged "
               "over answers. Far below the mean: the judge's verdict on an answer depends on the draw.")
    var_metric = st.selectbox("Metric ", list(METRICS), key="jt_var_metric", bind="query-params")
    varied = data.item_variance(ctx.db, ctx.filters, judge, rep_lang, var_metric, 30)
    if not varied.empty:
        varied["open"] = ["responses?" + urlencode({"dataset": dataset, "model": r.model_id, "lang": rep_lang,
                                                     "rb_q": str(r.query)[:80]}) for r in varied.itertuples()]
    ui.dataframe(varied, hide_index=True, column_config={
        "variance": st.column_config.NumberColumn(format="%.2f"), "query": st.column_config.TextColumn(width="large"),
        "open": st.column_config.LinkColumn("response browser", display_text="open")})

# -- provenance -----------------------------------------------------------------------------------------------
st.subheader("Provenance")
prov = data.score_provenance(ctx.db, dataset, judge, jury_members)
for line in prov["mixed"]:
    st.warning(ui.md_escape(f"These scores mix provenance: {line}."), icon=":material/call_split:")
for line in prov["notes"]:
    st.caption(ui.md_escape(f"Note: {line}."))
if not prov["mixed"]:
    st.caption("One provenance: every judgment in view comes from runs with the same code revision, judge settings "
               "and retrieval policy.")
ui.dataframe(prov["runs"], hide_index=True)
prompts = prov["prompts"]
ui.dataframe(pd.DataFrame([
    {"what": "dataset content", "hash": prov["dataset"].get("content_hash")},
    {"what": "judge prompt files" + (f" (the dataset's own: {', '.join(prompts['own_files'])})"
                                     if prompts["own_files"] else ""), "hash": prompts["judge_prompt"]},
    {"what": "metric registry", "hash": prompts["registry"]},
    *({"what": f"rubric {m}", "hash": h} for m, h in prompts["rubrics"].items()),
    *({"what": f"retrieval policy ({n} queries)", "hash": s} for s, n in zip(prov["retrieval"].settings,
                                                                             prov["retrieval"].queries, strict=True)),
]), hide_index=True)
st.caption("Prompt and rubric hashes are of the files as they are now (the dataset's own prompts/ first); the code "
           "revision of each run pins the studio's own files.")

# -- the pairwise judge's biases (docs/arena.md) -----------------------------------------------------------------
st.subheader("Judge biases: position, length, self-preference")
pairwise_judges = data.arena_judges(ctx.db) if data.has_arena(ctx.db) else []
verbose = data.arena_direct_verbosity(ctx.db, dataset, ctx.judge, data.PAPER_METRIC) if not data.is_jury(
    ctx.judge) else None
if verbose is not None and verbose["items"] >= 3:
    st.caption(ui.md_escape(
        f"Direct scores ({data.PAPER_METRIC}, {verbose['items']} items with doctors' labels): the judge's score "
        f"changes by {verbose['slope_judge']:+.2f} per doubling of the answer's length; "
        f"{verbose['slope_beyond']:+.2f} [{verbose['beyond_lower']:+.2f}, {verbose['beyond_upper']:+.2f}] of that "
        "is beyond what the doctors' labels explain (judge − doctor against length; 0 = no verbosity bias)."))
if not pairwise_judges:
    st.caption("No pairwise verdicts yet: run the `pairwise` stage (`pairwise:` in the config) to measure how often "
               "the judge's choice flips when two answers swap places, its preference for longer answers and for its "
               "own answers.")
else:
    pw_judge = ctx.judge if ctx.judge in pairwise_judges else pairwise_judges[0]
    if len(pairwise_judges) > 1:
        pw_judge = st.selectbox("Pairwise judge", pairwise_judges, index=pairwise_judges.index(pw_judge),
                                key="jt_pw_judge")
    flips = data.arena_position_flips(ctx.db, dataset, pw_judge)
    if flips.empty:
        st.caption("No pair judged in both orders here yet.")
    else:
        flips = flips.assign(language=flips.language.map(ui.lang_label), script=flips.script.map(
            lambda s: data.SCRIPT_LABELS.get(s, s)))
        ui.dataframe(flips, hide_index=True, column_config={
            "comparisons": st.column_config.NumberColumn("pairs judged in both orders"),
            "flips": st.column_config.NumberColumn("verdict flipped"),
            "flip_rate": st.column_config.NumberColumn("position-flip rate", format="percent"),
            "first_wins": st.column_config.NumberColumn(
                "first shown wins", format="percent", help="Of its decided single-order verdicts, the share that "
                "chose the answer shown first (50% = no position bias)")})
        st.caption("A pair whose verdict changes when the two answers swap places counts as a tie on the judge's "
                   "leaderboard and as a position flip here (GPT-4 flipped 12.9% in FastChat's measurement).")
        judged = data.arena_verbosity(ctx.db, dataset, "judge", pw_judge)
        rows = [{"rater": f"judge {pw_judge}", **judged}]
        if data.arena_fit(ctx.db, dataset, None, "doctors", rounds=0).table.votes.sum() > 0:
            rows.append({"rater": "doctors", **data.arena_verbosity(ctx.db, dataset, "doctors")})
        ui.dataframe(pd.DataFrame(rows).dropna(axis=1, how="all"), hide_index=True, column_config={
            "longer_wins": st.column_config.NumberColumn("longer answer wins", format="percent",
                                                         help="Of decided comparisons of answers of different length"),
            "decided": st.column_config.NumberColumn("decided comparisons"),
            "length_coef": st.column_config.NumberColumn("length effect", format="%+.0f",
                                                         help="Elo points per typical length difference, from the "
                                                              "style-controlled fit"),
            "length_lower": st.column_config.NumberColumn("95% low", format="%+.0f"),
            "length_upper": st.column_config.NumberColumn("95% high", format="%+.0f")})
        st.caption("Verbosity: how often the longer answer wins, and the length covariate of a Bradley–Terry fit "
                   "with the models and the length difference (0 = length does not sway the verdict once the models "
                   "are accounted for). Compare the judge with the doctors; the arena page's style-controlled "
                   "leaderboard gives the intervals.")
        selfish = data.arena_self_preference(ctx.db, dataset, pw_judge)
        if not selfish.empty:
            ui.dataframe(selfish, hide_index=True, column_config={
                "win_rate": st.column_config.NumberColumn("its win rate", format="percent"),
                "self_judged": st.column_config.CheckboxColumn("judged by itself")})
            st.caption(ui.md_escape(f"Self-preference: {pw_judge} is also a candidate; its win rate as judged by "
                                    "itself beside the doctors' and the other judges' view of it."))
