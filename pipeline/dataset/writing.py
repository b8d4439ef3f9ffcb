"""Writing files into a dataset folder: never over a file the command did not write, checked before anything is
replaced, all or nothing.

A command that keeps a report in the folder (``curate_report.json``, ``ingest_report.json``) records there the
sha256 of every file it wrote (``outputs``). An existing target file is the command's own when that report names
it with its current hash (so a file edited by hand, or written by another command, is not); any other existing
target is refused unless ``force``. The new files are first written to a staging folder beside the target folder
and, with a ``check`` (e.g. the dataset's validation), checked there together with the folder's other files; only
then is each renamed over its target, the report last. A failure at any step leaves the folder as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.errors import UserError

OUTPUTS = "outputs"  # the report's key: {file name: sha256 of the file as written}


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def own_outputs(folder: Path, report_name: str | None) -> dict[str, str]:
    """``{file name: sha256}`` the command's report in ``folder`` says it wrote (empty without a readable report)."""
    if report_name is None:
        return {}
    try:
        report = json.loads((folder / report_name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    outputs = report.get(OUTPUTS) if isinstance(report, dict) else None
    return {str(k): str(v) for k, v in outputs.items()} if isinstance(outputs, dict) else {}


def foreign_files(folder: Path, names: list[str], report_name: str | None) -> list[str]:
    """The files of ``names`` (and the report) that exist in ``folder`` but were not written, as they are now, by
    the command owning ``report_name``."""
    own = own_outputs(folder, report_name)
    foreign = []
    for name in names:
        path = folder / name
        if not (path.exists() or path.is_symlink()):
            continue
        if path.is_symlink() or not path.is_file() or own.get(name) != sha256_of(path.read_bytes()):
            foreign.append(name)
    report = folder / report_name if report_name else None
    if report is not None and (report.exists() or report.is_symlink()) and (report.is_symlink() or not own):
        foreign.append(report_name)
    return foreign


def refuse_foreign(folder: Path, names: list[str], report_name: str | None, command: str) -> None:
    """UserError naming the files of ``names`` (and the report) in ``folder`` that ``command`` did not write."""
    foreign = foreign_files(folder, names, report_name)
    if foreign:
        raise UserError(f"{folder}: already holds {', '.join(foreign)}, not written by {command} (or changed "
                        "since); nothing written: choose another folder, or --force to replace "
                        f"{'it' if len(foreign) == 1 else 'them'}")


def _stage_existing(folder: Path, staging: Path, replaced: set[str]) -> None:
    """Put ``folder``'s other entries in ``staging`` (hard links where possible), so a check sees the whole folder."""
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        if entry.name in replaced or entry.name.startswith(".") or entry.is_symlink():
            continue
        if entry.is_dir():
            shutil.copytree(entry, staging / entry.name, symlinks=True)
            continue
        try:
            os.link(entry, staging / entry.name)
        except OSError:
            shutil.copy2(entry, staging / entry.name)


def write_dataset(folder: Path, files: dict[str, str], *, command: str, report_name: str | None = None,
                  report: dict[str, Any] | None = None, force: bool = False,
                  check: Callable[[Path], None] | None = None) -> None:
    """Write ``files`` (``{name: text}``) and ``report`` (as ``report_name``, with the files' hashes) into
    ``folder``. UserError, with nothing written, when a target exists that ``command`` did not write (unless
    ``force``) or when ``check(staged folder)`` raises one."""
    if not force:
        refuse_foreign(folder, list(files), report_name, command)
    contents = dict(files)
    if report_name is not None:
        outputs = {name: sha256_of(text.encode("utf-8")) for name, text in files.items()}
        contents[report_name] = json.dumps({**(report or {}), OUTPUTS: outputs}, ensure_ascii=False, indent=1) + "\n"
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.{command}-", dir=folder.parent))
    try:
        if check is not None:  # only a check needs the folder's other files beside the new ones
            _stage_existing(folder, staging, set(contents))
        for name, text in contents.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)  # a name may be in a subfolder (prompts/)
            with open(staging / name, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
        if check is not None:
            try:
                check(staging)
            except UserError as exc:
                raise UserError(f"{folder}: nothing written: {str(exc).replace(str(staging), str(folder))}") from None
        folder.mkdir(exist_ok=True)
        for name in contents:  # the report last: it vouches for the files renamed before it
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / name, folder / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def validated(staging: Path) -> None:
    """A ``check`` for ``write_dataset``: the staged folder validates as a dataset (its first error, else none)."""
    from pipeline.dataset.loader import validate

    dataset, issues = validate(staging)
    if dataset is None:
        first = next(i for i in issues if i.severity == "error")
        raise UserError(f"what would be written does not validate: {first}")
