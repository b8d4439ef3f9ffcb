"""Withdrawn documents (issue 44): re-ingesting a folder retires the chunks of files no longer in it, as it retires
a changed file's, and says so; --keep-missing keeps them; a withdrawn chunk that queries cite stops the command;
other folders' chunks and update chunks stay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.dataset.ingest import ingest
from pipeline.errors import UserError


def kb(out: Path) -> dict[str, dict]:
    lines = (out / "kb.jsonl").read_text(encoding="utf-8").splitlines()
    return {c["chunk_id"]: c for c in map(json.loads, lines)}


def sources(folder: Path, **files: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / f"{name}.md").write_text(text, encoding="utf-8")
    return folder


def files_of(out: Path) -> set[str]:
    return {c["provenance"]["source_file"] for c in kb(out).values()}


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path, Path]:
    folder = sources(tmp_path / "docs", drops="# Drops\nUse the drops four times a day.",
                     shield="# Shield\nWear the eye shield at night for a week.")
    other = sources(tmp_path / "leaflets", diet="# Diet\nEat as usual after surgery.")
    out = tmp_path / "ds"
    ingest([folder], out)
    ingest([other], out)
    qa = tmp_path / "qa.csv"
    qa.write_text("question,answer,approved_on\nCan I bathe?,After a week.,2024-01-05\n", encoding="utf-8")
    ingest([qa], out, kind="update")
    return folder, other, out


def test_a_file_withdrawn_from_the_folder_is_retired_on_re_ingest(built):
    folder, _, out = built
    before = kb(out)
    (folder / "shield.md").unlink()
    report = ingest([folder], out)
    assert files_of(out) == {"drops.md", "diet.md", "qa.csv"}  # the other folder's and the update chunk stay
    assert report["withdrawn_files"] == ["shield.md"]
    assert set(report["retired_chunks"]) == {i for i, c in before.items()
                                              if c["provenance"]["source_file"] == "shield.md"}
    stored = json.loads((out / "ingest_report.json").read_text(encoding="utf-8"))
    assert "shield.md" not in {f["file"] for f in stored["files"]}


def test_keep_missing_keeps_them_and_says_so(built):
    folder, _, out = built
    (folder / "shield.md").unlink()
    result = CliRunner().invoke(app, ["ingest-kb", str(folder), "--out", str(out), "--keep-missing"])
    assert result.exit_code == 0, result.output
    assert "shield.md" in files_of(out) and "kept (--keep-missing)" in result.output
    assert json.loads((out / "ingest_report.json").read_text(encoding="utf-8"))["missing_files"] == ["shield.md"]


def test_the_console_names_the_withdrawn_file(built):
    folder, _, out = built
    (folder / "shield.md").unlink()
    result = CliRunner().invoke(app, ["ingest-kb", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "withdrawn" in result.output and "shield.md" in result.output


def test_a_withdrawn_chunk_that_queries_cite_stops_the_command(built):
    folder, _, out = built
    cited = next(i for i, c in kb(out).items() if c["provenance"]["source_file"] == "shield.md")
    (out / "queries.jsonl").write_text(json.dumps({"query_id": "q1", "language": "en", "query": "Shield?",
                                                   "gt_response": "A week.", "kb_refs": [cited]}) + "\n",
                                       encoding="utf-8")
    before = (out / "kb.jsonl").read_bytes()
    (folder / "shield.md").unlink()
    with pytest.raises(UserError) as stopped:
        ingest([folder], out)
    assert cited in str(stopped.value) and "q1" in str(stopped.value) and "\n" not in str(stopped.value)
    assert (out / "kb.jsonl").read_bytes() == before
