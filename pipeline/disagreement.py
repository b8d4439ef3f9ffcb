"""Med-CoDE's degrees of disagreement with the ground truth (§3.1): the labels, their spellings in model and
annotator output, and the stored probability columns — one definition for the medcode step, label import,
training, the store's rows and the reads."""

from __future__ import annotations

LABELS = ("None", "Low", "Moderate", "High")
LABEL_ALIASES = {"none": "None", "low": "Low", "moderate": "Moderate", "medium": "Moderate", "high": "High"}
PROB_COLUMNS = tuple(f"p_{label.lower()}" for label in LABELS)  # critiques.p_none … p_high, in LABELS order
COLUMN_LABELS = dict(zip(PROB_COLUMNS, LABELS, strict=True))
PAPER_CLASS_WEIGHTS = (5.96, 1.34, 0.83, 0.52)  # Med-CoDE §4.2, in LABELS order
