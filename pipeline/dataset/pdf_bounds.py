"""Bounds of a PDF before PDFium parses or renders it: a page whose content (its content streams and the form XObjects
it draws, recursively) inflates beyond ``--max-page-content-mb``, or that draws an image of more pixels than
``--max-page-mpx``, is refused in one line naming the file, the page and the limit; a page image for OCR larger than
the pixel budget is rendered at a lower resolution (``render_dpi``), and the reader notes it.

PDFium inflates a page's whole content stream into memory and keeps its parsed objects, about 35 bytes for each byte
of dense drawing operators (10 MB of content: 572 MB peak for the whole command; 25 MB: 1.1 GB; a 3 MB stream
inflating to 1 GiB took 6 GB), so the streams are decoded first by pypdf, whose decoders stop at a configured output
length (``pypdf.apply_configuration``): at most one limit's worth of bytes is held at a time. Image streams are not
decoded (PDFium decodes an image only when it renders the page); their declared size is checked.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.errors import UserError
from pipeline.formats import InputLimits

MB = 1024 * 1024


def _streams(resources: Any, seen: set[int]) -> Iterator[Any]:
    """The form and image XObjects ``resources`` names, forms followed into their own resources (each once)."""
    xobjects = resources.get("/XObject") if resources is not None else None
    for reference in (xobjects.get_object().values() if xobjects is not None else ()):
        stream = reference.get_object()
        if id(stream) in seen or not hasattr(stream, "get"):
            continue
        seen.add(id(stream))
        yield stream
        if stream.get("/Subtype") == "/Form":
            inner = stream.get("/Resources")
            yield from _streams(inner.get_object() if inner is not None else None, seen)


def _page_objects(page: Any) -> tuple[list[Any], list[Any]]:
    """A page's content streams (with its forms') and its images."""
    contents = page.get("/Contents")
    contents = contents.get_object() if contents is not None else None
    streams = [] if contents is None else [c.get_object() for c in contents] if isinstance(contents, list) else [
        contents]
    images = []
    resources = page.get("/Resources")
    for stream in _streams(resources.get_object() if resources is not None else None, set()):
        (images if stream.get("/Subtype") == "/Image" else streams).append(stream)
    return streams, images


def _refuse(path: Path, page: int, what: str, option: str, limit: float) -> UserError:
    return UserError(f"{path}: page {page}: {what}, over the limit ({option} {limit:g}): a compression bomb or a "
                     "broken file? If the page is genuine, raise the limit")


def check_pages(path: Path, limits: InputLimits) -> None:
    """``UserError`` naming the file and page when a page's content inflates beyond ``limits.max_page_content_mb`` or
    it draws an image of more than ``limits.max_page_mpx`` megapixels. A file pypdf cannot parse is left to PDFium
    (whose errors are one line too)."""
    limit = int(limits.max_page_content_mb * MB)
    bounded = {name: limit + 1 for name in (
        "zlib_maximum_output_length", "lzw_maximum_output_length", "run_length_maximum_output_length",
        "brotli_maximum_output_length", "array_based_stream_maximum_output_length")}
    quiet = logging.getLogger("pypdf")  # its warnings on a broken file are not the user's business: PDFium decides
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        _check(path, limits, limit, bounded)
    finally:
        quiet.setLevel(level)


def _check(path: Path, limits: InputLimits, limit: int, bounded: dict[str, int]) -> None:
    from pypdf import PdfReader, apply_configuration
    from pypdf.errors import LimitReachedError, PyPdfError
    from pypdf.filters import decode_stream_data

    with apply_configuration(**bounded):
        try:
            reader = PdfReader(path, strict=False)
            if reader.is_encrypted and not reader.decrypt(""):
                return  # a user password: PDFium refuses it in one line
            pages = reader.pages
            for number in range(1, len(pages) + 1):
                streams, images = _page_objects(pages[number - 1])
                inflated = 0
                for stream in streams:
                    try:
                        inflated += len(decode_stream_data(stream) if "/Filter" in stream else stream.get_data())
                    except LimitReachedError:
                        inflated = limit + 1
                    except NotImplementedError:  # a filter pypdf does not decode: PDFium decides
                        continue
                    if inflated > limit:
                        raise _refuse(path, number, f"its content inflates beyond {limits.max_page_content_mb:g} MB",
                                      "--max-page-content-mb", limits.max_page_content_mb)
                for image in images:
                    width, height = int(image.get("/Width", 0)), int(image.get("/Height", 0))
                    if width * height > limits.max_page_mpx * 1e6:
                        raise _refuse(path, number, f"an image of {width:,} x {height:,} pixels",
                                      "--max-page-mpx", limits.max_page_mpx)
        except (PyPdfError, ValueError, TypeError, KeyError, AttributeError, OSError,
                RecursionError):
            return  # not parsable by pypdf (or an unsupported filter): PDFium decides


def render_dpi(width_pt: float, height_pt: float, dpi: float, limits: InputLimits) -> float:
    """``dpi``, or the resolution at which a page of ``width_pt`` x ``height_pt`` points fills the pixel budget
    (``limits.max_page_mpx``) when ``dpi`` would exceed it."""
    pixels = width_pt * height_pt * (dpi / 72) ** 2
    budget = limits.max_page_mpx * 1e6
    return dpi if pixels <= budget else 72 * math.sqrt(budget / (width_pt * height_pt))
