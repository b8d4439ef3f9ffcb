"""Read models: the one analytics layer that the dashboard (through ``pages/_data.py``), the CLI and the
tests all use. Streamlit-free plain functions, (database path, hashable filters) → small frames;
aggregation happens in DuckDB over read-only connections, and nothing here writes.

``common`` (database file, filters, connections, SQL pieces), then one module per page or concern:
``home``, ``leaderboard``, ``responses``, ``themes``, ``medcode``, ``agreement``, ``playground`` and
``judge_trust`` (the judge warning and self-consistency), and for how far a score can be trusted ``trust``
(reliability matrix, cell marks, provenance), ``jury`` (a jury's scores, α, κ, disagreements) and
``significance`` (tied groups, minimum detectable difference, calibrated means, worst of k).
"""
