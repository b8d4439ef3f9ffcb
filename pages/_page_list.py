"""The dashboard's pages in menu order, one entry each: file, title, icon, URL path, and what the home page says of
it. ``app.py`` routes them; the tests and the dashboard benchmark take their page lists from here, so a new page is
one entry and none of them can miss it."""

from __future__ import annotations

from pipeline.metrics import METRICS

PAGE_LIST = [
    ("pages/1_leaderboards.py", "Leaderboards", ":material/leaderboard:", "leaderboards",
     f"Models by AGG per language with {', '.join(METRICS)}, 95% CIs, lexical baselines, safety checks and the "
     "paper's published leaderboards beside them."),
    ("pages/2_responses.py", "Response browser", ":material/chat:", "responses",
     "For doctors: each query, its ground truth, the model's answer, the chunks it saw, every score with its "
     "justification, the Med-CoDE critique; two models side by side."),
    ("pages/3_themes.py", "Themes", ":material/category:", "themes",
     "Misspelling, code-mixing, non-native English, cultural, patient-specific, out-of-KB: scores per theme and "
     "model, with examples."),
    ("pages/13_robustness.py", "Robustness", ":material/shield:", "robustness",
     "Each model's change when the same question is asked the ways patients write it (romanized, misspelled, "
     "code-mixed, English: `pipeline variants`), with paired intervals; models ranked by their worst kind."),
    ("pages/4_medcode.py", "Med-CoDE", ":material/stacked_bar_chart:", "medcode",
     "Med-CoDE disagreement distributions (None/Low/Moderate/High) per model, their correlation with the judge and "
     "lexical scores, and the paper's Table 2."),
    ("pages/5_human_vs_llm.py", "Human vs LLM", ":material/rule:", "human_vs_llm",
     "Percentage agreement and weighted kappa between human labels and the judge, rankings side by side, and an "
     "annotation queue."),
    ("pages/6_playground.py", "Playground", ":material/science:", "playground",
     "Ask one query live: retrieved chunks, streamed answers, judge scores and Med-CoDE on request."),
    ("pages/7_judge_trust.py", "Judge trust", ":material/verified:", "judge_trust",
     "Can the judge be believed here? Its reliability per language, script and theme, a jury's agreement and "
     "disagreements, its position, length and self-preference biases, human-calibrated means, repeated judging and "
     "where every score came from."),
    ("pages/8_rubrics.py", "Rubric scores", ":material/checklist:", "rubrics",
     "HealthBench rubric scores: models by the share of rubric points earned, with CIs, per axis and theme tag, and "
     "the grader against physicians."),
    ("pages/9_compare_runs.py", "Compare runs", ":material/compare_arrows:", "compare_runs",
     "Two runs side by side (two result files, or two models, judges or datasets): paired differences per metric "
     "with CIs, the items that changed most, and which provenance differs."),
    ("pages/10_review_queue.py", "Review queue", ":material/medical_services:", "review_queue",
     "For doctors: the most worrying answers first (Med-CoDE high, wrong although the KB knows, refused, judges "
     "disagree, harmful rubric lines met), everything about each, and your verdict as a label."),
    ("pages/12_arena.py", "Doctors' arena", ":material/compare:", "arena",
     "For doctors: two anonymous answers to one patient question, pick the better; Bradley–Terry leaderboards from "
     "doctors' votes and from the pairwise judge, with and without style control."),
    ("pages/11_dataset.py", "Dataset", ":material/folder_open:", "dataset",
     "How the dataset was built: source documents with chunks, pages, tokens and flags, the KB's growth, excluded "
     "chatbot messages by reason (identifiers masked) and queries by language, script, theme."),
]
