"""Prompts belong to the dataset: its own prompt files first, the studio's generic ones otherwise; closed-book
and multiple-choice items get their own prompt; a multi-turn query is sent as its conversation."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pipeline.dataset import LANGUAGES, REFUSAL_SENTENCE, Dataset, load_dataset
from pipeline.models.base import GenerateParams
from pipeline.prompts import PROMPTS_DIR
from pipeline.steps.generate import build_messages, build_request, format_chunks, prompt_hash

REPO = Path(__file__).resolve().parent.parent
PAPER = REPO / "data" / "reference" / "health_pariksha_appendix_a2.txt"  # the paper's prompts, as printed
CATARACT = REPO / "data" / "cataract"

KB = [
    {"chunk_id": "dm-01", "kind": "raw", "title": "Blood sugar targets",
     "text": "Check your fasting sugar each morning; aim for 80 to 130 mg/dL.", "source": "Clinic leaflet"},
    {"chunk_id": "dm-02", "kind": "update", "title": "Hypoglycaemia (update)",
     "text": "Below 70 mg/dL, take 15 g of fast sugar and recheck in 15 minutes.", "source": "Doctor Q&A",
     "updated": "2024-05-01"},
]
QUERIES = [
    {"query_id": "dm-1", "language": "en", "query": "What sugar level should I aim for in the morning?",
     "gt_response": "Aim for 80 to 130 mg/dL fasting.", "kb_refs": ["dm-01"]},
    {"query_id": "dm-2", "language": "hi", "query": "शुगर 60 हो तो क्या करूँ?", "query_en": "What if my sugar is 60?",
     "gt_response": "Have 15 g of quick sugar, then check again after a quarter of an hour.", "kb_refs": ["dm-02"]},
    {"query_id": "dm-3", "language": "en", "query": "Which sugar reading counts as low?",
     "gt_response": "B. Below 70 mg/dL", "options": {"A": "Below 100 mg/dL", "B": "Below 70 mg/dL"}, "answer": "B"},
]
CONVERSATION = [
    {"role": "user", "content": "I was told I have type 2 diabetes."},
    {"role": "assistant", "content": "I am sorry to hear that. How can I help?"},
    {"role": "user", "content": "Can I still eat rice?"},
]


def _write(folder: Path, name: str, rows: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _rag(tmp_path: Path) -> Dataset:
    _write(tmp_path / "diabetes", "kb.jsonl", KB)
    _write(tmp_path / "diabetes", "queries.jsonl", QUERIES)
    return load_dataset(tmp_path / "diabetes")


def _closed_book(tmp_path: Path) -> Dataset:
    rows = [{k: v for k, v in q.items() if k != "kb_refs"} for q in QUERIES]
    rows.append({"query_id": "dm-4", "language": "en", "query": "Can I still eat rice?", "messages": CONVERSATION,
                 "gt_response": "Yes, in small portions, with vegetables and protein."})
    _write(tmp_path / "diabetes-qa", "queries.jsonl", rows)
    return load_dataset(tmp_path / "diabetes-qa")


def _prompts(ds: Dataset) -> list[tuple[str, str]]:
    """Every (role, content) the generation step would send for the dataset, with each query's kb_refs as chunks."""
    out = []
    for q in ds.queries:
        chunks = [ds.chunk(c) for c in q.kb_refs]
        raw = [c for c in chunks if c.kind == "raw"] or ds.raw_chunks[:1]
        updates = [c for c in chunks if c.kind == "update"]
        out += [(m["role"], m["content"]) for m in build_messages(q, raw, updates, ds)]
    return out


def _figure_3() -> list[str]:
    text = PAPER.read_text(encoding="utf-8")
    block = text[text.index("A.2 Prompts"):text.index("Figure 3: System Prompt for Generation")]
    return [line.strip() for line in block.splitlines()[1:] if line.strip()]


# -- no cataract outside the cataract set -------------------------------------------------------------
def test_a_dataset_without_prompt_files_gets_no_cataract_wording(tmp_path):
    for ds in (_rag(tmp_path), _closed_book(tmp_path)):
        prompts = _prompts(ds)
        assert prompts and not [c for _, c in prompts if "cataract" in c.lower()]
        assert ds.prompt_path("generation_system.txt") == PROMPTS_DIR / "generation_system.txt"


def test_no_studio_prompt_file_mentions_cataract():
    files = [p for p in PROMPTS_DIR.rglob("*") if p.suffix in (".txt", ".json")]
    assert len(files) > 10
    assert [p.name for p in files if "cataract" in p.read_text(encoding="utf-8").lower()] == []


def test_generic_rag_prompt_keeps_the_refusal_rule_and_slots(tmp_path):
    ds = _rag(tmp_path)
    system, user = build_messages(ds.query("dm-2"), ds.raw_chunks, ds.update_chunks, ds)
    assert (system["role"], user["role"]) == ("system", "user")
    sys_text, user_text = system["content"], user["content"]
    assert f"just say: '{REFUSAL_SENTENCE}'" in sys_text and "knowledge base only" in sys_text
    assert "The provided query is in Hindi, and you must always respond in Hindi." in sys_text
    assert "Raw knowledge base:" in user_text and KB[0]["text"] in user_text and KB[1]["text"] in user_text
    assert user_text.rstrip().endswith(QUERIES[1]["query"])


# -- closed-book: no knowledge-base sections ------------------------------------------------------------
def test_closed_book_prompts_have_no_knowledge_base_section(tmp_path):
    ds = _closed_book(tmp_path)
    assert ds.closed_book
    for _, content in _prompts(ds):
        low = content.lower()
        assert "knowledge base" not in low and "(empty)" not in low and "chunk" not in low, content
    system = build_messages(ds.query("dm-1"), [], [], ds)[0]["content"]
    assert "your own medical knowledge" in system and f"'{REFUSAL_SENTENCE}'" in system
    assert "not sure" in system


def test_multiple_choice_item_names_its_options_and_asks_for_a_letter(tmp_path):
    for ds in (_closed_book(tmp_path), _rag(tmp_path)):
        user = build_messages(ds.query("dm-3"), ds.raw_chunks, [], ds)[-1]["content"]
        assert "A. Below 100 mg/dL\nB. Below 70 mg/dL" in user
        assert "letter (A or B)" in user and "one-line reason" in user and "Answer: <letter>" in user
    open_user = build_messages(ds.query("dm-1"), ds.raw_chunks, [], ds)[-1]["content"]
    assert "Options:" not in open_user


def test_bundled_closed_book_set_gets_the_closed_book_prompt():
    ds = load_dataset(REPO / "data" / "eyecare-qa")
    mc = next(q for q in ds.queries if q.multiple_choice)
    messages = build_messages(mc, [], [], ds)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert all("knowledge base" not in m["content"].lower() for m in messages)
    assert all(f"{k}. {v}" in messages[1]["content"] for k, v in mc.options.items())


# -- a conversation is sent as its messages ---------------------------------------------------------------
def test_multi_turn_query_is_sent_as_its_conversation(tmp_path):
    """HealthBench's way: a closed-book dataset without a system prompt of its own sends a conversation as it is."""
    ds = _closed_book(tmp_path)
    assert list(build_messages(ds.query("dm-4"), [], [], ds)) == CONVERSATION
    assert build_messages(ds.query("dm-1"), [], [], ds)[0]["role"] == "system"  # a single query keeps ours


def test_a_conversations_own_system_message_is_sent_as_it_is(tmp_path):
    rows = [{"query_id": "c-1", "language": "en", "query": "Can I still eat rice?", "gt_response": "In moderation.",
             "messages": [{"role": "system", "content": "The user is a nurse."}, *CONVERSATION]}]
    _write(tmp_path / "conv", "queries.jsonl", rows)
    ds = load_dataset(tmp_path / "conv")
    assert list(build_messages(ds.query("c-1"), [], [], ds)) == rows[0]["messages"]


def test_a_dataset_with_its_own_closed_book_system_prompt_gets_it_before_the_conversation(tmp_path):
    ds = _closed_book(tmp_path)
    (tmp_path / "diabetes-qa" / "prompts").mkdir()
    (tmp_path / "diabetes-qa" / "prompts" / "closed_book_system.txt").write_text(
        "You answer questions of a diabetes clinic in {response_lang}.\n", encoding="utf-8")
    ds = load_dataset(tmp_path / "diabetes-qa")
    messages = build_messages(ds.query("dm-4"), [], [], ds)
    assert messages[0] == {"role": "system", "content": "You answer questions of a diabetes clinic in English."}
    assert list(messages[1:]) == CONVERSATION


def test_multi_turn_query_with_a_knowledge_base_carries_the_chunks_in_its_last_turn(tmp_path):
    rows = [*QUERIES, {"query_id": "dm-5", "language": "en", "query": "Can I still eat rice?",
                       "gt_response": "In moderation.", "kb_refs": ["dm-01"], "messages": CONVERSATION}]
    _write(tmp_path / "conv-rag", "kb.jsonl", KB)
    _write(tmp_path / "conv-rag", "queries.jsonl", rows)
    ds = load_dataset(tmp_path / "conv-rag")
    messages = build_messages(ds.query("dm-5"), ds.raw_chunks, [], ds)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert list(messages[1:3]) == CONVERSATION[:2]
    assert KB[0]["text"] in messages[3]["content"] and messages[3]["content"].rstrip().endswith("Can I still eat rice?")


# -- the cataract set keeps the paper's prompt ------------------------------------------------------------
def test_cataract_system_prompt_is_figure_3_word_for_word():
    ds = load_dataset(CATARACT)
    assert ds.prompt_path("generation_system.txt") == CATARACT / "prompts" / "generation_system.txt"
    q = ds.query("en-004")
    system = build_messages(q, ds.raw_chunks[:1], [], ds)[0]["content"]
    paper = [re.sub(r"[‘’]", "'", line) for line in _figure_3()]
    ours = [line.strip() for line in system.splitlines() if line.strip()]
    paper = [line.replace("{query_lang}", "English").replace("{response_lang}", "English") for line in paper]
    assert ours == paper
    assert "You are an cataract chatbot" in system  # the paper's own wording, typo included


def test_unchanged_prompts_keep_their_hash():
    """Moving Figure 3 into data/cataract/prompts/ changes no cataract prompt: stored responses stay current."""
    ds = load_dataset(CATARACT)
    q = next(x for x in ds.queries if x.language == "hi")
    raw, updates = ds.raw_chunks[:2], ds.update_chunks[:1]
    figure_3 = (CATARACT / "prompts" / "generation_system.txt").read_text(encoding="utf-8").rstrip("\n")
    studio_user = (PROMPTS_DIR / "generation_user.txt").read_text(encoding="utf-8").rstrip("\n")
    lang = LANGUAGES[q.language]
    expected = ({"role": "system", "content": figure_3.format(query_lang=lang, response_lang=lang,
                                                              refusal=REFUSAL_SENTENCE)},
                {"role": "user", "content": studio_user.format(raw_chunks=format_chunks(raw),
                                                               update_chunks=format_chunks(updates), query=q.query)})
    built = build_messages(q, raw, updates, ds)
    assert built == expected and prompt_hash(built) == prompt_hash(expected)
    again = build_request(q, raw, updates, GenerateParams(max_tokens=8, temperature=0.0), ds)
    assert prompt_hash(again.messages) == prompt_hash(built)


def test_a_dataset_prompt_file_overrides_the_studios_and_changes_the_hash(tmp_path):
    ds = _rag(tmp_path)
    q = ds.query("dm-1")
    before = prompt_hash(build_messages(q, ds.raw_chunks, [], ds))
    (tmp_path / "diabetes" / "prompts").mkdir()
    (tmp_path / "diabetes" / "prompts" / "generation_system.txt").write_text(
        "You answer questions of a diabetes clinic in {response_lang}. Otherwise say: '{refusal}'\n", encoding="utf-8")
    ds = load_dataset(tmp_path / "diabetes")
    system = build_messages(q, ds.raw_chunks, [], ds)[0]["content"]
    assert system == f"You answer questions of a diabetes clinic in English. Otherwise say: '{REFUSAL_SENTENCE}'"
    assert prompt_hash(build_messages(q, ds.raw_chunks, [], ds)) != before
    assert ds.prompt_text("generation_user.txt") == (PROMPTS_DIR / "generation_user.txt").read_text().rstrip("\n")
