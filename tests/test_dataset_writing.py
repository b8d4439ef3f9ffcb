"""Writing into a dataset folder: a command never replaces a file it did not write (unless --force), validates what
it would write before replacing anything, and replaces its own earlier output; bad timestamps are one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.dataset.curate import curate
from pipeline.dataset.writing import write_dataset
from pipeline.errors import UserError
from tests.test_curate import write_log

REPO = Path(__file__).resolve().parent.parent


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line_error(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    return lines[0]


def test_curate_into_the_bundled_cataract_set_leaves_it_byte_identical(tmp_path):
    folder = tmp_path / "cataract"
    shutil.copytree(REPO / "data" / "cataract", folder)
    before = snapshot(folder)
    line = one_line_error("curate-queries", str(write_log(tmp_path / "log.csv")), "--out", str(folder))
    assert "queries.jsonl" in line and "--force" in line
    assert snapshot(folder) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cataract", "log.csv"]  # no staging folder left


def test_force_still_validates_before_replacing(tmp_path):
    """--force into the cataract copy: its rubrics name queries the log does not have, so nothing is replaced."""
    folder = tmp_path / "cataract"
    shutil.copytree(REPO / "data" / "cataract", folder)
    before = snapshot(folder)
    with pytest.raises(UserError, match="does not validate"):
        curate(write_log(tmp_path / "log.csv"), folder, force=True)
    assert snapshot(folder) == before


def test_a_command_replaces_its_own_output_but_not_a_hand_edit(tmp_path):
    out, log = tmp_path / "ds", write_log(tmp_path / "log.csv")
    first = curate(log, out)
    first.pop("seconds")
    report = json.loads((out / "curate_report.json").read_text(encoding="utf-8"))
    assert set(report["outputs"]) == {"queries.jsonl", "queries_without_gt.jsonl", "excluded.jsonl"}
    again = curate(log, out)  # its own files: replaced without --force
    again.pop("seconds")
    assert again == first
    with (out / "excluded.jsonl").open("a", encoding="utf-8") as fh:
        fh.write("{}\n")  # a hand edit
    edited = snapshot(out)
    with pytest.raises(UserError, match=r"excluded\.jsonl, not written by curate-queries"):
        curate(log, out)
    assert snapshot(out) == edited
    curate(log, out, force=True)
    assert (out / "excluded.jsonl").read_bytes() != edited["excluded.jsonl"]


def test_ingest_refuses_a_kb_it_did_not_write_and_reingests_its_own(tmp_path):
    from pipeline.dataset.ingest import ingest

    source = tmp_path / "leaflet.md"
    source.write_text("# Drops\n\nUse the antibiotic drops four times a day for three weeks.\n", encoding="utf-8")
    folder = tmp_path / "cataract"
    shutil.copytree(REPO / "data" / "cataract", folder)
    before = snapshot(folder)
    with pytest.raises(UserError, match=r"kb\.jsonl, not written by ingest-kb"):
        ingest([source], folder)
    assert snapshot(folder) == before
    own = tmp_path / "own"
    ingest([source], own)
    source.write_text("# Drops\n\nUse the drops four times a day for four weeks.\n", encoding="utf-8")
    assert ingest([source], own)["retired_chunks"]  # its own kb.jsonl: replaced without --force


def test_a_failed_check_writes_nothing_and_creates_no_folder(tmp_path):
    def refuse(staged: Path) -> None:
        assert (staged / "a.jsonl").read_text() == "new\n"
        raise UserError(f"{staged / 'a.jsonl'}: bad")

    with pytest.raises(UserError, match=f"{tmp_path / 'new'}/a.jsonl: bad"):
        write_dataset(tmp_path / "new", {"a.jsonl": "new\n"}, command="test", report_name="r.json", check=refuse)
    assert list(tmp_path.iterdir()) == []


def test_tag_themes_output_refuses_a_file_it_did_not_write(tmp_path):
    folder = tmp_path / "cataract"
    shutil.copytree(REPO / "data" / "cataract", folder)
    before = snapshot(folder)
    line = one_line_error("tag-themes", str(folder), "--output", str(folder / "queries.jsonl"))
    assert "queries.jsonl" in line and "--force" in line
    assert snapshot(folder) == before


@pytest.mark.parametrize("stamp", ["now", "today", "NOW ", "soon"])
def test_timestamps_that_are_not_dates_are_one_line(tmp_path, stamp):
    log = tmp_path / "log.csv"
    log.write_text(f"timestamp,message\n2024-01-01,Can I bathe?\n{stamp},Can I read?\n", encoding="utf-8")
    out = tmp_path / "ds"
    line = one_line_error("curate-queries", str(log), "--out", str(out))
    assert "log.csv:3: field timestamp" in line and repr(stamp.strip()) in line
    assert not out.exists()


def _check_clusters(texts: list[str], ids: list[str], found: list[dict], exact: list[dict]) -> None:
    """Every reported pair is a message and an earlier representative (never itself flagged) scoring the rapidfuzz
    ratio reported, at or above the threshold; the flagged messages are at least 99 % of the exact method's."""
    from rapidfuzz import fuzz

    from pipeline.dataset.curate import NEAR_DUPLICATE_SCORE

    index = {i: n for n, i in enumerate(ids)}
    flagged = {p["query_id"] for p in found}
    for p in found:
        i, j = index[p["query_id"]], index[p["similar_to"]]
        assert j < i and p["similar_to"] not in flagged
        assert p["score"] == int(fuzz.ratio(texts[i], texts[j])) >= NEAR_DUPLICATE_SCORE
    expected = {p["query_id"] for p in exact}
    assert len(expected) > 100 and len(flagged & expected) / len(expected) >= 0.99


def test_near_duplicates_find_the_exact_methods_messages():
    """MinHash LSH candidates + the same rapidfuzz score, clustered by representative: the messages the exact method
    flags (recall at least 0.99), each with a right score, on a generated multilingual log."""
    from bench.bench_curate import generate_log
    from pipeline.dataset.curate import near_duplicates, near_duplicates_exact, normalise, not_health

    texts = list(dict.fromkeys(normalise(r["message"]) for r in generate_log(2500) if not not_health(r["message"])))
    ids = [f"q{i}" for i in range(len(texts))]
    _check_clusters(texts, ids, near_duplicates(texts, ids), near_duplicates_exact(texts, ids))
    assert near_duplicates(texts[:1], ids[:1]) == []


def test_templated_messages_are_clustered_in_linear_work():
    """Heavily templated messages fill the LSH buckets (all pairs of a bucket were compared: quadratic, 61 s at
    40k): each message is compared with a bounded number of representatives, and the clusters stay right."""
    from bench.bench_curate import generate_templated_log
    from pipeline.dataset.curate import MAX_CANDIDATES, near_duplicates, near_duplicates_exact, normalise

    texts = list(dict.fromkeys(normalise(r["message"]) for r in generate_templated_log(3000)))
    ids = [f"q{i}" for i in range(len(texts))]
    stats: dict[str, int] = {}
    found = near_duplicates(texts, ids, stats=stats)
    _check_clusters(texts, ids, found, near_duplicates_exact(texts, ids))
    assert stats["compared"] <= MAX_CANDIDATES * len(texts) < len(texts) * (len(texts) - 1) // 2
    assert stats["representatives"] < len(texts) // 10  # a few templates: a few representatives
