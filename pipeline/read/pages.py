"""The dashboard's pages in menu order, each declared once (``Page``, as a step is declared by ``Step``): its file,
title, icon, URL path, what the home page says of it, whether it needs a results database, the reads it makes and
how the dashboard benchmark calls them. The catalog (``pipeline.catalog``) carries them; ``app.py`` routes them,
``pages/_data.py`` makes its functions of their reads, and the tests and the dashboard benchmark
(``bench/bench_dashboard.py``) take their page lists and calls from there, so a new page is its file plus one entry
here (``PAGES.register`` from outside)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
from pipeline.read.common import Filters
from pipeline.registry import Registry


# -- how the dashboard benchmark calls a read ------------------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    """The arguments of one call, as the page writes them (``at(c.db, c.f, c.judge)``)."""

    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def at(*args: Any, **kwargs: Any) -> Call:
    """A call's arguments: ``at(c.db, c.dataset, None, "doctors", rounds=100)``."""
    return Call(args, kwargs)


@dataclass
class BenchContext:
    """What the dashboard benchmark found in its database, as a page's sidebar and controls have it on a first
    visit; ``Bench.args`` makes a call's arguments from it. ``kept``: this render's results so far, by the name of
    the read (or ``via`` function) that gave them, for a call that takes what an earlier one returned (the arena's
    board)."""

    db: str
    dataset: str
    f: Filters  # the sidebar's filters at their defaults: the dataset alone
    judge: str  # the sidebar's judge
    weights: tuple[float, ...]  # the latest run's AGG weights
    preset: str | None  # the weights preset the latest run named
    members: tuple[str, ...]  # every judge that scored the dataset
    jury: str  # the jury of ``members``, or ``judge`` when fewer than two
    models: tuple[str, ...]  # the English leaderboard's models, best first
    grader: str  # the rubric grader with the most grades ("" without one)
    plan: str | None  # the newest human-evaluation plan of the dataset
    language: str = "en"
    query: str = "en-00001"
    annotator: str = "bench"
    kept: dict[str, Any] = field(default_factory=dict)


Args = Callable[[BenchContext], "Call | list[Call] | None"]


@dataclass(frozen=True)
class Bench:
    """One call the dashboard benchmark makes of a read, declared with the read (``Read.bench``).

    ``args(ctx)``: its arguments (``at(...)``), from what the bench found in the database; a list of them: that
    many calls, timed as one row; None: the page would not make the call here (the arena's tables are empty), so
    it is not made. ``view``: the row it is timed in — "" the page's first visit, else the words after the page's
    name (``", jury (first visit)"``), ``SIDEBAR`` for the sidebar's reads (the home page's) drawn before every
    page, ``OTHER`` for the reads timed apart from the page's views. ``label``: the call's line in the row (default
    ``via`` or the read's name); calls next to each other with one label are one line. ``via``: the function of
    ``pages/_data.py`` the page calls, which makes this read (``model_means`` over ``leaderboard_base``; default the
    read itself). ``then``: what the page does with the result, timed with the call (``theme_table`` over
    ``theme_scores``). ``pages``: the pages that make the call (default every page that declares the read)."""

    args: Args
    view: str = ""
    label: str = ""
    via: str = ""
    then: Callable[[Any, BenchContext], Any] | None = None
    pages: tuple[str, ...] = ()


SIDEBAR = "sidebar (every page)"
OTHER = " (other reads)"  # reads the benchmark did not time before issue 46: apart, so the views' figures compare


@dataclass(frozen=True)
class Read:
    """A read model a page calls, under the name the page calls it by (``pages/_data.py``): ``cached`` (the
    default) through ``st.cache_data`` keyed by its arguments and the database's stamp; not cached when what it
    reads moves with every write or its clock (a queue, the live run). ``bench``: how the dashboard benchmark calls
    it; a cached read a page declares without one stops the benchmark (and fails ``tests/test_bench_dashboard.py``)."""

    name: str
    fn: Callable[..., Any]
    cached: bool = True
    bench: tuple[Bench, ...] = ()


def cached(fn: Callable[..., Any], *bench: Bench, prefix: str = "", name: str = "") -> Read:
    """A cached ``Read`` of ``fn`` under its own name (``prefix`` before it) or ``name``, called by the benchmark as
    ``bench`` says."""
    return Read(name or prefix + fn.__name__, fn, True, bench)


def moving(fn: Callable[..., Any], *bench: Bench, prefix: str = "", name: str = "") -> Read:
    """A ``Read`` as ``cached`` makes, not cached: what it reads moves with every write or its clock."""
    return Read(name or prefix + fn.__name__, fn, False, bench)


@dataclass(frozen=True)
class Page:
    """One page: ``file`` (its script, from the repository's root), ``title``, ``icon``, ``text`` (the home page's
    line), ``needs_results`` (False: it draws without a results database, the others show how to make one) and
    ``reads``: the read models it calls through the cached layer (``pages/_data.py`` makes one function of each,
    cached or not as declared; a read two pages share is declared by both, the same object). ``bench``: the
    benchmark's calls of ``pages/_data.py`` functions that are no read of the page (``via`` names them; timed after
    the reads' calls of their view). Its URL path is its name in ``PAGES``."""

    file: str
    title: str
    icon: str
    text: str
    needs_results: bool = True
    reads: tuple[Read, ...] = ()
    bench: tuple[Bench, ...] = ()


# -- the pages' views the benchmark times beyond their first visit (the words after the page's name) -------------------
LB, JT = "leaderboards", "judge_trust"
TOGGLE = " + tied groups, calibrated means (toggle)"
JURY_VIEW = ", jury (first visit)"
ARENA_VOTE = " (vote view, a name given)"
ARENA_BOARD_VIEW = " (leaderboard view)"


def _has_arena(c: BenchContext) -> bool:
    return bool(c.kept.get("has_arena"))


def _board(c: BenchContext) -> Any:
    """The doctors' board this render read, when the arena page draws below it (it stops at an empty one)."""
    fit = c.kept.get("arena_fit")
    return fit if fit is not None and not fit.table.empty else None


def _doctors_board(c: BenchContext) -> Call | None:
    """The doctors' Bradley–Terry board as the arena page's ``current_board()`` asks it at its defaults."""
    return at(c.db, c.dataset, None, "doctors", None, style_control=False, rounds=arena.ROUNDS, anchor=None,
              exclude=(), cap=None) if _has_arena(c) else None


def _both_bad_into_board(bad: Any, c: BenchContext) -> Any:
    """The "both bad" columns merged into the board, as the arena page does before the board's other views."""
    fit = c.kept["arena_fit"]
    c.kept["arena_fit"] = dataclasses.replace(fit, table=fit.table.merge(
        bad[["model", "both_bad_rate", "both_bad_lower", "both_bad_upper"]], on="model", how="left"))
    return bad


def _pairwise_judge(c: BenchContext) -> str | None:
    """The Judge trust page's pairwise judge: the sidebar's when it judged pairs, else the first that did."""
    judges = c.kept.get("arena_judges") or []
    return (c.judge if c.judge in judges else judges[0]) if judges else None


def _two_models(c: BenchContext) -> Call:
    """The compare page within one file: the English leaderboard's first two models, the sidebar's judge."""
    from pipeline.read.compare import Side

    return at(Side(c.db, c.dataset, c.models[0], c.judge), Side(c.db, c.dataset, c.models[1], c.judge), c.weights)


# -- reads more than one page declares (the same object on each) ---------------------------------------------------
LEADERBOARD_BASE = cached(
    leaderboard.leaderboard_base,
    Bench(lambda c: at(c.db, c.f, c.judge, c.weights), via="model_means", pages=(LB,),
          label="model_means (heatmap: leaderboard_base's SQL)"),
    Bench(lambda c: at(c.db, c.f, c.judge, c.weights, c.language), via="leaderboard", label="leaderboard en (CIs)",
          pages=(LB,)),
    Bench(lambda c: at(c.db, c.f, c.judge), then=lambda base, c: leaderboard.leaderboard(base, c.weights, c.language),
          label="  of which 120 CIs + table (SQL cached)", pages=(LB,)),
    Bench(lambda c: at(c.db, c.f, c.jury, c.weights, c.language), via="leaderboard", view=JURY_VIEW,
          label="leaderboard en (jury)", pages=(LB,)),
    Bench(lambda c: [at(c.db, c.f, j, c.weights, c.preset) for j in c.members], via="model_means",
          label="model_means per judge and jury", pages=(JT,)))
JURY_BASE = cached(
    leaderboard.jury_base,
    Bench(lambda c: at(c.db, c.f, c.jury, c.weights), via="model_means", view=JURY_VIEW, label="model_means (jury)",
          pages=(LB,)),
    Bench(lambda c: at(c.db, c.f, c.jury, c.weights, c.preset), via="model_means",
          label="model_means per judge and jury", pages=(JT,)))
RELIABILITY_MATRIX = cached(
    trust.reliability_matrix,
    Bench(lambda c: at(c.db, c.dataset, c.judge, ()), label="reliability_matrix (cell marks)", pages=(LB,)),
    Bench(lambda c: at(c.db, c.dataset, c.jury, c.members), view=JURY_VIEW, label="reliability_matrix (jury)",
          pages=(LB,)),
    Bench(lambda c: at(c.db, c.dataset, c.judge, ()), pages=(JT,)))
SCORE_PROVENANCE = cached(
    trust.score_provenance,
    Bench(lambda c: at(c.db, c.dataset, c.judge, ()), pages=(LB, JT)),
    Bench(lambda c: at(c.db, c.dataset, c.jury, c.members), view=JURY_VIEW, label="score_provenance (jury)",
          pages=(LB,)),
    Bench(lambda c: at(c.db, c.dataset, c.judge, ()), view=OTHER, pages=("themes",)))
CALIBRATED_MEANS = cached(
    significance.calibrated_means,
    Bench(lambda c: at(c.db, c.f, c.judge, c.language), view=TOGGLE, label="calibrated_means en (PPI)", pages=(LB,)),
    Bench(lambda c: at(c.db, c.f, c.judge, c.language), label="calibrated_means en", pages=(JT,)))
WORST_OF_K = cached(significance.worst_of_k,
                    Bench(lambda c: at(c.db, c.f, c.judge, c.weights, c.language, c.preset), view=OTHER))
TRUST = (RELIABILITY_MATRIX, SCORE_PROVENANCE, CALIBRATED_MEANS, WORST_OF_K)
HAS_ARENA = cached(arena.has_arena,
                   Bench(lambda c: at(c.db), view=OTHER, pages=(LB, JT, "arena")),
                   Bench(lambda c: at(c.db), view=ARENA_VOTE, pages=("arena",)),
                   Bench(lambda c: at(c.db), view=ARENA_BOARD_VIEW, pages=("arena",)))
ARENA_FIT = cached(
    arena.fit,
    Bench(lambda c: at(c.db, c.dataset, None, "doctors", rounds=100) if _has_arena(c) else None, view=OTHER,
          pages=(LB,)),
    Bench(lambda c: at(c.db, c.dataset, None, "doctors", rounds=0) if _has_arena(c) else None, view=OTHER,
          pages=(JT,)),
    Bench(_doctors_board, view=ARENA_VOTE, label="arena_fit (doctors' board, for the adaptive pair)",
          pages=("arena",)),
    Bench(_doctors_board, view=ARENA_BOARD_VIEW, label="arena_fit (doctors, all languages)", pages=("arena",)),
    prefix="arena_")
ARENA_JUDGES = cached(arena.judges,
                      Bench(lambda c: at(c.db) if _has_arena(c) else None, view=OTHER, pages=(JT,)),
                      Bench(lambda c: at(c.db) if _has_arena(c) else None, view=ARENA_BOARD_VIEW, pages=("arena",)),
                      prefix="arena_")
RUBRIC_GRADERS = cached(rubric.rubric_graders,
                        Bench(lambda c: at(c.db, c.dataset), pages=("rubrics",)),
                        Bench(lambda c: at(c.db, c.dataset), view=OTHER, pages=("robustness",)))

# the home page and the sidebar every page draws (app.py, pages/_ui.py)
HOME = Page("app.py", "Home", ":material/home:", "What the database holds, the judge in use and how far to trust it.",
            reads=(cached(home.choices, Bench(lambda c: at(c.db), view=SIDEBAR),
                          Bench(lambda c: at(c.db, c.dataset), view=SIDEBAR, via="judge_in_use")),
                   cached(home.overview, Bench(lambda c: at(c.db))),
                   cached(home.judge_summary, Bench(lambda c: at(c.db), view=SIDEBAR), Bench(lambda c: at(c.db))),
                   cached(judge_trust.judge_consistency, Bench(lambda c: at(c.db, c.f, c.judge), view=OTHER)),
                   cached(cost.cost_table, Bench(lambda c: at(c.db), view=OTHER)),
                   *(cached(fn, Bench(lambda c: at(c.db, c.dataset), view=OTHER))
                     for fn in (cost.cost_by_model, cost.cost_by_stage, cost.cost_by_run)),
                   moving(home.live_run), moving(setup.setup_status), moving(setup.launch_stamp)))


PAGES = Registry("page", {
    "leaderboards": Page("pages/1_leaderboards.py", "Leaderboards", ":material/leaderboard:",
        f"Models by AGG per language with {', '.join(METRICS)}, 95% CIs, lexical baselines, safety checks and the "
        "paper's published leaderboards beside them.",
        reads=(JURY_BASE, LEADERBOARD_BASE,
               cached(leaderboard.safety_summary,
                      Bench(lambda c: at(c.db, c.f.with_(languages=(c.language,))), view=OTHER)),
               cached(leaderboard.language_scripts, Bench(lambda c: at(c.db, c.dataset))),
               cached(significance.significance,
                      Bench(lambda c: at(c.db, c.f, c.judge, c.weights, c.language, c.models, c.preset), view=TOGGLE,
                            label="significance en (paired bootstrap, letters)")),
               *TRUST, HAS_ARENA, ARENA_FIT,
               moving(leaderboard.paper_agg_check, Bench(lambda c: at(c.language, c.weights, c.preset))),
               moving(leaderboard.paper_copies)),
        bench=(Bench(lambda c: at(c.db, c.dataset), via="run_weights"),)),
    "responses": Page("pages/2_responses.py", "Response browser", ":material/chat:",
        "For doctors: each query, its ground truth, the model's answer, the chunks it saw, every score with its "
        "justification, the Med-CoDE critique; two models side by side.",
        reads=(cached(responses.browse_view,
                      Bench(lambda c: at(c.db, responses.Browse(filters=c.f, judge=c.judge), 10, 0),
                            label="browse_view (count, page, details, chunks)"),
                      Bench(lambda c: at(c.db, responses.Browse(filters=c.f, judge=c.judge, metric="FC", score_min=0.0,
                                                                score_max=1.0, search="after"), 10, 490),
                            view=" (search + score filter, page 50)")),
               cached(responses.browse_count,
                      Bench(lambda c: at(c.db, responses.Browse(filters=c.f, judge=c.judge)), view=OTHER)),
               cached(responses.query_view, Bench(lambda c: at(c.db, c.dataset, c.query),
                                                  label="query_view (side by side)")),
               cached(rubric.rubric_item,
                      Bench(lambda c: at(c.db, c.dataset, c.query, c.models[0], c.grader), view=OTHER)))),
    "themes": Page("pages/3_themes.py", "Themes", ":material/category:",
        "Misspelling, code-mixing, non-native English, cultural, patient-specific, out-of-KB: scores per theme and "
        "model, with examples.",
        reads=(cached(themes.theme_scores, Bench(lambda c: at(c.db, c.f, c.judge),
                                                 then=lambda scores, c: themes.theme_table(scores, c.weights))),
               cached(themes.variant_changes,
                      Bench(lambda c: at(c.db, c.f, c.judge, c.weights, c.preset, "AGG",
                                         "all languages: Indic vs English"),
                            label="variant_changes (paired CIs of the pair shown)")),
               cached(themes.theme_examples, Bench(lambda c: at(c.db, c.f.with_(languages=(c.language,)), c.judge,
                                                                "cultural", 3, 0))),
               SCORE_PROVENANCE)),
    "robustness": Page("pages/13_robustness.py", "Robustness", ":material/shield:",
        "Each model's change when the same question is asked the ways patients write it (romanized, misspelled, "
        "code-mixed, English: `pipeline variants`), with paired intervals; models ranked by their worst kind.",
        reads=(cached(robustness.robustness_changes,
                      Bench(lambda c: at(c.db, c.f, c.judge, c.weights, c.preset, c.grader or None),
                            label="robustness_changes (paired CIs per model, language, kind)")),
               cached(robustness.worst_pairs, Bench(lambda c: at(c.db, c.f, c.judge, c.weights, c.preset, None, 5,
                                                                 "AGG", c.grader or None), view=OTHER)),
               cached(robustness.variant_quality, Bench(lambda c: at(c.db, c.dataset), view=OTHER)),
               cached(robustness.variant_samples, Bench(lambda c: at(c.db, c.dataset), view=OTHER)),
               RUBRIC_GRADERS)),
    "medcode": Page("pages/4_medcode.py", "Med-CoDE", ":material/stacked_bar_chart:",
        "Med-CoDE disagreement distributions (None/Low/Moderate/High) per model, their correlation with the judge and "
        "lexical scores, and the paper's Table 2.",
        reads=(cached(medcode.medcode_view, Bench(lambda c: at(c.db, c.f.with_(dataset=None), c.judge),
                                                  label="medcode_view (distribution, Table 2)")),
               cached(medcode.medcode_correlations, Bench(lambda c: at(c.db, c.f, c.judge))),
               cached(medcode_checks.critique_sources, Bench(lambda c: at(c.db, c.f.with_(dataset=None)), view=OTHER)),
               cached(medcode_checks.critique_checks, Bench(lambda c: at(c.db, c.f.with_(dataset=None)), view=OTHER)),
               moving(medcode_checks.critique_queue)),
        bench=(Bench(lambda c: at("medcode_table2"), via="reference_table", label="reference"),)),
    "human_vs_llm": Page("pages/5_human_vs_llm.py", "Human vs LLM", ":material/rule:",
        "Percentage agreement and weighted kappa between human labels and the judge, rankings side by side, and an "
        "annotation queue.",
        reads=(cached(agreement.agreement_view, Bench(lambda c: at(c.db, c.f, c.judge, agreement.PAPER_METRIC))),
               cached(agreement.plans, Bench(lambda c: at(c.db, c.dataset), view=OTHER)),
               cached(agreement.plan_progress,
                      Bench(lambda c: at(c.db, c.plan, c.judge) if c.plan else None, view=OTHER)),
               moving(agreement.annotation_state,
                      Bench(lambda c: at(c.db, c.f, c.annotator, agreement.PAPER_METRIC),
                            label="annotation_state (not cached)")))),
    "playground": Page("pages/6_playground.py", "Playground", ":material/science:",
        "Ask one query live: retrieved chunks, streamed answers, judge scores and Med-CoDE on request.",
        needs_results=False,
        reads=(cached(playground.dataset_queries, Bench(lambda c: at(c.db, c.dataset, None))),
               cached(playground.dataset_path, Bench(lambda c: at(c.db, c.dataset))))),
    "judge_trust": Page("pages/7_judge_trust.py", "Judge trust", ":material/verified:",
        "Can the judge be believed here? Its reliability per language, script and theme, a jury's agreement and "
        "disagreements, its position, length and self-preference biases, human-calibrated means, repeated judging and "
        "where every score came from.",
        reads=(RELIABILITY_MATRIX, LEADERBOARD_BASE, JURY_BASE,
               cached(jury.jury_agreement, Bench(lambda c: at(c.db, c.f, c.members), label="jury_agreement (α, κ)")),
               cached(jury.disagreement_items, Bench(lambda c: at(c.db, c.f, c.members, "FC", 20),
                                                     label="disagreement_items FC")),
               CALIBRATED_MEANS, SCORE_PROVENANCE, WORST_OF_K,
               cached(significance.item_variance,
                      Bench(lambda c: at(c.db, c.f, c.judge, c.language, METRICS[0], 30), view=OTHER)),
               HAS_ARENA, ARENA_FIT, ARENA_JUDGES,
               cached(arena.direct_verbosity,
                      Bench(lambda c: at(c.db, c.dataset, c.judge, agreement.PAPER_METRIC), view=OTHER),
                      prefix="arena_"),
               cached(arena.position_flips, Bench(lambda c: at(c.db, c.dataset, j) if (j := _pairwise_judge(c))
                                                  else None, view=OTHER), prefix="arena_"),
               cached(arena.verbosity,
                      Bench(lambda c: at(c.db, c.dataset, "judge", j) if (j := _pairwise_judge(c)) else None,
                            view=OTHER),
                      Bench(lambda c: at(c.db, c.dataset, "doctors") if c.kept.get("arena_fit") is not None
                            and c.kept["arena_fit"].table.votes.sum() > 0 else None, view=OTHER),
                      prefix="arena_"),
               cached(arena.self_preference, Bench(lambda c: at(c.db, c.dataset, j) if (j := _pairwise_judge(c))
                                                   else None, view=OTHER), prefix="arena_"))),
    "rubrics": Page("pages/8_rubrics.py", "Rubric scores", ":material/checklist:",
        "HealthBench rubric scores: models by the share of rubric points earned, with CIs, per axis and theme tag, and "
        "the grader against physicians.",
        reads=(RUBRIC_GRADERS,
               cached(rubric.rubric_leaderboard, Bench(lambda c: at(c.db, c.dataset, c.grader),
                                                       label="rubric_leaderboard (CIs, all + per language)")),
               cached(rubric.rubric_tags, Bench(lambda c: at(c.db, c.dataset, c.grader), view=" (tags, meta-eval)")),
               cached(rubric.grader_meta_eval, Bench(lambda c: at(c.db, c.dataset, c.grader),
                                                     view=" (tags, meta-eval)")))),
    "compare_runs": Page("pages/9_compare_runs.py", "Compare runs", ":material/compare_arrows:",
        "Two runs side by side (two result files, or two models, judges or datasets): paired differences per metric "
        "with CIs, the items that changed most, and which provenance differs.",
        bench=(Bench(_two_models, via="compare_runs", view=" (two models, one file)"),)),
    "review_queue": Page("pages/10_review_queue.py", "Review queue", ":material/medical_services:",
        "For doctors: the most worrying answers first (Med-CoDE high, wrong although the KB knows, refused, judges "
        "disagree, harmful rubric lines met), everything about each, and your verdict as a label.",
        reads=(moving(review.review_queue, Bench(lambda c: at(c.db, c.f, c.judge, c.annotator, "FC"),
                                                 label="review_queue (not cached)")),
               cached(review.review_item, Bench(lambda c: at(c.db, c.dataset, c.query, c.models[0]))))),
    "arena": Page("pages/12_arena.py", "Doctors' arena", ":material/compare:",
        "For doctors: two anonymous answers to one patient question, pick the better; Bradley–Terry leaderboards from "
        "doctors' votes and from the pairwise judge, with and without style control.",
        # the page opens on its Vote view, which before a name is entered reads only the languages
        reads=(cached(arena.languages, *(Bench(lambda c: at(c.db, c.dataset), view=view) for view in (
                   " (first visit: vote view)", ARENA_VOTE, ARENA_BOARD_VIEW)), prefix="arena_"),
               HAS_ARENA, ARENA_JUDGES, ARENA_FIT,
               cached(arena.both_bad,
                      Bench(lambda c: at(c.db, c.dataset, None) if _board(c) else None, view=ARENA_BOARD_VIEW,
                            then=_both_bad_into_board, label="arena_both_bad (per model; per model and language)"),
                      Bench(lambda c: at(c.db, c.dataset, None, by_language=True) if _board(c) else None,
                            view=ARENA_BOARD_VIEW, label="arena_both_bad (per model; per model and language)"),
                      prefix="arena_"),
               cached(arena.separation, Bench(lambda c: at(c.db, c.dataset, None, b.table) if (b := _board(c))
                                              else None, view=ARENA_BOARD_VIEW), prefix="arena_"),
               cached(arena.win_matrix, Bench(lambda c: at(c.db, c.dataset, None, "doctors", None) if _board(c)
                                              else None, view=ARENA_BOARD_VIEW), prefix="arena_"),
               cached(arena.doctors_vs_judge,
                      Bench(lambda c: at(c.db, c.dataset, c.kept["arena_judges"][0])
                            if _board(c) and c.kept.get("arena_judges") else None,
                            view=ARENA_BOARD_VIEW, label="arena_doctors_vs_judge (first judge)"), prefix="arena_"),
               cached(arena.annotators, Bench(lambda c: at(c.db, c.dataset, None) if _has_arena(c) else None,
                                              view=OTHER), prefix="arena_"),
               moving(arena.next_pair,
                      Bench(lambda c: at(c.db, c.dataset, None, c.annotator, adaptive=True,
                                         table=None if c.kept.get("arena_fit") is None else c.kept["arena_fit"].table),
                            view=ARENA_VOTE, label="arena_next_pair (not cached)"), prefix="arena_"),
               moving(arena.annotator_votes, Bench(lambda c: at(c.db, c.dataset, c.annotator), view=ARENA_VOTE,
                                                   label="arena_votes_by (not cached)"), name="arena_votes_by"))),
    "dataset": Page("pages/11_dataset.py", "Dataset", ":material/folder_open:",
        "How the dataset was built: source documents with chunks, pages, tokens and flags, the KB's growth, excluded "
        "chatbot messages by reason (identifiers masked) and queries by language, script, theme.",
        needs_results=False,
        # a dataset is a folder (no database needed); the synthetic datasets have none on disk, so the page reads the
        # first bundled folder under data/
        reads=(cached(dataset.dataset_folder, Bench(lambda c: at(c.db, c.dataset))),
               moving(dataset.dataset_folders, Bench(lambda c: at(), label="dataset_folders (data/)")),
               moving(dataset.folder_view, Bench(lambda c: at(dataset.dataset_folders()[0]),
                                                 label="folder_view (sources, page notes, chunks, growth, "
                                                       "exclusions)")))),
})
