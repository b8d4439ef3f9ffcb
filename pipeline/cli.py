"""``python -m pipeline``: the command line of Pariksha Studio.

Each command is a thin shell over one module. Bad input raises ``UserError``, which reaches the
user as one line on stderr and exit code 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from pipeline.errors import UserError

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Pariksha Studio: evaluate RAG health chatbots across Indian languages.")
medcode_app = typer.Typer(no_args_is_help=True, help="Med-CoDE critique classifier tools.")
app.add_typer(medcode_app, name="medcode")

console = Console(stderr=True)


@app.command()
def validate(path: Annotated[Path, typer.Argument(help="dataset folder (kb + queries) or a queries file")]):
    """Validate a dataset (JSONL, CSV or Parquet); list every error with file, line and field."""
    from pipeline.dataset import validate_command

    raise typer.Exit(validate_command(path))


@app.command("tag-themes")
def tag_themes(
    path: Annotated[Path, typer.Argument(help="dataset folder or queries file")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="write tagged queries.jsonl here")] = None,
):
    """Tag language and themes automatically; report precision/recall where hand labels exist."""
    from pipeline.dataset.themes import tag_themes_command

    raise typer.Exit(tag_themes_command(path, output))


@app.command()
def run(
    config: Annotated[Path, typer.Option("--config", "-c", help="run configuration (YAML)")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file (overrides the config)")] = None,
    limit: Annotated[int | None, typer.Option(help="evaluate only the first N queries")] = None,
    models: Annotated[list[str] | None, typer.Option("--models", "-m", help="only these model ids")] = None,
    stages: Annotated[str | None, typer.Option(help="comma-separated subset of stages")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="list what would run and what is missing")] = False,
):
    """Run an evaluation: retrieve, generate, judge, score, into DuckDB (resumable)."""
    from pipeline.runner import run_command

    raise typer.Exit(run_command(config, db=db, limit=limit, models=models, stages=stages, dry_run=dry_run))


@app.command()
def status(db: Annotated[Path, typer.Option(help="DuckDB file")] = Path("data/results.duckdb")):
    """Show what a results database holds: runs, responses, scores, errors."""
    from pipeline.runner import status_command

    raise typer.Exit(status_command(db))


@app.command("import-human-labels")
def import_human_labels(
    csv: Annotated[Path, typer.Argument(help="CSV with query_id, model_id, metric, annotator, score")],
    db: Annotated[Path, typer.Option(help="DuckDB file")] = Path("data/results.duckdb"),
    dataset: Annotated[str | None, typer.Option(help="dataset name when the CSV has no dataset column")] = None,
):
    """Import human labels; bad rows are rejected with their line numbers."""
    from pipeline.dataset.human_labels import import_human_labels_command

    raise typer.Exit(import_human_labels_command(csv, db=db, dataset=dataset))


@medcode_app.command("train-classifier")
def train_classifier(
    csv: Annotated[Path, typer.Argument(help="CSV with critique,label (None/Low/Moderate/High)")],
    output: Annotated[Path, typer.Option("--output", "-o", help="checkpoint folder")] = Path("models/medcode-clf"),
    base_model: Annotated[str, typer.Option(help="'minilm' (bundled BERT-style encoder), 'tiny' (random "
                                                  "config, for tests) or a local transformers path")] = "minilm",
    epochs: Annotated[int, typer.Option()] = 25,
    learning_rate: Annotated[float, typer.Option()] = 1e-3,
    batch_size: Annotated[int, typer.Option()] = 16,
    max_length: Annotated[int, typer.Option()] = 208,
    dropout: Annotated[float, typer.Option()] = 0.3,
):
    """Fine-tune a BERT-style critique classifier (Med-CoDE §4.2 hyper-parameters as defaults)."""
    from pipeline.train.classifier import train_classifier_command

    raise typer.Exit(train_classifier_command(
        csv, output=output, base_model=base_model, epochs=epochs, learning_rate=learning_rate,
        batch_size=batch_size, max_length=max_length, dropout=dropout,
    ))


def main() -> None:
    try:
        app()
    except UserError as exc:
        console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]; finished batches are saved, rerun to resume")
        sys.exit(130)
