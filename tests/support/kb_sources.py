"""The worked example's binary sources (data/raw-example/sources) and the scanned-page PDF of the ingest tests.

Run ``python -m tests.support.kb_sources data/raw-example/sources`` to write ``preop-sop.pdf`` (three pages,
fpdf2), ``postop-care.docx`` and ``eye-drop-schedule-hi.docx`` (python-docx; the second a Hindi leaflet with a
table) again; the texts are the project's own, written for the example.
``write_scanned_pdf`` draws text into an image and embeds only the image, as a scanner does (no text layer).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

FIXED_DATE = datetime(2026, 12, 1, tzinfo=UTC)  # written into the files: the same input gives the same bytes

PREOP_PAGES: list[tuple[str, list[str]]] = [
    ("Before cataract surgery: standard operating procedure", [
        "This procedure is followed for every adult patient booked for cataract surgery at the eye unit. "
        "The counsellor explains each step to the patient and one attendant in the language they prefer.",
        "Two weeks before surgery the patient attends the pre-operative clinic. Visual acuity, intraocular "
        "pressure and a dilated examination are recorded. Biometry is done on both eyes to choose the power "
        "of the intraocular lens (IOL). The patient is asked about diabetes, high blood pressure, heart "
        "disease, asthma and any allergy to medicines or iodine.",
        "Blood sugar (fasting and post-meal), blood pressure and, when the physician asks, an ECG are checked. "
        "Surgery is postponed if fasting sugar is above 200 mg/dL or blood pressure is above 180/100 mmHg on "
        "the day; the patient is referred to the physician and rebooked once these are controlled.",
    ]),
    ("Medicines before surgery", [
        "Patients continue their tablets for blood pressure, diabetes and thyroid as usual, including on the "
        "morning of surgery with a sip of water. Insulin doses on the morning of surgery are decided by the "
        "physician.",
        "Blood thinners such as aspirin or clopidogrel are usually continued for cataract surgery under topical "
        "anaesthesia; they are stopped only if the surgeon writes so on the booking form. Patients must never "
        "stop a blood thinner on their own.",
        "Antibiotic eye drops are started one day before surgery: one drop four times a day in the eye to be "
        "operated. The nurse shows the patient or attendant how to put drops without touching the eye.",
    ]),
    ("On the day of surgery", [
        "The patient has a light breakfast two hours before reporting, such as two idlis or a small bowl of "
        "upma, and takes a head bath the night before or that morning. No kajal, face cream or jewellery is "
        "worn. One attendant comes with the patient and stays until discharge.",
        "At admission the nurse checks identity, the eye to be operated and the consent form, and marks the "
        "eye above the eyebrow. Dilating drops are put every fifteen minutes for one hour.",
        "Most patients go home three to four hours after surgery with an eye shield, dark glasses and a "
        "printed drop schedule. The first follow-up visit is the next morning.",
    ]),
]

POSTOP_DOCX: list[tuple[int, str]] = [
    (1, "After cataract surgery: care at home"),
    (0, "This leaflet is given at discharge. Keep it with the drop schedule and bring both to every visit."),
    (2, "Eye drops"),
    (0, "Use the steroid-antibiotic drops as printed on the schedule: usually one drop six times a day in the "
        "first week, then tapered by one drop each week over six weeks. Wash hands before every drop. Keep a "
        "gap of five minutes between two different drops. Do not stop the drops early even if the eye feels "
        "normal."),
    (2, "Protecting the eye"),
    (0, "Wear the eye shield while sleeping for the first week and the dark glasses outdoors. Do not rub or "
        "press the eye. Avoid splashing water into the eye for two weeks; the face can be cleaned with a "
        "wet cloth and the hair washed from the back with the head tilted."),
    (0, "Light household work, walking, watching television and reading are allowed from the next day. Avoid "
        "lifting heavy weights, bending low for long and dusty or smoky places for two weeks."),
    (2, "Food and daily life"),
    (0, "There is no restriction of food after cataract surgery; eat normal home food including rice, curd, "
        "fruits and non-vegetarian food if you usually do. Diabetic and blood pressure diets continue as "
        "advised by your physician."),
    (2, "When to come back at once"),
    (0, "Come to the eye casualty the same day, at any hour, if there is increasing pain, sudden drop in "
        "vision, increasing redness, sticky discharge, or a curtain or shadow in the vision. These can be "
        "signs of infection or raised pressure and need treatment within hours."),
    (2, "Glasses"),
    (0, "New glasses are prescribed four to six weeks after surgery, when the eye has healed and the drops "
        "are over. Most patients need reading glasses even with a good distance lens."),
]


# A Hindi leaflet: the drop schedule after cataract surgery as a table between two headings (the project's words).
# A list of rows is a table (its first row the header); (level, text) a heading (level >= 1) or a paragraph.
EYEDROP_SCHEDULE_HEADING = "दवा की समय-सारणी"
EYEDROP_SCHEDULE_ROWS = [
    ["सप्ताह", "स्टेरॉयड-एंटीबायोटिक ड्रॉप", "दर्द-सूजन की ड्रॉप"],
    ["पहला सप्ताह", "दिन में 6 बार", "दिन में 3 बार"],
    ["दूसरा सप्ताह", "दिन में 5 बार", "दिन में 3 बार"],
    ["तीसरा सप्ताह", "दिन में 4 बार", "दिन में 3 बार"],
    ["चौथा सप्ताह", "दिन में 3 बार", "दिन में 3 बार"],
    ["पाँचवाँ सप्ताह", "दिन में 2 बार", "बंद"],
    ["छठा सप्ताह", "दिन में 1 बार", "बंद"],
]
EYEDROP_SCHEDULE_HI: list[tuple[int, str] | list[list[str]]] = [
    (1, "मोतियाबिंद ऑपरेशन के बाद आँख की दवाइयाँ"),
    (0, "यह पर्ची छुट्टी के समय दी जाती है। दवा डालने से पहले हर बार साबुन से हाथ धोएँ और दो अलग दवाओं के बीच "
        "पाँच मिनट का अंतर रखें।"),
    (2, EYEDROP_SCHEDULE_HEADING),
    (0, "नीचे दी गई सारणी के अनुसार दवा हर सप्ताह धीरे-धीरे कम की जाती है। डॉक्टर के कहे बिना कोई दवा बीच में बंद "
        "न करें, भले ही आँख ठीक लगे।"),
    EYEDROP_SCHEDULE_ROWS,
    (2, "दवा डालने का तरीका"),
    (0, "सिर पीछे झुकाएँ, ऊपर देखें और निचली पलक को हल्का-सा नीचे खींचें। शीशी की नोक आँख या पलकों को न छुए। "
        "एक बूँद डालकर आँख एक मिनट बंद रखें और नाक के पास वाले कोने को हल्के से दबाएँ।"),
    (2, "तुरंत अस्पताल कब आएँ"),
    (0, "दर्द बढ़े, दिखना अचानक कम हो, आँख की लाली बढ़े या चिपचिपा पानी आए, तो उसी दिन किसी भी समय आँख के "
        "आपातकालीन विभाग में आएँ।"),
]


def write_pdf(path: Path, pages: list[tuple[str, list[str]]] = PREOP_PAGES) -> Path:
    """A text PDF, one page per (heading, paragraphs) pair (fpdf2, core Helvetica font)."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_auto_page_break(auto=False)
    for heading, paragraphs in pages:
        pdf.add_page()
        pdf.set_font("Helvetica", style="B", size=15)
        pdf.multi_cell(0, 9, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(3)
        pdf.set_font("Helvetica", size=11)
        for para in paragraphs:
            pdf.multi_cell(0, 6, para, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def write_docx(path: Path, blocks: list[tuple[int, str] | list[list[str]]] = POSTOP_DOCX) -> Path:
    """A Word file: headings (Heading styles), paragraphs and tables (a list of rows), in order (python-docx)."""
    import docx

    document = docx.Document()
    document.core_properties.created = document.core_properties.modified = FIXED_DATE
    for block in blocks:
        if isinstance(block, list):
            table = document.add_table(rows=len(block), cols=len(block[0]))
            table.style = "Table Grid"
            for cells, row in zip(table.rows, block, strict=True):
                for cell, text in zip(cells.cells, row, strict=True):
                    cell.text = text
            continue
        level, text = block
        if level:
            document.add_heading(text, level=level)
        else:
            document.add_paragraph(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    document.save(str(path))
    return path


def write_scanned_pdf(path: Path, lines: tuple[str, ...] = ("Consent for cataract surgery", "Signed copy"),
                      pages: int = 2) -> Path:
    """A PDF whose pages are images only, as a scanner writes them: text to the eye, no text layer."""
    from fpdf import FPDF
    from PIL import Image, ImageDraw

    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    for page in range(pages):
        image = Image.new("L", (1240, 1754), color=255)
        draw = ImageDraw.Draw(image)
        for i, line in enumerate(lines):
            draw.text((120, 160 + 60 * i), f"{line} (page {page + 1})", fill=0)
        pdf.add_page()
        pdf.image(image, x=0, y=0, w=210, h=297)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "data/raw-example/sources")
    print(write_pdf(out / "preop-sop.pdf"), write_docx(out / "postop-care.docx"),
          write_docx(out / "eye-drop-schedule-hi.docx", EYEDROP_SCHEDULE_HI))
