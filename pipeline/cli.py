"""``python -m pipeline``: the command line of Pariksha Studio.

Over 450 lines: one typer app's command declarations (options and help), each a thin shell over one module; the
arena's commands are ``cli_arena.py``.

Each command is a thin shell over one module. Bad input raises ``UserError``, which reaches the
user as one line on stderr and exit code 1.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli_arena import arena_app
from pipeline.cli_options import RESULTS_DB, CsvDatasetOption, DbOption
from pipeline.console import make_console
from pipeline.errors import UserError
from pipeline.formats import InputLimits, PdfOptions, formats_described

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Pariksha Studio: evaluate RAG health chatbots across Indian languages.")
medcode_app = typer.Typer(no_args_is_help=True, help="Med-CoDE: label critiques with a teacher, export them, train "
                                                      "the critique classifier and the critic.")
app.add_typer(medcode_app, name="medcode")
app.add_typer(arena_app, name="arena")

console = make_console(stderr=True)


@app.command()
def validate(path: Annotated[Path, typer.Argument(help="dataset folder (kb + queries) or a queries file")]):
    """Validate a dataset (JSONL, CSV or Parquet); list every error with file, line and field."""
    from pipeline.dataset import validate_command

    raise typer.Exit(validate_command(path))


@app.command("tag-themes")
def tag_themes(
    path: Annotated[Path, typer.Argument(help="dataset folder or queries file")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="write tagged queries.jsonl here")] = None,
    force: Annotated[bool, typer.Option("--force", help="replace an existing --output file")] = False,
):
    """Tag language and themes automatically; report precision/recall where hand labels exist."""
    from pipeline.dataset.themes import tag_themes_command

    raise typer.Exit(tag_themes_command(path, output, force=force))


@app.command()
def run(
    config: Annotated[Path, typer.Option("--config", "-c", help="run configuration (YAML)")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file (overrides the config)")] = None,
    limit: Annotated[int | None, typer.Option(help="evaluate only the first N queries")] = None,
    models: Annotated[list[str] | None, typer.Option("--models", "-m", help="only these model ids")] = None,
    stages: Annotated[str | None, typer.Option(help="comma-separated subset of stages; "
                                                             "-NAME,… (as --stages=-medcode): all but these")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="list what would run and what is missing")] = False,
):
    """Run an evaluation: retrieve, generate, judge, score, into DuckDB (resumable)."""
    from pipeline.runner import run_command

    raise typer.Exit(run_command(config, db=db, limit=limit, models=models, stages=stages, dry_run=dry_run))


@app.command("serve-and-run")
def serve_and_run(
    serve: Annotated[str, typer.Option(help="the command line that serves the dashboard (`make serve`)")],
    then: Annotated[list[str] | None, typer.Option(help="command lines run in turn in the background once the "
                                                        "dashboard answers (`make eval`); `NAME: COMMAND` "
                                                        "names a phase")] = None,
    url: Annotated[str | None, typer.Option(help="the dashboard's address, polled until it answers")] = None,
    db: Annotated[Path | None, typer.Option(help="the results database: one launcher per database, its phases "
                                                 "recorded beside it for the dashboard")] = None,
    since: Annotated[float | None, typer.Option(help="when `make run` started (Unix time): its install phase")] = None,
):
    """Serve the dashboard, then run the evaluation in the background into the same database (`make run`);
    Ctrl-C, SIGTERM or SIGHUP stops both, a second `make run` resumes (or refuses while the first still serves)."""
    from pipeline.launch import serve_and_run as launch

    raise typer.Exit(launch(serve, then or [], url=url, db=db, since=since))


@app.command()
def status(db: DbOption = RESULTS_DB):
    """Show what a results database holds: runs, responses, scores, errors."""
    raise typer.Exit(status_command(db))


@app.command()
def upgrade(db: DbOption = RESULTS_DB):
    """Bring a database written by an older version up to this schema (the dashboard only reads)."""
    raise typer.Exit(upgrade_command(db))


@app.command()
def cluster(db: DbOption = RESULTS_DB):
    """Rewrite the per-query tables of a large database in query order and the by-model table (``model_items``) in
    model order, so the browser's lookups of one query and Compare runs' reads of two models read a few row groups (run
    again after large runs; minutes at millions of rows)."""
    raise typer.Exit(cluster_command(db))


@app.command()
def export(
    out: Annotated[Path, typer.Option(help="folder to write (must not exist, or be empty)")],
    db: DbOption = RESULTS_DB,
    fmt: Annotated[str, typer.Option("--format", help="parquet or csv")] = "parquet",
    tables: Annotated[str | None, typer.Option(help="comma-separated tables (default: all but llm_cache)")] = None,
    with_cache: Annotated[bool, typer.Option("--with-cache", help="also export llm_cache (every prompt)")] = False,
    force: Annotated[bool, typer.Option("--force", help="replace an earlier export in --out")] = False,
):
    """Export every results table, with its provenance, as Parquet or CSV files plus manifest.json and README.txt."""
    from rich.table import Table

    from pipeline.catalog import catalog
    from pipeline.read.export import export as export_tables
    from pipeline.read.export import parse_tables

    schema = catalog().schema  # the store's tables and every step's own
    manifest = export_tables(db, out, fmt=fmt, tables=parse_tables(tables, with_cache, schema), with_cache=with_cache,
                             force=force, schema=schema)
    table = Table(title=f"{db} -> {out}")
    for col in ("table", "rows", "file", "provenance added"):
        table.add_column(col, justify="right" if col == "rows" else "left", overflow="fold")
    for name, entry in manifest["tables"].items():
        table.add_row(name, f"{entry['rows']:,}", entry["file"], ", ".join(entry["provenance_columns"]))
    make_console().print(table)
    console.print(f"wrote {len(manifest['tables'])} {fmt} files, manifest.json and README.txt to {out}",
                  highlight=False)


# the label CSVs' import commands, alike but for their columns: command → (the CSV's columns, the command's help,
# its entry "module:function(csv, db=, dataset=)", imported when the command runs)
LABEL_IMPORTS = {
    "import-human-labels": (
        "CSV with query_id, model_id, metric, annotator, score",
        "Import human labels; bad rows are rejected with their line numbers.",
        "pipeline.labels.human_labels:import_human_labels_command"),
    "import-criterion-labels": (
        "CSV with query_id, criterion (text or 0-based index), annotator, met (true/false/1/0); optional dataset, "
        "model_id",
        "Import physician labels of rubric criteria (the grader's meta-evaluation); bad rows are rejected by line.",
        "pipeline.labels.criterion_labels:import_criterion_labels_command"),
    "import-critique-labels": (
        "CSV with query_id, model_id, annotator and label (None/Low/Moderate/High) and/or critique_accurate (yes/no); "
        "optional dataset, critique_by, critique_kind (critic/teacher), comment",
        "Import human checks of Med-CoDE critiques (disagreement label, critique accurate?); bad rows rejected by "
        "line.",
        "pipeline.labels.critique_labels:import_critique_labels_command"),
}


def label_import(columns: str, entry: str) -> Callable[..., None]:
    """The command of one label import: the CSV, --db and --dataset handed to ``entry``."""

    # the CSV's help as a default, not Annotated: typer resolves annotations in the module's globals
    def command(csv: Path = typer.Argument(..., help=columns), db: DbOption = RESULTS_DB,
                dataset: CsvDatasetOption = None) -> None:
        from pipeline.registry import load

        raise typer.Exit(load(entry)(csv, db=db, dataset=dataset))

    return command


for _name, (_columns, _help, _entry) in LABEL_IMPORTS.items():
    app.command(_name, help=_help)(label_import(_columns, _entry))


@app.command("import-qa")
def import_qa(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="medqa, medmcqa, pubmedqa, mmlu or healthbench")],
    file: Annotated[Path, typer.Argument(help="the public file, in its published layout")],
    out_dir: Annotated[Path, typer.Argument(help="dataset folder to write (queries.jsonl; kb.jsonl with --contexts)")],
    contexts: Annotated[bool, typer.Option("--contexts", help="PubMedQA: keep the abstracts as KB chunks")] = False,
    cop_base: Annotated[int, typer.Option(help="MedMCQA: 1 = original files (cop 1-4), 0 = Hugging Face copy")] = 1,
    limit: Annotated[int | None, typer.Option(help="import only the first N items")] = None,
    force: Annotated[bool, typer.Option("--force", help="replace the queries.jsonl/kb.jsonl OUT_DIR holds")] = False,
):
    """Import a public medical QA set (MedQA, MedMCQA, PubMedQA, MMLU, HealthBench) as a dataset folder."""
    from pipeline.dataset.importers import import_qa_command

    raise typer.Exit(import_qa_command(fmt, file, out_dir, contexts=contexts, cop_base=cop_base, limit=limit,
                                       force=force))


@app.command("ingest-kb")
def ingest_kb(
    paths: Annotated[list[Path], typer.Argument(help=f"documents ({formats_described()}) or folders of them; "
                                                     "CSV/JSONL of approved Q&A with --kind update")],
    out: Annotated[Path, typer.Option(help="dataset folder to write kb.jsonl and ingest_report.json into")],
    max_tokens: Annotated[int, typer.Option(help="most tokens in a chunk (the paper: 1,000)")] = 1000,
    overlap: Annotated[int, typer.Option(help="tokens repeated between neighbouring chunks")] = 0,
    kind: Annotated[str, typer.Option(help="raw (curated documents) or update (added later)")] = "raw",
    updated: Annotated[str | None, typer.Option(help="date update chunks were added (YYYY-MM-DD)")] = None,
    question_col: Annotated[str, typer.Option(help="Q&A table: the question column")] = "question",
    answer_col: Annotated[str, typer.Option(help="Q&A table: the approved answer column")] = "answer",
    date_col: Annotated[str, typer.Option(help="Q&A table: the date the answer was approved")] = "approved_on",
    max_file_mb: Annotated[float, typer.Option(help="refuse a file larger than this (MB)")] = InputLimits.max_file_mb,
    max_inflated_mb: Annotated[float, typer.Option(help="refuse an archive (DOCX) inflating beyond this (MB) in all"
                                                   )] = InputLimits.max_inflated_mb,
    max_ratio: Annotated[float, typer.Option(help="refuse an archive member inflating more times than this"
                                             )] = InputLimits.max_ratio,
    max_page_content_mb: Annotated[float, typer.Option(help="refuse a PDF page whose content inflates beyond this (MB)"
                                                       )] = InputLimits.max_page_content_mb,
    max_page_mpx: Annotated[float, typer.Option(help="render a PDF page for OCR within this many megapixels (lower "
                                                     "resolution if larger); refuse a page drawing a larger image"
                                                )] = InputLimits.max_page_mpx,
    max_ocr_pages: Annotated[int | None, typer.Option(help="OCR at most this many image-only pages of each PDF "
                                                           "(the others are listed in the report)")] = None,
    max_memory_mb: Annotated[float, typer.Option(help="stop reading a file when the ingest has added more memory "
                                                      "than this (MB) to its process, checked at each page and file"
                                                 )] = InputLimits.max_memory_mb,
    keep_referenced: Annotated[bool, typer.Option("--keep-referenced", help="keep a changed file's old chunks that "
                                                  "queries cite in kb_refs (else: refuse)")] = False,
    keep_missing: Annotated[bool, typer.Option("--keep-missing", help="keep the chunks of files no longer in a "
                                               "re-ingested folder (else: retired)")] = False,
    ocr_langs: Annotated[str | None, typer.Option(help="Tesseract languages for image-only PDF pages, e.g. hin+eng "
                                                       "(default: the script Tesseract detects on each page)")] = None,
    skip_unreadable: Annotated[bool, typer.Option(help="list unreadable files and ingest the rest (exit code 1)")]
    = False,
    force: Annotated[bool, typer.Option("--force", help="replace a kb.jsonl/ingest_report.json in --out that "
                                                        "ingest-kb did not write")] = False,
):
    """Turn a team's documents (and doctor-approved Q&A) into KB chunks with provenance, in a dataset folder."""
    from datetime import date

    from pipeline.dataset.ingest import ingest_command

    try:
        day = date.fromisoformat(updated) if updated else None
    except ValueError:
        raise UserError(f"--updated {updated!r}: use an ISO date, YYYY-MM-DD") from None
    options = [PdfOptions(ocr_langs=ocr_langs)]  # each format's reading options, checked as made: before any file
    raise typer.Exit(ingest_command(paths, out, max_tokens=max_tokens, overlap=overlap, kind=kind, updated=day,
                                    qa_cols=(question_col, answer_col, date_col), keep_referenced=keep_referenced,
                                    limits=InputLimits(max_file_mb, max_inflated_mb, max_ratio, max_page_content_mb,
                                                       max_page_mpx, max_ocr_pages, max_memory_mb),
                                    options=options, skip_unreadable=skip_unreadable, force=force,
                                    keep_missing=keep_missing))


@app.command("curate-queries")
def curate_queries(
    log: Annotated[Path, typer.Argument(help="chatbot log, CSV or JSONL, one message a row")],
    out: Annotated[Path, typer.Option(help="dataset folder to write queries.jsonl and excluded.jsonl into")],
    text_col: Annotated[str, typer.Option(help="the message column")] = "message",
    time_col: Annotated[str, typer.Option(help="the timestamp column (gives asked_on)")] = "timestamp",
    answer_col: Annotated[str, typer.Option(help="the bot's answer column")] = "answer",
    approved_col: Annotated[str, typer.Option(help="yes/no, true/false or 1/0: the doctor approved the answer "
                                                   "unchanged (it becomes the ground truth)")] = "approved",
    pii: Annotated[str, typer.Option(help="exclude (the paper's rule) or mask messages with identifiers")] = "exclude",
    force: Annotated[bool, typer.Option("--force", help="replace files in --out that curate-queries did not "
                                                        "write")] = False,
    workers: Annotated[int | None, typer.Option(help="processes examining the messages (identifiers, themes); "
                                                     "default: the CPUs; 1: in this process")] = None,
):
    """Turn a chatbot log into queries with the paper's exclusions (duplicates, identifiers, not health)."""
    from pipeline.dataset.curate import curate_command

    raise typer.Exit(curate_command(log, out, text_col=text_col, time_col=time_col, answer_col=answer_col,
                                    approved_col=approved_col, pii=pii, force=force, workers=workers))


@app.command()
def variants(
    dataset: Annotated[Path, typer.Argument(help="dataset folder (or queries file) whose queries to restate")],
    out: Annotated[Path, typer.Option(help="new dataset folder: the originals and their variants")],
    kinds: Annotated[str, typer.Option(help="comma-separated: romanized, native, misspelled, code-mixed, english; "
                                            "written by --model: romanized-llm, native-llm, code-mixed-llm")]
    = "romanized,native,misspelled,code-mixed,english",
    seed: Annotated[int, typer.Option(help="seed of the misspellings and of a partial code-mixing")] = 0,
    misspell_words: Annotated[float, typer.Option(help="misspelled: share of a query's words mistyped")] = 0.3,
    misspell_chars: Annotated[float, typer.Option(help="misspelled: each letter's chance to be the mistyped one")]
    = 0.2,
    code_mix_rate: Annotated[float, typer.Option(help="code-mixed: share of the lexicon's words swapped")] = 1.0,
    model: Annotated[str | None, typer.Option(help="provider/name: the model that writes the -llm kinds (and "
                                                   "translates them back to check their meaning)")] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="run configuration giving --model's options "
                                                                       "(base_url, path, …) and its db")] = None,
    db: Annotated[Path | None, typer.Option(help="results DuckDB whose stored query translations give `english` "
                                                 "variants (and the -llm kinds' English of the original) of queries "
                                                 "without query_en; the -llm kinds' calls are cached in it "
                                                 "(default: the config's db, else data/results.duckdb)")] = None,
    force: Annotated[bool, typer.Option("--force", help="replace files in --out that `variants` did not write")]
    = False,
):
    """Make variants of every query (romanized, native, misspelled, code-mixed, English; or written by a model,
    checked by script and back-translation) as a new dataset."""
    from pipeline.dataset.variants import WRITTEN, Settings, parse_kinds, variants_command

    chosen = parse_kinds(kinds)
    for name, rate in (("--misspell-words", misspell_words), ("--misspell-chars", misspell_chars),
                       ("--code-mix-rate", code_mix_rate)):
        if not 0 < rate <= 1:
            raise UserError(f"{name} {rate}: give a share in (0, 1]")
    writer = None
    if config is not None and model is None:
        raise UserError(f"--config {config}: gives --model's options; give --model too")
    if model is not None:
        from pipeline.catalog import catalog
        from pipeline.config import ModelConfig
        from pipeline.rewrite import rewriter

        if not any(k in WRITTEN for k in chosen):
            raise UserError(f"--model {model}: writes only the kinds {', '.join(WRITTEN)}; add one to --kinds")
        run_config = catalog().load_config(config) if config is not None else None
        try:
            model_config = run_config.model_config_for(model) if run_config else ModelConfig(id=model)
        except ValueError as exc:
            raise UserError(f"--model {model}: give provider/name, e.g. llamacpp/smollm2-135m-instruct") from exc
        db = db or (Path(run_config.db) if run_config else RESULTS_DB)
        writer = rewriter(model_config, db, echo=console.print)
    translations = None
    if db is not None and "english" in chosen:
        from pipeline.dataset import load_dataset
        from pipeline.read.robustness import stored_query_translations

        translations = stored_query_translations(db, load_dataset(dataset))
    variants_command(dataset, chosen, out, Settings(seed, misspell_words, misspell_chars, code_mix_rate),
                     translations, force=force, echo=console.print, writer=writer)


@app.command()
def robustness(
    db: DbOption = RESULTS_DB,
    dataset: Annotated[str | None, typer.Option(help="dataset (default: the one with the most responses)")] = None,
    judge: Annotated[str | None, typer.Option(help="judge (default: the latest run's)")] = None,
    out: Annotated[Path | None, typer.Option(help="write the full table here (.csv or .parquet)")] = None,
):
    """Each model's paired change per language and kind of generated variant, and models ranked by their worst
    kind (the Robustness page's tables)."""
    from rich.table import Table

    from pipeline.dataset.csv_cells import frame_to_csv
    from pipeline.read.robustness import ALL, robustness_report

    if out is not None and out.suffix not in (".csv", ".parquet"):
        raise UserError(f"--out {out}: give a .csv or .parquet file")
    name, judge_id, changes, board = robustness_report(db, dataset, judge)
    if changes.empty:
        raise UserError(f"{db}: dataset {name!r} has no generated variant answered and judged on both sides "
                        "(make them with `pipeline variants`, then run the new dataset)")
    score = board.attrs.get("score", "AGG")
    table = Table(title=f"{name}: models by their worst kind ({score} change, judge {judge_id})")
    for col in ("rank", "model", "worst kind", "change", "95% CI", "mean over kinds", "pairs"):
        table.add_column(col)
    for r in board.itertuples():
        table.add_row(str(r.rank), r.model_id, r.worst_kind, f"{r.worst_change:+.2f}",
                      f"[{r.worst_lo:+.2f}, {r.worst_hi:+.2f}]", f"{r.mean_change:+.2f}", str(r.pairs))
    every = Table(title="per kind, all languages (change variant - original; 95% paired bootstrap CI)")
    for col in ("model", "kind", "pairs", "AGG", "FC", "rubric", "correct -> not"):
        every.add_column(col)
    for r in changes[changes.language == ALL].itertuples():
        cells = [f"{getattr(r, f'{s}_change'):+.2f} [{getattr(r, f'{s}_lo'):+.2f}, {getattr(r, f'{s}_hi'):+.2f}]"
                 if getattr(r, f"{s}_change") == getattr(r, f"{s}_change") else "-" for s in ("AGG", "FC", "rubric")]
        flip = "-" if r.flipped_correct != r.flipped_correct else f"{r.flipped_correct:.0%}"
        every.add_row(r.model_id, r.kind, str(r.pairs), *cells, flip)
    make_console().print(table, every)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.suffix == ".csv":
            out.write_text(frame_to_csv(changes), encoding="utf-8")
        else:
            changes.to_parquet(out, index=False)
        console.print(f"wrote {len(changes)} rows to {out}", highlight=False)


human_eval_app = typer.Typer(no_args_is_help=True, help="Human evaluation designed as Health-Pariksha's (3.5.2).")
app.add_typer(human_eval_app, name="human-eval")


@human_eval_app.command("plan")
def human_eval_plan(
    models: Annotated[str, typer.Option(help="comma-separated model ids (the paper: 5 models)")],
    db: DbOption = RESULTS_DB,
    english: Annotated[int, typer.Option(help="English queries to sample (stratified by theme)")] = 100,
    metric: Annotated[str, typer.Option(help="the metric annotators label (the paper: SS)")] = "SS",
    annotators: Annotated[int, typer.Option(help="annotators labelling every item")] = 1,
    seed: Annotated[int, typer.Option(help="sampling seed")] = 0,
    dataset: Annotated[str | None, typer.Option(help="dataset (when the database holds several)")] = None,
    out: Annotated[Path | None, typer.Option(help="CSV for offline annotators")] = None,
):
    """Draw every Indic query plus a stratified English sample for the chosen models; queue and CSV."""
    from pipeline.labels.human_eval import plan_command

    raise typer.Exit(plan_command(db=db, models=[m.strip() for m in models.split(",") if m.strip()],
                                  english=english, metric=metric, annotators=annotators, seed=seed,
                                  dataset=dataset, out=out))


@medcode_app.command("train-classifier")
def train_classifier(
    csv: Annotated[Path, typer.Argument(help="CSV with critique,label (None/Low/Moderate/High), e.g. "
                                             "data/medcode-critiques/critiques.csv")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="checkpoint folder [default: "
                                                                      ".cache/medcode-classifier, the config's "
                                                                      "'trained' classifier]")] = None,
    base_model: Annotated[str, typer.Option(help="'minilm' (bundled all-MiniLM-L6-v2, a 6-layer BERT), 'tiny' "
                                                  "(random config, for tests) or a local folder, e.g. BERT-base "
                                                  "(the paper's)")] = "minilm",
    epochs: Annotated[int, typer.Option(help="the paper: 25")] = 8,
    learning_rate: Annotated[float, typer.Option(help="the paper: 1e-3 (with --freeze-encoder)")] = 1e-4,
    batch_size: Annotated[int, typer.Option(help="the paper: 16")] = 16,
    max_length: Annotated[int, typer.Option(help="tokens per critique; the paper: 208")] = 208,
    dropout: Annotated[float, typer.Option(help="classifier dropout; the paper: 0.3")] = 0.3,
    class_weights: Annotated[str, typer.Option(help="'balanced' (sklearn, on the training split), 'paper' "
                                                     "([5.96, 1.34, 0.83, 0.52]) or four numbers, in None,Low,"
                                                     "Moderate,High order")] = "balanced",
    freeze_encoder: Annotated[bool, typer.Option("--freeze-encoder/--fine-tune-encoder",
                                                 help="train only the pooler and classification layer")] = False,
    seed: Annotated[int, typer.Option(help="seed of the split, the initialisation and the batch order")] = 0,
    patience: Annotated[int, typer.Option(help="stop after this many epochs without a better validation macro-F1 "
                                               "(0: run every epoch)")] = 2,
    if_changed: Annotated[bool, typer.Option("--if-changed", help="do nothing when the folder's model card is of "
                                                                  "this CSV and these settings")] = False,
):
    """Fine-tune the Med-CoDE critique classifier (§4.2): stratified 70/15/15 split, best validation epoch,
    test-split accuracy, macro-F1 and confusion matrix in the model card medcode.json."""
    from pipeline.train.classifier import ClassifierSettings, parse_class_weights, train_classifier_command

    settings = ClassifierSettings(base_model=base_model, epochs=epochs, learning_rate=learning_rate,
                                  batch_size=batch_size, max_length=max_length, dropout=dropout,
                                  class_weights=parse_class_weights(class_weights), freeze_encoder=freeze_encoder,
                                  seed=seed, patience=patience)
    from pipeline.steps.medcode import TRAINED_CLASSIFIER

    raise typer.Exit(train_classifier_command(csv, output=output or TRAINED_CLASSIFIER, settings=settings,
                                              if_changed=if_changed))


@medcode_app.command("train-critic")
def train_critic(
    csv: Annotated[Path, typer.Argument(help="CSV with question,ground_truth,response,critique (label optional)")],
    output: Annotated[Path, typer.Option("--output", "-o", help="adapter folder")],
    base_model: Annotated[str, typer.Option(help="a local causal-LM folder (the paper: Phi-3-mini) or 'tiny' "
                                                  "(random 2-layer Llama, for tests)")],
    epochs: Annotated[int, typer.Option(help="the paper: 5")] = 5,
    batch_size: Annotated[int, typer.Option(help="effective batch (gradient accumulation); the paper: 128")] = 128,
    micro_batch_size: Annotated[int, typer.Option(help="rows per forward pass")] = 4,
    learning_rate: Annotated[float, typer.Option(help="the paper: 1.41e-5")] = 1.41e-5,
    lora_r: Annotated[int, typer.Option(help="LoRA rank; the paper: 16")] = 16,
    lora_alpha: Annotated[int, typer.Option(help="LoRA alpha (not in the paper)")] = 32,
    lora_dropout: Annotated[float, typer.Option()] = 0.05,
    target_modules: Annotated[str, typer.Option(help="'all-linear' or comma-separated module names")] = "all-linear",
    max_length: Annotated[int, typer.Option(help="longer prompt+critique rows are skipped")] = 1024,
    max_steps: Annotated[int | None, typer.Option(help="stop after N optimizer steps")] = None,
    seed: Annotated[int, typer.Option()] = 0,
):
    """LoRA-fine-tune the Med-CoDE critic (§4.1) on labelled critiques; writes a PEFT adapter vLLM can serve."""
    from pipeline.train.critic import CriticSettings, train_critic_command

    modules = target_modules if target_modules == "all-linear" else tuple(
        m.strip() for m in target_modules.split(",") if m.strip())
    settings = CriticSettings(base_model=base_model, epochs=epochs, batch_size=batch_size,
                              micro_batch_size=micro_batch_size, learning_rate=learning_rate, lora_r=lora_r,
                              lora_alpha=lora_alpha, lora_dropout=lora_dropout, target_modules=modules,
                              max_length=max_length, max_steps=max_steps, seed=seed)
    raise typer.Exit(train_critic_command(csv, output=output, settings=settings))


@medcode_app.command("label")
def medcode_label(
    config: Annotated[Path, typer.Option("--config", "-c", help="run configuration with `medcode: {teacher: MODEL}`")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file (overrides the config)")] = None,
    limit: Annotated[int | None, typer.Option(help="label the responses to the first N queries only")] = None,
):
    """The paper's GPT-4 step (§3.1): the teacher writes a critique and a None/Low/Moderate/High label for every
    stored response of the config's models, into labelled_critiques (unparsed labels kept as NULL, counted)."""
    from pipeline.catalog import catalog
    from pipeline.runner import run
    from pipeline.store import Store

    cfg = catalog().load_config(config, db=str(db) if db else None, limit=limit)
    run(cfg, stages="medcode-label", console=console)
    teacher = cfg.get("medcode.teacher").id
    total, unparsed = Store(cfg.db).fetch("SELECT count(*), count(*) FILTER (WHERE label IS NULL) FROM "
                                          "labelled_critiques WHERE source = ?", [teacher])[0]
    console.print(f"labelled_critiques in {cfg.db}: {total} by {teacher}, {unparsed} with an unparsed label "
                  "(kept as NULL, never exported); export them with `python -m pipeline medcode export-critiques`",
                  highlight=False)


@medcode_app.command("export-critiques")
def medcode_export_critiques(
    out: Annotated[Path, typer.Option(help="CSV to write (the training CSV of train-classifier and train-critic)")],
    db: DbOption = RESULTS_DB,
    with_bundled: Annotated[bool, typer.Option("--with-bundled", help="also the bundled data/medcode-critiques "
                                                                       "rows")] = False,
    source: Annotated[str | None, typer.Option(help="only critiques of this teacher (or annotator)")] = None,
):
    """Write labelled critiques as item_id,kind,question,ground_truth,response,critique,label,source; unparsed
    labels, empty critiques and critiques of since-regenerated responses are left out and counted."""
    from pipeline.read.medcode_checks import export_critiques

    counts = export_critiques(db, out, with_bundled=with_bundled, source=source)
    console.print(f"wrote {counts['exported'] + counts['bundled']} rows to {out} ({counts['exported']} of "
                  f"{counts['labelled']} labelled critiques in {db}, {counts['bundled']} bundled); left out: "
                  f"{counts['unparsed']} unparsed labels, {counts['empty']} empty critiques, {counts['stale']} of "
                  "regenerated responses", highlight=False)


def status_command(db: Path) -> int:
    """``status``: the runs, per-model counts and the rows of every stage's table (the catalog's) of a results
    database (``pipeline.read.home``); read-only."""
    from rich.table import Table

    from pipeline.catalog import catalog
    from pipeline.read.common import outdated
    from pipeline.read.home import database_status, kb_notes, stage_tables
    from pipeline.store import require_database

    require_database(db)
    out = make_console()
    notice = outdated(db)
    if notice:
        out.print(notice, highlight=False, soft_wrap=True)
    runs, models = database_status(db)
    runs = runs[["run_id", "name", "status", "started", "seconds", "backend_calls", "cache_hits", "errors"]]
    for title, frame in ((f"runs in {db}", runs.rename(columns={"backend_calls": "calls", "cache_hits": "cached"})),
                         ("responses and scores per model", models),
                         ("rows per stage's table", stage_tables(db, catalog().writers))):
        table = Table(title=title)
        for col in frame.columns:
            table.add_column(str(col), overflow="fold")
        for row in frame.itertuples(index=False):
            table.add_row(*["" if v is None else str(v) for v in row])
        out.print(table)
    for note in kb_notes(models):
        out.print(f"[yellow]{note}[/]", highlight=False, soft_wrap=True)
    return 0


def cluster_command(db: Path) -> int:
    """``cluster``: ``Store(db).cluster()`` with a progress line per table."""
    import time

    from pipeline.store import Store, require_database

    require_database(db)
    out = make_console()
    start = time.perf_counter()
    with out.status("clustering") as status:
        done = Store(db).cluster(lambda table, rows: status.update(f"clustering {table} ({rows:,} rows)"))
    for table, rows in done.items():
        out.print(f"  {table}: {rows:,} rows in key order", highlight=False)
    out.print(f"{db}: {len(done)} table{'s' * (len(done) != 1)} clustered in {time.perf_counter() - start:.0f} s"
              + ("" if done else " (none spans more than one row group)"), highlight=False)
    return 0


def upgrade_command(db: Path) -> int:
    """``upgrade``: ``Store(db).upgrade()`` with the catalog's schema — add what an older version's file lacks (a
    step's own table included), refresh derived tables."""
    from pipeline.catalog import catalog
    from pipeline.store import SCHEMA_VERSION, Store, require_database

    require_database(db)
    done = Store(db, catalog().schema).upgrade()
    out = make_console()
    for line in done:
        out.print(f"  {line}", highlight=False)
    out.print(f"{db}: schema {SCHEMA_VERSION}" + (" (upgraded)" if done else " (already current)"), highlight=False)
    return 0




def main() -> None:
    try:
        app()
    except UserError as exc:
        console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]; finished batches are saved, rerun to resume")
        sys.exit(130)
    except OSError as exc:  # a read-only or full disk: one line, not a traceback
        from pipeline.dataset.writing import disk_error

        line = disk_error(exc, Path(exc.filename or "."))
        if line is None:
            raise
        console.print(f"[bold red]error:[/] {line}", highlight=False, soft_wrap=True)
        sys.exit(1)
