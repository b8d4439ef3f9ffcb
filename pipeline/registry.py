"""One lazy registry for every kind of plug-in (lm-evaluation-harness's pattern).

An entry is a name and where its object lives, ``"package.module"`` or ``"package.module:object"``, imported on
first use: a missing optional package breaks only the entries that need it, and adding a provider, a step or an
importer is one module plus one entry. The registries: ``pipeline.models.PROVIDERS`` (backend modules),
``pipeline.steps.STEPS`` (the run's stages, in flow order), ``pipeline.dataset.importers.IMPORTERS`` (public QA
formats), ``pipeline.formats.FORMATS`` (``ingest-kb``'s document formats); the store's derived tables are
declarations collected by ``pipeline.store.schema``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from pipeline.errors import UserError


class Registry(Mapping[str, Any]):
    """Names (in the order given) → objects imported on first use; ``registry[name] = obj`` replaces an entry."""

    def __init__(self, kind: str, entries: Mapping[str, str]):
        self.kind = kind
        self._entries: dict[str, Any] = dict(entries)
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            where = self._entries[name]
            if isinstance(where, str):
                module, _, attribute = where.partition(":")
                found = importlib.import_module(module)
                self._loaded[name] = getattr(found, attribute) if attribute else found
            else:
                self._loaded[name] = where
        return self._loaded[name]

    def __setitem__(self, name: str, obj: Any) -> None:
        self._entries[name] = obj
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, name: str, context: str = "") -> Any:
        """``self[name]``, or one line naming the unknown name and the known ones."""
        if name not in self._entries:
            raise UserError(f"{context}unknown {self.kind} {name!r}; choose from {', '.join(self._entries)}")
        return self[name]
