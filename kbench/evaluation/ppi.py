"""Prediction-powered inference (PPI++): a mean, or a paired difference of configs, from a few human labels and a
model's labels on every question, with an interval that carries the model's error.

    from kbench.evaluation.ppi import ppi_mean, ppi_difference, classical_mean
    found = ppi_mean(y, y_model, y_model_unlabelled)   # y: the metric with human labels on the labelled questions
    found.estimate, found.interval(0.05), found.lam    # y_model: the same questions with the model's labels
    ppi_difference(y_a, y_b, model_a, model_b, unlabelled_a, unlabelled_b)   # mean(a - b) per question, paired

Pure functions on arrays (one value per question), checked against ``ppi_py`` (the reference implementation of
Angelopoulos, Duchi and Zrnic, "PPI++: Efficient Prediction-Powered Inference", 2023) on the same numbers in
tests/evaluation/test_ppi.py.

The estimate of the mean of ``Y`` (the metric under human labels) over all questions::

    theta = lam * mean_unlabelled(w_u * Yhat) + mean_labelled(w * (Y - lam * Yhat))

the model's labels ``Yhat`` on the questions no human labelled, corrected by the *rectifier*: the mean gap between
human and model on the labelled ones. With ``lam = 1`` that is PPI; ``lam = 0`` is the human-only (classical)
mean; ``lam = None`` picks the ``lam`` in [0, 1] that minimises the estimate's variance (PPI++ power tuning), so
the interval is never much wider than the human-only one and is narrower whenever the model's labels track the
human's. The standard error is ``sqrt(var(w_u * lam * Yhat_u) / N + var(w * (Y - lam * Yhat)) / n)`` (population
variances, as ``ppi_py``) and the interval is normal: ``theta -/+ z * se``. A labelled sample whose rectifier
does not vary at all (every config scored the same on every labelled question, say) is no evidence that it never
does: its spread is then taken as one question's worth, ``1 / sqrt(n)`` on the metrics' 0-1 scale, the rule of
``significance.non_inferiority`` (ten agreeing questions decide nothing at a 0.01 margin; three hundred do).

Why it stays honest when the model is biased: the rectifier measures the bias on questions a person labelled,
and its own sampling error is part of ``se``. It needs the labelled questions to be a random sample of the
questions, drawn without looking at their labels, and the model's labels to be fixed before that sample is used
(kbench.labelling: a seeded random share of whole questions; see docs/how-to/labelling.md). ``w`` and ``w_u``:
optional weights (inverse inclusion probabilities, as ``ppi_py``'s), normalised to mean 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from kbench.evaluation.significance import NonInferiority


@dataclass(frozen=True)
class PPIEstimate:
    """A mean estimated from ``n`` labelled and ``n_unlabelled`` model-only questions."""

    estimate: float
    se: float  # standard error of the estimate
    lam: float  # the power-tuning weight of the model's labels (0: human only, 1: plain PPI)
    n: int  # labelled questions
    n_unlabelled: int
    rectifier: float  # mean(w * (Y - Yhat)) on the labelled questions: how far the model is from the human

    def interval(self, alpha: float = 0.05) -> tuple[float, float]:
        """The two-sided (1 - alpha) normal interval."""
        half = float(stats.norm.ppf(1 - alpha / 2)) * self.se
        return self.estimate - half, self.estimate + half

    def lower_bound(self, alpha: float = 0.05) -> float:
        """The one-sided (1 - alpha) lower confidence bound."""
        return self.estimate - float(stats.norm.ppf(1 - alpha)) * self.se

    def covers(self, value: float, alpha: float = 0.05) -> bool:
        low, high = self.interval(alpha)
        return low <= value <= high


def _weights(count: int, w) -> np.ndarray:
    """Weights normalised to mean 1 (ppi_py's ``construct_weight_vector``); ones when none are given."""
    if w is None:
        return np.ones(count)
    w = np.asarray(w, dtype=float)
    if w.shape != (count,) or (w < 0).any() or not w.sum() > 0:
        raise ValueError(f"weights: {count} non-negative numbers, not all 0")
    return w / w.sum() * count


def _vectors(y, y_model, y_model_unlabelled) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y, yhat, yhat_u = (np.asarray(a, dtype=float).ravel() for a in (y, y_model, y_model_unlabelled))
    if len(y) != len(yhat):
        raise ValueError(f"the labelled questions need a human and a model value each: {len(y)} against "
                         f"{len(yhat)}")
    if len(y) < 2 or len(yhat_u) < 1:
        raise ValueError(f"PPI needs at least 2 labelled questions and 1 unlabelled one; got {len(y)} and "
                         f"{len(yhat_u)}")
    if not (np.isfinite(y).all() and np.isfinite(yhat).all() and np.isfinite(yhat_u).all()):
        raise ValueError("PPI: every value must be a finite number (a NaN marks an unlabelled question: leave it "
                         "out of y)")
    return y, yhat, yhat_u


def power_tuned_lambda(y, y_model, y_model_unlabelled, w=None, w_unlabelled=None) -> float:
    """The ``lam`` in [0, 1] that minimises the variance of the estimate (PPI++, ``ppi_py._calc_lam_glm`` for a
    mean): cov(Y, Yhat) / ((1 + n / N) var(Yhat)), each centred at the plain PPI estimate."""
    y, yhat, yhat_u = _vectors(y, y_model, y_model_unlabelled)
    n, big_n = len(y), len(yhat_u)
    w, w_u = _weights(n, w), _weights(big_n, w_unlabelled)
    plain = float((w_u * yhat_u).mean() + (w * (y - yhat)).mean())
    grads, grads_hat, grads_hat_u = w * (y - plain), w * (yhat - plain), w_u * (yhat_u - plain)
    cov = float(((grads - grads.mean()) * (grads_hat - grads_hat.mean())).mean())
    var = float(np.var(np.concatenate([grads_hat, grads_hat_u]), ddof=1))
    if not var > 0:
        return 0.0  # the model's labels do not vary: they carry nothing
    return float(np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0))


def ppi_mean(y, y_model, y_model_unlabelled, *, lam: float | None = None, w=None, w_unlabelled=None) -> PPIEstimate:
    """PPI++ estimate of the mean of ``y`` over every question. ``y``, ``y_model``: the labelled questions' values
    under human and model labels; ``y_model_unlabelled``: the other questions' values under the model's labels.
    ``lam``: None tunes it (PPI++), 1 is plain PPI, 0 the human-only mean."""
    y, yhat, yhat_u = _vectors(y, y_model, y_model_unlabelled)
    n, big_n = len(y), len(yhat_u)
    w, w_u = _weights(n, w), _weights(big_n, w_unlabelled)
    if lam is None:
        lam = power_tuned_lambda(y, yhat, yhat_u, w, w_u)
    imputed = w_u * lam * yhat_u
    rectifier = w * (y - lam * yhat)
    se = math.sqrt(float(imputed.var()) / big_n + _spread(rectifier) ** 2 / n)
    return PPIEstimate(float(imputed.mean() + rectifier.mean()), se, float(lam), n, big_n,
                       float((w * (y - yhat)).mean()))


def _spread(values: np.ndarray, scale: float = 1.0) -> float:
    """The standard deviation of the labelled sample's values, population form (as ``ppi_py``); when they do not
    vary at all, one question's worth of spread (``scale / sqrt(n)``: one of n values off by the metric's whole
    scale), as ``significance.non_inferiority`` assumes: a few questions on which every config scored the same are
    no evidence that they never differ, and must not decide a pick (issue 50)."""
    if np.ptp(values) == 0:
        return scale / math.sqrt(len(values))
    return float(values.std())


def classical_mean(y) -> PPIEstimate:
    """The human-only mean and its normal interval (``ppi_py.classical_mean_ci``): no model labels used (values
    that do not vary: one question's worth of spread, ``_spread``)."""
    y = np.asarray(y, dtype=float).ravel()
    if len(y) < 2 or not np.isfinite(y).all():
        raise ValueError(f"a mean needs at least 2 finite values, got {len(y)}")
    return PPIEstimate(float(y.mean()), _spread(y) / math.sqrt(len(y)), 0.0, len(y), 0, math.nan)


def model_only_mean(y_model_all) -> PPIEstimate:
    """The model's labels alone on every question, as if they were the truth: an interval that carries no model
    error (biased whenever the model is)."""
    return classical_mean(y_model_all)


def ppi_difference(y_a, y_b, model_a, model_b, unlabelled_a, unlabelled_b, *, lam: float | None = None,
                   w=None, w_unlabelled=None) -> PPIEstimate:
    """PPI++ estimate of mean(a - b) over the questions, paired question by question (``lam`` tuned on the
    differences)."""
    return ppi_mean(np.asarray(y_a, float) - np.asarray(y_b, float),
                    np.asarray(model_a, float) - np.asarray(model_b, float),
                    np.asarray(unlabelled_a, float) - np.asarray(unlabelled_b, float),
                    lam=lam, w=w, w_unlabelled=w_unlabelled)


def ppi_non_inferiority(difference: PPIEstimate, margin: float, alpha: float = 0.05) -> NonInferiority:
    """The recommendation's test (``significance.non_inferiority``) on a PPI estimate of mean(candidate -
    reference): H0 difference <= -margin, one-sided normal test; shown when its lower bound is above -margin.
    ``sd`` is the standard error times sqrt(labelled questions), so the minimum detectable difference and the
    questions to decide read in labelled questions."""
    if margin < 0 or not math.isfinite(margin):
        raise ValueError(f"a non-inferiority margin is a finite difference >= 0, got {margin}")
    shifted = difference.estimate + margin
    if not difference.se > 0:  # an estimate made elsewhere with no spread: one question's worth (``_spread``)
        difference = replace(difference, se=1.0 / max(difference.n, 1))
    p = float(stats.norm.sf(shifted / difference.se))
    return NonInferiority(difference.estimate, difference.lower_bound(alpha), margin, p,
                          difference.se * math.sqrt(difference.n), difference.n)


HUMAN = "{}@human"  # a ConfigRecord's column of the metric under human labels (NaN: a question no human labelled)


def human_column(metric: str) -> str:
    return HUMAN.format(metric)


class PPIEstimator:
    """The recommendation's estimator under human labels (``recommend(..., estimator=PPIEstimator(labelled))``):
    each ``ConfigRecord`` holds ``per_query[metric]``, the metric under the model's labels on every question, and
    ``per_query[human_column(metric)]``, the metric under human labels (read on the ``labelled`` questions only).
    Means are PPI++ estimates; a config against a reference is ``ppi_non_inferiority`` on the PPI++ estimate of
    their paired difference. ``labelled``: a boolean mask over the questions, the random share's."""

    questions_word = "human-labelled questions"

    def __init__(self, labelled) -> None:
        self.labelled = np.asarray(labelled, dtype=bool)
        if self.labelled.sum() < 2 or self.labelled.all():
            raise ValueError(f"PPI needs at least 2 labelled questions and 1 without labels; {int(self.labelled.sum())} "
                             f"of {len(self.labelled)} are labelled")

    def _parts(self, record, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        model = np.asarray(record.per_query[metric], dtype=float)
        human = np.asarray(record.per_query[human_column(metric)], dtype=float)
        return human[self.labelled], model[self.labelled], model[~self.labelled]

    def estimate(self, record, metric: str) -> PPIEstimate:
        return ppi_mean(*self._parts(record, metric))

    def mean(self, record, metric: str) -> float:
        return self.estimate(record, metric).estimate

    def difference(self, candidate, reference, metric: str) -> PPIEstimate:
        (y_c, model_c, rest_c), (y_r, model_r, rest_r) = self._parts(candidate, metric), self._parts(reference, metric)
        return ppi_difference(y_c, y_r, model_c, model_r, rest_c, rest_r)

    def versus(self, candidate, reference, metric: str, margin: float, alpha: float) -> NonInferiority:
        return ppi_non_inferiority(self.difference(candidate, reference, metric), margin, alpha)

    def questions(self, record, metric: str) -> int:
        return int(self.labelled.sum())


__all__ = ["HUMAN", "PPIEstimate", "PPIEstimator", "human_column", "classical_mean", "model_only_mean", "power_tuned_lambda", "ppi_difference", "ppi_mean",
           "ppi_non_inferiority"]
