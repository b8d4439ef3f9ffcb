"""``python -m pipeline arena ...``: the doctors' arena on the command line (docs/arena.md) — votes in and out,
Bradley–Terry leaderboards, voter quality. Each command is a thin shell over ``pipeline.labels.arena_votes`` and
``pipeline.read.arena``; bad input is one line (``UserError``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli_options import RESULTS_DB, CsvDatasetOption, DbOption
from pipeline.console import make_console
from pipeline.errors import UserError

console = make_console(stderr=True)
arena_app = typer.Typer(no_args_is_help=True, help="Doctors' pairwise votes and Bradley–Terry leaderboards.")


@arena_app.command("import-votes")
def arena_import_votes(
    csv: Annotated[Path, typer.Argument(help="CSV with dataset, query_id, model_a, model_b, winner (a/b/tie/both_bad), "
                                             "annotator; optional shown_left, tags (;-separated), shown_at, voted_at")],
    db: DbOption = RESULTS_DB,
    dataset: CsvDatasetOption = None,
    repeats: Annotated[str, typer.Option(help="a second vote of one annotator on one query and pair: first (the "
                                              "first counts, the rest listed), last, or refuse (a bad row)")] = "first",
):
    """Import pairwise votes given offline; a bad row is named by its line and nothing is written; repeats are
    listed."""
    from pipeline.labels.arena_votes import import_votes_command

    raise typer.Exit(import_votes_command(csv, db=db, dataset=dataset, repeats=repeats))


@arena_app.command("export-votes")
def arena_export_votes(
    out: Annotated[Path, typer.Option(help="CSV to write (import-votes' columns)")],
    db: DbOption = RESULTS_DB,
    dataset: Annotated[str | None, typer.Option(help="only this dataset's votes")] = None,
):
    """Write every stored vote as CSV (the columns import-votes reads)."""
    from pipeline.dataset.csv_cells import frame_to_csv
    from pipeline.read.arena import export_votes

    _arena_db(db, dataset)
    frame = export_votes(db, dataset)
    out.write_text(frame_to_csv(frame), encoding="utf-8")  # a cell a spreadsheet would run is neutralised
    console.print(f"wrote {len(frame)} vote(s) to {out}", highlight=False)


@arena_app.command("leaderboard")
def arena_leaderboard(
    db: DbOption = RESULTS_DB,
    dataset: Annotated[str | None, typer.Option(help="one dataset (default: all)")] = None,
    language: Annotated[str | None, typer.Option(help="one query language (default: all)")] = None,
    source: Annotated[str, typer.Option(help="doctors (votes, imported ones included) or judge (pairwise "
                                             "verdicts)")] = "doctors",
    judge: Annotated[str | None, typer.Option(help="the pairwise judge (source judge; default: the only one)")] = None,
    style_control: Annotated[bool, typer.Option("--style-control", help="length and markdown as covariates")] = False,
    anchor: Annotated[str | None, typer.Option(help="the model whose strength is fixed at 1000 (default: the "
                                                    "mean is 1000)")] = None,
    exclude_flagged: Annotated[bool, typer.Option("--exclude-flagged", help="leave out the annotators "
                                                  "`arena annotators` flags")] = False,
    max_votes: Annotated[int | None, typer.Option("--max-votes-per-annotator", min=1,
                                                  help="count only each annotator's first N votes")] = None,
    fmt: Annotated[str, typer.Option("--format", help="csv or json")] = "csv",
):
    """Print the Bradley–Terry leaderboard: model, strength, lower, upper (bootstrap 95 %), votes, the "both bad"
    rate with its 95 % interval (doctors), note; what the fit reported goes to stderr."""
    from pipeline.dataset.csv_cells import frame_to_csv
    from pipeline.read.arena import SOURCES, both_bad, fit, flagged, judges

    if source not in SOURCES:
        raise UserError(f"--source: {source!r} is not one of {', '.join(SOURCES)}")
    if fmt not in ("csv", "json"):
        raise UserError(f"--format: {fmt!r} is not csv or json")
    _arena_db(db, dataset, language)
    if source == "judge" and judge is None:
        known = judges(db)
        if len(known) != 1:
            raise UserError(f"--judge: give one of {', '.join(known)}" if known else
                            f"{db}: no pairwise verdicts (run the `pairwise` stage)")
        judge = known[0]
    if source != "doctors" and (exclude_flagged or max_votes is not None):
        raise UserError("--exclude-flagged / --max-votes-per-annotator: only for --source doctors")
    exclude = flagged(db, dataset, language) if exclude_flagged else ()
    board = fit(db, dataset, language, source, judge, style_control=style_control, anchor=anchor, exclude=exclude,
                cap=max_votes)
    if anchor is not None and board.anchor != anchor:
        raise UserError(f"--anchor: {anchor!r} has no comparisons here (models: "
                        f"{', '.join(sorted(board.table.model))})")
    if exclude:
        console.print(f"left out {len(exclude)} flagged annotator(s): {', '.join(exclude)}", highlight=False)
    for said in board.warnings:
        console.print(f"warning: {said}", highlight=False, soft_wrap=True)
    table = board.table[["model", "strength", "lower", "upper", "votes"]]
    if source == "doctors":
        bad = both_bad(db, dataset, language)[["model", "both_bad_rate", "both_bad_lower", "both_bad_upper"]]
        table = table.merge(bad, on="model", how="left")
    table = table.assign(note=board.table.note.to_numpy())
    sys.stdout.write(frame_to_csv(table) if fmt == "csv" else table.to_json(orient="records", indent=1) + "\n")


@arena_app.command("annotators")
def arena_annotators(
    db: DbOption = RESULTS_DB,
    dataset: Annotated[str | None, typer.Option(help="one dataset (default: all)")] = None,
    language: Annotated[str | None, typer.Option(help="one query language (default: all)")] = None,
    judge: Annotated[str | None, typer.Option(help="the pairwise judge to agree with (default: the first)")] = None,
    fmt: Annotated[str, typer.Option("--format", help="csv or json")] = "csv",
):
    """Print voter quality per annotator: votes, median seconds per vote, left-side share, agreement with the
    others' consensus and with the judge, flagged and why (docs/arena.md)."""
    from pipeline.dataset.csv_cells import frame_to_csv
    from pipeline.read.arena import annotators

    if fmt not in ("csv", "json"):
        raise UserError(f"--format: {fmt!r} is not csv or json")
    _arena_db(db, dataset, language)
    table = annotators(db, dataset, language, judge)
    sys.stdout.write(frame_to_csv(table) if fmt == "csv" else table.to_json(orient="records", indent=1) + "\n")


def _arena_db(db: Path, dataset: str | None = None, language: str | None = None) -> None:
    """A results database with the arena's tables (and ``dataset`` and ``language`` in it), else UserError."""
    from pipeline.read.arena import all_languages, datasets, has_arena
    from pipeline.store import require_database

    require_database(db)
    if not has_arena(db):
        raise UserError(f"{db}: no arena tables yet (vote on the Arena page, `arena import-votes`, or run the "
                        "`pairwise` stage)")
    if dataset is not None and dataset not in (known := datasets(db)):
        raise UserError(f"--dataset: {dataset!r} is not in {db} (it holds {', '.join(known) or 'no dataset'})")
    if language is not None and language not in (langs := all_languages(db, dataset)):
        raise UserError(f"--language: {language!r} is not a query language of {dataset or db} (they are "
                        f"{', '.join(langs) or 'none'})")
