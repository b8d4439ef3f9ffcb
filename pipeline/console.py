"""The one place the command line makes its rich consoles.

On a terminal a console is as wide as the terminal. Written to a file or a pipe (``make run > log 2>&1``, CI),
rich would fall back to 80 columns and cut a table's cells ("llama…", "retri…"); there a console is made wide
enough that no line is wrapped and no cell is cut, so a log keeps every model id and stage name whole.
``COLUMNS`` set in the environment still wins, as rich documents.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

LOG_WIDTH = 10_000  # columns of a console that is not a terminal: wider than any line the CLI prints


def make_console(*, stderr: bool = False, **kwargs: Any) -> Console:
    """A rich ``Console`` on stdout (or stderr) that keeps full names when its output is not a terminal."""
    console = Console(stderr=stderr, **kwargs)
    if "width" not in kwargs and not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console.width = LOG_WIDTH
    return console


def progress_bar(console: Console, *, label: str = "{task.description}", eta: bool = True,
                 transient: bool = False) -> Progress:
    """The command line's one progress bar: label, bar, done of total, time elapsed and (``eta``) time left."""
    columns = [TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    if eta:
        columns += [TextColumn("eta"), TimeRemainingColumn()]
    return Progress(*columns, console=console, transient=transient)
