"""Personal identifiers in patients' messages, found with Presidio and masked with its anonymizer.

Presidio's analyzer runs here on its pattern recognizers only: its NLP engine is a blank spaCy English
pipeline (tokenizer, no trained model, nothing downloaded), so names come from ``pii_india.find_names`` rather
than from NER. Recognizers: Presidio's phone (``phonenumbers``, region IN), e-mail (its public-suffix check
offline, from tldextract's bundled snapshot), its Indian ones (PAN, Aadhaar with its checksum, passport, voter id,
vehicle registration), plus the patterns Indian patients send: mobile numbers with or without +91 and spaces,
and ``pii_india``'s 12-digit Aadhaar-like numbers in groups of four with any separator or spelled out in words (no
checksum: patients mistype), names in every script (its rules and the learned recognizer of ``pii_model``),
addresses with PIN codes, ABHA numbers and addresses and hospital record numbers. Digits of any script are read
as ASCII first (``pii_india.ascii_digits``, offsets unchanged), so ``९८७६५४३२१०`` is a phone number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

KINDS: dict[str, str] = {  # presidio entity -> the kind reported and the mask written
    "PHONE_NUMBER": "PHONE", "IN_PHONE": "PHONE", "EMAIL_ADDRESS": "EMAIL", "IN_AADHAAR": "AADHAAR",
    "AADHAAR_LIKE": "AADHAAR", "IN_PAN": "PAN", "PERSON": "NAME", "IN_ADDRESS": "ADDRESS", "IN_ABHA": "ABHA",
    "IN_MRN": "MRN", "IN_PASSPORT": "PASSPORT", "IN_VOTER": "VOTER_ID", "IN_VEHICLE_REGISTRATION": "VEHICLE",
}
PII_KINDS: tuple[str, ...] = ("PHONE", "EMAIL", "AADHAAR", "PAN", "NAME", "ADDRESS", "ABHA", "MRN", "PASSPORT",
                              "VOTER_ID", "VEHICLE")
MIN_SCORE = 0.3  # presidio's weakest PAN pattern (any 10 letters/digits, 0.05) stays out
PRIORITY = {"ABHA": 2, "MRN": 1}  # on overlap these win, then the longer find (+91 and 12 digits: a phone number)

@dataclass(frozen=True)
class Found:
    """One identifier: its kind (``PII_KINDS``), where it is, and presidio's score."""

    kind: str
    start: int
    end: int
    score: float


# Each Indian entity's finder (pii_india), its score, and the context words Presidio's context enhancer looks for
# near a find (a find with one of them nearby scores higher, and the decision process says which word did it)
INDIA_ENTITIES: dict[str, tuple[str, float, tuple[str, ...]]] = {
    "PERSON": ("find_names", 0.7, ()),  # names carry their own cues (pii_india's cue phrases, in every script)
    "IN_ADDRESS": ("find_addresses", 0.8, ("address", "pin", "pincode", "पता", "முகவரி", "చిరునామా", "ವಿಳಾಸ")),
    "IN_ABHA": ("find_abha", 1.0, ("abha", "health id", "आभा")),
    "IN_MRN": ("find_record_numbers", 0.9, ("mrn", "uhid", "ip", "op", "registration", "file", "पंजीकरण")),
    "AADHAAR_LIKE": ("find_aadhaar", 0.6, ("aadhaar", "aadhar", "adhaar", "uid", "आधार", "ஆதார்", "ఆధార్", "ಆಧಾರ್")),
}


def _india_recognizers() -> list:
    """One Presidio recognizer per Indian entity of ``INDIA_ENTITIES`` (names in every script, addresses with PIN
    codes, ABHA numbers/addresses, hospital record numbers, Aadhaar-like numbers with any separator or spelled
    out), each with its context words."""
    from presidio_analyzer import AnalysisExplanation, EntityRecognizer, RecognizerResult

    from pipeline.dataset import pii_india

    class FinderRecognizer(EntityRecognizer):
        """A ``pii_india`` finder as a Presidio recognizer of one entity."""

        def __init__(self, entity: str, finder: str, score: float, context: tuple[str, ...]) -> None:
            self.find, self.score = getattr(pii_india, finder), score
            name = "India" + "".join(part.title() for part in entity.split("_")) + "Recognizer"
            super().__init__(supported_entities=[entity], name=name, context=list(context))

        def load(self) -> None:
            pass

        def analyze(self, text, entities, nlp_artifacts=None):
            [entity] = self.supported_entities
            return [RecognizerResult(entity, start, end, self.score, AnalysisExplanation(
                self.name, self.score, textual_explanation=f"pii_india.{self.find.__name__}"))
                for start, end in self.find(text)]

    return [FinderRecognizer(entity, *spec) for entity, spec in INDIA_ENTITIES.items()]


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
    from presidio_analyzer.predefined_recognizers import (
        InAadhaarRecognizer,
        InPanRecognizer,
        InPassportRecognizer,
        InVehicleRegistrationRecognizer,
        InVoterRecognizer,
        PhoneRecognizer,
    )

    class BlankSpacyEngine(SpacyNlpEngine):
        """spaCy's tokenizer without a trained model: Presidio's pattern recognizers need no more. Each token's
        lemma is its lower case, so that Presidio's context words match ("Aadhaar", "UHID")."""

        def __init__(self) -> None:
            super().__init__(models=[{"lang_code": "en", "model_name": "blank:en"}])

        def load(self) -> None:
            nlp = spacy.blank("en")
            nlp.add_pipe("pariksha_lower_lemmas")
            self.nlp = {"en": nlp}

    if "pariksha_lower_lemmas" not in spacy.registry.factories:
        @spacy.Language.component("pariksha_lower_lemmas")
        def lower_lemmas(doc):
            for token in doc:
                token.lemma_ = token.lower_
            return doc

    engine = BlankSpacyEngine()
    engine.load()
    registry = RecognizerRegistry(supported_languages=["en"])
    registry.add_recognizer(PhoneRecognizer(supported_regions=("IN",)))
    registry.add_recognizer(_offline_email_recognizer())
    registry.add_recognizer(InPanRecognizer())
    registry.add_recognizer(InAadhaarRecognizer())
    registry.add_recognizer(InVoterRecognizer())
    registry.add_recognizer(InVehicleRegistrationRecognizer(  # its patterns below MIN_SCORE could never count
        patterns=[p for p in InVehicleRegistrationRecognizer.PATTERNS if p.score >= MIN_SCORE]))
    passport = InPassportRecognizer().patterns[0].regex  # its score (0.1) needs the word "passport" before it
    registry.add_recognizer(PatternRecognizer("IN_PASSPORT", name="CuedPassportRecognizer", patterns=[
        Pattern("passport after its cue", rf"(?i:passport)\D{{0,25}}\K{passport}", 0.8)]))
    alone = r"(?<![\d+])(?<!\d[\s-])"  # not the tail of a longer number (an ABHA number, a record number)
    registry.add_recognizer(PatternRecognizer("IN_PHONE", name="IndianMobileRecognizer", patterns=[
        Pattern("mobile, +91 optional", rf"{alone}(?:(?:\+|00)?91[\s-]?|0)?[6-9]\d{{4}}[\s-]?\d{{5}}(?!\d)", 0.6),
        Pattern("mobile in 3-3-4", rf"{alone}(?:(?:\+|00)?91[\s-]?)?[6-9]\d{{2}}[\s-]\d{{3}}[\s-]\d{{4}}(?!\d)", 0.6),
    ]))
    for recognizer in _india_recognizers():
        registry.add_recognizer(recognizer)
    return AnalyzerEngine(registry=registry, nlp_engine=engine, supported_languages=["en"])


def find_pii(text: str) -> list[Found]:
    """Identifiers in ``text``, overlapping finds merged (the higher score's kind wins), in text order."""
    from pipeline.dataset.pii_india import ascii_digits

    if not text or not text.strip():
        return []
    results = analyzer().analyze(ascii_digits(text), language="en", score_threshold=MIN_SCORE)
    found = sorted((Found(KINDS[r.entity_type], r.start, r.end, r.score) for r in results if r.entity_type in KINDS),
                   key=lambda f: (f.start, -f.end))
    merged: list[Found] = []
    for f in found:
        if merged and f.start < merged[-1].end:
            last = merged[-1]
            rank = lambda x: (PRIORITY.get(x.kind, 0), x.end - x.start, x.score)  # noqa: E731
            kind = last.kind if rank(last) >= rank(f) else f.kind
            merged[-1] = Found(kind, last.start, max(last.end, f.end), max(last.score, f.score))
        else:
            merged.append(f)
    return merged


@cache
def anonymizer():
    """presidio-anonymizer's engine and its replace operators (``<KIND>``), built once per process."""
    from presidio_anonymizer import AnonymizerEngine
    from presidio_anonymizer.entities import OperatorConfig

    return AnonymizerEngine(), {kind: OperatorConfig("replace", {"new_value": f"<{kind}>"}) for kind in PII_KINDS}


def mask(text: str, found: list[Found] | None = None) -> str:
    """``text`` with each identifier replaced by ``<KIND>`` (presidio-anonymizer's replace operator)."""
    from presidio_anonymizer.entities import RecognizerResult

    found = find_pii(text) if found is None else found
    if not found:
        return text
    engine, operators = anonymizer()
    results = [RecognizerResult(f.kind, f.start, f.end, f.score) for f in found]
    return engine.anonymize(text=text, analyzer_results=results, operators=operators).text


SCRIPT_OF_LANGUAGE = {"en": "latn", "hinglish": "latn", "hi": "deva", "ta": "taml", "te": "telu", "kn": "knda",
                      "bn": "beng"}


def measure(labelled: list[dict]):
    """Per script and kind, over messages labelled ``{"text", "lang", "pii": [{"kind", "value"}]}``: identifiers
    labelled and found, ``precision`` (finds that overlap a labelled identifier of their kind), ``recall``
    (labelled identifiers a find of their kind overlaps) and ``masked`` (labelled values none of whose words of
    three or more characters is left in the masked text, whatever the mask). Rows per (script, kind), then per
    kind over all scripts (script ``all``)."""
    import pandas as pd

    counts: dict[tuple[str, str], list[int]] = {}  # (script, kind) -> [labelled, caught, masked, found, right]
    for item in labelled:
        text = item["text"]
        script = SCRIPT_OF_LANGUAGE[item["lang"]]
        found = find_pii(text)
        masked = mask(text, found)
        spans = [(p["kind"], text.index(p["value"]), text.index(p["value"]) + len(p["value"]))
                 for p in item.get("pii", [])]
        for kind, start, end in spans:
            row = counts.setdefault((script, kind), [0, 0, 0, 0, 0])
            row[0] += 1
            row[1] += any(f.kind == kind and f.start < end and start < f.end for f in found)
            row[2] += not any(re.search(rf"(?<!\w){re.escape(word)}(?!\w)", masked)
                              for word in text[start:end].split() if len(word.strip(",.")) >= 3)
        for f in found:
            row = counts.setdefault((script, f.kind), [0, 0, 0, 0, 0])
            row[3] += 1
            row[4] += any(kind == f.kind and f.start < end and start < f.end for kind, start, end in spans)
    for (_, kind), row in list(counts.items()):
        total = counts.setdefault(("all", kind), [0, 0, 0, 0, 0])
        for i, n in enumerate(row):
            total[i] += n
    rows = [{"script": script, "kind": kind, "labelled": n, "found": found, "precision": right / found if found else
             float("nan"), "recall": caught / n if n else float("nan"), "masked": gone / n if n else float("nan")}
            for (script, kind), (n, caught, gone, found, right) in counts.items()]
    order = {s: i for i, s in enumerate([*dict.fromkeys(SCRIPT_OF_LANGUAGE.values()), "all"])}
    return pd.DataFrame(rows).sort_values(["script", "kind"], key=lambda c: c.map(order) if c.name == "script"
                                          else c.map(PII_KINDS.index)).reset_index(drop=True)
