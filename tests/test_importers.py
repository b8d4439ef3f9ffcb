"""import-qa: each public layout (fixtures in tests/fixtures/qa/, written by the project) becomes a dataset that
validates, keeping options and answer keys, rubric points (negative ones too) and HealthBench conversations; a bad
file is one line naming file and line, and nothing is written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.dataset import load_dataset, validate
from pipeline.dataset.importers import IMPORTERS, NO_IDEAL, Options, import_qa
from pipeline.errors import UserError
from pipeline.steps.generate import build_messages

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "qa"
FILES = {"medqa": "medqa_us_test.jsonl", "medmcqa": "medmcqa_dev.json", "pubmedqa": "pubmedqa_ori_pqal.json",
         "mmlu": "mmlu/clinical_knowledge_test.csv", "healthbench": "healthbench_oss_eval.jsonl"}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", "import-qa", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=False)


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else {}


def test_every_format_has_a_fixture():
    assert set(IMPORTERS) == set(FILES)


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_each_fixture_imports_to_a_valid_closed_book_dataset(tmp_path, fmt):
    out = tmp_path / fmt
    queries_file, n, n_chunks = import_qa(fmt, FIXTURES / FILES[fmt], out)
    assert queries_file == out / "queries.jsonl" and n >= 3 and n_chunks == 0
    assert sorted(p.name for p in out.iterdir()) == ["queries.jsonl"]  # no temporary files left behind
    assert [p.name for p in tmp_path.iterdir()] == [fmt]
    dataset, issues = validate(out)
    assert dataset is not None and issues == [], [str(i) for i in issues]
    assert dataset.closed_book and len(dataset.queries) == n
    assert {q.language for q in dataset.queries} == {"en"}
    assert all(q.query_id.startswith(f"{fmt}-") for q in dataset.queries)


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_query_ids_and_output_are_stable(tmp_path, fmt):
    import_qa(fmt, FIXTURES / FILES[fmt], tmp_path / "a")
    import_qa(fmt, FIXTURES / FILES[fmt], tmp_path / "b")
    import_qa(fmt, FIXTURES / FILES[fmt], tmp_path / "a", force=True)  # re-import over itself
    assert (tmp_path / "a" / "queries.jsonl").read_bytes() == (tmp_path / "b" / "queries.jsonl").read_bytes()


def test_cli_imports_and_validates(tmp_path):
    res = _cli("medqa", str(FIXTURES / FILES["medqa"]), str(tmp_path / "medqa"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "imported 3 medqa items" in res.stdout and "ok medqa: 3 queries (en 3) [3 multiple-choice]" in res.stdout


# -- each layout's fields --------------------------------------------------------------------------
def test_medqa_keeps_options_and_answer_idx(tmp_path):
    source = _jsonl(FIXTURES / FILES["medqa"])
    ds = load_dataset(import_qa("medqa", FIXTURES / FILES["medqa"], tmp_path / "m")[0])
    assert [q.query_id for q in ds.queries] == ["medqa-00001", "medqa-00002", "medqa-00003"]
    for q, src in zip(ds.queries, source, strict=True):
        assert q.query == src["question"] and q.options == src["options"] and q.answer == src["answer_idx"]
        assert q.gt_response == f"{src['answer_idx']}. {src['answer']}"
        assert len(q.options) == 5


def test_medmcqa_cop_is_one_based_as_published(tmp_path):
    source = _jsonl(FIXTURES / FILES["medmcqa"])
    ds = load_dataset(import_qa("medmcqa", FIXTURES / FILES["medmcqa"], tmp_path / "m")[0])
    for q, src in zip(ds.queries, source, strict=True):
        assert q.query_id == f"medmcqa-{src['id']}"
        assert q.options == {"A": src["opa"], "B": src["opb"], "C": src["opc"], "D": src["opd"]}
        assert q.answer == "ABCD"[src["cop"] - 1]  # cop 1 = opa
        assert q.gt_response.startswith(f"{q.answer}. {q.options[q.answer]}")
        if src["exp"]:
            assert q.gt_response.endswith(src["exp"])
    assert ds.queries[1].gt_response == "A. Vitamin A"  # exp null: the answer alone


def test_medmcqa_zero_based_copy_needs_cop_base_0(tmp_path):
    rows = _jsonl(FIXTURES / FILES["medmcqa"])
    for r in rows:
        r["cop"] -= 1  # as the Hugging Face loader stores it
    hf = tmp_path / "hf.json"
    hf.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(UserError, match=r"hf\.json:2: cop 0 .*--cop-base 0"):
        import_qa("medmcqa", hf, tmp_path / "bad")
    ds = load_dataset(import_qa("medmcqa", hf, tmp_path / "ok", Options(cop_base=0))[0])
    reference = load_dataset(import_qa("medmcqa", FIXTURES / FILES["medmcqa"], tmp_path / "orig")[0])
    assert [q.answer for q in ds.queries] == [q.answer for q in reference.queries] == ["B", "A", "D"]


def test_medmcqa_test_split_without_answers_is_refused(tmp_path):
    rows = _jsonl(FIXTURES / FILES["medmcqa"])
    del rows[0]["cop"]
    path = tmp_path / "test.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(UserError, match=r"test\.json:1: no cop .*test split"):
        import_qa("medmcqa", path, tmp_path / "out")


def test_pubmedqa_is_closed_book_yes_no_maybe(tmp_path):
    source = json.loads((FIXTURES / FILES["pubmedqa"]).read_text(encoding="utf-8"))
    ds = load_dataset(import_qa("pubmedqa", FIXTURES / FILES["pubmedqa"], tmp_path / "p")[0])
    assert ds.closed_book
    for q, (pmid, src) in zip(ds.queries, source.items(), strict=True):
        assert q.query_id == f"pubmedqa-{pmid}" and q.query == src["QUESTION"]
        assert q.options == {"A": "yes", "B": "no", "C": "maybe"}
        assert q.options[q.answer] == src["final_decision"] and q.gt_response == src["LONG_ANSWER"]
        assert q.kb_refs == []


def test_pubmedqa_contexts_become_kb_chunks_on_request(tmp_path):
    source = json.loads((FIXTURES / FILES["pubmedqa"]).read_text(encoding="utf-8"))
    out = tmp_path / "p"
    _, _, n_chunks = import_qa("pubmedqa", FIXTURES / FILES["pubmedqa"], out, Options(contexts=True))
    assert n_chunks == sum(len(e["CONTEXTS"]) for e in source.values()) == 6
    dataset, issues = validate(out)
    assert dataset is not None and issues == [] and not dataset.closed_book
    first = dataset.queries[0]
    assert [dataset.chunk(c).text for c in first.kb_refs] == source["90000001"]["CONTEXTS"]
    assert dataset.chunk(first.kb_refs[1]).title == "PMID 90000001: Methods"
    # importing again without contexts would leave a stale kb.jsonl: refused, nothing touched
    before = _listing(out)
    with pytest.raises(UserError, match=r"kb\.jsonl"):
        import_qa("pubmedqa", FIXTURES / FILES["pubmedqa"], out)
    assert _listing(out) == before


def test_mmlu_rows_without_header(tmp_path):
    ds = load_dataset(import_qa("mmlu", FIXTURES / FILES["mmlu"], tmp_path / "m")[0])
    assert [q.query_id for q in ds.queries][:2] == ["mmlu-clinical_knowledge-0001", "mmlu-clinical_knowledge-0002"]
    q = ds.queries[1]
    assert q.options["C"] == "Touch the dropper tip to the lower lid, to steady it"  # a quoted comma
    assert q.answer == "B" and q.gt_response == "B. Wash and dry their hands"
    assert [q.answer for q in ds.queries] == ["B", "B", "B", "C"]


def test_healthbench_keeps_conversation_rubric_and_tags(tmp_path):
    source = _jsonl(FIXTURES / FILES["healthbench"])
    ds = load_dataset(import_qa("healthbench", FIXTURES / FILES["healthbench"], tmp_path / "h")[0])
    for q, src in zip(ds.queries, source, strict=True):
        assert q.query_id == f"healthbench-{src['prompt_id']}"
        assert [t.model_dump() for t in q.messages] == src["prompt"] and q.query == src["prompt"][-1]["content"]
        assert [(c.criterion, c.points) for c in q.rubric] == [(r["criterion"], r["points"]) for r in src["rubrics"]]
        for c, r in zip(q.rubric, src["rubrics"], strict=True):
            assert c.tags == r["tags"] + src["example_tags"]  # example tags on every criterion
    multi = ds.queries[1]
    assert [t.role for t in multi.messages] == ["user", "assistant", "user"]
    assert sorted(c.points for c in multi.rubric) == [-8, -2, 5, 8]  # negative points kept
    assert multi.themes == ["cultural"]  # theme:global_health
    assert ds.queries[0].gt_response == source[0]["ideal_completions_data"]["ideal_completion"]
    assert ds.queries[2].gt_response == NO_IDEAL  # ideal_completions_data null


def test_healthbench_conversation_is_what_the_model_is_sent(tmp_path):
    source = _jsonl(FIXTURES / FILES["healthbench"])
    ds = load_dataset(import_qa("healthbench", FIXTURES / FILES["healthbench"], tmp_path / "h")[0])
    for q, src in zip(ds.queries, source, strict=True):  # as HealthBench sends it: no system prompt of ours
        assert list(build_messages(q, [], [], ds)) == src["prompt"]


def test_healthbench_rubric_problems_name_the_line(tmp_path):
    rows = _jsonl(FIXTURES / FILES["healthbench"])
    rows[2]["rubrics"][1]["points"] = 0
    path = tmp_path / "hb.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(UserError, match=r"hb\.jsonl:3: .*rubric\[1\]\.points: must not be 0"):
        import_qa("healthbench", path, tmp_path / "out")


# -- bad input: one line, nothing written ------------------------------------------------------------------
def _corrupt_line(src: Path, dst: Path, line: int, text: str) -> Path:
    lines = src.read_text(encoding="utf-8").splitlines()
    lines[line - 1] = text
    dst.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dst


BAD = [
    ("medqa", lambda tmp: _corrupt_line(FIXTURES / FILES["medqa"], tmp / "q.jsonl", 2, '{"question": "x",'), 2,
     "not valid JSON"),
    ("medqa", lambda tmp: _corrupt_line(FIXTURES / FILES["medqa"], tmp / "q.jsonl", 3,
                                        json.dumps({"question": "Which?", "options": {"A": "a", "B": "b"},
                                                    "answer": "a", "answer_idx": "C"})), 3, "answer_idx 'C'"),
    ("medqa", lambda tmp: _corrupt_line(FIXTURES / FILES["medqa"], tmp / "q.jsonl", 1,
                                        json.dumps({"question": "Which?", "options": {"A": "a", "B": "b"},
                                                    "answer": "b", "answer_idx": "A"})), 1, "not the text of option A"),
    ("medqa", lambda tmp: _corrupt_line(FIXTURES / FILES["medqa"], tmp / "q.jsonl", 2, json.dumps({"question": "?"})),
     2, "missing field 'options'"),
    ("medmcqa", lambda tmp: _corrupt_line(FIXTURES / FILES["medmcqa"], tmp / "m.json", 2, "[1, 2]"), 2,
     "expected a JSON object"),
    ("mmlu", lambda tmp: (tmp / "x_test.csv").write_text("question,A,B,C,D,answer\nWhich?,a,b,c,d,A\n") and
     tmp / "x_test.csv", 1, "header row"),
    ("mmlu", lambda tmp: (tmp / "x_test.csv").write_text("Which?,a,b,c,d,A\nWhy?,a,b\n") and tmp / "x_test.csv", 2,
     "3 fields"),
    ("pubmedqa", lambda tmp: (tmp / "p.json").write_text('{\n    "1": {\n        "QUESTION": "x",\n') and
     tmp / "p.json", 4, "not valid JSON"),
    ("pubmedqa", lambda tmp: (tmp / "p.json").write_text(json.dumps({"1": {"QUESTION": "Is it?", "CONTEXTS": ["c"],
                                                                           "LONG_ANSWER": "It is."}}, indent=4))
     and tmp / "p.json", 2, "no final_decision"),
    ("healthbench", lambda tmp: _corrupt_line(FIXTURES / FILES["healthbench"], tmp / "h.jsonl", 2,
                                              json.dumps({"prompt": [{"role": "user", "content": "Hi"},
                                                                     {"role": "assistant", "content": "Hello"}],
                                                          "rubrics": [], "prompt_id": "p"})), 2, "not the user's"),
]


@pytest.mark.parametrize("fmt,make,line,fragment", BAD, ids=[f"{b[0]}-{b[3]}" for b in BAD])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, fmt, make, line, fragment):
    bad = make(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(UserError) as exc:
        import_qa(fmt, bad, out)
    msg = str(exc.value)
    assert msg.startswith(f"{bad}:{line}: ") and fragment in msg and "\n" not in msg, msg
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_a_failed_import_leaves_an_earlier_one_untouched(tmp_path):
    out = tmp_path / "medqa"
    import_qa("medqa", FIXTURES / FILES["medqa"], out)
    before = _listing(out)
    bad = _corrupt_line(FIXTURES / FILES["medqa"], tmp_path / "bad.jsonl", 3, "not json")
    res = _cli("medqa", str(bad), str(out))
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.strip().splitlines() == [f"error: {bad}:3: not valid JSON (Expecting value at column 1); "
                                               "a MedQA file has one JSON object a line"]
    assert _listing(out) == before


def test_unknown_format_and_misplaced_options_are_refused(tmp_path):
    with pytest.raises(UserError, match="unknown format 'medqa2'; choose from medqa, medmcqa"):
        import_qa("medqa2", FIXTURES / FILES["medqa"], tmp_path / "x")
    with pytest.raises(UserError, match="PubMedQA only"):
        import_qa("medqa", FIXTURES / FILES["medqa"], tmp_path / "x", Options(contexts=True))
    with pytest.raises(UserError, match="not found"):
        import_qa("medqa", tmp_path / "missing.jsonl", tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_limit_takes_the_first_items(tmp_path):
    _, n, n_chunks = import_qa("pubmedqa", FIXTURES / FILES["pubmedqa"], tmp_path / "p", Options(contexts=True,
                                                                                                    limit=1))
    assert (n, n_chunks) == (1, 3)
    assert validate(tmp_path / "p")[0] is not None


def test_healthbench_run_sends_each_conversation_as_it_is(tmp_path):
    """End to end with a real local model: the request stored with every generation (llm_cache.request, what the
    model was sent) holds exactly the item's HealthBench conversation, no system prompt of the studio's."""
    from pipeline.catalog import load_config
    from pipeline.runner import run
    from pipeline.store import open_connection

    source = _jsonl(FIXTURES / FILES["healthbench"])
    folder = import_qa("healthbench", FIXTURES / FILES["healthbench"], tmp_path / "hb")[0]
    config = tmp_path / "hb.yaml"
    config.write_text(f"name: hb\ndataset: {folder}\ndb: {tmp_path / 'r.duckdb'}\n"
                      "models: [{id: llamacpp/smollm2-135m-instruct, max_tokens: 4}]\n", encoding="utf-8")
    run(load_config(config), stages="generate")
    with open_connection(tmp_path / "r.duckdb", read_only=True) as con:
        sent = [json.loads(r)["messages"] for (r,) in con.execute(
            "SELECT request FROM llm_cache WHERE model_id = 'llamacpp/smollm2-135m-instruct'").fetchall()]
    assert sorted(map(json.dumps, sent)) == sorted(json.dumps(src["prompt"]) for src in source)
    from pipeline.read.provenance import describe, prompt_provenance

    with open_connection(tmp_path / "r.duckdb", read_only=True) as con:
        page = con.execute("SELECT r.query_id, r.model_id, q.language, q.query, q.options, q.messages, r.prompt_hash "
                           "FROM responses r JOIN queries q USING (dataset, query_id)").df()
        name, path, closed_book = con.execute("SELECT name, path, closed_book FROM datasets").fetchone()
    shown = prompt_provenance(name, (path, closed_book), page, page.iloc[:0].assign(slot=[], pos=[]))
    assert shown.matches.tolist() == [True] * len(source)  # the browser rebuilds the prompt that was sent
    for row in shown.itertuples():
        assert row.own_files == [] and row.studio_files == [] and "sent as it is" in describe(row), describe(row)
