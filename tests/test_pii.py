"""Patients' identifiers in every script the studio supports: recall and precision per script and kind on the
project's labelled set (the figures docs/ingest.md reports), digits of Indian scripts, doctors and hospitals left in
clear, placeholders that name the kind, the generated name list, and curate-queries never writing an identifier it
detected in clear."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from pipeline.dataset.curate import curate
from pipeline.dataset.make_pii_names import SCRIPTS, in_script
from pipeline.dataset.pii import SCRIPT_OF_LANGUAGE, find_pii, mask, measure
from pipeline.dataset.pii_india import ascii_digits

REPO = Path(__file__).resolve().parent.parent
LABELLED = [json.loads(line) for line in
            (REPO / "tests" / "fixtures" / "pii_labelled.jsonl").read_text(encoding="utf-8").splitlines()]
KINDS_IN_EVERY_SCRIPT = ("NAME", "ADDRESS", "ABHA", "MRN", "PHONE", "AADHAAR")


def test_the_labelled_set_covers_every_kind_in_every_script():
    assert len(LABELLED) >= 250
    assert sum(len(item["pii"]) for item in LABELLED) >= 150
    assert sum(not item["pii"] for item in LABELLED) >= 60  # hard negatives
    assert {item["split"] for item in LABELLED} == {"dev", "heldout", "heldout2"}
    per_cell = Counter((SCRIPT_OF_LANGUAGE[item["lang"]], p["kind"]) for item in LABELLED for p in item["pii"])
    for script in set(SCRIPT_OF_LANGUAGE.values()):
        for kind in KINDS_IN_EVERY_SCRIPT:
            assert per_cell[(script, kind)] >= 3, (script, kind)
    for item in LABELLED:
        for p in item["pii"]:
            assert item["text"].count(p["value"]) == 1, item  # each value is one place in its message


@pytest.mark.parametrize("split", ["dev", "heldout", "heldout2", None])
def test_recall_per_script_and_kind_and_precision_for_names(split):
    """docs/ingest.md's table: recall >= 0.95 for every kind in every script, precision >= 0.9 for names."""
    items = [item for item in LABELLED if split in (None, item["split"])]
    report = measure(items)
    for row in report.itertuples():
        if row.labelled:
            assert row.recall >= 0.95, (split, row.script, row.kind, row.recall)
    for row in report[report.kind == "NAME"].itertuples():
        assert row.precision >= 0.9, (split, row.script, row.precision)
    assert (report[(report.script == "all") & (report.kind != "NAME")].precision >= 0.95).all()
    if split is None:
        assert (report[report.script == "all"].masked >= 0.95).all()


def test_digits_of_every_indian_script_are_read_as_ascii_in_place():
    digits = {"deva": "०१२३४५६७८९", "beng": "০১২৩৪৫৬৭৮৯", "taml": "௦௧௨௩௪௫௬௭௮௯", "telu": "౦౧౨౩౪౫౬౭౮౯",
              "knda": "೦೧೨೩೪೫೬೭೮೯"}
    for script, ten in digits.items():
        assert ascii_digits(f"a{ten}b") == "a0123456789b", script
    text = "आधार ४८२१ ७७३० १२९६ है, फोन ९८२६० ४४५१२"
    found = find_pii(text)
    assert [(f.kind, text[f.start:f.end]) for f in found] == [("AADHAAR", "४८२१ ७७३० १२९६"),
                                                              ("PHONE", "९८२६० ४४५१२")]
    assert mask(text, found) == "आधार <AADHAAR> है, फोन <PHONE>"


def test_placeholders_name_the_kind():
    text = ("मेरा नाम सुनीता शर्मा है, UHID 2024/55812, ABHA 91-2345-6789-0123, ravi.k@abdm, "
            "address: 12, Gandhi Street, Madurai 625001, phone 9876543210, aadhaar 4821 7730 1296")
    masked = mask(text)
    for placeholder in ("<NAME>", "<MRN>", "<ABHA>", "<ADDRESS>", "<PHONE>", "<AADHAAR>"):
        assert placeholder in masked, masked
    assert masked.count("<ABHA>") == 2 and not any(c.isdigit() for c in masked.replace("<", "").split("UHID")[1])


@pytest.mark.parametrize("text", [
    "I am Type 2 diabetic, can I have surgery next week?",
    "I am pregnant and diabetic, is insulin safe",
    "Dr. Ramesh's Eye Hospital gave me Moxifloxacin drops",
    "Sri Venkateswara Hospital, Tirupati lo operation chesaru",
    "डॉ. शर्मा ने कहा इंसुलिन 10 यूनिट सुबह लेनी है",
    "டாக்டர் கண்ணன் டிமோலோல் இரண்டு முறை போடச் சொன்னார்",
    "Bill 125000 rupees, will the scheme pay all",
])
def test_medical_words_doctors_and_hospitals_stay_in_clear(text):
    assert find_pii(text) == [], [(f.kind, text[f.start:f.end]) for f in find_pii(text)]


def test_the_name_list_is_what_its_script_generates():
    """pii_names.json holds, for every name, its transliteration by make_pii_names (indic-transliteration)."""
    names = json.loads((REPO / "pipeline" / "dataset" / "pii_names.json").read_text(encoding="utf-8"))
    for part in ("first", "last"):
        latin = names[part]["latn"]
        assert len(latin) > 500 and latin == sorted(set(latin))
        for code in SCRIPTS:
            assert len(names[part][code]) == len(latin)
            for i in range(0, len(latin), 97):
                assert names[part][code][i] == in_script(latin[i], code, SCRIPTS[code].lower()), (part, code, i)


@pytest.mark.parametrize("mode", ["exclude", "mask"])
def test_curate_writes_no_detected_identifier_in_clear(tmp_path, mode):
    """Every labelled message with an identifier, in every script, through curate-queries: under exclude none is
    kept, under mask all are; no labelled value and nothing find_pii detects is left in any file written."""
    carrying = [item for item in LABELLED if item["pii"]]
    log = tmp_path / "log.csv"
    with log.open("w", encoding="utf-8", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["timestamp", "message", "answer", "approved"])
        out.writerow(["2024-02-01 09:00", "Can I take my BP tablet on the morning of surgery?", "Yes.", "yes"])
        for i, item in enumerate(carrying):
            out.writerow([f"2024-02-02 10:{i % 60:02d}", item["text"], "Please see the doctor.", "yes"])
    folder = tmp_path / "out"
    report = curate(log, folder, pii=mode)
    kept = report["queries"] + report["without_ground_truth"]
    excluded = report["excluded"].get("pii", 0)
    duplicates = report["excluded"].get("duplicate", 0)
    if mode == "exclude":
        assert kept == 1 and excluded + duplicates == len(carrying)
    else:
        assert excluded == 0 and kept + duplicates == len(carrying) + 1
    written = "".join((folder / name).read_text(encoding="utf-8")
                      for name in ("queries.jsonl", "queries_without_gt.jsonl", "excluded.jsonl"))
    for item in carrying:
        for p in item["pii"]:
            assert p["value"] not in written, p
    for name in ("queries.jsonl", "queries_without_gt.jsonl", "excluded.jsonl"):
        for line in (folder / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            text = row.get("query") or row.get("text") or ""
            assert find_pii(text) == [], (name, text)


@pytest.mark.parametrize(("text", "name"), [
    ("Ramesh Babu has fever since two days", "Ramesh Babu"),  # a surname in the not-names list
    ("Pooja Yadav ko bukhar hai", "Pooja Yadav"),  # a given name that is also a common word
    ("I am Pooja Yadav, sugar 240", "Pooja Yadav"),
    ("S. K. Sharma here, BP 150/90", "S. K. Sharma"),  # initials
    ("R Lakshmi here, my eye is red", "R Lakshmi"),
    ("my mother Lakshmi Devi has sugar", "Lakshmi Devi"),
    ("ராஜேஷ் குமாருக்கு காய்ச்சல்", "ராஜேஷ் குமாருக்கு"),  # a Tamil surname with its case ending
    ("என் மகள் பிரியா செல்வத்தின் கண்ணில் வலி", "பிரியா செல்வத்தின்"),  # -am names take -att-
    ("ஆர். லட்சுமி அவர்களுக்கு கண் வலி", "ஆர். லட்சுமி"),
    ("నా కొడుకు రవి కుమార్‌కు జ్వరం", "రవి కుమార్‌కు"),
    ("ಮಂಜುನಾಥ್ ಗೌಡ ಅವರಿಗೆ ಜ್ವರ", "ಮಂಜುನಾಥ್ ಗೌಡ"),
    ("রীতা বসুর জ্বর", "রীতা বসুর"),
    ("সুমিতা দাসকে ডাক্তার দেখাতে হবে", "সুমিতা দাসকে"),
    ("मेरी बेटी प्रिया शर्मा को बुखार है", "प्रिया शर्मा"),
])
def test_a_mask_covers_the_whole_name(text, name):
    """No mask leaves part of a name in clear: given name, surname, initials and a case ending go together."""
    masked = mask(text)
    assert "<NAME>" in masked, masked
    for word in name.replace(".", " ").split():
        assert word not in masked, (word, masked)


@pytest.mark.parametrize("text", [
    "Narayana Health said surgery next week",  # health brands, institutes, schemes: organisations
    "Went to Apollo Health for cataract",
    "Sankara Eye Institute checked my eyes",
    "Lakshmi Narayana Medical College gave drops",
    "Vasan Eye Care gave drops",
    "Pradhan Mantri Jan Arogya Yojana covers cataract?",
    "नारायण हेल्थ में ऑपरेशन कितने का है",
    "ஆயுஷ்மான் பாரத் திட்டத்தில் லட்சுமி மருத்துவமனை கட்டணம்",
    "ಆಯುಷ್ಮಾನ್ ಭಾರತ್ ಯೋಜನೆಯಲ್ಲಿ ನಾರಾಯಣ ಹೆಲ್ತ್ ಸೇರಿದೆಯೇ",
    "రామకృష్ణ హెల్త్ కేర్ లో ఆపరేషన్",
    "লক্ষ্মী নার্সিং হোমে ছানি অপারেশন",
    "Can I drink Ganga water after surgery",  # ordinary words
    "I am Hindu, can I take insulin in the fast",
])
def test_organisations_and_ordinary_words_stay_in_clear(text):
    assert mask(text) == text


def test_the_anonymizer_is_built_once():
    from pipeline.dataset.pii import anonymizer

    mask("my name is Ramesh Babu")
    mask("मेरा नाम सुनीता शर्मा है")
    assert anonymizer.cache_info().misses <= 1


@pytest.mark.parametrize(("text", "number"), [
    ("aadhaar 4821/7730/1296 please update", "4821/7730/1296"),
    ("aadhaar 4821–7730–1296 hai", "4821–7730–1296"),  # en dash
    ("aadhar 4821\u200b7730\u200b1296", "4821\u200b7730\u200b1296"),  # zero-width spaces
    ("aadhaar 4821\u200c 7730\u200c 1296", "4821\u200c 7730\u200c 1296"),
    ("aadhaar 4821. 7730. 1296", "4821. 7730. 1296"),
    ("my aadhaar is four eight two one seven seven three zero one two nine six", "four eight two one seven seven "
     "three zero one two nine six"),
    ("aadhaar double four eight two one seven seven three zero one two nine", "double four eight two one seven "
     "seven three zero one two nine"),
    ("आधार चार आठ दो एक सात सात तीन शून्य एक दो नौ छह है", "चार आठ दो एक सात सात तीन शून्य एक दो नौ छह"),
    ("mera aadhar char aath do ek saat saat teen shunya ek do nau chhe hai",
     "char aath do ek saat saat teen shunya ek do nau chhe"),
])
def test_aadhaar_with_any_separator_or_in_words(text, number):
    """Any 12 digits in groups of four, whatever the separator, or 12 digits spelled out (no Verhoeff checksum)."""
    found = [(f.kind, text[f.start:f.end]) for f in find_pii(text)]
    assert ("AADHAAR", number) in found, found
    assert number not in mask(text)


@pytest.mark.parametrize("text", ["take one two three tablets a day", "bill 4821.7730 rupees",
                                  "sugar 240 on 12/04/2024 and 180 on 13/04/2024"])
def test_short_digit_runs_are_no_aadhaar(text):
    assert [f for f in find_pii(text) if f.kind == "AADHAAR"] == []


@pytest.mark.parametrize(("text", "name"), [
    ("my mother Kavitha has fever since morning", "Kavitha"),
    ("meri beti Ishita ko bukhar hai", "Ishita"),
    ("meri maa sunita ki aankh lal hai", "sunita"),  # romanized, lower case
    ("mere papa Suresh ji ko sugar hai", "Suresh"),
    ("मेरी बेटी प्रिया को बुखार है", "प्रिया"),
    ("என் அம்மா கமலா அவர்களுக்கு சர்க்கரை", "கமலா"),  # a relation word and a respectful suffix
    ("என் மகன் அருண் குமாருக்கு காய்ச்சல்", "அருண் குமாருக்கு"),
    ("నా కూతురు స్వాతికి జ్వరం", "స్వాతికి"),
    ("ನನ್ನ ಮಗಳು ಅನನ್ಯಗೆ ಜ್ವರ", "ಅನನ್ಯಗೆ"),
    ("আমার মেয়ে রিয়ার জ্বর", "রিয়ার"),
])
def test_names_after_relation_words_without_my_name_is(text, name):
    masked = mask(text)
    assert "<NAME>" in masked and all(word not in masked for word in name.split()), masked


def test_the_rules_work_without_the_learned_weights(monkeypatch):
    """The weights are a derived artifact: with none (a clone that dropped them), names still come from the rules."""
    from pipeline.dataset import pii_model

    monkeypatch.setattr(pii_model, "tagger", lambda: None)
    assert mask("my name is Ramesh Babu, sugar 240") == "my name is <NAME>, sugar 240"


def test_the_learned_recognizer_is_held_to_the_rules_checks(monkeypatch):
    """A name the model proposes is completed to its whole and dropped after a doctor's title or before a
    hospital word, like the rules' own."""
    from pipeline.dataset import pii_model

    def every_capitalised_word(toks, text):
        return ["B" if t.text[0].isupper() and t.lower not in ("i", "dr") else "O" for t in toks]

    monkeypatch.setattr(pii_model, "tag", every_capitalised_word)
    assert mask("Dr. Venkatesh said drops twice") == "Dr. Venkatesh said drops twice"
    assert mask("Went to Kamineni Hospital yesterday") == "Went to Kamineni Hospital yesterday"
    assert mask("Kamala Venkatesh has fever") == "<NAME> has fever"


def test_the_learned_weights_are_small_and_their_card_names_corpora_licences_and_splits():
    from pipeline.dataset import pii_model

    assert pii_model.MODEL.stat().st_size < 5e6 and pii_model.tagger() is not None
    card = json.loads(pii_model.CARD.read_text(encoding="utf-8"))
    assert card["training"]["splits"].startswith("train only")
    for corpus in card["corpora"]:
        assert corpus["licence"] and corpus["source"].startswith("https://github.com/")
        assert {"train", "dev", "test"} <= set(corpus["splits"])
    assert {key.split("/")[1] for key in card["figures"]} == {"dev", "test"}


def test_one_presidio_recognizer_per_indian_entity_with_its_context_words():
    """Each Indian entity is a recognizer of its own; a context word near a find (in any case, in Indian scripts
    too) raises its score and Presidio's decision process names the word; without one the score is the finder's."""
    from pipeline.dataset.pii import INDIA_ENTITIES, analyzer

    engine = analyzer()
    own = [r.supported_entities for r in engine.registry.recognizers
           if set(r.supported_entities) & INDIA_ENTITIES.keys()]
    assert sorted(own) == [[entity] for entity in sorted(INDIA_ENTITIES)]  # one entity each, one recognizer each
    for text, entity, word in [("my AADHAAR is 4821 7730 1296", "AADHAAR_LIKE", "aadhaar"),
                               ("आधार 4821 7730 1296 है", "AADHAAR_LIKE", "आधार"),
                               ("UHID 2024/41876 for my father", "IN_MRN", "uhid")]:
        [result] = [r for r in engine.analyze(text, language="en", return_decision_process=True)
                    if r.entity_type == entity]
        assert result.analysis_explanation.supportive_context_word == word, text
        assert result.score > INDIA_ENTITIES[entity][1], text
    plain = engine.analyze("number 4821 7730 1296 here", language="en", entities=["AADHAAR_LIKE"])
    assert [r.score for r in plain] == [INDIA_ENTITIES["AADHAAR_LIKE"][1]]
