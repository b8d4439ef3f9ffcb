"""FastChat's contextual Bradley–Terry (style control), reproduced as published, as the reference of
``tests/test_arena_quality.py``.

Source: lm-sys/FastChat, commit 0e6d3e4beaab66f4d3f93db72541a4abab8af28d, ``fastchat/serve/monitor/rating_systems.py``
(``contextual_bt_loss_and_grad``, ``fit_contextual_bt``, ``scale_and_offset``) and the feature step of
``preprocess_for_style`` (normalised differences (a − b) / (a + b + 1), centred and divided by their standard
deviation). The ``fschat`` package on PyPI (0.2.36, February 2024) predates ``rating_systems.py``, so it cannot be
imported for this; the functions below follow the published code line by line (tqdm and multiprocessing left out).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

DIFF_MASK = np.array([1.0, -1.0], dtype=np.float64)


def style_features(style_a: np.ndarray, style_b: np.ndarray) -> np.ndarray:
    """``preprocess_for_style``'s features: votes × features, from each vote's style counts of a and b."""
    diff = (style_a - style_b).astype(float)
    total = (style_a + style_b).astype(float) + 1.0
    diff = diff / total
    return (diff - diff.mean(axis=0)) / diff.std(axis=0)


def contextual_bt_loss_and_grad(params, n_competitors, matchups, features, outcomes, alpha=1.0, reg=1.0,
                                half_reg=0.5):
    reg_loss = half_reg * np.inner(params, params)
    ratings = params[:n_competitors]
    feature_params = params[n_competitors:]
    matchup_ratings = ratings[matchups]
    bt_logits = alpha * (matchup_ratings[:, 0] - matchup_ratings[:, 1])
    context_logits = np.dot(features, feature_params)
    probs = expit(bt_logits + context_logits)
    loss = -(np.log(probs) * outcomes + np.log(1.0 - probs) * (1.0 - outcomes)).sum() + reg_loss
    error = outcomes - probs
    grad = reg * params
    matchups_grads = -alpha * error
    np.add.at(grad[:n_competitors], matchups[:, [0, 1]], matchups_grads[:, None] * DIFF_MASK)
    grad[n_competitors:] -= np.dot(features.T, error)
    return loss, grad


def fit_contextual_bt(matchups, features, outcomes, models, idxs=None, alpha=math.log(10.0), reg=0.5, tol=1e-6):
    n_features = features.shape[1]
    n_models = len(models)
    initial_params = np.zeros(n_models + n_features, dtype=np.float64)
    half_reg = reg / 2.0
    if idxs is not None:
        matchups, features, outcomes = matchups[idxs], features[idxs], outcomes[idxs]
    result = minimize(fun=contextual_bt_loss_and_grad, x0=initial_params,
                      args=(n_models, matchups, features, outcomes, alpha, reg, half_reg), jac=True,
                      method="L-BFGS-B", options={"disp": False, "maxiter": 100, "gtol": tol})
    return result["x"]


def scale_and_offset(ratings, models, scale=400, init_rating=1000, baseline_model="mixtral-8x7b-instruct-v0.1",
                     baseline_rating=1114):
    scaled_ratings = (ratings * scale) + init_rating
    if baseline_model in models:
        baseline_idx = models.index(baseline_model)
        scaled_ratings += baseline_rating - scaled_ratings[..., [baseline_idx]]
    return scaled_ratings
