"""Theme tagger: each detector on clear examples (mostly the paper's own), the report, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.dataset import load_dataset
from pipeline.dataset.themes import (
    SpellingDetector,
    ThemeTagger,
    code_mixing,
    cultural,
    detect_language,
    language_accuracy,
    non_native_english,
    patient_specific,
    report_markdown,
    theme_report,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tagger() -> ThemeTagger:
    return ThemeTagger(["Take IMOL tablet for pain. Avoid a head bath for 15 days after cataract surgery."])


# -- language --------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,lang", [
    ("ऑपरेशन के बाद आँख में दवा कितनी बार डालनी है?", "hi"),
    ("அறுவை சிகிச்சைக்கு முன் சாப்பிடலாமா?", "ta"),
    ("ఆపరేషన్ తర్వాత తలస్నానం ఎప్పుడు చేయవచ్చు?", "te"),
    ("ನಾನು ಮಧುಮೇಹಿ, ಆಪರೇಷನ್ ಮಾಡಬಹುದೇ?", "kn"),
    ("BP ಇದ್ದರೆ operation ಮಾಡಬಹುದಾ?", "kn"),  # the script decides even when English words are mixed in
    ("Agar operation ke baad pain ho raha hai, to kya karna hai?", "hi"),  # romanized, Hindi matrix
    ("Operation mudinjadhum eppo kulikalama? Romba vali irukku", "ta"),
    ("Can I eat before the kanna operation?", "en"),  # English matrix with one Tamil word
    ("In how many days can a patient take Karwat?", "en"),
    ("When can I watch TV?", "en"),
])
def test_detect_language(text, lang):
    assert detect_language(text) == lang


# -- code-mixing -----------------------------------------------------------------------------------
def test_code_mixing_romanized_words_in_latin_text():
    hinglish = "Agar operation ke baad pain ho raha hai, to kya karna hai?"
    assert {"ke", "baad", "kya", "karna"} <= set(code_mixing(hinglish))
    assert code_mixing("Can I eat before the kanna operation?") == ["kanna"]
    assert code_mixing("In how many days can a patient take Karwat?") == ["Karwat"]
    assert code_mixing("Can I put aankh ki dawai at night?") == ["aankh", "ki", "dawai"]


def test_code_mixing_english_inside_native_script():
    assert code_mixing("ऑपरेशन के बाद BP की दवा ले सकते हैं?") == ["BP"]
    assert code_mixing("ಆಪರೇಷನ್ ಆದ ಮೇಲೆ TV ನೋಡಬಹುದಾ?") == ["TV"]
    # English words transliterated into the script are borrowings, not code-mixing
    assert code_mixing("ऑपरेशन के बाद क्या खाना है?") == []
    assert code_mixing("ஆபரேஷனுக்கு அப்புறம் எப்போ குளிக்கலாம்?") == []


def test_no_code_mixing_in_plain_text():
    assert code_mixing("Can I eat rice after the surgery?") == []
    assert code_mixing("अगले दिन से नहा सकते हैं क्या?") == []


# -- misspelling -----------------------------------------------------------------------------------
def test_misspelling_flags_unknown_words_only(tagger):
    spell = tagger.spelling
    assert spell("Sarjere is don mam?") == ["sarjere"]
    assert spell("Can I take my medicin tomorow?") == ["medicin", "tomorow"]
    assert spell("Can I eat chapati after cataract surgery?") == []
    assert spell("Didn't the doctor say I can't drive?") == []  # contractions are words


def test_misspelling_knows_kb_and_domain_words():
    plain = SpellingDetector()
    assert plain("Should I keep taking Moxifloxacin and the IOL drops?") == []  # domain list, acronym
    assert plain("Is zimtrex needed?") == ["zimtrex"]
    assert SpellingDetector({"zimtrex"})("Is zimtrex needed?") == []  # a word of the knowledge base
    assert ThemeTagger(["Zimtrex eye drops twice daily."]).spelling("Is zimtrex needed?") == []


def test_misspelling_ignores_names_numbers_and_romanized_words(tagger):
    assert tagger.spelling("My father Raghavendra had surgery on 12th") == []
    assert tagger.spelling("Can I eat before the kanna operation?") == []


# -- cultural, patient-specific, non-native English ---------------------------------------------------
@pytest.mark.parametrize("text,cue", [
    ("Can he take chapati, Puri etc on the day of surgery?", "chapati"),
    ("Can I eat non veg after surgery?", "non veg"),
    ("Are there any specific yoga poses I can do?", "yoga"),
    ("If a person gets operated here and then goes to his native place what shall he do?", "native place"),
    ("Can I go to the temple for pooja next week?", "temple"),
    ("मैं मंदिर कब जा सकता हूँ?", "मंदिर"),
])
def test_cultural(text, cue):
    assert cue in cultural(text)


def test_not_cultural():
    assert cultural("Can I eat rice and vegetables after surgery?") == []
    assert cultural("When can I read the newspaper?") == []


def test_patient_specific():
    assert {"atorvastatin", "clopidogrel", "aztolet20"} <= set(
        patient_specific("Can aztolet20 (atorvastatin and clopidogrel) tablet be taken post surgery"))
    assert "diabetes" in patient_specific("Because I have diabetes sugar problem I am worried much")
    assert patient_specific("My mother is 78 years old, is surgery safe?") == ["78 years old"]
    assert patient_specific("I am on blood thinners, should I stop them?")
    assert patient_specific("Which eye drops should be used after surgery?") == []
    assert patient_specific("When can I wash my face?") == []
    # a symptom counts when the patient reports it, not in a general question
    assert patient_specific("My eye is itching a lot, can I rub it?") == ["itching"]
    assert set(patient_specific("Eye is red and watering, is it normal?")) == {"red", "watering"}
    assert patient_specific("Will there be pain during the operation?") == []


@pytest.mark.parametrize("text,pattern", [
    ("Why to eat light meal only? What comes under light meal?", "why to"),
    ("Is the patient should be in dark room after surgery?", "aux + modal"),
    ("Because I have diabetes sugar problem I am worried much", "worried much"),
    ("In how many days can a patient take Karwat?", "in how many days"),
    ("When can I take head bath?", "take bath"),
    ("I had surgery 3 days back, can I drive?", "X days back"),
    ("Can I watch TV or not?", "or not"),
    ("When I can go to gym?", "wh-question without inversion"),
    ("How much time it will take for operation?", "wh-question without inversion"),
    ("Constipation is there since surgery", "existential 'is there'"),
    ("Reading newspaper is ok?", "yes/no question without inversion"),
    ("I had surgery on Monday. Mobile phone use is allowed?", "yes/no question without inversion"),
])
def test_non_native_english(text, pattern):
    assert pattern in non_native_english(text)


def test_native_english_is_not_flagged():
    for text in ["When can I take a bath after surgery?", "Do I need to stop aspirin before the operation?",
                 "Is there anything I should avoid eating?", "How many days should I use the drops?",
                 "I had surgery yesterday, can I shower?", "Tell me when I can drive.",
                 "What should I do if my eye is red?"]:
        assert non_native_english(text) == [], text


# -- the tagger ------------------------------------------------------------------------------------
def test_tagger_combines_detectors(tagger):
    t = tagger.tag("Sarjere is don mam?")
    assert t.language == "en" and "misspelling" in t.themes and t.evidence["misspelling"] == ["sarjere"]
    t = tagger.tag("Agar operation ke baad pain ho raha hai, to kya karna hai?")
    assert t.language == "hi" and t.themes == ["code_mixing"]  # no misspelling check on Hindi words
    t = tagger.tag("ऑपरेशन के बाद चपाती खा सकते हैं? TV देख सकते हैं?", "Can I eat chapati and watch TV after it?")
    assert t.language == "hi" and t.themes == ["code_mixing", "cultural"]
    t = tagger.tag("ನಾನು ಮಧುಮೇಹಿ, ಕಣ್ಣಿನ ಶಸ್ತ್ರಚಿಕಿತ್ಸೆ ಮಾಡಬಹುದೇ?", "I am diabetic, can the eye surgery be done?")
    assert t.language == "kn" and t.themes == ["patient_specific"]  # the meaning comes from query_en
    assert tagger.tag("What is a cataract?").themes == []


# -- the report --------------------------------------------------------------------------------------
LABELLED = [
    ("Sarjere is don mam?", "en", ["misspelling"]),
    ("Can I eat non veg after surgery?", "en", ["cultural"]),
    ("Agar operation ke baad pain ho raha hai, to kya karna hai?", "hi", ["code_mixing"]),
    ("How long should saving not be done after surgery?", "en", ["misspelling"]),  # a real-word error: missed
    ("Is the patient should be in dark room after surgery?", "en", ["non_native_english"]),
    ("Because I have diabetes sugar problem I am worried much", "en", ["patient_specific", "non_native_english"]),
    ("Can aztolet20 (atorvastatin) be taken?", "en", ["patient_specific", "out_of_kb"]),
]


def test_theme_report_against_labels(tagger):
    pred = [tagger.tag(q).themes for q, _, _ in LABELLED]
    report = theme_report([labels for _, _, labels in LABELLED], pred).set_index("theme")
    assert list(report.index) == ["misspelling", "code_mixing", "non_native_english", "cultural", "patient_specific"]
    assert report.loc["misspelling", ["precision", "recall", "support"]].tolist() == [1.0, 0.5, 2]
    # "mam" makes the tagger call the first query non-native English too: one false positive
    assert report.loc["non_native_english", "precision"] == pytest.approx(2 / 3)
    assert report.loc["non_native_english", "recall"] == 1.0
    assert report.loc["cultural", ["precision", "recall", "support"]].tolist() == [1.0, 1.0, 1]
    assert report.loc["patient_specific", ["precision", "recall", "support", "predicted"]].tolist() == [1.0, 1.0, 2, 2]
    md = report_markdown(report.reset_index(), len(LABELLED), 1.0)
    assert "| misspelling | 1.00 | 0.50 | 0.67 | 2 | 1 |" in md and "7 queries" in md


def test_language_accuracy():
    assert language_accuracy(["en", "hi", "ta", "en"], ["en", "hi", "en", "en"]) == 0.75


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _tag_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", "tag-themes", *args], check=False, capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def test_cli_reports_and_writes_tagged_queries(tmp_path):
    rows = [{"query_id": f"q{i}", "language": lang, "query": q, "gt_response": "Ask your doctor.", "themes": labels,
             **({"query_en": q} if lang != "en" else {})} for i, (q, lang, labels) in enumerate(LABELLED)]
    queries = _write(tmp_path / "labelled.jsonl", rows)
    out = tmp_path / "out" / "tagged.jsonl"
    res = _tag_cli(str(queries), "-o", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    table = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
             for line in res.stdout.splitlines() if line.count("│") == 7}
    assert table["misspelling"] == ["1.00", "0.50", "0.67", "2", "1"]
    assert table["non_native_english"][:2] == ["0.67", "1.00"]
    assert "detected = labelled for 100.0% of 7" in res.stdout
    tagged = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [t["query_id"] for t in tagged] == [r["query_id"] for r in rows]
    assert tagged[0]["themes"] == ["misspelling", "non_native_english"]
    assert tagged[6]["themes"] == ["patient_specific", "out_of_kb"]  # hand out_of_kb kept
    assert len(load_dataset(out).queries) == 7  # the output is a valid (closed-book) dataset


def test_cli_without_labels_fills_language_and_themes(tmp_path):
    rows = [{"query_id": "a", "query": "Can I eat chapati after surgery?", "gt_response": "Yes."},
            {"query_id": "b", "query": "ऑपरेशन के बाद चपाती खा सकते हैं?",
             "query_en": "Can I eat chapati after the operation?", "gt_response": "Yes."}]
    out = tmp_path / "tagged.jsonl"
    res = _tag_cli(str(_write(tmp_path / "raw.jsonl", rows)), "--output", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no hand-labelled themes" in res.stdout
    tagged = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(t["language"], t["themes"]) for t in tagged] == [("en", ["cultural"]), ("hi", ["cultural"])]


def test_cli_bad_input_is_one_line_error(tmp_path):
    res = _tag_cli(str(_write(tmp_path / "bad.jsonl", [{"query_id": "a", "query": ""}])))
    assert res.returncode == 1
    assert "bad.jsonl:1: field query: missing or empty" in res.stderr
    assert "Traceback" not in res.stderr
