"""Human and model grades on one scale before kappa, the confusion table and PPI++ (issue 54 item 3): a binary model
against graded humans binarizes the human grade at kbench's relevance threshold (2 and 3 relevant)."""
from __future__ import annotations

import numpy as np
import pytest

from kbench.judging.agreement import cohen_kappa
from kbench.labelling.estimate import (BINARY, GRADED, ModelGrades, PoolArrays, agreement, best_model, estimate_labels,
                                       one_scale)
from kbench.labelling.order import label_plan
from tests.labelling.scifact_pool import scifact_pool

K = 10


def typer_table() -> tuple[np.ndarray, np.ndarray]:
    """The issue's typer figures: 131 pairs graded on `kbench label` (0-3) against the pool's model labels (the
    generated set's 0/1), which agree on 124 of 131 pairs once the human grade is read at kbench's threshold, kappa
    0.80. The issue gives the totals, not the cells, so the 2 x 2 table is built from them: 17 pairs both relevant,
    107 both not, 3 the human alone calls relevant, 4 the model alone (124 agree; kappa 0.7976, 0.80 to two places;
    every table with 124 of 131 agreeing and kappa 0.80 has 17 and 107 on its diagonal). The human grades inside
    it are chosen so the old reading (0-3 against 0/1 as if one scale) gives the issue's 0.049: relevant pairs
    graded 2 (11) or 3 (9), the others 0 (66) or 1 (45, "related")."""
    human = np.array([0] * 64 + [1] * 43  # both not relevant: the model 0
                     + [1] * 2 + [0] * 2  # the model alone calls them relevant
                     + [2] * 8 + [3] * 9  # both relevant
                     + [2] * 3, dtype=float)  # the human alone
    model = np.array([0] * 107 + [1] * 4 + [1] * 17 + [0] * 3, dtype=float)
    return human, model


def test_the_typer_table_on_one_scale_gives_kappa_0_80():
    human, model = typer_table()
    assert len(human) == 131
    assert cohen_kappa(human.astype(int).tolist(), model.astype(int).tolist()) == pytest.approx(0.049, abs=5e-4)
    found = agreement(human, model, binary_human=False, model_scale=BINARY)
    assert found.pairs == 131 and round(found.kappa, 2) == 0.80
    assert found.table.tolist() == [[107, 4], [3, 17]]  # rows: human (>= 2 relevant), columns: the model's 0/1
    assert found.scale.binarize_human and not found.scale.binarize_model
    assert "human grade >= 2 relevant" in found.scale.says
    # both graded: compared 0-3 as given; a graded model against a binary page: the model's grade binarized
    assert one_scale(GRADED, GRADED).name == GRADED and not one_scale(GRADED, GRADED).binarize_human
    assert one_scale(BINARY, GRADED).binarize_model


@pytest.fixture(scope="module")
def pool():
    return scifact_pool()


def graded_humans(pool, seed=0) -> np.ndarray:
    """SciFact's qrels as a person grading 0-3: a relevant abstract 2 or 3, another pooled abstract 0 or (40%) 1,
    'related but no answer', which is where a 0/1 model and a 0-3 human part when read as one scale."""
    rng = np.random.default_rng(seed)
    relevant = pool.human > 0
    return np.where(relevant, rng.choice([2.0, 3.0], len(relevant)), (rng.random(len(relevant)) < 0.4).astype(float))


def test_ppi_lambda_rises_for_a_model_that_agrees_once_on_one_scale(pool):
    """A binary model that agrees with the person (SciFact's qrels with 5% of grades flipped) against graded human
    labels: read as if 0/1 and 0-3 were one scale, PPI++ weighs it little (the issue's lambda 0.06-0.17); on one
    scale it weighs it as it deserves (here 0.17 and 0.38: the difference of two BM25 configs moves on few pairs), and
    the interval narrows further against the humans alone."""
    n_questions = len(pool.question_ids)
    rng = np.random.default_rng(1)
    human = graded_humans(pool)
    model = np.where(rng.random(len(human)) < 0.05, 1 - pool.human, pool.human)
    plan = label_plan(pool.question_of, pool.ranks, model, n_questions, K, seed=2, random_share=1.0)
    graded = np.zeros(len(human), dtype=bool)
    graded[[p for p, _ in plan.order[:1200]]] = True
    grades = np.where(graded, human, np.nan)
    lams, humans_alone = {}, {}
    for scale in (GRADED, BINARY):  # GRADED: the old reading, the model's 0/1 taken as grades 0 and 1
        arrays = PoolArrays(pool.question_of, pool.ranks, model, pool.configs, K, n_questions, scale)
        found = estimate_labels(arrays, plan, grades)
        lams[scale] = found.differences[pool.configs[1]].ppi
        humans_alone[scale] = found.differences[pool.configs[1]].human
        if scale == BINARY:
            assert found.agreement.kappa > 0.6 and "on one scale (binary: human grade >= 2 relevant" in \
                "\n".join(found.lines())
    assert lams[GRADED].lam < 0.2 and lams[BINARY].lam > 2 * lams[GRADED].lam, (lams[GRADED].lam, lams[BINARY].lam)
    # each against the humans alone on its own scale (the two scales' metrics differ): the interval narrows more
    assert lams[BINARY].se / humans_alone[BINARY].se < lams[GRADED].se / humans_alone[GRADED].se < 1


def test_the_model_that_agrees_best_is_the_one_ppi_uses(pool):
    n_questions = len(pool.question_ids)
    rng = np.random.default_rng(3)
    noisy = np.where(rng.random(len(pool.human)) < 0.35, 1 - pool.human, pool.human)  # the served model: weak
    close = np.where(rng.random(len(pool.human)) < 0.05, 1 - pool.human, pool.human)  # a trained judge: close
    plan = label_plan(pool.question_of, pool.ranks, noisy, n_questions, K, seed=4, random_share=1.0)
    graded = np.zeros(len(noisy), dtype=bool)
    graded[[p for p, _ in plan.order[:600]]] = True
    arrays = PoolArrays(pool.question_of, pool.ranks, noisy, pool.configs, K, n_questions, BINARY, "served model",
                        [ModelGrades("trained judge", close, BINARY)])
    found = estimate_labels(arrays, plan, np.where(graded, pool.human, np.nan), binary_human=True)
    assert found.agreement.model == "trained judge" and [a.model for a in found.agreements] == ["trained judge",
                                                                                               "served model"]
    text = "\n".join(found.lines())
    assert "beside it, served model: Cohen's kappa" in text and "PPI++ uses trained judge's grades" in text
    assert found.agreements[0].kappa > found.agreements[1].kappa
    # too few pairs graded by both: the pool's own model stays
    few = [a for a in found.agreements]
    few[0].pairs = 5
    assert best_model([found.agreements[1], few[0]]) == 0
