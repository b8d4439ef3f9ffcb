"""What the docs cite exists (issue 46, item 6): every file path, every module (``pipeline.x.y``, and the name after
it when one follows) and every command and ``--flag`` of a ``python -m pipeline`` command (or of a code span that
starts with a command's name) that README.md, bench/README.md and docs/*.md cite, checked against the tree and the
Typer app's registered commands and options.

A path counts when it starts at a top-level entry of the repository (``pipeline/…``, ``docs/…``, ``Makefile``) or is
a relative Markdown link; a path the project writes at run time (matched by ``.gitignore``: results databases, bench
data, caches) is not expected in a clone. A failure names the doc, the line and the missing thing; a control case
plants one false claim of each kind and requires each to be found.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import click
import pytest
import typer

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", REPO / "bench" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Cited on purpose though no clone has them, each with the reason.
NOT_IN_A_CLONE = {".streamlit/secrets.toml": "the operator writes it (docs/security.md)",
                  "data/my-set": "README's example of the reader's own dataset folder",
                  "configs/my-study.yaml": "README's example of the reader's own run configuration",
                  "data/cataract-variants": "docs/robustness.md's example of a folder `pipeline variants` writes",
                  "data/cataract-rm": "docs/robustness.md's example of a folder `pipeline variants` writes",
                  "data/cataract-llm": "docs/robustness.md's example of a folder `pipeline variants` writes"}

SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(r"[\w.\-/]+")
MODULE = re.compile(r"(?<![\w./-])pipeline(?:\.\w+)+")
COMMAND = re.compile(r"(?<![\w./-])-m pipeline(?=\s|$)(.*)")
FLAG = re.compile(r"--?[A-Za-z][\w-]*")
NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")


@dataclass(frozen=True)
class Missing:
    doc: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.what}"


# -- reading a doc ---------------------------------------------------------------------------------------------
def code_pieces(text: str) -> Iterator[tuple[int, str]]:
    """(line number, code) of a Markdown text: each line of a fenced block (a line ending in ``\\`` joined with the
    next, as a shell reads it) and each inline code span of the other lines."""
    fenced, held, start = False, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced, held = not fenced, ""
            continue
        if fenced:
            if not held:
                start = number
            if line.rstrip().endswith("\\"):
                held += line.rstrip()[:-1] + " "
                continue
            yield start, held + line
            held = ""
        else:
            for _, code in SPAN.findall(line):
                yield number, code.strip()


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line number, target) of each relative Markdown link outside code."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            for target in LINK.findall(SPAN.sub("", line)):
                if not re.match(r"[a-z]+:|#", target):
                    yield number, target.split("#")[0]


# -- paths -----------------------------------------------------------------------------------------------------
@cache
def top_level() -> frozenset[str]:
    """The repository's top-level entries (git's, so that a folder made locally, e.g. ``exports/``, is not one)."""
    try:
        tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: what is here
        return frozenset(p.name for p in REPO.iterdir() if p.name not in (".git", ".venv", ".cache"))
    return frozenset(line.split("/")[0] for line in tracked.splitlines())


@cache
def ignore_patterns() -> tuple[str, ...]:
    lines = (REPO / ".gitignore").read_text(encoding="utf-8").splitlines()
    return tuple(p.strip().rstrip("/") for p in lines if p.strip() and not p.startswith(("#", "!")))


def written_at_run_time(relative: str) -> bool:
    """Whether ``.gitignore`` matches the path or a folder above it (the project writes it; no clone has it)."""
    parts = relative.strip("/").split("/")
    for k in range(1, len(parts) + 1):
        for pattern in ignore_patterns():
            if fnmatch.fnmatch("/".join(parts[:k]) if "/" in pattern else parts[k - 1], pattern):
                return True
    return False


def path_claims(text: str) -> Iterator[tuple[int, str]]:
    """(line, repository-relative path) of each code span that is a path from a top-level entry of the tree."""
    for number, code in code_pieces(text):
        for token in code.split():
            token = token.strip("'\",;:()[]")
            if PATH.fullmatch(token) and token.split("/")[0] in top_level() and (
                    "/" in token or "." in token or token == "Makefile"):
                yield number, token.rstrip(".")


def missing_paths(doc: Path, text: str) -> list[Missing]:
    name, out = doc.relative_to(REPO).as_posix(), []
    for number, path in path_claims(text):
        if not (REPO / path).exists() and not written_at_run_time(path) and path not in NOT_IN_A_CLONE:
            out.append(Missing(name, number, f"path `{path}` does not exist"))
    for number, target in links(text):
        if target and not (doc.parent / target).exists():
            out.append(Missing(name, number, f"link target `{target}` does not exist (relative to {doc.parent.name}/)"))
    return out


# -- modules ---------------------------------------------------------------------------------------------------
def module_file(dotted: str) -> Path | None:
    base = REPO.joinpath(*dotted.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


@cache
def defined_names(path: Path) -> frozenset[str]:
    """The names a module defines or imports at its top level (read from its source, not imported)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def missing_module(dotted: str) -> str | None:
    """Why ``dotted`` (a module, or a module and a name in it) is not there; None when it is."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        found = module_file(".".join(parts[:k]))
        if found is None:
            continue
        if k == len(parts):
            return None
        name = parts[k]
        if name in defined_names(found) or module_file(".".join(parts[:k + 1])):
            return None
        return f"module `{'.'.join(parts[:k])}` defines no `{name}` (cited as `{dotted}`)"
    return f"module `{dotted}` does not exist"


def missing_modules(doc: Path, text: str) -> list[Missing]:
    name = doc.relative_to(REPO).as_posix()
    return [Missing(name, number, why) for number, code in code_pieces(text) for dotted in MODULE.findall(code)
            if (why := missing_module(dotted.rstrip(".")))]


# -- commands and flags ----------------------------------------------------------------------------------------
@cache
def cli() -> click.Command:
    from pipeline.cli import app

    return typer.main.get_command(app)


def options(command: click.Command) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}


def command_problems(rest: str) -> list[str]:
    """What is wrong with ``python -m pipeline REST`` as the docs write it (``[--opt X]`` optional parts,
    ``a\\|b`` alternatives, ``…`` elisions): an unregistered command or an option its command does not take."""
    tokens = [t.strip("[]") for t in rest.split("#")[0].replace("\\|", "|").split()]
    command, path, i = cli(), ["pipeline"], 0
    while hasattr(command, "commands") and i < len(tokens) and not tokens[i].startswith("-"):
        names = tokens[i].split("|")
        if not all(NAME.fullmatch(n) for n in names):
            break
        unknown = [n for n in names if n not in command.commands]
        if unknown:
            return [f"`{' '.join(path)} {n}` is not a registered command" for n in unknown]
        if len(names) > 1:
            return []  # alternatives: each exists; their flags are not written here
        command, i = command.commands[names[0]], i + 1
        path.append(names[0])
    flags = [m.group(0).split("=")[0] for t in tokens[i:] if (m := FLAG.match(t))]
    return [f"`{' '.join(path)}` has no option `{f}`" for f in flags if f not in options(command)]


def commands_in(code: str) -> list[str]:
    """What follows ``python -m pipeline`` in ``code``; or all of it when it starts with a command's name (the docs'
    headings and tables write ``ingest-kb PATH... --out DIR``)."""
    found = COMMAND.findall(code)
    return found or ([code] if code.split() and code.split()[0] in cli().commands else [])


def missing_commands(doc: Path, text: str) -> list[Missing]:
    name = doc.relative_to(REPO).as_posix()
    return [Missing(name, number, why) for number, code in code_pieces(text) for rest in commands_in(code)
            for why in command_problems(rest)]


def missing(doc: Path, text: str | None = None) -> list[Missing]:
    text = doc.read_text(encoding="utf-8") if text is None else text
    return [*missing_paths(doc, text), *missing_modules(doc, text), *missing_commands(doc, text)]


# -- the tests -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.relative_to(REPO).as_posix())
def test_what_the_doc_cites_exists(doc: Path) -> None:
    problems = missing(doc)
    assert not problems, "\n".join(map(str, problems))


def test_the_docs_cite_enough_to_check() -> None:
    """A floor, so that a broken reader (nothing found, nothing failing) fails here."""
    texts = [(d, d.read_text(encoding="utf-8")) for d in DOCS]
    assert sum(1 for d, t in texts for _ in path_claims(t)) >= 150
    assert sum(1 for _, t in texts for _, c in code_pieces(t) for _ in MODULE.findall(c)) >= 8
    commands = [rest for _, t in texts for _, c in code_pieces(t) for rest in commands_in(c)]
    assert len(commands) >= 70 and sum(len(FLAG.findall(r)) for r in commands) >= 80


def test_a_planted_false_claim_of_each_kind_is_found() -> None:
    """The control case: a doc citing one thing of each kind that does not exist, beside ones that do."""
    doc = REPO / "docs" / "planted.md"
    text = "\n".join([
        "Real: `pipeline/runner.py`, `pipeline.runner.run`, [design](design.md), `data/results.duckdb`.",  # 1
        "False path: `pipeline/no_such_module.py` and `docs/nowhere.md`.",  # 2
        "False link: [gone](gone.md).",  # 3
        "False module: `pipeline.read.no_such_read` and name: `pipeline.runner.no_such_function`.",  # 4
        "```bash",  # 5
        "python -m pipeline run --config F --no-such-flag \\",  # 6
        "  --limit 3",  # 7
        "python -m pipeline arena no-such-command --db P",  # 8
        "```",  # 9
        "Alternatives: `python -m pipeline arena leaderboard\\|nope` and `python -m pipeline status --db P`.",  # 10
        "A heading's command: `export --db P --out DIR [--no-such-format X]`, `curate-queries LOG --out DIR`.",  # 11
    ])
    found = sorted(map(str, missing(doc, text)))
    assert found == sorted([
        "docs/planted.md:2: path `pipeline/no_such_module.py` does not exist",
        "docs/planted.md:2: path `docs/nowhere.md` does not exist",
        "docs/planted.md:3: link target `gone.md` does not exist (relative to docs/)",
        "docs/planted.md:4: module `pipeline.read` defines no `no_such_read` (cited as `pipeline.read.no_such_read`)",
        "docs/planted.md:4: module `pipeline.runner` defines no `no_such_function` (cited as "
        "`pipeline.runner.no_such_function`)",
        "docs/planted.md:6: `pipeline run` has no option `--no-such-flag`",
        "docs/planted.md:8: `pipeline arena no-such-command` is not a registered command",
        "docs/planted.md:10: `pipeline arena nope` is not a registered command",
        "docs/planted.md:11: `pipeline export` has no option `--no-such-format`",
    ]), "\n".join(found)


def test_design_lists_the_bottom_layer_that_the_layer_test_checks() -> None:
    """docs/design.md's shared modules are the last layer of tests/test_layers.py."""
    from tests.test_layers import LAYERS

    text = " ".join((REPO / "docs" / "design.md").read_text(encoding="utf-8").split())
    listed = re.search(r"the shared modules \(([^:)]*)", text)
    assert listed, "docs/design.md: 'the shared modules (`a`, `b`, …)' is gone; keep it or change this test"
    assert sorted(re.findall(r"`(\w+)`", listed.group(1))) == sorted(LAYERS[-1]), (
        "docs/design.md's shared modules differ from the last tuple of LAYERS in tests/test_layers.py")
