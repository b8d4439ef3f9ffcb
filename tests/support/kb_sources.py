"""The worked example's binary sources (data/raw-example/sources) and the PDFs of the ingest tests.

Run ``python -m tests.support.kb_sources data/raw-example/sources`` to write ``preop-sop.pdf`` (three pages,
fpdf2), ``postop-care.docx`` and ``eye-drop-schedule-hi.docx`` (python-docx; the second a Hindi leaflet with a
table) and the Indian-language leaflets again (a Hindi and a Tamil Unicode PDF set in Debian's Noto fonts, shaped
by HarfBuzz; a Hindi PDF whose text layer is KrutiDev-encoded; a Hindi PDF of page images only); the texts are the
project's own, written for the example.
``write_scanned_pdf`` draws text into an image and embeds only the image, as a scanner does (no text layer).
"""

from __future__ import annotations

import sys
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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




# -- Indian-language leaflets ------------------------------------------------------------------------------
NOTO = Path("/usr/share/fonts/truetype/noto")  # Debian fonts-noto-core
SCRIPT_FONTS = {"hi": "NotoSansDevanagari", "ta": "NotoSansTamil", "te": "NotoSansTelugu", "kn": "NotoSansKannada",
                "bn": "NotoSansBengali"}

INDIC_LEAFLETS: dict[str, list[tuple[str, list[str]]]] = {
    "hi": [
        ("मोतियाबिंद ऑपरेशन के बाद घर पर देखभाल", [
            "ऑपरेशन के बाद पहले हफ्ते आँख में पानी न जाने दें। सोते समय आँख पर प्लास्टिक की ढाल लगाकर सोएँ और "
            "दिन में बाहर निकलते समय काला चश्मा पहनें।",
            "डॉक्टर ने जो बूँदें लिखी हैं, उन्हें पर्चे के अनुसार समय पर डालें। हर बूँद से पहले हाथ साबुन से धोएँ। "
            "दो अलग दवाओं के बीच पाँच मिनट का अंतर रखें। आँख ठीक लगे तब भी बूँदें अपने आप बंद न करें।",
            "आँख को मलें या दबाएँ नहीं। भारी सामान न उठाएँ और दो हफ्ते तक देर तक झुककर काम न करें। टीवी देखना, "
            "पढ़ना और घर में टहलना अगले दिन से कर सकते हैं।",
        ]),
        ("तुरंत अस्पताल कब आएँ", [
            "अगर दर्द बढ़ता जाए, अचानक कम दिखने लगे, आँख ज्यादा लाल हो या चिपचिपा पानी निकले, तो उसी दिन किसी भी "
            "समय आँख के आपातकालीन विभाग में आएँ। ये संक्रमण या बढ़े हुए दबाव के लक्षण हो सकते हैं।",
            "मधुमेह और ब्लड प्रेशर की दवाएँ पहले की तरह लेते रहें। खाने पर कोई रोक नहीं है; घर का सामान्य खाना खाएँ।",
            "नया चश्मा ऑपरेशन के चार से छह हफ्ते बाद बनता है, जब आँख पूरी तरह भर जाती है और बूँदें खत्म हो जाती हैं।",
        ]),
    ],
    "ta": [
        ("நீரிழிவு நோயாளிகளுக்கு கண் பரிசோதனை", [
            "நீரிழிவு நோய் உள்ளவர்கள் ஆண்டுக்கு ஒரு முறை கண் மருத்துவரிடம் விழித்திரை பரிசோதனை செய்ய வேண்டும். "
            "பார்வை நன்றாக இருந்தாலும் விழித்திரையில் மாற்றங்கள் ஏற்படலாம்.",
            "ஆரம்பத்திலேயே கண்டுபிடித்தால் லேசர் அல்லது ஊசி சிகிச்சை மூலம் பார்வையைக் காப்பாற்றலாம். இரத்த "
            "சர்க்கரை, இரத்த அழுத்தம் மற்றும் கொழுப்பைக் கட்டுப்பாட்டில் வைத்திருங்கள்.",
            "மருத்துவர் சொன்ன மாத்திரைகளைத் தவறாமல் எடுத்துக் கொள்ளுங்கள். பரிசோதனைக்கு வரும்போது பழைய "
            "அறிக்கைகளையும் கண்ணாடியையும் கொண்டு வாருங்கள்.",
        ]),
        ("உடனே மருத்துவரைப் பாருங்கள்", [
            "திடீரென பார்வை மங்கினால், கண்ணின் முன் கருப்பு புள்ளிகள் அல்லது திரை போல் தெரிந்தால், அதே நாளில் "
            "கண் மருத்துவமனைக்கு வாருங்கள்.",
            "கண் பரிசோதனைக்கு முன் சொட்டு மருந்து போட்டு கண்மணியை விரிவாக்குவார்கள். அதன் பிறகு சில மணி நேரம் "
            "வாகனம் ஓட்ட வேண்டாம்; உடன் ஒருவரை அழைத்து வாருங்கள்.",
        ]),
    ],
    "te": [
        ("గ్లాకోమా: కంటి ఒత్తిడి", [
            "గ్లాకోమా నెమ్మదిగా చూపును తగ్గిస్తుంది. మొదట్లో నొప్పి ఉండదు, అందుకే చాలా మందికి తెలియదు.",
            "నలభై ఏళ్లు దాటిన వారు ప్రతి సంవత్సరం కంటి ఒత్తిడి పరీక్ష చేయించుకోవాలి. కుటుంబంలో ఎవరికైనా "
            "గ్లాకోమా ఉంటే ఇది ఇంకా ముఖ్యం.",
            "డాక్టర్ ఇచ్చిన చుక్కల మందును ప్రతి రోజు ఒకే సమయానికి వేసుకోవాలి. మందు ఆపితే పోయిన చూపు తిరిగి రాదు.",
        ]),
    ],
    "kn": [
        ("ಕಣ್ಣಿನ ಹನಿಗಳನ್ನು ಹಾಕುವ ವಿಧಾನ", [
            "ಹನಿ ಹಾಕುವ ಮೊದಲು ಕೈಗಳನ್ನು ಸೋಪಿನಿಂದ ತೊಳೆಯಿರಿ. ತಲೆಯನ್ನು ಹಿಂದಕ್ಕೆ ಬಾಗಿಸಿ ಕೆಳಗಿನ ರೆಪ್ಪೆಯನ್ನು "
            "ನಿಧಾನವಾಗಿ ಎಳೆಯಿರಿ.",
            "ಬಾಟಲಿಯ ತುದಿ ಕಣ್ಣಿಗೆ ತಾಗದಂತೆ ಒಂದು ಹನಿ ಹಾಕಿ. ನಂತರ ಎರಡು ನಿಮಿಷ ಕಣ್ಣು ಮುಚ್ಚಿ ಕುಳಿತುಕೊಳ್ಳಿ.",
            "ಎರಡು ಬೇರೆ ಹನಿಗಳ ನಡುವೆ ಐದು ನಿಮಿಷ ಅಂತರ ಇರಲಿ. ಬಾಟಲಿಯನ್ನು ತೆರೆದ ಒಂದು ತಿಂಗಳ ನಂತರ ಬಳಸಬೇಡಿ.",
        ]),
    ],
    "bn": [
        ("চোখ ওঠা: কী করবেন", [
            "চোখ লাল হওয়া, জল পড়া আর চুলকানি চোখ ওঠার সাধারণ লক্ষণ। এটি সহজে একজনের থেকে অন্যজনের মধ্যে ছড়ায়।",
            "বারবার হাত ধুয়ে নিন, নিজের তোয়ালে ও রুমাল আলাদা রাখুন। চোখে হাত দেবেন না।",
            "চোখে ব্যথা হলে বা দৃষ্টি ঝাপসা হলে দেরি না করে চক্ষু বিশেষজ্ঞের কাছে যান।",
        ]),
    ],
}


def _unicode_pdf(pages: list[tuple[str, list[str]]], font: str) -> Any:
    """An fpdf2 document of ``pages`` set in a Noto font, shaped by HarfBuzz, each heading a bookmark."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    pdf.add_font(font, "", str(NOTO / f"{font}-Regular.ttf"))
    pdf.add_font(font, "B", str(NOTO / f"{font}-Bold.ttf"))
    pdf.set_text_shaping(True)
    for heading, paragraphs in pages:
        pdf.add_page()
        pdf.start_section(heading)
        pdf.set_font(font, style="B", size=16)
        pdf.multi_cell(0, 10, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(3)
        pdf.set_font(font, size=12)
        for para in paragraphs:
            pdf.multi_cell(0, 8, para, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
    return pdf


def write_indic_pdf(path: Path, language: str = "hi", pages: list[tuple[str, list[str]]] | None = None) -> Path:
    """A Unicode PDF in ``language``'s script (Noto font, HarfBuzz shaping), its headings in the outline."""
    pdf = _unicode_pdf(pages or INDIC_LEAFLETS[language], SCRIPT_FONTS[language])
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def write_krutidev_pdf(path: Path, pages: list[tuple[str, list[str]]] | None = None) -> Path:
    """A Hindi PDF whose text layer is KrutiDev 010-encoded, as legacy-font documents are: the Unicode text is
    encoded by hinlegacy and set in a Latin font (a KrutiDev TTF would draw Devanagari; the text layer is the same)."""
    import hinlegacy
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    pdf.add_font("NotoSans", "", str(NOTO / "NotoSans-Regular.ttf"))
    def krutidev(text: str) -> str:  # hinlegacy 1.0.1 leaves ड़/ढ़ in Unicode; KrutiDev writes them M+ and <+
        encoded = unicodedata.normalize("NFD", hinlegacy.encode(text, "krutidev_010"))
        return encoded.replace("\u0921\u093c", "M+").replace("\u0922\u093c", "<+")

    for heading, paragraphs in pages or INDIC_LEAFLETS["hi"]:
        pdf.add_page()
        pdf.set_font("NotoSans", size=16)
        pdf.multi_cell(0, 10, krutidev(heading), new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("NotoSans", size=12)
        for para in paragraphs:
            pdf.multi_cell(0, 8, krutidev(para), new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def _ruled_notes_page(width: int = 1240, height: int = 1754) -> Any:
    """A page image as handbooks end with: a small "NOTES" title above ruled lines, nothing written."""
    from PIL import Image, ImageDraw

    image = Image.new("L", (width, height), color=255)
    draw = ImageDraw.Draw(image)
    draw.text((width // 2 - 30, 110), "NOTES", fill=0)
    for y in range(200, height - 120, 60):
        draw.line([(100, y), (width - 100, y)], fill=110, width=2)
    return image


def write_image_only_pdf(path: Path, language: str = "hi", pages: list[tuple[str, list[str]]] | None = None,
                         *, blank_pages: int = 1, dpi: int = 200, rotate: int = 0) -> Path:
    """A PDF of page images only, as a scanner writes them: ``language``'s leaflet rendered (pypdfium2) from its
    Unicode PDF at ``dpi``, then ``blank_pages`` ruled "NOTES" pages; no text layer at all. ``rotate``: the leaflet's
    pages scanned turned that many degrees counter-clockwise (on a landscape page for 90 and 270)."""
    import pypdfium2
    from fpdf import FPDF

    source = pypdfium2.PdfDocument(bytes(_unicode_pdf(pages or INDIC_LEAFLETS[language], SCRIPT_FONTS[language])
                                         .output()))
    images = [page.render(scale=dpi / 72, grayscale=True).to_pil().rotate(rotate, expand=True) for page in source]
    source.close()
    images += [_ruled_notes_page() for _ in range(blank_pages)]
    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    for image in images:
        landscape = image.width > image.height
        pdf.add_page(orientation="L" if landscape else "P")
        pdf.image(image, x=0, y=0, w=297 if landscape else 210, h=210 if landscape else 297)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def write_encrypted_pdf(path: Path, *, user_password: str = "", owner_password: str = "owner-secret") -> Path:
    """The example's PDF encrypted (AES-128, fpdf2): with ``user_password=""`` it opens without one, as PDFs
    protected only against printing or copying do; with a user password it cannot be read without it."""
    from fpdf import FPDF
    from fpdf.enums import EncryptionMethod

    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_encryption(owner_password=owner_password, user_password=user_password,
                       encryption_method=EncryptionMethod.AES_128)
    for heading, paragraphs in PREOP_PAGES:
        pdf.add_page()
        pdf.set_font("Helvetica", style="B", size=15)
        pdf.multi_cell(0, 9, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=11)
        for para in paragraphs:
            pdf.multi_cell(0, 6, para, new_x="LMARGIN", new_y="NEXT")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def write_example_sources(out: Path) -> list[Path]:
    """Every generated file of data/raw-example/sources."""
    return [write_pdf(out / "preop-sop.pdf"), write_docx(out / "postop-care.docx"),
            write_docx(out / "eye-drop-schedule-hi.docx", EYEDROP_SCHEDULE_HI),
            write_indic_pdf(out / "hi-cataract-aftercare.pdf", "hi"),
            write_indic_pdf(out / "ta-diabetic-eye-check.pdf", "ta"),
            write_krutidev_pdf(out / "hi-cataract-aftercare-krutidev.pdf"),
            write_image_only_pdf(out / "hi-cataract-aftercare-scan.pdf", "hi")]


def write_browser_pdf(path: Path, language: str = "hi", pages: list[tuple[str, list[str]]] | None = None) -> Path:
    """``language``'s leaflet as an HTML page printed to PDF by headless Chromium (Skia's PDF writer, HarfBuzz
    shaping, Noto fonts), as a browser or word processor writes it: every glyph mapped to its text."""
    import html
    import shutil
    import subprocess
    import tempfile

    body = "".join(f"<h1>{html.escape(h)}</h1>" + "".join(f"<p>{html.escape(p)}</p>" for p in ps)
                   for h, ps in pages or INDIC_LEAFLETS[language])
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "leaflet.html"
        page.write_text(f"<html lang='{language}'><meta charset='utf-8'><body style='font-family: Noto Sans'>"
                        f"{body}</body></html>", encoding="utf-8")
        subprocess.run([shutil.which("chromium") or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                        "--no-pdf-header-footer", f"--user-data-dir={tmp}/profile", f"--print-to-pdf={path}",
                        page.as_uri()], capture_output=True, check=True, timeout=120)
    return path


if __name__ == "__main__":
    print(*write_example_sources(Path(sys.argv[1] if len(sys.argv) > 1 else "data/raw-example/sources")))


def _raw_pdf(path: Path, objects: list[bytes | tuple[bytes, Any]]) -> Path:
    """A PDF written byte by byte: object ``n`` is ``objects[n-1]``, a dictionary, or ``(dictionary, chunks)`` for a
    stream whose data is the iterable of byte ``chunks`` (written as they come: a stream of any size, little memory).
    Object 1 is the catalog."""
    path.parent.mkdir(parents=True, exist_ok=True)
    offsets = []
    with path.open("wb") as out:
        out.write(b"%PDF-1.4\n")
        for number, body in enumerate(objects, 1):
            offsets.append(out.tell())
            out.write(b"%d 0 obj\n" % number)
            if isinstance(body, tuple):
                out.write(body[0] + b"\nstream\n")
                for chunk in body[1]:
                    out.write(chunk)
                out.write(b"\nendstream")
            else:
                out.write(body)
            out.write(b"\nendobj\n")
        xref = out.tell()
        out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
        out.write(b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
        out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return path


def write_inflating_pdf(path: Path, inflated_mb: int = 1024, pages: int = 1) -> Path:
    """A PDF of ``pages`` pages drawing one content stream of a few MB of Flate data that inflates to
    ``inflated_mb`` MB of drawing operators (a compression bomb, as issue 44 found). One MB is deflated once, ending
    in a full flush (which empties the window), so its compressed bytes repeat verbatim; the zlib checksum is
    computed over the whole."""
    import zlib

    block = b"0 0 m 1 1 l S\n" * (1024 * 1024 // 14)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    deflated = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    checksum = 1
    for _ in range(inflated_mb):
        checksum = zlib.adler32(block, checksum)
    data = b"\x78\xda" + deflated * inflated_mb + compressor.flush() + checksum.to_bytes(4, "big")
    kids = b" ".join(b"%d 0 R" % (4 + n) for n in range(pages))
    return _raw_pdf(path, [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        (b"<< /Length %d /Filter /FlateDecode >>" % len(data), [data]),
        *[b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 3 0 R >>"] * pages,
    ])


def write_huge_page_pdf(path: Path, inches: int = 200) -> Path:
    """A PDF of one ``inches`` x ``inches`` page with nothing on it (a few hundred bytes; at 300 dpi its image would
    be 60,000 pixels square)."""
    side = inches * 72
    return _raw_pdf(path, [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents 4 0 R >>" % (side, side),
        (b"<< /Length 0 >>", [b""]),
    ])


def write_image_page_pdf(path: Path, width: int, height: int) -> Path:
    """A one-page PDF drawing an 8-bit grey image that declares ``width`` x ``height`` pixels (its data a few
    bytes: PDFium would allocate the whole image to render it)."""
    import zlib

    data = zlib.compress(b"\xff" * 1024)
    return _raw_pdf(path, [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /XObject << /Im0 5 0 R >> >> "
        b"/Contents 4 0 R >>",
        (b"<< /Length 31 >>", [b"q 595 0 0 842 0 0 cm /Im0 Do Q\n"]),
        (b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray /BitsPerComponent 8 "
         b"/Filter /FlateDecode /Length %d >>" % (width, height, len(data)), [data]),
    ])


# Leaflets in romanized Hindi and Tamil (Latin letters, as many patients and clinics write them): text, not a legacy
# font encoding. The project's own words, written for these tests.
ROMANIZED_LEAFLETS: dict[str, list[tuple[str, list[str]]]] = {
    "hi": [
        ("Motiyabind operation ke baad dhyan rakhein", [
            "Operation ke baad pehle hafte aankh par pani na dalein aur aankh ko haath se na ragdein. Doctor ne jo "
            "dawai di hai, woh samay par daalein: subah, dopahar, shaam aur raat ko ek ek boond.",
            "Agar aankh mein bahut dard ho, laali badh jaaye ya dikhna kam ho jaaye, to turant aspataal aayein. "
            "Kala chashma bahar jaate samay pehnein aur dhool wali jagah se bachein.",
        ]),
        ("Sugar aur BP ki dawai", [
            "Apni sugar aur BP ki goli operation ke din bhi lete rahein, jab tak doctor mana na karein. Khana "
            "samay par khayein aur report saath lekar aayein.",
        ]),
    ],
    "ta": [
        ("Kannu operation kku pinnaadi kavanikka vendiyavai", [
            "Operation mudinja udane kannula thanni padaama paathukonga. Kannai kaiyaala thaeikka koodaathu. "
            "Doctor kudutha marunthai neram thavaraama kaalai, madhiyam, maalai, iravu oru oru thuli podunga.",
            "Kannula romba vali irundhaalo, sivappu adhigamaanaalo, paarvai kuraindhaalo udane hospital ku "
            "vaanga. Veliya pogumbodhu karuppu kannaadi pottukonga.",
        ]),
        ("Sugar, BP marunthu", [
            "Sugar, BP maathirai operation naalilum saapidunga, doctor vendaam nu sonna thavira. Saapaadu neram "
            "thavaraama saapidunga, report eduthuttu vaanga.",
        ]),
    ],
}


def _krutidev(text: str) -> str:
    """Unicode Hindi in KrutiDev 010's encoding (hinlegacy 1.0.1 leaves ड़/ढ़ in Unicode; KrutiDev writes M+ and <+)."""
    import hinlegacy

    encoded = unicodedata.normalize("NFD", hinlegacy.encode(text, "krutidev_010"))
    return encoded.replace("\u0921\u093c", "M+").replace("\u0922\u093c", "<+")


def krutidev_named_font(folder: Path) -> Path:
    """Debian's Noto Sans renamed "KrutiDev010" (fontTools): a font whose name tells the encoding, as the fonts of
    real legacy-Hindi PDFs do (the glyphs drawn do not matter to the text layer)."""
    from fontTools.ttLib import TTFont

    path = folder / "KrutiDev010.ttf"
    if not path.exists():
        font = TTFont(NOTO / "NotoSans-Regular.ttf")
        for record in font["name"].names:
            if record.nameID in (1, 3, 4, 6, 16):
                record.string = "KrutiDev010"
        folder.mkdir(parents=True, exist_ok=True)
        font.save(path)
    return path


def write_bilingual_krutidev_pdf(path: Path, english: list[tuple[str, list[str]]] = PREOP_PAGES,
                                 hindi: list[tuple[str, list[str]]] | None = None) -> Path:
    """A bilingual leaflet as public ones are set: on every page an English heading, then English paragraphs (Noto
    Sans) alternating with Hindi paragraphs in a font named KrutiDev010 (its text layer KrutiDev-encoded)."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    pdf.add_font("NotoSans", "", str(NOTO / "NotoSans-Regular.ttf"))
    pdf.add_font("KrutiDev010", "", str(krutidev_named_font(path.parent / ".fonts")))
    for (heading, paragraphs), (_, hindi_paragraphs) in zip(english, hindi or INDIC_LEAFLETS["hi"], strict=False):
        pdf.add_page()
        pdf.set_font("NotoSans", size=16)
        pdf.multi_cell(0, 10, heading, new_x="LMARGIN", new_y="NEXT")
        for english_para, hindi_para in zip(paragraphs, hindi_paragraphs, strict=False):
            pdf.set_font("NotoSans", size=12)
            pdf.multi_cell(0, 8, english_para, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
            pdf.set_font("KrutiDev010", size=12)
            pdf.multi_cell(0, 8, _krutidev(hindi_para), new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def write_romanized_pdf(path: Path, language: str) -> Path:
    """A leaflet in romanized Hindi or Tamil (``ROMANIZED_LEAFLETS``), set in Noto Sans: Latin text, not a legacy
    font."""
    pdf = _unicode_pdf(ROMANIZED_LEAFLETS[language], "NotoSans")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


MIXED_LINE = [("en", "Eye drops: "), ("hi", "दवा समय पर डालें"), ("en", " four times a day, "),
              ("hi", "हाथ धोकर"), ("en", " each time.")]


def write_mixed_line_pdf(path: Path, pieces: list[tuple[str, str]] = MIXED_LINE) -> Path:
    """One line where English (Noto Sans) and KrutiDev-encoded Hindi (a font named KrutiDev010) take turns, word
    by word, as a bilingual label does."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    pdf.add_font("NotoSans", "", str(NOTO / "NotoSans-Regular.ttf"))
    pdf.add_font("KrutiDev010", "", str(krutidev_named_font(path.parent / ".fonts")))
    pdf.add_page()
    for language, text in pieces:
        pdf.set_font("KrutiDev010" if language == "hi" else "NotoSans", size=12)
        pdf.write(8, _krutidev(text) if language == "hi" else text)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path
