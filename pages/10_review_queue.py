"""Review queue for doctors: the most worrying answers first, everything about one of them, and the doctor's
verdict saved as a human label (it enters agreement and calibration like any other)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import streamlit as st

from pages import _data as data
from pages import _ui as ui
from pipeline.metrics import METRICS

VERDICTS = {0: "0 — wrong or unsafe", 1: "1 — partly right", 2: "2 — right and safe"}
QUEUE_SIZE = 50

ctx = ui.page("Review queue", judge="shown",
              caption="Answers are ordered by severity: how likely they are to mislead a patient, from what the "
                      "pipeline already measured. Give your verdict; it is saved as your human label of the chosen "
                      "metric and the answer leaves your queue.")
with st.expander("How severity is computed"):
    ui.dataframe(pd.DataFrame([{"rule": r, "fires when": what, "adds": adds}
                               for r, (what, adds) in data.REVIEW_RULES.items()]), hide_index=True,
                 name="review-severity-rules")
    st.caption("Severity is the sum (0–13); ties go to the higher Med-CoDE P(High). A rule without its inputs (no "
               "critique, one judge, no rubric) adds nothing.")

c1, c2, c3 = st.columns([2, 1, 1])
annotator = ui.annotator("rq_annotator", c1, bind=True)
metric = c2.selectbox("Verdict on", list(METRICS), index=METRICS.index("FC") if "FC" in METRICS else 0,
                      key="rq_metric", bind="query-params", help=ui.metric_help())
hide = c3.toggle("Hide reviewed", value=True, key="rq_hide", help="Answers you already labelled on this metric.")
queue = data.review_queue(ctx.db, ctx.filters, ctx.judge, annotator, metric, hide_reviewed=hide, limit=QUEUE_SIZE)
cols = st.columns(3)
cols[0].metric("Answers in the filters", queue["total"])
cols[1].metric("Flagged by a rule", queue["flagged"])
cols[2].metric(f"Reviewed by you ({metric})", queue["reviewed"])
items = queue["items"]
if items.empty:
    st.success("Nothing left to review here." if queue["total"] else "No answers match the filters.")
    st.stop()
shown = items.assign(reasons=items.reasons.map("; ".join))
st.dataframe(shown, hide_index=True, column_config={
    "severity": st.column_config.ProgressColumn("severity", min_value=0.0, max_value=13.0, format="%.2f"),
    "p_high": st.column_config.NumberColumn("P(High)", format="%.2f"),
    "FC": st.column_config.NumberColumn("FC", format="%.2f"),
    "judge_spread": st.column_config.NumberColumn("judge spread", format="%.2f"),
    "harmful_met": st.column_config.NumberColumn("harmful criteria met")})
ui.downloads(shown, f"review-queue-{ctx.filters.dataset}")

labels = [f"{r.severity:.2f} · {r.query_id} · {r.model_id}" for r in items.itertuples()]
if st.session_state.get("rq_item") not in (None, *labels):
    del st.session_state["rq_item"]
choice = st.selectbox("Answer to review", labels, key="rq_item")
row = items.iloc[labels.index(choice)]
detail = data.review_item(ctx.db, row.dataset, row.query_id, row.model_id)
item = detail["item"]
st.subheader(ui.md_escape(f"{row.query_id} · {row.model_id}"))
st.markdown("**Why it is here:** " + ui.md_escape("; ".join(row.reasons) or "no rule fired (lowest severity)"))
left, right = st.columns(2)
with left:
    ui.show_query(SimpleNamespace(**item))
    ui.show_text(f"Response of {item['model_id']}", item["text"])
with right:
    st.caption("Knowledge-base chunks the model was given")
    if detail["chunks"].empty:
        st.text("(no retrieval stored: closed-book or not retrieved)")
    for c in detail["chunks"].itertuples():
        ui.show_text(f"{c.slot} {c.pos}: {c.chunk_id} — {c.title or ''}", c.text)

st.markdown("**Every score of this answer**")
judgments = detail["judgments"]
if judgments.empty:
    st.caption("No judgment of this text.")
else:
    st.dataframe(judgments, hide_index=True)
    ui.downloads(judgments, f"review-judgments-{row.query_id}", key=f"dl|rq-judgments|{row.query_id}|{row.model_id}")
for crit in detail["critiques"].itertuples():
    ui.show_text(f"Med-CoDE critique by {crit.critic_id} ({crit.label}; P(High) {ui.fmt_score(crit.p_high)})",
                 crit.critique)
facts = pd.concat([detail["safety"].assign(kind="safety check").rename(columns={"check_name": "name",
                                                                              "passed": "value"}),
                   detail["lexical"].melt(var_name="name", value_name="value").assign(kind="lexical")],
                  ignore_index=True) if len(detail["lexical"]) or len(detail["safety"]) else pd.DataFrame()
if not facts.empty:
    facts["value"] = facts["value"].map(lambda v: ui.fmt_score(v) if isinstance(v, float) else str(v))
    ui.dataframe(facts, hide_index=True, name=f"review-checks-{row.query_id}")
for grader, rubric in detail["rubric"].items():
    crit = rubric["criteria"]
    if crit.empty:
        continue
    st.caption(ui.md_escape(f"Rubric criteria graded by {grader}: score {ui.fmt_score(rubric['score'])} "
                            f"({ui.fmt_score(rubric['achieved'])} of {ui.fmt_score(rubric['possible'])} points)"))
    table = crit[["criterion", "points", "status", "explanation"]]
    ui.dataframe(table, hide_index=True, name=f"review-rubric-{row.query_id}")
if not detail["labels"].empty:
    st.caption("Human labels already given to this answer")
    ui.dataframe(detail["labels"], hide_index=True, name=f"review-labels-{row.query_id}")

st.subheader("Your verdict")
if not annotator.strip():
    st.info("Enter your name above to give verdicts.")
    st.stop()
with st.form("rq_verdict", clear_on_submit=True):
    score = st.radio(ui.md_escape(f"{metric} ({ui.metric_label(metric)})"), list(VERDICTS), format_func=VERDICTS.get,
                     horizontal=True, index=None)
    comment = st.text_area("Comment (optional)", max_chars=2000)
    saved = st.form_submit_button("Save verdict", type="primary", icon=":material/save:")
if saved:
    if score is None:
        st.warning("Choose a score first.")
    else:
        with ui.saving(ctx.db):
            data.save_label(ctx.db, dataset=row.dataset, query_id=row.query_id, model_id=row.model_id, metric=metric,
                            annotator=annotator, score=int(score), comment=comment, source=data.REVIEW_SOURCE)
        data.clear_caches()
        st.session_state.pop("rq_item", None)
        st.toast(ui.md_escape(f"Saved: {metric} {score} for {row.query_id} · {row.model_id}"))
        st.rerun()
