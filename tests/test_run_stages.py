"""``--stages``: a subset of the stages, or (each name with ``-``) all the default stages but some: ``make run``
evaluates everything but Med-CoDE before the classifier Med-CoDE needs is trained."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.catalog import load_config
from pipeline.errors import UserError
from pipeline.runner import parse_stages

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("config", ["default.yaml", "default-closed-book.yaml"])
def test_all_but_medcode(config):
    cfg = load_config(REPO / "configs" / config)
    everything = parse_stages(None, cfg)
    assert "medcode" in everything
    assert parse_stages("-medcode", cfg) == [s for s in everything if s != "medcode"]
    assert parse_stages("-medcode,-judge", cfg) == [s for s in everything if s not in ("medcode", "judge")]


def test_stages_to_run_and_to_leave_out_are_not_mixed():
    cfg = load_config(REPO / "configs" / "default.yaml")
    with pytest.raises(UserError, match="not both"):
        parse_stages("generate,-medcode", cfg)
    with pytest.raises(UserError, match="unknown stage 'medcod'"):
        parse_stages("-medcod", cfg)
    assert parse_stages("judge,generate", cfg) == ["generate", "judge"]
