"""The Med-CoDE page: disagreement distributions per model, Table 2 (METEOR, ROUGE-L, exact-match accuracy,
LLM-Accuracy and the four mean probabilities, each with n and a 95 % interval), the classifier behind every
distribution with its model card, and the correlations the paper states (§5), per model and pooled.

Only classified critiques of the current text of responses without an error count; lexical scores come from
``response_facts``, judge scores from ``item_scores`` (both current only), accuracy from ``answer_checks`` of the
current response text (``correct`` NULL = unparsed: counted, never right or wrong). Intervals: percentile
bootstrap of the mean (``analysis.stats``) for METEOR, ROUGE-L and the probabilities; Wilson for the two
accuracies (``analysis.medcode``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.analysis.medcode import check_claims, correlations, proportion
from pipeline.analysis.stats import bootstrap_mean_cis
from pipeline.errors import UserError
from pipeline.metrics import METRICS
from pipeline.read.common import (
    DISAGREEMENT,
    DISAGREEMENT_LABELS,
    LEXICAL_LABELS,
    Filters,
    current_join,
    group_pred,
    group_source,
    model_pred,
    on_qf,
    queries_cte,
    reference_table,
)
from pipeline.store import LEXICAL, SHARED_READERS

QUANTITIES = {**{p: f"P({label})" for p, label in DISAGREEMENT_LABELS.items()}, "expected": "E[disagreement]"}
ACCURACY_LABELS = {"llm_accuracy": "LLM-Accuracy", "exact_match": "exact match (MCQ)"}
MEASURES = {"meteor": "METEOR", "rouge_l": "ROUGE-L", "exact_match": "exact-match accuracy (MCQ)",
            "llm_accuracy": "LLM-Accuracy", **{p: QUANTITIES[p] for p in DISAGREEMENT}}
SCORE_LABELS = {**LEXICAL_LABELS, **ACCURACY_LABELS, **{m: m for m in METRICS}}
CORRELATION_TARGETS = ("meteor", "rouge_l", "llm_accuracy", "exact_match", *METRICS,
                       *(c for c in LEXICAL if c not in ("meteor", "rouge_l")))
CORRELATION_ITEMS = 20_000
CI_RESAMPLES = 1000
POOLED = "(all models)"
ANSWER_CHECKS = "answer_checks"


def _tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def _present(have: set[str], *tables: str) -> bool:
    """Whether the file has the writer's Med-CoDE tables (``derived_critiques``; an older file has them after
    ``upgrade``)."""
    return set(tables) <= have


def _hist_from_groups(table: str, keys: dict[str, str], measures: tuple[str, ...]) -> str:
    """SQL: the histogram frame (``keys``: name -> column of the group table; measure, v, k, s) summed over a group
    relation's languages and scripts (``table``; ``{pred}``: its WHERE predicate, alias g)."""
    cols = ", ".join(f"g.{column} AS {name}" for name, column in keys.items())
    parts = " UNION ALL ".join(
        f"SELECT {cols}, '{m}' AS measure, unnest(g.{m}_v) AS v, unnest(g.{m}_k) AS k, unnest(g.{m}_s) AS s "
        f"FROM {table} g WHERE {{pred}}" for m in measures)
    return f"SELECT {', '.join(keys)}, measure, v, sum(k)::BIGINT AS k, sum(s) AS s FROM ({parts}) GROUP BY ALL"


def _rows_once(con, table: str, f: Filters, present: bool) -> str:
    """``table`` when it answers the view (``group_source``), else a temporary table of its definition's rows over the
    filtered queries (a few hundred groups): computed once for the several statements that read it."""
    source, params = group_source(table, f, present)
    if source == table:
        return table
    con.execute(f"CREATE OR REPLACE TEMP TABLE _view_{table} AS SELECT * FROM {source}", params)
    return f"_view_{table}"


def _view_from_groups(con, f: Filters, present: bool) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``medcode_view``'s per-group frames (both grouping sets, probability and lexical histograms) from
    ``critique_groups`` and ``lexical_groups`` (when ``present``), else from their definitions over the filtered
    queries (``group_source``: a theme filter, an older file without them)."""
    pred, params = group_pred(f, "g")
    rows = {t: _rows_once(con, t, f, present) for t in ("critique_groups", "lexical_groups")}
    try:
        means = ", ".join(f"sum(g.{p}_sum) / nullif(sum(list_sum(g.{p}_k)), 0) AS {p}" for p in DISAGREEMENT)
        family = "g.classifier_family"
        both = con.execute(
            f"SELECT grouping(g.query_language) AS per_model, g.dataset, g.query_language AS language, g.model_id, "
            f"g.critic_id, {family} AS classifier, sum(g.n)::BIGINT AS n, sum(g.uniform)::BIGINT AS uniform, {means} "
            f"FROM {rows['critique_groups']} g WHERE {pred} GROUP BY GROUPING SETS ((g.dataset, g.query_language, "
            f"g.model_id, g.critic_id, {family}), (g.model_id, g.dataset, g.critic_id, {family})) HAVING sum(g.n) > 0",
            params).df()
        keys = {"model_id": "model_id", "dataset": "dataset"}
        p_hist = con.execute(_hist_from_groups(rows["critique_groups"], {
            **keys, "critic_id": "critic_id", "classifier": "classifier_family"}, DISAGREEMENT).format(pred=pred),
            params * len(DISAGREEMENT)).df()
        l_hist = con.execute(_hist_from_groups(rows["lexical_groups"], keys, ("meteor", "rouge_l")).format(pred=pred),
                             params * 2).df()
    finally:
        for table, name in rows.items():
            if name != table:
                con.execute(f"DROP TABLE {name}")
    return both, p_hist, l_hist


def medcode_view(db: str | Path, f: Filters, judge: str | None = None) -> dict[str, pd.DataFrame]:
    """The page's frames (``judge`` is not used: Table 2's accuracy is the configured checker's, not the judge's):

    - ``distribution``: mean probabilities per dataset, language, model, critic and classifier;
    - ``summary``: Table 2 wide, one row per model, dataset, critic and classifier: n (critiques), METEOR,
      ROUGE-L, exact_match, llm_accuracy (of ``llm_checker``: the checker with the most checks of the dataset),
      and the four mean probabilities;
    - ``table2``: Table 2 long, one row per model, dataset and measure (and critic/classifier for the
      probabilities, checker for LLM-Accuracy): ``value``, ``lo``, ``hi`` (95 %), ``n``, ``unparsed``;
    - ``classifiers``: each (critic, classifier) behind a distribution with its kind and model-card test figures.

    The distributions and histograms come from the writer's ``critique_groups`` / ``lexical_groups`` when the
    filters map onto their key (no theme filter), else from their definitions over the filtered queries.
    """
    with SHARED_READERS.cursor(db) as con:
        have = _tables(con)
        both, p_hist, l_hist = _view_from_groups(con, f, _present(have, "critique_groups", "lexical_groups"))
        acc = _accuracy(con, db, f) if ANSWER_CHECKS in have else pd.DataFrame(
            columns=["model_id", "dataset", "method", "checker_id", "total", "parsed", "k"])
        configs = [r[0] for r in con.execute("SELECT DISTINCT config FROM runs").fetchall()] if "runs" in have else []
    distribution = (both[both.per_model == 0].drop(columns=["per_model"])
                    .sort_values(["dataset", "language", "model_id", "critic_id", "classifier"])
                    .reset_index(drop=True))
    groups = (both[both.per_model == 1].drop(columns=["per_model", "language"])
              .sort_values(["model_id", "dataset", "critic_id", "classifier"]).reset_index(drop=True))
    table2 = _table2(p_hist, l_hist, acc)
    return {"distribution": distribution, "summary": _summary(groups, table2, acc), "table2": table2,
            "classifiers": classifiers(groups, configs)}


def _accuracy(con, db: str | Path, f: Filters) -> pd.DataFrame:
    """Per model, dataset, method and checker: answer checks of the current text, parsed ones, correct ones."""
    qf, p_qf = queries_cte(f)
    pred, p_model = model_pred(f, "a")
    return con.execute(
        f"WITH {qf} SELECT a.model_id, a.dataset, a.method, a.checker_id, count(*) AS total, "
        "count(a.correct) AS parsed, count(*) FILTER (WHERE a.correct) AS k "
        f"FROM answer_checks a JOIN qf ON {on_qf(f, 'a')} {current_join(db, 'a')} WHERE {pred} "
        "GROUP BY ALL", [*p_qf, *p_model]).df()


def _bootstrapped(hist: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Mean (exact, from the sums), n and bootstrap interval per ``keys`` of a histogram (v rounded, k, s)."""
    if hist.empty:
        return pd.DataFrame(columns=[*keys, "value", "lo", "hi", "n"])
    hist = hist.sort_values([*keys, "v"]).reset_index(drop=True)  # within a group by value: resampling is seeded
    group = hist.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    lo, hi = bootstrap_mean_cis(group, hist.v.to_numpy(float), hist.k.to_numpy(np.int64), int(group.max()) + 1,
                                n_resamples=CI_RESAMPLES)
    out = hist.groupby(keys, sort=False, dropna=False).agg(n=("k", "sum"), s=("s", "sum")).reset_index()
    return out.assign(value=out.s / out.n, lo=lo, hi=hi).drop(columns=["s"])


def _table2(p_hist: pd.DataFrame, l_hist: pd.DataFrame, acc: pd.DataFrame) -> pd.DataFrame:
    probs = _bootstrapped(p_hist, ["model_id", "dataset", "critic_id", "classifier", "measure"])
    lexical = _bootstrapped(l_hist, ["model_id", "dataset", "measure"])
    rows = []
    for r in acc.itertuples(index=False):
        share = proportion(int(r.k), int(r.parsed))
        rows.append({"model_id": r.model_id, "dataset": r.dataset,
                     "measure": "exact_match" if r.method == "choice" else "llm_accuracy",
                     "checker": None if r.method == "choice" else r.checker_id, "value": share["value"],
                     "lo": share["lo"], "hi": share["hi"], "n": int(r.parsed), "unparsed": int(r.total - r.parsed)})
    accuracy = pd.DataFrame(rows, columns=["model_id", "dataset", "measure", "checker", "value", "lo", "hi", "n",
                                           "unparsed"])
    out = pd.concat([frame for frame in (lexical.assign(unparsed=0), accuracy, probs.assign(unparsed=0))
                     if not frame.empty] or [accuracy], ignore_index=True)
    for col in ("critic_id", "classifier", "checker"):
        if col not in out:
            out[col] = None
    out["measure_label"] = out.measure.map(MEASURES)
    order = {m: i for i, m in enumerate(MEASURES)}
    out = out.assign(_o=out.measure.map(order)).sort_values(["model_id", "dataset", "_o", "critic_id", "checker"])
    return (out.rename(columns={"model_id": "model"})
            [["model", "dataset", "measure", "measure_label", "critic_id", "classifier", "checker", "value", "lo",
              "hi", "n", "unparsed"]].reset_index(drop=True))


def _summary(groups: pd.DataFrame, table2: pd.DataFrame, acc: pd.DataFrame) -> pd.DataFrame:
    """Table 2 wide: the probabilities per (model, dataset, critic, classifier), METEOR, ROUGE-L and the two
    accuracies per (model, dataset); LLM-Accuracy of the dataset's most used checker."""
    llm = acc[acc.method == "llm"]
    checker = (llm.groupby(["dataset", "checker_id"]).total.sum().reset_index()
               .sort_values(["dataset", "total", "checker_id"], ascending=[True, False, True])
               .drop_duplicates("dataset").set_index("dataset").checker_id.to_dict())
    t = table2.rename(columns={"model": "model_id"})
    keep = t.measure.isin(["meteor", "rouge_l", "exact_match"]) | (
        (t.measure == "llm_accuracy") & (t.checker == t.dataset.map(checker)))
    per_item = (t[keep].set_index(["model_id", "dataset", "measure"]).value.unstack().reset_index() if keep.any()
                else pd.DataFrame(columns=["model_id", "dataset"]))
    per_item.columns.name = None
    base = groups[["model_id", "dataset", "critic_id", "classifier", "n", *DISAGREEMENT]]
    out = base.merge(per_item, on=["model_id", "dataset"], how="outer")
    for col in ("meteor", "rouge_l", "exact_match", "llm_accuracy"):
        if col not in out:
            out[col] = np.nan
    out["llm_checker"] = out.dataset.map(checker)
    return (out.rename(columns={"model_id": "model"})
            [["model", "dataset", "critic_id", "classifier", "n", "meteor", "rouge_l", "exact_match", "llm_accuracy",
              "llm_checker", *DISAGREEMENT]].sort_values(["model", "dataset", "critic_id", "classifier"])
            .reset_index(drop=True))


# -- the classifiers behind the distributions ------------------------------------------------------------
def _configured_folders(configs: list[str]) -> list[Path]:
    """Checkpoint folders the database's runs configured (``medcode.classifier`` paths), besides 'trained'."""
    from pipeline.steps.medcode import TRAINED_CLASSIFIER

    folders = [TRAINED_CLASSIFIER]
    for text in configs:
        try:
            classifier = (json.loads(text).get("medcode") or {}).get("classifier")
        except (ValueError, AttributeError):
            continue
        if isinstance(classifier, str) and classifier not in ("trained", "logprobs"):
            folders.append(Path(classifier).expanduser())
    return list(dict.fromkeys(folders))


def classifier_kind(tag: str) -> str:
    if tag.startswith("logprobs"):
        return ("zero-shot: the critic's label-token log-probabilities (not the paper's method; Med-CoDE "
                "classifies critiques with a fine-tuned BERT)")
    if tag.startswith("checkpoint:"):
        return "fine-tuned classifier (the paper's method)"
    return "unknown"


def classifiers(groups: pd.DataFrame, configs: list[str]) -> pd.DataFrame:
    """Each (critic, classifier tag) behind the distributions: n, the uniform fallbacks of ``logprobs``, datasets,
    kind, and from the checkpoint's model card (``pipeline.train.classifier.card_for_tag``) its test accuracy,
    macro-F1 and test n, the base model and the training CSV."""
    from pipeline.train.classifier import card_for_tag

    cols = ["critic_id", "classifier", "kind", "n", "uniform", "datasets", "test_accuracy", "test_macro_f1",
            "test_n", "base_model", "trained_on", "card"]
    if groups.empty:
        return pd.DataFrame(columns=cols)
    folders = _configured_folders(configs)
    rows = []
    for (critic, tag), part in groups.groupby(["critic_id", "classifier"], sort=True):
        card: dict[str, Any] | None = None
        try:
            card = card_for_tag(tag, folders)
        except (UserError, OSError):  # a broken card is reported as missing, never breaks the page
            card = None
        test = (card or {}).get("test") or {}
        trained_on = (card or {}).get("training_csv") or {}
        note = ("" if tag.startswith("logprobs") else "model card found" if card else
                "model card not found (the checkpoint is not in .cache/medcode-classifier or a configured folder, "
                "or it was retrained since)")
        rows.append({"critic_id": critic, "classifier": tag, "kind": classifier_kind(tag), "n": int(part.n.sum()),
                     "uniform": int(part.uniform.sum()), "datasets": ", ".join(sorted(part.dataset.unique())),
                     "test_accuracy": test.get("accuracy"), "test_macro_f1": test.get("macro_f1"),
                     "test_n": test.get("n"), "base_model": (card or {}).get("base_model"),
                     "trained_on": trained_on.get("path"), "card": note})
    return pd.DataFrame(rows, columns=cols)


# -- correlations ----------------------------------------------------------------------------------------
def medcode_correlations(db: str | Path, f: Filters, judge: str | None, critic: str | None = None) -> pd.DataFrame:
    """Pearson r, over items, of P(None), P(Low), P(Moderate), P(High) and E[disagreement] with METEOR, ROUGE-L,
    LLM-Accuracy (1 correct / 0 not, unparsed left out), exact match, the judge's metrics and the other lexical
    scores; pooled (model ``(all models)``) and per model, with n and a Fisher-z 95 % interval.

    Long: ``model``, ``quantity``, ``score`` (column names; ``QUANTITIES`` and ``SCORE_LABELS`` label them),
    ``r``, ``lo``, ``hi``, ``n``. Over a fixed pseudo-random sample of CORRELATION_ITEMS critiqued items (the
    same every time; all when fewer) of one critic's critiques (``critic``; default: the critic with the most in
    scope), of which those of the current response text count.
    ``attrs``: ``items``, ``critic``, ``critics`` (every critic in scope) and ``checker`` (the LLM-Accuracy
    checker: the one with the most checks in scope).
    """
    qf, p_qf = queries_cte(f)
    with SHARED_READERS.cursor(db) as con:
        have = _tables(con)
        # the groups and the items (their definitions over the filtered queries under a theme filter) count every
        # classified critique of a stored query, current or not
        groups, p_groups = group_source("critique_groups", f, _present(have, "critique_groups"))
        g_pred, p_group = group_pred(f, "g")
        critics = [r[0] for r in con.execute(
            f"SELECT g.critic_id FROM {groups} g WHERE {g_pred} GROUP BY ALL HAVING sum(g.classified) > 0 "
            "ORDER BY sum(g.classified) DESC, g.critic_id", [*p_groups, *p_group]).fetchall()]
        critic = critic if critic in critics else (critics[0] if critics else "")
        # The sample is the CORRELATION_ITEMS critiques of the smallest hash; from the groups' counts per top 8 bits
        # of it, the last bucket it reaches, so that only the critiques up to it are sorted (the same sample)
        last = _last_bucket(con, f, critic) if groups == "critique_groups" else None  # (a theme filter: a small scan)
        p_bucket = [] if last is None or last == 255 else [(last + 1) << 56]

        def bucket(hashed: str) -> str:  # a range of the hash: the scan skips what it can
            return f"{hashed} < ?::UBIGINT" if p_bucket else "TRUE"

        checker = None
        if ANSWER_CHECKS in have:
            pa, p_a = model_pred(f, "a")
            found = con.execute(
                f"WITH {qf} SELECT a.checker_id FROM answer_checks a JOIN qf ON {on_qf(f, 'a')} "
                f"WHERE a.method = 'llm' AND {pa} GROUP BY ALL ORDER BY count(*) DESC, a.checker_id LIMIT 1",
                [*p_qf, *p_a]).fetchone()
            checker = found[0] if found else None
        key = "{a}.dataset = c.dataset AND {a}.query_id = c.query_id AND {a}.model_id = c.model_id"
        checks = (f"LEFT JOIN answer_checks la ON {key.format(a='la')} AND la.method = 'llm' AND la.checker_id = ? "
                  f"AND la.response_hash = c.response_hash LEFT JOIN answer_checks em ON {key.format(a='em')} "
                  "AND em.method = 'choice' AND em.response_hash = c.response_hash"
                  if ANSWER_CHECKS in have else "")
        accuracy = ("la.correct::DOUBLE AS llm_accuracy, em.correct::DOUBLE AS exact_match"
                    if ANSWER_CHECKS in have else "NULL::DOUBLE AS llm_accuracy, NULL::DOUBLE AS exact_match")

        def scores(lexical: str) -> str:
            return (", ".join(f"i.{m}" for m in METRICS) + ", " + ", ".join(f"{lexical}.{c}" for c in LEXICAL)
                    + f", {accuracy} ")

        # the judge's scores of the sample's queries only: the scan of item_scores skips most rows before the join
        judged = (f"LEFT JOIN (SELECT i.dataset, i.query_id, i.model_id, {', '.join(f'i.{m}' for m in METRICS)} "
                  "FROM item_scores i WHERE i.judge_id = ? AND i.query_id IN (SELECT query_id FROM c)) i "
                  "ON i.dataset = c.dataset AND i.query_id = c.query_id AND i.model_id = c.model_id ")
        probabilities = ("c.model_id, c.p_none, c.p_low, c.p_moderate, c.p_high, "
                         "c.p_low + 2 * c.p_moderate + 3 * c.p_high AS expected, ")
        # the sample's rows with their lexical scores, from one relation
        sample, p_sample = group_source("critique_items", f, _present(have, "critique_items"))
        i_pred, p_items = group_pred(f, "c")
        items = con.execute(
            f"WITH c AS MATERIALIZED (SELECT * FROM (SELECT * FROM {sample} c WHERE c.critic_id = ? AND {i_pred} "
            f"AND {bucket('c.h')} ORDER BY c.h LIMIT {CORRELATION_ITEMS}) c WHERE c.cur) "
            f"SELECT {probabilities}{scores('c')}FROM c {judged}{checks}",
            [*p_sample, critic, *p_items, *p_bucket, judge or "", *([checker or ""] if checks else [])]).df()
    table = correlations(items, list(QUANTITIES), list(CORRELATION_TARGETS), by="model_id", pooled=POOLED)
    table = table.rename(columns={"group": "model"})
    table.attrs.update(items=len(items), checker=checker, critic=critic or None, critics=critics)
    return table


def _last_bucket(con, f: Filters, critic: str) -> int | None:
    """The top 8 bits of hash(dataset, query, model) up to which the scope's classified critiques of ``critic``
    number CORRELATION_ITEMS (``critique_groups``' buckets); None when they are fewer (the sample is all of them)."""
    pred, params = group_pred(f, "g")
    row = con.execute(
        "SELECT min(b) FROM (SELECT b, sum(k) OVER (ORDER BY b) AS total FROM (SELECT b, sum(k) AS k FROM "
        "(SELECT unnest(g.hash_bucket) AS b, unnest(g.hash_count) AS k FROM critique_groups g "
        f"WHERE g.critic_id = ? AND {pred}) GROUP BY b)) WHERE total >= ?", [critic, *params, CORRELATION_ITEMS]
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def pooled_matrix(table: pd.DataFrame) -> pd.DataFrame:
    """The pooled correlations as a quantity × score matrix of r (labels as on the page)."""
    pooled = table[table.model == POOLED]
    wide = pooled.pivot(index="quantity", columns="score", values="r")
    wide = wide.reindex(index=list(QUANTITIES), columns=list(CORRELATION_TARGETS))
    return wide.rename(index=QUANTITIES, columns=SCORE_LABELS)


def paper_claims(table: pd.DataFrame, model: str = POOLED) -> pd.DataFrame:
    """The paper's three correlation claims (§5) beside this database's correlations of ``model``."""
    return check_claims(table.rename(columns={"model": "group"}), model)


def published_claims() -> pd.DataFrame:
    """The same claims checked on the 12 rows of the published Table 2 (model × dataset means, n = 12)."""
    paper = reference_table("medcode_table2").assign(exact_match=np.nan, model_id="paper")
    table = correlations(paper, list(DISAGREEMENT), ["meteor", "rouge_l", "llm_accuracy", "exact_match"])
    return check_claims(table)
