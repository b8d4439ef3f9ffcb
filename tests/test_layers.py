"""The folders of ``pipeline/`` import one way: a folder imports only folders at its level or below (docs/design.md).
Read from the source by grimp (imports inside functions count; imports only for type checking do not)."""

from __future__ import annotations

import grimp

# Top to bottom. The flow: dataset → store → steps (with models, config) → read → labels → the run, the CLI.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli", "cli_arena", "__main__", "launch"),
    ("runner", "estimate", "playground"),
    ("labels",),  # people's labels, votes, review verdicts, the human-eval plan: written through the store, read
    ("read",),
    ("train",),
    ("steps",),
    ("models",),
    ("config",),
    ("store",),
    ("analysis",),
    ("dataset",),
    ("metrics", "prompts", "disagreement", "registry", "console", "errors", "style", "formats", "launch_status",
     "cli_options", "processes"),
)


def illegal(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    """(lower folder, higher folder) of every import chain from a folder up to one above it (grimp's layers)."""
    layers = [grimp.Layer(*folders, independent=False) for folders in LAYERS]
    return sorted((d.importer, d.imported) for d in graph.find_illegal_dependencies_for_layers(
        layers=layers, containers={"pipeline"}))


def build() -> grimp.ImportGraph:
    return grimp.build_graph("pipeline", exclude_type_checking_imports=True)


def test_every_folder_of_the_pipeline_has_a_layer() -> None:
    folders = {m.split(".")[1] for m in build().modules if m.count(".")}
    assert folders <= {f for layer in LAYERS for f in layer}


def test_no_folder_imports_a_folder_above_it() -> None:
    assert illegal(build()) == []


def test_an_upward_import_added_is_found() -> None:
    graph = build()
    graph.add_import(importer="pipeline.dataset.format", imported="pipeline.read.common", line_number=1,
                     line_contents="from pipeline.read.common import df")
    assert ("pipeline.dataset", "pipeline.read") in illegal(graph)
