"""Med-CoDE: a critic writes a critique of each response against the ground truth; a classifier turns
the critique into a probability distribution over the degrees of disagreement None, Low, Moderate, High.

Classifiers (config ``medcode.classifier``):

- ``logprobs`` — zero-shot: the critic model is asked for the degree in one word and the first
  generated token's top-20 log-probabilities are read. A token counts for a label when it is the
  label or a prefix of it of at least three letters (``Mod`` → Moderate), case and spaces ignored;
  the probabilities of the tokens of each label are added and renormalised over the four labels.
  A label absent from the top-k gets 0. When no label token is in the top-k at all the
  distribution is uniform and the ``classifier`` column says ``logprobs:no-label-token``.
- ``trained`` (the paper's way, the default configs) — the studio's checkpoint in
  ``.cache/medcode-classifier/``, fine-tuned on ``data/medcode-critiques`` by ``make classifier``;
- a path — any fine-tuned ``transformers`` sequence classifier (``medcode train-classifier``),
  softmax over its four labels.

``logprobs`` is not the paper's method (Med-CoDE classifies critiques with a fine-tuned BERT, §4.2).

Prompts: ``prompts/medcode_critique_{system,user}.txt`` and ``prompts/medcode_classify_{system,user}.txt``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from pipeline.config import Frozen, ModelConfig, RunConfig
from pipeline.dataset import Query
from pipeline.disagreement import LABEL_ALIASES, LABELS, PROB_COLUMNS
from pipeline.errors import UserError
from pipeline.models.base import ChatRequest, Completion, GenerateParams, Message, Model
from pipeline.models.reference import scorable
from pipeline.prompts import load_text
from pipeline.steps.context import Call, Inputs, Pending, ResponseItem, RunContext, finished, pending_of
from pipeline.steps.spec import Step
from pipeline.store.rows import CritiqueRow

NO_LABEL_TOKEN = "logprobs:no-label-token"
CRITIQUE_MAX_TOKENS = 120  # ~60 words, Med-CoDE's average critique length is 58.95 words
MEDCODE_BLOCK = 32  # responses critiqued and classified per block
EMPTY_CRITIQUE = "the critic wrote an empty critique"  # stored as the item's error, never classified
TRAINED_CLASSIFIER = Path(__file__).resolve().parents[2] / ".cache" / "medcode-classifier"  # classifier: trained


class MedcodeConfig(Frozen):
    """The config's ``medcode:`` section (this stage's and ``medcode-label``'s): the critic, the classifier of its
    critiques, the teacher that labels critiques for training."""

    critic: str | ModelConfig = "llamacpp/smollm2-135m-instruct"
    classifier: str = Field(
        "trained",
        min_length=1,
        description="'trained' (the paper's way: the studio's checkpoint fine-tuned on data/medcode-critiques "
        "by `make classifier`, in .cache/medcode-classifier/), a path to another fine-tuned transformers "
        "sequence-classification checkpoint, or 'logprobs' (zero-shot from the critic's label-token "
        "log-probabilities; not the paper's method)",
    )

    teacher: ModelConfig | None = Field(
        None, description="Med-CoDE's GPT-4 step (`python -m pipeline medcode label`): this model writes a critique "
        "and a None/Low/Moderate/High label for each stored response, into labelled_critiques (training data)")

    @property
    def critic_id(self) -> str:
        return self.critic if isinstance(self.critic, str) else self.critic.id


# -- prompts ---------------------------------------------------------------------------------------
def critique_messages(query: Query, response: str) -> tuple[Message, ...]:
    """The critic's prompt: question (with its English rendering), ground truth, response."""
    question = query.query if not query.query_en else f"{query.query} (in English: {query.query_en})"
    user = load_text("medcode_critique_user.txt").format(
        question=question, ground_truth=query.gt_response, response=response)
    return ({"role": "system", "content": load_text("medcode_critique_system.txt")},
            {"role": "user", "content": user})


def classify_messages(critique: str) -> tuple[Message, ...]:
    """The zero-shot classifier's prompt: the label definitions of Med-CoDE §3.1 and the critique."""
    return ({"role": "system", "content": load_text("medcode_classify_system.txt")},
            {"role": "user", "content": load_text("medcode_classify_user.txt").format(critique=critique)})


def critique_request(query: Query, response: str, max_tokens: int = CRITIQUE_MAX_TOKENS) -> ChatRequest:
    return ChatRequest(messages=critique_messages(query, response),
                       params=GenerateParams(max_tokens=max_tokens, temperature=0.0))


def classify_request(critique: str) -> ChatRequest:
    return ChatRequest(messages=classify_messages(critique),
                       params=GenerateParams(max_tokens=1, temperature=0.0, top_logprobs=20))


# -- classifiers -----------------------------------------------------------------------------------
def label_for_token(token: str) -> str | None:
    """The label a first token stands for: the label itself or a ≥3-letter prefix of it."""
    t = token.strip().strip("\"'*_`:.").lower()
    if not t:
        return None
    for label in LABELS:
        name = label.lower()
        if t == name or (len(t) >= 3 and name.startswith(t)):
            return label
    return None


def distribution_from_logprobs(top_logprobs: dict[str, float] | None) -> tuple[list[float], str]:
    """(p_none, p_low, p_moderate, p_high) and the classifier tag, from first-token log-probabilities."""
    mass = dict.fromkeys(LABELS, 0.0)
    for token, logprob in (top_logprobs or {}).items():
        label = label_for_token(token)
        if label is not None and logprob is not None and math.isfinite(logprob):
            mass[label] += math.exp(logprob)
    total = sum(mass.values())
    if total <= 0:
        return [0.25] * 4, NO_LABEL_TOKEN
    return [mass[label] / total for label in LABELS], "logprobs"


def argmax_label(probs: Sequence[float]) -> str:
    return LABELS[int(np.argmax(probs))]


@functools.cache
def load_classifier(path: str):
    """(tokenizer, model, label order) of a fine-tuned checkpoint, loaded offline once per process."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no "Loading weights" bar inside the step's own progress display
    folder = classifier_path(path)
    if not (folder / "config.json").is_file():
        raise UserError(f"medcode classifier {path}: not a transformers checkpoint folder (no config.json); "
                        "train one with `python -m pipeline medcode train-classifier CSV -o FOLDER`")
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(str(folder), local_files_only=True).eval()
    id2label = {int(k): v for k, v in model.config.id2label.items()}
    names = [LABEL_ALIASES.get(str(id2label[i]).lower()) for i in range(len(id2label))]
    if sorted(n for n in names if n) != sorted(LABELS) or len(names) != 4:
        raise UserError(f"medcode classifier {path}: its labels {list(id2label.values())} are not "
                        f"{', '.join(LABELS)}")
    card = json.loads((folder / "medcode.json").read_text()) if (folder / "medcode.json").is_file() else {}
    max_length = int(card.get("max_length", card.get("hyperparameters", {}).get("max_length", 208)))
    return tokenizer, model, [names.index(label) for label in LABELS], max_length


def classify_with_checkpoint(path: str, critiques: list[str], batch_size: int = 32) -> np.ndarray:
    """Softmax probabilities (rows in LABELS order) of a fine-tuned classifier for each critique."""
    import torch

    tokenizer, model, order, max_length = load_classifier(str(path))
    out = []
    with torch.no_grad():
        for start in range(0, len(critiques), batch_size):
            enc = tokenizer(critiques[start:start + batch_size], truncation=True, max_length=max_length,
                            padding=True, return_tensors="pt")
            probs = torch.softmax(model(**enc).logits.double(), dim=-1).numpy()[:, order]
            out.append(probs / probs.sum(axis=1, keepdims=True))
    return np.concatenate(out) if out else np.zeros((0, 4))


def critique_result(critique: str, probs: Sequence[float] | None, classifier: str) -> dict[str, Any]:
    """Critique, distribution, label and classifier of one item; ``probs=None`` records an empty critique
    as a failure (no distribution, ``error`` set) instead of classifying nothing."""
    if probs is None:
        return {"critique": critique, **dict.fromkeys(PROB_COLUMNS), "label": None, "classifier": classifier,
                "error": EMPTY_CRITIQUE}
    probs = [float(p) for p in probs]
    return {"critique": critique, **dict(zip(PROB_COLUMNS, probs, strict=True)), "label": argmax_label(probs),
            "classifier": classifier, "error": None}


async def critique_response(critic: Model, *, query: Query, response: str, classifier: str = "logprobs") -> dict:
    """Critique one response and classify the critique (the playground's entry; the stage uses the same code).

    Returns ``critique``, ``p_none``, ``p_low``, ``p_moderate``, ``p_high`` (summing to 1), ``label``
    (the most probable) and ``classifier``. Raises RuntimeError when the critic call fails.
    """
    max_tokens = min(critic.backend.config.max_tokens, CRITIQUE_MAX_TOKENS)
    done = await critic.generate(critique_request(query, response, max_tokens))
    if not done.ok:
        raise RuntimeError(f"critic {critic.id} failed: {done.error}")
    critique = done.text.strip()
    if not critique:
        return critique_result(critique, None, classifier_tag(classifier))
    if classifier == "logprobs":
        scored = await critic.generate(classify_request(critique))
        if not scored.ok:
            raise RuntimeError(f"critic {critic.id} failed to classify: {scored.error}")
        probs, tag = distribution_from_logprobs(scored.top_logprobs)
        return critique_result(critique, probs, tag)
    import asyncio

    probs = (await asyncio.to_thread(classify_with_checkpoint, classifier, [critique]))[0]
    return critique_result(critique, probs, classifier_tag(classifier))


def classifier_path(classifier: str) -> Path:
    """The checkpoint folder of a ``medcode.classifier`` setting: 'trained' is the studio's default checkpoint
    (``make classifier``; UserError saying so when it is missing), anything else a path."""
    if classifier == "trained":
        if not (TRAINED_CLASSIFIER / "config.json").is_file():
            raise UserError(f"medcode classifier 'trained': no checkpoint in {TRAINED_CLASSIFIER}; make it with "
                            "`make classifier` (trains on data/medcode-critiques/critiques.csv, a few minutes on CPU)")
        return TRAINED_CLASSIFIER
    return Path(classifier).expanduser()


def classifier_tag(classifier: str) -> str:
    """How a distribution's classifier is named in ``critiques.classifier``: 'logprobs', or
    ``checkpoint:<folder>@<first 12 hex of the sha256 of its model card medcode.json>`` (retraining changes
    it; ``pipeline.train.classifier.card_for_tag`` finds the card again)."""
    if classifier == "logprobs":
        return "logprobs"
    folder = classifier_path(classifier)
    card = folder / "medcode.json"
    sha = hashlib.sha256(card.read_bytes()).hexdigest()[:12] if card.is_file() else "no-card"
    return f"checkpoint:{folder.name}@{sha}"


# -- the step --------------------------------------------------------------------------------------
def _critic_config(ctx: Inputs) -> ModelConfig:
    critic = ctx.config.section("medcode").critic
    return critic if isinstance(critic, ModelConfig) else ctx.config.model_config_for(critic)


def pending(ctx: Inputs) -> list[Pending]:
    """The critic's calls for every selected response without a critique of its current text by the configured
    classifier (a stored failure is asked again); with ``logprobs`` each critique's classification follows
    (``then``). Without the classifier's checkpoint nothing counts as finished (the run stops before, the dry run
    says so)."""
    mc = ctx.config.section("medcode")
    if mc is None:
        return []
    critic = _critic_config(ctx)
    max_tokens = min(critic.max_tokens, CRITIQUE_MAX_TOKENS)
    try:
        wanted = classifier_tag(mc.classifier)
    except UserError:
        wanted = None

    def is_current(call: Call, done: tuple) -> bool:
        response_hash, tag = done
        same = wanted is not None and (tag == wanted or (wanted == "logprobs" and tag.startswith("logprobs")))
        return response_hash == call.item.response_hash and same

    def classify(critiques: list[str | None]) -> Pending:  # item: the critique's position; one not known yet is
        return Pending("medcode-classify", critic, [  # assumed max_tokens long
            Call((), classify_request(text.strip() if text is not None else ""), i,
                 0 if text is not None else max_tokens) for i, text in enumerate(critiques)])

    done = finished(ctx, "critiques", ("query_id", "model_id"), where={"critic_id": critic.id},
                    also=("classifier",), unparsed="error IS NOT NULL")
    calls = [Call(it.key, critique_request(it.query, it.text, max_tokens), it, it.assumed)
             for it in scorable("medcode", ctx.responses())]
    return [pending_of("medcode-critique", critic, calls, done, is_current, unparsed=lambda c: not c.text.strip(),
                       then=classify if mc.classifier == "logprobs" else None)]


async def step_medcode(ctx: RunContext) -> None:
    """Critique what ``pending`` says and classify each critique; one ``critiques`` row per response.

    A failed critic call is counted and retried on the next run; an empty critique is asked again (``reask``),
    and one still empty is stored as a failure (``error``, no distribution; asked again by the next run), so no
    response is ever reported done without its row.
    """
    import asyncio

    mc = ctx.config.section("medcode")
    (p,) = pending(ctx)
    critic_cfg = p.model
    wanted_tag = classifier_tag(mc.classifier)
    todo = p.calls

    def row_for(item: ResponseItem, critique: str, probs: Sequence[float] | None, tag: str) -> CritiqueRow:
        return CritiqueRow(dataset=ctx.dataset_name, query_id=item.query.query_id, model_id=item.model_id,
                           critic_id=critic_cfg.id, **critique_result(critique, probs, tag),
                           response_hash=item.response_hash, run_id=ctx.run_id)

    def empty_or_nothing(call: Call, c: Completion) -> list[CritiqueRow]:
        return [row_for(call.item, "", None, wanted_tag)] if c.ok and not c.text.strip() else []

    # Critique, then classify, a block at a time: a critique is saved only with its distribution,
    # so an interrupted run loses at most one block (its critiques stay in the LLM cache anyway).
    for start in range(0, max(len(todo), 1), MEDCODE_BLOCK):
        block = todo[start:start + MEDCODE_BLOCK]
        span = f"{start + 1}-{start + len(block)} of {len(todo)}" if len(todo) > MEDCODE_BLOCK else ""
        critiques = await ctx.send(p, empty_or_nothing, label=f"medcode critique {critic_cfg.id} {span}".rstrip(),
                                   start=start, stop=start + MEDCODE_BLOCK)
        ok = [(call.item, c.text.strip()) for call, c in zip(block, critiques, strict=True)
              if c.ok and c.text.strip()]
        if p.then is not None:  # logprobs: the critic classifies its critiques
            def to_rows(call: Call, c: Completion, ok=ok) -> list[CritiqueRow]:
                if not c.ok:
                    return []
                probs, tag = distribution_from_logprobs(c.top_logprobs)
                return [row_for(*ok[call.item], probs, tag)]

            await ctx.send(p.then([text for _, text in ok]), to_rows,
                           label=f"medcode classify (logprobs of {critic_cfg.id}) {span}".rstrip())
            continue
        if not ok:
            continue
        started = time.perf_counter()
        probs = await asyncio.to_thread(classify_with_checkpoint, mc.classifier, [text for _, text in ok])
        ctx.write([row_for(item, text, dist, wanted_tag) for (item, text), dist in zip(ok, probs, strict=True)])
        ctx.note("medcode-classify", wanted_tag, items=len(ok), wall_s=time.perf_counter() - started)


def classifier_missing(config: RunConfig) -> str | None:
    """Why the medcode stage's classifier checkpoint cannot be used (one line saying what to run), or None:
    no medcode stage, ``logprobs``, or a checkpoint folder that is there. The dry run prints it; a run stops
    with it before any call is made."""
    mc = config.section("medcode")
    if mc is None or mc.classifier == "logprobs":
        return None
    try:
        folder = classifier_path(mc.classifier)  # 'trained' without its checkpoint: "make classifier"
    except UserError as exc:
        return str(exc)
    if not (folder / "config.json").is_file():
        return (f"medcode classifier {mc.classifier!r}: no checkpoint in {folder} (no config.json); train one with "
                f"`python -m pipeline medcode train-classifier CSV -o {folder}`")
    return None


STEP = Step(run=step_medcode, pending=pending, requires=("medcode",),
            models=lambda config: [("critic", config.section("medcode").critic)], check=classifier_missing,
            rows=(CritiqueRow,), section="medcode", settings=MedcodeConfig)
