"""Pariksha Studio backend: dataset → retrieve → generate → score → store (DuckDB)."""

import os

# OpenMP threads (libgomp: torch's, under the embedder; llama.cpp's, see pipeline/models/llamacpp.py) spin after
# each parallel region by default, CPU taken from every other thread and process on a shared 2-core machine:
# retrieval encodes one query at a time, and 20 single-query encodes took 6.6 s of CPU instead of 0.4 s (the 83
# chunks of data/cataract: 6.3 s instead of 4.8 s). Read when the library loads: here, before any of them can.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
