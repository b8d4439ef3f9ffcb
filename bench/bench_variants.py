"""``pipeline variants`` on the bundled cataract set: seconds for the deterministic kinds, and how well the casual
romanization round-trips and matches what people type.

- **time**: the four kinds of issue 45 (romanized, misspelled, code-mixed, english) and ``native`` made for every
  query of data/cataract (``make_variants``, in-process), and the whole command writing a new folder (validation
  included); median of ``--repeats`` (3), each kind alone and all together. Target: under a minute.
- **round trip** on data/cataract's native-script queries: the share of words that come back to their script after
  ``romanize`` then ``native``, three ways: by rule only (no word list); with the words of the dataset's *other*
  queries (leave-one-out: an input method's word list that has not seen the query); with the dataset's words, as
  the command's ``native`` kind uses them (the query's own words included: what the variants report shows).
- **hand-written pairs**: the cataract set's romanized restatements of its native-script queries, written by the
  project, against ``romanize`` of the query they restate (character error rate): the generated kind beside the
  hand-written one.
- **Dakshina** (``--dakshina FOLDER``, optional: a folder with ``hi.translit.sampled.dev.tsv`` and
  ``…test.tsv`` of the Dakshina dataset, Roark et al. 2020, CC BY-SA 4.0, github.com/google-research-datasets/
  dakshina; not in the repository): Hindi words from Wikipedia with the romanizations native speakers typed.
  Per word the character error rate of ``romanize`` against the most attested romanization and against the
  nearest attested one, the share of words romanized exactly as someone did; and ``native`` (by rule, no word
  list) against the native word from every attested romanization. Dev and test reported apart: the rules were
  written on the cataract set and not changed after either was measured.

Writes bench/results/variants.json and prints a table.

    .venv/bin/python bench/bench_variants.py [--repeats 3] [--dakshina /path/to/dakshina/hi/lexicons]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rapidfuzz.distance import Levenshtein  # noqa: E402

from pipeline.dataset import load_dataset  # noqa: E402
from pipeline.dataset.codemix import english_words  # noqa: E402
from pipeline.dataset.romanize import Vocabulary, native, romanize, round_trip  # noqa: E402
from pipeline.dataset.variants import KINDS, Settings, make_variants, variants_command  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "variants.json"
CATARACT = ROOT / "data" / "cataract"
ISSUE_KINDS = ["romanized", "misspelled", "code-mixed", "english"]


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def timings(repeats: int) -> dict:
    dataset = load_dataset(CATARACT)
    out: dict = {"queries": len(dataset.queries), "per_kind_s": {}, "made": {}}
    for kind in KINDS:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            made = make_variants(dataset, [kind], Settings())
            times.append(time.perf_counter() - start)
        out["per_kind_s"][kind] = round(statistics.median(times), 3)
        out["made"][kind] = made.made[kind]
    times, loads = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            variants_command(CATARACT, ISSUE_KINDS, Path(tmp) / "v", Settings(), echo=lambda _: None)
            times.append(time.perf_counter() - start)
            loads.append(_load())
    out["command_four_kinds_s"] = round(statistics.median(times), 3)
    out["command_load"] = max(loads)
    return out


def cataract_round_trip() -> dict:
    dataset = load_dataset(CATARACT)
    keep = english_words()
    natives = [q for q in dataset.queries if q.language in ("hi", "ta", "te", "kn") and q.script == "native"]
    words: dict[str, dict[str, list[int]]] = {}
    vocab: dict[str, Vocabulary] = {}
    for q in natives:
        vocab.setdefault(q.language, Vocabulary(q.language)).add(q.query)
    for q in natives:
        v = vocab[q.language]
        row = words.setdefault(q.language, {"rule": [0, 0], "leave_one_out": [0, 0], "dataset": [0, 0]})
        for name, vocabulary in (("rule", None), ("dataset", v)):
            back, total = round_trip(q.query, q.language, vocabulary, keep)
            row[name][0] += back
            row[name][1] += total
        v.add(q.query, -1)
        back, total = round_trip(q.query, q.language, v, keep)
        v.add(q.query)
        row["leave_one_out"][0] += back
        row["leave_one_out"][1] += total
    out = {lang: {k: round(b / t, 4) for k, (b, t) in ways.items()} | {"words": ways["rule"][1]}
           for lang, ways in words.items()}
    every = {k: round(sum(w[k][0] for w in words.values()) / sum(w[k][1] for w in words.values()), 4)
             for k in ("rule", "leave_one_out", "dataset")}
    out["all"] = every | {"words": sum(w["rule"][1] for w in words.values())}
    return out


def hand_written_pairs() -> dict:
    """The cataract set's hand-written romanized restatements of native-script queries (``variant_of``, same
    language) against ``romanize`` of the query they restate: character error rate, case ignored."""
    dataset = load_dataset(CATARACT)
    by_id = {q.query_id: q for q in dataset.queries}
    edits = chars = pairs = 0
    for q in dataset.queries:
        o = by_id.get(q.variant_of or "")
        if o is None or q.script != "latin" or o.script != "native" or o.language != q.language:
            continue
        mine, theirs = romanize(o.query, o.language).lower(), q.query.lower()
        edits += Levenshtein.distance(mine, theirs)
        chars += len(theirs)
        pairs += 1
    return {"pairs": pairs, "cer": round(edits / chars, 4) if chars else None}


def dakshina(folder: Path) -> dict:
    out = {}
    for split in ("dev", "test"):
        path = folder / f"hi.translit.sampled.{split}.tsv"
        if not path.is_file():
            continue
        attested: dict[str, dict[str, int]] = defaultdict(dict)
        for line in path.read_text(encoding="utf-8").splitlines():
            parts = line.split("\t")
            if len(parts) >= 2 and parts[0] and parts[1]:
                attested[parts[1]][parts[0].lower()] = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else 1
        edits_top = edits_near = chars_top = chars_near = exact = 0
        back_edits = back_chars = back_exact = back_n = 0
        for word, romans in attested.items():
            mine = romanize(word, "hi").lower()
            top = max(sorted(romans), key=romans.__getitem__)
            near = min(sorted(romans), key=lambda r: Levenshtein.distance(mine, r) / len(r))
            edits_top += Levenshtein.distance(mine, top)
            chars_top += len(top)
            edits_near += Levenshtein.distance(mine, near)
            chars_near += len(near)
            exact += mine in romans
            for roman in romans:
                guess = native(roman, "hi")
                back_edits += Levenshtein.distance(guess, word)
                back_chars += len(word)
                back_exact += guess == word
                back_n += 1
        out[split] = {"words": len(attested), "cer_vs_most_attested": round(edits_top / chars_top, 4),
                      "cer_vs_nearest_attested": round(edits_near / chars_near, 4),
                      "exact_as_someone_typed": round(exact / len(attested), 4),
                      "native_by_rule_cer": round(back_edits / back_chars, 4),
                      "native_by_rule_exact": round(back_exact / back_n, 4), "romanizations": back_n}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dakshina", type=Path, help="folder with hi.translit.sampled.{dev,test}.tsv")
    args = parser.parse_args()
    load_before = _load()
    result = {"cpus": os.cpu_count(), "load_before": load_before, "time": timings(args.repeats),
              "round_trip_cataract": cataract_round_trip(), "hand_written_romanized": hand_written_pairs()}
    if args.dakshina:
        result["dakshina_hi"] = dakshina(args.dakshina)
    elif RESULTS.exists():  # keep the last measured figures of the optional corpus
        previous = json.loads(RESULTS.read_text(encoding="utf-8"))
        if "dakshina_hi" in previous:
            result["dakshina_hi"] = previous["dakshina_hi"] | {"kept_from": previous.get("measured_at")}
    result["load_after"] = _load()
    result["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    t = result["time"]
    print(f"variants on data/cataract ({t['queries']} queries; load {load_before} -> {result['load_after']}, "
          f"{result['cpus']} CPUs)")
    for kind, s in t["per_kind_s"].items():
        print(f"  {kind:<11} {s:7.3f} s  ({t['made'][kind]} made)")
    print(f"  command, {', '.join(ISSUE_KINDS)}: {t['command_four_kinds_s']:.3f} s (written and validated)")
    print("round trip (words back in their script): rule / leave-one-out / dataset's words")
    for lang, r in result["round_trip_cataract"].items():
        print(f"  {lang:<4} {r['rule']:.3f} / {r['leave_one_out']:.3f} / {r['dataset']:.3f}  ({r['words']} words)")
    h = result["hand_written_romanized"]
    print(f"the set's hand-written romanized restatements ({h['pairs']}) vs romanize of their original: CER {h['cer']}")
    for split, r in result.get("dakshina_hi", {}).items():
        if isinstance(r, dict):
            print(f"Dakshina hi {split} ({r['words']} words): CER vs most attested {r['cer_vs_most_attested']:.3f}, "
                  f"vs nearest {r['cer_vs_nearest_attested']:.3f}, exact {r['exact_as_someone_typed']:.3f}; "
                  f"native by rule CER {r['native_by_rule_cer']:.3f}")


if __name__ == "__main__":
    main()
