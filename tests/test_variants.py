"""``pipeline variants`` and the robustness view: variants made by construction, tied to the same ground truth, and
each model's paired change per kind.

- The deterministic kinds: casual romanization ("mujhe", "aankh", "kya"), seeded misspellings drawn only from the
  script's confusions, code-mixing from the project's lexicon.
- The command on the bundled cataract set: every native-script Hindi, Tamil, Telugu and Kannada query gets the
  four kinds, each variant keeps its original's ground truth, rubric and KB references; the originals are written
  unchanged; a rerun makes the same bytes; bad input is one line and nothing is written.
- A planted model (the fixture server) that answers worse on misspelled queries: the view's change on that kind has
  an interval below 0, and on the other kinds an interval that holds 0.
"""

from __future__ import annotations

import io
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.dataset import load_dataset
from pipeline.dataset.codemix import code_mix
from pipeline.dataset.misspell import confusions, misspell
from pipeline.dataset.romanize import romanize
from pipeline.dataset.variants import Settings, variants_command
from pipeline.errors import UserError

REPO = Path(__file__).resolve().parent.parent
CATARACT = REPO / "data" / "cataract"


def test_casual_romanization_is_how_people_type():
    assert romanize("मुझे आँख में दर्द है, क्या करूँ?", "hi") == "mujhe aankh mein dard hai, kya karun?"
    assert romanize("कितने दिन तक", "hi") == "kitne din tak"
    assert romanize("ऑपरेशन के बाद drops डालने हैं", "hi").endswith("drops daalne hain")  # Latin words kept
    assert romanize("கண் வலி", "ta") == "kan vali"  # Tamil read letter for letter, not as Sanskrit ("ghaṇ")
    with pytest.raises(ValueError, match="no romanization"):
        romanize("text", "en")


def test_bengali_and_marathi_queries_get_their_variants(tmp_path):
    folder = tmp_path / "bn-mr"
    folder.mkdir()
    rows = [("bn-1", "bn", "অপারেশনের পরে চোখে কত দিন ওষুধ দিতে হবে?"),
            ("mr-1", "mr", "ऑपरेशन नंतर डोळ्यात किती दिवस औषध घालायचे?")]
    (folder / "queries.jsonl").write_text("".join(json.dumps({
        "query_id": qid, "language": lang, "query": text, "query_en": "For how many days should I put drops?",
        "gt_response": "For four weeks.", "themes": [], "kb_refs": [], "update_sensitive": False},
        ensure_ascii=False) + "\n" for qid, lang, text in rows), encoding="utf-8")
    made = variants_command(folder, ["romanized", "misspelled", "code-mixed"], tmp_path / "out", Settings(),
                            echo=lambda _: None)
    assert made.made == {"romanized": 2, "misspelled": 2, "code-mixed": 2}
    by_id = {v.query_id: v.query for v in made.variants}
    assert by_id["bn-1~romanized"].isascii() and by_id["mr-1~romanized"].isascii()
    assert "operation" in by_id["mr-1~code-mixed"] and "eye" in by_id["mr-1~code-mixed"]


def test_misspellings_are_seeded_and_drawn_from_the_scripts_confusions():
    text = "ऑपरेशन के बाद कितने दिन तक आँख में drops डालने हैं?"
    a, b = misspell(text, seed=7), misspell(text, seed=7)
    assert a == b != text
    table = confusions()["Devanagari"]
    assert len(a.split()) == len(text.split())
    for before, after in zip(text.split(), a.split(), strict=True):
        if before != after:  # one sign swapped for one of its confusions, or dropped
            assert any(before.replace(k, v, 1) == after for k, vs in table.items() for v in vs if k in before), \
                (before, after)
    assert misspell("After operation when can I take head bath?", seed=1) != "After operation when can I take " \
                                                                             "head bath?"


def test_code_mixing_swaps_the_lexicons_words():
    text, n = code_mix("ऑपरेशन के बाद आँख में दर्द है", "hi", latin=False, seed=0)
    assert (text, n) == ("operation के बाद eye में pain है", 3)
    text, n = code_mix("கண்ணுக்கு மருந்து", "ta", latin=False, seed=0)
    assert text == "eye-க்கு medicine" and n == 2  # a Tamil stem keeps its case ending after a hyphen


def test_variants_of_the_cataract_set(tmp_path):
    out = tmp_path / "cataract-variants"
    kinds = ["romanized", "misspelled", "code-mixed", "english"]
    lines: list[str] = []
    outcome = variants_command(CATARACT, kinds, out, Settings(), echo=lines.append)
    source = load_dataset(CATARACT)
    made = load_dataset(out)
    by_id = {q.query_id: q for q in made.queries}
    for q in source.queries:  # the originals, unchanged
        assert by_id[q.query_id].content() == q.content()
    indic = [q for q in source.queries if q.language in ("hi", "ta", "te", "kn") and q.script == "native"]
    assert indic
    for q in indic:
        for kind in kinds:
            v = by_id.get(f"{q.query_id}~{kind}")
            if kind == "code-mixed" and v is None:
                continue  # a query without a word of the lexicon is dropped, and counted
            assert v is not None, (q.query_id, kind)
            assert v.variant_of == q.query_id and v.variant.kind == kind and v.variant.generator
            assert (v.gt_response, v.kb_refs, v.rubric, v.update_sensitive) == (
                q.gt_response, q.kb_refs, q.rubric, q.update_sensitive)
            assert v.query != q.query
    assert all(by_id[f"{q.query_id}~romanized"].script == "latin" for q in indic)
    assert all(by_id[f"{q.query_id}~english"].language == "en" for q in indic)
    report = json.loads((out / "variants_report.json").read_text(encoding="utf-8"))["per_kind"]
    assert report["code-mixed"]["made"] + sum(report["code-mixed"]["dropped"].values()) == len(source.queries)
    # the round trip through word lists that are not the dataset (Tesseract's packs, wordfreq): 0.901 per query,
    # 0.918 of words (Telugu 0.87, Kannada 0.81; bench/README.md); by rule alone it was 0.56
    assert report["romanized"]["quality"]["round_trip_words"] >= 0.85
    assert 0 < report["misspelled"]["quality"]["edit_rate"] < 0.3
    assert (out / "prompts" / "generation_system.txt").read_bytes() == (
        CATARACT / "prompts" / "generation_system.txt").read_bytes()
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    lines.clear()
    again = variants_command(CATARACT, kinds, out, Settings(), echo=lines.append)  # a rerun makes nothing new
    assert [v.query_id for v in again.variants] == [v.query_id for v in outcome.variants]
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert lines[-1].endswith("(0 new)")


def test_native_and_english_kinds():
    from pipeline.dataset.codemix import common_english, english_words
    from pipeline.dataset.languages import in_script_of, script_letters
    from pipeline.dataset.variants import make_variants

    cataract = load_dataset(CATARACT)
    made = make_variants(cataract, ["native"])
    romanized = [q for q in cataract.queries if q.script == "latin" and q.language != "en"]
    assert romanized and made.made["native"] == len(romanized)
    mixed = 0
    for v in made.variants:  # in its script, but for the English words patients mix in ("non veg", "Operation")
        latin = re.findall(r"[A-Za-z]+", v.query)
        assert v.script == "native" and script_letters(v.query, v.language) > 0, v.query
        assert all(w.lower() in english_words() or common_english(w.lower()) or w.isupper() for w in latin), v.query
        mixed += not in_script_of(v.query, v.language)
    assert mixed < len(made.variants) / 4  # most are mostly in their script
    english = sum(q.language == "en" for q in cataract.queries)
    assert made.report()["native"]["dropped"] == {
        "already in its script": len(cataract.queries) - len(romanized) - english, "an English query": english}
    q = next(q for q in cataract.queries if q.language == "hi" and q.script == "native")
    without = type(cataract)(name="t", path=CATARACT,  # a query the translate step rendered (no human query_en)
                             queries=[q.model_copy(update={"query_en": None, "query_en_source": None})])
    assert make_variants(without, ["english"]).report()["english"]["dropped"] == {
        "no English rendering (no query_en; give --db with the translate stage's renderings)": 1}
    stored = make_variants(without, ["english"], translations={q.query_id: "When can I bathe after surgery?"})
    (v,) = stored.variants  # the translate step's stored rendering, as the control
    assert (v.query, v.language, v.variant.settings) == ("When can I bathe after surgery?", "en",
                                                         {"rendering": "machine"})


def test_a_sample_of_a_variants_dataset_keeps_every_pair_whole(tmp_path):
    from pipeline.config import RunConfig
    from pipeline.runner import select_queries

    out = tmp_path / "v"
    variants_command(CATARACT, ["romanized", "english"], out, Settings(), echo=lambda _: None)
    dataset = load_dataset(out)
    config = RunConfig.model_validate({"name": "t", "dataset": str(out), "db": str(tmp_path / "r.duckdb"),
                                       "models": [{"id": "extractive/top-sentences"}], "languages": ["hi"],
                                       "per_language": 2})
    picked = select_queries(dataset, config)
    originals = [q for q in picked if q.variant is None]
    assert [q.language for q in originals] == ["hi", "hi"]
    assert sorted(q.query_id for q in picked if q.variant is not None) == sorted(
        v.query_id for v in dataset.queries if v.variant_of in {q.query_id for q in originals} and v.variant)
    assert any(q.language == "en" for q in picked)  # the English control of a Hindi query stays with it


def test_bad_input_is_one_line_and_nothing_is_written(tmp_path):
    run = subprocess.run([sys.executable, "-m", "pipeline", "variants", str(CATARACT), "--kinds", "romanized,leet",
                          "--out", str(tmp_path / "x")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "'leet'" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()
    with pytest.raises(UserError, match="never changed"):
        variants_command(CATARACT, ["romanized"], CATARACT, Settings())
    out = tmp_path / "taken"
    out.mkdir()
    (out / "queries.jsonl").write_text("somebody's own file\n", encoding="utf-8")
    with pytest.raises(UserError, match="not written by variants"):
        variants_command(CATARACT, ["romanized"], out, Settings())
    assert [p.name for p in out.iterdir()] == ["queries.jsonl"]


# -- the robustness view on a planted model --------------------------------------------------------------------------
def test_a_model_worse_on_misspelled_queries_shows_on_that_kind_only(tmp_path):
    from pipeline.catalog import load_config
    from pipeline.estimate import Estimate
    from pipeline.read.common import Filters
    from pipeline.read.robustness import robustness_changes, robustness_leaderboard, worst_pairs
    from pipeline.runner import run
    from tests.support.datasets import HINDI_TOPICS as TOPICS
    from tests.support.datasets import write_config, write_hindi_set
    from tests.support.openai_fixture import PLANTED_POOR, FixtureServer

    source, out = write_hindi_set(tmp_path / "hi"), tmp_path / "hi-variants"
    kinds = ["romanized", "misspelled", "code-mixed", "english"]
    outcome = variants_command(source, kinds, out, Settings(seed=3), echo=lambda _: None)
    misspelled = [v.query for v in outcome.variants if v.variant.kind == "misspelled"]
    assert len(misspelled) == len(TOPICS) and len(outcome.variants) == 4 * len(TOPICS)
    db = tmp_path / "results.duckdb"
    quiet = Console(file=io.StringIO())
    with FixtureServer(latency_s=0.0, worse_on=misspelled) as server:
        endpoint = {"base_url": server.base_url, "timeout": 10.0, "max_retries": 0}

        def config(dataset: Path):
            return load_config(write_config(
                tmp_path / f"{dataset.name}.yaml", dataset=dataset, db=db,
                models=[{"id": "openai-compatible/planted", **endpoint}],
                judge={"id": "openai-compatible/planted-judge", **endpoint, "metrics": ["FC"]}))

        run(config(source), stages="generate,judge", console=quiet)  # the originals first
        sent = server.stats()["requests"]
        variants = load_dataset(out)
        estimate = Estimate(config(out), variants, variants.queries, ["generate"]).run()
        generate = next(line for line in estimate.lines if line.stage == "generate")
        assert (generate.calls, generate.cached) == (5 * len(TOPICS), len(TOPICS))  # the originals come cached
        assert any(f"{4 * len(TOPICS)} of the {5 * len(TOPICS)} queries are generated variants" in n
                   for n in estimate.notes)
        run(config(out), stages="generate,judge", console=quiet)
        assert server.stats()["requests"] - sent == 2 * 4 * len(TOPICS)  # only the variants answered and judged
    # safety: every original passed; the misspelled variants' current answers failed; the romanized variants' only
    # check is of an earlier text of their answer (another hash): stale, so those pairs have no verdict to compare
    from pipeline.store import Store
    from pipeline.store.rows import SafetyCheckRow

    store = Store(db)
    answers = store.fetch("SELECT r.query_id, r.model_id, r.response_hash, q.variant_kind FROM responses r JOIN "
                          "queries q USING (dataset, query_id) WHERE r.dataset = ?", [out.name])
    checked = {None: (True, None), "misspelled": (False, None), "romanized": (False, "0" * 16)}  # (passed, hash)
    store.write(SafetyCheckRow(out.name, qid, model, "refusal", checked[kind][0], "", checked[kind][1] or rhash)
                for qid, model, rhash, kind in answers if kind in checked)
    weights = (1.0, 0.0, 0.0, 0.0)  # AGG = FC: the only metric judged
    changes = robustness_changes(db, Filters(dataset=out.name), "openai-compatible/planted-judge", weights)
    rows = changes[changes.language == "hi"].set_index("kind")
    assert set(rows.index) == set(kinds)
    assert (rows.pairs == len(TOPICS)).all()
    bad = rows.loc["misspelled"]
    assert bad.FC_hi < 0 and bad.AGG_hi < 0 and bad.flipped_correct > 0.5
    assert (bad.flipped_safe, bad.safe_pairs) == (1.0, len(TOPICS))
    assert rows.loc["romanized", "safe_pairs"] == 0 and math.isnan(rows.loc["romanized", "flipped_safe"])
    assert rows.loc["english", "safe_pairs"] == 0  # no check of those variants at all
    for kind in ("romanized", "code-mixed", "english"):
        assert rows.loc[kind, "FC_lo"] <= 0 <= rows.loc[kind, "FC_hi"], kind
    board = robustness_leaderboard(changes)
    assert board.worst_kind.tolist() == ["misspelled"]
    worst = worst_pairs(db, Filters(dataset=out.name), "openai-compatible/planted-judge", weights, limit=3)
    assert (worst.kind == "misspelled").all() and (worst.variant_answer == PLANTED_POOR).all()
    import pandas as pd
    from typer.testing import CliRunner

    from pipeline.cli import app

    table = tmp_path / "robustness.csv"  # the CLI carries the same table
    cli = CliRunner().invoke(app, ["robustness", "--db", str(db), "--dataset", out.name, "--judge",
                                   "openai-compatible/planted-judge", "--out", str(table)])
    assert cli.exit_code == 0, cli.output
    assert "misspelled" in cli.output and "[-1." in cli.output

    written = pd.read_csv(table)
    assert len(written) == len(changes) and set(written.kind) == set(kinds)
