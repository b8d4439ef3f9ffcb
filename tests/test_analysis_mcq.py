"""The multiple-choice answer parser (pipeline.analysis.mcq.parse_choice): what it reads, and what it refuses."""

from __future__ import annotations

import pytest

from pipeline.analysis.mcq import parse_choice

EYE = {"A": "Nuclear sclerotic cataract", "B": "Posterior subcapsular cataract", "C": "Cortical cataract",
       "D": "Anterior polar cataract"}
FIVE = {"A": "Acute angle-closure glaucoma", "B": "Retinal detachment", "C": "Giant cell arteritis",
        "D": "Central retinal vein occlusion", "E": "Escherichia coli keratitis"}
YES_NO = {"A": "yes", "B": "no", "C": "maybe"}
NUMBERS = {"A": "4", "B": "3", "C": "2", "D": "1"}

READS = [
    # bare and labelled letters
    ("B", EYE, "B"),
    ("(B)", EYE, "B"),
    ("[C]", EYE, "C"),
    ("b)", EYE, "B"),
    ("c.", EYE, "C"),
    ("B.", EYE, "B"),
    ("D: Anterior polar cataract", EYE, "D"),
    ("A. Nuclear sclerotic cataract — the lens nucleus hardens.", EYE, "A"),
    ("B - Posterior subcapsular cataract", EYE, "B"),
    ("**C**", EYE, "C"),
    ("  \n D\n", EYE, "D"),
    ("Ｂ", EYE, "B"),  # full-width
    ("a. nuclear sclerotic cataract, because near vision improves", EYE, "A"),
    ("C. cortical cataract", EYE, "C"),
    # statements
    ("Answer: B", EYE, "B"),
    ("Answer: B. Posterior subcapsular cataract, typical with steroid use.", EYE, "B"),
    ("answer:b", EYE, "B"),
    ("ANSWER - D", EYE, "D"),
    ("**Answer:** C", EYE, "C"),
    ("The answer is B. It progresses quickly.", EYE, "B"),
    ("The answer is (A).", EYE, "A"),
    ("The correct answer is option D", EYE, "D"),
    ("Correct option: C", EYE, "C"),
    ("I would choose B because glare is typical.", EYE, "B"),
    ("I'd go with C.", EYE, "C"),
    ("Option B is correct.", EYE, "B"),
    ("After thinking it over. C is the correct answer.", EYE, "C"),
    ("The answer is A because the nucleus hardens.", EYE, "A"),
    ("Answer: A\nReason: a myopic shift gives 'second sight'.", EYE, "A"),
    ("Answer: B, because it is posterior.", EYE, "B"),
    ("the answer is b.", EYE, "B"),
    ("Option 2", EYE, "B"),
    ("I pick choice 4.", EYE, "D"),
    ("Answer: **B**", EYE, "B"),
    ("The correct choice is (d).", EYE, "D"),
    ("B is wrong; the answer is C.", EYE, "C"),
    ("Not B. The answer is C", EYE, "C"),
    ("It's option C!", EYE, "C"),
    ("C\n\nReason: cortical spokes start at the lens edge.", EYE, "C"),
    ("answers A and B are wrong, so D", EYE, "D"),
    # the option's text
    ("Answer: Posterior subcapsular cataract", EYE, "B"),
    ("Nuclear sclerotic cataract", EYE, "A"),
    ("nuclear sclerotic cataract.", EYE, "A"),
    ("It is most likely a cortical cataract. Spokes start at the edge.", EYE, "C"),
    ("Yes", YES_NO, "A"),
    ("maybe", YES_NO, "C"),
    ("No. The trial found no difference.", YES_NO, "B"),
    ("Retinal detachment is the most likely diagnosis.", FIVE, "B"),
    ("2", NUMBERS, "C"),  # options that are numbers: the text, not the position
    ("You should make 2 attempts.", NUMBERS, "C"),
    # a lone letter in a short answer
    ("Probably C.", EYE, "C"),
    ("I think it's B.", EYE, "B"),
]

REFUSES = [
    # nothing
    ("", EYE),
    ("   ", EYE),
    ("I do not know the answer to your question.", EYE),
    ("A cataract is a clouding of the lens.", EYE),  # an article, not option A
    ("A patient with this history needs an eye examination.", EYE),
    ("I think you should see your doctor.", EYE),
    ("the answer is a cataract of some kind", EYE),
    ("E. coli is a common cause of conjunctivitis in newborns.", FIVE),  # an abbreviation, not option E
    # several
    ("B or C", EYE),
    ("Answer: B or C", EYE),
    ("The answer is A and D.", EYE),
    ("Answer: B, C", EYE),
    ("B/C", EYE),
    ("Probably B/C.", EYE),
    ("Maybe B, maybe C.", EYE),
    ("Answer: A\nAnswer: C", EYE),
    ("Option A is wrong. The answer is C.", EYE),
    ("It could be a nuclear sclerotic cataract or a cortical cataract.", EYE),
    ("Either A or B could explain it.", EYE),
    ("Yes and no: maybe.", YES_NO),
    ("Both B and C are possible.", EYE),
    ("Posterior subcapsular cataract, not cortical cataract.", EYE),
    ("The answer depends on the history.", EYE),
    # not an option
    ("Answer: E", EYE),
    ("Option 7", EYE),
    ("F", EYE),
    # long text whose capital letters are not answers
    ("Vitamin A deficiency and hepatitis B are unrelated to lens opacities, which develop slowly over years in "
     "most people.", EYE),
    ("Type C personality", EYE),
]


@pytest.mark.parametrize("text,options,expected", READS, ids=[r[0][:40] for r in READS])
def test_reads_the_named_option(text, options, expected):
    assert parse_choice(text, options) == expected


@pytest.mark.parametrize("text,options", REFUSES, ids=[r[0][:40] or "empty" for r in REFUSES])
def test_refuses_what_names_no_single_option(text, options):
    assert parse_choice(text, options) is None


def test_no_options_or_no_text_is_none():
    assert parse_choice(None, EYE) is None
    assert parse_choice("B", None) is None
    assert parse_choice("B", {}) is None


def test_numbered_options_are_not_read_as_positions():
    assert parse_choice("Option 2", NUMBERS) is None  # "2" is option C's text, option B's position: refuse
    assert parse_choice("Answer: C", NUMBERS) == "C"


def test_pure_and_case_of_options_does_not_matter():
    lower = {k.lower(): v for k, v in EYE.items()}
    assert parse_choice("Answer: b", lower) is None  # letters are keys A-J, as the dataset format stores them
    options = dict(EYE)
    assert parse_choice("Answer: B", options) == "B" and options == EYE
