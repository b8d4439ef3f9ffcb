"""Run configuration: one frozen, serialisable spec for a whole run (YAML → pydantic)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from pipeline.errors import UserError
from pipeline.metrics import DEFAULT_WEIGHTS, METRICS, WEIGHT_PRESETS

if TYPE_CHECKING:
    from pipeline.steps.spec import Step


class Frozen(BaseModel):
    """A frozen settings model that refuses unknown keys: every section of the config, a step's settings too."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelConfig(Frozen):
    """One model, addressed as ``provider/name`` (Inspect AI style), with its backend options."""

    id: str
    base_url: str | None = None
    api_key_env: str | None = None
    path: str | None = Field(None, description="GGUF file for llamacpp/<name> when not embedded")
    chat_format: str | None = None
    n_ctx: int = Field(4096, gt=0)
    max_tokens: int = Field(256, gt=0, description="llama.cpp reads <= 0 as 'until the context is full'")
    temperature: float = Field(0.0, ge=0)
    timeout: float = Field(120.0, gt=0)
    max_retries: int = Field(6, ge=0)
    down_after: int = Field(
        3, ge=0, description="circuit breaker: after this many calls in a row that get no answer (connection "
        "refused or reset, timed out) the endpoint is taken as down for the rest of the run and this model's "
        "remaining calls are recorded as errors without being made; a rerun tries again (0: never)")
    concurrency: int | None = Field(None, gt=0, description="overrides the run's concurrency")
    tensor_parallel_size: int = Field(1, gt=0)
    distributed_executor_backend: Literal["ray", "mp"] | None = None
    engine_args: dict = Field(default_factory=dict, description="extra vllm.LLM arguments")
    languages: tuple[str, ...] | None = Field(
        None, description="answer only queries in these languages (Health-Pariksha Table 1: some Indic models "
        "were tested on English and their own language only)")

    @model_validator(mode="before")
    @classmethod
    def _by_id(cls, v: Any) -> Any:
        """A model may be given by its id alone (``judge: llamacpp/smollm2-135m-instruct``)."""
        return {"id": v} if isinstance(v, str) else v

    @field_validator("id")
    @classmethod
    def _has_provider(cls, v: str) -> str:
        provider, _, name = v.partition("/")
        if not provider or not name:
            raise ValueError(f"model id {v!r} must look like provider/name, e.g. llamacpp/smollm2-135m-instruct")
        return v

    @property
    def provider(self) -> str:
        return self.id.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.id.split("/", 1)[1]


class RetrievalConfig(Frozen):
    """How each query's chunks are chosen (once, stored: every model and the judge see the same chunks).

    ``split: by_kind`` is Health-Pariksha's (§3.2, §3.4): one ranked top-``top_k`` over the whole KB,
    then split into raw chunks (by rank) and KB updates (latest first). ``split: separate`` retrieves
    ``top_k`` raw chunks and ``top_k_updates`` updates on their own (up to top_k + top_k_updates).
    """

    top_k: int = Field(3, ge=1, le=50)
    split: Literal["by_kind", "separate"] = "by_kind"
    top_k_updates: int = Field(2, ge=0, le=50, description="split: separate only")
    hybrid: bool = True


class JudgeConfig(ModelConfig):
    """The LLM judge: any model id, the metrics it scores, and self-consistency sampling."""

    metrics: tuple[str, ...] = METRICS
    samples: int = Field(1, ge=1, le=20)
    max_tokens: int = Field(200, gt=0)
    sanity_items: int = Field(20, ge=1, le=10_000, description="queries in the judge sanity set (stage 'sanity')")

    @model_validator(mode="after")
    def _samples_need_temperature(self) -> JudgeConfig:
        if self.samples > 1 and self.temperature <= 0:
            raise ValueError("samples > 1 (self-consistency) needs a temperature > 0: at temperature 0 "
                             "every sample is the same")
        return self

    @field_validator("metrics")
    @classmethod
    def _registered(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError("give at least one metric")
        unknown = [m for m in v if m not in METRICS]
        if unknown:
            raise ValueError(f"unknown metric(s) {', '.join(unknown)}; the registry has {', '.join(METRICS)}")
        return v


JUDGE_ONLY_FIELDS = {"metrics", "samples", "sanity_items"}
# The step sections a run's JSON keeps at its top level, in this order (after ``weights_preset``), where every run
# stored them before the steps declared their sections: stored configs and their ``config_hash`` stay the same. Any
# other step's section is stored under ``sections``. Where a section is stored, nothing more: each is declared,
# validated and read like any other (``Step.section``/``settings``, ``RunConfig.section``).
STORED_AT_TOP = ("medcode", "pairwise", "llm_accuracy", "rubric_grader", "translator")


class Price(Frozen):
    """A model's price in US dollars per million tokens (``pipeline.read.cost`` turns tokens into cost)."""

    input: float = Field(ge=0, description="$ per 1M prompt tokens")
    output: float = Field(ge=0, description="$ per 1M completion tokens")


class ReaskConfig(Frozen):
    """Bounded re-asks of outputs a step cannot read (a judge's score, a grader's verdict, a critic's critique or
    label, a checker's verdict), as HealthBench's grader asks again until it can read ``criteria_met``."""

    times: int = Field(2, ge=0, le=10, description="re-asks after the first ask: at most 1 + times backend calls per "
                       "item and run (2: three attempts); 0 never re-asks")
    temperature: float = Field(0.5, ge=0, description="the lowest temperature of a re-ask (a new sample at 0 would "
                               "repeat itself; HealthBench's grader samples at 0.5)")
    on_rerun: bool = Field(True, description="a rerun asks again for the items an earlier run left unparsed")


class RunConfig(Frozen):
    """The whole run: dataset, retrieval, models, judge, weights, concurrency, and each step's own section (Med-CoDE's,
    the translator, a rubric grader, …: ``Step.section``/``settings``, read with ``section(name)``)."""

    name: str
    dataset: str
    db: str = "data/results.duckdb"
    retrieval: RetrievalConfig = RetrievalConfig()
    models: tuple[ModelConfig, ...]
    judge: JudgeConfig | None = None
    jury: tuple[JudgeConfig, ...] = Field((), description="further judges (MedHELM-style jury): give `judge:` a list; "
                                          "every judge scores every item")
    jury_aggregate: Literal["mean", "median"] = "mean"
    weights: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    weights_preset: str | None = Field(None, description="set when `weights:` names a preset (e.g. paper-fit)")
    concurrency: int = Field(8, ge=1, le=1024)
    reask: ReaskConfig = ReaskConfig()
    limit: int | None = Field(None, ge=1, description="evaluate only the first N queries")
    per_language: int | None = Field(None, ge=1, description="evaluate only the first N queries of each language")
    languages: tuple[str, ...] | None = Field(None, description="evaluate only these languages")
    sections: dict[str, Any] = Field(
        default_factory=dict, description="every step's own section (`medcode:`, `translator:`, a new step's `toy:`: "
        "pipeline.steps.spec.Step.section), validated by its step's settings model; read with `section(name)`")
    prices: dict[str, Price] = Field(
        default_factory=dict, description="model id -> {input, output}: $ per 1M tokens; stored with the run, read "
        "by pipeline.read.cost and the dry-run estimate (not part of config_hash: prices change no result)")
    # what the steps it was validated with declare (``load_config(steps=...)``, the catalog's): each step's
    # (role, model) pairs; empty for a config built without them
    _roles: tuple[tuple[str, ModelConfig | str], ...] = PrivateAttr(default=())

    def __eq__(self, other: object) -> bool:
        """Equal when the settings are (a config read back from a run's JSON equals the one loaded): what the steps
        declare of it is derived from them."""
        return isinstance(other, RunConfig) and self.__dict__ == other.__dict__

    __hash__ = Frozen.__hash__

    @model_validator(mode="before")
    @classmethod
    def _step_sections(cls, raw: Any, info: ValidationInfo) -> Any:
        """Every step's own section (``Step.section``: a top-level key of the YAML, or where a stored run's JSON keeps
        it) validated by that step's ``settings`` model into ``sections``; a section given as null is unset. A key
        that is neither a field nor the section of a step given to the validation (``load_config(steps=...)``) is
        refused."""
        if not isinstance(raw, dict):
            return raw
        declared = {step.section: step.settings for step in _given_steps(info) if step.section}
        given = {**(raw.get("sections") or {}),
                 **{k: v for k, v in raw.items() if k in declared or k in STORED_AT_TOP}}
        sections = {}
        for name, value in given.items():
            if value is None:
                continue
            if name not in declared:
                raise SectionError(name, "no step given to this validation declares this section (validate the "
                                   "config with the catalog's steps: pipeline.catalog)")
            settings = declared[name]
            try:
                sections[name] = value if settings is None else settings.model_validate(value)
            except ValidationError as exc:
                err = exc.errors()[0]
                raise SectionError(".".join(str(p) for p in (name, *err["loc"])), err["msg"],
                                   len(exc.errors()) - 1) from None
        return {**{k: v for k, v in raw.items() if k not in given}, "sections": sections}

    @model_serializer(mode="wrap")
    def _stored_layout(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The fields, with the sections of ``STORED_AT_TOP`` at the top level right after ``weights_preset`` (null
        when unset) and every other step's section under ``sections``: the layout of every stored run's JSON."""
        data = handler(self)
        sections = dict(data.get("sections", {}))
        out = {}
        for key, value in data.items():
            out[key] = value if key != "sections" else sections
            if key == "weights_preset":
                out.update({name: sections.pop(name, None) for name in STORED_AT_TOP})
        return out

    @model_validator(mode="after")
    def _declared_by_steps(self, info: ValidationInfo) -> RunConfig:
        """Keep the roles of the models the given steps call (``Step.models``) when they can run."""
        steps = _given_steps(info)
        self._roles = tuple(pair for step in steps if step.missing(self) is None for pair in step.models(self))
        return self

    @model_validator(mode="after")
    def _priced_models_are_used(self) -> RunConfig:
        if not self.prices or not self._roles:  # without the steps (a config built in code) the roles are unknown
            return self
        known = {mc.id if not isinstance(mc, str) else mc for _, mc in self.models_by_role()}
        unknown = sorted(set(self.prices) - known)
        if unknown:
            raise ValueError(f"prices: no model of this config is called {', '.join(unknown)} (price only models the "
                             f"config uses: {', '.join(sorted(known))})")
        return self

    @field_validator("db")
    @classmethod
    def _db_is_a_file(cls, v: str) -> str:
        if Path(v).is_dir():
            raise ValueError(f"{v} is a folder; give the DuckDB file to write, e.g. {Path(v) / 'results.duckdb'}")
        return v

    @field_validator("models", mode="before")
    @classmethod
    def _ids_or_dicts(cls, v):
        return [{"id": m} if isinstance(m, str) else m for m in (v or [])]

    @model_validator(mode="before")
    @classmethod
    def _weights_preset(cls, raw):
        if isinstance(raw, dict) and isinstance(raw.get("weights"), str):
            name = raw["weights"]
            if name not in WEIGHT_PRESETS:
                raise ValueError(f"weights: unknown preset {name!r}; presets: {', '.join(WEIGHT_PRESETS)}")
            raw = {**raw, "weights": dict(WEIGHT_PRESETS[name]), "weights_preset": name}
        return raw

    @model_validator(mode="before")
    @classmethod
    def _judge_list(cls, raw):
        """``judge:`` may be a list of judges: the first is the primary judge, the rest the jury."""
        if isinstance(raw, dict) and isinstance(raw.get("judge"), list | tuple):
            judges = list(raw["judge"])
            if not judges:
                raise ValueError("judge: an empty list; give one judge or several")
            raw = {**raw, "judge": judges[0], "jury": judges[1:]}
        return raw

    @field_validator("jury", mode="before")
    @classmethod
    def _jury_ids(cls, v):
        return [{"id": j} if isinstance(j, str) else j for j in (v or [])]

    @property
    def judges(self) -> tuple[JudgeConfig, ...]:
        """Every judge: the primary one first, then the jury."""
        return () if self.judge is None else (self.judge, *self.jury)

    @model_validator(mode="after")
    def _check(self) -> RunConfig:
        ids = [m.id for m in self.models]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"model ids listed twice: {', '.join(dupes)}")
        judge_ids = [j.id for j in self.judges]
        if len(set(judge_ids)) != len(judge_ids):
            raise ValueError(f"judge: a judge is listed twice ({', '.join(judge_ids)})")
        if self.weights:
            unknown = set(self.weights) - set(METRICS)
            if unknown:
                raise ValueError(f"weights for unknown metrics: {sorted(unknown)}")
            if any(w < 0 for w in self.weights.values()) or sum(self.weights.values()) <= 0:
                raise ValueError("weights must be non-negative and not all zero")
        return self

    def get(self, path: str) -> Any:
        """A setting by its dotted path (``"judge"``, ``"medcode.teacher"``: a field or a step's own section), None
        where it is unset."""
        head, _, rest = path.partition(".")
        value = getattr(self, head, None) if head in type(self).model_fields else self.section(head)
        for part in rest.split(".") if rest else ():
            value = getattr(value, part, None) if not isinstance(value, dict) else value.get(part)
        return value

    def section(self, name: str) -> Any:
        """A step's own section (``Step.section``) as its ``settings`` model (``MedcodeConfig``, ``ModelConfig``,
        …); None when unset."""
        return self.sections.get(name)

    def models_by_role(self) -> list[tuple[str, ModelConfig | str]]:
        """``(role, model)`` of every model this config names, whatever the stages run: each step's declared
        models (``Step.models``), a section's own options or a model id (the steps it was validated with)."""
        return list(self._roles)

    def model_config_for(self, model_id: str) -> ModelConfig:
        """Options for a model id: its entry in ``models``, a judge's (less the judge-only fields), else the options a
        step's section gives it (the critic, the translator, a grader …), else defaults."""
        for m in self.models:
            if m.id == model_id:
                return m
        for judge in self.judges:
            if judge.id == model_id:
                return ModelConfig(**judge.model_dump(exclude=JUDGE_ONLY_FIELDS))
        for _, mc in self.models_by_role():
            if isinstance(mc, ModelConfig) and mc.id == model_id:
                return mc
        return ModelConfig(id=model_id)

    def concurrency_for(self, model: ModelConfig) -> int:
        return model.concurrency or self.concurrency

    def to_json(self) -> str:
        return self.model_dump_json()

    def config_hash(self) -> str:
        blob = json.dumps(self.model_dump(mode="json", exclude={"prices"}), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def load_config(path: str | Path, *, steps: Iterable[Step], **overrides) -> RunConfig:
    """Read a YAML run configuration; ``overrides`` (e.g. db=..., limit=...) replace top-level keys. ``steps``: the
    step declarations it is validated with (the catalog's, ``pipeline.catalog.Catalog.load_config``): a step's own
    section, the models each step calls.

    Raises UserError naming the file and the offending field.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: config file not found")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise UserError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(raw, dict):
        raise UserError(f"{path}: expected a mapping of settings at the top level")
    raw.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return validate_config(raw, steps)
    except ValidationError as exc:
        err = exc.errors()[0]
        cause = (err.get("ctx") or {}).get("error")
        field, msg, others = (cause.field, cause.msg, cause.others) if isinstance(cause, SectionError) else (
            ".".join(str(p) for p in err["loc"]) or "(top level)", err["msg"], len(exc.errors()) - 1)
        more = f" (+{others} more)" if others else ""
        raise UserError(f"{path}: field {field}: {msg}{more}") from None


def validate_config(raw: Any, steps: Iterable[Step]) -> RunConfig:
    """``raw`` (a YAML's settings, a stored run's JSON) validated with ``steps``' declarations (their sections and
    roles: ``_given_steps``); a ``pydantic.ValidationError`` when it does not validate."""
    return RunConfig.model_validate(raw, context={"steps": tuple(steps)})


class SectionError(ValueError):
    """A step's section that does not validate: the dotted field, the message and how many other errors the
    section has, for ``load_config``'s line."""

    def __init__(self, field: str, msg: str, others: int = 0) -> None:
        super().__init__(f"{field}: {msg}")
        self.field, self.msg, self.others = field, msg, others


def _given_steps(info: ValidationInfo) -> tuple[Step, ...]:
    """The step declarations a validation was given (none for a config built in code)."""
    return tuple((info.context or {}).get("steps", ()))
