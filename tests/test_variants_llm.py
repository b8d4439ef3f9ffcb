"""The model-written variant kinds (``pipeline variants --kinds code-mixed-llm --model provider/name``).

- A planted model (the fixture server answering known texts): rewrites in the wrong script and rewrites whose
  back-translation changed the meaning are dropped and counted by reason, the rest are kept with the model, the
  prompts' hashes and both checks' scores; a rerun makes no call and the same bytes.
- SmolLM2 in process: whatever it writes, every kept variant passed both checks and the counts add up.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.dataset import load_dataset
from pipeline.dataset.languages import in_script_of
from pipeline.rewrite import THRESHOLD
from tests.support.datasets import write_config

KEPT = {  # query -> (its English, the planted rewrite, the planted back-translation)
    "ऑपरेशन के बाद आँख में दर्द है, क्या करूँ?": (
        "I have pain in the eye after the operation, what should I do?",
        "ऑपरेशन के बाद eye में pain है, क्या करूँ?", "After the operation I have pain in the eye, what should I do?"),
    "मोतियाबिंद के ऑपरेशन के बाद कितने दिन दवा डालनी है?": (
        "For how many days should I put drops after the cataract operation?",
        "मोतियाबिंद के operation के बाद कितने दिन drops डालनी है?",
        "How many days should I put drops after the cataract operation?"),
}
WRONG_SCRIPT = {  # the rewrite romanized, or translated into English
    "क्या मैं ऑपरेशन के बाद टीवी देख सकता हूँ?": ("Can I watch TV after the operation?",
                                                 "Kya main operation ke baad TV dekh sakta hoon?"),
    "ऑपरेशन के बाद सिर कब धो सकते हैं?": ("When can I wash my head after the operation?",
                                        "When can I wash my hair after the operation?"),
}
CHANGED = {  # a code-mixed rewrite of another question
    "क्या मैं ऑपरेशन के बाद गाड़ी चला सकता हूँ?": (
        "Can I drive a car after the operation?", "मेरे insurance में lens के लिए कितने पैसे मिलेंगे?",
        "How much money will I get for the lens under my insurance?"),
}
NO_ENGLISH = (  # no query_en: the model's translation of the original is the same (Hindi) text, so none
    "ऑपरेशन के बाद धूप में कब जा सकते हैं?", "ऑपरेशन के बाद sun में कब जा सकते हैं?",
    "When can I go out in the sun after the operation?")


def write_set(folder: Path, few: bool = False) -> Path:
    """The queries above, and an English one (``few``: one Hindi query with query_en, one without, the English)."""
    rows = [(q, en) for q, (en, *_) in {**KEPT, **WRONG_SCRIPT, **CHANGED}.items()][:1 if few else None]
    rows += [(NO_ENGLISH[0], None), ("Can I read after the operation?", None)]
    folder.mkdir(parents=True)
    (folder / "queries.jsonl").write_text("".join(json.dumps({
        "query_id": f"{'en' if q.isascii() else 'hi'}-{i}", "language": "en" if q.isascii() else "hi", "query": q,
        "query_en": en, "gt_response": "Ask your doctor at the follow-up.", "themes": [], "kb_refs": [],
        "update_sensitive": False}, ensure_ascii=False) + "\n" for i, (q, en) in enumerate(rows)), encoding="utf-8")
    return folder


def planted_replies() -> dict[str, str]:
    """The last user message's text -> the answer: each query's rewrite, each rewrite's back-translation."""
    replies = {q: rewrite for q, (_, rewrite, *_) in {**KEPT, **WRONG_SCRIPT, **CHANGED}.items()}
    replies |= {rewrite: back for _, rewrite, back in (*KEPT.values(), *CHANGED.values())}
    replies |= {NO_ENGLISH[0]: NO_ENGLISH[1], NO_ENGLISH[1]: NO_ENGLISH[2]}
    return replies


def variants(tmp_path: Path, source: Path, out: Path, model: str, **options: object) -> str:
    config = write_config(tmp_path / "rewrite.yaml", dataset=source, db=tmp_path / "results.duckdb",
                          models=[{"id": model, **options}])
    result = CliRunner().invoke(app, ["variants", str(source), "--kinds", "code-mixed-llm", "--out", str(out),
                                      "--model", model, "--config", str(config)])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return " ".join(result.output.split())  # rich wraps long lines


def test_rewrites_in_the_wrong_script_or_meaning_are_dropped_and_a_rerun_asks_nothing(tmp_path):
    from tests.support.openai_fixture import FixtureServer

    source, out = write_set(tmp_path / "hi"), tmp_path / "hi-llm"
    with FixtureServer(latency_s=0.0, replies=planted_replies()) as server:
        model = "openai-compatible/fixture"
        endpoint = {"base_url": server.base_url, "timeout": 10.0, "max_retries": 0}
        printed = variants(tmp_path, source, out, model, **endpoint)
        # 6 rewrites; back-translations of the 4 in Devanagari; the English of the query without query_en
        assert server.stats()["requests"] == 11
        assert "11 calls, 0 from the cache" in printed
        before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
        again = variants(tmp_path, source, out, model, **endpoint)
        assert server.stats()["requests"] == 11  # a rerun asks nothing again
        assert "0 calls, 11 from the cache" in again and again.strip().endswith("(0 new)")
        assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    report = json.loads((out / "variants_report.json").read_text(encoding="utf-8"))
    assert report["per_kind"]["code-mixed-llm"]["made"] == 2
    assert report["per_kind"]["code-mixed-llm"]["dropped"] == {
        "an English query": 1, "the rewrite is not in Devanagari letters": 2,
        f"the meaning changed (back-translation similarity < {THRESHOLD})": 1,
        "no English of the original (the translation of the original is still in the source script)": 1}
    assert report["model"]["id"] == model and set(report["model"]["prompts"]) == {
        "rewrite_code_mixed.txt", "translate_query.txt"}
    made = [q for q in load_dataset(out).queries if q.variant is not None]
    by_text = {q.query: q for q in load_dataset(source).queries}
    assert sorted(v.query for v in made) == sorted(rewrite for _, rewrite, _ in KEPT.values())
    for v in made:
        original = next(q for q, (_, rewrite, _) in KEPT.items() if rewrite == v.query)
        s = v.variant.settings
        assert (v.variant.kind, v.variant_of, v.query_en) == (
            "code-mixed-llm", by_text[original].query_id, by_text[original].query_en)
        assert "code_mixing" in v.themes and v.script == "native"
        assert s["model"] == model and s["back_translation"] == KEPT[original][2]
        assert s["english_of_original"] == "query_en" and s["similarity"] >= THRESHOLD == s["threshold"]
        assert s["script_share"] >= 0.5 and set(s["prompts"]) == set(report["model"]["prompts"])


def test_without_a_model_the_llm_kinds_are_refused(tmp_path):
    source = write_set(tmp_path / "hi")
    result = CliRunner().invoke(app, ["variants", str(source), "--kinds", "code-mixed-llm", "--out",
                                      str(tmp_path / "x")])
    assert result.exit_code == 1 and not (tmp_path / "x").exists()
    result = CliRunner().invoke(app, ["variants", str(source), "--kinds", "romanized", "--model",
                                      "llamacpp/smollm2-135m-instruct", "--out", str(tmp_path / "x")])
    assert result.exit_code == 1 and not (tmp_path / "x").exists()


@pytest.mark.slow
def test_smollm2_variants_pass_both_checks(tmp_path):
    """What SmolLM2 writes is not asserted; what the pipeline guarantees is."""
    source, out = write_set(tmp_path / "hi", few=True), tmp_path / "hi-llm"
    variants(tmp_path, source, out, "llamacpp/smollm2-135m-instruct", max_tokens=40)
    report = json.loads((out / "variants_report.json").read_text(encoding="utf-8"))["per_kind"]["code-mixed-llm"]
    assert report["made"] + sum(report["dropped"].values()) == 3 and report["dropped"]["an English query"] == 1
    made = [q for q in load_dataset(out).queries if q.variant is not None]
    assert len(made) == report["made"]
    for v in made:
        s = v.variant.settings
        assert in_script_of(v.query, "hi") and not in_script_of(s["back_translation"], "hi")
        assert s["similarity"] >= THRESHOLD
