"""The folders of ``pipeline/`` import one way: a folder imports only folders at its level or below (docs/design.md).
Read from the source by grimp (imports inside functions count; imports only for type checking do not), with the
imports made by string added: every string constant that names a module (``importlib.import_module("pipeline.steps")``,
a registry entry ``"pipeline.dataset.pdf:read_pdf"``) is an edge from the module holding it to the module it names,
and no module of ``pipeline`` may name the dashboard's modules (``pages.…``) at all."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp

# Top to bottom. The flow: dataset → store → steps (with models, config) → read → labels → the run, the CLI.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli", "cli_arena", "__main__", "launch"),
    # the catalog: the composition root the run and the CLI share; rewrite: variants written by a model
    ("catalog", "runner", "estimate", "playground", "rewrite"),
    ("labels",),  # people's labels, votes, review verdicts, the human-eval plan: written through the store, read
    ("read",),
    ("train",),
    ("steps",),
    ("models",),
    ("config",),
    ("store",),
    ("analysis",),
    ("dataset", "formats"),  # formats: ingest-kb's format → reader map, whose entries name the dataset's readers
    ("metrics", "prompts", "disagreement", "registry", "console", "errors", "style", "launch_status", "cli_options",
     "processes"),
)
REPO = Path(__file__).resolve().parent.parent
NAMED_MODULE = re.compile(r"((?:pipeline|pages)(?:\.\w+)+)(?::\w+)?")  # "package.module" or "package.module:obj"
ABOVE_PIPELINE = ("pages",)  # the dashboard's modules: they import the pipeline, never the other way


def illegal(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    """(lower folder, higher folder) of every import chain from a folder up to one above it (grimp's layers)."""
    layers = [grimp.Layer(*folders, independent=False) for folders in LAYERS]
    return sorted((d.importer, d.imported) for d in graph.find_illegal_dependencies_for_layers(
        layers=layers, containers={"pipeline"}))


def named_modules(source: str) -> set[str]:
    """The modules that the string constants of ``source`` name whole (``"pipeline.steps"``,
    ``"pipeline.dataset.pdf:read_pdf"`` → ``pipeline.dataset.pdf``); docstrings and messages name none."""
    return {m.group(1) for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and (m := NAMED_MODULE.fullmatch(node.value))}


def add_string_imports(graph: grimp.ImportGraph, sources: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """Add to ``graph`` an import for every module a module of ``pipeline`` names by string (``sources``: module →
    its text, read from the files when None); return (module, named) for each name of the dashboard."""
    dashboard = []
    for module in sorted(graph.modules):
        if sources is not None:
            text = sources.get(module)
        else:
            path = REPO / Path(*module.split("."))
            file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
            text = file.read_text(encoding="utf-8") if file.is_file() else None
        for named in sorted(named_modules(text or "")):
            if named.split(".")[0] in ABOVE_PIPELINE:
                dashboard.append((module, named))
            elif named in graph.modules and named != module:
                graph.add_import(importer=module, imported=named, line_number=1, line_contents=f"{named!r} by string")
    return dashboard


def build() -> grimp.ImportGraph:
    graph = grimp.build_graph("pipeline", exclude_type_checking_imports=True)
    assert add_string_imports(graph) == []  # no module of the pipeline names the dashboard
    return graph


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


def test_an_upward_import_by_string_is_found() -> None:
    """The control: the config reaching the steps through importlib (as it once did), a reader registered below its
    module, and the pipeline naming a page are each caught."""
    graph = grimp.build_graph("pipeline", exclude_type_checking_imports=True)
    planted = {
        "pipeline.config": 'import importlib\nSTEPS = importlib.import_module("pipeline.steps").STEPS\n',
        "pipeline.registry": 'ENTRIES = {"pdf": "pipeline.dataset.pdf:read_pdf"}\n',
        "pipeline.read.common": 'import importlib\nDATA = importlib.import_module("pages._data")\n',
    }
    assert add_string_imports(graph, planted) == [("pipeline.read.common", "pages._data")]
    found = illegal(graph)
    assert ("pipeline.config", "pipeline.steps") in found
    assert ("pipeline.registry", "pipeline.dataset") in found
    assert named_modules('"""Docs naming ``pipeline.steps``."""\nX = "see pipeline.steps for more"\n') == set()
