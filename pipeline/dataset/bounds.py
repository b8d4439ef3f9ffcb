"""Bounded inputs for ``ingest-kb``: a file over the size limit, an archive (DOCX) whose members inflate beyond a
limit or a ratio, and XML that is malformed or declares a DTD or entities (an entity bomb) are refused in one line
naming the file and the limit, before any parser reads them.

The size is the file's ``stat`` (a sparse file is not read); an archive's members are checked on their declared
sizes first (the zip directory), then streamed, counting what they really inflate to, through defusedxml's expat
reader (no tree is built, no DTD or entity accepted).

Memory is bounded twice: each PDF page before PDFium parses it (``pdf_bounds``), and the whole ingest's resident
memory, read as each page and each file is done (``check_memory``), so that pages which each pass their own limits
cannot together take the machine.
"""

from __future__ import annotations

import zipfile
from dataclasses import replace
from pathlib import Path
from xml.sax import SAXParseException
from xml.sax.handler import ContentHandler

from pipeline.errors import UserError
from pipeline.formats import InputLimits

MB = 1024 * 1024
CHUNK = MB  # bytes streamed at a time out of an archive member
MIN_RATIO_CHECKED = MB  # members smaller than this inflate at any ratio (a tiny styles.xml compresses well)


def check_size(path: Path, limits: InputLimits) -> None:
    """``UserError`` when the file is over ``--max-file-mb`` (by its size on record: nothing is read)."""
    size = path.stat().st_size
    if size > limits.max_file_mb * MB:
        raise UserError(f"{path}: {size / MB:,.1f} MB is over the size limit (--max-file-mb {limits.max_file_mb:g}); "
                        "split the file or raise the limit")


def resident_mb() -> float:
    """This process's resident memory (MB)."""
    import psutil

    return psutil.Process().memory_info().rss / MB


def begun(limits: InputLimits) -> InputLimits:
    """``limits`` with the memory an ingest or a read starts from: a caller's own base is kept (``ingest`` sets it
    for the whole batch), else this process's resident memory now, so that only what the read adds is counted."""
    return limits if limits.memory_base_mb is not None else replace(limits, memory_base_mb=resident_mb())


def check_memory(path: Path, where: str, limits: InputLimits) -> None:
    """``UserError`` naming the file and ``where`` (``"page 3"``, ``"read"``) when the ingest has added more resident
    memory to its process than ``--max-memory-mb`` since it began (``limits.memory_base_mb``, set by ``begun``)."""
    added = resident_mb() - (limits.memory_base_mb or 0.0)
    if added > limits.max_memory_mb:
        raise UserError(f"{path}: {where}: the ingest took {added:,.0f} MB, over the limit (--max-memory-mb "
                        f"{limits.max_memory_mb:g}); split the file, ingest it alone or raise the limit")


def check_archive(path: Path, limits: InputLimits) -> None:
    """``UserError`` when a zip archive's members inflate beyond ``--max-inflated-mb`` in all or beyond
    ``--max-ratio`` each (declared sizes, then the bytes really inflated), or an XML member is malformed or declares
    a DTD or entities."""
    limit = limits.max_inflated_mb * MB
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            declared = sum(m.file_size for m in members)
            if declared > limit:
                raise _over(path, f"its members declare {declared / MB:,.1f} MB inflated", "--max-inflated-mb",
                            limits.max_inflated_mb)
            for member in members:
                _check_ratio(path, member.filename, member.file_size, member.compress_size, limits)
            inflated = 0
            for member in members:
                inflated += _stream_member(path, archive, member, limit - inflated, limits)
    except zipfile.BadZipFile as exc:
        raise UserError(f"{path}: unreadable archive ({exc}); save it again") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read the file ({exc.strerror or exc})") from None


def _over(path: Path, what: str, option: str, limit: float) -> UserError:
    return UserError(f"{path}: {what}, over the limit ({option} {limit:g}): a compression bomb? If the file is "
                     "genuine, raise the limit")


def _check_ratio(path: Path, name: str, inflated: int, compressed: int, limits: InputLimits) -> None:
    if inflated >= MIN_RATIO_CHECKED and inflated > limits.max_ratio * max(compressed, 1):
        raise _over(path, f"member {name} inflates {inflated / max(compressed, 1):,.0f} times", "--max-ratio",
                    limits.max_ratio)


def _stream_member(path: Path, archive: zipfile.ZipFile, member: zipfile.ZipInfo, room: float,
                   limits: InputLimits) -> int:
    """Bytes ``member`` really inflates to (at most ``room``), its XML checked on the way."""
    from defusedxml import DefusedXmlException
    from defusedxml.expatreader import DefusedExpatParser

    xml = member.filename.lower().endswith((".xml", ".rels"))
    parser = DefusedExpatParser(forbid_dtd=True) if xml else None
    if parser is not None:
        parser.setContentHandler(ContentHandler())
    inflated = 0
    try:
        with archive.open(member) as stream:
            while chunk := stream.read(CHUNK):
                inflated += len(chunk)
                if inflated > room:
                    raise _over(path, f"its members inflate beyond {limits.max_inflated_mb:g} MB (member "
                                      f"{member.filename})", "--max-inflated-mb", limits.max_inflated_mb)
                _check_ratio(path, member.filename, inflated, member.compress_size, limits)
                if parser is not None:
                    parser.feed(chunk)
        if parser is not None:
            parser.close()
    except SAXParseException as exc:
        raise UserError(f"{path}: malformed XML in {member.filename} at line {exc.getLineNumber()}, column "
                        f"{exc.getColumnNumber()} ({exc.getMessage()}); save the file again") from None
    except DefusedXmlException as exc:
        raise UserError(f"{path}: {member.filename} declares a DTD or entities ({type(exc).__name__}), which a "
                        "Word file never needs (an entity bomb?); save the file again") from None
    return inflated
