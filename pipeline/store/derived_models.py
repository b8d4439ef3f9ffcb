"""The by-model copies: what Compare runs reads of each answer, in model order.

The per-query tables are kept in (dataset, query, model) order (``Store.cluster``), which a one-query read needs; a
read of one or two models then skips no row group, and at 100× the paper's scale that read alone was over the
page's 300 ms. These tables hold the few columns Compare runs pairs (``pipeline/read/compare.py``), keyed
(dataset, model, query) so that ``Store.cluster`` orders them by model and a model filter reads its own row groups:

- ``model_responses``: per response, whether it errored, its text's hash (NULL exactly when the text is), its
  prompt's hash and run;
- ``model_scores``: per judged item, each metric's score (``item_scores``');
- ``model_facts``: per response, its current lexical scores (``response_facts``');
- ``model_critiques``: per critique, the critiqued text's hash and P(High).

Each is recomputed by key with its source, in the same transaction, like every derived table.
"""

from __future__ import annotations

from pipeline.metrics import METRICS
from pipeline.store.derived import QUERY_LANGUAGE, Derived
from pipeline.store.rows import LEXICAL

BY_MODEL = ("dataset", "model_id", "query_id")

DERIVED = (
    Derived("model_responses", key=BY_MODEL, reads=("responses",), alias="r", select=(
        "SELECT r.dataset, r.model_id, r.query_id, r.error IS NOT NULL AS failed, r.response_hash, r.prompt_hash, "
        "r.run_id FROM responses r {touched}")),
    Derived("model_scores", key=(*BY_MODEL, "judge_id"), reads=("item_scores",), alias="i", watch=QUERY_LANGUAGE,
            select=(f"SELECT i.dataset, i.model_id, i.query_id, i.judge_id, {', '.join(f'i.{m}' for m in METRICS)} "
                    "FROM item_scores i {touched}")),
    Derived("model_facts", key=BY_MODEL, reads=("response_facts",), alias="x", select=(
        f"SELECT x.dataset, x.model_id, x.query_id, {', '.join(f'x.{c}' for c in LEXICAL)} "
        "FROM response_facts x {touched}")),
    Derived("model_critiques", key=(*BY_MODEL, "critic_id"), reads=("critiques",), alias="c", select=(
        "SELECT c.dataset, c.model_id, c.query_id, c.critic_id, c.response_hash, c.p_high FROM critiques c {touched}")),
)
