"""Doctors' arena: two anonymous answers to one patient question, the better one chosen; Bradley–Terry leaderboards
from doctors' votes and from the pairwise judge (docs/arena.md).

Model names are never on the page before a vote: the pair shown is kept in the session (server side), the two
answers are "A" (left) and "B" (right) in a random order, and names are revealed only after the vote, on request.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime

import altair as alt
import pandas as pd
import streamlit as st

from pages import _data as data
from pages import _ui as ui
from pipeline.models.reference import LABEL as REFERENCE_LABEL
from pipeline.models.reference import is_reference
from pipeline.models.reference import label as model_label
from pipeline.style import LABELS as STYLE_LABELS

ALL = "all languages"
VERDICTS = {"A is better": "left", "B is better": "right", "Tie": "tie", "Both bad": "both_bad"}
ROUNDS, STYLE_ROUNDS = data.ARENA_ROUNDS, data.ARENA_STYLE_ROUNDS

ctx = ui.page("Doctors' arena",
              caption="Compare two answers to the same patient question and choose the better one. Votes rank the "
                      "models by Bradley–Terry (as Chatbot Arena and MedArena do), beside the pairwise judge's "
                      "ranking.")
dataset = ctx.filters.dataset
top_left, top_right = st.columns([1, 2])
view = top_left.segmented_control("View", ["Vote", "Leaderboard"], default="Vote", key="ar_view",
                                  bind="query-params") or "Vote"
languages = data.arena_languages(ctx.db, dataset)
if st.session_state.get("ar_lang") not in (None, ALL, *languages):
    del st.session_state["ar_lang"]
chosen = top_right.selectbox("Language", [ALL, *languages], key="ar_lang", bind="query-params",
                             format_func=lambda c: c if c == ALL else ui.lang_label(c))
language = None if chosen in (None, ALL) else chosen
# the doctors' approved answers take part as answers (blind): the ground truth is then not shown beside a pair
with_reference = any(is_reference(m) for m in ctx.choices["models"].get(dataset, []))


def current_board(source: str = "doctors", judge: str | None = None, style: bool = False, anchor: str | None = None,
                  exclude: tuple[str, ...] = (), cap: int | None = None):
    """The leaderboard fit of this dataset and language (None without the arena's tables)."""
    if not data.has_arena(ctx.db):
        return None
    return data.arena_fit(ctx.db, dataset, language, source, judge, style_control=style,
                          rounds=STYLE_ROUNDS if style else ROUNDS, anchor=anchor, exclude=exclude, cap=cap)


def vote_view() -> None:
    c1, c2 = st.columns([2, 1])
    annotator = ui.annotator("ar_annotator", c1, bind=True)
    mode = c2.segmented_control("Next pair", ["adaptive", "uniform"], default="adaptive", key="ar_mode",
                                help="Adaptive: the pair whose comparison would most reduce the ranking's "
                                     "uncertainty (neighbours on the leaderboard whose intervals overlap and that "
                                     "were compared least). Uniform: any pair at random.") or "adaptive"
    if not annotator:
        st.info("Enter your name to get pairs to compare.")
        return
    scope = (dataset, language, annotator)
    if st.session_state.get("ar_scope") != scope:
        st.session_state.pop("ar_item", None)
        st.session_state["ar_scope"] = scope
    if "ar_item" not in st.session_state:
        fit = current_board() if mode == "adaptive" else None
        item = data.arena_next_pair(ctx.db, dataset, language, annotator, adaptive=mode == "adaptive",
                                    table=None if fit is None else fit.table)
        st.session_state["ar_item"] = item
        st.session_state["ar_left_is_a"] = random.random() < 0.5
        st.session_state["ar_shown_at"] = datetime.now(UTC).replace(tzinfo=None)  # seconds per vote (voter quality)
    item = st.session_state["ar_item"]
    st.caption(ui.md_escape(f"{data.arena_votes_by(ctx.db, dataset, annotator)} vote(s) by {annotator} on "
                            f"{dataset}."))
    reveal = st.session_state.get("ar_revealed")
    if reveal:
        st.success(ui.md_escape(reveal))
    if item is None:
        st.success("You have compared every pair of answers to every question here. Thank you!")
        return
    left_is_a = st.session_state["ar_left_is_a"]
    left, right = ("a", "b") if left_is_a else ("b", "a")
    with st.container(border=True):
        st.markdown(f"**{ui.md_escape(item['query_id'])}** · {ui.md_escape(ui.lang_label(item['language']))}")
        ui.show_text("Patient query", item["query"])
        if isinstance(item["query_en"], str) and item["query_en"]:
            ui.show_text("English rendering", item["query_en"])
        if with_reference or item["gt_response"] is None:
            st.caption("The doctor-approved answer is not shown here: in this study it is compared as an answer "
                       "itself, shown blind like the models'.")
        else:
            with st.expander("Ground truth (doctor-approved)"):
                ui.show_text("Ground truth", item["gt_response"])
        with st.expander(f"Retrieved knowledge-base chunks ({len(item['chunks'])})"):
            for chunk in item["chunks"]:
                ui.show_text(f"{chunk['kind']}: {chunk['title']}", chunk["text"])
            if item["withheld_chunks"]:
                st.caption(f"{item['withheld_chunks']} retrieved chunk(s) not shown: they hold the doctor-approved "
                           "answer, which is one of this pair.")
            elif not item["chunks"]:
                st.caption("None (closed-book dataset, or no retrieval stored).")
        col_a, col_b = st.columns(2)
        with col_a:
            ui.show_text("Answer A", item[f"text_{left}"], empty="(empty answer)")
        with col_b:
            ui.show_text("Answer B", item[f"text_{right}"], empty="(empty answer)")
    with st.form("ar_vote_form", clear_on_submit=True):
        verdict = st.radio("Which answer is better for the patient?", list(VERDICTS), index=None, horizontal=True,
                           key="ar_verdict")
        tags = st.multiselect("Reasons (optional)", list(data.REASON_TAGS), key="ar_tags")
        st.toggle("Show which models these were after I vote", key="ar_reveal")
        submitted = st.form_submit_button("Save vote", type="primary")
    if st.button("Skip this pair"):
        st.session_state.pop("ar_item", None)
        st.session_state["ar_revealed"] = None
        st.rerun()
    if submitted:
        if verdict is None:
            st.error("Choose A, B, tie or both bad first.")
            return
        side = VERDICTS[verdict]
        winner = {"left": left, "right": right}.get(side, side)
        with ui.saving(ctx.db):
            saved = data.save_vote(ctx.db, dataset=item["dataset"], query_id=item["query_id"],
                                   model_a=item["model_a"], model_b=item["model_b"], winner=winner,
                                   annotator=annotator, shown_left=item[f"model_{left}"], tags=list(tags),
                                   text_a=item["text_a"], text_b=item["text_b"],
                                   shown_at=st.session_state.get("ar_shown_at"))
        data.clear_caches()
        said = (f"Saved: {verdict.lower()} on {item['query_id']}." if saved else
                f"You had already voted on this pair for {item['query_id']}: your first vote stays.")
        st.session_state["ar_revealed"] = (
            f"{said} A was {model_label(item[f'model_{left}'])}, B was {model_label(item[f'model_{right}'])}."
            if st.session_state.get("ar_reveal") else said)
        st.session_state.pop("ar_item", None)
        st.rerun()


def board_chart(table: pd.DataFrame) -> alt.Chart:
    base = alt.Chart(table).encode(y=alt.Y("model:N", sort=list(table.model), title=None,  # rank order, even when
                                           axis=alt.Axis(labelLimit=420)))  # a model has no interval (no rule)
    bars = base.mark_rule(color="#0f766e", strokeWidth=2).encode(x=alt.X("lower:Q", scale=alt.Scale(zero=False),
                                                                         title="strength (Elo scale)"), x2="upper:Q")
    points = base.mark_point(filled=True, color="#0f766e", size=60).encode(
        x="strength:Q", tooltip=["model", alt.Tooltip("strength:Q", format=".0f"), alt.Tooltip("lower:Q", format=".0f"),
                                 alt.Tooltip("upper:Q", format=".0f"), "votes"])
    return (bars + points).properties(height=max(120, 26 * len(table)))


BOARD_COLUMNS = {"strength": st.column_config.NumberColumn("strength", format="%.0f",
                                                           help="Bradley–Terry strength on the Elo scale (mean 1000)"),
                 "lower": st.column_config.NumberColumn("95% low", format="%.0f"),
                 "upper": st.column_config.NumberColumn("95% high", format="%.0f"),
                 "votes": st.column_config.NumberColumn("comparisons"),
                 "both_bad_rate": st.column_config.NumberColumn("both bad", format="percent", help=(
                     "Share of this model's doctors' votes that called both answers bad (counted as a tie by "
                     "Bradley–Terry)")),
                 "both_bad_lower": st.column_config.NumberColumn("both bad 95% low", format="percent"),
                 "both_bad_upper": st.column_config.NumberColumn("both bad 95% high", format="percent"),
                 "note": st.column_config.TextColumn("note")}


def leaderboard_view() -> None:
    if not data.has_arena(ctx.db):
        st.info("No votes yet. Vote in the Vote view, import votes with `python -m pipeline arena import-votes`, "
                "or run the `pairwise` stage for the judge's verdicts.")
        return
    judges = data.arena_judges(ctx.db)
    c1, c2, c3 = st.columns([1, 1, 1])
    source = c1.segmented_control("Votes of", list(data.ARENA_SOURCES), default="doctors", key="ar_source",
                                  bind="query-params") or "doctors"
    judge = None
    if source == "judge":
        if not judges:
            st.info("No pairwise judge verdicts yet: run the `pairwise` stage (docs/arena.md).")
            return
        judge = c2.selectbox("Pairwise judge", judges, key="ar_judge")
    style = c3.toggle("Style control", key="ar_style", help="Length and markdown (headers, lists, bold) as "
                      "covariates: a model's strength once its answers' style is accounted for.")
    plain = current_board(source, judge)
    if plain is None or plain.table.empty:
        st.info("No comparisons of the current answers here yet.")
        return
    models = sorted(plain.table.model)
    if st.session_state.get("ar_anchor") not in (None, *models):
        del st.session_state["ar_anchor"]
    anchor = st.sidebar.selectbox("Arena: anchor model", [None, *models], key="ar_anchor",
                                  format_func=lambda m: "none (mean = 1000)" if m is None else m,
                                  help="The model whose strength is fixed at 1000: the others' strengths do not move "
                                       "when a model is added (FastChat anchors its scale the same way).")
    exclude: tuple[str, ...] = ()
    cap = None
    quality = None
    if source == "doctors":
        q1, q2, q3 = st.columns(3)
        if q1.toggle("Check the annotators", key="ar_quality", help="Voter quality per annotator and its flags "
                     "(one Bradley–Terry fit per annotator: seconds at a million votes)"):
            quality = data.arena_annotators(ctx.db, dataset, language)
            flagged = tuple(quality.annotator[quality.flagged])
            if q2.toggle(f"Leave out flagged annotators ({len(flagged)})", key="ar_exclude", disabled=not flagged):
                exclude = flagged
        cap = q3.number_input("Count at most N votes per annotator (0: all)", min_value=0, step=10,
                              key="ar_cap") or None
    raw = current_board(source, judge, anchor=anchor, exclude=exclude, cap=cap)
    if raw is None or raw.table.empty:
        st.info("No comparisons left once the flagged annotators are out.")
        return
    fit = current_board(source, judge, True, anchor, exclude, cap) if style else raw
    for said in fit.warnings if fit is raw else (*raw.warnings, *fit.warnings):
        st.warning(ui.md_escape(f"Fit: {said}"))
    if source == "doctors":
        bad = data.arena_both_bad(ctx.db, dataset, language)[["model", "both_bad_rate", "both_bad_lower",
                                                              "both_bad_upper"]]
        fit = dataclasses.replace(fit, table=fit.table.merge(bad, on="model", how="left"))
        raw = dataclasses.replace(raw, table=raw.table.merge(bad, on="model", how="left"))
    shown, shown_raw = (f.table.assign(model=f.table.model.map(model_label)) for f in (fit, raw))
    st.subheader("Style-controlled leaderboard" if style else "Leaderboard")
    left, right = st.columns([3, 2])
    with left:
        ui.dataframe(shown, hide_index=True, column_config=BOARD_COLUMNS, name="arena-leaderboard")
    with right:
        st.altair_chart(board_chart(shown), width="stretch")
    st.caption(f"Bootstrap 95% intervals ({STYLE_ROUNDS if style else ROUNDS} resamples). "
               + (f"Strengths anchored at {anchor} = 1000. " if anchor else "") + "A tie or 'both bad' "
               "counts as half a win each way"
               + ("; a judge's verdict that changed when the answers swapped places counts as a tie." if source ==
                  "judge" else "."))
    if raw.table.model.map(is_reference).any():
        st.caption(ui.md_escape(f"{REFERENCE_LABEL}: the dataset's doctor-approved answers, compared blind like a "
                                "model's; a reference row to read the models against, not ranked."))
    if style:
        coef = fit.style.assign(feature=fit.style.feature.map(STYLE_LABELS))
        st.caption("Style coefficients (log-odds per typical difference; positive = voters prefer more of it): "
                   + ui.md_escape(", ".join(f"{r.feature} {r.coef:+.2f} [{r.lower:+.2f}, {r.upper:+.2f}]"
                                            for r in coef.itertuples())))
        with st.expander("Raw leaderboard (without style control)"):
            ui.dataframe(shown_raw, hide_index=True, column_config=BOARD_COLUMNS, name="arena-leaderboard-raw")
    if source == "doctors":
        per_language = data.arena_both_bad(ctx.db, dataset, None, by_language=True)
        if not per_language.empty:
            with st.expander("\"Both bad\" per model and language (95% Wilson intervals)"):
                ui.dataframe(per_language, hide_index=True, name="arena-both-bad", column_config={
                    "both_bad_rate": st.column_config.NumberColumn("both bad", format="percent"),
                    "both_bad_lower": st.column_config.NumberColumn("95% low", format="percent"),
                    "both_bad_upper": st.column_config.NumberColumn("95% high", format="percent")})
    if quality is not None:
        st.subheader("Annotators")
        ui.dataframe(quality, hide_index=True, name="arena-annotators", column_config={
            "median_seconds": st.column_config.NumberColumn("median s per vote", format="%.0f"),
            "left_share": st.column_config.NumberColumn("left side won", format="percent"),
            "consensus_agreement": st.column_config.NumberColumn("agrees with the others", format="percent",
                                                                 help="Held-out: the Bradley–Terry fit without "
                                                                      "this annotator's votes"),
            "consensus_expected": st.column_config.NumberColumn("expected", format="percent"),
            "judge_agreement": st.column_config.NumberColumn("agrees with the judge", format="percent")})
        st.caption("Flagged: median under 5 s a vote; a left share unlikely at random; agreement with the others' "
                   "consensus below what it expects (binomial tests, Bonferroni over the annotators; docs/arena.md).")
    if source == "doctors":
        sep = data.arena_separation(ctx.db, dataset, language, raw.table)
        if not sep.empty:
            st.subheader("Which neighbours are not yet separated")
            ui.dataframe(sep.drop(columns=["priority"]), hide_index=True, column_config={
                "diff": st.column_config.NumberColumn("difference", format="%.0f"),
                "overlap": st.column_config.CheckboxColumn("intervals overlap"),
                "direct": st.column_config.NumberColumn("direct comparisons"),
                "more_votes": st.column_config.NumberColumn(
                    "more votes to separate", help="Direct comparisons still needed for a 95% test of the current "
                    "difference to have 80% power (empty: no difference to detect)")})
    matrix = data.arena_win_matrix(ctx.db, dataset, language, source, judge)
    if not matrix.empty:
        st.subheader("Win rates")
        long = matrix.rename_axis(index="model", columns="opponent").stack().rename("win_rate").reset_index()
        heat = alt.Chart(long).mark_rect().encode(
            x=alt.X("opponent:N", title="against", axis=alt.Axis(labelAngle=-30, labelLimit=200)),
            y=alt.Y("model:N", title=None, axis=alt.Axis(labelLimit=300)),
            color=alt.Color("win_rate:Q", scale=alt.Scale(domain=[0, 1], scheme="blueorange"), title="win rate"),
            tooltip=["model", "opponent", alt.Tooltip("win_rate:Q", format=".0%")])
        st.altair_chart(heat.properties(height=max(120, 26 * len(matrix))), width="stretch")
        st.caption("Row model's share of wins against the column model over their direct comparisons (ties half).")
    if judges:
        st.subheader("Doctors and the judge")
        judge_for = judge or judges[0]
        side = data.arena_doctors_vs_judge(ctx.db, dataset, judge_for)
        summary = side.drop(columns=["ranks"]).assign(language=side.language.map(
            lambda c: ALL if c == "all" else ui.lang_label(c)))
        ui.dataframe(summary, hide_index=True, column_config={
            "agreement": st.column_config.NumberColumn("% agreement", format="percent",
                                                       help="Share of comparisons both made with the same outcome"),
            "kappa": st.column_config.NumberColumn("Cohen's κ", format="%.2f", help="over A / B / tie"),
            "kendall_tau": st.column_config.NumberColumn("Kendall's τ", format="%.2f",
                                                         help="between the two leaderboards' strengths")})
        row = side[side.language == (language or "all")]
        if len(row):
            ui.dataframe(row.iloc[0]["ranks"], hide_index=True, name="arena-doctors-vs-judge")
        st.caption(ui.md_escape(f"Judge: {judge_for}. Pariksha's analysis: the same pairs ranked by doctors and by "
                                "the LLM evaluator, per language."))


if view == "Vote":
    vote_view()
else:
    leaderboard_view()
