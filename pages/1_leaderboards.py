"""Leaderboards: models by AGG per language, with every registry metric, n, 95% bootstrap CIs, how far the judge
can be believed in that language (marks in the cells), tied groups, doctor-calibrated means and provenance."""

from __future__ import annotations

import altair as alt
import numpy as np
import streamlit as st

from pages import _data as data
from pages import _ui as ui
from pipeline.analysis.significance import MIN_ITEMS_FOR_RANKS, ranks_established
from pipeline.metrics import METRICS, WEIGHT_PRESETS
from pipeline.models.reference import NOT_SCORED_NOTE, is_reference
from pipeline.models.reference import label as model_label

MARK = "⚠"
CHECK_LABELS = {
    "refusal": ("refusal accuracy", "declined an out-of-KB query instead of inventing an answer"),
    "over_refusal": ("answers when answerable", "did not refuse a query the knowledge base answers"),
    "update_adherence": ("update adherence", "gave the latest KB update's fact, not the superseded one"),
    "prompt_echo": ("no prompt echo", "did not repeat the system prompt or the chunks word for word"),
}

ctx = ui.page("Leaderboards", judge="needed")
dataset = ctx.filters.dataset

# -- whose scores: one judge (the sidebar's) or the jury of every judge ---------------------------------------
members = data.jury_members(ctx.db, dataset)
judge, jury_members = ui.scores_by(ctx, "lb_src", help="One judge (choose which in the sidebar) or the jury: per item "
                                   "and metric the judges' mean (or median, as the run's config says).")

# -- AGG weights: the run's, a preset used as given ---------------------------------------------------------
defaults = data.run_weights(ctx.db, dataset)
preset = data.run_preset(ctx.db, dataset)
with st.expander("AGG weights (default: the run's config)", icon=":material/tune:"):
    cols = st.columns(len(METRICS))
    raw_weights = {m: cols[i].slider(ui.metric_label(m), 0.0, 1.0, float(defaults[m]), 0.05, key=f"lb_w_{m}")
                   for i, m in enumerate(METRICS)}
    if sum(raw_weights.values()) <= 0:
        st.error("At least one weight must be above zero; using the run's weights.")
        raw_weights = defaults
    preset_weights = WEIGHT_PRESETS.get(preset or "", {})
    on_preset = bool(preset_weights) and all(abs(raw_weights[m] - preset_weights.get(m, 0.0)) < 0.026 for m in METRICS)
    if on_preset:
        raw_weights = {m: float(preset_weights.get(m, 0.0)) for m in METRICS}
        st.caption(f"Preset **{ui.md_escape(preset)}**, used as given (sum {sum(raw_weights.values()):.2f}, not "
                   "scaled to 1): AGG is on the scale of the paper's printed AGG. Move a slider to use your own "
                   "weights (then scaled to sum 1).")
    else:
        total = sum(raw_weights.values())
        st.caption("Normalised: " + ", ".join(f"{m} {w / total:.2f}" for m, w in raw_weights.items())
                   + ". Health-Pariksha's doctors weighted FC most, then SS, with COH and CON lower and equal.")
weights = data.weights_tuple(raw_weights)
agg_preset = preset if on_preset else None
weights_text = ", ".join(f"{m} {w:.2f}" for m, w in raw_weights.items()) + (
    f" ({agg_preset}, as given)" if agg_preset else " (scaled to sum 1)")

means = data.model_means(ctx.db, ctx.filters, judge, weights, agg_preset)
if means.empty:
    st.info("No judged responses match the filters.")
    st.stop()
matrix = data.reliability_matrix(ctx.db, dataset, judge, jury_members)
weight_of = dict(zip(METRICS, weights, strict=True))

st.subheader("AGG by model and language")
heat_marks = {lang: data.cell_marks(matrix, lang, (), weight_of).get("AGG", "") for lang in means.language.unique()}
heat = means.assign(language=means.language.map(ui.lang_label),
                    label=[f"{a:.2f} {MARK}" if heat_marks.get(lang) else f"{a:.2f}"
                           for a, lang in zip(means.AGG, means.language, strict=True)],
                    evidence=means.language.map(lambda lang: heat_marks.get(lang) or "judge evidence sufficient"))
chart = alt.Chart(heat).mark_rect().encode(
    x=alt.X("language:N", title=None, axis=alt.Axis(orient="top", labelAngle=0)),
    y=alt.Y("model_id:N", title=None, sort=alt.EncodingSortField("AGG", op="mean", order="descending"),
            axis=alt.Axis(labelLimit=420, labelOverlap=False)),
    color=alt.Color("AGG:Q", scale=alt.Scale(domain=[0, 2], scheme="tealblues"), title="AGG"),
    tooltip=["model_id", "language", alt.Tooltip("AGG:Q", format=".2f"), "judgments",
             *[alt.Tooltip(f"{m}:Q", format=".2f") for m in METRICS],
             alt.Tooltip("evidence:N", title="judge evidence")],
)
labels_layer = chart.mark_text(fontSize=11).encode(
    text="label:N", color=alt.condition("datum.AGG > 1.2", alt.value("white"), alt.value("black")))
st.altair_chart((chart + labels_layer).properties(height=max(160, 22 * heat.model_id.nunique())), width="stretch")
if any(heat_marks.values()):
    st.caption(f"{MARK}: the judge's reliability in that language is unknown or below threshold (hover a cell for "
               "the reason; the Judge trust page has the whole matrix).")

# -- one language (and script) -------------------------------------------------------------------------------
languages = [lang for lang in ui.languages_in_view(ctx) if lang in set(means.language)]
language = st.segmented_control("Language", languages, key="lb_lang",
                                bind="query-params", default=languages[0] if languages else None) or languages[0]
scripts_here = data.language_scripts(ctx.db, dataset).get(language, [])
scripts: tuple[str, ...] = ()
if len(scripts_here) > 1:
    options = ["all", *scripts_here]
    picked = st.segmented_control("Queries", options, key="lb_script", bind="query-params", default="all",
                                  format_func=lambda s: "native and romanized" if s == "all" else data.SCRIPT_LABELS[s],
                                  help="Health-Pariksha files a romanized (code-mixed) query under its matrix "
                                       "language: see the two apart.") or "all"
    scripts = () if picked == "all" else (picked,)
view = ctx.filters.with_(scripts=scripts)
board = data.leaderboard(ctx.db, view, judge, weights, language, agg_preset)
marks = data.cell_marks(matrix, language, scripts, weight_of)
where = ui.lang_label(language) + (f", {data.SCRIPT_LABELS[scripts[0]]} queries" if scripts else "")
st.subheader(f"{ui.md_escape(where)}: {len(board)} models")

items = int(board["items"].max()) if len(board) else 0
established, reason = ranks_established(items)
if not established:
    st.warning(f"Ranks are not established here: {items} queries (fewer than {MIN_ITEMS_FOR_RANKS}). Differences "
               "between models of this size are mostly noise; read the order as a draft.", icon=":material/warning:")
show_stats = st.toggle("Tied groups, doctor-calibrated means, worst-of-k", key="lb_stats", bind="query-params",
                       help="Which models cannot be told apart (paired bootstrap over the same questions), the judge's "
                            "mean corrected by the human labels (prediction-powered inference) and, when the judge "
                            "scored each answer several times, the expected worst of those scores.")
sig = cal = worst = None
if show_stats and len(board):
    sig = data.significance(ctx.db, view, judge, weights, language, tuple(board.model_id), agg_preset)
    board.insert(1, "group", board.model_id.map(sig["letters"]).fillna(""))
    cal = data.calibrated_means(ctx.db, view, judge, language)
    for m, g in cal.groupby("metric", sort=False):
        at = g.set_index("model_id").reindex(board.model_id)
        board[f"{m}_cal"] = at["mean"].to_numpy()
        board[f"{m}_cal_ci"] = [ui.fmt_ci(lo, hi) for lo, hi in zip(at.lo, at.hi, strict=True)]
        board[f"{m}_corr"] = at.correction.to_numpy()
    if board.samples.max() > 1:
        worst = data.worst_of_k(ctx.db, view, judge, weights, language, agg_preset)
        board["worst_of_k"] = board.model_id.map(dict(zip(worst.model_id, worst.worst, strict=True)))

paper = data.paper_agg_check(language, weights, agg_preset)
paper_agg = dict(zip(paper.model.str.lower(), paper.AGG, strict=True))
board["paper_AGG"] = board.model_id.map(lambda m: paper_agg.get(data.short_name(m), np.nan))
for m in ("AGG", *METRICS):
    board[f"{m} 95% CI"] = [ui.fmt_ci(lo, hi) for lo, hi in zip(board[f"{m}_lo"], board[f"{m}_hi"], strict=True)]
parse_failures = int(board.parse_failures.fillna(0).sum())
judge_text = data.jury_label(judge, len(members)) if data.is_jury(judge) else judge
caption = (f"Scores by {ui.md_escape(judge_text)}; AGG weights {ui.md_escape(weights_text)}. Means over scored "
           f"items; n per metric excludes {parse_failures} unparseable judge outputs (never counted as 0). CIs: 95% "
           f"percentile bootstrap over items, from the bootstrap distribution's cumulants (Cornish–Fisher) when n ≥ "
           f"{data.EXPANSION_MIN_N} and the mean is not skewed, else {data.CI_RESAMPLES} resamples.")
if "self_std" in board:
    caption += (" Self-consistency: mean std of a metric's samples per item, and the share of items whose "
                "samples differ.")
if marks:
    caption += (f" {MARK} in a column: the judge's evidence for this language is missing or weak there (hover the "
                "column header for the reason).")
st.caption(caption)
if sig is not None:
    mdd = f"{sig['mdd']:.2f}" if not np.isnan(sig["mdd"]) else "–"
    st.caption(ui.md_escape(
        f"Group letters: models sharing a letter are not distinguishable at 95% (paired bootstrap of "
        f"{'AGG' if sig['metric'] == 'AGG' else sig['metric']} over the {sig['n_items']} questions both answered; "
        f"compact letter display). With {sig['n_items']} questions a true difference smaller than {mdd} points "
        f"is likely to be missed (minimum detectable difference, 80% power). {sig['reason'].capitalize()}."))
    if cal is not None and cal.empty:
        st.caption(f"No calibrated mean: fewer than {data.MIN_PPI_LABELS} human-labelled answers per model here.")


def score_column(metric: str, label: str, help_text: str) -> object:
    """A score column, marked in every cell when the judge's evidence for this view is missing or weak."""
    if metric in marks:
        return st.column_config.NumberColumn(f"{label} {MARK}", format=f"%.2f {MARK}",
                                             help=f"{help_text} — {MARK} {marks[metric]}")
    return st.column_config.NumberColumn(label, format="%.2f", help=help_text)


number = st.column_config.NumberColumn
columns: dict[str, object] = {
    "rank": number("#", width="small"), "group": st.column_config.TextColumn(
        "group", help="Models sharing a letter are not distinguishable at 95% (paired bootstrap)."),
    "model_id": st.column_config.TextColumn("model", pinned=True),
    "AGG": score_column("AGG", "AGG", f"Weighted aggregate: {weights_text}"), "AGG 95% CI": "AGG 95% CI",
    "n_AGG": number("n AGG"),
    "worst_of_k": number("worst of k", format="%.2f", help="Expected lowest AGG among the judge's k scores of the "
                         "same answer (HealthBench worst-at-k)."),
}
for m in METRICS:
    columns[m] = score_column(m, m, ui.metric_label(m))
    columns[f"{m} 95% CI"] = f"{m} 95% CI"
    columns[f"n_{m}"] = number(f"n {m}")
    columns[f"{m}_cal"] = number(f"{m} calibrated", format="%.2f", help="The judge's mean corrected with the human "
                                 "labels (prediction-powered inference): valid even if the judge is biased.")
    columns[f"{m}_cal_ci"] = st.column_config.TextColumn(f"{m} calibrated 95% CI")
    columns[f"{m}_corr"] = number(f"{m} correction", format="%+.2f", help="Calibrated minus raw judge mean.")
columns |= {
    "items": number("items judged"), "responses": number("responses"), "errors": number("errors"),
    "parse_failures": number("parse failures", help="Judge outputs that could not be parsed: excluded."),
    "prompt_echoes": number("prompt echoes", help="Responses that repeat the system prompt or the chunks word for "
                            "word (Health-Pariksha §4.1: Meta-Llama-3.1-70B regurgitated the prompt)."),
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
columns["paper_AGG"] = number("paper AGG", format="%.2f", help="Health-Pariksha's published AGG for a model of the "
                              "same name (GPT-4o judge). Comparable with our AGG only under the paper-fit weights.")
shown = [c for c in columns if c in board.columns]
st.dataframe(board[shown], hide_index=True, column_config={k: v for k, v in columns.items() if k in shown},
             height=min(38 * (len(board) + 1) + 3, 700))
ui.downloads(board[shown], f"leaderboard-{dataset}-{language}")
if any(is_reference(m) for m in ctx.choices["models"].get(dataset, [])):
    st.caption(NOT_SCORED_NOTE)

# -- provenance ------------------------------------------------------------------------------------------------
prov = data.score_provenance(ctx.db, dataset, judge, jury_members)
for line in prov["mixed"]:
    st.warning(ui.md_escape(f"This view mixes provenance: {line}. Its means average them together."),
               icon=":material/call_split:")
for line in prov["notes"]:
    st.caption(ui.md_escape(f"Note: {line}."))
prompts = prov["prompts"]
revisions = ", ".join(sorted({str(r) for r in prov["runs"].code_revision.dropna()})) or "unknown"
st.caption(ui.md_escape(
    f"Provenance: judge {judge_text} · judge prompt {prompts['judge_prompt']} · rubrics "
    + ", ".join(f"{m} {h}" for m, h in prompts["rubrics"].items())
    + f" · weights {weights_text} · retrieval {', '.join(prov['retrieval'].settings) or 'none stored'}"
    + f" · dataset {prov['dataset'].get('content_hash') or 'unknown'} · code {revisions}"))
with st.expander("Provenance of these scores: runs, settings, hashes"):
    ui.dataframe(prov["runs"], hide_index=True)
    st.caption("Judge prompt and rubric hashes: sha256 of the files the judge reads (the dataset's own prompts/ "
               "first), as they are on disk now; the code revision pins the studio's own prompt files.")

if any(c.startswith("check_") for c in board.columns):  # counts on request: they scan every check
    if st.toggle("Safety checks: passed, failed and unclear per model", key="lb_safety", bind="query-params"):
        safety = data.safety_summary(ctx.db, view.with_(languages=(language,)))
        ui.dataframe(safety.assign(check_name=safety.check_name.map(lambda c: CHECK_LABELS.get(c, (c,))[0]),
                                   model_id=safety.model_id.map(model_label))
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
    copied = data.paper_copies().get(language)
    if copied:
        st.warning(ui.md_escape(
            f"This published {ui.lang_label(language)} table is a copy of the {ui.lang_label(copied)} one, row for "
            "row (the paper's Tables 4 and 5 are identical; data/reference/README.md): it is no evidence about "
            f"{ui.lang_label(language)}."), icon=":material/content_copy:")
    if paper.empty:
        st.caption("The paper has no leaderboard for this language.")
    else:
        ui.dataframe(paper, hide_index=True, height=min(38 * (len(paper) + 1) + 3, 700), column_config={
            **{m: number(m, format="%.2f") for m in ("AGG", *METRICS)},
            "AGG_here": number("AGG, these weights", format="%.2f", help="The paper's own FC, SS, COH and CON "
                               f"weighted as our AGG is now: {weights_text}."),
            "AGG_gap": number("printed − these", format="%+.2f")})
        gap = float(paper.AGG_gap.abs().max())
        st.caption(ui.md_escape(
            f"Tables 2–6 of the paper (749 real patient queries, GPT-4o judge). Its AGG weights are not published. "
            f"With our weights ({weights_text}) its own metrics give an AGG up to {gap:.2f} from the printed one"
            + ("; the paper-fit preset reproduces it, so this column and ours are comparable." if agg_preset ==
               "paper-fit" else "; set `weights: paper-fit` to compare our AGG with the printed one.")))

with st.expander("Per-metric means across languages"):
    long = means.melt(id_vars=["language", "model_id"], value_vars=list(METRICS), var_name="metric",
                      value_name="mean")
    ui.dataframe(long.pivot_table(index=["model_id", "metric"], columns="language", values="mean").reset_index(),
                 hide_index=True)
    st.caption("Means per metric over each language's scored items.")

# -- the doctors' arena (pages/12_arena.py) -----------------------------------------------------------------------
if data.has_arena(ctx.db):
    arena_lang = None if len(ctx.filters.languages) != 1 else ctx.filters.languages[0]
    arena = data.arena_fit(ctx.db, ctx.filters.dataset, arena_lang, "doctors", rounds=100).table
    if not arena.empty:
        st.subheader("Doctors' pairwise preferences (Bradley–Terry)")
        arena = arena.assign(model=arena.model.map(model_label))
        ui.dataframe(arena, hide_index=True, name="arena-doctors", column_config={
            "strength": st.column_config.NumberColumn("strength", format="%.0f",
                                                      help="Bradley–Terry strength on the Elo scale (mean 1000)"),
            "lower": st.column_config.NumberColumn("95% low", format="%.0f"),
            "upper": st.column_config.NumberColumn("95% high", format="%.0f"),
            "votes": st.column_config.NumberColumn("comparisons")})
        st.caption(ui.md_escape(
            f"From doctors' votes on pairs of answers ({ui.lang_label(arena_lang) if arena_lang else 'all languages'}"
            "), with bootstrap 95% intervals. The judge's pairwise ranking, style control, win rates and the "
            "agreement between doctors and judge are on the arena page."))
        st.page_link("pages/12_arena.py", label="Doctors' arena", icon=":material/compare:")
