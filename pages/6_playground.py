"""Playground: one query, live — retrieved chunks, streamed answers, judge scores and Med-CoDE on request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from pages import _data as data
from pages import _ui as ui
from pipeline import playground as pg
from pipeline.config import ModelConfig
from pipeline.dataset import LANGUAGES
from pipeline.errors import UserError
from pipeline.metrics import METRICS, registry

AUTO = "auto"
REFERENCE_FREE = tuple(m.name for m in registry().values() if "ground_truth" not in m.inputs)
NEEDS_GT = tuple(m for m in METRICS if m not in REFERENCE_FREE)


@st.cache_resource(show_spinner="Loading the model…", max_entries=6)
def cached_model(model_json: str) -> Any:
    return pg.load_model(ModelConfig.model_validate_json(model_json))


@st.cache_resource(show_spinner="Opening the knowledge-base index…", max_entries=4)
def cached_index(index_dir: str, dataset_path: str) -> Any:
    from pipeline.steps.retrieve import KBIndex

    return KBIndex(index_dir, pg.load_kb(Path(dataset_path)))


def model(mc: ModelConfig) -> Any:
    return cached_model(mc.model_dump_json())


ctx = ui.page("Playground")
try:
    config = pg.load_playground_config()
except UserError as exc:
    st.error(ui.md_escape(str(exc)))
    st.stop()
st.caption(ui.md_escape(f"Models from {pg.config_path()} (set PARIKSHA_CONFIG to use another config). Answers use "
                        "the pipeline's own prompt, retrieval and judge."))

choices = pg.model_choices(config)
st.markdown("**Models**")
columns = st.columns(min(4, max(1, len(choices))))
selected: list[ModelConfig] = []
first_available = next((c.config.id for c in choices if c.available and c.config.provider != "extractive"), None)
for i, choice in enumerate(choices):
    with columns[i % len(columns)]:
        on = st.checkbox(ui.md_escape(choice.config.id), value=choice.config.id == first_available,
                         disabled=not choice.available, key=f"pg_model_{i}",
                         help=ui.md_escape(choice.reason) if choice.reason else None)
        if choice.reason:
            st.caption(ui.md_escape(f"unavailable: {choice.reason}"))
        elif on:
            selected.append(choice.config)

source = st.segmented_control("Query", ["Type a query", "Pick from the dataset"], default="Type a query",
                              key="pg_source") or "Type a query"
picked: pd.Series | None = None
if source == "Type a query":
    c1, c2 = st.columns([1, 3])
    chosen = c1.selectbox("Language", [AUTO, *LANGUAGES], key="pg_lang",
                          format_func=lambda c: "Detect from the text" if c == AUTO else ui.lang_label(c),
                          help="The language the prompt names and the query is answered in. Detected from the "
                               "script (for Latin text, its matrix language), as the dataset tagger does; choose "
                               "one to override.")
    query_text = c2.text_area("Query", key="pg_query", height=80,
                              placeholder="e.g. Operation ke baad head bath kab kar sakte hain?")
    detected = pg.detect_language(query_text)
    language = (detected or "en") if chosen == AUTO else chosen
    if chosen == AUTO and detected:
        c1.caption(ui.md_escape(f"Detected: {ui.lang_label(detected)}"))
    elif detected and detected != chosen:
        st.warning(ui.md_escape(f"The query looks {ui.lang_label(detected)} but {ui.lang_label(chosen)} is chosen: "
                                f"the prompt will say the query is in {LANGUAGES.get(chosen, chosen)}."))
    query_en = st.text_input("English rendering", key="pg_query_en", disabled=language == "en",
                             help="Leave empty to have a model translate it before retrieval, as the HealthBot did.")
    gt = st.text_area("Ground truth (optional)", key="pg_gt", height=68,
                      help=ui.md_escape(f"Needed to judge {', '.join(NEEDS_GT)} and for Med-CoDE; "
                                        f"{', '.join(REFERENCE_FREE) or 'no metric'} "
                                        f"{'is' if len(REFERENCE_FREE) == 1 else 'are'} reference-free."))
else:
    if not ctx.exists or ctx.filters.dataset is None:
        st.info("No dataset in the database to pick from; type a query instead.")
        st.stop()
    pool = data.dataset_queries(ctx.db, ctx.filters.dataset, None)
    if pool.empty:
        st.info("This dataset has no queries.")
        st.stop()
    labels = {r.query_id: f"{r.query_id} ({r.language}): {r.query[:90]}" for r in pool.itertuples()}
    pick = st.selectbox("Query of " + ui.md_escape(ctx.filters.dataset), list(labels), format_func=labels.get,
                        key="pg_pick")
    picked = pool[pool.query_id == pick].iloc[0]
    language, query_text = picked.language, picked.query
    query_en = picked.query_en if isinstance(picked.query_en, str) else ""
    gt = picked.gt_response
    ui.show_text("Query", query_text)
    if query_en:
        ui.show_text("English rendering", query_en)
    ui.show_text("Ground truth", gt)
    with st.expander("Answers stored in the database for this query"):
        stored = data.query_responses(ctx.db, ctx.filters.dataset, pick)
        ui.dataframe(stored, hide_index=True, column_config={"text": st.column_config.TextColumn(width="large")})

translators = pg.translator_choices(config)
needs_translation = language != "en" and not (query_en or "").strip()
translator = None
if needs_translation and translators:
    translator_id = st.selectbox("Translate with", [m.id for m in translators], key="pg_translator",
                                 help="Renders the query into English before retrieval with the pipeline's "
                                      "translator prompt (the config's `translator` first).")
    translator = next(m for m in translators if m.id == translator_id)

dataset_name = ctx.filters.dataset if ctx.exists else None
dataset_dir = pg.resolve_dataset_path(data.dataset_path(ctx.db, dataset_name) if dataset_name else None,
                                      config.dataset)
st.caption(ui.md_escape(f"Knowledge base: {dataset_dir or '(none found: closed-book prompt)'}"))

if st.button("Generate", type="primary", disabled=not selected, icon=":material/play_arrow:",
             help=None if selected else "Choose at least one available model."):
    if not (query_text or "").strip():
        st.error("Type a query first.")
        st.stop()
    if needs_translation and translator is None:
        st.error("No available model can translate the query: type its English rendering.")
        st.stop()
    try:
        if needs_translation:
            with st.spinner("Translating the query to English…"):
                query_en = pg.translate(model(translator), query_text, language)
        query = pg.make_query(language=language, query=query_text, query_en=query_en, gt_response=gt)
    except (ValueError, RuntimeError, UserError) as exc:
        st.error(ui.md_escape(f"Cannot use this query: {exc}"))
        st.stop()
    raw, updates, kb = [], [], None
    if dataset_dir is not None:
        from pipeline.steps.retrieve import index_dir_for

        with st.spinner("Retrieving chunks…"):
            index = cached_index(str(index_dir_for(ctx.db)), str(dataset_dir))
            kb = index.dataset  # its own prompt files, if it has them
            if index.dataset.chunks:
                raw, updates = pg.retrieve(index, query, config)
    result: dict[str, Any] = {
        "query": query, "translated": needs_translation, "raw": raw, "updates": updates, "kb": kb, "answers": {},
        "translator": translator.id if needs_translation and translator is not None else None,
        "scores": {}, "critiques": {}, "source": dataset_dir.name if dataset_dir else None,
        "picked": (ctx.filters.dataset, picked.query_id) if picked is not None else None, "saved": None,
    }
    st.session_state["pg_result"] = result
    for mc in selected:
        st.markdown(f"**{ui.md_escape(mc.id)}**")
        streamed = pg.Streamed()
        request = pg.request_for(query, raw, updates, mc, result["kb"])
        try:
            pieces = streamed.wrap(model(mc).stream(request))
            st.write_stream(ui.md_escape(piece) for piece in pieces)
        except Exception as exc:  # a backend failure is shown, never raised into the page
            st.error(ui.md_escape(f"{mc.id} failed: {type(exc).__name__}: {exc}"))
            continue
        prompt_hash, prompt_text = pg.prompt_of(request)
        result["answers"][mc.id] = {"text": streamed.text, "latency_s": streamed.latency_s,
                                    "prompt_hash": prompt_hash, "prompt": prompt_text,
                                    "checks": pg.checks(query, streamed.text, request)}
    st.rerun()

result = st.session_state.get("pg_result")
if not result:
    st.stop()
query = result["query"]
st.divider()
st.caption(ui.md_escape(f"Language: {ui.lang_label(query.language)} (the prompt names it and asks for an "
                        "answer in it)"))
if result["translated"]:
    ui.show_text(f"English rendering (machine-translated before retrieval by {result.get('translator')}; "
                 f"{ui.MACHINE_NOTE})", query.query_en)
with st.expander(f"Retrieved chunks: {len(result['raw'])} raw, {len(result['updates'])} KB updates"):
    for kind, chunks in (("Raw chunk", result["raw"]), ("KB update", result["updates"])):
        for i, chunk in enumerate(chunks, 1):
            dated = f", updated {chunk.updated:%Y-%m-%d}" if chunk.updated else ""
            st.markdown(f"**{ui.md_escape(f'{kind} {i}: {chunk.chunk_id}{dated} — {chunk.title}')}**")
            st.text(chunk.text, width="stretch")
for model_id, answer in result["answers"].items():
    with st.container(border=True):
        ui.show_text(f"{model_id} ({answer['latency_s']:.1f} s)", answer["text"], empty="(empty response)")
        for check in answer.get("checks", []):
            if check["check_name"] == "prompt_echo" and check["passed"] is False:
                st.warning(ui.md_escape(f"Prompt echo: the response {check['detail']} word for word "
                                        "(Health-Pariksha §4.1)."), icon=":material/content_copy:")
        with st.expander(f"Prompt sent to {model_id} ({answer.get('prompt_hash')}) and safety checks"):
            st.text(answer.get("prompt", ""), width="stretch")
            if answer.get("checks"):
                ui.dataframe(pd.DataFrame(answer["checks"]), hide_index=True)
        scores = result["scores"].get(model_id)
        if scores:
            table = pd.DataFrame(scores)
            ui.dataframe(table[["metric", "score", "parse_ok", "justification"]], hide_index=True)
            for row in table[~table.parse_ok].itertuples():
                st.caption(ui.md_escape(f"Raw judge output for {row.metric} (did not parse):"))
                st.code(row.raw_output or "(empty)", language=None, wrap_lines=True)
        crit = result["critiques"].get(model_id)
        if crit:
            st.caption(ui.md_escape(f"Med-CoDE: disagreement {crit.get('label')}"))
            st.text(crit.get("critique") or "", width="stretch")
            ui.dataframe(pd.DataFrame([{data.DISAGREEMENT_LABELS[p]: crit.get(p) for p in data.DISAGREEMENT}]),
                         hide_index=True)

judge_mc = pg.role_config(config, "judge")
critic_mc = pg.role_config(config, "critic")
judge_reason = "the config has no judge" if judge_mc is None else pg.unavailable_reason(judge_mc)
critic_reason = ("the config has no medcode section" if critic_mc is None else
                 pg.unavailable_reason(critic_mc))
has_gt = query.gt_response != pg.PLACEHOLDER_GT
c1, c2, c3 = st.columns(3)
no_gt = f" ({', '.join(REFERENCE_FREE)}: no ground truth)"
do_judge = c1.checkbox("Judge scores" + ("" if has_gt else no_gt), key="pg_do_judge",
                       disabled=judge_reason is not None, help=ui.md_escape(judge_reason) if judge_reason else None)
do_medcode = c2.checkbox("Med-CoDE critique", key="pg_do_medcode", disabled=critic_reason is not None or not has_gt,
                         help=ui.md_escape(critic_reason or ("needs a ground truth" if not has_gt else "")) or None)
if judge_mc is not None and judge_mc.id in data.WEAK_JUDGES:
    st.caption(ui.md_escape(f"The configured judge {judge_mc.id} is far too weak to trust; its scores only show the "
                            "machinery working."))
if c3.button("Score the answers", disabled=not (do_judge or do_medcode) or not result["answers"]):
    metrics = METRICS if has_gt else REFERENCE_FREE
    for model_id, answer in result["answers"].items():
        if do_judge and judge_mc is not None:
            with st.spinner(f"Judging {model_id} on {', '.join(metrics)}…"):
                result["scores"][model_id] = pg.judge(model(judge_mc), query, answer["text"], result["raw"],
                                                      result["updates"], metrics)
        if do_medcode and critic_mc is not None and config.section("medcode") is not None:
            with st.spinner(f"Critiquing {model_id}…"):
                result["critiques"][model_id] = pg.critique(model(critic_mc), query, answer["text"],
                                                            config.section("medcode").classifier)
    st.rerun()

if st.button("Save to the database", icon=":material/save:", disabled=not result["answers"],
             help="Saved as a run of kind 'playground' in dataset 'playground'."):
    saved = []
    source = result["picked"][0] if result["picked"] else (result["source"] or "kb")
    with ui.saving(ctx.db):
        for model_id, answer in result["answers"].items():
            run_id, query_id = pg.save_playground(ctx.db, pg.PlaygroundResult(
                language=query.language, query=query.query, query_en=query.query_en,
                gt_response=None if not has_gt else query.gt_response,
                source_dataset=result["picked"][0] if result["picked"] else None,
                source_query_id=result["picked"][1] if result["picked"] else None,
                model_id=model_id, response=answer["text"], latency_s=answer["latency_s"],
                kb_name=source, raw_chunks=list(result["raw"]), update_chunks=list(result["updates"]),
                judgments=result["scores"].get(model_id, []), judge_id=judge_mc.id if judge_mc else None,
                critique=result["critiques"].get(model_id), critic_id=critic_mc.id if critic_mc else None,
                config_json=config.to_json(), prompt_hash=answer.get("prompt_hash"), checks=answer.get("checks", []),
                translator_id=result.get("translator")))
            saved.append(f"{model_id} → run {run_id}, query {query_id}")
    data.clear_caches()
    result["saved"] = saved
    st.rerun()
if result.get("saved"):
    st.success(ui.md_escape("Saved: " + "; ".join(result["saved"])))
    st.page_link("pages/2_responses.py", label="Open them in the response browser",
                 query_params={"dataset": data.PLAYGROUND})
