"""The word lists that write romanized text back in its script (``pipeline/dataset/lexicon.py``): Tesseract's
language packs and wordfreq, never the dataset's own queries.

- A romanized word of a Tesseract list comes back as its native word, where the rules alone would not.
- Of several native words with one romanization, the more frequent is written; without frequencies, the stem more
  of the list's words begin with.
- A word in no list is written by rule; with no pack installed the list is empty, says so, and the variants say so.
- Each ``native`` variant names the list that wrote it; the romanization index equals ``romanize`` word by word.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.dataset import lexicon, load_dataset
from pipeline.dataset.romanize import native, romanize, romanize_words
from pipeline.dataset.variants import Settings, make_variants, variants_command

CATARACT = Path(__file__).resolve().parent.parent / "data" / "cataract"

NEEDS_PACKS = pytest.mark.skipif(not all(lexicon.tessdata(lang) for lang in ("te", "kn")),
                                 reason="Tesseract's Telugu and Kannada packs are not installed (Debian "
                                        "tesseract-ocr-tel, tesseract-ocr-kan; .ci/run installs them)")


@pytest.fixture
def no_packs(tmp_path, monkeypatch):
    """No Tesseract pack on this machine, and a cache of its own."""
    monkeypatch.delenv("TESSDATA_PREFIX", raising=False)
    monkeypatch.setattr(lexicon, "TESSDATA_DIRS", (str(tmp_path / "none"),))
    monkeypatch.setattr(lexicon, "CACHE", tmp_path / "cache")
    lexicon.lexicon.cache_clear()
    yield
    lexicon.lexicon.cache_clear()


@NEEDS_PACKS
def test_a_romanized_word_of_tesseracts_list_comes_back_in_its_script():
    cases = {"te": {"kanti": "కంటి", "noppi": "నొప్పి", "aapareshan": "ఆపరేషన్"},
             "kn": {"kannu": "ಕಣ್ಣು", "kannadaka": "ಕನ್ನಡಕ"}}
    for lang, words in cases.items():
        listed = set(lexicon.tesseract_words(lexicon.tessdata(lang)))
        assert set(words.values()) <= listed  # the pack's own words, not the dataset's
        lx = lexicon.lexicon(lang)
        assert lx.source.startswith(f"Tesseract {lexicon.TESSERACT_LANGS[lang]}.traineddata") and not lx.missing
        for roman, word in words.items():
            assert romanize(word, lang) == roman
            assert native(roman, lang, lx) == word
            assert native(roman, lang) != word  # the rules alone guess a retroflex or a vowel wrong


def test_of_several_words_the_frequent_one_then_the_productive_stem():
    # கண்ணு and கன்னு are both "kannu"; ண்ண is the usual spelling
    assert lexicon.build("ta", ["கண்ணு", "கன்னு"], {"கன்னு": 1e-5}) == {"kannu": "கன்னு"}
    assert lexicon.build("ta", ["கண்ணு", "கன்னு"], {"கண்ணு": 1e-5, "கன்னு": 1e-6}) == {"kannu": "கண்ணு"}
    stems = ["கண்ணு", "கண்ணுக்கு", "கண்ணுல", "கன்னு"]
    assert lexicon.build("ta", stems, {})["kannu"] == "கண்ணு"
    assert lexicon.build("ta", [*stems, "கன்னுக்கு", "கன்னுல", "கன்னுவை"], {})["kannu"] == "கன்னு"
    assert lexicon.build("ta", ["கண் 1", "abc"], {}) == {}  # only words wholly of the script's letters


def test_a_word_in_no_list_is_written_by_rule(no_packs):
    lexicon.CACHE.mkdir(parents=True)
    (stale := lexicon.CACHE / "hi-0000000000000000.json").write_text("{}", encoding="utf-8")
    lx = lexicon.lexicon("te")
    assert lx.source == "none (rules only)" and lx.words == {}
    assert "no Tesseract language pack for 'te'" in lx.missing and "tesseract-ocr-tel" in lx.missing
    assert native("kanti noppi", "te", lx) == native("kanti noppi", "te")
    assert lexicon.lexicon("hi").source.startswith("wordfreq ")  # Hindi keeps wordfreq's list
    assert not stale.exists() and len(list(lexicon.CACHE.glob("hi-*.json"))) == 1  # the last index kept, alone
    roman = "zqvarpitanam"  # in no list
    assert lexicon.lexicon("ta").get(roman) is None
    assert native(roman, "ta", lexicon.lexicon("ta")) == native(roman, "ta")


def test_without_packs_the_command_says_so_in_one_line(no_packs, tmp_path):
    lines: list[str] = []
    variants_command(CATARACT, ["native"], tmp_path / "out", Settings(), echo=lines.append)
    said = [ln for ln in lines if " word list: " in ln]
    assert said and all("no Tesseract language pack" in ln and "by rule" in ln for ln in said)


@NEEDS_PACKS
def test_each_native_variant_names_the_list_that_wrote_it(tmp_path):
    made = make_variants(load_dataset(CATARACT), ["native"])
    assert made.variants
    for v in made.variants:
        source = v.variant.settings["word_list"]
        assert source == lexicon.lexicon(v.language).source
        assert source.startswith(f"Tesseract {lexicon.TESSERACT_LANGS[v.language]}.traineddata (sha256 ")
        assert ("wordfreq" in source) == (v.language in ("hi", "ta", "bn"))
    assert set(made.word_lists) == {v.language for v in made.variants}


@NEEDS_PACKS
def test_the_index_romanizes_as_romanize_does():
    words = lexicon.tesseract_words(lexicon.tessdata("kn"))[::500]
    own = [w for w in words if lexicon._own([w], "kn")]
    assert len(own) > 300
    assert romanize_words(own, "kn") == [romanize(w, "kn") for w in own]


def test_a_case_ending_in_the_code_mixing_lexicon_is_not_kept_as_english():
    from pipeline.dataset.codemix import english_words

    keep = english_words()
    assert "eye" in keep and "lo" not in keep  # "eye-lo": Telugu's "in" after the English word
    assert native("kannu lo noppi", "te", None, keep).split()[1] == "లొ"  # by rule: written in Telugu, not kept
    assert native("eye lo", "te", None, keep).startswith("eye ")


def test_english_words_a_hinglish_query_mixes_in_stay_in_latin_and_its_hindi_words_do_not():
    """Typed Hinglish: an English word the Hindi lists lack and that is common in English ("symptoms",
    "precautions") stays as typed instead of being guessed letter by letter, as do capitals ("vitamin C", "N95");
    the Hindi words are written from the lists. Without the English check the same words are guessed."""
    from pipeline.dataset.codemix import common_english, english_words

    lists, keep = lexicon.lexicon("hi"), english_words()
    query = "operation ke baad kya precautions leni hain, vitamin C aur N95 mask bhi? symptoms kab tak rahenge"
    written = native(query, "hi", lists, keep, common_english)
    for word in ("precautions", "symptoms", "vitamin C", "N95", "mask"):
        assert word in written, written
    assert not any(w in written.split() for w in ("kya", "baad", "hain", "kab", "tak")), written
    guessed = native(query, "hi", lists, keep)
    assert "precautions" not in guessed and "symptoms" not in guessed  # by rule: a Devanagari guess
    assert common_english("symptoms") and not common_english("dawai") and not common_english("aankh")
