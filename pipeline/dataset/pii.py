"""Personal identifiers in patients' messages, found with Presidio and masked with its anonymizer.

Presidio's analyzer runs here on its pattern recognizers only: its NLP engine is a blank spaCy English
pipeline (tokenizer, no trained model, nothing downloaded), so names come from the self-introduction
recognizer below rather than from NER. Recognizers: Presidio's phone (``phonenumbers``, region IN), e-mail
(its public-suffix check offline, from tldextract's bundled snapshot), Indian PAN and Aadhaar (checksum),
plus the patterns Indian patients send: mobile numbers with or without +91 and spaces, 12-digit
Aadhaar-like numbers in groups of four (no checksum: patients mistype), self-introduced names ("my name
is …", "I am Ravi Kumar", "patient Lakshmi Devi bed 12", "mera naam … hai").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

KINDS: dict[str, str] = {  # presidio entity -> the kind reported and the mask written
    "PHONE_NUMBER": "PHONE", "IN_PHONE": "PHONE", "EMAIL_ADDRESS": "EMAIL", "IN_AADHAAR": "AADHAAR",
    "AADHAAR_LIKE": "AADHAAR", "IN_PAN": "PAN", "PERSON": "NAME",
}
PII_KINDS: tuple[str, ...] = ("PHONE", "EMAIL", "AADHAAR", "PAN", "NAME")
MIN_SCORE = 0.3  # presidio's weakest PAN pattern (any 10 letters/digits, 0.05) stays out

_NAME = r"[A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,2}"
_name_any_case = r"[A-Za-z]+(?:\s+(?!(?:and|from|here|hai|i|my|the|with|age|aged|bed|ward)\b)[A-Za-z]+){0,2}"
NAME_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(rf"\b(?i:my\s+name\s+is|my\s+name's|name\s*[:\-])\s+(?P<name>{_name_any_case})"),
    re.compile(rf"\b(?i:i\s+am|i'm|this\s+is|myself)\s+(?P<name>{_NAME})"),
    re.compile(rf"\b(?i:mera\s+naam|en\s+peyar|naa\s+peru|nanna\s+hesaru)\s+(?P<name>{_name_any_case}?)\s+(?i:hai|he|hain|aahum|ide|ஆகும்)\b"),
    re.compile(rf"\b(?i:patient(?:\s+name)?|pt\.?)\s*[:\-]?\s+(?:(?i:mr|mrs|ms|smt|shri|sri)\.?\s+)?(?P<name>{_NAME})"
               r"(?=[\s,]+(?i:bed|ward|age|aged|room|\d))"),
    re.compile(rf"\b(?i:mr|mrs|ms|smt|shri|sri|dr)\.?\s+(?P<name>{_NAME})"),
)


@dataclass(frozen=True)
class Found:
    """One identifier: its kind (``PII_KINDS``), where it is, and presidio's score."""

    kind: str
    start: int
    end: int
    score: float


def _self_name_recognizer():
    from presidio_analyzer import EntityRecognizer, RecognizerResult

    class SelfNameRecognizer(EntityRecognizer):
        """Names patients give themselves or their relative ("my name is …", "patient … bed 12")."""

        def load(self) -> None:
            pass

        def analyze(self, text, entities, nlp_artifacts=None):
            out = []
            for pattern in NAME_PATTERNS:
                for m in pattern.finditer(text):
                    out.append(RecognizerResult("PERSON", m.start("name"), m.end("name"), 0.7))
            return out

    return SelfNameRecognizer(supported_entities=["PERSON"], name="SelfNameRecognizer")


def _offline_email_recognizer():
    import tldextract
    from presidio_analyzer.predefined_recognizers import EmailRecognizer

    extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)  # the bundled list: no download

    class OfflineEmailRecognizer(EmailRecognizer):
        def validate_result(self, pattern_text: str) -> bool:
            return bool(extract(pattern_text).fqdn)

    return OfflineEmailRecognizer()


@cache
def analyzer():
    """Presidio's AnalyzerEngine on a blank spaCy pipeline with the recognizers above (loads nothing remote)."""
    import spacy
    from presidio_analyzer import AnalyzerEngine, Pattern, PatternRecognizer, RecognizerRegistry
    from presidio_analyzer.nlp_engine import SpacyNlpEngine
    from presidio_analyzer.predefined_recognizers import InAadhaarRecognizer, InPanRecognizer, PhoneRecognizer

    class BlankSpacyEngine(SpacyNlpEngine):
        """spaCy's tokenizer without a trained model: Presidio's pattern recognizers need no more."""

        def __init__(self) -> None:
            super().__init__(models=[{"lang_code": "en", "model_name": "blank:en"}])

        def load(self) -> None:
            self.nlp = {"en": spacy.blank("en")}

    engine = BlankSpacyEngine()
    engine.load()
    registry = RecognizerRegistry(supported_languages=["en"])
    registry.add_recognizer(PhoneRecognizer(supported_regions=("IN",)))
    registry.add_recognizer(_offline_email_recognizer())
    registry.add_recognizer(InPanRecognizer())
    registry.add_recognizer(InAadhaarRecognizer())
    registry.add_recognizer(PatternRecognizer("IN_PHONE", name="IndianMobileRecognizer", patterns=[
        Pattern("mobile, +91 optional", r"(?<![\d+])(?:(?:\+|00)?91[\s-]?|0)?[6-9]\d{4}[\s-]?\d{5}(?!\d)", 0.6),
        Pattern("mobile in 3-3-4", r"(?<![\d+])(?:(?:\+|00)?91[\s-]?)?[6-9]\d{2}[\s-]\d{3}[\s-]\d{4}(?!\d)", 0.6),
    ]))
    registry.add_recognizer(PatternRecognizer("AADHAAR_LIKE", name="AadhaarLikeRecognizer", patterns=[
        Pattern("12 digits in groups of four", r"(?<!\d)[2-9]\d{3}[\s-]?\d{4}[\s-]?\d{4}(?!\d)", 0.6),
    ]))
    registry.add_recognizer(_self_name_recognizer())
    return AnalyzerEngine(registry=registry, nlp_engine=engine, supported_languages=["en"])


def find_pii(text: str) -> list[Found]:
    """Identifiers in ``text``, overlapping finds merged (the higher score's kind wins), in text order."""
    if not text or not text.strip():
        return []
    results = analyzer().analyze(text, language="en", score_threshold=MIN_SCORE)
    found = sorted((Found(KINDS[r.entity_type], r.start, r.end, r.score) for r in results if r.entity_type in KINDS),
                   key=lambda f: (f.start, -f.end))
    merged: list[Found] = []
    for f in found:
        if merged and f.start < merged[-1].end:
            last = merged[-1]
            kind = last.kind if last.score >= f.score else f.kind
            merged[-1] = Found(kind, last.start, max(last.end, f.end), max(last.score, f.score))
        else:
            merged.append(f)
    return merged


def mask(text: str, found: list[Found] | None = None) -> str:
    """``text`` with each identifier replaced by ``<KIND>`` (presidio-anonymizer's replace operator)."""
    from presidio_anonymizer import AnonymizerEngine
    from presidio_anonymizer.entities import OperatorConfig, RecognizerResult

    found = find_pii(text) if found is None else found
    if not found:
        return text
    results = [RecognizerResult(f.kind, f.start, f.end, f.score) for f in found]
    operators = {kind: OperatorConfig("replace", {"new_value": f"<{kind}>"}) for kind in PII_KINDS}
    return AnonymizerEngine().anonymize(text=text, analyzer_results=results, operators=operators).text


def measure(labelled: list[dict]):
    """Per kind, over messages labelled ``{"text", "pii": [{"kind", "value"}]}``: precision and recall of "this
    message holds a <kind>" (scikit-learn, via ``themes.theme_report``) and ``masked``, the share of labelled
    values of that kind gone from the masked text."""
    from pipeline.dataset.themes import theme_report

    finds = [find_pii(item["text"]) for item in labelled]
    report = theme_report([[p["kind"] for p in item.get("pii", [])] for item in labelled],
                          [[f.kind for f in found] for found in finds], themes=PII_KINDS)
    report = report.rename(columns={"theme": "kind"})
    gone = {k: [0, 0] for k in PII_KINDS}
    for item, found in zip(labelled, finds, strict=True):
        masked = mask(item["text"], found)
        for p in item.get("pii", []):
            gone[p["kind"]][0] += p["value"] not in masked
            gone[p["kind"]][1] += 1
    report["masked"] = [gone[k][0] / gone[k][1] if gone[k][1] else float("nan") for k in PII_KINDS]
    return report
