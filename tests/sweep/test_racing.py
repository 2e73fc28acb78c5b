"""Racing's core on synthetic per-query scores: the truly best config is dropped at most alpha of the time
(simulated many times), clear losers leave early, batches are seeded and cover every question once."""
from __future__ import annotations

import numpy as np
import pytest

from kbench.sweep.racing import question_batches, race


def synthetic(means: list[float], n: int, rng: np.random.Generator, noise: float = 0.3) -> dict[str, np.ndarray]:
    """Per-query scores of configs c0, c1, ...: a shared question difficulty plus each config's own noise."""
    difficulty = rng.normal(0, 0.2, n)
    return {f"c{i}": m + difficulty + rng.normal(0, noise, n) for i, m in enumerate(means)}


def run_race(table: dict[str, np.ndarray], ids: list[str], alpha: float, first: int = 10, test: str = "t"):
    position = {q: i for i, q in enumerate(ids)}

    def score(labels, batch):
        rows = [position[q] for q in batch]
        return {label: table[label][rows] for label in labels}

    return race(list(table), question_batches(ids, first=first, seed=0), score, alpha=alpha, test=test)


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_the_best_is_dropped_at_most_alpha_of_the_time(alpha):
    """The hardest case for the error rate: the best (c0) is tied with three others, so every round can put
    one of them ahead by chance; four more are somewhat worse. 400 races on fresh scores each."""
    rng = np.random.default_rng(7)
    n, sims = 120, 400
    ids = [f"q{i:03d}" for i in range(n)]
    dropped_best = 0
    for _ in range(sims):
        table = synthetic([0.5, 0.5, 0.5, 0.5, 0.45, 0.4, 0.35, 0.3], n, rng)
        result = run_race(table, ids, alpha)
        dropped_best += any(d.label == "c0" for d in result.dropped)
    rate = dropped_best / sims
    assert rate <= alpha, f"best dropped in {dropped_best}/{sims} races"


def test_the_error_rate_holds_with_a_liberal_alpha_where_drops_happen():
    """Alpha 0.5 with eight equal configs: drops do happen (so the check is not vacuous) yet the designated
    best leaves at most alpha of the time."""
    rng = np.random.default_rng(11)
    n, sims = 60, 400
    ids = [f"q{i:03d}" for i in range(n)]
    best_dropped = any_dropped = 0
    for _ in range(sims):
        result = run_race(synthetic([0.5] * 8, n, rng), ids, alpha=0.5, first=6)
        best_dropped += any(d.label == "c0" for d in result.dropped)
        any_dropped += bool(result.dropped)
    assert any_dropped > 0
    assert best_dropped / sims <= 0.5


def test_clear_losers_leave_early_and_the_best_survives():
    rng = np.random.default_rng(3)
    n = 200
    ids = [f"q{i:03d}" for i in range(n)]
    table = synthetic([0.7, 0.69, 0.3, 0.25, 0.2, 0.2, 0.15, 0.1], n, rng, noise=0.1)
    result = run_race(table, ids, alpha=0.05, first=20)
    assert "c0" in result.survivors
    gone = {d.label: d for d in result.dropped}
    assert {"c2", "c3", "c4", "c5", "c6", "c7"} <= set(gone)
    for d in gone.values():
        assert d.diff < 0 and d.p_value < result.threshold and d.round >= 1
        assert d.questions == result.scored[d.label]
    assert result.threshold == pytest.approx(0.05 / (len(question_batches(ids, first=20)) * 7))
    # far fewer question scorings than the grid's 8 x 200
    assert sum(result.scored.values()) < 0.5 * 8 * n
    # a dropped config's scores are the first questions it saw, exactly
    first_batch = question_batches(ids, first=20)[0]
    assert np.array_equal(result.scores["c7"][:20], table["c7"][[ids.index(q) for q in first_batch]])


def test_batches_are_seeded_grow_and_cover_every_question_once():
    ids = [f"q{i}" for i in range(300)]
    batches = question_batches(ids, first=25, seed=4)
    assert [len(b) for b in batches] == [25, 25, 50, 100, 100]
    assert sorted(q for b in batches for q in b) == sorted(ids)
    assert batches == question_batches(list(reversed(ids)), first=25, seed=4)  # order given does not matter
    assert batches != question_batches(ids, first=25, seed=5)
    with pytest.raises(ValueError, match="at least 2 questions"):
        question_batches(ids, first=1)
