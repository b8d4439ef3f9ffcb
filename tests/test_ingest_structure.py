"""ingest-kb's formats as one registry, structure kept (HTML h1-h6, fragments and their tables, DOCX tables in
order), links refused, chunk ids that queries cite never left dangling, and the console table keeping file names
whole in a log."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.dataset.ingest import ingest
from pipeline.errors import UserError
from pipeline.formats import FORMATS, QA_TABLES, DocumentFormat, formats_described
from tests.support.kb_sources import EYEDROP_SCHEDULE_HEADING, EYEDROP_SCHEDULE_HI, EYEDROP_SCHEDULE_ROWS, write_docx

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "data" / "raw-example" / "sources"


def kb(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "kb.jsonl").read_text(encoding="utf-8").splitlines()]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


# -- formats: one registry ---------------------------------------------------------------------------------------
def read_rst(path: Path, report, options, limits) -> list:
    """A toy reader for the registry test: blocks of a heading line and a text line."""
    from pipeline.dataset.ingest import Section

    blocks = [block.strip().split("\n") for block in path.read_text(encoding="utf-8").split("\n\n")]
    return [Section(text, [heading]) for heading, text in blocks]


def test_a_new_format_is_a_reader_and_one_entry(tmp_path):
    extended = {**{name: FORMATS[name] for name in FORMATS},
                "rst": DocumentFormat("reStructuredText", (".rst",), f"{__name__}:read_rst")}
    page = tmp_path / "drops.rst"
    page.write_text("Eye drops\nOne drop six times a day in the first week.\n\nGlasses\nNew glasses after six weeks.\n")
    ingest([page], tmp_path / "ds", formats=extended)
    assert [(c["provenance"]["heading_path"], c["text"]) for c in kb(tmp_path / "ds")] == [
        (["Eye drops"], "One drop six times a day in the first week."), (["Glasses"], "New glasses after six weeks.")]
    assert "reStructuredText (.rst)" in formats_described(extended)
    sheet = tmp_path / "budget.xlsx"
    sheet.write_bytes(b"PK\x03\x04")
    with pytest.raises(UserError, match=r"unsupported file type '\.xlsx'; ingest-kb reads .*Text \(\.rst\)"):
        ingest([sheet], tmp_path / "ds", formats=extended)
    with pytest.raises(UserError, match=r"unsupported file type '\.rst'"):  # the formats given are the ones read
        ingest([page], tmp_path / "ds")


def test_cli_help_and_docs_list_every_format_of_the_registry():
    suffixes = {s for name in FORMATS for s in FORMATS[name].suffixes}
    assert suffixes >= {".pdf", ".docx", ".html", ".htm", ".md", ".txt"}
    result = subprocess.run([sys.executable, "-m", "pipeline", "ingest-kb", "--help"], cwd=REPO, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "COLUMNS": "400"})
    assert result.returncode == 0, result.stderr
    assert formats_described() in " ".join(result.stdout.split())
    table = (REPO / "docs" / "ingest.md").read_text(encoding="utf-8").split("## `ingest-kb", 1)[1]
    documented = set(re.findall(r"`(\.[a-z]+)`", table.split("\n\n", 2)[1]))
    assert documented == suffixes | set(QA_TABLES)


# -- structure kept ----------------------------------------------------------------------------------------------
GUIDELINE = """<!DOCTYPE html><html><head><title>Antenatal care</title></head><body>
<nav><a href="/">Home</a> | <a href="/topics">Health topics</a></nav>
<main>
<h1>Recommendations on <em>antenatal</em> care</h1>
<p>Every pregnant woman should have at least eight contacts<sup>12</sup> with a health worker.</p>
<h2>Nutrition</h2>
<p>Daily oral iron and folic acid<sup>3,4</sup> with <strong>30 mg to 60 mg</strong> of elemental iron.</p>
<h3>Calcium</h3>
<p>Where dietary calcium is low, <b>1.5 g to 2.0 g</b> of oral calcium a day.</p>
<h4>Timing</h4><p>Calcium and iron tablets are taken some hours apart.</p>
<h5>Missed doses</h5><p>A missed tablet is taken when remembered, never two at once.</p>
<h6>Storage</h6><p>Keep tablets dry and away from children.</p>
<h2>Eye checks in diabetes</h2>
<p>A woman with diabetes has her retina examined in the first trimester.</p>
</main><footer>Cookie settings</footer></body></html>
"""


def test_html_headings_h1_to_h6_give_heading_paths_and_inline_markup_is_dropped(tmp_path):
    page = tmp_path / "antenatal.html"
    page.write_text(GUIDELINE, encoding="utf-8")
    ingest([page], tmp_path / "ds", max_tokens=60)
    chunks = kb(tmp_path / "ds")
    top = "Recommendations on antenatal care"
    paths = {c["text"].splitlines()[-1]: c["provenance"]["heading_path"] for c in chunks}
    assert paths == {
        "Every pregnant woman should have at least eight contacts¹² with a health worker.": [top],
        "Daily oral iron and folic acid³,⁴ with 30 mg to 60 mg of elemental iron.": [top, "Nutrition"],
        "Where dietary calcium is low, 1.5 g to 2.0 g of oral calcium a day.": [top, "Nutrition", "Calcium"],
        "Calcium and iron tablets are taken some hours apart.": [top, "Nutrition", "Calcium", "Timing"],
        "A missed tablet is taken when remembered, never two at once.":
            [top, "Nutrition", "Calcium", "Timing", "Missed doses"],
        "Keep tablets dry and away from children.": [top, "Nutrition", "Calcium", "Timing", "Missed doses", "Storage"],
        "A woman with diabetes has her retina examined in the first trimester.": [top, "Eye checks in diabetes"],
    }
    text = "\n".join(c["text"] for c in chunks)
    assert not re.search(r"</?(sup|em|b|strong)>|\*\*|\*antenatal\*", text), text


# A page body as documentation generators and CMS exports write it: no <html>, <head> or <body>, h2/h3 headings.
FRAGMENT = """<h2>Before cataract surgery</h2>
<p>Bring every report and the list of medicines you take to the pre-operative clinic.</p>
<h3>On the day of surgery</h3>
<p>Eat a light breakfast two hours before your time and wear loose clothes without metal buttons.</p>
<h3>{heading}</h3>
<p>{intro}</p>
<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>
<p>{after}</p>
<h2>After surgery</h2>
<p>Keep the eye shield on at night for a week and keep water out of the eye.</p>
"""


def test_html_fragment_keeps_heading_paths_and_its_table_becomes_rows_under_its_heading(tmp_path):
    rows = EYEDROP_SCHEDULE_ROWS
    intro, after = EYEDROP_SCHEDULE_HI[3][1], EYEDROP_SCHEDULE_HI[6][1]  # the paragraphs before and after the table
    page = tmp_path / "cataract.html"
    page.write_text(FRAGMENT.format(
        heading=EYEDROP_SCHEDULE_HEADING, intro=intro, after=after,
        head="".join(f"<th>{cell}</th>" for cell in rows[0]),
        body="".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows[1:])),
        encoding="utf-8")
    ingest([page], tmp_path / "ds", max_tokens=1000)
    chunks = kb(tmp_path / "ds")
    paths = [c["provenance"]["heading_path"] for c in chunks]
    assert paths == [["Before cataract surgery"], ["Before cataract surgery", "On the day of surgery"],
                     ["Before cataract surgery", EYEDROP_SCHEDULE_HEADING], ["After surgery"]]
    table = chunks[2]["text"]
    lines = ["| " + " | ".join(row) + " |" for row in rows]
    assert "\n".join([lines[0], "|---|---|---|", *lines[1:]]) in table
    assert table.index(intro) < table.index(lines[-1]) < table.index(after)


def test_docx_table_stays_in_order_under_its_heading_as_markdown_rows(tmp_path):
    committed = EXAMPLE / "eye-drop-schedule-hi.docx"
    assert committed.is_file()  # the worked example's Hindi leaflet (tests/support/kb_sources.py)
    leaflet = write_docx(tmp_path / "schedule.docx", EYEDROP_SCHEDULE_HI)
    ingest([leaflet], tmp_path / "ds", max_tokens=1000)
    chunks = kb(tmp_path / "ds")
    text = "\n".join(c["text"] for c in chunks)
    rows = ["| " + " | ".join(row) + " |" for row in EYEDROP_SCHEDULE_ROWS]
    assert "\n".join([rows[0], "|---|---|---|", *rows[1:]]) in text
    following = next(b[1] for b in EYEDROP_SCHEDULE_HI[EYEDROP_SCHEDULE_HI.index(EYEDROP_SCHEDULE_ROWS) + 1:])
    assert text.index(EYEDROP_SCHEDULE_HEADING) < text.index(rows[-1]) < text.index(following)
    table_chunk = next(c for c in chunks if rows[1] in c["text"])
    assert table_chunk["provenance"]["heading_path"] == [EYEDROP_SCHEDULE_HI[0][1], EYEDROP_SCHEDULE_HEADING]


# -- links ------------------------------------------------------------------------------------------------------
def test_a_link_out_of_a_source_folder_is_refused_and_a_named_link_is_reported(tmp_path):
    secret = tmp_path / "private" / "passwd.txt"
    secret.parent.mkdir()
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "leaflet.md").write_text("# Drops\n\nOne drop four times a day.\n")
    (sources / "notes.txt").symlink_to(secret)
    out = tmp_path / "ds"
    result = cli("ingest-kb", str(sources), "--out", str(out))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert str(sources / "notes.txt") in lines[0] and "outside the source folder" in lines[0]
    assert not out.exists()

    (sources / "notes.txt").unlink()
    (sources / "more").symlink_to(secret.parent, target_is_directory=True)  # a linked folder is refused as well
    with pytest.raises(UserError, match=r"more: a link to .*private"):
        ingest([sources], out)

    (sources / "more").unlink()
    (tmp_path / "named.txt").symlink_to(secret)
    report = ingest([sources, tmp_path / "named.txt"], out)
    named = next(r for r in report["files"] if r["file"] == "named.txt")
    assert f"a link to {secret}" in named["flags"]
    assert any("root:x:0" in c["text"] for c in kb(out))  # named on the command line: the user chose it


# -- re-ingest ---------------------------------------------------------------------------------------------------
def test_reingest_refuses_to_retire_chunks_that_queries_cite_or_keeps_them(tmp_path):
    page = tmp_path / "costs.md"
    page.write_text("# Costs\n\nA monofocal lens is covered by the scheme.\n\n## Counter\n\nThe desk opens at 8 am.\n")
    out = tmp_path / "ds"
    ingest([page], out, max_tokens=20)
    cited = kb(out)[0]["chunk_id"]
    queries = [{"query_id": "q-lens", "language": "en", "query": "Is the lens covered?", "gt_response": "Yes.",
                "kb_refs": [cited]},
               {"query_id": "q-other", "language": "en", "query": "When?", "gt_response": "8 am.", "kb_refs": []}]
    (out / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    page.write_text(page.read_text() + "\n## Lens prices\n\nA toric lens costs more.\n")
    result = cli("ingest-kb", str(page), "--out", str(out), "--max-tokens", "20")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert cited in lines[0] and "q-lens" in lines[0] and "q-other" not in lines[0]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing written

    report = ingest([page], out, max_tokens=20, keep_referenced=True)
    assert report["kept_referenced_chunks"] == {cited: ["q-lens"]}
    assert cited in {c["chunk_id"] for c in kb(out)} and cited not in report["retired_chunks"]
    assert report["retired_chunks"]  # the chunks nobody cites are retired as before
    validated = cli("validate", str(out))
    assert validated.returncode == 0, validated.stdout + validated.stderr


# -- the console table in a log ------------------------------------------------------------------------------------
def test_report_table_keeps_long_file_names_whole_in_a_log(tmp_path):
    long_name = "postoperative-instructions-after-phacoemulsification-with-foldable-iol-implantation-for-patients"
    sources = tmp_path / "sources" / "eye-unit-patient-education-leaflets-in-english"
    sources.mkdir(parents=True)
    (sources / f"{long_name}.md").write_text("# Drops\n\nOne drop four times a day for a week.\n")
    log = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # as `make run > log`: a pipe, no COLUMNS
    result = subprocess.run([sys.executable, "-m", "pipeline", "ingest-kb", str(tmp_path / "sources"), "--out",
                             str(tmp_path / "ds")], cwd=REPO, capture_output=True, text=True, timeout=300, env=log)
    assert result.returncode == 0, result.stderr
    assert f"eye-unit-patient-education-leaflets-in-english/{long_name}.md" in result.stdout, result.stdout
