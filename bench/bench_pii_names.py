"""The person-name recognizer's throughput and memory: ``find_pii`` (every recognizer, as curate-queries runs it) on
chatbot messages, with the learned recognizer (``pipeline/dataset/pii_model.py``) and with the rules alone,
alternated; messages per second, the seconds 200,000 messages would take, and the process's peak resident memory.

The messages are bench_curate's generated log (seeded; the project's own words: English, Hinglish, Hindi and Tamil
questions with noise and identifiers) plus the project's labelled messages in every script
(``tests/fixtures/pii_labelled.jsonl``). Writes bench/results/pii_names.json and prints a table.

    nice -n 5 .venv/bin/python bench/bench_pii_names.py [--messages 4000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_curate import generate_log  # noqa: E402

from pipeline.dataset import pii_model  # noqa: E402
from pipeline.dataset.pii import find_pii  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "pii_names.json"


def messages(n: int) -> list[str]:
    """``n`` messages: the labelled set's texts in every script, then the generated log's."""
    labelled = [json.loads(line)["text"] for line in
                (ROOT / "tests" / "fixtures" / "pii_labelled.jsonl").read_text(encoding="utf-8").splitlines()]
    log = [row["message"] for row in generate_log(max(n - len(labelled), 0))]
    return (labelled + log)[:n]


def timed(texts: list[str]) -> float:
    started = time.perf_counter()
    for text in texts:
        find_pii(text)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    texts = messages(args.messages)
    learned = pii_model.tag
    rules_only = lambda toks, text: ["O"] * len(toks)  # noqa: E731
    find_pii(texts[0])  # load Presidio, the word lists and the weights before timing
    pii_model.tagger()
    runs = []
    for round_ in range(args.rounds):
        for name, tagger in (("rules", rules_only), ("rules+crf", learned)):
            pii_model.tag = tagger
            seconds = timed(texts)
            runs.append({"round": round_, "recognizer": name, "messages": len(texts), "seconds": round(seconds, 2),
                         "messages_per_s": round(len(texts) / seconds),
                         "seconds_per_200k": round(200_000 * seconds / len(texts)),
                         "load_1min": round(os.getloadavg()[0], 1)})
            print(runs[-1], flush=True)
    pii_model.tag = learned
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = {"cpus": os.cpu_count(), "model_mb": round(pii_model.MODEL.stat().st_size / 1e6, 2)
           if pii_model.MODEL.exists() else None, "peak_rss_mb": round(peak_mb), "runs": runs}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"\n{'recognizer':<10} {'round':>5} {'msgs/s':>7} {'200k s':>7} {'load':>5}")
    for r in runs:
        print(f"{r['recognizer']:<10} {r['round']:>5} {r['messages_per_s']:>7} {r['seconds_per_200k']:>7} "
              f"{r['load_1min']:>5}")
    print(f"peak RSS {out['peak_rss_mb']} MB; weights {out['model_mb']} MB -> {RESULTS}")


if __name__ == "__main__":
    main()
