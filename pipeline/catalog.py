"""The composition root: everything the system is made of, assembled once into one immutable ``Catalog``.

The declarations stay where they are written — a step's ``Step`` in its module with its one entry in
``pipeline.steps.STEPS``, the store's row classes and derived tables (``pipeline.store.schema``), the document
formats (``pipeline.formats.FORMATS``), the public QA importers (``pipeline.dataset.importers.IMPORTERS``), the
providers (``pipeline.models.PROVIDERS``) and the dashboard's pages (``pipeline.read.pages.PAGES``) — and this module
(the top layer) reads them all and builds the catalog the entry points share: the run and its estimate, the config's
validation (a step's own section), the schema every entry point opens the store with (the store's tables and every
step's own, ``Step.rows``: ``run``, ``upgrade``, ``export``, ``status`` and the dashboard know the same tables),
``ingest-kb``'s formats, ``app.py``'s routes and the benchmark's page list. Nothing below imports upward to find
them: a lower layer is handed what it needs (lm-eval's ``freeze()``, the app-factory pattern).

``catalog()`` builds it on first use from the registries as they are then (a test registers a toy step first), and
returns the same object afterwards.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pipeline.config import RunConfig, validate_config
from pipeline.config import load_config as read_config
from pipeline.dataset.importers import IMPORTERS
from pipeline.errors import UserError
from pipeline.formats import FORMATS, DocumentFormat
from pipeline.models import PROVIDERS
from pipeline.read.pages import PAGES, Page
from pipeline.steps import STEPS
from pipeline.steps.context import Inputs
from pipeline.steps.spec import Step
from pipeline.store.schema import SCHEMA, Schema


@dataclass(frozen=True)
class Catalog:
    """Every step (flow order), table, format, importer, provider and page, as one value.

    ``steps``: stage name → its ``Step`` (the registry itself, read-only here: a test or a benchmark that serves
    an instrumented step with ``STEPS.replaced`` is seen by the run). ``schema``: the store's tables plus each step's
    own rows. ``writers``: table → the stage whose ``Step.rows`` write it. ``formats``: ``ingest-kb``'s document
    formats. ``importers`` and ``providers``: the lazy registries of QA importers and model backends (a missing
    optional package breaks only the entry that needs it). ``pages``: URL path → ``Page``, in menu order."""

    steps: Mapping[str, Step]
    schema: Schema
    writers: Mapping[str, str]
    formats: Mapping[str, DocumentFormat]
    importers: Mapping[str, Any]
    providers: Mapping[str, Any]
    pages: Mapping[str, Page]

    def step(self, name: str, context: str = "") -> Step:
        """The step of stage ``name``, or one line naming the unknown stage and the known ones."""
        if name not in self.steps:
            raise UserError(f"{context}unknown stage {name!r}; choose from {', '.join(self.steps)}")
        return self.steps[name]

    def prepare(self, inputs: Inputs) -> None:
        """Every step's ``prepare`` on a run's (or a dry run's) inputs, whichever stages run: stored results of
        earlier runs that other stages read (machine renderings of queries)."""
        for step in self.steps.values():
            if step.prepare is not None:
                step.prepare(inputs)

    def load_config(self, path: str | Path, **overrides: Any) -> RunConfig:
        """``pipeline.config.load_config`` knowing every step: each step's section is validated by its settings."""
        return read_config(path, steps=tuple(self.steps.values()), **overrides)

    def config(self, raw: Mapping[str, Any]) -> RunConfig:
        """A run configuration from a mapping (a YAML's settings, or a stored run's JSON read back), validated with
        every step; a ``pydantic.ValidationError`` when it does not validate."""
        return validate_config(raw, self.steps.values())


def build() -> Catalog:
    """A catalog of the registries as they are now (every step module is imported: their declarations are read)."""
    schema, writers, sections = SCHEMA, {}, {}
    for name, step in STEPS.items():
        try:
            schema = schema.with_rows(*step.rows)
        except ValueError as exc:
            raise ValueError(f"stage {name!r}: {exc}") from None
        for row in step.rows:
            writers.setdefault(row.TABLE, name)
        if step.section and sections.setdefault(step.section, step.settings) is not step.settings:
            raise ValueError(f"stage {name!r}: section {step.section!r} is declared by an earlier stage with other "
                             "settings (stages sharing a section declare the same settings model)")
    return Catalog(steps=STEPS, schema=schema, writers=MappingProxyType(writers),
                   formats=MappingProxyType({name: FORMATS[name] for name in FORMATS}), importers=IMPORTERS,
                   providers=PROVIDERS, pages=MappingProxyType({name: PAGES[name] for name in PAGES}))


@functools.cache
def catalog() -> Catalog:
    """The catalog, built once per process (``build``)."""
    return build()


def load_config(path: str | Path, **overrides: Any) -> RunConfig:
    """A run configuration validated with the catalog's steps (``Catalog.load_config``)."""
    return catalog().load_config(path, **overrides)
