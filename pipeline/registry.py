"""One lazy registry for every kind of plug-in (lm-evaluation-harness's pattern).

An entry is a name and where its object lives, ``"package.module"`` or ``"package.module:object"``, imported on
first use: a missing optional package breaks only the entries that need it, and adding a provider, a step or an
importer is one module plus one entry (a step also declares its spec: ``pipeline.steps``). A name registered twice is
refused, as lm-evaluation-harness refuses it. The registries: ``pipeline.models.PROVIDERS`` (backend modules),
``pipeline.steps.STEPS`` (the run's stages, in flow order), ``pipeline.dataset.importers.IMPORTERS`` (public QA
formats), ``pipeline.formats.FORMATS`` (``ingest-kb``'s document formats), ``pipeline.read.pages.PAGES`` (the
dashboard's pages); the store's derived tables are declarations collected by ``pipeline.store.schema``. The catalog
(``pipeline.catalog``) reads them all once; an entry names a module at its registry's level or below.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pipeline.errors import UserError


def load(where: str) -> Any:
    """The object ``"package.module:object"`` names (the module itself for ``"package.module"``), imported now."""
    module, _, attribute = where.partition(":")
    found = importlib.import_module(module)
    return getattr(found, attribute) if attribute else found


class Registry(Mapping[str, Any]):
    """Names (in the order given) → objects imported on first use. ``register`` adds an entry and refuses a name
    already there; ``replaced`` serves another object under a name for the length of a ``with`` block (tests and
    benchmarks instrument a step that way)."""

    def __init__(self, kind: str, entries: Mapping[str, str]):
        self.kind = kind
        self._entries: dict[str, Any] = dict(entries)
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            where = self._entries[name]
            self._loaded[name] = load(where) if isinstance(where, str) else where
        return self._loaded[name]

    def register(self, name: str, where: Any) -> None:
        """Add ``name`` → ``where`` (``"module:object"`` or the object); a name registered twice is an error."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice ({self._entries[name]!r}, then {where!r})")
        self._entries[name] = where

    @contextmanager
    def replaced(self, name: str, obj: Any) -> Iterator[None]:
        """Serve ``obj`` as the registered ``name`` inside the block, then the registered object again."""
        self[name]  # an unknown name fails here, before anything changes
        saved = self._loaded[name]
        self._loaded[name] = obj
        try:
            yield
        finally:
            self._loaded[name] = saved

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, name: str, context: str = "") -> Any:
        """``self[name]``, or one line naming the unknown name and the known ones."""
        if name not in self._entries:
            raise UserError(f"{context}unknown {self.kind} {name!r}; choose from {', '.join(self._entries)}")
        return self[name]
