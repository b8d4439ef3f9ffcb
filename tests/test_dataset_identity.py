"""A dataset keeps its identity in a results database (issue 44): two different folders with one name are refused
in one line before a run writes anything; the same folder changed, or the same content moved, is the same dataset."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.config import RunConfig
from pipeline.dataset import load_dataset
from pipeline.errors import UserError
from pipeline.runner import check_identity, execute, save_dataset
from pipeline.store import Store


def folder(path: Path, answer: str) -> Path:
    path.mkdir(parents=True)
    query = {"query_id": "q1", "language": "en", "query": "Can I take my BP tablet before surgery?",
             "gt_response": answer}
    (path / "queries.jsonl").write_text(json.dumps(query) + "\n", encoding="utf-8")
    return path


def test_two_folders_of_one_name_are_refused_and_the_same_one_is_not(tmp_path: Path):
    store = Store(tmp_path / "r.duckdb")
    first = folder(tmp_path / "team-a" / "eyecare", "Yes, with a sip of water.")
    other = folder(tmp_path / "team-b" / "eyecare", "No, skip it that morning.")
    save_dataset(store, load_dataset(first))
    with pytest.raises(UserError) as refused:
        check_identity(store, load_dataset(other))
    message = str(refused.value)
    assert "\n" not in message and "'eyecare'" in message and "another folder" in message and str(other) in message
    copy = tmp_path / "moved" / "eyecare"  # the same content elsewhere: the same dataset
    shutil.copytree(first, copy)
    check_identity(store, load_dataset(copy))
    (first / "queries.jsonl").write_text((first / "queries.jsonl").read_text().replace("sip", "glass"))
    check_identity(store, load_dataset(first))  # the same folder, changed: the same dataset (its KB change followed)


def test_a_run_on_the_second_folder_stops_before_it_writes(tmp_path: Path):
    db = tmp_path / "r.duckdb"
    first = folder(tmp_path / "team-a" / "eyecare", "Yes, with a sip of water.")
    other = folder(tmp_path / "team-b" / "eyecare", "No, skip it that morning.")
    save_dataset(Store(db), load_dataset(first))
    config = RunConfig.model_validate({"name": "identity", "dataset": str(other), "db": str(db),
                                       "models": [{"id": "extractive/top-sentences"}]})
    with pytest.raises(UserError, match="another folder"):
        execute(config, stages="generate", console=Console(file=io.StringIO()))
    store = Store(db)
    assert store.fetch("SELECT count(*) FROM runs")[0][0] == 0
    assert store.fetch("SELECT gt_response FROM queries WHERE dataset = 'eyecare'") == [("Yes, with a sip of water.",)]
