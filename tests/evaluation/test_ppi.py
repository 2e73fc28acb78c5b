"""PPI++ (kbench/evaluation/ppi.py) against ppi_py, the reference implementation, on the same real numbers: per-question
nDCG@10 of SciFact's test claims under SciFact's qrels (the human) and under a noisy judge (the model)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate
from ppi_py.ppi import _calc_lam_glm

from kbench.evaluation.pooled import pooled_ndcg
from kbench.evaluation.ppi import (PPIEstimator, classical_mean, power_tuned_lambda, ppi_difference, ppi_mean,
                                   ppi_non_inferiority, human_column)
from kbench.evaluation.recommend import ConfigRecord, RecommendConfig, recommend
from tests.labelling.scifact_pool import scifact_pool


@pytest.fixture(scope="module")
def numbers():
    """(y, yhat, yhat_unlabelled) per config, and the labelled mask: 60 claims labelled, 240 not."""
    pool = scifact_pool()
    n_questions = len(pool.question_ids)
    rng = np.random.default_rng(7)
    flips = rng.random(len(pool.human)) < 0.2
    judge = np.where(flips, 1 - pool.human, pool.human)
    truth = pooled_ndcg(pool.human, pool.question_of, pool.ranks, n_questions, 10)
    model = pooled_ndcg(judge, pool.question_of, pool.ranks, n_questions, 10)
    labelled = np.zeros(n_questions, dtype=bool)
    labelled[rng.permutation(n_questions)[:60]] = True
    return truth, model, labelled


@pytest.mark.parametrize("lam", [None, 1.0, 0.0, 0.37])
def test_the_mean_and_its_interval_equal_ppi_py(numbers, lam):
    truth, model, labelled = numbers
    y, yhat, yhat_u = truth[0, labelled], model[0, labelled], model[0, ~labelled]
    found = ppi_mean(y, yhat, yhat_u, lam=lam)
    low, high = ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=lam)
    assert found.interval(0.05) == pytest.approx((float(low[0]), float(high[0])), abs=1e-12)
    assert found.estimate == pytest.approx(float(np.ravel(ppi_mean_pointestimate(y, yhat, yhat_u, lam=lam))[0]),
                                           abs=1e-12)
    if lam is None:
        plain = float(np.ravel(ppi_mean_pointestimate(y, yhat, yhat_u, lam=1))[0])
        expected = _calc_lam_glm(y - plain, yhat - plain, yhat_u - plain, np.eye(1), clip=True)
        assert found.lam == pytest.approx(expected, abs=1e-12) and 0 < found.lam < 1


def test_weights_and_the_paired_difference_equal_ppi_py(numbers):
    truth, model, labelled = numbers
    rng = np.random.default_rng(3)
    w, w_u = rng.uniform(0.5, 2.0, labelled.sum()), rng.uniform(0.5, 2.0, (~labelled).sum())
    d, dhat, dhat_u = (truth[0] - truth[1])[labelled], (model[0] - model[1])[labelled], (model[0] - model[1])[~labelled]
    found = ppi_mean(d, dhat, dhat_u, w=w, w_unlabelled=w_u)
    low, high = ppi_mean_ci(d, dhat, dhat_u, alpha=0.1, w=w, w_unlabeled=w_u)
    assert found.interval(0.1) == pytest.approx((float(low[0]), float(high[0])), abs=1e-12)
    paired = ppi_difference(truth[0, labelled], truth[1, labelled], model[0, labelled], model[1, labelled],
                            model[0, ~labelled], model[1, ~labelled])
    low, high = ppi_mean_ci(d, dhat, dhat_u, alpha=0.05)
    assert paired.interval() == pytest.approx((float(low[0]), float(high[0])), abs=1e-12)
    low, high = classical_mean_ci(d, alpha=0.05)
    assert classical_mean(d).interval() == pytest.approx((float(low), float(high)), abs=1e-12)


def test_power_tuning_never_loses_to_either_end(numbers):
    truth, model, labelled = numbers
    y, yhat, yhat_u = truth[1, labelled], model[1, labelled], model[1, ~labelled]
    tuned = ppi_mean(y, yhat, yhat_u)
    assert tuned.lam == power_tuned_lambda(y, yhat, yhat_u)
    assert tuned.se <= ppi_mean(y, yhat, yhat_u, lam=1).se + 1e-12
    assert tuned.se <= ppi_mean(y, yhat, yhat_u, lam=0).se + 1e-12  # lam 0 is the human-only interval


def test_a_model_that_knows_nothing_gets_no_weight():
    rng = np.random.default_rng(0)
    y = rng.random(80)
    assert ppi_mean(y, np.zeros(80), np.zeros(400)).lam == 0.0  # labels that do not vary carry nothing
    noise = ppi_mean(y, rng.random(80), rng.random(400))
    assert noise.lam < 0.3


def test_non_inferiority_on_a_ppi_difference_is_the_recommendations_test(numbers):
    truth, model, labelled = numbers
    paired = ppi_difference(truth[1, labelled], truth[0, labelled], model[1, labelled], model[0, labelled],
                            model[1, ~labelled], model[0, ~labelled])
    test = ppi_non_inferiority(paired, 0.05)
    assert test.lower_bound == pytest.approx(paired.lower_bound(0.05))
    assert test.shown() == (test.lower_bound > -0.05)
    assert test.n == 60 and test.sd == pytest.approx(paired.se * math.sqrt(60))
    records = [ConfigRecord(label, {"m": model[c], human_column("m"): np.where(labelled, truth[c], np.nan)})
               for c, label in enumerate(["a", "b"])]
    found = recommend(records, "m", RecommendConfig(margin=0.05, guards=[]), estimator=PPIEstimator(labelled))
    assert found.n_questions == 60 and "human-labelled questions" in " ".join(found.lines())
    assert found.means["m"]["a"] == pytest.approx(ppi_mean(truth[0, labelled], model[0, labelled],
                                                           model[0, ~labelled]).estimate)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="at least 2 labelled"):
        ppi_mean([1.0], [1.0], [0.5, 0.5])
    with pytest.raises(ValueError, match="finite"):
        ppi_mean([1.0, np.nan], [1.0, 0.0], [0.5])
    with pytest.raises(ValueError, match="a human and a model value"):
        ppi_mean([1.0, 0.0], [1.0], [0.5])


def test_a_difference_with_no_spread_is_one_questions_worth_never_a_zero_width_interval():
    """Issue 50's rule for non-inferiority, on PPI++ too (issue 51): two configs that score the same on every
    labelled question (and the model sees no difference either) are no evidence that they never differ: the spread
    is taken as 1/sqrt(n), so ten such questions do not decide at a 0.01 margin and three hundred do, as
    ``significance.non_inferiority`` decides on the same numbers."""
    from kbench.evaluation.significance import non_inferiority

    for n, shown in ((10, False), (300, True)):
        same = np.full(n, 0.5)
        paired = ppi_difference(same, same, same, same, np.full(4 * n, 0.5), np.full(4 * n, 0.5))
        assert paired.se == pytest.approx(1 / n) and paired.interval()[1] - paired.interval()[0] > 0
        test = ppi_non_inferiority(paired, 0.01)
        assert test.shown() is shown and test.sd == pytest.approx(1 / math.sqrt(n))
        assert non_inferiority(same, same, 0.01).shown() is shown  # the t-test's rule, the same answer
        human = classical_mean(same)
        assert human.se == pytest.approx(1 / n) and human.interval()[0] < 0.5 < human.interval()[1]
    made_elsewhere = ppi_non_inferiority(dataclasses.replace(paired, se=0.0), 0.01)  # an estimate with se 0
    assert made_elsewhere.lower_bound < 0 and made_elsewhere.shown()  # n = 300: se 1/300
