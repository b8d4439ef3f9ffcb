"""Arena votes that hold up with real doctors (issue 36): repeats, voter quality and its flags, anchored and
regularised ratings (against FastChat's contextual BT), fits that did not converge or a model that never lost,
"both bad" per model, and the arena commands' bad input (issue 38)."""

from __future__ import annotations

import io
import math
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest, kendalltau
from typer.testing import CliRunner

import pipeline.analysis.arena as arena_analysis
from pipeline.analysis.arena import BASE, INIT, SCALE, bradley_terry
from pipeline.cli import app
from pipeline.errors import UserError
from pipeline.read import arena
from pipeline.store import Store
from pipeline.store.arena_rows import ArenaVoteRow
from tests import fastchat_reference as fastchat
from tests.test_arena import MODELS, TRUE, build_db, current_texts, draw_votes

HEADER = "dataset,query_id,model_a,model_b,winner,annotator,shown_left,tags,voted_at\n"


def write_csv(path: Path, lines: list[str]) -> Path:
    path.write_text(HEADER + "".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def small_db(tmp_path: Path) -> Path:
    return build_db(tmp_path / "small.duckdb", queries=6)


# -- 1. repeats -------------------------------------------------------------------------------------------------
def test_repeats_first_counts_the_first_and_lists_every_repeat(small_db: Path, tmp_path: Path):
    a, b, c = MODELS[:3]
    votes = write_csv(tmp_path / "votes.csv", [
        f"ds,hi-000,{a},{b},a,dr-rao,{a},,2026-12-01T10:00:00",
        f"ds,hi-000,{b},{a},a,dr-rao,{a},,2026-12-01T10:05:00",  # the same pair the other way round: a repeat
        f"ds,hi-001,{a},{c},b,dr-rao,,,",
        f"ds,hi-000,{a},{b},tie,dr-iyer,,,",
        f"ds,hi-000,{a},{b},b,dr-rao,,,2026-12-01T11:00:00",  # a third time
    ])
    result = CliRunner().invoke(app, ["arena", "import-votes", str(votes), "--db", str(small_db)])
    assert result.exit_code == 0, result.output
    listed = [line for line in result.output.splitlines() if "repeat of line" in line]
    assert len(listed) == 2
    assert "line 3: repeat of line 2" in listed[0] and "'dr-rao'" in listed[0] and "'hi-000'" in listed[0]
    assert f"{a} vs {b}" in listed[0] and "line 6: repeat of line 2" in listed[1]
    stored = arena.export_votes(small_db)
    assert len(stored) == 3
    rao = stored[(stored.annotator == "dr-rao") & (stored.query_id == "hi-000")].iloc[0]
    assert rao.winner == "a" and rao.voted_at == pd.Timestamp("2026-12-01T10:00:00")  # the first one counted
    # the same file again: every vote is a repeat of a stored one, nothing changes, exit 0
    result = CliRunner().invoke(app, ["arena", "import-votes", str(votes), "--db", str(small_db)])
    assert result.exit_code == 0, result.output
    assert result.output.count("repeat of a vote stored before") == 5
    pd.testing.assert_frame_equal(arena.export_votes(small_db), stored)


def test_repeats_last_counts_the_last_and_refuse_refuses_the_file(small_db: Path, tmp_path: Path):
    a, b = MODELS[:2]
    lines = [f"ds,hi-000,{a},{b},a,dr-rao,,,2026-12-01T10:00:00", f"ds,hi-000,{a},{b},b,dr-rao,,,2026-12-01T10:09:00"]
    votes = write_csv(tmp_path / "votes.csv", lines)
    refused = CliRunner().invoke(app, ["arena", "import-votes", str(votes), "--db", str(small_db),
                                       "--repeats", "refuse"])
    assert refused.exit_code == 1
    assert "line 3: repeats line 2" in refused.output and "nothing imported" in refused.output
    assert not Store(small_db).fetch("SELECT 1 FROM duckdb_tables() WHERE table_name = 'arena_votes'") or \
        arena.export_votes(small_db).empty
    last = CliRunner().invoke(app, ["arena", "import-votes", str(votes), "--db", str(small_db), "--repeats", "last"])
    assert last.exit_code == 0, last.output
    assert "this vote replaces it" in last.output
    assert list(arena.export_votes(small_db).winner) == ["b"]
    bad = CliRunner().invoke(app, ["arena", "import-votes", str(votes), "--db", str(small_db), "--repeats", "both"])
    assert isinstance(bad.exception, UserError) and str(bad.exception).startswith("--repeats: 'both'")


def test_the_page_keeps_the_first_vote_of_an_annotator_on_a_query_and_pair(small_db: Path):
    from pipeline.labels.arena_votes import save_vote

    a, b = MODELS[:2]
    texts = current_texts(small_db)
    shown = datetime(2026, 12, 5, 9, 0, 0)
    common = dict(dataset="ds", query_id="hi-000", model_a=a, model_b=b, annotator="dr-rao", shown_left=a, tags=[],
                  text_a=texts[("hi-000", a)], text_b=texts[("hi-000", b)], shown_at=shown)
    assert save_vote(small_db, winner="a", **common) is True
    assert save_vote(small_db, winner="b", **common) is False  # a double click: the stored vote stays
    stored = arena.export_votes(small_db)
    assert list(stored.winner) == ["a"] and stored.shown_at.iloc[0] == pd.Timestamp(shown)


# -- 2. voter quality ---------------------------------------------------------------------------------------------
STRONG = np.array([-150.0, -90.0, -30.0, 30.0, 90.0, 150.0])  # close neighbours: noise can swap them


@pytest.fixture(scope="module")
def crowd_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three doctors voting by known strengths (20-90 s a vote), one who always picks the left answer, one who
    votes at random in two seconds; the bad two vote more."""
    db = build_db(tmp_path_factory.mktemp("crowd") / "crowd.duckdb", queries=120, languages=("hi",))
    texts = current_texts(db)
    rng = np.random.default_rng(2)
    pairs = [(i, j) for i in range(6) for j in range(i + 1, 6)]
    qids = sorted({q for q, _ in texts})
    start = datetime(2026, 12, 1, 9, 0, 0)
    votes = []
    for annotator, n in (("dr-good-1", 300), ("dr-good-2", 300), ("dr-good-3", 300), ("dr-left", 1500),
                         ("dr-random", 1500)):
        chosen = rng.choice(len(qids) * len(pairs), n, replace=False)
        for k, cell in enumerate(chosen):
            qid = qids[cell // len(pairs)]
            i, j = pairs[cell % len(pairs)]
            left = i if rng.random() < 0.5 else j
            if annotator == "dr-left":
                winner = "a" if left == i else "b"
            elif annotator == "dr-random":
                winner = "a" if rng.random() < 0.5 else "b"
            else:
                p = 1 / (1 + BASE ** ((STRONG[j] - STRONG[i]) / SCALE))
                winner = "a" if rng.random() < p else "b"
            seconds = 2.0 if annotator == "dr-random" else float(rng.uniform(20, 90))
            shown = start + timedelta(minutes=2 * k)
            votes.append(ArenaVoteRow.of(dataset="ds", query_id=qid, model_a=MODELS[i], model_b=MODELS[j],
                                         winner=winner, annotator=annotator, shown_left=MODELS[left], tags=[],
                                         text_a=texts[(qid, MODELS[i])], text_b=texts[(qid, MODELS[j])],
                                         source="test", shown_at=shown, voted_at=shown + timedelta(seconds=seconds)))
    Store(db).write(votes)
    return db


def tau(table: pd.DataFrame) -> float:
    truth = pd.Series(STRONG, index=MODELS)
    return float(kendalltau(table.strength.to_numpy(), truth.reindex(table.model).to_numpy()).statistic)


def test_exactly_the_two_bad_annotators_are_flagged_and_leaving_them_out_recovers_the_order(crowd_db: Path):
    table = arena.annotators(crowd_db, "ds").set_index("annotator")
    assert set(table.index[table.flagged]) == {"dr-left", "dr-random"}, table[["flagged", "reason"]]
    assert table.left_share["dr-left"] == 1.0 and "one side" in table.reason["dr-left"]
    assert table.median_seconds["dr-random"] == pytest.approx(2.0) and "too fast" in table.reason["dr-random"]
    assert all(20 <= table.median_seconds[g] <= 90 for g in ("dr-good-1", "dr-good-2", "dr-good-3"))
    assert table.votes.to_dict() == {"dr-good-1": 300, "dr-good-2": 300, "dr-good-3": 300, "dr-left": 1500,
                                     "dr-random": 1500}
    assert math.isnan(table.judge_agreement["dr-left"])  # no pairwise judge here
    with_them = arena.fit(crowd_db, "ds", rounds=0).table
    without = arena.fit(crowd_db, "ds", rounds=0, exclude=("dr-left", "dr-random")).table
    assert without.votes.sum() == 2 * 900
    assert tau(without) >= 0.9 > tau(with_them)
    # the CLI: --exclude-flagged is the same board; --max-votes-per-annotator 300 caps the bad two's weight
    result = CliRunner().invoke(app, ["arena", "leaderboard", "--db", str(crowd_db), "--exclude-flagged",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    printed = pd.read_json(io.StringIO(result.stdout))
    assert list(printed.model) == list(without.model) and printed.votes.sum() == 2 * 900
    assert "left out 2 flagged annotator(s)" in result.output
    capped = arena.fit(crowd_db, "ds", rounds=0, cap=300).table
    assert capped.votes.sum() == 2 * 5 * 300
    listed = CliRunner().invoke(app, ["arena", "annotators", "--db", str(crowd_db), "--format", "csv"])
    assert listed.exit_code == 0, listed.output
    cli = pd.read_csv(io.StringIO(listed.stdout))
    assert {"annotator", "votes", "median_seconds", "left_share", "consensus_agreement", "flagged",
            "reason"} <= set(cli.columns)
    assert set(cli.annotator[cli.flagged]) == {"dr-left", "dr-random"}


def test_consensus_agreement_is_the_held_out_prediction():
    from pipeline.analysis.annotators import annotator_quality

    # two voters agree that x > y > z; a third votes the other way every time
    rows = []
    for name, flip in (("u1", False), ("u2", False), ("u3", False), ("u4", True)):
        for a, b in (("x", "y"), ("y", "z"), ("x", "z")) * 10:
            rows.append({"annotator": name, "model_a": a, "model_b": b, "outcome": "b" if flip else "a",
                         "left": "a", "seconds": 30.0, "judge_outcome": "a"})
    rows[0]["outcome"] = "b"  # one dissent so the fit without u3 stays finite
    table = annotator_quality(pd.DataFrame(rows)).set_index("annotator")
    assert table.consensus_agreement["u4"] == 0.0 and table.judge_agreement["u4"] == 0.0
    assert table.consensus_agreement["u2"] == pytest.approx(1.0) and table.judge_agreement["u2"] == 1.0


# -- 3. anchored, regularised, reported --------------------------------------------------------------------------
def test_adding_a_seventh_model_leaves_the_anchored_strengths_within_their_intervals():
    rng = np.random.default_rng(21)
    six = draw_votes(rng, 4000)
    before = bradley_terry(six, rounds=100, anchor=MODELS[0]).table.set_index("model")
    assert before.strength[MODELS[0]] == INIT and before.note[MODELS[0]].startswith("anchor")
    # a seventh model, far stronger than the six, compared with each of them
    seventh = "org/model-new"
    n = 1500
    opponent = rng.integers(0, 6, n)
    p = 1 / (1 + BASE ** ((TRUE[opponent] - 600.0) / SCALE))
    won = rng.random(n) < p
    extra = pd.DataFrame({"model_a": np.array(MODELS)[opponent], "model_b": seventh,
                          "outcome": np.where(won, "b", "a")}).value_counts().rename("n").reset_index()
    after = bradley_terry(pd.concat([six, extra]), rounds=0, anchor=MODELS[0]).table.set_index("model")
    for m in MODELS:
        assert before.lower[m] - 1e-9 <= after.strength[m] <= before.upper[m] + 1e-9, m
    centred = bradley_terry(pd.concat([six, extra]), rounds=0).table.set_index("model")
    centred_before = bradley_terry(six, rounds=0).table.set_index("model")
    assert (centred.strength[MODELS] - centred_before.strength[MODELS]).abs().min() > 50  # the mean moved them


def test_style_controlled_fit_agrees_with_fastchats_contextual_bt():
    rng = np.random.default_rng(4)
    n = 1500
    i = rng.integers(0, 6, n)
    j = (i + rng.integers(1, 6, n)) % 6
    style_a = rng.integers(0, 40, (n, 4)) * np.array([25, 1, 1, 1])
    style_b = rng.integers(0, 40, (n, 4)) * np.array([25, 1, 1, 1])
    # every vote also with the two answers' styles swapped, so the features' mean is 0 and FastChat's centring and
    # our (uncentred) scaling are the same transformation
    i, j = np.concatenate([i, i]), np.concatenate([j, j])
    style_a, style_b = np.vstack([style_a, style_b]), np.vstack([style_b, style_a])
    features = fastchat.style_features(style_a, style_b)
    diff = (style_a - style_b) / (style_a + style_b + 1.0)
    logit = np.log(BASE) * (TRUE[i] - TRUE[j]) / SCALE + diff @ np.array([1.5, 0.3, 0.0, -0.4])
    u = rng.random(len(i))
    outcome = np.where(u < 0.1, 0.5, np.where(rng.random(len(i)) < 1 / (1 + np.exp(-logit)), 1.0, 0.0))
    reference = fastchat.fit_contextual_bt(np.column_stack([i, j]), features, outcome, MODELS)
    elo = fastchat.scale_and_offset(reference[:6], MODELS)
    rows = pd.DataFrame({"model_a": np.array(MODELS)[i], "model_b": np.array(MODELS)[j],
                         "outcome": pd.Series(outcome).map({1.0: "a", 0.0: "b", 0.5: "tie"}), "n": 1,
                         **{f: diff[:, k] for k, f in enumerate(arena_analysis.STYLE_FEATURES)}})
    ours = bradley_terry(rows, style=arena_analysis.STYLE_FEATURES, rounds=0)
    strengths = ours.table.set_index("model").strength.reindex(MODELS).to_numpy()
    np.testing.assert_allclose((strengths - INIT) / SCALE, (elo - INIT) / SCALE, atol=1e-3)  # natural units
    np.testing.assert_allclose(ours.style.coef.to_numpy(), reference[6:], atol=1e-3)
    assert not ours.warnings
    # and FastChat's penalty is what makes them agree: the unpenalised fit is ten times further from it
    free = bradley_terry(rows, style=arena_analysis.STYLE_FEATURES, rounds=0, reg=0.0)
    assert np.abs(free.style.coef.to_numpy() - reference[6:]).max() > \
        10 * np.abs(ours.style.coef.to_numpy() - reference[6:]).max()


def test_a_fit_that_did_not_converge_is_reported(crowd_db: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(arena_analysis, "MAX_ITER", 1)
    fit = bradley_terry(draw_votes(np.random.default_rng(1), 2000), rounds=20)
    assert any("point fit did not converge (at most 1 iterations)" in w for w in fit.warnings)
    assert any("2 of 2 bootstrap refit batches" in w for w in fit.warnings)
    result = CliRunner().invoke(app, ["arena", "leaderboard", "--db", str(crowd_db)])
    assert result.exit_code == 0, result.output
    assert "warning: the point fit did not converge" in result.output


def test_a_model_that_never_lost_says_so_and_gets_no_interval():
    rows = pd.DataFrame({"model_a": ["x", "x", "y", "y"], "model_b": ["y", "z", "z", "z"],
                         "outcome": ["a", "a", "a", "b"], "n": [6, 4, 5, 3]})
    fit = bradley_terry(rows, rounds=50)
    table = fit.table.set_index("model")
    assert table.note["x"].startswith("never lost") and table.note["y"] == ""
    assert math.isnan(table.lower["x"]) and math.isnan(table.upper["x"])
    assert table.lower["y"] <= table.strength["y"] <= table.upper["y"]
    assert any(w.startswith("x: never lost") for w in fit.warnings)


# -- 4. "both bad" --------------------------------------------------------------------------------------------------
def test_both_bad_rate_per_model_and_language_with_a_wilson_interval(small_db: Path, tmp_path: Path):
    a, b, c = MODELS[:3]
    lines = []
    for k in range(6):
        for lang in ("hi", "ta"):
            q = f"{lang}-{k:03d}"
            lines.append(f"ds,{q},{a},{b},{'both_bad' if k < 3 else 'a'},dr-rao,,,")  # a, b: both bad 3 of 6
            lines.append(f"ds,{q},{a},{c},{'both_bad' if k < 1 and lang == 'hi' else 'b'},dr-rao,,,")
    votes = write_csv(tmp_path / "votes.csv", lines)
    assert CliRunner().invoke(app, ["arena", "import-votes", str(votes), "--db", str(small_db)]).exit_code == 0
    per = arena.both_bad(small_db, "ds", by_language=True).set_index(["model", "language"])
    assert per.loc[(a, "hi"), ["votes", "both_bad"]].tolist() == [12, 4]
    assert per.loc[(c, "ta"), ["votes", "both_bad"]].tolist() == [6, 0]
    ci = binomtest(4, 12).proportion_ci(0.95, method="wilson")  # scipy's Wilson interval: an independent check
    assert per.both_bad_lower[(a, "hi")] == pytest.approx(ci.low) and per.both_bad_upper[(a, "hi")] == \
        pytest.approx(ci.high)
    result = CliRunner().invoke(app, ["arena", "leaderboard", "--db", str(small_db), "--language", "hi"])
    assert result.exit_code == 0, result.output
    printed = pd.read_csv(io.StringIO(result.stdout)).set_index("model")
    assert printed.both_bad_rate[b] == pytest.approx(3 / 6) and printed.both_bad_rate[a] == pytest.approx(4 / 12)


# -- 5. bad input and the round trip (issue 38) -------------------------------------------------------------------
@pytest.mark.parametrize(("command", "args"), [
    ("leaderboard", ["--dataset", "nope"]), ("leaderboard", ["--language", "xx"]),
    ("annotators", ["--dataset", "nope"]), ("annotators", ["--language", "xx"]),
    ("export-votes", ["--dataset", "nope"]),  # it has no --language
])
def test_unknown_dataset_or_language_is_one_line_and_a_failure(crowd_db: Path, tmp_path: Path, command: str,
                                                               args: list[str]):
    extra = ["--out", str(tmp_path / "x.csv")] if command == "export-votes" else []
    result = CliRunner().invoke(app, ["arena", command, "--db", str(crowd_db), *args, *extra])
    assert result.exit_code != 0 and isinstance(result.exception, UserError)  # __main__ prints it as one line
    message = str(result.exception)
    assert "\n" not in message and message.startswith(f"{args[0]}: '{args[1]}'"), message


@pytest.mark.parametrize("when", ["now", "today", "2026-13-01"])
def test_vote_times_that_are_not_iso_are_refused(small_db: Path, tmp_path: Path, when: str):
    a, b = MODELS[:2]
    votes = write_csv(tmp_path / "votes.csv", [f"ds,hi-000,{a},{b},a,dr-rao,,,{when}"])
    result = CliRunner().invoke(app, ["arena", "import-votes", str(votes), "--db", str(small_db)])
    assert result.exit_code == 1 and f"line 2: voted_at '{when}' is not an ISO date-time" in result.output


def test_export_then_import_gives_the_same_votes(small_db: Path, tmp_path: Path):
    a, b, c = MODELS[:3]
    votes = write_csv(tmp_path / "votes.csv", [
        f'ds,hi-000,{a},{b},a,"=cmd|\' /C calc\'!A0",{a},wrong;too long,2026-12-01T10:00:00',
        f"ds,hi-001,{a},{c},both_bad,-dr-minus,{c},,2026-12-01T10:01:00",
        f"ds,ta-002,{b},{c},tie,dr-rao,,,2026-12-01T10:02:00",
    ])
    assert CliRunner().invoke(app, ["arena", "import-votes", str(votes), "--db", str(small_db)]).exit_code == 0
    out = tmp_path / "exported.csv"
    assert CliRunner().invoke(app, ["arena", "export-votes", "--db", str(small_db), "--out", str(out)]).exit_code == 0
    assert "'=cmd" in out.read_text(encoding="utf-8")  # guarded on the way out
    fresh = build_db(tmp_path / "fresh.duckdb", queries=6)
    result = CliRunner().invoke(app, ["arena", "import-votes", str(out), "--db", str(fresh)])
    assert result.exit_code == 0, result.output
    pd.testing.assert_frame_equal(arena.export_votes(fresh), arena.export_votes(small_db))
    assert "=cmd|' /C calc'!A0" in set(arena.export_votes(fresh).annotator)


# -- the page ---------------------------------------------------------------------------------------------------
def test_the_arena_page_shows_voter_quality_anchor_both_bad_and_fit_warnings(crowd_db: Path,
                                                                             monkeypatch: pytest.MonkeyPatch):
    from streamlit.testing.v1 import AppTest

    from pages import _data as data

    monkeypatch.setenv("PARIKSHA_DB", str(crowd_db))
    monkeypatch.setattr(arena_analysis, "MAX_ITER", 1)  # every fit stops early: the page must say so
    data.clear_caches()
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=180)
    at.query_params.update({"ar_view": "Leaderboard"})
    at.run()
    at.switch_page("pages/12_arena.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("did not converge" in w.value for w in at.warning)
    board = at.dataframe[0].value
    assert {"both_bad_rate", "both_bad_lower", "both_bad_upper", "note"} <= set(board.columns)
    at.toggle(key="ar_quality").set_value(True).run()
    at.selectbox(key="ar_anchor").set_value(MODELS[2]).run()
    assert not at.exception, [e.value for e in at.exception]
    quality = next(f.value for f in at.dataframe if "consensus_agreement" in f.value.columns)
    assert set(quality.annotator[quality.flagged]) == {"dr-left", "dr-random"}
    at.toggle(key="ar_exclude").set_value(True).run()
    board = at.dataframe[0].value.set_index("model")
    assert board.strength[MODELS[2]] == INIT and board.votes.sum() == 2 * 900


def test_a_file_written_before_shown_at_reads_its_votes(small_db: Path, tmp_path: Path):
    import duckdb

    a, b = MODELS[:2]
    votes = write_csv(tmp_path / "votes.csv", [f"ds,hi-000,{a},{b},a,dr-rao,{a},,2026-12-01T10:00:00"])
    assert CliRunner().invoke(app, ["arena", "import-votes", str(votes), "--db", str(small_db)]).exit_code == 0
    with duckdb.connect(str(small_db)) as con:  # as schema 10 wrote it
        con.execute("ALTER TABLE arena_votes DROP COLUMN shown_at")
    assert arena.export_votes(small_db).shown_at.isna().all()
    assert arena.annotators(small_db, "ds").votes.tolist() == [1]


def test_cli_anchor(crowd_db: Path):
    result = CliRunner().invoke(app, ["arena", "leaderboard", "--db", str(crowd_db), "--anchor", MODELS[3],
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    board = pd.read_json(io.StringIO(result.stdout)).set_index("model")
    assert board.strength[MODELS[3]] == INIT and board.lower[MODELS[3]] == board.upper[MODELS[3]] == INIT
    assert board.note[MODELS[3]].startswith("anchor")
    unknown = CliRunner().invoke(app, ["arena", "leaderboard", "--db", str(crowd_db), "--anchor", "org/nope"])
    assert isinstance(unknown.exception, UserError) and str(unknown.exception).startswith("--anchor: 'org/nope'")
