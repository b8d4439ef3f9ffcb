"""Compare runs: two result databases, or two models, judges or datasets of one, side by side — paired differences
per metric with 95 % CIs, the items that changed most, and which provenance differs."""

from __future__ import annotations

import altair as alt
import streamlit as st

from pages import _data as data
from pages import _ui as ui
from pipeline.metrics import METRICS

FILES, WITHIN = "files", "within"
MODES = {FILES: "Two result databases", WITHIN: "Within this database"}
EVERY = "(every model)"

ctx = ui.page("Compare runs",
              caption="Results are kept per dataset, query, model and judge, so a later run of the same config "
                      "overwrites an earlier one's rows. Two runs can therefore be compared when each wrote its own "
                      "result database (e.g. a retrieval or prompt change run into a second file), or, inside one "
                      "database, as two models, judges or datasets. Differences are B − A over the items both sides "
                      "scored, with a 95% paired-bootstrap interval.")
mode = st.segmented_control("Compare", list(MODES), format_func=MODES.get, key="cr_mode", bind="query-params",
                            default=FILES) or FILES


def pick(options: list[str], key: str, label: str, default: str | None, **kw) -> str:
    if st.session_state.get(key) not in (None, *options):
        del st.session_state[key]
    index = options.index(default) if default in options else 0
    return st.selectbox(label, options, index=index, key=key, bind="query-params", **kw)


b_db = ctx.db
if mode == FILES:
    folder = data.results_dir(ctx.db)
    files = data.result_files(ctx.db)
    if not files:
        st.info(ui.md_escape(f"No other result database in {folder}. Run the second configuration into its own "
                             f"file there (python -m pipeline run --config … --db {folder / 'other.duckdb'}) and "
                             f"pick it here; {data.RESULTS_DIR_ENV} names another folder."))
        st.stop()
    b_name = pick(files, "cr_b_db", "B: result database", None,
                  help=f"The other result databases in {folder} (the results folder; set {data.RESULTS_DIR_ENV} "
                       "to use another). Opened read-only.")
    b_db = str(folder / b_name)
    st.caption(ui.md_escape(f"A: {ctx.db} (this database) · B: {b_db}"))

try:
    choices = {"A": ctx.choices, "B": ctx.choices if b_db == ctx.db else data.choices(b_db)}
except Exception as exc:  # not a results database (DuckDB's error says why)
    st.error(ui.md_escape(f"Cannot read {b_db} as a result database: {exc}"))
    st.stop()
sides = {}
cols = st.columns(2)
for (name, db), col in zip((("A", ctx.db), ("B", b_db)), cols, strict=True):
    with col:
        st.markdown(f"**{name}**")
        ch = choices[name]
        if not ch["datasets"]:
            st.info(f"{name} holds no dataset.")
            st.stop()
        ds = pick(ch["datasets"], f"cr_ds_{name.lower()}", "Dataset", ctx.filters.dataset)
        models = ch["models"].get(ds, [])
        other = choices["B" if name == "A" else "A"]
        theirs = {m for ms in other["models"].values() for m in ms}
        common = [m for m in models if m in theirs]
        model = pick([EVERY, *models], f"cr_model_{name.lower()}", "Model",
                     (ctx.filters.models[0] if ctx.filters.models else (common[0] if common else None)))
        judges = ch["judges"].get(ds, [])
        judge = pick(judges, f"cr_judge_{name.lower()}", "Judge", data.judge_in_use(db, ds)) if judges else None
        sides[name] = data.Side(db=str(db), dataset=ds, model=None if model == EVERY else model, judge=judge)
a, b = sides["A"], sides["B"]
if (a.model is None) != (b.model is None):
    st.info("Choose one model on each side, or every model on both.")
    st.stop()
if a == b:
    st.warning("Both sides are the same rows (same database, dataset, model and judge): there is nothing to "
               "compare. Pick another database, model, judge or dataset for B.")
    st.stop()

weights = data.weights_tuple(data.run_weights(ctx.db, a.dataset))
metric = st.session_state.get("cr_metric", "AGG")
result = data.compare_runs(a, b, weights, metric)
st.caption(ui.md_escape(f"{result['pairs']} shared items; {result['only_a']} only in A, {result['only_b']} only "
                        f"in B. A = {a.describe()} · B = {b.describe()}"))
table = result["metrics"]
if table.empty:
    st.info("The two sides share no scored item.")
    st.stop()

st.subheader("Paired differences (B − A)")
judged = table[table.metric.isin([*METRICS, "AGG"]) & table.n.gt(1)]
if not judged.empty:
    base = alt.Chart(judged).encode(y=alt.Y("metric:N", sort=None, title=None))
    zero = alt.Chart().mark_rule(color="#9ca3af", strokeDash=[4, 4]).encode(x=alt.datum(0))
    rules = base.mark_rule(color="#1f2933", strokeWidth=2).encode(x=alt.X("ci_lo:Q", title="B − A (judge scale "
                                                                         "0–2), 95% CI"), x2="ci_hi:Q")
    dots = base.mark_point(filled=True, size=80).encode(
        x="diff:Q", color=alt.Color("differs:N", scale=alt.Scale(domain=[False, True], range=["#6b7280", "#b91c1c"]),
                                    title="CI excludes 0"),
        tooltip=["metric", "n", alt.Tooltip("mean_a:Q", format=".3f"), alt.Tooltip("mean_b:Q", format=".3f"),
                 alt.Tooltip("diff:Q", format="+.3f"), alt.Tooltip("ci_lo:Q", format="+.3f"),
                 alt.Tooltip("ci_hi:Q", format="+.3f")])
    st.altair_chart((zero + rules + dots).properties(height=40 * len(judged) + 40), width="stretch")
st.dataframe(table, hide_index=True, column_config={
    "metric": st.column_config.TextColumn("metric", help="Judge metrics, AGG, lexical scores, Med-CoDE P(High) "
                                          "(lower is better) and the rubric score."),
    "n": st.column_config.NumberColumn("shared items", help="Items both sides scored."),
    **{c: st.column_config.NumberColumn(format="%.3f") for c in ("mean_a", "mean_b")},
    **{c: st.column_config.NumberColumn(format="%+.3f") for c in ("diff", "ci_lo", "ci_hi")},
    "differs": st.column_config.CheckboxColumn("CI excludes 0"),
    "better": st.column_config.TextColumn("better side"),
    "only_a": st.column_config.NumberColumn("scored only in A"),
    "only_b": st.column_config.NumberColumn("scored only in B")})
ui.downloads(table, f"compare-metrics-{a.dataset}-{b.dataset}")
lines = [f"**{ui.md_escape(r.metric)}**: B − A = {r.diff:+.3f}, 95% CI [{r.ci_lo:+.3f}, {r.ci_hi:+.3f}] over {r.n} "
         f"items" + (" — differs" if r.differs else "") for r in judged.itertuples() if r.n > 1]
if lines:
    st.markdown("  \n".join(lines))
few = int(table.n[table.n > 0].min()) if (table.n > 0).any() else 0
if few < data.MIN_ITEMS_FOR_RANKS:
    st.warning(f"Only {few} shared items for some metrics: with fewer than {data.MIN_ITEMS_FOR_RANKS} the percentile "
               "bootstrap under-covers, so treat these intervals as rough and compare on more queries.",
               icon=":material/info:")

st.subheader("Items that changed most")
options = list(table.metric)
st.selectbox("By", options, index=options.index(result["metric"]), key="cr_metric", bind="query-params",
             help="Items ordered by how much this score moved between A and B, then those whose text changed.")
changed = result["changed"]
if changed.empty:
    st.caption("No shared item changed its score or its text.")
else:
    st.dataframe(changed.drop(columns=["query", "query_en", "gt_response", "text_a", "text_b"]), hide_index=True,
                 column_config={"diff": st.column_config.NumberColumn(format="%+.2f"),
                                "text_changed": st.column_config.CheckboxColumn("text changed")})
    ui.downloads(changed, f"compare-changed-{a.dataset}-{result['metric']}")
    for row in changed.itertuples():
        title = (f"{row.query_id}" + (f" · {row.model_id}" if a.model is None else "")
                 + f" · {result['metric']} {ui.fmt_score(row.score_a)} → {ui.fmt_score(row.score_b)}")
        with st.expander(ui.md_escape(title), expanded=row.Index == 0):
            ui.show_query(row)
            left, right = st.columns(2)
            for side, text, score, chunks, col in (("A", row.text_a, row.score_a, row.chunks_a, left),
                                                   ("B", row.text_b, row.score_b, row.chunks_b, right)):
                with col:
                    ui.show_text(f"Response {side} ({result['metric']} {ui.fmt_score(score)})", text)
                    st.caption(ui.md_escape(f"Chunks {side}: {', '.join(map(str, chunks)) or 'none'}"))

st.subheader("Provenance")
prov = result["provenance"]
differs = prov[prov.differs]
said = [f"{r.what}: {r.A}" if r.A == r.B else f"{r.what}: {r.A} → {r.B}" for r in differs.itertuples()]
st.markdown("**What differs:** " + ("; ".join(ui.md_escape(x) for x in said) or "nothing recorded"))
st.dataframe(prov, hide_index=True, column_config={"differs": st.column_config.CheckboxColumn("differs")})
ui.downloads(prov, f"compare-provenance-{a.dataset}-{b.dataset}")
st.caption("Config keys, code revision and model files are those of the latest run that wrote responses of each "
           "side's shared items; prompt hashes, chunks and texts are counted over the shared items.")
