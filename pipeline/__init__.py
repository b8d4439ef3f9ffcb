"""Pariksha Studio backend: dataset → retrieve → generate → score → store (DuckDB)."""

import os

# OpenMP threads (libgomp: torch's, under the embedder, and llama.cpp's) spin after each parallel region by default,
# CPU taken from every other thread and process on a shared 2-core machine: retrieval encodes one query at a time,
# and 20 single-query encodes took 6.6 s of CPU instead of 0.4 s (the 83 chunks of data/cataract: 6.3 s instead of
# 4.8 s); a 24-token llama.cpp call took 70 s instead of 1.1 s in bench_local_model with other work running. Read
# when the library loads: here, before any of them can.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
