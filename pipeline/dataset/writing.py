"""Writing files into a dataset folder: never over a file the command did not write, checked before anything is
replaced, all or nothing.

A command that keeps a report in the folder (``curate_report.json``, ``ingest_report.json``) records there the
sha256 of every file it wrote (``outputs``). An existing target file is the command's own when that report names
it with its current hash (so a file edited by hand, or written by another command, is not); any other existing
target is refused unless ``force``. The new files are first written to a staging folder beside the target folder
and, with a ``check`` (e.g. the dataset's validation), checked there together with the folder's other files; only
then is each renamed over its target, the report last. A failure at any step before the renames leaves the folder
as it was; a disk that is read-only or full is one line (``UserError``), nothing written.

The renames are journalled: before the first, ``.write-journal.json`` in the folder names the staging folder and
the files to move. A process killed between two renames (kill -9, power loss) leaves the journal; the next command
that writes or reads the folder for writing (``recover``: ingest-kb, curate-queries) completes the write from the
staging folder, which holds exactly the files not yet moved and was checked before the journal was written, so
the folder is never left mixed. ``validate`` reports a folder with a pending journal as an error until then.
Staging folders start with a dot, so the Dataset page never lists one.
"""

from __future__ import annotations

import errno
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
JOURNAL = ".write-journal.json"  # {"command", "staging" (a folder beside the dataset's), "files"}: renames pending
DISK_ERRORS = {errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM}


def disk_error(exc: OSError, where: Path) -> UserError | None:
    """One line for a disk that refuses the write (read-only, full, over quota, no permission), else None."""
    if exc.errno not in DISK_ERRORS:
        return None
    return UserError(f"{where}: cannot write ({exc.strerror or exc}: {exc.filename or where}); nothing written")


def pending_journal(folder: Path) -> dict[str, Any] | None:
    """The journal of an interrupted write into ``folder`` (None when there is none or it is unreadable)."""
    try:
        journal = json.loads((folder / JOURNAL).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return journal if isinstance(journal, dict) and isinstance(journal.get("files"), list) else None


def recover(folder: Path) -> list[str]:
    """Complete an interrupted write into ``folder`` (see the module): move the staged files still waiting, in the
    journal's order, then drop the journal and the staging folder. Returns the files moved now."""
    journal = pending_journal(folder)
    if journal is None:
        if (folder / JOURNAL).exists():
            (folder / JOURNAL).unlink()  # written only once complete: an unreadable one was never acted on
        return []
    staging = folder.parent / str(journal.get("staging", ""))
    moved = []
    for name in map(str, journal["files"]):
        if Path(name).name == name and (staging / name).is_file():
            os.replace(staging / name, folder / name)
            moved.append(name)
    (folder / JOURNAL).unlink()
    if staging.parent == folder.parent and staging.name.startswith("."):
        shutil.rmtree(staging, ignore_errors=True)
    return moved


def _write_journal(folder: Path, staging: Path, command: str, names: list[str]) -> None:
    """The journal, complete on disk (written beside, flushed, then renamed into place) before any rename."""
    temp = folder / (JOURNAL + ".tmp")
    with open(temp, "w", encoding="utf-8") as fh:
        json.dump({"command": command, "staging": staging.name, "files": names}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(temp, folder / JOURNAL)


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
    try:
        _write(folder, files, command=command, report_name=report_name, report=report, force=force, check=check)
    except OSError as exc:
        if (line := disk_error(exc, folder)) is None:
            raise
        raise line from None


def _write(folder: Path, files: dict[str, str], *, command: str, report_name: str | None,
           report: dict[str, Any] | None, force: bool, check: Callable[[Path], None] | None) -> None:
    recover(folder)
    if not force:
        refuse_foreign(folder, list(files), report_name, command)
    contents = dict(files)
    if report_name is not None:
        outputs = {name: sha256_of(text.encode("utf-8")) for name, text in files.items()}
        contents[report_name] = json.dumps({**(report or {}), OUTPUTS: outputs}, ensure_ascii=False, indent=1) + "\n"
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.{command}-", dir=folder.parent))
    journalled = False
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
        _write_journal(folder, staging, command, list(contents))
        journalled = True
        for name in contents:  # the report last: it vouches for the files renamed before it
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / name, folder / name)
        (folder / JOURNAL).unlink()
        journalled = False
    finally:
        if not journalled:  # a failure between renames keeps what the journal needs to complete the write
            shutil.rmtree(staging, ignore_errors=True)


def validated(staging: Path) -> None:
    """A ``check`` for ``write_dataset``: the staged folder validates as a dataset (its first error, else none)."""
    from pipeline.dataset.loader import validate

    dataset, issues = validate(staging)
    if dataset is None:
        first = next(i for i in issues if i.severity == "error")
        raise UserError(f"what would be written does not validate: {first}")
