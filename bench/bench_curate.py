"""curate-queries at scale: a generated chatbot log of 5k, 20k and 200k messages (curated whole up to 20k).

The log is generated here (seeded; the project's own words): patients' questions in English, Hinglish, Hindi and
Tamil built from question templates and slot fillers (drugs, eye and body parts, days, relatives), with the noise
a hospital bot sees (greetings, media placeholders, exact repeats, identifiers) and planted near-duplicates (a
question re-sent with a typo, a word added or dropped, punctuation or case changed). Each size is curated with
``pipeline.dataset.curate.curate`` (the stage seconds come from its report); at 5k the near-duplicate pairs are
compared with the exact all-pairs method (``near_duplicates_exact``): recall and precision of the pairs.
Sizes above --full-up-to (20k) run the near-duplicate stage alone (what curate would keep, identifiers not
looked for) and estimate the messages stage from its seconds per message, timed on 2,000 messages: identifier
detection and theme tagging apart. Writes bench/results/curate.json and prints a table.

    .venv/bin/python bench/bench_curate.py [--sizes 5000,20000,200000]
    .venv/bin/python bench/bench_curate.py --templated --sizes 200000 --full-up-to 200000

``--templated``: the log is ``generate_templated_log`` (four message texts with numbers filled in, all approved:
the near-duplicate buckets are huge), written to bench/results/curate_templated.json. Each row also gives the
process's peak resident memory so far (``peak_rss_mb``, getrusage), the peak of the whole process tree while
curating (``tree_peak_rss_mb``: this process and its workers, summed, sampled with psutil every 0.25 s), the CPU
seconds of the tree (``cpu_seconds``, sampled) and the 1-minute load before and after. ``--workers N``: curate's workers
(default: the CPUs; 1 is the one-process path).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import resource
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "curate.json"
SEED = 0
NEAR_SHARE = 0.06  # messages that re-send an earlier question with a small change
REPEAT_SHARE = 0.05  # exact repeats
NOISE_SHARE = 0.08  # greetings, thanks, media placeholders
PII_SHARE = 0.02  # messages carrying a phone number or a self-introduced name

FILL = {
    "drug": ["paracetamol", "metformin", "amlodipine", "aspirin", "moxifloxacin drops", "timolol drops", "insulin",
             "telmisartan", "atorvastatin", "prednisolone drops", "ofloxacin drops", "carboxymethylcellulose drops"],
    "part": ["left eye", "right eye", "both eyes", "eyelid", "the operated eye", "the stitches", "eye corner"],
    "symptom": ["redness", "watering", "itching", "blurred vision", "pain", "swelling", "glare at night",
                "a black spot", "flashes of light", "dryness", "sticky discharge", "headache"],
    "days": ["two days", "three days", "one week", "ten days", "two weeks", "one month", "six weeks"],
    "activity": ["bathe", "wash my face", "watch TV", "use my phone", "cook", "travel by bus", "ride a bike",
                 "go to the temple", "sleep on my side", "lift a bucket", "read the newspaper", "do yoga"],
    "who": ["my mother", "my father", "my grandmother", "my husband", "my wife", "my son", "my uncle"],
    "age": [str(a) for a in range(45, 86)],
    "date": [f"{d} {m}" for d in range(1, 29) for m in ("Jan", "Feb", "March", "April", "May", "June")],
    "condition": ["diabetes", "high BP", "asthma", "thyroid", "glaucoma", "kidney problem", "heart problem"],
    "km": [str(k) for k in range(5, 300, 5)],
    "sugar": [str(v) for v in range(90, 400, 7)],
    "bp": [f"{a}/{b}" for a in range(110, 190, 5) for b in (70, 80, 90, 100)],
    "hi_part": ["बाईं आंख", "दाईं आंख", "दोनों आंखों", "पलक"],
    "hi_symptom": ["लाली", "पानी आना", "खुजली", "धुंधला दिखना", "दर्द", "सूजन"],
    "hi_days": ["दो दिन", "तीन दिन", "एक हफ्ते", "दस दिन", "एक महीने"],
    "hi_drug": ["पैरासिटामोल", "मेटफॉर्मिन", "एस्पिरिन", "आई ड्रॉप"],
    "food": ["rice", "curd", "non-veg", "sweets", "mangoes", "spicy food", "fish", "eggs", "bananas", "tea"],
    "lens": ["monofocal lens", "multifocal lens", "toric lens", "hydrophobic lens", "foldable lens"],
    "lens2": ["an imported lens", "the free lens", "a premium lens", "the Indian lens"],
    "scheme": ["Ayushman Bharat", "PMJAY", "the CM scheme", "ESI", "CGHS", "the state insurance"],
    "power": ["-1.5", "+2.0", "-0.75", "+1.25", "-3.0", "+0.5"],
    "cosmetic": ["kajal", "face cream", "makeup", "hair oil", "surma", "sunscreen"],
    "centre": ["vision centre", "PHC", "camp", "district hospital", "nearby clinic"],
    "hi_activity": ["सिर धोना", "झुकना", "खाना बनाना", "टीवी देखना", "सफर करना"],
    "ta_activity": ["தலைக்கு குளிக்க", "சமைக்க", "டிவி பார்க்க", "பயணம் செய்ய"],
    "ta_part": ["இடது கண்", "வலது கண்", "இரண்டு கண்களிலும்"],
    "ta_symptom": ["சிவப்பு", "நீர் வடிதல்", "அரிப்பு", "மங்கலான பார்வை", "வலி"],
    "ta_days": ["இரண்டு நாள்", "ஒரு வாரம்", "பத்து நாள்"],
    "hl_part": ["left aankh", "right aankh", "dono aankhon", "aankh"],
    "hl_symptom": ["laali", "paani", "khujli", "dhundla dikhna", "dard", "sujan"],
    "hl_days": ["do din", "teen din", "ek hafte", "das din"],
}
TEMPLATES = [
    "Can I take {drug} before cataract surgery?",
    "Is {symptom} in {part} normal {days} after the operation?",
    "{who} is {age} years old, is it safe to do cataract surgery at this age?",
    "After surgery how long should I wait before I {activity}?",
    "I have {symptom} in {part} since {days}, what should I do?",
    "Should {who} stop {drug} on the day of surgery?",
    "Can {who} {activity} {days} after the lens operation?",
    "How many times a day should I put {drug} in {part}?",
    "Why is there {symptom} in {part} even after {days}?",
    "Is {drug} safe for {who} who is diabetic and {age} years old?",
    "{part} mein {hl_symptom} ho raha hai {hl_days} se, kya karu?",
    "Operation ke baad {hl_days} tak {activity} kar sakte hai kya?",
    "{drug} lene se {hl_part} mein {hl_symptom} hota hai kya?",
    "ऑपरेशन के बाद {hi_part} में {hi_symptom} है, क्या यह सामान्य है?",
    "{hi_drug} सर्जरी से पहले ले सकते हैं क्या, {hi_days} से ले रहा हूं?",
    "{hi_days} से {hi_part} में {hi_symptom} हो रहा है, डॉक्टर को कब दिखाएं?",
    "When is the next review for {who}, the doctor said after {days}?",
    "Can {who} eat {food} after the cataract operation?",
    "Which lens is better for {who}, {lens} or {lens2}, and what is the cost?",
    "Is the operation free under {scheme} for {who}?",
    "{who} cannot see clearly in {part} even with new glasses, power is {power}, why?",
    "Can I stop {drug} after {days} or continue till the review?",
    "What happens if I miss {drug} for a day?",
    "Is it ok to apply {cosmetic} {days} after surgery?",
    "{who} has {condition}, will the surgery take longer to heal?",
    "Black glasses should be worn for how long, {days} or more?",
    "My {part} feels like sand is inside, is that because of {drug}?",
    "Hospital is {km} km away, can the review be done at the {centre}?",
    "Kya {who} ko {food} khana chahiye operation ke baad?",
    "{scheme} card se operation free hoga kya {who} ke liye?",
    "Chashma kitne din baad banwana hai, {hl_days} ho gaye?",
    "क्या {hi_drug} को खाने के बाद लेना है या पहले?",
    "मोतियाबिंद के ऑपरेशन के बाद कितने दिन तक {hi_activity} नहीं करना चाहिए?",
    "கண்புரை அறுவை சிகிச்சைக்கு பிறகு எத்தனை நாள் {ta_activity} கூடாது?",
    "{ta_days} கழித்து கண்ணாடி போடலாமா?",
    "அறுவை சிகிச்சைக்கு பிறகு {ta_part} {ta_symptom} இருக்கிறது, இது சாதாரணமா?",
    "{ta_days} ஆகியும் {ta_part} {ta_symptom} போகவில்லை, என்ன செய்வது?",
]
OPENERS = ["", "", "", "Doctor, ", "Sir, ", "Madam please tell me, ", "One doubt: ", "Namaste doctor, ",
           "I had surgery on {date}. ", "{who} had the operation on {date}. ", "Hello, I am {age} years old. ",
           "Review was on {date}. ", "Sorry to disturb, ", "Urgent: ", "Good evening. "]
CLOSERS = ["", "", "", " Please reply.", " Waiting for your answer.", " I am worried.", " Thank you.",
           " The doctor said to ask here.", " I also have {condition}.", " I am on {drug} for {condition}.",
           " We live {km} km from the hospital.", " Last sugar reading was {sugar}.", " BP was {bp} today."]
NOISE = ["Hi", "hello doctor", "Thank you", "ok", "Good morning sir", "<Media omitted>", "image omitted", "🙏🙏",
         "thanks a lot", "This message was deleted", "namaste", "vanakkam"]
NAMES = ["Ravi Kumar", "Sunita Sharma", "Arjun Reddy", "Meena Iyer", "Kavya Nair", "Imran Khan", "Anjali Das"]


def perturb(text: str, rng: random.Random) -> str:
    """The same question re-sent: a typo, a word added, dropped or doubled, punctuation or case changed."""
    words = text.split()
    kind = rng.randrange(6)
    if kind == 0 and len(text) > 12:  # a typo: two neighbouring letters swapped
        i = rng.randrange(1, len(text) - 2)
        return text[:i] + text[i + 1] + text[i] + text[i + 2:]
    if kind == 1:
        return text + rng.choice([" please", " pls reply", " sir", " urgent", " ??"])
    if kind == 2 and len(words) > 8:
        del words[rng.randrange(len(words))]
        return " ".join(words)
    if kind == 3:
        return text.rstrip("?.!") + rng.choice(["", "??", " ?", "."])
    if kind == 4:
        return text.lower() if rng.random() < 0.5 else text.upper()
    i = rng.randrange(len(words))
    return " ".join([*words[:i + 1], words[i], *words[i + 1:]])


def question(rng: random.Random) -> str:
    """One patient's question: a template filled in, with an opener and a closer sometimes."""
    template = rng.choice(OPENERS) + rng.choice(TEMPLATES) + rng.choice(CLOSERS)
    return template.format(**{k: rng.choice(v) for k, v in FILL.items()})


def generate_log(n: int, seed: int = SEED) -> list[dict[str, str]]:
    """``n`` chatbot-log rows (timestamp, message, answer, approved), seeded."""
    rng = random.Random(seed)
    asked: list[str] = []
    rows = []
    for i in range(n):
        roll = rng.random()
        if roll < NOISE_SHARE:
            message = rng.choice(NOISE)
        elif roll < NOISE_SHARE + REPEAT_SHARE and asked:
            message = rng.choice(asked)
        elif roll < NOISE_SHARE + REPEAT_SHARE + NEAR_SHARE and asked:
            message = perturb(rng.choice(asked), rng)
        elif roll < NOISE_SHARE + REPEAT_SHARE + NEAR_SHARE + PII_SHARE:
            message = (f"my name is {rng.choice(NAMES)}, " if rng.random() < 0.5
                       else f"call me on 98{rng.randrange(10**8):08d}, ") + question(rng)
        else:
            message = question(rng)
            asked.append(message)
        day, minute = divmod(i * 7, 24 * 60)
        approved = rng.random() < 0.7
        stamp = f"2024-{1 + day // 28 % 12:02d}-{1 + day % 28:02d} {minute // 60:02d}:{minute % 60:02d}"
        rows.append({"timestamp": stamp,
                     "message": message, "answer": "Please follow the advice in your discharge sheet." if approved
                     else "", "approved": "yes" if approved else "no"})
    return rows


TEMPLATED = [  # a bot's menu-driven or copy-pasted messages: a few texts with numbers filled in (huge LSH buckets)
    "My sugar reading today is {sugar} fasting and BP is {bp}, can my cataract surgery go ahead on {date}?",
    "{who} is {age} years old with sugar {sugar}, is surgery safe? Hospital is {km} km away.",
    "Token number {km} for review on {date}, what time should we come for {who}?",
    "Sugar {sugar}, BP {bp}, age {age}: please confirm the surgery date {date}.",
]


def generate_templated_log(n: int, seed: int = SEED) -> list[dict[str, str]]:
    """``n`` rows of heavily templated messages (``TEMPLATED`` with numbers and a few words filled in, exact
    repeats among them), each with an approved answer: the log whose near-duplicate buckets are huge."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        message = rng.choice(TEMPLATED).format(**{k: rng.choice(v) for k, v in FILL.items()})
        day, minute = divmod(i * 3, 24 * 60)
        stamp = f"2024-{1 + day // 28 % 12:02d}-{1 + day % 28:02d} {minute // 60:02d}:{minute % 60:02d}"
        rows.append({"timestamp": stamp, "message": message,
                     "answer": "Please bring your reports; the doctor will confirm.", "approved": "yes"})
    return rows


def write_log(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        out = csv.DictWriter(fh, fieldnames=list(rows[0]))
        out.writeheader()
        out.writerows(rows)
    return path


def pair_set(pairs: list[dict]) -> set[str]:
    return {p["query_id"] for p in pairs}  # the messages flagged (each with its representative)


def per_message_seconds(rows: list[dict[str, str]], sample: int = 2000) -> dict[str, float]:
    """Seconds per message of the two parts of the messages stage, timed apart on the first ``sample`` messages:
    identifiers (``find_pii`` + ``mask``) and language/themes (``ThemeTagger.tag``)."""
    from pipeline.dataset.pii import find_pii, mask
    from pipeline.dataset.themes import ThemeTagger

    texts = [r["message"] for r in rows[:sample]]
    mask(texts[0], find_pii(texts[0]))  # the analyzer is built once per process: not a per-message cost
    start = time.perf_counter()
    masked = [mask(t, find_pii(t)) for t in texts]
    pii = time.perf_counter() - start
    tagger = ThemeTagger([])
    start = time.perf_counter()
    for t in masked:
        tagger.tag(t)
    return {"identifiers": round(pii / len(texts), 6), "themes": round((time.perf_counter() - start) / len(texts), 6)}


def near_duplicates_only(rows: list[dict[str, str]]) -> dict[str, object]:
    """The near-duplicate stage alone on what curate would keep of ``rows`` (not health and exact repeats dropped;
    identifiers not looked for): for sizes where the whole curate takes too long on a shared machine."""
    from pipeline.dataset.curate import near_duplicates, normalise, not_health

    seen: dict[str, str] = {}
    for line, r in enumerate(rows, 2):
        key = normalise(r["message"])
        if not not_health(r["message"]) and key not in seen:
            seen[key] = f"log-{line:05d}"
    start = time.perf_counter()
    pairs = near_duplicates(list(seen), list(seen.values()))
    return {"kept": len(seen), "near_duplicates_s": round(time.perf_counter() - start, 1),
            "near_duplicate_pairs": len(pairs)}


@contextmanager
def tree_sampler(every: float = 0.25):
    """Yields a dict filled with ``peak_rss_mb`` (the largest sum of RSS over this process and its descendants seen;
    pages a fork shares are counted in each, so an upper bound) and, on exit, ``cpu_seconds`` (user + system of this
    process and of each descendant as last sampled, psutil)."""
    import psutil

    me, stats, stop = psutil.Process(), {"peak_rss_mb": 0}, threading.Event()
    own_before = sum(me.cpu_times()[:2])
    seen: dict[int, float] = {}  # descendant pid -> its CPU seconds when last sampled (the workers are the fork
    # server's children, not this process's: their times never reach this process's children times)

    def sample() -> None:
        while not stop.is_set():
            total = me.memory_info().rss
            for child in me.children(recursive=True):
                try:
                    total += child.memory_info().rss
                    seen[child.pid] = sum(child.cpu_times()[:2])
                except psutil.Error:
                    pass
            stats["peak_rss_mb"] = max(stats["peak_rss_mb"], round(total / 2**20))
            stop.wait(every)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield stats
    finally:
        stop.set()
        thread.join()
        stats["cpu_seconds"] = round(sum(me.cpu_times()[:2]) - own_before + sum(seen.values()), 1)


def main() -> None:
    from rich.console import Console

    from pipeline.dataset.curate import curate, default_workers, near_duplicates_exact, normalise

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,20000,200000")
    parser.add_argument("--full-up-to", type=int, default=20000,
                        help="curate logs up to this size whole; larger ones: near-duplicates measured alone, the "
                             "messages stage estimated from its measured seconds per message")
    parser.add_argument("--templated", action="store_true", help="the heavily templated log (generate_templated_log)")
    parser.add_argument("--workers", type=int, default=None, help="curate's worker processes (default: the CPUs)")
    args = parser.parse_args()
    results_file = RESULTS.with_name("curate_templated.json") if args.templated else RESULTS
    console = Console(highlight=False, width=130)
    results = []
    for n in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            rows = generate_templated_log(n) if args.templated else generate_log(n)
            log = write_log(Path(tmp) / "log.csv", rows)
            load_before = os.getloadavg()[0]
            row: dict[str, object] = {"messages": n}
            if n <= args.full_up_to:
                start = time.perf_counter()
                with tree_sampler() as tree:
                    report = curate(log, Path(tmp) / "ds", progress=True, workers=args.workers)
                row.update(workers=args.workers or default_workers(), tree_peak_rss_mb=tree["peak_rss_mb"],
                           cpu_seconds=tree["cpu_seconds"])
                row.update(mode="curate", seconds=round(time.perf_counter() - start, 1),
                           stage_seconds=report["seconds"], kept=report["queries"] + report["without_ground_truth"],
                           near_duplicate_pairs=len(report["near_duplicates"]))
            else:
                only = near_duplicates_only(rows)
                row.update(mode="near-duplicates alone", kept=only["kept"],
                           stage_seconds={"near_duplicates": only["near_duplicates_s"]},
                           near_duplicate_pairs=only["near_duplicate_pairs"])
            row["per_message_s"] = per = per_message_seconds(rows)
            row["load_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
            row["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
            if row["mode"] != "curate":
                row["messages_stage_estimate_s"] = round(n * (per["identifiers"] + per["themes"]), 1)
            if n <= 5000 and row["mode"] == "curate":
                kept = [json.loads(line) for name in ("queries.jsonl", "queries_without_gt.jsonl")
                        for line in (Path(tmp) / "ds" / name).read_text(encoding="utf-8").splitlines()]
                start = time.perf_counter()
                exact = pair_set(near_duplicates_exact([normalise(q["query"]) for q in kept],
                                                       [q["query_id"] for q in kept]))
                found = pair_set(report["near_duplicates"])
                row.update(exact_seconds=round(time.perf_counter() - start, 1), exact_pairs=len(exact),
                           recall=round(len(found & exact) / len(exact), 4) if exact else None,
                           precision=round(len(found & exact) / len(found), 4) if found else None)
            results.append(row)
            console.print(row)
    from rich.table import Table

    table = Table(title="curate-queries on a generated log (2 cores)")
    for col in ("messages", "seconds", "near-dup s", "messages s (identifiers+themes)", "identifiers ms/msg",
                "themes ms/msg", "write s", "near-dups", "recall vs exact", "precision", "peak MB", "load"):
        table.add_column(col, justify="right")
    for r in results:
        stages = r["stage_seconds"]
        messages = (f"{stages['messages']:.1f}" if "messages" in stages
                    else f"≈{r['messages_stage_estimate_s']:.0f} (estimated)")
        table.add_row(f"{r['messages']:,}", f"{r['seconds']:.1f}" if "seconds" in r else "—",
                      f"{stages['near_duplicates']:.1f}", messages,
                      f"{1000 * r['per_message_s']['identifiers']:.2f}", f"{1000 * r['per_message_s']['themes']:.2f}",
                      f"{stages['write']:.1f}" if "write" in stages else "—",
                      f"{r['near_duplicate_pairs']:,}",
                      str(r.get("recall", "")), str(r.get("precision", "")),
                      f"{r.get('tree_peak_rss_mb', r['peak_rss_mb']):,}",
                      f"{r['load_1min'][0]:.1f}-{r['load_1min'][1]:.1f}")
    console.print(table)
    results_file.parent.mkdir(parents=True, exist_ok=True)
    results_file.write_text(json.dumps({"cpus": os.cpu_count(), "seed": SEED, "templated": args.templated,
                                        "results": results}, indent=1) + "\n", encoding="utf-8")
    console.print(f"wrote {results_file.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
