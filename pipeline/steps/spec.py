"""What a stage of the run is, declared once in its own module (as Inspect AI's ``@scorer`` carries its metrics).

A step module ends with ``STEP = Step(run=..., ...)``; its one entry in ``pipeline.steps.STEPS`` names it. From that
declaration alone the runner knows when the stage runs (``requires``, ``opt_in``), which models it calls and under what
role (``models``: the dry run's table, the checks made before any call, and the config's list of the models it knows,
for prices and ``model_config_for``), what would stop it before it spends anything (``check``), what it still has to
send (``pending``: the run and the dry run's estimate both use it), the tables it writes (``rows``: the catalog adds
a step's own row classes to the schema every entry point opens the store with), its own config section (``section``
with its ``settings`` model: every step's, built-in or new, is declared so) and what generic code would otherwise ask
by its name (``answers``, ``retrieves``, ``prepare``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel

    from pipeline.config import ModelConfig, RunConfig
    from pipeline.steps.context import Inputs, Pending, RunContext
    from pipeline.store.row import Row

ModelRoles = Callable[["RunConfig"], Iterable[tuple[str, "ModelConfig | str"]]]


def no_models(config: RunConfig) -> Iterable[tuple[str, ModelConfig | str]]:
    """A step that calls no model (retrieval, lexical scores, safety checks)."""
    return ()


@dataclass(frozen=True)
class Step:
    """One stage: how it runs and everything the runner, the dry run and the config derive from it.

    ``requires``: the config sections it needs, as dotted paths (``"medcode.teacher"``); without them it is left out
    of a default run and refused when named. ``models``: ``(role, model)`` pairs it calls — a ``ModelConfig`` its
    section holds, or a model id the config resolves (``RunConfig.model_config_for``). ``check``: why it cannot run
    here (one line), said by the dry run and raised before the run starts. ``pending``: the calls it has still to send
    (LLM steps only). ``rows``: the row classes it writes. ``section``/``settings``: its own config section (a
    top-level key of the YAML) and the pydantic model that validates it (read back with ``RunConfig.section``);
    stages that share a section (``medcode`` and ``medcode-label``) declare the same model. ``opt_in``: runs only
    when named.
    ``prepare``: applied to the run's inputs (and the dry run's) before any stage, whichever stages run (stored
    results of earlier runs that other stages read: machine renderings of queries). ``answers``: its models are the
    models under evaluation, answering the queries — one that cannot run here is skipped with a warning instead of
    stopping the run, each is given only its ``languages``, and the estimate's later stages see the answers it would
    leave. ``retrieves``: it stores the chunks each prompt is built from (the estimate then counts chunks stored
    under other settings or another KB as retrieved again).
    """

    run: Callable[[RunContext], Awaitable[None]]
    pending: Callable[[Inputs], list[Pending]] | None = None
    requires: tuple[str, ...] = ()
    models: ModelRoles = no_models
    check: Callable[[RunConfig], str | None] | None = None
    rows: tuple[type[Row], ...] = ()
    section: str | None = None
    settings: type[BaseModel] | None = None
    opt_in: bool = False
    prepare: Callable[[Inputs], None] | None = None
    answers: bool = False
    retrieves: bool = False

    def missing(self, config: RunConfig) -> str | None:
        """The first section this step requires that ``config`` lacks, as the config would spell it; else None."""
        for path in self.requires:
            if config.get(path) is None:
                head, _, rest = path.partition(".")
                return f"{head}: {{{rest}: MODEL}}" if rest else head
        return None

    def roles(self, config: RunConfig) -> list[tuple[str, ModelConfig]]:
        """``(role, model options)`` of every model this step calls under ``config``."""
        return [(role, m if not isinstance(m, str) else config.model_config_for(m)) for role, m in self.models(config)]

