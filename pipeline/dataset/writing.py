"""Writing files into a dataset folder all or nothing: every file goes to a temporary file beside its target,
then each is renamed over its target, so a failure leaves the folder as it was (no half-written file)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def replace_files(folder: Path, contents: dict[str, str]) -> None:
    """Write ``{file name: text}`` into ``folder`` (created if needed), each file replaced by a rename."""
    folder.mkdir(parents=True, exist_ok=True)
    temps: dict[str, str] = {}
    try:
        for name, text in contents.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
            temps[name] = tmp
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
        for name, tmp in temps.items():
            os.replace(tmp, folder / name)
    finally:
        for tmp in temps.values():
            if os.path.exists(tmp):
                os.unlink(tmp)
