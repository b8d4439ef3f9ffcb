"""Seconds from `make run` on a fresh clone to the first answer written by a local language model and its first judge
score (issue 43's target: both within 300 s on 2 cores), with the launcher's phases and the load beside them.

Each run clones this repository's HEAD into a temporary folder, starts `make run PORT=…` there (in its own process
group), watches the clone's `data/results.duckdb` (read-only connections, retried while the run holds the file) and
its launch status file, and stops the whole group once the first judge score of a `llamacpp/` model is stored (or at
`--timeout`). pip's sources and the assembled Gemma GGUF (`~/.cache/pariksha`) are the machine's: where pip reads
packages from local folders or a mirror, the install is faster than where it downloads them, as the output says.

    .venv/bin/python bench/bench_first_answer.py [--runs 3]   # writes bench/results/first-answer.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from pipeline.launch import stop  # noqa: E402

LOCAL = "llamacpp/%"
FIRST_ANSWER = f"SELECT min(created_at) FROM responses WHERE model_id LIKE '{LOCAL}' AND text IS NOT NULL"
FIRST_SCORE = f"SELECT min(created_at) FROM judgments WHERE model_id LIKE '{LOCAL}' AND parse_ok"
ENGINE = f"SELECT any_value(engine) FROM responses WHERE model_id LIKE '{LOCAL}' AND text IS NOT NULL"


def _epoch(stamp: datetime | None) -> float | None:
    """A stored ``created_at`` (naive UTC) as seconds since the epoch."""
    return None if stamp is None else stamp.replace(tzinfo=UTC).timestamp()


def _firsts(db: Path) -> tuple[float | None, float | None, str | None] | None:
    """The first local answer's and first local judge score's times, and the engine; None while the file is busy."""
    if not db.exists():
        return None, None, None
    try:
        with duckdb.connect(str(db), read_only=True) as con:
            tables = {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
            if "responses" not in tables:
                return None, None, None
            answer = con.execute(FIRST_ANSWER).fetchone()[0]
            engine = con.execute(ENGINE).fetchone()[0]
            score = con.execute(FIRST_SCORE).fetchone()[0] if "judgments" in tables else None
            return _epoch(answer), _epoch(score), engine
    except duckdb.Error:
        return None  # the run holds the file for a write: read again shortly


def _phases(status: Path, started: float) -> dict[str, dict[str, float | None]]:
    """Each phase's start and end in seconds after ``started`` (the launcher's status file)."""
    try:
        phases = json.loads(status.read_text(encoding="utf-8")).get("phases", [])
    except (OSError, ValueError):
        return {}

    def after(stamp: float | None) -> float | None:  # the launcher records time.time()
        return None if stamp is None else round(stamp - started, 1)

    return {p["name"]: {"started": after(p.get("started_at")), "ended": after(p.get("ended_at"))} for p in phases}


def one_run(port: int, timeout: float) -> dict:
    """Clone, `make run`, wait for the first local judge score, stop; the seconds after `make run`."""
    with tempfile.TemporaryDirectory(prefix="pariksha-first-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True,
                              check=True).stdout.strip()
        db = clone / "data" / "results.duckdb"
        loads: list[float] = []
        log = (Path(tmp) / "make-run.log").open("w")
        started = time.time()
        process = subprocess.Popen(["make", "run", f"PORT={port}"], cwd=clone, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        answer = score = engine = None
        try:
            while time.time() - started < timeout and process.poll() is None:
                time.sleep(2)
                loads.append(os.getloadavg()[0])
                firsts = _firsts(db)
                if firsts is not None:
                    answer, score, engine = firsts
                if score is not None:
                    break
            phases = _phases(Path(f"{db}.launch.json"), started)
        finally:
            stop(process)  # the launcher's own stop: the whole group, SIGINT, then SIGTERM, then SIGKILL
            log.close()
        tail = (Path(tmp) / "make-run.log").read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
    return {"commit": head, "first_local_answer_s": None if answer is None else round(answer - started, 1),
            "first_local_judge_score_s": None if score is None else round(score - started, 1), "engine": engine,
            "phases": phases, "load_1min": {"min": round(min(loads), 2), "max": round(max(loads), 2)} if loads else {},
            "log_tail": [] if score is not None else tail}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--timeout", type=float, default=900, help="give up on a run after this many seconds")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "first-answer.json")
    args = parser.parse_args()
    runs = []
    for n in range(args.runs):
        runs.append(one_run(args.port + n, args.timeout))
        print(json.dumps(runs[-1]), file=sys.stderr)
    done = [r for r in runs if r["first_local_judge_score_s"] is not None]
    result = {"measured": datetime.now(UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count(), "runs": runs,
              "packages": "from pip's configured sources on this machine (pip config list): a machine that downloads "
              "them from the internet installs slower",
              "median_first_local_answer_s": statistics.median(r["first_local_answer_s"] for r in done) if done
              else None,
              "median_first_local_judge_score_s": statistics.median(r["first_local_judge_score_s"] for r in done)
              if done else None,
              "target_s": 300}
    text = json.dumps(result, indent=2)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
