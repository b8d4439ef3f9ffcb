"""The lazy plug-in registry: entries imported on first use, a name registered twice refused, a temporary
replacement undone."""

from __future__ import annotations

import json

import pytest

from pipeline.errors import UserError
from pipeline.registry import Registry


def test_an_entry_is_imported_on_first_use_and_unknown_names_are_one_line() -> None:
    reg = Registry("codec", {"json": "json:dumps", "module": "json"})
    assert reg["json"] is json.dumps and reg["module"] is json and list(reg) == ["json", "module"]
    with pytest.raises(UserError, match="unknown codec 'yaml'; choose from json, module"):
        reg.lookup("yaml")


def test_a_name_registered_twice_is_refused_and_the_first_entry_kept() -> None:
    reg = Registry("codec", {"json": "json:dumps"})
    reg.register("loads", "json:loads")
    with pytest.raises(ValueError, match="codec 'json' is registered twice"):
        reg.register("json", "json:loads")
    assert reg["json"] is json.dumps and reg["loads"] is json.loads


def test_a_replacement_lasts_for_its_block_only_even_when_it_raises() -> None:
    reg = Registry("codec", {"json": "json:dumps"})
    with pytest.raises(RuntimeError), reg.replaced("json", repr):
        assert reg["json"] is repr
        raise RuntimeError
    assert reg["json"] is json.dumps
    with pytest.raises(KeyError), reg.replaced("nope", repr):
        pass
