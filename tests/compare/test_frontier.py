"""The Pareto frontier and constraint picking on hand-built points."""
from __future__ import annotations

import pandas as pd
import pytest

from kbench.compare.frontier import FrontierError, best_under, pareto_frontier, parse_constraint

POINTS = pd.DataFrame({
    "config": ["a", "b", "c", "d", "e", "f"],
    "ndcg": [0.50, 0.60, 0.55, 0.70, 0.70, 0.60],
    "p95": [10.0, 20.0, 30.0, 50.0, 60.0, 20.0],
})


def test_frontier_keeps_exactly_the_undominated_points():
    f = pareto_frontier(POINTS, "ndcg", "p95")
    on = set(f[f["on_frontier"]]["config"])
    # c is dominated by b (better and cheaper); e by d (equal quality, costlier); b and f are equal: both stay
    assert on == {"a", "b", "f", "d"}
    assert list(f["p95"]) == sorted(f["p95"])


def test_frontier_by_brute_force_definition():
    f = pareto_frontier(POINTS, "ndcg", "p95").set_index("config")
    for r in POINTS.itertuples():
        dominated = any((o.ndcg >= r.ndcg and o.p95 <= r.p95 and (o.ndcg > r.ndcg or o.p95 < r.p95))
                        for o in POINTS.itertuples())
        assert f.loc[r.config, "on_frontier"] == (not dominated)


def test_constraints_pick_the_best_config_that_meets_them():
    assert best_under(POINTS, "ndcg", [parse_constraint("p95<50")])["config"] == "b"  # b and f tie: first kept
    assert best_under(POINTS, "ndcg", [parse_constraint("p95 <= 50")])["config"] == "d"
    assert best_under(POINTS, "ndcg", [parse_constraint("p95<5")]) is None
    assert best_under(POINTS, "ndcg", [parse_constraint("p95<40"), parse_constraint("ndcg>=0.56")])["config"] == "b"


def test_constraint_parsing():
    c = parse_constraint("latency_ms_total_p95<50")
    assert (c.metric, c.op, c.bound) == ("latency_ms_total_p95", "<", 50.0)
    assert parse_constraint("cost_index_bytes>=1.5e6").bound == 1.5e6
    for bad in ("latency<", "p95=50", "<50", "p95 < fifty"):
        with pytest.raises(FrontierError, match="METRIC<BOUND"):
            parse_constraint(bad)
    with pytest.raises(FrontierError, match="not among the columns"):
        best_under(POINTS, "ndcg", [parse_constraint("x<1")])
