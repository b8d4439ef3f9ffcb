"""The dashboard's pages in menu order, each declared once (``Page``, as a step is declared by ``Step``): its file,
title, icon, URL path, what the home page says of it and whether it needs a results database. The catalog
(``pipeline.catalog``) carries them; ``app.py`` routes them and the tests and the dashboard benchmark take their page
lists from there, so a new page is its file plus one entry here (``PAGES.register`` from outside)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipeline.metrics import METRICS
from pipeline.read import (
    agreement,
    arena,
    cost,
    dataset,
    home,
    judge_trust,
    jury,
    leaderboard,
    medcode,
    medcode_checks,
    playground,
    responses,
    review,
    robustness,
    rubric,
    setup,
    significance,
    themes,
    trust,
)
from pipeline.registry import Registry


@dataclass(frozen=True)
class Read:
    """A read model a page calls, under the name the page calls it by (``pages/_data.py``): ``cached`` (the
    default) through ``st.cache_data`` keyed by its arguments and the database's stamp; not cached when what it
    reads moves with every write or its clock (a queue, the live run)."""

    name: str
    fn: Callable[..., Any]
    cached: bool = True


def cached(*fns: Callable[..., Any], prefix: str = "") -> tuple[Read, ...]:
    """``Read``s of ``fns`` under their own names (``prefix`` before each), cached."""
    return tuple(Read(prefix + fn.__name__, fn) for fn in fns)


def moving(*fns: Callable[..., Any], prefix: str = "") -> tuple[Read, ...]:
    """``Read``s of ``fns`` under their own names, not cached: they move with every write or their clock."""
    return tuple(Read(prefix + fn.__name__, fn, cached=False) for fn in fns)


@dataclass(frozen=True)
class Page:
    """One page: ``file`` (its script, from the repository's root), ``title``, ``icon``, ``text`` (the home page's
    line), ``needs_results`` (False: it draws without a results database, the others show how to make one) and
    ``reads``: the read models it calls through the cached layer (``pages/_data.py`` makes one function of each,
    cached or not as declared; a read two pages share is declared by both, the same way). Its URL path is its name
    in ``PAGES``."""

    file: str
    title: str
    icon: str
    text: str
    needs_results: bool = True
    reads: tuple[Read, ...] = ()


TRUST = cached(trust.reliability_matrix, trust.score_provenance, significance.calibrated_means,
               significance.worst_of_k)
ARENA_BOARD = (*cached(arena.has_arena), *cached(arena.fit, arena.judges, prefix="arena_"))
# the home page and the sidebar every page draws (app.py, pages/_ui.py)
HOME = Page("app.py", "Home", ":material/home:", "What the database holds, the judge in use and how far to trust it.",
            reads=(*cached(home.choices, home.overview, home.judge_summary, judge_trust.judge_consistency,
                           cost.cost_table, cost.cost_by_model, cost.cost_by_stage, cost.cost_by_run),
                   *moving(home.live_run, setup.setup_status, setup.launch_stamp)))


PAGES = Registry("page", {
    "leaderboards": Page("pages/1_leaderboards.py", "Leaderboards", ":material/leaderboard:",
        f"Models by AGG per language with {', '.join(METRICS)}, 95% CIs, lexical baselines, safety checks and the "
        "paper's published leaderboards beside them.",
        reads=(*cached(leaderboard.leaderboard_base, leaderboard.jury_base, leaderboard.safety_summary,
                              leaderboard.language_scripts, significance.significance), *TRUST, *ARENA_BOARD,
               *moving(leaderboard.paper_agg_check, leaderboard.paper_copies))),
    "responses": Page("pages/2_responses.py", "Response browser", ":material/chat:",
        "For doctors: each query, its ground truth, the model's answer, the chunks it saw, every score with its "
        "justification, the Med-CoDE critique; two models side by side.",
        reads=(*cached(responses.browse_view, responses.browse_count, responses.query_view, rubric.rubric_item),)),
    "themes": Page("pages/3_themes.py", "Themes", ":material/category:",
        "Misspelling, code-mixing, non-native English, cultural, patient-specific, out-of-KB: scores per theme and "
        "model, with examples.",
        reads=(*cached(themes.theme_scores, themes.theme_examples, themes.variant_changes, trust.score_provenance),)),
    "robustness": Page("pages/13_robustness.py", "Robustness", ":material/shield:",
        "Each model's change when the same question is asked the ways patients write it (romanized, misspelled, "
        "code-mixed, English: `pipeline variants`), with paired intervals; models ranked by their worst kind.",
        reads=cached(robustness.robustness_changes, robustness.worst_pairs, robustness.variant_quality,
                     robustness.variant_samples, rubric.rubric_graders)),
    "medcode": Page("pages/4_medcode.py", "Med-CoDE", ":material/stacked_bar_chart:",
        "Med-CoDE disagreement distributions (None/Low/Moderate/High) per model, their correlation with the judge and "
        "lexical scores, and the paper's Table 2.",
        reads=(*cached(medcode.medcode_view, medcode.medcode_correlations, medcode_checks.critique_sources,
                      medcode_checks.critique_checks), *moving(medcode_checks.critique_queue))),
    "human_vs_llm": Page("pages/5_human_vs_llm.py", "Human vs LLM", ":material/rule:",
        "Percentage agreement and weighted kappa between human labels and the judge, rankings side by side, and an "
        "annotation queue.",
        reads=(*cached(agreement.agreement_view, agreement.plans, agreement.plan_progress),
               *moving(agreement.annotation_state))),
    "playground": Page("pages/6_playground.py", "Playground", ":material/science:",
        "Ask one query live: retrieved chunks, streamed answers, judge scores and Med-CoDE on request.",
        needs_results=False,
        reads=cached(playground.dataset_queries, playground.dataset_path)),
    "judge_trust": Page("pages/7_judge_trust.py", "Judge trust", ":material/verified:",
        "Can the judge be believed here? Its reliability per language, script and theme, a jury's agreement and "
        "disagreements, its position, length and self-preference biases, human-calibrated means, repeated judging and "
        "where every score came from.",
        reads=(*TRUST, *cached(jury.jury_agreement, jury.disagreement_items, significance.item_variance,
                                   leaderboard.leaderboard_base, leaderboard.jury_base), *ARENA_BOARD,
               *cached(arena.position_flips, arena.verbosity, arena.self_preference, arena.direct_verbosity,
                       prefix="arena_"))),
    "rubrics": Page("pages/8_rubrics.py", "Rubric scores", ":material/checklist:",
        "HealthBench rubric scores: models by the share of rubric points earned, with CIs, per axis and theme tag, and "
        "the grader against physicians.",
        reads=cached(rubric.rubric_graders, rubric.rubric_leaderboard, rubric.rubric_tags, rubric.grader_meta_eval)),
    "compare_runs": Page("pages/9_compare_runs.py", "Compare runs", ":material/compare_arrows:",
        "Two runs side by side (two result files, or two models, judges or datasets): paired differences per metric "
        "with CIs, the items that changed most, and which provenance differs."),
    "review_queue": Page("pages/10_review_queue.py", "Review queue", ":material/medical_services:",
        "For doctors: the most worrying answers first (Med-CoDE high, wrong although the KB knows, refused, judges "
        "disagree, harmful rubric lines met), everything about each, and your verdict as a label.",
        reads=(*cached(review.review_item), *moving(review.review_queue))),
    "arena": Page("pages/12_arena.py", "Doctors' arena", ":material/compare:",
        "For doctors: two anonymous answers to one patient question, pick the better; Bradley–Terry leaderboards from "
        "doctors' votes and from the pairwise judge, with and without style control.",
        reads=(*ARENA_BOARD, *cached(arena.win_matrix, arena.separation, arena.doctors_vs_judge, arena.languages,
                                 arena.annotators, arena.both_bad, prefix="arena_"),
               *moving(arena.next_pair, prefix="arena_"), Read("arena_votes_by", arena.annotator_votes, cached=False))),
    "dataset": Page("pages/11_dataset.py", "Dataset", ":material/folder_open:",
        "How the dataset was built: source documents with chunks, pages, tokens and flags, the KB's growth, excluded "
        "chatbot messages by reason (identifiers masked) and queries by language, script, theme.",
        needs_results=False,
        reads=(*cached(dataset.dataset_folder), *moving(dataset.dataset_folders, dataset.folder_view))),
})
